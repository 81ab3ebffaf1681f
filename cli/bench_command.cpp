// plan / generate / bench: models → unique configs → cases → (sources | timed results).
#include "bench_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "analyze_command.hpp"
#include "floorline/analyzer/bounds.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/common/output.hpp"
#include "floorline/generator/cache_state.hpp"
#include "floorline/generator/emit.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/model_processor/zoo.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary

Result<Loaded> plan_models(const CommonOptions& o) {
  Loaded l;
  FL_ASSIGN_OR_RETURN(auto files, find_model_files(o.models));
  FL_ASSIGN_OR_RETURN(l.backends, gen::select_backends(o.backend));
  std::vector<DType> dtypes;  // the allow-list is common/dtype.hpp's kDTypes
  for (const auto& d : o.dtypes) {
    const auto t = parse_dtype(d);
    if (!t) return make_error("--dtype {}: the backends measure f32, bf16 and f16 (cuda only)", d);
    dtypes.push_back(*t);
  }
  const auto t0 = std::chrono::steady_clock::now();
  mp::ProcessOptions popts;
  popts.batches = o.batches;
  popts.max_detections = o.max_detections;
  popts.dims = o.dims;
  const bool color = use_color(stderr);
  for (const auto& path : files) {
    auto r = mp::process_model(path, popts);
    if (!r) {
      std::fprintf(stderr, "%s %s\n", red("error:", color).c_str(), r.error().message.c_str());
      ++l.failures;
      continue;
    }
    for (auto& m : *r) l.models.push_back(std::move(m));
  }
  gen::PlanOptions popt;
  popt.dtypes = dtypes;
  popt.max_impls = o.all_impls ? 0 : o.max_impls;
  popt.fused_all = o.all_impls;
  popt.include_reference = o.include_ref;
  popt.fusion = !o.no_fusion;
  popt.conversions = !o.no_conversions;
  l.plan = gen::make_plan(l.models, l.backends, popt);
  if (!o.cases.empty()) {
    const std::set<std::string> wanted(o.cases.begin(), o.cases.end());
    std::vector<gen::PlannedCase> kept;
    for (auto& c : l.plan.cases)
      if (wanted.count(c.spec.name)) kept.push_back(std::move(c));
    if (kept.size() != wanted.size())
      return make_error(
          "{} of {} --case name(s) are not in the plan of these models (see `floorline plan --list`)",
          wanted.size() - kept.size(), wanted.size());
    l.plan.cases = std::move(kept);
  }
  l.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

void add_plan_options(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--backend", o.backend,
                  "auto (every backend that can run here) or a comma-separated list: cuda, onednn, "
                  "floorline, xnnpack, openblas");
  cmd->add_option("--batch", o.batches, "Batch sizes, comma-separated")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, kMaxBatch, "batch size"));
  add_dim_option(cmd, o.dims);
  cmd->add_option("--max-detections", o.max_detections,
                  "Elements NonZero/NonMaxSuppression are assumed to select (their data-dependent sizes; "
                  "reports state it)")
      ->check(int_in(1, kMaxBatch, "detections"));
  cmd->add_option("--dtype", o.dtypes,
                  "Data types, comma-separated: f32, bf16, f16 (cuda; f32 is timed as fp32 and tf32 there)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_option("--max-impls", o.max_impls,
                  "Implementations timed per config and data type, the rest skipped (default: every one, "
                  "raced: those that cannot win end raced out)")
      ->check(int_in(1, kMaxImpls, "implementations"));
  cmd->add_flag("--all-impls", o.all_impls,
                "Time every implementation, the fused variants' too (by default a fused variant times the "
                "first implementation of each algorithm family, layout and layout it reads)");
  cmd->add_flag("--include-ref", o.include_ref, "Time the reference (ref:) implementations too");
  cmd->add_flag("--no-fusion", o.no_fusion, "Do not plan fused variants");
  cmd->add_flag("--no-conversions", o.no_conversions, "Do not plan layout-conversion cases");
  cmd->add_option("--case", o.cases, "Only the case with this name (repeatable; names from `plan --list`)");
}

