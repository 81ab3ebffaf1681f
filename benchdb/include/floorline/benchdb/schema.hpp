// floorline/benchdb/schema.hpp — the tables of a Floorline results database, one field list each.
//
// Each table is a row struct plus a TableDef: the list of its columns (name, SQL type, constraint,
// the schema version that introduced it, and the struct member it maps to). That one list drives
// the CREATE TABLE and ALTER TABLE statements (migrations), the INSERT statements, the
// fingerprint of content-matched rows, and the CSV header and JSON keys of `floorline db` output,
// so none of these can disagree (docs/DATABASE.md).
//
// Every table is STRICT and has an `id INTEGER PRIMARY KEY`. Times are microseconds (`_us`),
// sizes bytes, timestamps ISO-8601 UTC text ("2026-11-21T10:00:00Z"), JSON columns are checked
// with json_valid(). See docs/DATABASE.md for the tables, views and example queries.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "floorline/benchdb/value.hpp"
#include "floorline/common/case_id.hpp"
#include "floorline/common/disposition.hpp"

namespace floorline::benchdb {

// The schema this build writes. Version history (each step is derived from `since` below):
//   1  systems, runs, models, layer_configs, model_layers, cases, measurements,
//      best_measurements (derived), framework_latencies
//   2  system_peaks (calibrated peak FLOP/s and bytes/s per system, for the roofline bound);
//      measurements.throttled
//   3  no new columns: best_measurements leaves out layout-conversion cases (rebuilt on upgrade)
//   4  systems.libraries (one JSON object of library versions) replaces the per-library columns
//      cuda_runtime_version, cudnn_version, cublas_version, onednn_version; replays (Floorline's
//      own replays, until then stored as framework_latencies rows of runtime "floorline-replay");
//      cases.name (case_name(), stored so that views read it instead of restating the rule in SQL)
//   5  runs.pid, runs.boot_id, runs.pid_start (the writing process, to tell a run whose process
//      died from one still running); runs.status may be 'died'
//   6  framework_layer_times (a runtime's per-node profile mapped to the model's layers)
//   7  measurements.passes, placements, slowed, noisy, samples_us (the measurement method:
//      interleaved passes, buffer placements, the sentinel, the repetition means themselves);
//      best_measurements.min_us, by which a config's best case is now chosen (S takes the lowest
//      repetition mean, docs/MEASUREMENT.md); best_measurements is rebuilt on upgrade
//   8  cases.feeds_algorithm, feeds_layout (the cases a conversion feeds, until then params.feeds in
//      two text forms) and cases.conversion_tensor, conversion_from, conversion_to (the conversion
//      a case is, until then only the text of its layout); filled on upgrade from those texts, and
//      best_measurements leaves out the cases with a conversion_tensor (rebuilt on upgrade)
//   9  systems.isa (the ISA cap the CPU libraries ran under, '' for none); systems of older files
//      keep their fingerprints (system_fingerprint)
//  10  cache_times (a case timed with its weights and outputs from beyond a cache level: the
//      composed estimate E reads them)
//  11  cache_times.dst_memory_min_us (from memory, the output buffer evicted too: E charges it for
//      the share of a layer's output a pass finds beyond the private cache)
//  12  cache_times.dirty_memory_min_us (from memory with the caches full of dirty lines: E's
//      reading from memory where the row has it)
inline constexpr int kSchemaVersion = 12;
// PRAGMA application_id of a Floorline database ("FLRL"): tells our files from other SQLite files.
inline constexpr int32_t kApplicationId = 0x464c524c;

// --- rows --------------------------------------------------------------------------------------

// One hardware/software stack. Rows are matched by `fingerprint`, a hash of every identity column
// (everything below except host-specific fields, which live in `runs`): two machines with the
// same stack share one system row, and measurements from different stacks never share one.
// Library versions are one backend-neutral map, so that a new backend adds entries, not columns.
struct SystemRow {
  int64_t id = 0;
  std::string fingerprint;         // 16 hex digits, FNV-1a of the identity columns
  std::string device_kind;         // "cpu" or "gpu": the device the backends measure on
  std::string device_name;         // "NVIDIA H200", or the CPU model for CPU-only systems
  std::string compute_capability;  // "9.0" for GPUs, "" for CPUs
  int64_t compute_units = 0;       // SMs (GPU) or logical cores (CPU)
  int64_t clock_mhz = 0;           // maximum device clock
  int64_t memory_bytes = 0;        // device memory (GPU) or RAM (CPU)
  int64_t memory_clock_mhz = 0;
  int64_t memory_bus_bits = 0;
  std::string driver_version;  // "" where not applicable
  std::string cpu_model;
  std::string cpu_flags;          // the ISA extensions that matter to kernels, space-separated
  int64_t cpu_cores = 0;          // logical CPUs
  int64_t threads = 1;            // threads the CPU backend uses
  std::string os;                 // kernel release, e.g. "Linux 6.1.0-18-amd64"
  std::string compiler;           // compiler that built Floorline, e.g. "GCC 12.2.0"
  std::string floorline_version;  // "0.1.0" (the git revision is per run)
  std::string created_at;
  // (v4) Library name → version of every library the backends measure with, as each backend's
  // describe() names them: {"onednn": "2.6.3"}, {"cuda_runtime": "13.0", "cudnn": "9.19.0",
  // "cublas": "13.1.0"}. Stored as a JSON object (keys sorted); part of the identity.
  std::map<std::string, std::string> libraries;
  // (v9) The ISA cap the CPU libraries ran under (floorline/common/isa.hpp: "avx2", oneDNN's
  // names), "" for none: whatever the CPU offers. Part of the identity: an AVX-512 host measured
  // under an avx2 cap is another system than the host uncapped.
  std::string isa;
};

// One invocation of the runner (or an import). Host-specific facts live here, not in systems.
struct RunRow {
  int64_t id = 0;
  std::string uuid;  // random, matches runs across databases when merging
  int64_t system_id = 0;
  std::string host_name;
  std::string device_uuid;  // GPU UUID, "" for CPU runs
  std::string git_revision;
  std::string command;  // the command line that produced the run
  std::string started_at;
  std::optional<std::string> finished_at;  // NULL while running or when interrupted
  // running | finished | interrupted (stopped by a signal, what was measured kept) | died (its
  // process ended without finishing it: kill -9, a crash, a reboot; see Database::mark_dead_runs)
  std::string status = "running";
  std::string options = "{}";  // JSON: min_time, repetitions, threads, ...
  // (v5) The process writing the run: its pid, the kernel's boot id (/proc/sys/kernel/random/boot_id)
  // and its start time in clock ticks after boot (/proc/PID/stat, field 22), which together name
  // one process even after its pid is reused. NULL / "" where unknown (runs from before v5,
  // imports); Database::begin_run fills them for a new run (one without a uuid yet).
  std::optional<int64_t> pid;
  std::string boot_id;
  std::optional<int64_t> pid_start;
};

struct ModelRow {
  int64_t id = 0;
  std::string name;         // file stem
  std::string fingerprint;  // hash of the model's batch-1 layer keys and edges
  std::string path;
  int64_t ir_version = 0;
  int64_t opset = 0;
  int64_t node_count = 0;
};

struct LayerConfigRow {
  int64_t id = 0;
  std::string key;       // canonical key (unique)
  std::string key_hash;  // 16 hex digits
  std::string kind;      // LayerKind name ("Conv")
  std::string op_type;
  std::string dtype;             // "f32"
  std::string params = "{}";     // JSON: inputs/outputs (role, shape, dtype) and attributes
  std::optional<int64_t> flops;  // NULL where a shape is unknown
  std::optional<int64_t> bytes;
};

// One node of a model at one batch size, in topological order.
struct ModelLayerRow {
  int64_t id = 0;
  int64_t model_id = 0;
  int64_t batch = 1;
  int64_t node_index = 0;  // topological index (Layer::index)
  std::string node_name;
  std::string op_type;
  std::string cost_class;  // compute | view | host | control | unsupported
  int64_t config_id = 0;
  std::string preds = "[]";  // JSON array of node_index values this node reads
  std::string subgraph;      // "" for the main graph
};

// One config × backend × algorithm × dtype × math mode (× layout, fusion pattern). Rows are
// matched by that content. The case's name is derived from it by case_name() alone, and stored
// (v4) so that the views and plain SQLite clients read it instead of restating the rule in SQL.
struct CaseRow {
  int64_t id = 0;
  std::string uid;  // 16 hex digits, FNV-1a of the case name: a short stable id
  int64_t config_id = 0;
  // The case's identity (common/case_id.hpp), one column per part but the key: backend
  // ("onednn", "cuda"), algorithm as the library spells it ("CUDNN_CONVOLUTION_FWD_ALGO_GEMM"),
  // dtype ("f32", "f16", "bf16", "int8"), math mode ("fp32" (strict), "tf32", "f16", "bf16", "int8"), layout
  // ("nchw", "nhwc", "any", "" where it does not apply; a conversion case has
  // conversion_layout(*conversion), "src:abcd>aBcd16b"), fusion ("" or the fused pattern, "Relu",
  // "Add+Relu"). Its key is the config's (config_id), not a column: Database::upsert_case sets it from the
  // config when it names the case; rows read from a table leave it empty.
  CaseId identity;
  std::string params = "{}";  // JSON: backend-specific parameters
  std::string name;           // (v4) case_name(identity): Database::upsert_case fills it
  // (v8) What a layout-conversion case converts (columns conversion_tensor, conversion_from,
  // conversion_to; '' in all three, nullopt here, for every other case), and the cases it feeds
  // (feeds_algorithm, feeds_layout; empty for every other case). The links between cases are
  // these columns: nothing reads them back out of the layout text or the params.
  std::optional<LayoutConversion> conversion;
  CaseFeeds feeds;
};

// A layout-conversion case ("reorder" converting src from abcd to aBcd16b) times the reorder that
// an implementation of its config needs; it is not itself an implementation of the config, so it
// is never the config's best case. The analyzer charges it to the cases it feeds.
// (The SQL that rebuilds best_measurements states the same rule as conversion_tensor = ''.)
inline bool is_conversion(const CaseRow& c) {
  return c.conversion.has_value();
}

// The outcome of one case on one system in one run.
struct MeasurementRow {
  int64_t id = 0;
  int64_t case_id = 0;
  int64_t system_id = 0;
  int64_t run_id = 0;
  Disposition status = Disposition::kPassed;  // passed | skipped | unsupported | failed
  std::string reason;                         // why skipped/unsupported, or the error text; "" when passed
  int64_t is_default = 0;                     // 1 when this is the library heuristic's own first choice
  int64_t iterations = 0;                     // timed calls in total
  int64_t repetitions = 0;
  std::optional<double> min_us;  // statistics over the repetitions' per-call times (µs)
  std::optional<double> median_us;
  std::optional<double> mean_us;
  std::optional<double> stddev_us;
  std::optional<double> cv;  // stddev / mean
  std::optional<int64_t> workspace_bytes;
  std::string measured_at;
  int64_t superseded = 0;            // 1 once a later measurement of the case on the system exists
  std::optional<std::string> extra;  // JSON: counters, clocks, anything backend-specific
  int64_t throttled = 0;             // (v2) 1 when the device reported clock throttling
  // (v7) The measurement method (generator/runner.hpp): interleaved passes over the plan the case
  // was timed in, distinct buffer placements (builds of the kernel) behind it, how many of its
  // passes the sentinel found in a slowed period (re-measured), 1 when its repetitions still
  // disagreed (cv above the threshold) after one re-measurement, and every repetition's per-call
  // mean in µs in timing order (a JSON array: what confidence intervals resample). Rows written
  // before v7 or imported from Google Benchmark files: 1 pass, 1 placement, no samples.
  int64_t passes = 1;
  int64_t placements = 1;
  int64_t slowed = 0;
  int64_t noisy = 0;
  std::optional<std::string> samples_us;
};

// Derived: the fastest current passed measurement per config × system × dtype × math mode ×
// fusion, so that "the best case of every config" is a lookup, not a GROUP BY over every
// measurement. The measurement writer keeps it current in the same transaction as the rows it
// writes; merge and upgrade rebuild it. The `best_cases` view adds names.
struct BestMeasurementRow {
  int64_t id = 0;
  int64_t config_id = 0;
  int64_t system_id = 0;
  std::string dtype;
  std::string math_mode;
  std::string fusion;
  int64_t measurement_id = 0;
  int64_t case_id = 0;
  double median_us = 0;
  // (v7) The measurement's min_us (its median_us where it has none): the per-case time S takes,
  // and what the best case is chosen by.
  std::optional<double> min_us;
};

// End-to-end latency of a model in a real framework, imported for the latency-gap report (the
// analyzer's M). Floorline's own replays are not framework latencies: they live in `replays`.
struct FrameworkLatencyRow {
  int64_t id = 0;
  std::string model_name;
  std::string runtime;  // "pytorch", "onnxruntime", ...
  std::string runtime_version;
  std::string device;  // "cpu", "NVIDIA H200", ...
  int64_t batch = 1;
  std::string dtype = "f32";
  std::string settings;  // e.g. "eager", "cudnn.benchmark=1"
  int64_t threads = 0;   // 0 where not applicable
  double median_us = 0;
  std::optional<double> min_us;
  std::optional<double> max_us;
  std::optional<double> stddev_us;
  int64_t repetitions = 0;
  std::string measured_at;
  std::string source;  // file it was imported from
};

// (v4) Floorline's replay of a model's chosen cases on one system, executed back to back as its
// graph (generator/replay.hpp): not a bound and never M; replay / S says how tight S is. One row
// per (system, model, batch, dtype): a later replay replaces an earlier one (Database::upsert_replay).
struct ReplayRow {
  int64_t id = 0;
  int64_t system_id = 0;          // the system whose measured cases were replayed, on itself
  std::optional<int64_t> run_id;  // the run that replayed them; NULL for rows from schema 3
  std::string model_name;
  int64_t batch = 1;
  std::string dtype = "f32";
  double median_us = 0;  // time per pass: median over the repetitions
  std::optional<double> min_us;
  std::optional<double> max_us;
  std::optional<double> stddev_us;
  int64_t repetitions = 0;
  // JSON: what the pass consisted of, an object with layers, layers_us, cases_us, conversions,
  // conversions_us, operands_shared, layers_missing, operands_unwired, buffers, buffers_reused
  // (a row moved from schema 3 whose make-up was plain text holds it as a JSON string).
  std::string makeup = "{}";
  std::string measured_at;
};

// (v6) One node of a real runtime's execution of a model, from the runtime's profiler (ONNX
// Runtime's enableProfiling), with the model's layers it computes: the per-layer M. Rows of one
// profile share the framework_latencies identity (model, runtime, version, device, batch, dtype,
// settings, threads); an import of a new profile for that identity replaces all of its rows.
struct FrameworkLayerTimeRow {
  int64_t id = 0;
  std::string model_name;
  std::string runtime;  // "onnxruntime"
  std::string runtime_version;
  std::string device;  // "cpu", ...
  int64_t batch = 1;
  std::string dtype = "f32";
  std::string settings;  // "graph_optimization=all"
  int64_t threads = 0;
  int64_t node_order = 0;  // position of the node's first execution in a run
  std::string node_name;   // the runtime's node ("/relu/Relu_output_0_nchwc", "BiasGelu_token_11")
  std::string op;          // the runtime's op or kernel ("Conv", "FusedMatMul", "ReorderOutput")
  std::string provider;    // "CPUExecutionProvider"
  // JSON array of the model's layer names (ONNX node names) the node computes: one for a plain
  // node, several for a fused one, none for runtime-only work (a layout reorder).
  std::string layers = "[]";
  double median_us = 0;  // median over the profiled runs of the node's time per run (µs)
  std::optional<double> min_us;
  int64_t runs = 0;
  std::string measured_at;
  std::string source;  // the profile file it was imported from
};

// (v2) A calibrated peak of a system: the denominator of the roofline bound.
struct SystemPeakRow {
  int64_t id = 0;
  int64_t system_id = 0;
  std::string peak;        // "flops" or "bytes"
  std::string dtype;       // "f32", "f16", ...
  std::string math_mode;   // "fp32", "tf32", ...; "" for bytes
  double value_per_s = 0;  // FLOP/s or bytes/s
  std::string method;      // the calibration case ("onednn matmul 4096^3")
  std::string measured_at;
};

// (v10) A case timed one call at a time in a cache state (docs/MEASUREMENT.md, "Cache states",
// generator/cache_state.hpp): its weights (the layer's parameters) evicted to memory, or flushed
// past L2, or nothing evicted ("warm": what single calls cost warm). One row
// per (system, case, state), replaced by a later measurement.
struct CacheTimeRow {
  int64_t id = 0;
  int64_t system_id = 0;
  int64_t case_id = 0;
  // "memory": the weights from DRAM; "llc": flushed past L2 only (from the last-level cache);
  // "warm": single calls with nothing evicted, timed with the others (a diagnostic; E reads the two
  // cold states).
  std::string state;
  double median_us = 0;  // over the samples (one call each)
  double min_us = 0;
  int64_t samples = 0;
  int64_t flush_bytes = 0;  // the bytes written per flush (all threads together)
  std::string measured_at;
  // (v11) "memory" only: the lowest of as many single calls with the output buffers (dst) evicted
  // as well as the weights (µs); the memory reading itself where the procedure leaves the output in
  // memory already or the case shows no output buffer. NULL in the other states and in rows of v10.
  std::optional<double> dst_memory_min_us;
  // (v12) "memory" only: the lowest of 3 single calls (kDirtySamples) with the weights from memory
  // and the caches full of dirty lines (a write over 2 × the last-level cache, at most 64 MiB,
  // before each: every line the call brings in evicts one to be written back, as in a pass that
  // writes its activations; generator/cache_state.hpp) (µs). NULL in the other states and in older
  // rows.
  std::optional<double> dirty_memory_min_us;
};

// --- field lists -------------------------------------------------------------------------------

template <class Row>
struct Column {
  std::string name;
  SqlType type;
  bool nullable;
  std::string
      constraint;  // appended to the column definition: "UNIQUE", "REFERENCES systems(id)", "CHECK (...)"
  int since;       // schema version that introduced the column
  bool identity;   // part of the row's content fingerprint (systems)
  std::function<SqlValue(const Row&)> get;
  std::function<void(Row&, const SqlValue&)> set;
  // The DEFAULT that rows already in the table get when the column is added to it later (ALTER
  // TABLE ADD COLUMN of a NOT NULL column); empty: '' for TEXT, 0 for numbers.
  std::string added_default;
};

// A column that an older schema had and a later one dropped: kept here so that a file of an
// older version can still be created (tests of the migrations) and the upgrade can drop it.
struct RetiredColumn {
  std::string name;
  SqlType type;
  bool nullable;
  std::string constraint;
  int since;  // schema version that introduced the column
  int until;  // schema version that dropped it (its data moved first, see database.cpp)
};

struct IndexDef {
  std::string sql;  // the full CREATE [UNIQUE] INDEX statement
  int since = 1;
};

template <class Row>
struct TableDef {
  std::string name;
  int since = 1;
  std::vector<Column<Row>> columns;      // `id INTEGER PRIMARY KEY` is implicit and first
  std::vector<std::string> constraints;  // table constraints, e.g. "UNIQUE (model_id, batch, node_index)"
  std::vector<IndexDef> indexes;
  std::vector<RetiredColumn> retired;  // columns of older schemas, dropped by an upgrade
};

const TableDef<SystemRow>& systems_table();
const TableDef<RunRow>& runs_table();
const TableDef<ModelRow>& models_table();
const TableDef<LayerConfigRow>& layer_configs_table();
const TableDef<ModelLayerRow>& model_layers_table();
const TableDef<CaseRow>& cases_table();
const TableDef<MeasurementRow>& measurements_table();
const TableDef<BestMeasurementRow>& best_measurements_table();
const TableDef<FrameworkLatencyRow>& framework_latencies_table();
const TableDef<SystemPeakRow>& system_peaks_table();
const TableDef<ReplayRow>& replays_table();
const TableDef<FrameworkLayerTimeRow>& framework_layer_times_table();
const TableDef<CacheTimeRow>& cache_times_table();

// The name of a case is floorline::case_name() of its identity (common/case_id.hpp), e.g.
// "onednn/brg:avx512_core/f32/fp32/Conv|x=1x64x56x56|...|f32": unique per case, readable, and what
// benchmark registrations and reproduction lines use. cases.name holds it, and the views read that
// column. floorline::parse_case_name() is its inverse.
using floorline::case_name;
using floorline::parse_case_name;

// The identity fingerprint of a system (16 hex digits): FNV-1a of its identity columns'
// "name=value" lines. An identity column added at schema 9 or later joins the text only where its
// value is not empty, so that a system of an older file (where it is empty: systems.isa) keeps the
// fingerprint it was stored with, and resume and merge still find it. Such a column must be text
// whose default (what ALTER TABLE gives older rows) is '': a later integer identity column needs
// its own rule.
std::string system_fingerprint(const SystemRow& s);
// The fingerprint of the stack without its thread count: equal for the systems that are one
// machine and library stack (ISA cap included) measured at different thread counts (the thread budget: a
// bound for T threads takes each layer's fastest case over that host's systems of at most T threads).
std::string host_fingerprint(SystemRow s);

// A string map as a JSON object ({"cudnn":"9.19.0"}, keys sorted, entries with an empty value
// left out: an unknown version is no version; equal maps give equal text), and back: the entries
// of a JSON object whose values are strings (none for text that is not a JSON object).
std::string string_map_json(const std::map<std::string, std::string>& m);
std::map<std::string, std::string> parse_string_map(std::string_view json);

// --- column helpers (used by the table definitions and by tests) -------------------------------
namespace detail {
template <class T>
struct SqlTraits;
template <>
struct SqlTraits<int64_t> {
  static constexpr SqlType type = SqlType::kInteger;
  static SqlValue to(const int64_t& v) { return v; }
  static int64_t from(const SqlValue& v) {
    if (const auto* i = std::get_if<int64_t>(&v)) return *i;
    if (const auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
    return 0;
  }
};
template <>
struct SqlTraits<double> {
  static constexpr SqlType type = SqlType::kReal;
  static SqlValue to(const double& v) { return v; }
  static double from(const SqlValue& v) {
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    return 0;
  }
};
template <>
struct SqlTraits<std::string> {
  static constexpr SqlType type = SqlType::kText;
  static SqlValue to(const std::string& v) { return v; }
  static std::string from(const SqlValue& v) { return value_text(v); }
};
// A case's outcome as its name (common/disposition.hpp); text no name of this build reads as failed
// (the column's CHECK admits only the four names a measurement may have).
template <>
struct SqlTraits<Disposition> {
  static constexpr SqlType type = SqlType::kText;
  static SqlValue to(const Disposition& v) { return std::string(disposition_name(v)); }
  static Disposition from(const SqlValue& v) {
    return parse_disposition(value_text(v)).value_or(Disposition::kFailed);
  }
};
template <>
struct SqlTraits<std::map<std::string, std::string>> {
  static constexpr SqlType type = SqlType::kText;
  static SqlValue to(const std::map<std::string, std::string>& v) { return string_map_json(v); }
  static std::map<std::string, std::string> from(const SqlValue& v) {
    return parse_string_map(value_text(v));
  }
};
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {
  using inner = T;
};
}  // namespace detail

namespace detail {
// A column of the member that `ref(row)` refers to (a generic lambda: const for get, mutable for
// set); its type and nullability from the member's type.
template <class Row, class M, class Ref>
Column<Row> column_of(std::string name, Ref ref, std::string constraint, int since, bool identity) {
  Column<Row> c;
  c.name = std::move(name);
  c.constraint = std::move(constraint);
  c.since = since;
  c.identity = identity;
  if constexpr (detail::IsOptional<M>::value) {
    using T = typename detail::IsOptional<M>::inner;
    c.type = detail::SqlTraits<T>::type;
    c.nullable = true;
    c.get = [ref](const Row& r) -> SqlValue {
      const auto& o = ref(r);
      return o ? detail::SqlTraits<T>::to(*o) : SqlValue{};
    };
    c.set = [ref](Row& r, const SqlValue& v) {
      if (is_null(v))
        ref(r) = std::nullopt;
      else
        ref(r) = detail::SqlTraits<T>::from(v);
    };
  } else {
    c.type = detail::SqlTraits<M>::type;
    c.nullable = false;
    c.get = [ref](const Row& r) -> SqlValue { return detail::SqlTraits<M>::to(ref(r)); };
    c.set = [ref](Row& r, const SqlValue& v) { ref(r) = detail::SqlTraits<M>::from(v); };
  }
  return c;
}
}  // namespace detail

// col("median_us", &MeasurementRow::median_us): type and nullability from the member's type.
template <class Row, class M>
Column<Row> col(std::string name, M Row::*member, std::string constraint = "", int since = 1,
                bool identity = false) {
  return detail::column_of<Row, M>(
      std::move(name), [member](auto& r) -> auto& { return r.*member; }, std::move(constraint), since,
      identity);
}

// col("backend", &CaseRow::identity, &CaseId::backend): a column of a member's member, for rows
// that hold a value of several columns as one (a case's identity).
template <class Row, class S, class M>
Column<Row> col(std::string name, S Row::*outer, M S::*inner, std::string constraint = "", int since = 1,
                bool identity = false) {
  return detail::column_of<Row, M>(
      std::move(name), [ outer, inner ](auto& r) -> auto& { return (r.*outer).*inner; },
      std::move(constraint), since, identity);
}

}  // namespace floorline::benchdb
