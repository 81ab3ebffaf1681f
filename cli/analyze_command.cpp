#include "analyze_command.hpp"

#include <cstdio>
#include <memory>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/output.hpp"
#include "floorline/model_processor/zoo.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary

namespace {

struct AnalyzeCmd {
  std::vector<std::string> models;
  std::string db;
  std::optional<int64_t> system;
  std::vector<int64_t> batches = {1};
  int64_t max_detections = 100;                      // ProcessOptions::max_detections
  std::map<std::string, std::vector<int64_t>> dims;  // ProcessOptions::dims (--dim)
  std::string dtype = "f32";
  std::string format = "table";
  std::string out = "-";
  bool layers = false;
  size_t top = 3;
  bool fail_on_violation = false;  // exit kExitBoundViolation when a latency is below S
  std::optional<int64_t> threads;  // the system of this thread count (CPU)
  bool threads_exact = false;      // no thread budget: the system's own cases only
};

int run_analyze(const AnalyzeCmd& o) {
  mp::ProcessOptions popts;
  popts.batches = o.batches;
  popts.max_detections = o.max_detections;
  popts.dims = o.dims;
  auto in = open_read_inputs(o.models, o.db, o.out, popts);
  if (!in) {
    std::fprintf(stderr, "floorline analyze: %s\n", in.error().message.c_str());
    return 2;
  }
  auto& db = in->db;
  const std::vector<mp::ModelIR>& models = in->models;
  const int failures = in->failures;
  analyzer::AnalyzeOptions aopts;
  aopts.dtype = o.dtype;
  aopts.thread_budget = !o.threads_exact;
  aopts.threads = o.threads;
  auto report = analyzer::build_report(db, models, o.system, aopts);
  if (!report) {
    std::fprintf(stderr, "floorline analyze: %s\n", report.error().message.c_str());
    return 2;
  }
  std::string text = render_report(*report, o.format, o.layers, o.top);
  // The table ends with the validity check's line; other formats carry the check as data, and
  // stderr says it in one line.
  const std::string line = terminal_safe(analyzer::validity_line(*report));
  if (o.format == "table") text += "\n" + line + "\n";
  if (auto st = write_checked(o.out, text); !st) {
    std::fprintf(stderr, "floorline analyze: %s\n", st.error().message.c_str());
    return 1;
  }
  if (o.out != "-") std::fprintf(stderr, "wrote %s (%zu model(s))\n", o.out.c_str(), report->models.size());
  if (o.format != "table" || o.out != "-") std::fprintf(stderr, "%s\n", line.c_str());
  if (failures) return 1;
  return o.fail_on_violation && analyzer::validity_summary(*report).violations > 0 ? kExitBoundViolation : 0;
}

}  // namespace

std::string render_report(const analyzer::Report& report, const std::string& format, bool layers,
                          size_t top) {
  if (format == "json") return analyzer::format_json(report);
  if (format == "csv") return analyzer::format_csv(report, layers);
  if (format == "html") return analyzer::format_html(report);
  if (format == "dot") return analyzer::format_dot(report);
  return analyzer::format_table(report, layers, top);
}

void add_analyze_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<AnalyzeCmd>();
  auto* a = app.add_subcommand("analyze",
                               "Lower-bound latencies (S, P, H, F, R, M), optimization advice and reports");
  a->add_option("models", o->models, "ONNX files or folders (searched recursively)")->required();
  a->add_option("--db", o->db, "Results database written by `floorline bench`")->required();
  a->add_option("--system", o->system,
                "System id (floorline db info); default: the one with the most measurements of these models")
      ->check(int_in(1, INT64_MAX, "system id"));
  a->add_option(
       "--threads", o->threads,
       "The system measured at this many CPU threads (default: the one with the most measurements); "
       "S takes each layer's fastest over its host's systems of at most that many (the thread budget)")
      ->check(int_in(1, 1024, "threads"));
  a->add_flag("--threads-exact", o->threads_exact,
              "Every layer at the system's own thread count (no thread budget)");
  a->add_option("--batch", o->batches, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, kMaxBatch, "batch size"));
  add_dim_option(a, o->dims);
  a->add_option("--max-detections", o->max_detections,
                "Elements NonZero/NonMaxSuppression are assumed to select (their data-dependent sizes; "
                "reports state it)")
      ->check(int_in(1, kMaxBatch, "detections"));
  a->add_option("--dtype", o->dtype, "Base data type of S, P, H, F, R: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  a->add_option("--format", o->format, "table, json, csv, html or dot")
      ->check(CLI::IsMember({"table", "json", "csv", "html", "dot"}));
  a->add_option("--out", o->out, "Output file ('-' for stdout)");
  a->add_flag("--layers", o->layers,
              "Per-layer table (table and csv formats): kind, time, share of S, critical path");
  a->add_option("--top", o->top, "Findings shown per model in the table")
      ->check(int_in(0, kMaxListed, "findings"));
  a->add_flag("--fail-on-violation", o->fail_on_violation,
              "Exit with status 3 when a framework latency or the replay is below S (a bound violation; "
              "by default reported, not a failure)");
  a->callback([o, &exit_code] { exit_code = run_analyze(*o); });
}

}  // namespace floorline::cli