Result<ShardLayout> shard_layout(const Loaded& l, int count, const std::string& costs_file,
                                 const gen::CostOptions* actual) {
  std::optional<benchdb::Database> earlier;
  if (!costs_file.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(costs_file, ec))
      return make_error("--shard-costs {}: no such file", costs_file);
    benchdb::OpenOptions ro;
    ro.read_only = true;  // every shard reads it at once; none writes it
    FL_ASSIGN_OR_RETURN(auto db, benchdb::Database::open(costs_file, ro));
    earlier.emplace(std::move(db));
  }
  ShardLayout out;
  auto costs =
      gen::estimate_case_costs(l.plan, l.backends, gen::kPartitionCosts, earlier ? &*earlier : nullptr);
  if (!costs) return costs.error().with_context(fmt::format("--shard-costs {}", costs_file));
  out.costs = std::move(costs).value();
  std::vector<std::string> names;
  names.reserve(l.plan.cases.size());
  for (const auto& c : l.plan.cases) names.push_back(c.spec.name);
  out.partition = gen::partition_cases(names, out.costs.seconds, count);
  if (actual) {
    auto now = gen::estimate_case_costs(l.plan, l.backends, *actual, earlier ? &*earlier : nullptr);
    if (!now) return now.error().with_context(fmt::format("--shard-costs {}", costs_file));
    out.estimated.assign(static_cast<size_t>(std::max(1, count)), 0.0);
    for (size_t k = 0; k < now->seconds.size(); ++k)
      out.estimated[static_cast<size_t>(out.partition.shard_of[k])] += now->seconds[k];
  }
  return out;
}

Status select_shard(Loaded& l, const CommonOptions& o, const gen::CostOptions& options, const char* cmd) {
  if (o.shard.empty()) {
    if (!o.shard_costs.empty()) return make_error("--shard-costs needs --shard I/N");
    return {};
  }
  FL_ASSIGN_OR_RETURN(const gen::ShardSpec spec, gen::parse_shard(o.shard));
  FL_ASSIGN_OR_RETURN(const ShardLayout layout, shard_layout(l, spec.count, o.shard_costs, &options));
  const auto& p = layout.partition;
  const auto [lo, hi] = std::minmax_element(layout.estimated.begin(), layout.estimated.end());
  double total = 0;
  for (double s : layout.estimated) total += s;
  std::fprintf(stderr,
               "floorline %s: shard %s: %lld of %zu cases, estimated %.1f s of %.1f s in all (shards %.1f to "
               "%.1f s; %lld cases costed by an earlier measurement, %lld by their roofline; %s)\n",
               cmd, gen::shard_label(spec).c_str(), static_cast<long long>(p.cases[spec.index]),
               l.plan.cases.size(), layout.estimated[static_cast<size_t>(spec.index)], total, *lo, *hi,
               static_cast<long long>(layout.costs.measured), static_cast<long long>(layout.costs.roofline),
               layout.costs.source.c_str());
  l.plan = gen::shard_plan(l.plan, p, spec.index);
  return {};
}

void set_shard(gen::RunOptions& ro, const CommonOptions& o) {
  ro.shard = o.shard;
  ro.shard_costs = o.shard_costs;
}

Result<std::vector<gen::RunSummary>> bench_thread_budget(benchdb::Database* db, const Loaded& l,
                                                         const gen::RunOptions& ro, bool exact, bool dry_run,
                                                         bool verify) {
  const auto counts = gen::budget_thread_counts(ro.threads, exact);
  std::vector<gen::RunSummary> out;
  for (const int t : counts) {
    gen::RunOptions at = ro;
    at.threads = t;
    if (counts.size() > 1) std::fprintf(stderr, "thread budget %d: timing at %d thread(s)\n", ro.threads, t);
    FL_ASSIGN_OR_RETURN(gen::RunSummary r, gen::run_plan(db, l.models, l.plan, l.backends, at));
    print_bench_summary(r, l.plan_seconds, dry_run, verify);
    const bool interrupted = r.interrupted;
    out.push_back(std::move(r));
    if (interrupted) break;
  }
  return out;
}

