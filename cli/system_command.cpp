// floorline system: host facts, each backend the registry knows (its plugin loaded, or why not; its
// availability and system row), the auto choice.
#include "system_command.hpp"

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/common/isa.hpp"
#include "floorline/generator/backend.hpp"
#include "validate.hpp"

namespace floorline::cli {
namespace {

struct SystemCmd {
  std::string format = "table";
  std::string db;
};

// A backend's facts as it would record them in its system row.
nlohmann::json backend_json(const gen::Backend& b) {
  benchdb::SystemRow row = benchdb::capture_host_system(1);
  b.describe(row);
  const Status st = b.available();
  nlohmann::json j = {{"backend", b.name()}, {"device_kind", b.device_kind()}, {"available", st.ok()}};
  if (!st) j["why_not"] = st.error().message;
  // Loaded but unavailable (no driver, no GPU) still has a plugin: say which file answered.
  if (auto path = gen::plugin_path(b); path) j["plugin"] = *path;
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  auto put_int = [&](const char* key, int64_t v) {
    if (v > 0) j[key] = v;
  };
  if (b.device_kind() == "gpu") {
    if (st) {
      put("device", row.device_name);
      put("device_uuid", b.device_uuid());
      put("compute_capability", row.compute_capability);
      put_int("sm_count", row.compute_units);
      put_int("clock_mhz", row.clock_mhz);
      put_int("memory_bytes", row.memory_bytes);
      put_int("memory_clock_mhz", row.memory_clock_mhz);
      put_int("memory_bus_bits", row.memory_bus_bits);
      put("driver", row.driver_version);
    }
  } else {
    put("device", row.cpu_model);
    put_int("cores", row.cpu_cores);
    put("cpu_flags", row.cpu_flags);
  }
  // Library versions, under the names the backend gives them ("cudnn", "onednn"...).
  for (const auto& [library, version] : row.libraries) put(library.c_str(), version);
  return j;
}

int run_system(const SystemCmd& o) {
  const benchdb::SystemRow host = benchdb::capture_host_system(1);
  nlohmann::json j;
  j["host"] = {{"name", benchdb::host_name()},       {"cpu", host.cpu_model}, {"cores", host.cpu_cores},
               {"memory_bytes", host.memory_bytes},  {"os", host.os},         {"compiler", host.compiler},
               {"floorline", host.floorline_version}};
  // The ISA cap (--isa, FLOORLINE_MAX_CPU_ISA): "" for none, else the system is that capped one.
  j["host"]["isa"] = host.isa;
  j["host"]["cpu_isa"] = std::string(isa_name(cpu_isa()));
  j["backends"] = nlohmann::json::array();
  for (const auto& b : gen::backends()) j["backends"].push_back(backend_json(*b));
  if (auto choice = gen::choose_backend(); choice)
    j["auto"] = choice->why;
  else
    j["auto"] = choice.error().message;
  if (!o.db.empty()) {
    benchdb::OpenOptions opts;
    opts.read_only = true;
    auto db = benchdb::Database::open(o.db, opts);
    if (!db) {
      std::fprintf(stderr, "floorline system: %s\n", db.error().message.c_str());
      return 2;
    }
    auto peaks = db->query(
        "SELECT s.id, s.device_name, p.peak || CASE WHEN p.math_mode = 'memory' THEN ' (memory)' ELSE '' "
        "END, "
        "p.dtype, p.value_per_s, p.method FROM system_peaks p "
        "JOIN systems s ON s.id = p.system_id ORDER BY s.id, p.peak, p.dtype");
    if (!peaks) {
      std::fprintf(stderr, "floorline system: %s\n", peaks.error().message.c_str());
      return 2;
    }
    j["peaks"] = nlohmann::json::array();
    for (const auto& r : peaks->rows)
      j["peaks"].push_back({{"system", std::get<int64_t>(r[0])},
                            {"device", std::get<std::string>(r[1])},
                            {"peak", std::get<std::string>(r[2])},
                            {"dtype", std::get<std::string>(r[3])},
                            {"value_per_s", std::get<double>(r[4])},
                            {"method", std::get<std::string>(r[5])}});
  }
  if (o.format == "json") {
    std::printf("%s\n", j.dump(1).c_str());
    return 0;
  }
  std::printf("host      %s: %s, %lld cores, %.1f GiB, %s\n", benchdb::host_name().c_str(),
              host.cpu_model.c_str(), static_cast<long long>(host.cpu_cores),
              static_cast<double>(host.memory_bytes) / (1 << 30), host.os.c_str());
  const std::string isa = host.isa.empty()
                              ? fmt::format("{} (no cap)", isa_name(cpu_isa()))
                              : fmt::format("capped at {} (the CPU has {})", host.isa, isa_name(cpu_isa()));
  std::printf("isa       %s\n", isa.c_str());
  for (const auto& b : j["backends"]) {
    std::string facts;
    for (const auto& [k, v] : b.items()) {
      if (k == "backend" || k == "device_kind" || k == "available" || k == "why_not" || k == "cpu_flags")
        continue;
      facts += fmt::format("{}{}={}", facts.empty() ? "" : ", ", k,
                           v.is_string() ? v.get<std::string>() : v.dump());
    }
    std::printf("%-9s %s: %s\n", b["backend"].get<std::string>().c_str(),
                b["device_kind"].get<std::string>().c_str(),
                b["available"].get<bool>() ? "available" : b["why_not"].get<std::string>().c_str());
    if (!facts.empty()) std::printf("          %s\n", facts.c_str());
  }
  std::printf("auto      %s\n", j["auto"].get<std::string>().c_str());
  if (j.contains("peaks"))
    for (const auto& p : j["peaks"])
      std::printf("peak      system %lld (%s) %s %s: %.1f G/s  [%s]\n",
                  static_cast<long long>(p["system"].get<int64_t>()), p["device"].get<std::string>().c_str(),
                  p["peak"].get<std::string>().c_str(), p["dtype"].get<std::string>().c_str(),
                  p["value_per_s"].get<double>() / 1e9, p["method"].get<std::string>().c_str());
  return 0;
}

}  // namespace

void add_system_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SystemCmd>();
  auto* s = app.add_subcommand(
      "system", "Devices, backends (and why one cannot run), library versions, measured peaks");
  s->add_option("--format", o->format, "table or json")->check(CLI::IsMember({"table", "json"}));
  s->add_option("--db", o->db, "Also list the roofline peaks measured into this results database")
      ->check(CLI::ExistingFile);
  add_isa_option(s, "The system the CPU libraries make when capped at this ISA (bench/run --isa)");
  s->callback([o, &exit_code] { exit_code = run_system(*o); });
}

}  // namespace floorline::cli
