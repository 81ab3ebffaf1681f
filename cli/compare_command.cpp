#include "compare_command.hpp"

#include <cstdio>
#include <memory>

#include "floorline/analyzer/compare.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/common/output.hpp"
#include "floorline/model_processor/zoo.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary

namespace {

struct CompareCmd {
  std::vector<std::string> models;
  std::string db;
  std::vector<int64_t> systems;
  std::optional<int64_t> baseline;
  std::vector<int64_t> batches = {1};
  int64_t max_detections = 100;
  std::map<std::string, std::vector<int64_t>> dims;  // ProcessOptions::dims (--dim)
  std::string dtype = "f32";
  std::string format = "table";
  std::string out = "-";
  size_t top = 5;
  bool threads_exact = false;
  bool fail_on_violation = false;  // exit kExitBoundViolation when a system's S is above a latency
};

int run_compare(CompareCmd o) {
  if (o.models.empty()) {
    auto zoo = embedded_zoo();
    if (!zoo) {
      std::fprintf(
          stderr,
          "floorline compare: no MODELS given and the embedded zoo (models/zoo) is not here: name ONNX "
          "files or folders\n");
      return 2;
    }
    o.models.push_back(*zoo);
  }
  mp::ProcessOptions popts;
  popts.batches = o.batches;
  popts.max_detections = o.max_detections;
  popts.dims = o.dims;
  auto in = open_read_inputs(o.models, o.db, o.out, popts);
  if (!in) {
    std::fprintf(stderr, "floorline compare: %s\n", in.error().message.c_str());
    return 2;
  }
  auto& db = in->db;
  const std::vector<mp::ModelIR>& models = in->models;
  const int failures = in->failures;
  analyzer::CompareOptions copts;
  copts.systems = o.systems;
  copts.baseline = o.baseline;
  copts.dtype = o.dtype;
  copts.thread_budget = !o.threads_exact;
  copts.top_configs = o.top;
  auto c = analyzer::compare_systems(db, models, copts);
  if (!c) {
    std::fprintf(stderr, "floorline compare: %s\n", c.error().message.c_str());
    return 2;
  }
  std::string text = o.format == "json"   ? analyzer::format_compare_json(*c)
                     : o.format == "csv"  ? analyzer::format_compare_csv(*c)
                     : o.format == "html" ? analyzer::format_compare_html(*c)
                                          : analyzer::format_compare_table(*c);
  if (auto st = write_checked(o.out, text); !st) {
    std::fprintf(stderr, "floorline compare: %s\n", st.error().message.c_str());
    return 1;
  }
  if (o.out != "-")
    std::fprintf(stderr, "wrote %s (%zu model-batch(es) on %zu system(s))\n", o.out.c_str(), c->models.size(),
                 c->systems.size());
  int64_t violations = 0;
  for (const auto& m : c->models)
    for (const auto& sb : m.systems) violations += sb.violations;
  if (violations > 0)
    std::fprintf(
        stderr,
        "bound check: %lld latency(ies) below S over the compared systems (the table's last section)\n",
        static_cast<long long>(violations));
  if (failures) return 1;
  return o.fail_on_violation && violations > 0 ? kExitBoundViolation : 0;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareCmd>();
  auto* c = app.add_subcommand(
      "compare",
      "The bounds of models on several systems side by side: speedups, layer kinds, thread scaling");
  c->add_option("models", o->models, "ONNX files or folders (default: the embedded zoo, models/zoo)");
  c->add_option("--db", o->db, "Results database holding the systems (merge several with floorline db merge)")
      ->required();
  c->add_option("--systems", o->systems,
                "System ids, comma-separated (floorline db info lists them); default: every system with a "
                "measurement of these models")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, INT64_MAX, "system id"));
  c->add_option("--baseline", o->baseline,
                "The system speedups are relative to (default: the first compared)")
      ->check(int_in(1, INT64_MAX, "system id"));
  c->add_option("--batch", o->batches, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, kMaxBatch, "batch size"));
  add_dim_option(c, o->dims);
  c->add_option("--max-detections", o->max_detections,
                "Elements NonZero/NonMaxSuppression are assumed to select (their data-dependent sizes)")
      ->check(int_in(1, kMaxBatch, "detections"));
  c->add_option("--dtype", o->dtype, "Base data type of the bounds: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  c->add_option("--format", o->format, "table, json, csv or html")
      ->check(CLI::IsMember({"table", "json", "csv", "html"}));
  c->add_option("--out", o->out, "Output file ('-' for stdout)");
  c->add_option("--top", o->top, "Configurations listed per model (largest change between the systems first)")
      ->check(int_in(0, kMaxListed, "configurations"));
  c->add_flag("--threads-exact", o->threads_exact,
              "Every layer at its system's own thread count (no thread budget)");
  c->add_flag("--fail-on-violation", o->fail_on_violation,
              "Exit with status 3 when a framework latency or a replay is below a system's S");
  c->callback([o, &exit_code] { exit_code = run_compare(*o); });
}

}  // namespace floorline::cli