void print_bench_summary(const gen::RunSummary& r, double plan_seconds, bool dry_run, bool verify) {
  std::fprintf(stderr,
               "%s%lld passed, %lld skipped, %lld unsupported, %lld failed, %lld already measured%s\n"
               "planned in %.2f s; ran in %.1f s, of which %.1f s timed (harness efficiency %.2f)\n",
               dry_run ? "dry run: " : "", static_cast<long long>(r.passed),
               static_cast<long long>(r.skipped), static_cast<long long>(r.unsupported),
               static_cast<long long>(r.failed), static_cast<long long>(r.already_measured),
               verify ? fmt::format(", {} verified", r.verified).c_str() : "", plan_seconds, r.wall_seconds,
               r.timed_seconds, r.efficiency());
  if (!dry_run && r.wall_seconds > 0)
    std::fprintf(
        stderr,
        "by phase: building cases %.1f s, warm-up calls %.1f s, repetitions %.1f s (%.1f s of them the "
        "passed cases' timed calls), sentinel %.1f s, the rest %.1f s\n",
        r.build_seconds, r.warmup_seconds, r.repetition_seconds, r.timed_seconds, r.sentinel_seconds,
        std::max(0.0, r.wall_seconds - r.build_seconds - r.warmup_seconds - r.repetition_seconds -
                          r.sentinel_seconds));
  if (r.first_calls > 0)
    std::fprintf(stderr,
                 "%lld visit(s) took their first call as a repetition (it took a repetition's time)\n",
                 static_cast<long long>(r.first_calls));
  for (const auto& p : r.peaks)
    std::fprintf(stderr, "calibrated peak %s %s: %s (%s)\n",
                 p.math_mode == "memory" ? "bytes (memory)" : p.peak.c_str(), p.dtype.c_str(),
                 p.peak == "flops" ? fmt::format("{:.1f} GFLOP/s", p.value_per_s / 1e9).c_str()
                                   : fmt::format("{:.1f} GB/s", p.value_per_s / 1e9).c_str(),
                 p.method.c_str());
  if (r.race_groups)
    std::fprintf(
        stderr,
        "racing (docs/MEASUREMENT.md): %lld race(s) of %lld candidate(s) (%.1f each); %lld raced out (%lld "
        "on their warm-up call, %lld on a visit's first repetition), %lld visit(s) saved; the others timed "
        "in full\n",
        static_cast<long long>(r.race_groups), static_cast<long long>(r.race_candidates),
        r.race_groups ? static_cast<double>(r.race_candidates) / static_cast<double>(r.race_groups) : 0.0,
        static_cast<long long>(r.raced_out), static_cast<long long>(r.raced_on_warmup),
        static_cast<long long>(r.raced_on_repetition), static_cast<long long>(r.raced_out_visits));
  if (r.confident)
    std::fprintf(stderr,
                 "%lld long case(s) ended on two readings that agree (stopping on confidence), %lld visit(s) "
                 "saved\n",
                 static_cast<long long>(r.confident), static_cast<long long>(r.confident_visits));
  if (r.settled_visits)
    std::fprintf(stderr,
                 "%lld visit(s) whose time still fell at their last repetitions got %lld more (settling)\n",
                 static_cast<long long>(r.settled_visits), static_cast<long long>(r.settle_repetitions));
  if (r.conversion_copies)
    std::fprintf(stderr,
                 "%lld layout conversion(s) took the measurement of the same conversion (tensor dims, "
                 "layouts, implementation) timed for another configuration\n",
                 static_cast<long long>(r.conversion_copies));
  if (r.placement_searched)
    std::fprintf(stderr, "%lld short case(s) whose placements disagreed got %lld further placement(s)\n",
                 static_cast<long long>(r.placement_searched), static_cast<long long>(r.placement_visits));
  if (!r.remeasure && r.noisy)
    std::fprintf(stderr, "%lld case(s) noisy: their repetitions disagree (not timed again: --quick)\n",
                 static_cast<long long>(r.noisy));
  else if (r.remeasured || r.noisy)
    std::fprintf(stderr,
                 "%lld case(s) timed again (slowed period or disagreeing repetitions), %lld still noisy\n",
                 static_cast<long long>(r.remeasured), static_cast<long long>(r.noisy));
  if (r.sentinel_slowed)
    std::fprintf(stderr,
                 "sentinel: the machine slowed down in %d of %d periods (up to %.2fx the sentinel's best "
                 "time); %s\n",
                 r.sentinel_slowed, r.sentinel_readings, r.sentinel_worst,
                 r.remeasure ? "the cases timed then were timed again"
                             : "the cases timed then were not timed again (no re-measurement: --quick)");
  if (!r.calibration_error.empty())
    std::fprintf(stderr, "floorline bench: calibration failed, those roofline peaks not stored: %s\n",
                 r.calibration_error.c_str());
  if (r.interrupted)
    std::fprintf(stderr,
                 "interrupted: what was measured is kept; the same command resumes where this run stopped\n");
}

