#include "floorline/benchdb/schema.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/model_processor/layer.hpp"
#include "schema_internal.hpp"

namespace floorline::benchdb {

namespace {
constexpr const char* kJson = "CHECK ({0} IS NULL OR json_valid({0}))";

// JSON columns hold objects where they are added to an older table: its rows get an empty one.
template <class Row, class M>
Column<Row> json_col(const std::string& name, M Row::*member, int since = 1, bool identity = false) {
  Column<Row> c = col(name, member, fmt::format(fmt::runtime(kJson), name), since, identity);
  c.added_default = "'{}'";
  return c;
}

// A text column of one part of CaseRow::conversion: '' when the case is no conversion; a
// non-empty value makes it one.
Column<CaseRow> conversion_col(std::string name, std::string LayoutConversion::*part) {
  Column<CaseRow> c;
  c.name = std::move(name);
  c.type = SqlType::kText;
  c.nullable = false;
  c.since = 8;
  c.identity = false;
  c.get = [part](const CaseRow& r) -> SqlValue {
    return r.conversion ? (*r.conversion).*part : std::string();
  };
  c.set = [part](CaseRow& r, const SqlValue& v) {
    std::string text = value_text(v);
    if (text.empty()) return;
    if (!r.conversion) r.conversion.emplace();
    (*r.conversion).*part = std::move(text);
  };
  return c;
}
}  // namespace

const TableDef<SystemRow>& systems_table() {
  static const TableDef<SystemRow> t = [] {
    using R = SystemRow;
    TableDef<R> d;
    d.name = "systems";
    auto id = [](std::string n, auto m) { return col(std::move(n), m, "", 1, true); };
    d.columns = {
        col("fingerprint", &R::fingerprint, "UNIQUE"),
        col("device_kind", &R::device_kind, "CHECK (device_kind IN ('cpu', 'gpu'))", 1, true),
        id("device_name", &R::device_name),
        id("compute_capability", &R::compute_capability),
        id("compute_units", &R::compute_units),
        id("clock_mhz", &R::clock_mhz),
        id("memory_bytes", &R::memory_bytes),
        id("memory_clock_mhz", &R::memory_clock_mhz),
        id("memory_bus_bits", &R::memory_bus_bits),
        id("driver_version", &R::driver_version),
        id("cpu_model", &R::cpu_model),
        id("cpu_flags", &R::cpu_flags),
        id("cpu_cores", &R::cpu_cores),
        id("threads", &R::threads),
        id("os", &R::os),
        id("compiler", &R::compiler),
        id("floorline_version", &R::floorline_version),
        col("created_at", &R::created_at),
        // Last, where ALTER TABLE puts it in an upgraded file: both files list the same columns.
        json_col("libraries", &R::libraries, 4, true),
        col("isa", &R::isa, "", 9, true),
    };
    for (const auto& [column, library] : kLegacyLibraryColumns)
      d.retired.push_back({std::string(column), SqlType::kText, false, "", 1, 4});
    return d;
  }();
  return t;
}

const TableDef<RunRow>& runs_table() {
  static const TableDef<RunRow> t = [] {
    using R = RunRow;
    TableDef<R> d;
    d.name = "runs";
    d.columns = {
        col("uuid", &R::uuid, "UNIQUE"),
        col("system_id", &R::system_id, "REFERENCES systems (id)"),
        col("host_name", &R::host_name),
        col("device_uuid", &R::device_uuid),
        col("git_revision", &R::git_revision),
        col("command", &R::command),
        col("started_at", &R::started_at),
        col("finished_at", &R::finished_at),
        col("status", &R::status, kRunStatusCheck),
        json_col("options", &R::options),
        col("pid", &R::pid, "", 5),
        col("boot_id", &R::boot_id, "", 5),
        col("pid_start", &R::pid_start, "", 5),
    };
    d.indexes = {{"CREATE INDEX runs_system ON runs (system_id)", 1}};
    return d;
  }();
  return t;
}

const TableDef<ModelRow>& models_table() {
  static const TableDef<ModelRow> t = [] {
    using R = ModelRow;
    TableDef<R> d;
    d.name = "models";
    d.columns = {
        col("name", &R::name),   col("fingerprint", &R::fingerprint),
        col("path", &R::path),   col("ir_version", &R::ir_version),
        col("opset", &R::opset), col("node_count", &R::node_count),
    };
    d.constraints = {"UNIQUE (name, fingerprint)"};
    return d;
  }();
  return t;
}

const TableDef<LayerConfigRow>& layer_configs_table() {
  static const TableDef<LayerConfigRow> t = [] {
    using R = LayerConfigRow;
    TableDef<R> d;
    d.name = "layer_configs";
    d.columns = {
        col("key", &R::key, "UNIQUE"), col("key_hash", &R::key_hash), col("kind", &R::kind),
        col("op_type", &R::op_type),   col("dtype", &R::dtype),       json_col("params", &R::params),
        col("flops", &R::flops),       col("bytes", &R::bytes),
    };
    d.indexes = {{"CREATE INDEX layer_configs_kind ON layer_configs (kind)", 1}};
    return d;
  }();
  return t;
}

const TableDef<ModelLayerRow>& model_layers_table() {
  static const TableDef<ModelLayerRow> t = [] {
    using R = ModelLayerRow;
    TableDef<R> d;
    d.name = "model_layers";
    d.columns = {
        col("model_id", &R::model_id, "REFERENCES models (id)"),
        col("batch", &R::batch, "CHECK (batch > 0)"),
        col("node_index", &R::node_index),
        col("node_name", &R::node_name),
        col("op_type", &R::op_type),
        col("cost_class", &R::cost_class,
            "CHECK (cost_class IN ('compute', 'view', 'host', 'control', 'unsupported'))"),
        col("config_id", &R::config_id, "REFERENCES layer_configs (id)"),
        json_col("preds", &R::preds),
        col("subgraph", &R::subgraph),
    };
    d.constraints = {"UNIQUE (model_id, batch, node_index)"};
    d.indexes = {{"CREATE INDEX model_layers_config ON model_layers (config_id)", 1}};
    return d;
  }();
  return t;
}

const TableDef<CaseRow>& cases_table() {
  static const TableDef<CaseRow> t = [] {
    using R = CaseRow;
    TableDef<R> d;
    d.name = "cases";
    d.columns = {
        col("uid", &R::uid),
        col("config_id", &R::config_id, "REFERENCES layer_configs (id)"),
        col("backend", &R::identity, &CaseId::backend),
        col("algorithm", &R::identity, &CaseId::algorithm),
        col("dtype", &R::identity, &CaseId::dtype),
        col("math_mode", &R::identity, &CaseId::math_mode),
        col("layout", &R::identity, &CaseId::layout),
        col("fusion", &R::identity, &CaseId::fusion),
        json_col("params", &R::params),
        col("name", &R::name, "", 4),
        conversion_col("conversion_tensor", &LayoutConversion::tensor),
        conversion_col("conversion_from", &LayoutConversion::from),
        conversion_col("conversion_to", &LayoutConversion::to),
        col("feeds_algorithm", &R::feeds, &CaseFeeds::algorithm, "", 8),
        col("feeds_layout", &R::feeds, &CaseFeeds::layout, "", 8),
    };
    d.constraints = {"UNIQUE (config_id, backend, algorithm, dtype, math_mode, layout, fusion)"};
    d.indexes = {{"CREATE INDEX cases_uid ON cases (uid)", 1}};
    return d;
  }();
  return t;
}

const TableDef<MeasurementRow>& measurements_table() {
  static const TableDef<MeasurementRow> t = [] {
    using R = MeasurementRow;
    TableDef<R> d;
    d.name = "measurements";
    // Rows from before v7 were timed in one pass on one placement.
    auto one = [](Column<R> c) {
      c.added_default = "1";
      return c;
    };
    d.columns = {
        col("case_id", &R::case_id, "REFERENCES cases (id)"),
        col("system_id", &R::system_id, "REFERENCES systems (id)"),
        col("run_id", &R::run_id, "REFERENCES runs (id)"),
        col("status", &R::status, "CHECK (status IN ('passed', 'skipped', 'unsupported', 'failed'))"),
        col("reason", &R::reason),
        col("is_default", &R::is_default, "CHECK (is_default IN (0, 1))"),
        col("iterations", &R::iterations),
        col("repetitions", &R::repetitions),
        col("min_us", &R::min_us),
        col("median_us", &R::median_us),
        col("mean_us", &R::mean_us),
        col("stddev_us", &R::stddev_us),
        col("cv", &R::cv),
        col("workspace_bytes", &R::workspace_bytes),
        col("measured_at", &R::measured_at),
        col("superseded", &R::superseded, "CHECK (superseded IN (0, 1))"),
        json_col("extra", &R::extra),
        col("throttled", &R::throttled, "CHECK (throttled IN (0, 1))", 2),
        one(col("passes", &R::passes, "CHECK (passes >= 1)", 7)),
        one(col("placements", &R::placements, "CHECK (placements >= 1)", 7)),
        col("slowed", &R::slowed, "CHECK (slowed >= 0)", 7),
        col("noisy", &R::noisy, "CHECK (noisy IN (0, 1))", 7),
        json_col("samples_us", &R::samples_us, 7),
    };
    // A case has at most one current measurement per system (older ones are kept, marked
    // superseded); the index is also what resume looks up. It is the only index on the table:
    // each further one costs about a tenth of the insert rate.
    d.indexes = {
        {"CREATE UNIQUE INDEX measurements_current ON measurements (system_id, case_id) "
         "WHERE superseded = 0",
         1}};
    return d;
  }();
  return t;
}

const TableDef<BestMeasurementRow>& best_measurements_table() {
  static const TableDef<BestMeasurementRow> t = [] {
    using R = BestMeasurementRow;
    TableDef<R> d;
    d.name = "best_measurements";
    d.columns = {
        // No foreign keys: the rows are derived from measurements by the triggers alone, and
        // the checks would cost a third of the insert rate.
        col("config_id", &R::config_id),  col("system_id", &R::system_id),
        col("dtype", &R::dtype),          col("math_mode", &R::math_mode),
        col("fusion", &R::fusion),        col("measurement_id", &R::measurement_id),
        col("case_id", &R::case_id),      col("median_us", &R::median_us),
        col("min_us", &R::min_us, "", 7),
    };
    d.constraints = {"UNIQUE (system_id, config_id, dtype, math_mode, fusion)"};
    return d;
  }();
  return t;
}

const TableDef<FrameworkLatencyRow>& framework_latencies_table() {
  static const TableDef<FrameworkLatencyRow> t = [] {
    using R = FrameworkLatencyRow;
    TableDef<R> d;
    d.name = "framework_latencies";
    d.columns = {
        col("model_name", &R::model_name),
        col("runtime", &R::runtime),
        col("runtime_version", &R::runtime_version),
        col("device", &R::device),
        col("batch", &R::batch, "CHECK (batch > 0)"),
        col("dtype", &R::dtype),
        col("settings", &R::settings),
        col("threads", &R::threads),
        col("median_us", &R::median_us, "CHECK (median_us > 0)"),
        col("min_us", &R::min_us),
        col("max_us", &R::max_us),
        col("stddev_us", &R::stddev_us),
        col("repetitions", &R::repetitions),
        col("measured_at", &R::measured_at),
        col("source", &R::source),
    };
    d.constraints = {
        "UNIQUE (model_name, runtime, runtime_version, device, batch, dtype, settings, threads)"};
    return d;
  }();
  return t;
}

const TableDef<SystemPeakRow>& system_peaks_table() {
  static const TableDef<SystemPeakRow> t = [] {
    using R = SystemPeakRow;
    TableDef<R> d;
    d.name = "system_peaks";
    d.since = 2;
    d.columns = {
        col("system_id", &R::system_id, "REFERENCES systems (id)", 2),
        col("peak", &R::peak, "CHECK (peak IN ('flops', 'bytes'))", 2),
        col("dtype", &R::dtype, "", 2),
        col("math_mode", &R::math_mode, "", 2),
        col("value_per_s", &R::value_per_s, "CHECK (value_per_s > 0)", 2),
        col("method", &R::method, "", 2),
        col("measured_at", &R::measured_at, "", 2),
    };
    d.constraints = {"UNIQUE (system_id, peak, dtype, math_mode)"};
    return d;
  }();
  return t;
}

const TableDef<ReplayRow>& replays_table() {
  static const TableDef<ReplayRow> t = [] {
    using R = ReplayRow;
    TableDef<R> d;
    d.name = "replays";
    d.since = 4;
    d.columns = {
        col("system_id", &R::system_id, "REFERENCES systems (id)", 4),
        col("run_id", &R::run_id, "REFERENCES runs (id)", 4),
        col("model_name", &R::model_name, "", 4),
        col("batch", &R::batch, "CHECK (batch > 0)", 4),
        col("dtype", &R::dtype, "", 4),
        col("median_us", &R::median_us, "CHECK (median_us > 0)", 4),
        col("min_us", &R::min_us, "", 4),
        col("max_us", &R::max_us, "", 4),
        col("stddev_us", &R::stddev_us, "", 4),
        col("repetitions", &R::repetitions, "", 4),
        json_col("makeup", &R::makeup, 4),
        col("measured_at", &R::measured_at, "", 4),
    };
    d.constraints = {"UNIQUE (system_id, model_name, batch, dtype)"};
    return d;
  }();
  return t;
}

const TableDef<FrameworkLayerTimeRow>& framework_layer_times_table() {
  static const TableDef<FrameworkLayerTimeRow> t = [] {
    using R = FrameworkLayerTimeRow;
    TableDef<R> d;
    d.name = "framework_layer_times";
    d.since = 6;
    d.columns = {
        col("model_name", &R::model_name, "", 6),
        col("runtime", &R::runtime, "", 6),
        col("runtime_version", &R::runtime_version, "", 6),
        col("device", &R::device, "", 6),
        col("batch", &R::batch, "CHECK (batch > 0)", 6),
        col("dtype", &R::dtype, "", 6),
        col("settings", &R::settings, "", 6),
        col("threads", &R::threads, "", 6),
        col("node_order", &R::node_order, "", 6),
        col("node_name", &R::node_name, "", 6),
        col("op", &R::op, "", 6),
        col("provider", &R::provider, "", 6),
        json_col("layers", &R::layers, 6),
        col("median_us", &R::median_us, "CHECK (median_us >= 0)", 6),
        col("min_us", &R::min_us, "", 6),
        col("runs", &R::runs, "", 6),
        col("measured_at", &R::measured_at, "", 6),
        col("source", &R::source, "", 6),
    };
    d.constraints = {
        "UNIQUE (model_name, runtime, runtime_version, device, batch, dtype, settings, threads, node_name)"};
    return d;
  }();
  return t;
}

const TableDef<CacheTimeRow>& cache_times_table() {
  static const TableDef<CacheTimeRow> t = [] {
    using R = CacheTimeRow;
    TableDef<R> d;
    d.name = "cache_times";
    d.since = 10;
    d.columns = {
        col("system_id", &R::system_id, "REFERENCES systems (id)", 10),
        col("case_id", &R::case_id, "REFERENCES cases (id)", 10),
        col("state", &R::state, "CHECK (state IN ('warm', 'memory', 'llc'))", 10),
        col("median_us", &R::median_us, "CHECK (median_us > 0)", 10),
        col("min_us", &R::min_us, "CHECK (min_us > 0)", 10),
        col("samples", &R::samples, "CHECK (samples > 0)", 10),
        col("flush_bytes", &R::flush_bytes, "", 10),
        col("measured_at", &R::measured_at, "", 10),
        col("dst_memory_min_us", &R::dst_memory_min_us, "CHECK (dst_memory_min_us > 0)", 11),
        col("dirty_memory_min_us", &R::dirty_memory_min_us, "CHECK (dirty_memory_min_us > 0)", 12),
    };
    d.constraints = {"UNIQUE (system_id, case_id, state)"};
    return d;
  }();
  return t;
}

// Identity columns from this version on join the fingerprint's text only where set (schema.hpp).
constexpr int kFingerprintAddsWhenSet = 9;

std::string system_fingerprint(const SystemRow& s) {
  std::string text;
  for (const auto& c : systems_table().columns) {
    if (!c.identity) continue;
    const std::string value = value_text(c.get(s));
    if (c.since >= kFingerprintAddsWhenSet && value.empty()) continue;  // as before the column
    text += c.name;
    text += '=';
    text += value;
    text += '\n';
  }
  return mp::key_hash_hex(text);
}

std::string host_fingerprint(SystemRow s) {
  s.threads = 0;
  return system_fingerprint(s);
}

std::string string_map_json(const std::map<std::string, std::string>& m) {
  nlohmann::json j = nlohmann::json::object();  // keys in order, as in std::map
  for (const auto& [k, v] : m)
    if (!v.empty()) j[k] = v;
  return j.dump();
}

std::map<std::string, std::string> parse_string_map(std::string_view json) {
  std::map<std::string, std::string> m;
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return m;
  for (const auto& [k, v] : j.items())
    if (v.is_string()) m[k] = v.get<std::string>();
  return m;
}

void add_legacy_library(SystemRow& s, std::string_view column, const SqlValue& value) {
  for (const auto& [legacy, library] : kLegacyLibraryColumns)
    if (column == legacy)
      if (const std::string v = value_text(value); !v.empty()) s.libraries[std::string(library)] = v;
}

std::optional<ReplayRow> replay_from_legacy(const FrameworkLatencyRow& f) {
  constexpr std::string_view kPrefix = "system=";
  if (f.runtime != kLegacyReplayRuntime || f.settings.rfind(kPrefix, 0) != 0) return std::nullopt;
  ReplayRow r;
  try {
    size_t used = 0;
    r.system_id = std::stoll(f.settings.substr(kPrefix.size()), &used);
    if (used != f.settings.size() - kPrefix.size()) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  r.model_name = f.model_name;
  r.batch = f.batch;
  r.dtype = f.dtype;
  r.median_us = f.median_us;
  r.min_us = f.min_us;
  r.max_us = f.max_us;
  r.stddev_us = f.stddev_us;
  r.repetitions = f.repetitions;
  r.measured_at = f.measured_at;
  // The make-up was JSON when written by Floorline; anything else is kept as a JSON string.
  const auto j = nlohmann::json::parse(f.source, nullptr, false);
  r.makeup = j.is_discarded() ? nlohmann::json(f.source).dump() : j.dump();
  return r;
}

void case_links_from_legacy(CaseRow& c) {
  c.conversion = parse_conversion(c.identity.layout);
  c.feeds = {};
  const auto j = nlohmann::json::parse(c.params, nullptr, false);
  if (!j.is_object()) return;
  const auto f = j.find("feeds");
  if (f == j.end() || !f->is_string()) return;
  const std::string text = f->get<std::string>();
  constexpr std::string_view kLayout = "layout:";
  if (text.rfind(kLayout, 0) == 0)
    c.feeds = {"", text.substr(kLayout.size())};
  else
    c.feeds = {text, ""};
}

// --- DDL and migrations ------------------------------------------------------------------------

namespace {

template <class Row>
TableSchema erase(const TableDef<Row>& d) {
  TableSchema t{d.name, d.since, {}, d.constraints, d.indexes};
  for (const auto& c : d.columns)
    t.columns.push_back({c.name, c.type, c.nullable, c.constraint, c.since, 0, c.added_default});
  for (const auto& c : d.retired)
    t.columns.push_back({c.name, c.type, c.nullable, c.constraint, c.since, c.until, ""});
  return t;
}

bool exists_at(const ColumnSchema& c, int version) {
  return c.since <= version && (c.until == 0 || version < c.until);
}

std::string column_ddl(const ColumnSchema& c, bool added_later) {
  std::string s = fmt::format("{} {}", c.name, sql_type_name(c.type));
  if (!c.nullable) {
    s += " NOT NULL";
    // ALTER TABLE ADD COLUMN needs a default for NOT NULL columns; rows from before get it.
    if (added_later)
      s += " DEFAULT " + (!c.added_default.empty() ? c.added_default : c.type == SqlType::kText ? "''" : "0");
  }
  if (!c.constraint.empty()) s += " " + c.constraint;
  return s;
}

}  // namespace

const std::vector<TableSchema>& all_tables() {
  static const std::vector<TableSchema> tables = {
      erase(systems_table()),
      erase(runs_table()),
      erase(models_table()),
      erase(layer_configs_table()),
      erase(model_layers_table()),
      erase(cases_table()),
      erase(measurements_table()),
      erase(best_measurements_table()),
      erase(framework_latencies_table()),
      erase(system_peaks_table()),
      erase(replays_table()),
      erase(framework_layer_times_table()),
      erase(cache_times_table()),
  };
  return tables;
}

std::vector<std::string> migration_statements(int version) {
  std::vector<std::string> out;
  for (const auto& t : all_tables()) {
    if (t.since == version) {
      std::string ddl = fmt::format("CREATE TABLE {} (\n  id INTEGER PRIMARY KEY", t.name);
      for (const auto& c : t.columns)
        if (exists_at(c, version)) ddl += ",\n  " + column_ddl(c, false);
      for (const auto& k : t.constraints) ddl += ",\n  " + k;
      ddl += "\n) STRICT";
      out.push_back(std::move(ddl));
    } else if (t.since < version) {
      for (const auto& c : t.columns)
        if (c.since == version)
          out.push_back(fmt::format("ALTER TABLE {} ADD COLUMN {}", t.name, column_ddl(c, true)));
    }
    for (const auto& ix : t.indexes)
      if (ix.since == version && t.since <= version) out.push_back(ix.sql);
  }
  return out;
}

std::vector<std::string> retirement_statements(int version) {
  std::vector<std::string> out;
  for (const auto& t : all_tables())
    for (const auto& c : t.columns)
      if (c.until == version && t.since < version)
        out.push_back(fmt::format("ALTER TABLE {} DROP COLUMN {}", t.name, c.name));
  return out;
}

const std::vector<DerivedObject>& derived_objects() {
  // Views: dropped and re-created whenever the schema is upgraded.
  static const std::vector<DerivedObject> v = {
      {"VIEW", "current_measurements", R"sql(
SELECT m.id AS measurement_id, m.system_id, s.device_name, c.config_id, lc.kind, lc.key,
       m.case_id, c.name AS case_name, c.backend, c.algorithm, c.dtype, c.math_mode, c.layout,
       c.fusion, m.status, m.reason, m.is_default, m.iterations, m.repetitions, m.min_us,
       m.median_us, m.mean_us, m.stddev_us, m.cv, m.workspace_bytes, lc.flops, lc.bytes,
       CASE WHEN m.median_us > 0 THEN lc.flops / m.median_us / 1e3 END AS gflops,
       CASE WHEN m.median_us > 0 THEN lc.bytes / m.median_us / 1e3 END AS gbytes_per_s,
       m.throttled, m.extra, m.run_id, m.measured_at, m.passes, m.placements, m.slowed, m.noisy
FROM measurements m
JOIN cases c ON c.id = m.case_id
JOIN layer_configs lc ON lc.id = c.config_id
JOIN systems s ON s.id = m.system_id
WHERE m.superseded = 0)sql"},
      {"VIEW", "best_cases", R"sql(
SELECT b.config_id, b.system_id, lc.kind, lc.key, b.dtype, b.math_mode, b.fusion, b.median_us,
       b.min_us, b.case_id, c.uid AS case_uid, c.name AS case_name, c.backend, c.algorithm, c.layout, b.measurement_id,
       CASE WHEN b.median_us > 0 THEN lc.flops / b.median_us / 1e3 END AS gflops
FROM best_measurements b
JOIN cases c ON c.id = b.case_id
JOIN layer_configs lc ON lc.id = b.config_id)sql"},
      {"VIEW", "default_cases", R"sql(
SELECT c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion, m.case_id, c.name AS case_name,
       c.backend, c.algorithm, m.status, m.median_us, m.id AS measurement_id, m.min_us
FROM measurements m
JOIN cases c ON c.id = m.case_id
JOIN layer_configs lc ON lc.id = c.config_id
WHERE m.is_default = 1 AND m.superseded = 0)sql"},
      {"VIEW", "unique_configs", R"sql(
SELECT lc.id AS config_id, lc.kind, lc.key, lc.key_hash, lc.dtype, lc.flops, lc.bytes,
       COUNT(*) AS multiplicity, COUNT(DISTINCT ml.model_id) AS models,
       group_concat(DISTINCT mo.name) AS model_names
FROM model_layers ml
JOIN layer_configs lc ON lc.id = ml.config_id
JOIN models mo ON mo.id = ml.model_id
WHERE ml.cost_class IN ('compute', 'unsupported')
GROUP BY lc.id)sql"},
      {"VIEW", "model_layer_times", R"sql(
SELECT mo.name AS model, ml.batch, ml.node_index, ml.node_name, ml.op_type, ml.cost_class,
       lc.kind, lc.key, lc.flops, lc.bytes, ml.preds, b.system_id, b.case_name AS best_case,
       b.algorithm AS best_algorithm, b.median_us AS best_us
FROM model_layers ml
JOIN models mo ON mo.id = ml.model_id
JOIN layer_configs lc ON lc.id = ml.config_id
LEFT JOIN best_cases b ON b.config_id = ml.config_id AND b.dtype = lc.dtype
                      AND b.math_mode = 'fp32' AND b.fusion = '')sql"},
      {"VIEW", "run_summary", R"sql(
SELECT r.id AS run_id, r.uuid, r.system_id, r.host_name, r.started_at, r.finished_at, r.status,
       COUNT(m.id) AS measurements,
       SUM(m.status = 'passed') AS passed, SUM(m.status = 'skipped') AS skipped,
       SUM(m.status = 'unsupported') AS unsupported, SUM(m.status = 'failed') AS failed
FROM runs r
LEFT JOIN measurements m ON m.run_id = r.id
GROUP BY r.id)sql"},
  };
  return v;
}

// A config's best case is the one with the lowest min_us (the per-case time S takes; a row without
// one, imported, competes with its median); SQLite takes the bare columns from the row MIN() picks.
// Both rebuilds leave out layout-conversion cases: conversion_tensor = '' is !is_conversion() in SQL.
const char* const kRebuildBest = R"sql(
INSERT INTO best_measurements (config_id, system_id, dtype, math_mode, fusion, measurement_id, case_id, median_us,
                               min_us)
SELECT c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion, m.id, m.case_id, m.median_us,
       MIN(coalesce(m.min_us, m.median_us))
FROM measurements m JOIN cases c ON c.id = m.case_id
WHERE m.status = 'passed' AND m.superseded = 0 AND m.median_us IS NOT NULL AND c.conversion_tensor = ''
GROUP BY c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion)sql";

const char* const kDeleteBestGroup = R"sql(
DELETE FROM best_measurements WHERE system_id = ?1
  AND (config_id, dtype, math_mode, fusion) = (SELECT config_id, dtype, math_mode, fusion FROM cases WHERE id = ?2))sql";

