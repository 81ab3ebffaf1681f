#include "reference_stage.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/framework_io.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/common/input_file.hpp"
#include "floorline/common/isa.hpp"
#include "floorline/model_processor/materialize.hpp"
#include "floorline/model_processor/runtime_profile.hpp"

#ifndef FLOORLINE_SOURCE_DIR
#define FLOORLINE_SOURCE_DIR "."
#endif

extern char** environ;

namespace floorline::cli {

namespace fs = std::filesystem;
namespace bd = benchdb;

fs::path reference_dir() {
  if (const char* env = std::getenv("FLOORLINE_REFERENCE_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path here = "reference/onnxruntime";
  if (fs::exists(here / "measure.js", ec)) return here;
  return fs::path(FLOORLINE_SOURCE_DIR) / "reference/onnxruntime";
}

namespace {

// `name` found on PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p = path;
  for (size_t start = 0; start <= p.size();) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

std::string read_text(const fs::path& p) {
  auto text = read_input_file(p.string());
  return text ? std::move(*text) : std::string();
}

}  // namespace

std::string reference_version(const fs::path& dir) {
  const auto j =
      nlohmann::json::parse(read_text(dir / "node_modules/onnxruntime-node/package.json"), nullptr, false);
  return j.is_object() ? j.value("version", "") : "";
}

std::string reference_missing(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "measure.js", ec)) return fmt::format("{} has no measure.js", dir.string());
  if (!on_path("node")) return "node (Node.js) is not on PATH";
  if (reference_version(dir).empty())
    return fmt::format("onnxruntime-node is not installed in {}", dir.string());
  return "";
}

Result<ProfileImportSummary> import_framework_profiles(bd::Database& db, const std::string& path) {
  FL_ASSIGN_OR_RETURN(const std::string text, read_input_file(path));
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error("{}: not valid JSON", path);
  if (!doc.is_object() || !doc.contains("profiles") || !doc["profiles"].is_array())
    return make_error(
        "{}: expected an object with a \"profiles\" array (reference/onnxruntime/measure.js output)", path);
  const fs::path base = fs::path(path).parent_path();
  auto resolve = [&](const std::string& p) { return fs::path(p).is_absolute() ? fs::path(p) : base / p; };
  ProfileImportSummary sum;
  std::vector<std::vector<bd::FrameworkLayerTimeRow>> all;
  int entry = 0;
  for (const auto& e : doc["profiles"]) {
    ++entry;
    const auto ctx = fmt::format("{}: profile {}", path, entry);
    if (!e.is_object() || !e.contains("profile") || !e.contains("model") || !e.contains("model_name"))
      return make_error("{}: needs model_name, profile and model", ctx);
    std::optional<fs::path> graph;
    if (e.contains("graph") && e["graph"].is_string()) graph = resolve(e["graph"].get<std::string>());
    auto prof = mp::read_onnxruntime_profile(resolve(e["profile"].get<std::string>()),
                                             resolve(e["model"].get<std::string>()), graph);
    if (!prof) return prof.error().with_context(ctx);
    std::vector<bd::FrameworkLayerTimeRow> rows;
    const std::string measured_at = e.value("measured_at", bd::utc_now());
    int64_t order = 0;
    for (const auto& n : prof->nodes) {
      bd::FrameworkLayerTimeRow r;
      r.model_name = e["model_name"].get<std::string>();
      r.runtime = e.value("runtime", "onnxruntime");
      r.runtime_version = e.value("runtime_version", "");
      r.device = e.value("device", "cpu");
      r.batch = e.value("batch", int64_t{1});
      r.dtype = e.value("dtype", "f32");
      r.settings = e.value("settings", "");
      r.threads = e.value("threads", int64_t{0});
      r.node_order = order++;
      r.node_name = n.node;
      r.op = n.op;
      r.provider = n.provider;
      r.layers = nlohmann::json(n.layers).dump();
      r.median_us = n.median_us;
      r.min_us = n.min_us;
      r.runs = n.runs;
      r.measured_at = measured_at;
      r.source = resolve(e["profile"].get<std::string>()).string();
      sum.mapped_layers += static_cast<int64_t>(n.layers.size());
      rows.push_back(std::move(r));
    }
    sum.not_run_layers += static_cast<int64_t>(prof->not_run.size());
    all.push_back(std::move(rows));
    ++sum.profiles;
  }
  FL_TRY(db.transaction([&]() -> Status {
    for (const auto& rows : all) {
      FL_ASSIGN_OR_RETURN(const int64_t n, db.replace_framework_layer_times(rows));
      sum.rows += n;
    }
    return {};
  }));
  return sum;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {

// Runs argv (argv[0] looked up on PATH) with stdout and stderr passed through; its exit status.
int spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Models whose ONNX Runtime latency at every batch and setting is already in the database.
std::set<std::string> measured_before(bd::Database& db, const std::string& version, int threads,
                                      const std::string& device, const std::vector<int64_t>& batches,
                                      const std::vector<std::string>& settings) {
  std::set<std::string> done;
  // Distinct (batch, setting) pairs per model: a row of unknown host ("cpu", from before the rows
  // named it) and this host's own may both be there.
  std::map<std::string, std::set<std::pair<int64_t, std::string>>> count;
  (void)db.for_each(
      "SELECT model_name, batch, settings FROM framework_latencies WHERE runtime = 'onnxruntime' AND "
      "runtime_version = ?1 AND threads = ?2 AND device IN ('cpu', ?3)",
      {version, static_cast<int64_t>(threads), device},
      [&](const std::vector<std::string>&, const std::vector<bd::SqlValue>& v) {
        const int64_t b = std::get<int64_t>(v[1]);
        const std::string s = bd::value_text(v[2]);
        for (const auto& want : settings)
          if (s == "graph_optimization=" + want &&
              std::find(batches.begin(), batches.end(), b) != batches.end())
            count[bd::value_text(v[0])].insert({b, s});
        return Status{};
      });
  for (const auto& [m, pairs] : count)
    if (pairs.size() >= batches.size() * settings.size()) done.insert(m);
  return done;
}

}  // namespace

ReferenceStageResult run_reference_stage(bd::Database& db, const ReferenceStageOptions& o) {
  ReferenceStageResult res;
  const auto t0 = std::chrono::steady_clock::now();
  // ONNX Runtime's MLAS picks its kernels from the CPU's features: it cannot be capped, and its
  // times are not those of the capped system (S is compared with it only where it can be).
  if (const auto cap = isa_cap()) {
    std::fprintf(stderr,
                 "[ref] reference runtime not run: ONNX Runtime cannot be capped at %s=%s (it picks its "
                 "kernels from the CPU's features), so no M for this system\n",
                 kIsaCapVariable, std::string(isa_name(*cap)).c_str());
    return res;
  }
  const fs::path dir = reference_dir();
  if (const std::string why = reference_missing(dir); !why.empty()) {
    std::fprintf(stderr,
                 "[ref] reference runtime not run: %s; install it with scripts/install-deps (or `npm ci "
                 "--prefix reference/onnxruntime`) for M from ONNX Runtime\n",
                 why.c_str());
    return res;
  }
  const std::string version = reference_version(dir);
  const std::vector<std::string> settings =
      o.quick ? std::vector<std::string>{"all"} : std::vector<std::string>{"all", "disabled"};
  // The rows name this host's CPU ("cpu:MODEL"): a database merged from several machines keeps
  // each machine's latencies apart (analyzer.hpp, load_costs).
  const std::string device = "cpu:" + bd::capture_host_system(o.threads).device_name;
  const auto done = measured_before(db, version, o.threads, device, o.batches, settings);

  // 1. Weights: a copy with generated values for each model that lacks them, reused when up to date;
  // the copies are written on the hardware threads (up to 8; nothing is timed meanwhile), one model
  // each. Two models of one name would write one copy: the second is refused.
  const fs::path mat_dir = o.out / "materialized";
  struct Entry {
    fs::path model;
    fs::path file;
    bool materialize = false;
    std::string error;
  };
  std::vector<Entry> entries;
  std::set<std::string> stems;
  for (const auto& m : o.models) {
    if (!stems.insert(m.stem().string()).second) {
      std::fprintf(stderr, "[ref] %s: another model is named %s; not run\n", m.string().c_str(),
                   m.stem().string().c_str());
      ++res.failures;
      continue;
    }
    const auto known = o.scenarios.find(m);
    const bool measured = known == o.scenarios.end() || known->second.empty()
                              ? done.count(m.stem().string()) > 0
                              : std::all_of(known->second.begin(), known->second.end(),
                                            [&](const std::string& n) { return done.count(n) > 0; });
    if (measured) {
      ++res.kept;
      continue;
    }
    auto missing = mp::count_missing_tensors(m);
    if (!missing) {
      std::fprintf(stderr, "[ref] %s\n", missing.error().message.c_str());
      ++res.failures;
      continue;
    }
    Entry e{m, m, false, ""};
    if (*missing > 0) {
      e.file = mat_dir / (m.stem().string() + ".onnx");
      e.materialize = !mp::materialized_up_to_date(m, mat_dir);
    }
    entries.push_back(std::move(e));
  }
  {
    std::atomic<size_t> next{0};
    auto work = [&]() {
      for (size_t i = next++; i < entries.size(); i = next++)
        if (entries[i].materialize) try {
            if (auto mat = mp::materialize_model(entries[i].model, mat_dir); !mat)
              entries[i].error = mat.error().message;
          } catch (const std::exception& e) {  // no exception may end a worker thread (std::terminate)
            entries[i].error = fmt::format("{}: {}", entries[i].model.string(), e.what());
          }
    };
    std::vector<std::thread> workers;
    const size_t n = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
    for (size_t k = 1; k < n; ++k) workers.emplace_back(work);
    work();
    for (auto& w : workers) w.join();
  }
  std::vector<std::string> names, files;
  for (const auto& e : entries) {
    if (!e.error.empty()) {
      std::fprintf(stderr, "[ref] %s\n", e.error.c_str());
      ++res.failures;
      continue;
    }
    names.push_back(e.model.stem().string());
    files.push_back(fs::absolute(e.file).string());
  }
  if (names.empty()) {
    std::fprintf(stderr, "[ref] reference: onnxruntime %s: %lld model(s) kept from an earlier run, %.1f s\n",
                 version.c_str(), static_cast<long long>(res.kept), seconds_since(t0));
    res.seconds = seconds_since(t0);
    return res;
  }

  // 2. Measure. The main job keeps this stage short: at least 5 timed runs and 0.5 s per model,
  // batch and setting, but no more than 3 s once 3 runs are done (by hand, measure.js takes 10 runs
  // and 1 s), timed in the profiling session where a run takes 0.5 s or more (measure.js
  // --time-in-profile-above-ms: 4 runs instead of 7, the profiler's overhead well under 1% there);
  // --quick 1 run after a warm-up, both in the profiling session (--time-in-profile: one session
  // per model, not two).
  const fs::path ref_out = o.out / "reference";
  const std::string json = (ref_out / "ort_latencies.json").string();
  std::string batches;
  for (auto b : o.batches) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  std::string setting_list;
  for (const auto& s : settings) setting_list += (setting_list.empty() ? "" : ",") + s;
  std::error_code ec;
  fs::create_directories(ref_out, ec);
  std::fprintf(stderr, "[ref] reference: onnxruntime %s on %zu model(s) at batch %s, %d thread(s)\n",
               version.c_str(), names.size(), batches.c_str(), o.threads);
  // measure.js writes its file after every model, batch and setting, naming the one under way
  // ("running"): where ONNX Runtime takes the process down (a native crash, the out-of-memory
  // killer), what it measured is imported, the model it died on is left out, and the models after
  // it get a process of their own.
  for (size_t from = 0; from < names.size();) {
    fs::remove(json, ec);  // nothing of an earlier process is imported twice
    std::string joined;
    for (size_t k = from; k < names.size(); ++k) joined += (joined.empty() ? "" : ",") + names[k];
    std::vector<std::string> args = {"node",          (dir / "measure.js").string(),
                                     "--batch",       batches,
                                     "--threads",     std::to_string(o.threads),
                                     "--settings",    setting_list,
                                     "--out",         json,
                                     "--profile-dir", (ref_out / "profiles").string(),
                                     "--names",       joined,
                                     "--device",      device};
    if (o.quick) {
      for (const char* a : {"--min-runs", "1", "--min-time-ms", "0", "--time-in-profile"})
        args.emplace_back(a);
    } else {
      for (const char* a : {"--min-runs", "5", "--min-time-ms", "500", "--max-time-ms", "3000", "--warmup",
                            "1", "--profile-runs", "3", "--time-in-profile-above-ms", "500"})
        args.emplace_back(a);
    }
    for (const auto& [name, values] : o.dims)
      args.insert(args.end(), {"--dim", fmt::format("{}={}", name, fmt::join(values, ","))});
    args.insert(args.end(), files.begin() + static_cast<std::ptrdiff_t>(from), files.end());
    const int rc = spawn_and_wait(args);
    if (rc == 127 || !fs::exists(json)) {  // node could not start, or died before writing anything
      std::fprintf(stderr, "[ref] measure.js exited with status %d; M keeps what was imported before\n", rc);
      ++res.failures;
      res.seconds = seconds_since(t0);
      return res;
    }
    // 3. Import: latencies (M) and per-node profiles.
    auto lat = bd::import_framework_latencies(db, json, "json");
    if (!lat) {
      std::fprintf(stderr, "[ref] %s\n", lat.error().message.c_str());
      ++res.failures;
    } else {
      res.latencies += lat->rows;
    }
    auto prof = import_framework_profiles(db, json);
    if (!prof) {
      std::fprintf(stderr, "[ref] %s\n", prof.error().message.c_str());
      ++res.failures;
    } else {
      res.profiles += prof->profiles;
    }
    if (rc == 0) break;
    // The model it died on: "running" names its scenario (the model's name, or NAME[dims]).
    std::string running, at;
    try {
      auto text = read_input_file(json);
      const auto doc = nlohmann::json::parse(text ? *text : std::string("{}"));
      const auto& r = doc.at("running");
      running = r.at("model_name").get<std::string>();
      at = fmt::format("batch {}, {}", r.at("batch").get<int64_t>(), r.at("settings").get<std::string>());
    } catch (const std::exception&) {
    }
    size_t died = from;
    for (size_t k = from; k < names.size(); ++k)
      if (running == names[k] || running.rfind(names[k] + "[", 0) == 0) died = k;
    std::fprintf(stderr,
                 "[ref] measure.js exited with status %d while running %s (%s): no M for that model; the %zu "
                 "model(s) after it go on in a new process\n",
                 rc, names[died].c_str(), at.empty() ? "before its first measurement" : at.c_str(),
                 names.size() - died - 1);
    ++res.failures;
    from = died + 1;
  }
  res.ran = true;
  res.seconds = seconds_since(t0);
  std::fprintf(
      stderr,
      "[ref] reference: onnxruntime %s: %lld latencies, %lld profiles imported, %lld model(s) kept from an "
      "earlier run, %d failure(s), %.1f s\n",
      version.c_str(), static_cast<long long>(res.latencies), static_cast<long long>(res.profiles),
      static_cast<long long>(res.kept), res.failures, res.seconds);
  return res;
}

}  // namespace floorline::cli