namespace {

struct PlanCmd {
  CommonOptions c;
  bool list = false;
  std::string format = "table";
  std::string out = "-";
};
struct GenerateCmd {
  CommonOptions c;
  std::string out;
};
struct BenchCmd {
  CommonOptions c;
  MethodCli method;
  std::string db;
  double min_time = gen::RunOptions{}.min_time;
  int repetitions = gen::RunOptions{}.repetitions;
  double warmup = gen::RunOptions{}.warmup_seconds;
  int threads = 1;
  bool threads_exact = false;
  bool resume = true;
  bool force = false;
  bool dry_run = false;
  bool verify = false;
  bool no_calibrate = false;
  bool cold = false;
  bool cache_states = false;
  bool quiet = false;
};

void add_shard_options(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--shard", o.shard,
                  "Only shard I of N (I from 0 to N-1), cases split by estimated time, the same on every "
                  "machine: e.g. 0/4");
  cmd->add_option("--shard-costs", o.shard_costs,
                  "An earlier database whose measurements and peaks estimate the cases' times for --shard "
                  "(default: nominal rates); give every shard the same file");
}

void add_common(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("models", o.models, "ONNX files or folders (searched recursively)")->required();
  add_plan_options(cmd, o);
  add_shard_options(cmd, o);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// The command that re-runs one case alone.
// Where each config can be re-run alone: the first model (and batch) containing it.
struct Origin {
  std::string model = "MODEL.onnx";
  int64_t batch = 1;
};
std::map<std::string, Origin> origins(const gen::Plan& plan, const std::vector<mp::ModelIR>& models) {
  std::map<std::string, Origin> by_model;  // "resnet50@b1" → file and batch
  for (const auto& m : models) by_model[fmt::format("{}@b{}", m.name, m.batch)] = {m.path.string(), m.batch};
  std::map<std::string, Origin> out;
  for (const auto& u : plan.configs)
    if (!u.models.empty())
      if (auto it = by_model.find(u.models.begin()->first); it != by_model.end()) out[u.key] = it->second;
  return out;
}

// The command that re-runs one case alone.
std::string reproduction(const gen::PlannedCase& c, const std::map<std::string, Origin>& origins) {
  auto it = origins.find(c.spec.problem.key);
  const Origin o = it == origins.end() ? Origin{} : it->second;
  return fmt::format("floorline bench {} --batch {} --dtype {} --backend {} --db results.db --case {}",
                     o.model, o.batch, dtype_name(c.spec.variant.dtype), c.spec.variant.backend,
                     shell_quote(c.spec.name));
}

// plan_models(), its error printed as "floorline CMD: ..." (the caller exits with status 2).
// With --shard, only that shard's cases, partitioned with the costs of `costs` (the bench settings).
std::optional<Loaded> load(const char* cmd, const CommonOptions& o, const gen::CostOptions& costs = {}) {
  auto l = plan_models(o);
  if (l)
    if (auto st = select_shard(*l, o, costs, cmd); !st) l = st.error();
  if (!l) {
    std::fprintf(stderr, "floorline %s: %s\n", cmd, l.error().message.c_str());
    return std::nullopt;
  }
  return std::move(l).value();
}

struct KindRow {
  std::string kind, backend;
  int64_t configs = 0, cases = 0, timed = 0, skipped = 0, unsupported = 0, fused = 0, conversions = 0;
};
struct CaseRowOut {
  const gen::PlannedCase* c;
  std::string repro;
};

int run_plan_cmd(const PlanCmd& o) {
  if (auto st = check_out_not_input(o.out, o.c.models); !st) {
    std::fprintf(stderr, "floorline plan: %s\n", st.error().message.c_str());
    return 2;
  }
  auto l = load("plan", o.c);
  if (!l) return 2;
  std::map<std::pair<std::string, std::string>, KindRow> kinds;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> configs;
  for (const auto& c : l->plan.cases) {
    auto& r = kinds[{c.spec.problem.op, c.spec.variant.backend}];
    r.kind = c.spec.problem.op;
    r.backend = c.spec.variant.backend;
    configs[{r.kind, r.backend}].insert(c.spec.problem.key);
    ++r.cases;
    if (!c.status)
      ++r.timed;
    else if (c.status == Disposition::kSkipped)
      ++r.skipped;
    else
      ++r.unsupported;
    if (!c.spec.variant.fusion.empty()) ++r.fused;
    if (!c.spec.feeds.empty()) ++r.conversions;
  }
  std::vector<KindRow> rows;
  for (auto& [k, r] : kinds) {
    r.configs = static_cast<int64_t>(configs[k].size());
    rows.push_back(r);
  }
  const std::vector<Field<KindRow>> kind_fields = {
      {"kind", [](const KindRow& r) { return text_cell(r.kind); }},
      {"backend", [](const KindRow& r) { return text_cell(r.backend); }},
      {"configs", [](const KindRow& r) { return int_cell(r.configs); }},
      {"cases", [](const KindRow& r) { return int_cell(r.cases); }},
      {"timed", [](const KindRow& r) { return int_cell(r.timed); }},
      {"skipped", [](const KindRow& r) { return int_cell(r.skipped); }},
      {"unsupported", [](const KindRow& r) { return int_cell(r.unsupported); }},
      {"fused", [](const KindRow& r) { return int_cell(r.fused); }},
      {"conversions", [](const KindRow& r) { return int_cell(r.conversions); }},
  };
  std::vector<CaseRowOut> case_rows;
  if (o.list) {
    const auto where = origins(l->plan, l->models);
    for (const auto& c : l->plan.cases) case_rows.push_back({&c, reproduction(c, where)});
  }
  const std::vector<Field<CaseRowOut>> case_fields = {
      {"case", [](const CaseRowOut& r) { return text_cell(r.c->spec.name); }},
      {"status",
       [](const CaseRowOut& r) {
         return text_cell(r.c->status ? std::string(disposition_name(*r.c->status)) : "planned");
       }},
      {"default", [](const CaseRowOut& r) { return int_cell(r.c->work.is_default ? 1 : 0); }},
      {"reason", [](const CaseRowOut& r) { return text_cell(r.c->reason); }},
      {"flops", [](const CaseRowOut& r) { return int_cell(r.c->work.flops); }},
      {"bytes", [](const CaseRowOut& r) { return int_cell(r.c->work.bytes); }},
      {"reproduce", [](const CaseRowOut& r) { return text_cell(r.repro); }},
  };
  int64_t timed = 0;
  for (const auto& c : l->plan.cases) timed += c.status ? 0 : 1;
  std::string out;
  if (o.format == "json") {
    nlohmann::json j;
    j["kinds"] = render_json(kind_fields, rows);
    j["summary"] = {{"models", l->models.size()},
                    {"unique_configs", l->plan.configs.size()},
                    {"cases", l->plan.cases.size()},
                    {"timed", timed},
                    {"plan_s", l->plan_seconds}};
    if (o.list) j["cases"] = render_json(case_fields, case_rows);
    out = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else if (o.format == "csv") {
    out = o.list ? render_csv(case_fields, case_rows) : render_csv(kind_fields, rows);
  } else {
    if (o.list) {
      for (const auto& r : case_rows) {
        out += fmt::format("{}  [{}{}]\n", r.c->spec.name,
                           r.c->status ? disposition_name(*r.c->status) : "planned",
                           r.c->work.is_default ? ", default" : "");
        if (!r.c->reason.empty()) out += fmt::format("    {}\n", r.c->reason);
        out += fmt::format("    $ {}\n", r.repro);
      }
      out += "\n";
    }
    out += render_table(kind_fields, rows);
    out += fmt::format(
        "\n{} model(s) at batch {}, {} unique configs, {} cases ({} to time), planned in {:.2f} s\n",
        l->models.size() / std::max<size_t>(1, o.c.batches.size()), fmt::join(o.c.batches, ","),
        l->plan.configs.size(), l->plan.cases.size(), timed, l->plan_seconds);
  }
  if (auto st = write_checked(o.out, out); !st) {
    std::fprintf(stderr, "floorline plan: %s\n", st.error().message.c_str());
    return 1;
  }
  return l->failures ? 1 : 0;
}

int run_generate_cmd(const GenerateCmd& o) {
  auto l = load("generate", o.c);
  if (!l) return 2;
  auto r = gen::write_standalone(l->plan, l->backends, o.out);
  if (!r) {
    std::fprintf(stderr, "floorline generate: %s\n", r.error().message.c_str());
    return 2;
  }
  std::fprintf(stderr,
               "wrote %lld benchmark registrations in %lld files to %s\n"
               "build: cmake -S %s -B %s/build -DCMAKE_PREFIX_PATH=<floorline install prefix> && cmake "
               "--build %s/build\n",
               static_cast<long long>(r->cases), static_cast<long long>(r->files), o.out.c_str(),
               o.out.c_str(), o.out.c_str(), o.out.c_str());
  return l->failures ? 1 : 0;
}

int run_bench_cmd(const BenchCmd& o, const std::string& command) {
  gen::CostOptions costs;
  costs.min_time = o.min_time;
  costs.repetitions = o.repetitions;
  costs.warmup_seconds = o.warmup;
  costs.threads = o.threads;
  gen::RunOptions ro;
  set_method(ro, costs, o.method);
  auto l = load("bench", o.c, costs);
  if (!l) return 2;
  // Nothing to measure (every model failed to load): refuse rather than record an empty run.
  if (l->models.empty()) {
    std::fprintf(stderr, "floorline bench: no model could be processed; nothing recorded\n");
    return 1;
  }
  std::optional<benchdb::Database> db;
  if (!o.dry_run) {
    auto opened = open_for_writing("bench", o.db);
    if (!opened) {
      std::fprintf(stderr, "floorline bench: %s\n", opened.error().message.c_str());
      return 2;
    }
    db.emplace(std::move(opened).value());
  }
  ro.min_time = o.min_time;
  ro.repetitions = o.repetitions;
  ro.warmup_seconds = o.warmup;
  ro.threads = o.threads;
  ro.force = o.force || !o.resume;
  ro.dry_run = o.dry_run;
  ro.verify = o.verify;
  ro.command = command;
  set_shard(ro, o.c);
  set_progress(ro, o.quiet);
  ro.calibrate = !o.no_calibrate;
  ro.cold = o.cold;
  auto runs = bench_thread_budget(db ? &*db : nullptr, *l, ro, o.threads_exact, o.dry_run, o.verify);
  if (!runs) {
    std::fprintf(stderr, "floorline bench: %s\n", runs.error().message.c_str());
    return 2;
  }
  bool failed = false;
  for (const auto& r : *runs) {
    if (!o.dry_run)
      std::fprintf(stderr, "results in %s (run %lld, %d thread(s))\n", o.db.c_str(),
                   static_cast<long long>(r.run_id), r.threads);
    if (r.interrupted) return 130;
    failed = failed || r.failed;
  }
  // A shard holds some cases of each config only: its best cases are not S's.
  if (o.cache_states && db && !o.dry_run && o.c.shard.empty() && !runs->empty())
    if (auto st = run_cache_stage(*db, *l, runs->back().system_id, o.threads_exact, ro.huge_pages); !st) {
      std::fprintf(stderr, "floorline bench: %s\n", st.error().message.c_str());
      return 2;
    }
  return l->failures || failed ? 1 : 0;
}

}  // namespace

Status run_cache_stage(benchdb::Database& db, const Loaded& l, int64_t system_id, bool exact,
                       bool huge_pages) {
  gen::CacheStageOptions cso;
  cso.thread_budget = !exact;
  cso.huge_pages = huge_pages;
  // The cases E's layout choice moves layers to, so that E reads their own cold readings
  // (analyzer layout_choice_cases; docs/ANALYZER.md, "The layout choice").
  if (auto costs = analyzer::load_costs(db, system_id, !exact); costs.ok()) {
    for (const auto& m : l.models)
      for (auto& c : analyzer::layout_choice_cases(m, *costs, "f32")) cso.also.insert(std::move(c));
  } else {
    std::fprintf(stderr, "      cache states: S's cases only (the layout choice's could not be read: %s)\n",
                 costs.error().message.c_str());
  }
  FL_ASSIGN_OR_RETURN(const auto cs,
                      gen::time_cache_states(db, l.plan, l.backends, system_id, DType::kF32, cso));
  std::vector<std::string> states;
  for (const auto st : cso.states) {
    states.emplace_back(gen::cache_state_name(st));
    if (st == gen::CacheState::kMemory) {
      states.emplace_back("memory with the output evicted too");
      states.emplace_back(fmt::format("memory among dirty lines ({} calls)", gen::kDirtySamples));
    }
  }
  std::fprintf(
      stderr,
      "      cache states: %lld best case(s), %lld timed (%s; %d single calls each, %d for a call of %g ms "
      "or more), %lld timed before, %lld failed, %.1f s%s%s\n",
      static_cast<long long>(cs.cases), static_cast<long long>(cs.timed),
      fmt::format("{}", fmt::join(states, ", ")).c_str(), cso.samples, cso.long_samples, cso.long_call * 1e3,
      static_cast<long long>(cs.present), static_cast<long long>(cs.failed), cs.seconds,
      cs.retaken ? fmt::format(" ({} call(s) taken again: switched out during them)", cs.retaken).c_str()
                 : "",
      cs.second_looks
          ? fmt::format(" ({} case(s) timed again, their warm call over {} x the bench's; {} lower)",
                        cs.second_looks, gen::kSecondLookAbove, cs.second_lower)
                .c_str()
          : "");
  const bool color = use_color(stderr);
  for (const auto& e : cs.errors)
    std::fprintf(stderr, "        %s %s\n", yellow("failed:", color).c_str(), e.c_str());
  return {};
}

void add_method_options(CLI::App* app, MethodCli& m) {
  app->add_option("--passes", m.passes,
                  fmt::format("Interleaved passes over the cases, each on a fresh build (buffer placement); "
                              "the best placement is kept (default {})",
                              gen::RunOptions{}.passes))
      ->check(int_in(1, kMaxRepetitions, "passes"));
  app->add_option("--min-iterations", m.min_iterations,
                  fmt::format("Calls per repetition at least, for long cases (default {})",
                              gen::RunOptions{}.min_iterations))
      ->check(int_in(1, kMaxRepetitions, "iterations"));
  app->add_option("--long-call", m.long_call,
                  fmt::format("Seconds: a call this long or longer is a repetition on its own, "
                              "--min-iterations holds below it (0: always; default {:g})",
                              gen::RunOptions{}.long_call))
      ->check(CLI::Range(0.0, 3600.0));
  app->add_option("--pass-block", m.pass_block,
                  fmt::format("Cases per block of interleaved passes (0: all of a backend's; default {}); a "
                              "block's cases are written once its passes are done",
                              gen::RunOptions{}.pass_block));
  app->add_option("--placements", m.placements,
                  "Buffer placements per case (0: a new one for every pass and re-measurement, the "
                  "default; N: pass i uses placement i mod N); the best placement is kept")
      ->check(int_in(0, kMaxRepetitions, "placements"));
  app->add_option(
         "--max-placements", m.max_placements,
         fmt::format("Visits at most for a short case (call under {:.0f} µs) whose placements disagree "
                     "(second best more than {:.0f}% above the best): further placements until its best "
                     "is reached twice (default {}; the --passes value turns it off)",
                     gen::RunOptions{}.placement_search_below_us, gen::RunOptions{}.placement_tolerance * 100,
                     gen::RunOptions{}.max_placements))
      ->check(int_in(1, kMaxRepetitions, "placements"));
  app->add_option("--settle", m.settle,
                  fmt::format("Repetitions at most added to a visit of a case under {:.0f} µs whose last "
                              "repetition is still its lowest by more than {:.0f}% (settling; 0: never; "
                              "default {})",
                              gen::RunOptions{}.settle_below_us, gen::RunOptions{}.settle_within * 100,
                              gen::RunOptions{}.settle_repetitions))
      ->check(int_in(0, kMaxRepetitions, "repetitions"));
  app->add_flag("--huge-pages,!--no-huge-pages", m.huge_pages,
                "Put large host buffers on transparent huge pages where the system allows it "
                "(madvise(MADV_HUGEPAGE); default on; recorded in runs.options as \"buffers\")");
  app->add_flag(
      "--sentinel,!--no-sentinel", m.sentinel,
      "Time a sentinel kernel between cases and time again the cases of a slowed period (default on)");
  app->add_flag(
      "--race,!--no-race", m.race,
      fmt::format("Race the implementations of each config: a case {:g}x its group's best on one reading, "
                  "{:g}x on two, or {:g}x on its warm-up call ends raced out (default on)",
                  gen::RunOptions{}.race_drop, gen::RunOptions{}.race_margin, gen::RunOptions{}.race_warmup));
}

void set_method(gen::RunOptions& ro, gen::CostOptions& costs, const MethodCli& m) {
  if (m.passes) ro.passes = *m.passes;
  if (m.min_iterations) ro.min_iterations = *m.min_iterations;
  if (m.long_call) ro.long_call = *m.long_call;
  if (m.pass_block) ro.pass_block = *m.pass_block;
  if (m.placements) ro.placements = *m.placements;
  if (m.max_placements) ro.max_placements = *m.max_placements;
  if (m.settle) ro.settle_repetitions = *m.settle;
  ro.sentinel = m.sentinel;
  ro.huge_pages = m.huge_pages;
  if (!m.race) ro.race_margin = 0;
  costs.passes = ro.passes;
  costs.min_iterations = ro.min_iterations;
  costs.long_call = ro.long_call;
}

void set_progress(gen::RunOptions& ro, bool quiet) {
  if (quiet) {
    ro.progress = gen::Progress::kNone;
    return;
  }
  // The in-place line needs a terminal, and its escape codes are what NO_COLOR asks to go without.
  const char* no_color = std::getenv("NO_COLOR");
  const bool plain = (no_color && *no_color) || isatty(fileno(stderr)) == 0;
  ro.progress = plain ? gen::Progress::kLines : gen::Progress::kTerminal;
  // Tests set a short interval to see several lines in a few seconds.
  if (const char* v = std::getenv("FLOORLINE_PROGRESS_INTERVAL")) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (end != v && *end == '\0' && s > 0 && std::isfinite(s)) ro.progress_interval_seconds = s;
  }
}

