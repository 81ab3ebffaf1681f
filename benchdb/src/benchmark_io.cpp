#include "floorline/benchdb/benchmark_io.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "database_impl.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/common/benchmark_error.hpp"
#include "floorline/common/input_file.hpp"
#include "floorline/common/statistics.hpp"
#include "floorline/model_processor/layer.hpp"
#include "schema_internal.hpp"

namespace floorline::benchdb {

void fill_statistics(MeasurementRow& m, std::vector<double> us) {
  if (us.empty()) return;
  const Summary s = summarize(std::move(us));
  m.repetitions = static_cast<int64_t>(s.n);
  m.min_us = s.min;
  m.median_us = s.median;
  m.mean_us = s.mean;
  if (s.n >= 2) {
    m.stddev_us = s.stddev;
    if (s.mean > 0) m.cv = s.stddev / s.mean;
  }
}

void fill_status(MeasurementRow& m, const Error& error) {
  if (error.code == Disposition::kPassed || error.code == Disposition::kNotVerifiable) {
    // Neither ends a case in the database: a case that cannot be verified is still timed, so an
    // error coded so that reaches a row is a failure that keeps its reason.
    m.status = Disposition::kFailed;
    m.reason = benchmark_error_text(error);
    return;
  }
  m.status = error.code;
  m.reason = error.message;
}

void fill_passed(MeasurementRow& m, std::vector<double> per_call_us) {
  m.status = Disposition::kPassed;
  fill_statistics(m, std::move(per_call_us));
}

void fill_status_from_error(MeasurementRow& m, const std::string& msg) {
  fill_status(m, error_from_benchmark_text(msg));
}

namespace {

double to_us(double t, benchmark::TimeUnit unit) {
  switch (unit) {
    case benchmark::kNanosecond:
      return t / 1e3;
    case benchmark::kMicrosecond:
      return t;
    case benchmark::kMillisecond:
      return t * 1e3;
    case benchmark::kSecond:
      return t * 1e6;
  }
  return t;
}

double unit_to_us(const std::string& unit) {
  if (unit == "ns") return 1e-3;
  if (unit == "ms") return 1e3;
  if (unit == "s") return 1e6;
  return 1.0;  // "us"
}

// Moves the known counters into columns and the rest into `extra`.
void apply_counters(MeasurementRow& m, const std::map<std::string, double>& counters) {
  nlohmann::json extra = nlohmann::json::object();
  for (const auto& [name, value] : counters) {
    if (name == "workspace_bytes")
      m.workspace_bytes = static_cast<int64_t>(value);
    else if (name == "is_default")
      m.is_default = value != 0 ? 1 : 0;
    else if (name == "throttled")
      m.throttled = value != 0 ? 1 : 0;
    else
      extra[name] = value;
  }
  if (!extra.empty()) m.extra = extra.dump();
}

}  // namespace

MeasurementRow measurement_from_runs(const std::vector<const benchmark::BenchmarkReporter::Run*>& reps,
                                     std::vector<double>* per_call_us) {
  MeasurementRow m;
  std::vector<double> us;
  std::map<std::string, double> counters;
  std::string error;
  for (const auto* r : reps) {
    if (r->error_occurred) {
      error = r->error_message;
      continue;
    }
    m.iterations += r->iterations;
    us.push_back(to_us(r->GetAdjustedRealTime(), r->time_unit));
    for (const auto& [k, c] : r->counters) counters[k] = c.value;
  }
  if (!error.empty() || us.empty()) {
    fill_status_from_error(m, error);
    us.clear();
  } else {
    if (per_call_us) *per_call_us = us;
    fill_passed(m, std::move(us));
  }
  apply_counters(m, counters);
  return m;
}

MeasurementRow measurement_from_calls(std::vector<double> per_call_us, int64_t iterations,
                                      const std::map<std::string, double>& counters) {
  MeasurementRow m;
  m.iterations = iterations;
  fill_passed(m, std::move(per_call_us));
  apply_counters(m, counters);
  return m;
}

DatabaseReporter::DatabaseReporter(MeasurementWriter& writer,
                                   std::function<int64_t(const std::string&)> resolve)
    : writer_(writer), resolve_(std::move(resolve)) {}

bool DatabaseReporter::ReportContext(const Context&) {
  return true;
}

void DatabaseReporter::ReportRuns(const std::vector<Run>& runs) {
  // One call per benchmark with its repetitions (and, in a second call, the aggregates, which
  // are ignored: the statistics are computed here, with the minimum Google Benchmark lacks).
  std::map<std::string, std::vector<const Run*>> by_name;
  for (const auto& r : runs)
    // The case name is the function name; run_name.str() adds "/min_time:…/repeats:…".
    if (r.run_type == Run::RT_Iteration) by_name[r.run_name.function_name].push_back(&r);
  for (const auto& [name, reps] : by_name) {
    const int64_t case_id = resolve_(name);
    if (case_id == 0) {
      ++unmatched_;
      continue;
    }
    MeasurementRow m = measurement_from_runs(reps);
    m.case_id = case_id;
    if (auto st = writer_.add(std::move(m)); !st) {
      if (error_.empty()) error_ = st.error().message;
      continue;
    }
    ++stored_;
  }
}

void DatabaseReporter::Finalize() {
  if (auto st = writer_.flush(); !st && error_.empty()) error_ = st.error().message;
}

// --- JSON import ---------------------------------------------------------------------------------

namespace {

SystemRow system_from_context(const nlohmann::json& ctx) {
  SystemRow s;
  if (ctx.contains("floorline_system")) {
    nlohmann::json fs = ctx["floorline_system"];
    if (fs.is_string()) fs = nlohmann::json::parse(fs.get<std::string>(), nullptr, false);
    if (fs.is_object()) {
      for (const auto& c : systems_table().columns) {
        if (!fs.contains(c.name)) continue;
        const auto& v = fs[c.name];
        if (v.is_number_integer())
          c.set(s, SqlValue{v.get<int64_t>()});
        else if (v.is_number())
          c.set(s, SqlValue{v.get<double>()});
        else if (v.is_string())
          c.set(s, SqlValue{v.get<std::string>()});
        else if (v.is_object())
          c.set(s, SqlValue{v.dump()});  // libraries
      }
      // Folders generated before schema 4 name each library version as its own column.
      for (const auto& [k, v] : fs.items())
        if (v.is_string()) add_legacy_library(s, k, SqlValue{v.get<std::string>()});
      return s;
    }
  }
  s.device_kind = "cpu";
  s.device_name = "unknown CPU";
  s.cpu_model = "unknown CPU";
  s.cpu_cores = ctx.value("num_cpus", int64_t{0});
  s.compute_units = s.cpu_cores;
  s.clock_mhz = static_cast<int64_t>(ctx.value("mhz_per_cpu", 0.0));
  return s;
}

// Google Benchmark writes a non-finite double as a bare NaN or Infinity (its JSON reporter), which
// is not JSON: the coefficient of variation of a counter that is 0 in every repetition
// (workspace_bytes of a case with no scratchpad) is 0/0. Those tokens, outside strings, become null
// (only aggregates, which are not read, hold them).
std::string non_finite_as_null(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const size_t at = i + (c == '-' ? 1 : 0);
    bool replaced = false;
    for (const std::string_view word : {std::string_view("NaN"), std::string_view("Infinity")})
      if (text.compare(at, word.size(), word) == 0) {
        out += "null";
        i = at + word.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace

namespace {

Result<ImportSummary> import_benchmark_json_unguarded(Database& db, const std::string& path,
                                                      const WriterOptions& options) {
  FL_ASSIGN_OR_RETURN(const std::string text, read_input_file(path));
  nlohmann::json doc = nlohmann::json::parse(non_finite_as_null(text), nullptr, false);
  if (doc.is_discarded()) return make_error("{}: not valid JSON", path);
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array())
    return make_error("{}: not a Google Benchmark JSON file (no \"benchmarks\" array)", path);
  const nlohmann::json ctx = doc.value("context", nlohmann::json::object());

  ImportSummary sum;
  // Group the repetitions of each benchmark (aggregates are recomputed, so they are skipped).
  struct Entry {
    std::vector<double> us;
    int64_t iterations = 0;
    std::string error;
    std::map<std::string, double> counters;
  };
  std::map<std::string, Entry> entries;
  static const std::set<std::string> kNotCounters = {"name",
                                                     "run_name",
                                                     "run_type",
                                                     "repetitions",
                                                     "repetition_index",
                                                     "threads",
                                                     "iterations",
                                                     "real_time",
                                                     "cpu_time",
                                                     "time_unit",
                                                     "family_index",
                                                     "per_family_instance_index",
                                                     "aggregate_name",
                                                     "aggregate_unit",
                                                     "error_occurred",
                                                     "error_message",
                                                     "label"};
  for (const auto& b : doc["benchmarks"]) {
    if (!b.is_object() || b.value("run_type", std::string("iteration")) != "iteration") continue;
    const std::string name = b.value("run_name", b.value("name", std::string()));
    if (name.empty()) continue;
    Entry& e = entries[name];
    if (b.value("error_occurred", false)) {
      e.error = b.value("error_message", std::string());
      continue;
    }
    e.iterations += b.value("iterations", int64_t{0});
    e.us.push_back(b.value("real_time", 0.0) * unit_to_us(b.value("time_unit", std::string("ns"))));
    for (const auto& [k, v] : b.items())
      if (v.is_number() && !kNotCounters.count(k)) e.counters[k] = v.get<double>();
  }
  sum.benchmarks = static_cast<int64_t>(entries.size());

  FL_ASSIGN_OR_RETURN(sum.system_id, db.upsert_system(system_from_context(ctx)));
  // The run of an imported file is named by the file's content: importing it again finds the
  // same run, and every case in it already measured.
  const std::string uuid = "import-" + mp::key_hash_hex(text);
  FL_ASSIGN_OR_RETURN(auto existing, db.query("SELECT id FROM runs WHERE uuid = ?1", {uuid}));
  RunRow run;
  run.uuid = uuid;
  run.system_id = sum.system_id;
  run.host_name = ctx.value("host_name", std::string());
  run.command = "import " + path;
  run.started_at = ctx.value("date", std::string());
  run.git_revision = ctx.value("floorline_git_revision", std::string());
  std::set<int64_t> in_this_run;  // cases this file's run already stored (a re-import)
  if (existing.rows.empty()) {
    FL_ASSIGN_OR_RETURN(sum.run_id, db.begin_run(run));
  } else {
    sum.run_id = std::get<int64_t>(existing.rows[0][0]);
    FL_ASSIGN_OR_RETURN(auto done,
                        db.query("SELECT case_id FROM measurements WHERE run_id = ?1", {sum.run_id}));
    for (const auto& r : done.rows) in_this_run.insert(std::get<int64_t>(r[0]));
  }
  MeasurementWriter writer(db, sum.system_id, sum.run_id, options);
  for (auto& [name, e] : entries) {
    auto parsed = parse_case_name(name);
    // Google Benchmark appends "/min_time:0.1/repeats:5" and the like; keys never contain '/'.
    if (parsed) parsed->key = parsed->key.substr(0, parsed->key.find('/'));
    if (!parsed) {
      ++sum.skipped_names;
      continue;
    }
    LayerConfigRow lc;
    lc.key = parsed->key;
    lc.key_hash = mp::key_hash_hex(lc.key);
    lc.kind = lc.key.substr(0, lc.key.find('|'));
    lc.op_type = lc.kind;
    lc.dtype = lc.key.substr(lc.key.rfind('|') + 1);
    if (auto f = e.counters.find("flops"); f != e.counters.end()) lc.flops = static_cast<int64_t>(f->second);
    if (auto f = e.counters.find("bytes"); f != e.counters.end()) lc.bytes = static_cast<int64_t>(f->second);
    FL_ASSIGN_OR_RETURN(const int64_t config_id, db.upsert_config(lc));
    sum.new_configs += db.impl().conn.changes();  // 1 when the upsert inserted the config
    CaseRow c;
    c.config_id = config_id;
    c.identity = *parsed;
    c.conversion = parse_conversion(c.identity.layout);  // the cases it feeds are not in a name
    FL_ASSIGN_OR_RETURN(const int64_t case_id, db.upsert_case(c));
    if (in_this_run.count(case_id)) {
      ++sum.already_measured;
      continue;
    }
    MeasurementRow m;
    m.case_id = case_id;
    m.iterations = e.iterations;
    if (!e.error.empty() || e.us.empty()) {
      fill_status_from_error(m, e.error);
    } else {
      fill_passed(m, e.us);
    }
    apply_counters(m, e.counters);
    FL_TRY(writer.add(std::move(m)));
  }
  FL_TRY(writer.flush());
  sum.stored = writer.committed();
  sum.already_measured += writer.skipped_existing();
  FL_TRY(db.finish_run(sum.run_id, "finished"));
  return sum;
}

}  // namespace

// A JSON value of an unexpected type (a string where a number belongs) throws inside nlohmann::json:
// it becomes an error naming the file, not an exception out of the command.
Result<ImportSummary> import_benchmark_json(Database& db, const std::string& path,
                                            const WriterOptions& options) {
  try {
    return import_benchmark_json_unguarded(db, path, options);
  } catch (const nlohmann::json::exception& e) {
    return make_error("{}: unexpected content: {}", path, e.what());
  }
}

}  // namespace floorline::benchdb
