// floorline run: models → layers → plan → bench → replay → analyze → reports, in one process.
#include "run_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "analyze_command.hpp"
#include "bench_command.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/common/output.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/replay.hpp"
#include "floorline/generator/runner.hpp"
#include "reference_stage.hpp"
#include "validate.hpp"

#ifndef FLOORLINE_SOURCE_DIR
#define FLOORLINE_SOURCE_DIR "."
#endif

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary

namespace {

namespace fs = std::filesystem;

struct RunCmd {
  CommonOptions c;
  MethodCli method;
  std::string db;  // default: OUT/floorline.db
  std::string out = "floorline-out";
  bool quick = false;
  int threads = 1;
  bool threads_exact = false;
  std::optional<int> repetitions;
  std::optional<double> min_time;
  bool replay = true;
  bool cache_states = true;   // time the best cases with cold caches, for E (--quick: off)
  bool replay_given = false;  // --replay or --no-replay on the command line (--quick: no replay unless asked)
  bool reference = true;      // the reference runtime (ONNX Runtime) for M, when installed
  size_t replay_steps = 0;
  bool replay_denormals = false;
  double retime_below = 1.05;  // re-time a model's cases after its replay when replay / S is below this
  size_t top = 1;
  bool quiet = false;
  bool fail_on_violation = false;  // exit kExitBoundViolation when a latency is below S
  // A sweep over several batch sizes runs whole, one batch after the other (run_main): kBatch is one
  // of those runs (its table on stderr), kSweep the last, over every batch (the table on stdout).
  enum class Stage { kWhole, kBatch, kSweep };
  Stage stage = Stage::kWhole;
};

// Models that already have a replay on this system at one of these batches.
Result<std::set<std::pair<std::string, int64_t>>> replayed(benchdb::Database& db, int64_t system_id) {
  std::set<std::pair<std::string, int64_t>> out;
  FL_TRY(db.for_each("SELECT model_name, batch FROM replays WHERE system_id = ?1", {system_id},
                     [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                       out.insert({std::get<std::string>(v[0]), std::get<int64_t>(v[1])});
                       return Status{};
                     }));
  return out;
}

int run_main(RunCmd o, const std::string& command_line) {
  const auto t_start = std::chrono::steady_clock::now();
  const bool color = use_color(stderr);
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "floorline run: %s\n", msg.c_str());
    return 2;
  };
  // A sweep (--batch 1,8,32): the whole run at each batch size in turn, smallest first (bench,
  // replay, cache states, ONNX Runtime and the reports), so that a batch's results are complete
  // before the next, longer one starts: on 2 cores the zoo's batch 1 is minutes and its batch 32
  // hours. Batch 8's racing order learns from batch 1's races in the database, as it did within one
  // bench. Then one more run over every batch (everything measured: it plans, finds it all, and
  // analyzes) writes the reports and the table of the whole sweep. Shards stay one bench.
  if (o.stage == RunCmd::Stage::kWhole && o.c.batches.size() > 1 && o.c.shard.empty()) {
    std::vector<int64_t> batches = o.c.batches;
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    int worst = 0;
    for (size_t k = 0; k < batches.size(); ++k) {
      RunCmd one = o;
      one.c.batches = {batches[k]};
      one.stage = RunCmd::Stage::kBatch;
      std::fprintf(stderr, "[batch %lld, %zu of %zu] the run at batch %lld (%.1f s into the sweep)\n",
                   static_cast<long long>(batches[k]), k + 1, batches.size(),
                   static_cast<long long>(batches[k]), seconds_since(t_start));
      const int rc = run_main(one, command_line);
      if (rc == 130 || rc == 2) return rc;
      worst = std::max(worst, rc);
    }
    std::fprintf(stderr, "[batches %s] the report over every batch (%.1f s into the sweep)\n",
                 fmt::format("{}", fmt::join(batches, ",")).c_str(), seconds_since(t_start));
    RunCmd all = o;
    all.stage = RunCmd::Stage::kSweep;
    const int rc = run_main(all, command_line);
    std::fprintf(stderr, "floorline run: the sweep done in %.1f s\n", seconds_since(t_start));
    return rc != 0 ? rc : worst;
  }
  if (o.c.models.empty()) {
    auto zoo = embedded_zoo();
    if (!zoo)
      return fail(
          "no MODELS given and the embedded zoo (models/zoo) is not here: name ONNX files or folders");
    o.c.models.push_back(*zoo);
  }
  const gen::RunOptions defaults;
  const int repetitions = o.repetitions.value_or(o.quick ? 1 : defaults.repetitions);
  const double min_time = o.min_time.value_or(defaults.min_time);
  // --quick: one pass, one call at least per repetition (the method's rigour traded for time).
  MethodCli method = o.method;
  if (o.quick) {
    if (!method.passes) method.passes = 1;
    if (!method.min_iterations) method.min_iterations = 1;
  }
  if (o.quick && !o.c.all_impls && (o.c.max_impls == 0 || o.c.max_impls > 2)) o.c.max_impls = 2;
  // --quick is a first look (docs/MEASUREMENT.md, "What it costs"): no replay unless asked for, and
  // so no layout conversions to time (the replay is what runs them; the blocked-layout finding,
  // which sums them, is left out), no re-measurement of a case timed in a slowed period (the bound
  // check still times again, with the full method, the cases of a layer a framework beats).
  if (o.quick && !o.replay_given) o.replay = false;
  if (o.quick && !o.replay) o.c.no_conversions = true;

  // Backend: auto is the GPU's backend when one is usable, else every CPU backend that can run.
  if (o.c.backend == "auto") {
    auto choice = gen::choose_backend();
    if (!choice) return fail(choice.error().message);
    std::fprintf(stderr, "backend %s\n", choice->why.c_str());
    std::string names;
    for (const gen::Backend* b : choice->all) names += (names.empty() ? "" : ",") + b->name();
    o.c.backend = names;
  }

  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return fail(fmt::format("cannot create {}: {}", o.out, ec.message()));
  if (o.db.empty()) o.db = (fs::path(o.out) / "floorline.db").string();

  // 1. layers and plan
  auto loaded = plan_models(o.c);
  if (!loaded) return fail(loaded.error().message);
  Loaded& l = *loaded;
  if (l.models.empty()) return fail("no model could be processed");
  const double warmup = o.quick ? 0.0005 : defaults.warmup_seconds;
  gen::CostOptions costs;
  costs.min_time = min_time;
  costs.repetitions = repetitions;
  costs.warmup_seconds = warmup;
  costs.threads = o.threads;
  gen::RunOptions ro;
  set_method(ro, costs, method);
  if (o.quick) {
    ro.remeasure = false;
    ro.reuse_frames = ro.passes <= 1;  // placements compared (--passes N) need frames of their own
  }
  if (auto st = select_shard(l, o.c, costs, "run"); !st) return fail(st.error().message);
  int64_t layers = 0;
  std::set<std::string> files;
  for (const auto& m : l.models) {
    layers += static_cast<int64_t>(m.layers.size());
    files.insert(m.path.string());
  }
  int64_t to_time = 0;
  for (const auto& c : l.plan.cases) to_time += c.status ? 0 : 1;
  std::fprintf(stderr,
               "[1/4] layers: %zu model(s) at batch %s: %lld layers, %zu unique configs, %zu cases (%lld to "
               "time), %.1f s\n",
               files.size(), fmt::format("{}", fmt::join(o.c.batches, ",")).c_str(),
               static_cast<long long>(layers), l.plan.configs.size(), l.plan.cases.size(),
               static_cast<long long>(to_time), l.plan_seconds);

  // 2. bench (resumes: what an earlier run measured is not measured again)
  auto opened = open_for_writing("run", o.db);
  if (!opened) return fail(opened.error().message);
  benchdb::Database db = std::move(opened).value();
  ro.min_time = min_time;
  ro.repetitions = repetitions;
  ro.warmup_seconds = warmup;
  ro.threads = o.threads;
  ro.command = command_line;
  set_shard(ro, o.c);
  set_progress(ro, o.quiet);
  std::fprintf(
      stderr,
      "[2/4] bench into %s (%d pass(es) x %d repetitions of %g s and %d calls at least per case%s, "
      "at %s thread(s))\n",
      o.db.c_str(), ro.passes, repetitions, min_time, ro.min_iterations,
      ro.min_iterations > 1 && ro.long_call > 0
          ? fmt::format(" (one of {:g} s or more)", ro.long_call).c_str()
          : "",
      fmt::format("{}", fmt::join(gen::budget_thread_counts(o.threads, o.threads_exact), ", ")).c_str());
  auto budget = bench_thread_budget(&db, l, ro, o.threads_exact, false, false);
  if (!budget) return fail(budget.error().message);
  if (budget->back().interrupted) return 130;
  // The run's own system is the last count's (o.threads); what any count measured is new work.
  gen::RunSummary* bench = &budget->back();
  // The configs that gained a passed case at any thread count: a model with none keeps its replay.
  std::set<std::string> passed_configs;
  bool failed_in_budget = false;
  for (const auto& r : *budget) {
    passed_configs.insert(r.passed_configs.begin(), r.passed_configs.end());
    failed_in_budget = failed_in_budget || r.failed;
  }
  if (!o.c.shard.empty()) {
    // A shard holds some cases of each model: the replay and the bounds need all of them.
    std::fprintf(stderr,
                 "[3/4] replay and [4/4] analyze: not for one shard; merge the shards' databases "
                 "(`floorline db merge`), then `floorline db coverage` and `floorline analyze` the result\n"
                 "floorline run: shard %s done in %.1f s; database: %s\n",
                 o.c.shard.c_str(), seconds_since(t_start), o.db.c_str());
    return l.failures || failed_in_budget ? 1 : 0;
  }

  // 3. replay: each model's best cases wired as its graph, timed as one pass
  const int64_t system_id = bench->system_id;
  int replay_failures = 0;
  if (o.replay && !l.backends.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto chosen = gen::best_cases(db, system_id, l.plan, DType::kF32, !o.threads_exact);
    // The fused cases of the activation epilogues S counts (docs/ANALYZER.md): the replay runs them too.
    auto epilogues = gen::best_fused_cases(db, system_id, l.plan, DType::kF32, !o.threads_exact);
    // Every passed case: the layout-aware choice may run a layer with another to save conversions.
    auto alternatives = gen::passed_cases(db, system_id, l.plan, DType::kF32, !o.threads_exact);
    auto done = replayed(db, system_id);
    if (!chosen) return fail(chosen.error().message);
    if (!epilogues) return fail(epilogues.error().message);
    if (!alternatives) return fail(alternatives.error().message);
    if (!done) return fail(done.error().message);
    const gen::Backend& backend = *l.backends.front();
    gen::ReplayOptions rpo;
    rpo.threads = o.threads;
    rpo.conversion_threads = gen::budget_thread_counts(o.threads, o.threads_exact);
    rpo.repetitions = repetitions;
    rpo.min_time = o.quick ? 0.01 : 0.05;
    rpo.profile_passes = o.quick ? 1 : 5;
    rpo.paired = !o.quick;
    if (o.quick) rpo.profile_seconds = 0;
    rpo.flush_denormals = !o.replay_denormals;
    rpo.huge_pages = ro.huge_pages;
    // The sentinel the bench judged S's cases by (its own for a device backend, the CPU's at the
    // run's threads), so that a slowed repetition of the replay is timed again as a case would be.
    if (ro.sentinel) {
      rpo.sentinel = gen::sentinel_clock(backend, o.threads);
      rpo.sentinel_slow_factor = ro.sentinel_slow_factor;
    }
    std::vector<gen::ReplayResult> written;  // the replays stored by this run
    std::vector<const mp::ModelIR*> written_models;
    int replays = 0, kept = 0, retimed_models = 0, retimed_cases = 0;
    double retime_seconds = 0;
    bool interrupted = false;
    // The configs a re-timing after a replay lowered: a model kept from an earlier run whose layers
    // hold one is replayed too (its S and its cases moved).
    std::set<std::string> lowered_configs;
    // One replay of `m`, and the re-timing after it; nullopt when it failed (said, and counted as
    // a failure unless it is a second look: the first replay then stands).
    auto replay_and_retime = [&](const mp::ModelIR& m, bool second_look) -> std::optional<gen::ReplayResult> {
      auto r = gen::replay_model(m, *chosen, backend, second_look ? gen::second_look_options(rpo) : rpo,
                                 *epilogues, *alternatives);
      if (!r) {
        if (second_look) {
          std::fprintf(stderr, "%s the replay's second look: %s (the first stands)\n",
                       yellow("warning:", color).c_str(), r.error().message.c_str());
        } else {
          std::fprintf(stderr, "%s replay: %s\n", red("error:", color).c_str(), r.error().message.c_str());
          ++replay_failures;
        }
        return std::nullopt;
      }
      // A replay below S, or close to it: the cases it beat were measured on a slower machine than
      // now (replay.hpp); they are timed again, keeping the lower measurement, before the row is
      // written.
      const double ratio_before = r->ratio();
      // (A re-timing times cases of this model's layers only: its configs are the ones it can lower.)
      std::unordered_map<std::string, double> chosen_before;
      for (const auto& layer : m.layers)
        if (auto it = chosen->find(layer.key); it != chosen->end())
          chosen_before.emplace(layer.key, it->second.us);
      auto rt = gen::retime_after_replay(db, m, l.plan, l.backends, ro, system_id, DType::kF32, *chosen, *r,
                                         o.retime_below);
      if (rt && rt->rounds > 0)
        for (const auto& [key, us] : chosen_before)
          if (auto it = chosen->find(key); it != chosen->end() && it->second.us < us)
            lowered_configs.insert(key);
      if (!rt) {
        std::fprintf(stderr, "%s re-timing after the replay: %s\n", yellow("warning:", color).c_str(),
                     rt.error().message.c_str());
      } else if (rt->rounds > 0) {
        if (rt->run.interrupted) interrupted = true;
        ++retimed_models;
        retimed_cases += rt->cases;
        retime_seconds += rt->seconds;
        std::fprintf(
            stderr,
            "  re-timed %-24s b%-3lld %d case(s) the replay beat (%d round(s)), %d config(s) lower: S "
            "%.1f -> %.1f us, replay/S %.3f -> %.3f (%.1f s)\n",
            m.name.c_str(), static_cast<long long>(m.batch), rt->cases, rt->rounds, rt->lowered,
            rt->cases_us_before, rt->cases_us_after, ratio_before, r->ratio(), rt->seconds);
      }
      return std::move(*r);
    };
    // The models kept, each once: those whose layers' configs gained no passed case in this run.
    auto touched_by = [](const mp::ModelIR& m, const std::set<std::string>& keys) {
      return std::any_of(m.layers.begin(), m.layers.end(),
                         [&](const mp::Layer& layer) { return keys.count(layer.key) > 0; });
    };
    std::vector<const mp::ModelIR*> order, kept_models;
    for (const auto& m : l.models) {
      // Nothing new measured for its layers: an earlier replay of this model still stands (cases
      // measured for other models' configs change neither its S nor the cases its replay runs,
      // unless a re-timing below lowers one of its configs: then it is replayed after the others).
      if (!touched_by(m, passed_configs) && done->count({m.name, m.batch}))
        kept_models.push_back(&m);
      else
        order.push_back(&m);
    }
    for (size_t next = 0;; ++next) {
      if (next == order.size()) {  // the kept models whose configs a re-timing lowered, then
        for (auto it = kept_models.begin(); it != kept_models.end();)
          if (touched_by(**it, lowered_configs)) {
            order.push_back(*it);
            it = kept_models.erase(it);
          } else {
            ++it;
          }
        if (next == order.size()) break;
      }
      const mp::ModelIR& m = *order[next];
      auto replayed_now = replay_and_retime(m, false);
      if (interrupted) return 130;
      if (!replayed_now) continue;
      gen::ReplayResult* r = &*replayed_now;
      if (auto st = db.upsert_replay(gen::replay_row(*r, system_id, bench->run_id, "f32")); !st)
        return fail(st.error().message);
      written.push_back(*r);
      written_models.push_back(&m);
      ++replays;
      std::fprintf(
          stderr,
          "  replay %-26s b%-3lld %9.1f us = S %9.1f us x %.2f (in-graph cases %.1f us, %d conversions %.1f "
          "us%s)%s%s\n",
          m.name.c_str(), static_cast<long long>(m.batch), r->min_us, r->cases_us, r->ratio(), r->layers_us,
          r->conversions, r->conversions_us,
          r->alternatives ? fmt::format("; {} layer(s) on another case for its layouts, +{:.1f} us alone",
                                        r->alternatives, r->alternatives_us)
                                .c_str()
                          : "",
          r->layers_missing ? fmt::format(", {} layer(s) without a case", r->layers_missing).c_str() : "",
          r->slow_steps ? fmt::format("; {} layer(s) over {}x their time alone, {} without a named cause",
                                      r->slow_steps, gen::kSlowStep, r->slow_unexplained)
                              .c_str()
                        : "");
      if (r->pairs > 0 && r->steps_alone_us > 0)
        std::fprintf(stderr,
                     "    paired: the pass is %.2fx its layers alone in the same moments (median of %d), "
                     "%.1f us at the host's state when S was timed (replay/S %.2f); the host ran %.2fx "
                     "slower than then%s\n",
                     r->paired_ratio, r->pairs, r->paired_us(),
                     r->cases_us > 0 ? r->paired_us() / r->cases_us : 0.0, r->host_slowdown(),
                     gen::wants_second_look(*r) ? " (a second look follows)" : "");
      if (r->slowed_repetitions > 0)
        std::fprintf(stderr,
                     "    sentinel: %d repetition(s) timed while the machine was slowed, timed again\n",
                     r->slowed_repetitions);
      if (r->denormal_steps > 0 || r->nonfinite_steps > 0) {
        // The data check (gen::ReplayResult::denormal_steps): values a trained model would not make.
        const auto first = std::find_if(r->steps.begin(), r->steps.end(), [](const gen::ReplayStep& s) {
          return s.denormals > 0 || s.nonfinite > 0;
        });
        std::fprintf(stderr,
                     "    data: %d layer(s) wrote denormal values, %d infinities or NaN (first: %s): the "
                     "replay's time reflects its data as well as its kernels\n",
                     r->denormal_steps, r->nonfinite_steps,
                     first != r->steps.end() ? first->label.c_str() : "?");
      }
      if (o.replay_steps > 0) {
        // The steps that cost most over their time alone (a conversion has no time alone).
        auto steps = r->steps;
        std::sort(steps.begin(), steps.end(), [](const gen::ReplayStep& a, const gen::ReplayStep& b) {
          return a.in_graph_us - a.alone_us > b.in_graph_us - b.alone_us;
        });
        for (size_t k = 0; k < steps.size() && k < o.replay_steps; ++k)
          std::fprintf(
              stderr,
              "      +%8.1f us  %8.1f us in the graph vs %8.1f us alone%s  %s [%s, %d thread(s)%s]%s\n",
              steps[k].in_graph_us - steps[k].alone_us, steps[k].in_graph_us, steps[k].alone_us,
              // The paired time alone, in the same moments as the graph's (the host's load on both).
              steps[k].alone_now_us > 0 ? fmt::format(" ({:.1f} in its pairs)", steps[k].alone_now_us).c_str()
                                        : "",
              steps[k].label.c_str(), steps[k].backend.c_str(), steps[k].threads,
              steps[k].alternative ? ", chosen for its layouts" : "",
              steps[k].slow()
                  ? fmt::format(" ({})", steps[k].cause().empty() ? "no named cause" : steps[k].cause())
                        .c_str()
                  : "");
      }
    }
    kept = static_cast<int>(kept_models.size());
    // The second look (gen::wants_second_look): a replay timed while the host ran slower than when
    // S was timed is timed once more, now that every other model's replay has run; the lower of
    // the two stands, as the lower of a case's passes does (gen::take_second_look).
    int second_looks = 0, second_lower = 0;
    for (size_t k = 0; k < written.size(); ++k) {
      gen::ReplayResult& first = written[k];
      if (!gen::wants_second_look(first)) continue;
      ++second_looks;
      const mp::ModelIR& m = *written_models[k];
      auto again = replay_and_retime(m, true);
      if (interrupted) return 130;
      if (!again) continue;
      const double first_us = first.min_us, first_ratio = first.ratio();
      const bool lower = gen::take_second_look(first, *again);
      std::fprintf(stderr,
                   "  second look %-21s b%-3lld %9.1f us = S x %.2f, first %.1f us = S x %.2f: %s stands\n",
                   m.name.c_str(), static_cast<long long>(m.batch), again->min_us, again->ratio(), first_us,
                   first_ratio, lower ? "the second" : "the first");
      second_lower += lower ? 1 : 0;
      if (auto st = db.upsert_replay(gen::replay_row(first, system_id, bench->run_id, "f32")); !st)
        return fail(st.error().message);
    }
    // A re-timing lowers configs other models share: the rows written before it are written again
    // with their layers' times as they now stand (the bound check names layers by them).
    if (retimed_models > 0)
      for (auto& r : written) {
        gen::rebase(r, *chosen);
        if (auto st = db.upsert_replay(gen::replay_row(r, system_id, bench->run_id, "f32")); !st)
          return fail(st.error().message);
      }
    std::fprintf(
        stderr, "[3/4] replay: %d model(s) replayed, %d kept from an earlier run, %d failed, %.1f s%s%s\n",
        replays, kept, replay_failures, seconds_since(t0),
        second_looks
            ? fmt::format(" ({} second look(s), {} lower than the first)", second_looks, second_lower).c_str()
            : "",
        retimed_models ? fmt::format(" ({} case(s) of {} model(s) re-timed in {:.1f} s)", retimed_cases,
                                     retimed_models, retime_seconds)
                             .c_str()
                       : "");
  } else {
    std::fprintf(stderr, "[3/4] replay: not asked for\n");
  }

  // The cache states of S's cases, for the composed estimate E (generator/cache_state.hpp).
  if (o.cache_states && !o.quick && !l.backends.empty())
    if (auto st = run_cache_stage(db, l, system_id, o.threads_exact, ro.huge_pages); !st)
      return fail(st.error().message);

  // The reference runtime: M from ONNX Runtime, end to end and per layer (reference_stage.hpp).
  if (o.reference) {
    ReferenceStageOptions ref;
    for (const auto& f : files) ref.models.emplace_back(f);
    ref.batches = o.c.batches;
    ref.dims = o.c.dims;
    for (const auto& m : l.models) ref.scenarios[m.path].insert(m.name);
    ref.threads = o.threads;
    ref.quick = o.quick;
    ref.out = o.out;
    (void)run_reference_stage(db, ref);
  } else {
    std::fprintf(stderr, "[ref] reference runtime: not asked for (--no-reference)\n");
  }

  // 4. analyze
  const auto t_analyze = std::chrono::steady_clock::now();
  analyzer::AnalyzeOptions analyze_options;
  analyze_options.thread_budget = !o.threads_exact;
  auto report = analyzer::build_report(db, l.models, system_id, analyze_options);
  if (!report) return fail(report.error().message);
  // A framework latency below S: the cases of the layers it beats are timed again with the full
  // method (bench's defaults, whatever --quick or --passes said), keeping the lower time, and the
  // analysis is done again: a case timed in a slowed period or on a first look's one repetition
  // may overstate its layer (docs/ANALYZER.md, "The bound check").
  // Up to kBoundCheckRounds rounds: a violation one round leaves (its cases timed again while the
  // host was still slowed: the 2026-11-29 sweep's vit_b_16 at batch 1 on 2 threads, S 270.2 ms
  // after one round against ONNX Runtime's 266.9, 264.3 when the run was repeated minutes later) is
  // timed again in the next, each a few seconds later than the last.
  if (o.retime_below > 0 && !l.backends.empty()) {
    constexpr int kBoundCheckRounds = 3;
    gen::RunOptions full = ro;
    full.passes = defaults.passes;
    full.repetitions = defaults.repetitions;
    full.min_time = defaults.min_time;
    full.min_iterations = defaults.min_iterations;
    full.warmup_seconds = defaults.warmup_seconds;
    full.max_placements = defaults.max_placements;
    full.placements = defaults.placements;
    full.remeasure = defaults.remeasure;
    full.reuse_frames = defaults.reuse_frames;
    full.first_call_counts = defaults.first_call_counts;
    struct Retimed {
      int cases = 0, rounds = 0;
      double seconds = 0, before = 0;
    };
    std::map<std::pair<std::string, int64_t>, Retimed> retimed;
    // The plan's timed cases and the configs they time (the same every round).
    std::set<std::string> timed_cases;
    std::map<std::string, std::vector<std::string>> cases_of_config;
    std::map<std::string, std::string> config_of_case;
    for (const auto& c : l.plan.cases) {
      if (c.status) continue;
      timed_cases.insert(c.spec.name);
      if (c.conversion || c.reference) continue;
      cases_of_config[c.spec.problem.key].push_back(c.spec.name);
      config_of_case[c.spec.name] = c.spec.problem.key;
    }
    for (int round = 0; round < kBoundCheckRounds; ++round) {
      auto names = analyzer::cases_to_retime(*report);
      if (names.empty()) break;
      auto chosen = gen::best_cases(db, system_id, l.plan, DType::kF32, !o.threads_exact);
      if (!chosen) return fail(chosen.error().message);
      // The report names best cases from the database: an earlier, wider run's may not be timed
      // cases of this plan (left out); a case shared by several models is timed again once a round.
      // With each best case, every other timed case of its config (its runner-ups, at every thread
      // count, fused or not): the layer's true best may be one of them, timed while the host was
      // slowed (all its passes within a loaded minute; the sentinel, a core-bound kernel, does not
      // see a neighbour's load on the shared caches), as resnet50's 3×3 convolutions at 14 × 14
      // were in the 2026-11-29 sweep: oneDNN's 3.5 ms there against 2.6 in the sweep before.
      std::set<std::string> done;
      bool any = false;
      for (const auto& m : l.models) {
        const auto it = names.find({m.name, m.batch});
        if (it == names.end()) continue;
        std::vector<std::string> mine;
        for (const auto& n : it->second) {
          if (timed_cases.count(n) && done.insert(n).second) mine.push_back(n);
          if (const auto k = config_of_case.find(n); k != config_of_case.end())
            for (const auto& other : cases_of_config[k->second])
              if (done.insert(other).second) mine.push_back(other);
        }
        if (mine.empty()) continue;
        gen::ReplayResult none;
        auto rt =
            gen::retime_cases(db, m, l.plan, mine, l.backends, full, system_id, DType::kF32, *chosen, none);
        if (!rt) {
          std::fprintf(stderr, "%s re-timing after the bound check: %s\n", yellow("warning:", color).c_str(),
                       rt.error().message.c_str());
          continue;
        }
        if (rt->run.interrupted) return 130;
        auto [at, fresh] = retimed.try_emplace({m.name, m.batch});
        if (fresh) at->second.before = analyzer::s_of(*report, m.name, m.batch);
        at->second.cases = std::max(at->second.cases, rt->cases);  // the same cases each round
        at->second.rounds += 1;
        at->second.seconds += rt->seconds;
        any = true;
      }
      if (!any) break;
      report = analyzer::build_report(db, l.models, system_id, analyze_options);
      if (!report) return fail(report.error().message);
    }
    for (const auto& [key, r] : retimed)
      std::fprintf(stderr,
                   "  re-timed %-24s b%-3lld %d case(s) of the layers a framework beat and their runner-ups, "
                   "with the full method, in %d round(s): S %.1f -> %.1f us (%.1f s)\n",
                   key.first.c_str(), static_cast<long long>(key.second), r.cases, r.rounds, r.before,
                   analyzer::s_of(*report, key.first, key.second), r.seconds);
  }
  const std::string json_path = (fs::path(o.out) / "report.json").string();
  const std::string html_path = (fs::path(o.out) / "report.html").string();
  if (auto st = write_checked(json_path, analyzer::format_json(*report)); !st)
    return fail(st.error().message);
  if (auto st = write_checked(html_path, analyzer::format_html(*report)); !st)
    return fail(st.error().message);
  std::fprintf(stderr, "[4/4] analyze: %zu model report(s), %.1f s\n", report->models.size(),
               seconds_since(t_analyze));
  // One batch of a sweep prints its table on stderr: stdout ends with the whole sweep's.
  FILE* const table_out = o.stage == RunCmd::Stage::kBatch ? stderr : stdout;
  const std::string table = analyzer::format_table(*report, false, o.top);
  std::fwrite(table.data(), 1, table.size(), table_out);
  std::fprintf(table_out, "\nreports: %s, %s; database: %s\n", html_path.c_str(), json_path.c_str(),
               o.db.c_str());
  std::fprintf(stderr, "floorline run: done in %.1f s\n", seconds_since(t_start));
  // The validity check's line ends the run's output: a violation is a finding, and fails the run
  // only when asked.
  std::fprintf(table_out, "%s\n", output::terminal_safe(analyzer::validity_line(*report)).c_str());
  if (l.failures || failed_in_budget || replay_failures) return 1;
  return o.fail_on_violation && analyzer::validity_summary(*report).violations > 0 ? kExitBoundViolation : 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code, const std::string& command_line) {
  auto o = std::make_shared<RunCmd>();
  auto* r = app.add_subcommand(
      "run", "The main job: layers, plan, bench, replay and analyze in one go, with reports in --out");
  r->add_option("models", o->c.models, "ONNX files or folders (default: the embedded zoo, models/zoo)");
  r->add_option("--db", o->db, "Results database (default: OUT/floorline.db); an earlier run's is resumed");
  r->add_option("--backend", o->c.backend,
                "auto (the GPU backend when a GPU is usable, else every CPU backend that can run here: "
                "oneDNN, XNNPACK, OpenBLAS as found at build time) or a comma-separated list: cuda, onednn, "
                "xnnpack, openblas");
  r->add_option("--batch", o->c.batches, "Batch sizes, comma-separated (e.g. 1,8,32)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(int_in(1, kMaxBatch, "batch size"));
  add_dim_option(r, o->c.dims);
  r->add_option("--max-detections", o->c.max_detections,
                "Elements NonZero/NonMaxSuppression are assumed to select (their data-dependent sizes; "
                "reports state it)")
      ->check(int_in(1, kMaxBatch, "detections"));
  r->add_option("--out", o->out, "Folder for the database and the reports (report.html, report.json)");
  r->add_flag(
      "--quick", o->quick,
      "A first look: 1 pass of 1 repetition of 1 ms (a case whose first call takes that long: that call), at "
      "most "
      "2 implementations per config, no re-measurement, "
      "no replay (unless --replay) and so no layout conversions, ONNX Runtime 1 run (the batch sizes stay "
      "--batch's, default 1)");
  r->add_option("--threads", o->threads,
                "CPU threads available (a thread budget): cases are timed at 1, the powers of two below N, "
                "and N threads, and S, the replay and the reference runtime use N threads at most, each "
                "layer at its fastest count")
      ->check(int_in(1, max_threads(), "threads: at most 4 x the hardware threads, 1024 at most"));
  add_isa_option(
      r,
      "The CPU libraries capped at this ISA, a system of its own (XNNPACK, which cannot be capped, "
      "left out; no ONNX Runtime reference)");
  r->add_flag("--threads-exact", o->threads_exact,
              "Exactly --threads threads for every layer (one system), not the budget's fastest count");
  r->add_option("--repetitions", o->repetitions, "Repetitions per case and pass (default 3; --quick 1)")
      ->check(int_in(1, kMaxRepetitions, "repetitions"));
  r->add_option("--min-time", o->min_time, "Seconds per repetition, at least (default 0.001)")
      ->check(real_in(0, kMaxSecondsPerCase, "seconds", true));
  add_method_options(r, o->method);
  r->add_option(
       "--max-impls", o->c.max_impls,
       "Implementations timed per config (default: every one, raced: those that cannot win end raced "
       "out; --quick 2)")
      ->check(int_in(1, kMaxImpls, "implementations"));
  r->add_flag("--quiet", o->quiet,
              "No progress line during the benchmarks (the stage lines are still printed)");
  r->add_flag(
      "--all-impls", o->c.all_impls,
      "Time every implementation, the fused variants' too (slower; by default a fused variant times the "
      "first implementation of each algorithm family, layout and layout it reads)");
  r->add_flag("--cache-states,!--no-cache-states", o->cache_states,
              "Time each layer's best case once more with its weights and outputs from memory and from the "
              "last-level cache, for the estimate E (default on; --quick: off)");
  auto* replay_flag = r->add_flag("--replay,!--no-replay", o->replay,
                                  "Replay each model's best cases as its graph (default on; --quick: off)");
  r->add_flag("--reference,!--no-reference", o->reference,
              "Time the models in the reference runtime, ONNX Runtime, for M, end to end and per layer "
              "(default on when reference/onnxruntime is installed)");
  r->add_option(
       "--replay-steps", o->replay_steps,
       "Per model, the N replay steps that take longest over their time alone (conversions included)")
      ->check(int_in(0, kMaxListed, "steps"));
  r->add_flag("--replay-denormals", o->replay_denormals,
              "Replay with denormal arithmetic as the hardware does it (by default flushed to zero while the "
              "timed passes run, a guard; the replay's data check reports the layers that write denormals)");
  r->add_option("--retime-below", o->retime_below,
                "After a model's replay, time again the cases it ran faster in the graph than alone when "
                "replay / S is below this, keeping the lower time; and after the bound check, with the full "
                "method, the cases of the layers a framework latency below S beats (default 1.05; 0: never)")
      ->check(real_in(0, 100, "ratio"));
  r->add_flag("--fail-on-violation", o->fail_on_violation,
              "Exit with status 3 when a framework latency or the replay is below S (a bound violation; "
              "by default reported, not a failure)");
  r->add_option("--top", o->top, "Findings shown per model in the table (default 1)")
      ->check(int_in(0, kMaxListed, "findings"));
  r->add_option("--shard", o->c.shard,
                "Only shard I of N (I from 0 to N-1): bench its cases into --db, no replay or analysis "
                "(merge the shards, then analyze)");
  r->add_option("--shard-costs", o->c.shard_costs,
                "An earlier database whose measurements and peaks estimate the cases' times for --shard");
  r->callback([o, replay_flag, command_line, &exit_code] {
    o->replay_given = replay_flag->count() > 0;
    exit_code = run_main(*o, command_line);
  });
}

}  // namespace floorline::cli