void add_bench_commands(CLI::App& app, int& exit_code, const std::string& command_line) {
  auto plan = std::make_shared<PlanCmd>();
  auto* p =
      app.add_subcommand("plan", "Count (or --list) the benchmark cases of the unique layer configurations");
  add_common(p, plan->c);
  p->add_flag("--list", plan->list, "Every case, with its status and the command that re-runs it alone");
  p->add_option("--format", plan->format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  p->add_option("--out", plan->out, "Output file ('-' for stdout)");
  p->callback([plan, &exit_code] { exit_code = run_plan_cmd(*plan); });

  auto generate = std::make_shared<GenerateCmd>();
  auto* g = app.add_subcommand("generate",
                               "Write standalone Google Benchmark sources and a CMakeLists for the plan");
  add_common(g, generate->c);
  g->add_option("--out", generate->out, "Folder to write")->required();
  g->callback([generate, &exit_code] { exit_code = run_generate_cmd(*generate); });

  auto bench = std::make_shared<BenchCmd>();
  auto* b = app.add_subcommand("bench", "Time every planned case and store the results in a database");
  add_common(b, bench->c);
  b->add_option("--db", bench->db, "Results database (created if missing)");
  b->add_option("--min-time", bench->min_time, "Seconds per repetition, at least")
      ->check(real_in(0, kMaxSecondsPerCase, "seconds", true));
  b->add_option("--repetitions", bench->repetitions, "Repetitions per case and pass")
      ->check(int_in(1, kMaxRepetitions, "repetitions"));
  add_method_options(b, bench->method);
  b->add_option(
       "--warmup", bench->warmup,
       fmt::format("Warm-up seconds per case and pass before timing, one call at least (default {:g})",
                   gen::RunOptions{}.warmup_seconds))
      ->check(real_in(0, kMaxSecondsPerCase, "seconds"));
  b->add_option("--threads", bench->threads,
                "CPU threads available (a thread budget): every case is timed at 1, the powers of two below "
                "N, and N threads, each count its own system; S at N takes each layer's fastest")
      ->check(int_in(1, max_threads(), "threads: at most 4 x the hardware threads, 1024 at most"));
  b->add_flag("--threads-exact", bench->threads_exact,
              "Time at exactly --threads threads (one system), not at every count of the budget");
  add_isa_option(
      b,
      "The CPU libraries capped at this ISA, a system of its own (XNNPACK, which cannot be capped, "
      "left out)");
  b->add_flag(
      "--resume,!--no-resume", bench->resume,
      "Skip cases already passed or unsupported on this system (default); --no-resume measures again");
  b->add_flag("--force", bench->force, "Measure every case again (same as --no-resume)");
  b->add_flag("--quiet", bench->quiet, "No progress on stderr (the summary is still printed)");
  b->add_flag("--dry-run", bench->dry_run, "Plan and build every case, time nothing, write nothing");
  b->add_flag("--cold", bench->cold, "Flush the GPU's L2 cache before each timed call (cuda)");
  b->add_flag("--cache-states", bench->cache_states,
              "Afterwards, time each case S takes once more with its weights from memory and from the "
              "last-level cache, for the estimate E (as `run` does; CPU backends)");
  b->add_flag("--verify", bench->verify,
              "Check each case against the oracle (plain loops of the ONNX semantics) before timing");
  b->add_flag("--no-calibrate", bench->no_calibrate,
              "Do not measure the roofline peaks (a large MatMul and a large copy) the database lacks for "
              "this system");
  b->callback([bench, command_line, &exit_code] {
    if (bench->db.empty() && !bench->dry_run) {
      std::fprintf(stderr, "floorline bench: --db FILE is required (or --dry-run)\n");
      exit_code = 2;
      return;
    }
    exit_code = run_bench_cmd(*bench, command_line);
  });
}

}  // namespace floorline::cli
