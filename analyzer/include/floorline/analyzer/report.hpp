// floorline/analyzer/report.hpp — the analyzer's outputs: terminal table, JSON, CSV, HTML, DOT.
//
// Every format carries the same figures under the same names; times are µs (`_us`), ratios are
// plain numbers, a figure that could not be computed is "-" in the table and CSV and null in
// JSON, never 0. JSON and CSV are stable machine-readable outputs (tests hold golden copies).
//   table  per-model summary (S, P, H, F, R, M, reduced precision, gap ratios, measured share),
//          the throughput view (throughput.hpp) when several batches or a runtime are present,
//          then each model's findings; with `layers`, the per-layer table
//   json   {"system", "database", "models": [{bounds..., "layers": [...], "findings": [...]}],
//           "throughput": [{"model", "dtype", "bound", "runtimes"}]}
//   csv    one row per model (or per layer with `layers`)
//   html   one self-contained page (no network): inline-SVG charts of the bounds per model, latency
//          vs batch size, throughput vs batch size (bound and runtimes, one panel per model), time
//          by layer kind, a roofline chart of the layers (a distinct colour per kind) and each
//          critical path, then the findings and per-layer tables
//   Where a runtime profile was imported (runtime_layers.hpp), table, JSON ("runtime_layers") and
//   HTML add the runtime against the bound per layer; absent otherwise.
//   The validity check (validity.hpp): the table's "bound violations" section (absent when S
//   holds), JSON "bound_check" ({"model_batches", "latencies", "replays", "violating",
//   "violations": [...]}), and an HTML "Bound check" section after the summary; validity_line()
//   is the one-line summary `floorline run` and `floorline analyze` end with.
//   dot    the layer graph of each model (Graphviz), critical path in red, times on the nodes
#pragma once

#include <map>
#include <string>
#include <vector>

#include "floorline/analyzer/advisors.hpp"
#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/runtime_layers.hpp"
#include "floorline/analyzer/validity.hpp"

namespace floorline::analyzer {

struct ModelReport {
  ModelBounds bounds;
  std::vector<Finding> findings;
  std::optional<RuntimeComparison> runtime_layers;  // the runtime per layer, when a profile was imported
  BoundCheck bound_check;                           // S against every latency and the replay (validity.hpp)
};

struct Report {
  std::string database;             // path of the results database
  CostTable costs;                  // the system analyzed: its description, peaks and measurements
  std::vector<ModelReport> models;  // in the order analyzed (model, then batch)
};

// Loads the system's costs (choose_system, load_costs) and analyzes and advises on each model.
Result<Report> build_report(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                            std::optional<int64_t> system, const AnalyzeOptions& options = {});

// The validity check over the whole report (validity.hpp).
struct ValiditySummary {
  int64_t model_batches = 0;  // model × batch × dtype analyzed with S > 0
  int64_t latencies = 0;      // framework latencies compared with S
  int64_t replays = 0;        // replays compared with S
  int64_t violating = 0;      // model × batch × dtype with at least one latency below S
  int64_t violations = 0;     // latencies below S
};
ValiditySummary validity_summary(const Report& report);
// One line for the end of `floorline run` and `floorline analyze` ("bound check: ..."), no newline.
std::string validity_line(const Report& report);

// The cases to time again where a framework latency is below S (`floorline run`, before its
// analysis): per (model, batch) with such a violation, the best cases (and epilogue cases) of the
// layers its runtime nodes beat, or of every layer of the model when the runtime gave no per-layer
// profile; sorted, without repeats. Replay violations are left out (the replay re-times its own).
std::map<std::pair<std::string, int64_t>, std::vector<std::string>> cases_to_retime(const Report& report);
// S of (model, batch) in the report; 0 when absent.
double s_of(const Report& report, const std::string& model, int64_t batch);

std::string format_table(const Report& report, bool layers, size_t top_findings = 3);
std::string format_json(const Report& report);
std::string format_csv(const Report& report, bool layers);
std::string format_html(const Report& report);
std::string format_dot(const Report& report);

}  // namespace floorline::analyzer