const char* const kRebuildBestGroup = R"sql(
INSERT INTO best_measurements (config_id, system_id, dtype, math_mode, fusion, measurement_id, case_id, median_us,
                               min_us)
SELECT c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion, m.id, m.case_id, m.median_us,
       MIN(coalesce(m.min_us, m.median_us))
FROM measurements m JOIN cases c ON c.id = m.case_id JOIN cases o ON o.id = ?2
WHERE m.system_id = ?1 AND m.superseded = 0 AND m.status = 'passed' AND m.median_us IS NOT NULL
  AND c.conversion_tensor = ''
  AND c.config_id = o.config_id AND c.dtype = o.dtype AND c.math_mode = o.math_mode AND c.fusion = o.fusion
GROUP BY c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion)sql";

const char* const kOfferBest = R"sql(
INSERT INTO best_measurements (config_id, system_id, dtype, math_mode, fusion, measurement_id, case_id, median_us,
                               min_us)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT (system_id, config_id, dtype, math_mode, fusion) DO UPDATE SET
  measurement_id = excluded.measurement_id, case_id = excluded.case_id, median_us = excluded.median_us,
  min_us = excluded.min_us
WHERE excluded.min_us < coalesce(best_measurements.min_us, best_measurements.median_us))sql";

}  // namespace floorline::benchdb
