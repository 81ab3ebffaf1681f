// The runner writes every case's outcome to a database; a second run resumes.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/generator/calibration.hpp"
#include "floorline/generator/runner.hpp"
#include "kinds_model.hpp"
#include "test_support.hpp"

namespace floorline::gen {
namespace {

struct TempDb {
  std::filesystem::path dir;
  TempDb() {
    dir = std::filesystem::temp_directory_path() / ("floorline_runner_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~TempDb() { std::filesystem::remove_all(dir); }
  std::string file() const { return (dir / "r.db").string(); }
};

int64_t scalar(benchdb::Database& db, const std::string& sql) {
  auto r = db.query(sql);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() && !r->rows.empty() ? std::get<int64_t>(r->rows[0][0]) : -1;
}

// The ETA weighs cases by their estimated seconds: ten cases of 1 s done in 10 s of wall, one of
// 100 s left, is about 100 s left (counted alike: 1 s); a case raced out after one visit counts
// whole once its row is written; settled cases leave the total.
TEST(WorkEta, WeighsTheCasesLeftByTheirEstimatedSeconds) {
  WorkEta eta;
  EXPECT_LT(eta.eta(5), 0);  // nothing done yet: no estimate
  for (int k = 0; k < 10; ++k) eta.add(1);
  eta.add(100);
  eta.add(7);
  eta.settle(7);  // measured in an earlier run: not timed
  for (int k = 0; k < 10; ++k) {
    double counted = 0;
    for (int visit = 1; visit <= 3; ++visit) counted += eta.visited(1, 3, visit);
    EXPECT_DOUBLE_EQ(counted, 1);
    EXPECT_DOUBLE_EQ(eta.visited(1, 3, 4), 0);  // a re-measurement beyond its passes adds nothing
    eta.finished(1, counted);
  }
  EXPECT_NEAR(eta.eta(10), 100, 1e-9);
  // The large case's first visit: a third of it done.
  const double first = eta.visited(100, 3, 1);
  EXPECT_NEAR(first, 100.0 / 3, 1e-9);
  EXPECT_NEAR(eta.eta(10 + 100.0 / 3), 100 - 100.0 / 3, 1e-6);
  // Raced out on that visit: its row is written, the whole case is done.
  eta.finished(100, first);
  EXPECT_NEAR(eta.eta(50), 0, 1e-9);
}
TEST(Runner, StoresEveryCaseAndResumes) {
  TempDb tmp;
  auto models = mp::process_model_text(test::kKindsModel, "kinds.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.max_impls = 1;
  po.conversions = false;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  const Plan plan = make_plan(*models, backends, po);
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 3;
  ro.warmup_seconds = 0.0005;
  ro.verify = true;
  auto s = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->failed, 0);
  EXPECT_EQ(static_cast<size_t>(s->passed + s->skipped + s->unsupported), plan.cases.size());
  // Floor, cubic Resize, Sub with a broadcast first operand; and TopK, GatherND, RoiAlign,
  // ScatterElements and GridSample, which oneDNN has no primitive for (the floorline backend runs them);
  // and the split convolutions, which at one thread are the plain ones.
  int64_t splits = 0;
  // (None where the ISA's channel block is above the model's few output channels: 16 on AVX-512,
  // and the split cuts whole blocks; the count is the host's.)
  for (const auto& c : plan.cases)
    if (!c.status && c.spec.variant.algorithm.rfind("convolution_direct_split", 0) == 0) ++splits;
  EXPECT_EQ(s->unsupported, 8 + splits);
  EXPECT_GT(s->verified, 40);
  EXPECT_GT(s->timed_seconds, 0);
  EXPECT_LE(s->timed_seconds, s->wall_seconds);
  // The phases of the visits: each took time, the passed cases' timed calls are inside the
  // repetitions' wall time, and the phases together fit in the run's.
  EXPECT_GT(s->build_seconds, 0);
  EXPECT_GT(s->warmup_seconds, 0);
  EXPECT_GT(s->sentinel_seconds, 0);
  EXPECT_GE(s->repetition_seconds, s->timed_seconds);
  EXPECT_LE(s->build_seconds + s->warmup_seconds + s->repetition_seconds + s->sentinel_seconds,
            s->wall_seconds);

  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements"), static_cast<int64_t>(plan.cases.size()));
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE status='passed'"), s->passed);
  // Passed rows carry statistics over the repetitions (3 per pass, 3 passes, more for further placements or
  // to re-measure or while a visit's time still falls, each with at least min_iterations calls), the
  // passes' samples, and the counters.
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM measurements WHERE status='passed' AND (median_us IS NULL OR median_us <= 0 "
          "OR min_us > median_us OR repetitions < 9 OR passes < 3 OR "
          "placements != passes OR json_array_length(samples_us) != passes OR iterations < 2 * repetitions "
          "OR workspace_bytes IS NULL)"),
      0);
  // A repetition beyond 3 per visit is one settling added (RunOptions::settle_repetitions; the
  // summary counts those of cases later raced out too).
  const int64_t beyond =
      scalar(*db, "SELECT sum(repetitions) - 3 * sum(passes) FROM measurements WHERE status='passed'");
  EXPECT_GE(beyond, 0);
  EXPECT_LE(beyond, s->settle_repetitions);
  EXPECT_GT(
      scalar(
          *db,
          "SELECT count(*) FROM measurements WHERE status='passed' AND json_extract(extra, '$.gflops') > 0"),
      0);
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE status='unsupported' AND reason = ''"), 0);
  // One default case per config (unfused) that passed.
  EXPECT_EQ(
      scalar(*db,
             "SELECT count(*) FROM (SELECT c.config_id FROM measurements m JOIN cases c ON c.id = m.case_id "
             "WHERE m.is_default = 1 AND c.fusion = '' GROUP BY c.config_id HAVING count(*) > 1)"),
      0);
  EXPECT_EQ(
      scalar(*db,
             "SELECT count(*) FROM systems WHERE json_extract(libraries, '$.onednn') != '' AND threads = 1"),
      1);
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  // The roofline peaks were calibrated once for the system: a MatMul (FLOP/s) and a copy (bytes/s),
  // and the memory bandwidth: a copy of at least 4x the largest cache (never faster than the
  // roofline's bytes peak, the faster of a cached and an uncached copy, beyond 10% noise).
  // Any CPU that runs this suite does more than 1 GFLOP/s and copies more than 0.5 GB/s on one core.
  ASSERT_TRUE(s->calibration_error.empty()) << s->calibration_error;
  ASSERT_EQ(s->peaks.size(), 3u);
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM system_peaks m JOIN system_peaks b ON b.peak = 'bytes' AND b.math_mode = '' "
          "WHERE m.peak = 'bytes' AND m.math_mode = 'memory' AND m.value_per_s > 5e8 AND "
          "m.value_per_s < 1.1 * b.value_per_s AND m.method LIKE '%from memory%'"),
      1);
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM system_peaks WHERE peak = 'flops' AND dtype = 'f32' AND math_mode = 'fp32' "
          "AND value_per_s > 1e9 AND method LIKE 'onednn MatMul 2048x2048x2048%'"),
      1);
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM system_peaks WHERE peak = 'bytes' AND math_mode = '' AND dtype = 'f32' AND "
          "value_per_s > 5e8"),
      1);

  // Resume: passed, unsupported and raced-out cases are not measured again, nor are the cases the plan
  // skips (the --max-impls cap) already recorded as skipped; cases skipped at build time are tried again.
  int64_t planned_skips = 0;
  for (const auto& c : plan.cases) planned_skips += c.status == Disposition::kSkipped ? 1 : 0;
  ASSERT_GT(planned_skips, 0);
  const int64_t rows_before = scalar(*db, "SELECT count(*) FROM measurements");
  auto again = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->passed, 0);
  EXPECT_EQ(again->already_measured, s->passed + s->unsupported + planned_skips + s->raced_out);
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements") - rows_before, again->skipped + again->failed);
  EXPECT_TRUE(again->peaks.empty());  // the system's peaks are stored: no second calibration
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE superseded = 0"),
            static_cast<int64_t>(plan.cases.size()));
}

// One convolution, every oneDNN implementation with its reference (plain loops, tens of times slower
// than the JIT ones on any CPU that runs this suite).
constexpr const char* kOneConv = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
one_conv (float[1,32,28,28] x, float[32,32,3,3] w) => (float y)
{
  y = Conv <pads = [1, 1, 1, 1]> (x, w)
}
)onnx";

struct RaceRun {
  RunSummary summary;
  std::map<std::string, std::pair<std::string, std::string>> outcome;  // algorithm -> (status, reason)
  std::map<std::string, double> min_us;                                // algorithm -> its stored min_us
};

RaceRun race(benchdb::Database& db, const Plan& plan, const std::vector<mp::ModelIR>& models, RunOptions ro,
             const Backend* backend = nullptr) {
  RaceRun r;
  const std::vector<const Backend*> backends = {backend ? backend : find_backend("onednn")};
  auto s = run_plan(&db, models, plan, backends, ro);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  if (s.ok()) r.summary = *s;
  auto rows = db.query(
      "SELECT c.algorithm, m.status, m.reason, m.min_us FROM measurements m JOIN cases c ON c.id = m.case_id "
      "WHERE m.superseded = 0 AND c.conversion_tensor = '' AND c.fusion = ''");
  EXPECT_TRUE(rows.ok());
  for (const auto& row : rows->rows) {
    const auto algorithm = std::get<std::string>(row[0]);
    const auto* reason = std::get_if<std::string>(&row[2]);
    r.outcome[algorithm] = {std::get<std::string>(row[1]), reason ? *reason : ""};
    if (const auto* us = std::get_if<double>(&row[3])) r.min_us[algorithm] = *us;
  }
  return r;
}

// Our own kernels grow between commits under one version: a floorline case the plan times, stored
// unsupported by an older build, is timed again on resume, its old row superseded (a vendor's
// build-time unsupported case is not: StoresEveryCaseAndResumes); a third run finds it settled.
TEST(Runner, AnOwnKernelStoredUnsupportedIsTriedAgainOnResume) {
  TempDb tmp;
  auto models = mp::process_model_text(test::kKindsModel, "kinds.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.conversions = false;
  const std::vector<const Backend*> backends = {find_backend("floorline")};
  const Plan plan = make_plan(*models, backends, po);
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  auto s = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_GT(s->passed, 0);
  // One passed case as an older build would have left it.
  ASSERT_TRUE(
      db->query("UPDATE measurements SET status = 'unsupported', reason = 'an older build', min_us = NULL, "
                "median_us = NULL WHERE id = (SELECT min(id) FROM measurements WHERE status = 'passed')")
          .ok());
  auto again = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->passed, 1);
  EXPECT_EQ(
      scalar(*db, "SELECT count(*) FROM measurements WHERE superseded = 0 AND reason = 'an older build'"), 0);
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE superseded = 0 AND status = 'passed'"),
            s->passed);
  EXPECT_EQ(
      scalar(*db, "SELECT count(*) FROM measurements WHERE superseded = 1 AND reason = 'an older build'"), 1);
  auto third = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_EQ(third->passed, 0);
}

// Racing's layout groups: a layout variant named in its algorithm ("@nhwc", "@blocked8c",
// "@channels_last" before oneDNN's implementation) is its own layout, apart from the plain case of
// its config and from the other variants; XNNPACK's NHWC cases keep their CaseId layout.
TEST(Runner, RacingGroupsLayoutVariantsByTheLayoutTheirAlgorithmNames) {
  auto id = [](const std::string& backend, const std::string& algorithm, const std::string& layout) {
    CaseId c;
    c.backend = backend;
    c.algorithm = algorithm;
    c.layout = layout;
    return c;
  };
  EXPECT_EQ(race_layout(id("floorline", "concat", "")), "");
  EXPECT_EQ(race_layout(id("floorline", "concat@nhwc", "")), "@nhwc");
  EXPECT_EQ(race_layout(id("floorline", "binary@blocked8c", "")), "@blocked8c");
  EXPECT_EQ(race_layout(id("onednn", "convolution_direct@channels_last:jit:avx512_core", "")),
            "@channels_last");
  EXPECT_EQ(race_layout(id("onednn", "convolution_direct:jit:avx512_core", "")), "");
  EXPECT_EQ(race_layout(id("xnnpack", "convolution2d_nhwc_f32", "nhwc")), "nhwc");
  EXPECT_NE(race_layout(id("floorline", "concat@nhwc", "")),
            race_layout(id("floorline", "concat@blocked8c", "")));
}

// A repetition lasts min_time with min_iterations calls at least, unless one call lasts long_call
// (then it is the repetition); 0 turns that off.
TEST(Runner, ALongCallIsARepetitionOnItsOwn) {
  EXPECT_EQ(repetition_calls(7e-6, 0.003, 2, 0.03), 429);
  EXPECT_EQ(repetition_calls(1e-3, 0.0035, 2, 0.03), 4);
  EXPECT_EQ(repetition_calls(2e-3, 0.003, 2, 0.03), 2);   // min_time in two calls
  EXPECT_EQ(repetition_calls(10e-3, 0.003, 2, 0.03), 2);  // min_iterations
  EXPECT_EQ(repetition_calls(29.9e-3, 0.003, 2, 0.03), 2);
  EXPECT_EQ(repetition_calls(30e-3, 0.003, 2, 0.03), 1);  // a long call
  EXPECT_EQ(repetition_calls(300e-3, 0.003, 5, 0.03), 1);
  EXPECT_EQ(repetition_calls(300e-3, 0.003, 2, 0), 2);         // off
  EXPECT_NEAR(repetition_calls(0, 0.003, 2, 0.03), 30000, 1);  // a call below the clock: 0.1 µs
  EXPECT_EQ(repetition_calls(1e-12, 10, 1, 0.03), 10000000);   // at most 1e7
  EXPECT_EQ(repetition_calls(1.0, 0.003, 0, 0), 1);
  EXPECT_EQ(least_calls(10e-3, 2, 0.03), 2);
  EXPECT_EQ(least_calls(30e-3, 2, 0.03), 1);
  EXPECT_EQ(least_calls(30e-3, 2, 0), 2);
  EXPECT_EQ(least_calls(1e-6, 0, 0.03), 1);
}

TEST(Runner, RacingDropsTheImplementationsThatCannotWinAndKeepsTheDefault) {
  TempDb tmp;
  auto models = mp::process_model_text(kOneConv, "one_conv.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.max_impls = 0;  // every implementation
  po.include_reference = true;
  po.conversions = false;
  po.fusion = false;
  const Plan plan = make_plan(*models, {find_backend("onednn")}, po);
  std::string reference, jit;
  for (const auto& c : plan.cases) {
    if (c.status) continue;
    if (c.reference) reference = c.spec.variant.algorithm;
    if (c.work.is_default) jit = c.spec.variant.algorithm;
  }
  ASSERT_FALSE(reference.empty()) << "oneDNN offers no reference convolution";
  ASSERT_FALSE(jit.empty());
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 2;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  // A quiet machine: every sentinel reading the same. With the real sentinel a loaded host (CI runs
  // two tests at once) has slowed periods, whose readings race nothing out, and the test failed so.
  ro.sentinel_clock = [] { return 1e-3; };

  // Every period slowed (the sentinel's first reading is its baseline, every later one twice it): no
  // reading counts, nothing is raced out.
  {
    auto db = benchdb::Database::open(tmp.file());
    ASSERT_TRUE(db.ok()) << db.error().message;
    RunOptions slowed = ro;
    int readings = 0;
    slowed.sentinel_clock = [&readings] { return readings++ == 0 ? 1e-3 : 2e-3; };
    const RaceRun r = race(*db, plan, *models, slowed);
    EXPECT_EQ(r.summary.raced_out, 0);
    EXPECT_EQ(r.outcome.at(reference).first, "passed");
  }
  std::filesystem::remove(tmp.file());

  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  const RaceRun r = race(*db, plan, *models, ro);
  EXPECT_EQ(r.summary.failed, 0);
  // The reference loops end raced out, with the reading they lost on; the library's default passes.
  EXPECT_EQ(r.outcome.at(reference).first, "skipped");
  EXPECT_EQ(r.outcome.at(reference).second.rfind("raced out: ", 0), 0u) << r.outcome.at(reference).second;
  EXPECT_EQ(r.outcome.at(jit).first, "passed");
  ASSERT_TRUE(r.min_us.count(reference) && r.min_us.count(jit));
  EXPECT_GT(r.min_us.at(reference), 2 * r.min_us.at(jit));
  EXPECT_GE(r.summary.raced_out, 1);
  EXPECT_GT(r.summary.raced_out_visits, 0);
  // Whatever else was raced out lost on a reading over race_layout_margin x the best passed case's.
  double best_passed = r.min_us.at(jit);
  for (const auto& [algorithm, o] : r.outcome)
    if (o.first == "passed") best_passed = std::min(best_passed, r.min_us.at(algorithm));
  for (const auto& [algorithm, o] : r.outcome)
    if (o.second.rfind("raced out: ", 0) == 0) {
      EXPECT_GT(r.min_us.at(algorithm), ro.race_layout_margin * best_passed) << algorithm << ": " << o.second;
    }
  // S never takes a raced-out case: the config's best is a passed one.
  auto best = db->query(
      "SELECT m.status FROM best_measurements b JOIN measurements m ON m.id = b.measurement_id WHERE "
      "b.fusion = ''");
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(best->rows[0][0]), "passed");
  // A raced-out case is settled: resuming times nothing again.
  const RaceRun again = race(*db, plan, *models, ro);
  EXPECT_EQ(again.summary.passed + again.summary.skipped + again.summary.raced_out, 0);
  EXPECT_EQ(again.outcome.at(reference), r.outcome.at(reference));
  // The reference loops end raced out on their first visit, with no warm-up drop: on its first
  // repetition (`early`, the reason says so) or on the whole visit; the default passes.
  auto ends_on_first_visit = [&](RunOptions rep, bool early) {
    rep.race_warmup = 1e9;
    rep.force = true;
    RaceRun rr = race(*db, plan, *models, rep);
    EXPECT_EQ(rr.outcome.at(reference).first, "skipped");
    EXPECT_EQ(rr.outcome.at(jit).first, "passed");
    const std::string& why = rr.outcome.at(reference).second;
    EXPECT_EQ(why.rfind(early ? "raced out: first round's first repetition, its group's"
                              : "raced out: first round, its group's",
                        0),
              0u)
        << why;
    return rr;
  };
  // On its first repetition: the reference loops (far over 3x the default) end on their first
  // visit's first repetition, the second untimed; judged by whole visits only
  // (race_first_repetition off), on the visit's two.
  for (const bool first_repetition : {true, false}) {
    RunOptions rep = ro;
    rep.race_first_repetition = first_repetition;
    const RaceRun rr = ends_on_first_visit(rep, first_repetition);
    EXPECT_EQ(rr.summary.raced_on_repetition > 0, first_repetition);
    auto samples = db->query(
        "SELECT m.samples_us FROM measurements m JOIN cases c ON c.id = m.case_id WHERE m.superseded = 0 "
        "AND c.algorithm = ?1 AND c.fusion = ''",
        {reference});
    ASSERT_TRUE(samples.ok() && samples->rows.size() == 1u);
    const auto passes = nlohmann::json::parse(std::get<std::string>(samples->rows[0][0]));
    ASSERT_EQ(passes.size(), 1u);  // one visit
    EXPECT_EQ(passes[0].size(), first_repetition ? 1u : 2u) << passes.dump();
    double lowest_reading = std::numeric_limits<double>::infinity();  // of every run's, the race's pace
    for (const RaceRun* run : {&r, &rr})
      for (const auto& [algorithm, us] : run->min_us) lowest_reading = std::min(lowest_reading, us);
    EXPECT_GE(passes[0][0].get<double>(),
              (first_repetition ? ro.race_repetition : ro.race_drop) * lowest_reading);
  }
  // A long case's first call (every call long here: long_call 1 ns, one warm-up call, which is the
  // first repetition) is judged alone at race_drop, as a whole visit: the reference loops end on it
  // with the short cases' first-repetition factor out of reach (race_repetition 1e9); a short
  // case's first repetition is not judged so (first_call_counts off), and they end on a whole visit.
  for (const bool long_first_call : {true, false}) {
    RunOptions rep = ro;
    rep.race_repetition = 1e9;
    rep.long_call = 1e-9;
    rep.warmup_seconds = 0;
    rep.first_call_counts = long_first_call;
    const RaceRun rr = ends_on_first_visit(rep, long_first_call);
    EXPECT_EQ(rr.summary.first_calls > 0, long_first_call);
  }
  // With racing off (--no-race), the reference is timed in full.
  RunOptions off = ro;
  off.race_margin = 0;
  off.force = true;
  const RaceRun full = race(*db, plan, *models, off);
  EXPECT_EQ(full.summary.raced_out, 0);
  EXPECT_EQ(full.outcome.at(reference).first, "passed");
}

// The racing order on a real plan (a convolution and its Relu: every oneDNN implementation, the
// fused variants and the layout conversions): within each run of one race the cases come by prior, lowest
// first, ties in plan order; the races, the conversions and every case keep their places otherwise.
TEST(Runner, TheRacingOrderPutsLikelyWinnersFirstWithinEachRace) {
  constexpr const char* kConvRelu = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
conv_relu (float[1,32,28,28] x, float[32,32,3,3] w) => (float y)
{
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y = Relu (c)
}
)onnx";
  auto models = mp::process_model_text(kConvRelu, "conv_relu.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.max_impls = 0;
  po.include_reference = true;
  po.fused_all = true;
  const Plan plan = make_plan(*models, {find_backend("onednn")}, po);
  std::vector<const PlannedCase*> cases;
  for (const auto& c : plan.cases)
    if (!c.status) cases.push_back(&c);
  ASSERT_GT(cases.size(), 8u);
  // The reference loops last, the default first, the rest by their plan position from the back.
  std::map<const PlannedCase*, double> prior;
  for (size_t i = 0; i < cases.size(); ++i)
    prior[cases[i]] = cases[i]->reference         ? 10
                      : cases[i]->work.is_default ? 0
                                                  : 1 + 1.0 / static_cast<double>(i + 1);
  auto group = [](const PlannedCase* c) {
    const CaseId id = c->spec.id();
    return c->conversion ? c->spec.name : id.key + "|" + id.dtype + "|" + id.math_mode + "|" + id.fusion;
  };
  std::vector<const PlannedCase*> ordered = cases;
  race_order(ordered.begin(), ordered.end(), [&](const PlannedCase& c) { return prior.at(&c); });
  ASSERT_EQ(ordered.size(), cases.size());
  EXPECT_TRUE(std::is_permutation(ordered.begin(), ordered.end(), cases.begin()));
  int moved = 0, conversions = 0, fused = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(group(ordered[i]), group(cases[i])) << i;  // every race and conversion in its place
    if (cases[i]->conversion) {
      ++conversions;
      EXPECT_EQ(ordered[i], cases[i]);
    }
    if (!cases[i]->spec.id().fusion.empty()) ++fused;
    moved += ordered[i] != cases[i];
    if (i > 0 && !ordered[i]->conversion && group(ordered[i]) == group(ordered[i - 1])) {
      EXPECT_LE(prior.at(ordered[i - 1]), prior.at(ordered[i])) << ordered[i]->spec.name;
    }
  }
  EXPECT_GT(conversions, 0);
  EXPECT_GT(fused, 0);
  EXPECT_GT(moved, 0);
  // A reference implementation never comes before a JIT one of its race.
  for (size_t i = 1; i < ordered.size(); ++i)
    if (!ordered[i]->reference && group(ordered[i]) == group(ordered[i - 1])) {
      EXPECT_FALSE(ordered[i - 1]->reference) << ordered[i]->spec.name;
    }
  // Equal priors keep the plan's order.
  std::vector<const PlannedCase*> same = cases;
  race_order(same.begin(), same.end(), [](const PlannedCase&) { return 1.0; });
  EXPECT_EQ(same, cases);
}

// oneDNN's cases, with a sentinel of the backend's own (Backend::sentinel), as a GPU backend has, and
// optionally no kernel in one data type (`refused`), as the CUDA backend has no int8 copy.
class OwnSentinelBackend final : public test::ForwardingBackend {
 public:
  OwnSentinelBackend(const Backend& inner, std::function<double()> clock, std::optional<DType> refused = {})
      : ForwardingBackend(inner), clock_(std::move(clock)), refused_(refused) {}
  kernels::KernelFactory factory() const override {
    return [inner = inner_.factory(),
            refused = refused_](const kernels::CaseSpec& spec) -> Result<std::unique_ptr<kernels::Kernel>> {
      if (refused && spec.variant.dtype == *refused)
        return make_error(Disposition::kUnsupported, "no kernel in {}", dtype_name(*refused));
      return inner(spec);
    };
  }
  std::function<double()> sentinel() const override { return clock_; }

 private:
  std::function<double()> clock_;
  std::optional<DType> refused_;
};

// oneDNN's cases, with the library's default chosen by `is_default` instead of oneDNN: a group with
// two libraries' defaults, or with a slow one only.
class ChosenDefaultsBackend final : public test::ForwardingBackend {
 public:
  ChosenDefaultsBackend(const Backend& inner, std::function<bool(const kernels::LibraryCase&)> is_default)
      : ForwardingBackend(inner), is_default_(std::move(is_default)) {}
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    auto out = inner_.candidates(base);
    for (auto& c : out) c.is_default = is_default_(c);
    return out;
  }

 private:
  std::function<bool(const kernels::LibraryCase&)> is_default_;
};

// The libraries' defaults (H's cases) race only among themselves, H taking the fastest of them: a
// second default, oneDNN's reference loop (at least twice the JIT default's time: the test above),
// ends raced out against its group's defaults, where the JIT default passes; a group's only default
// passes however far it is from the group's best.
TEST(Runner, ADefaultRacesOnlyTheOtherDefaultsOfItsGroup) {
  auto models = mp::process_model_text(kOneConv, "one_conv.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Backend* onednn = find_backend("onednn");
  PlanOptions po;
  po.max_impls = 0;
  po.include_reference = true;
  po.conversions = false;
  po.fusion = false;
  // oneDNN's default (a JIT implementation) and its first reference loop.
  std::string jit, reference;
  for (const auto& c : make_plan(*models, {onednn}, po).cases) {
    if (c.status) continue;
    if (c.work.is_default) jit = c.spec.variant.algorithm;
    if (c.reference && reference.empty()) reference = c.spec.variant.algorithm;
  }
  ASSERT_FALSE(jit.empty());
  ASSERT_FALSE(reference.empty()) << "oneDNN offers no reference convolution";
  const ChosenDefaultsBackend two(*onednn, [&](const kernels::LibraryCase& c) {
    return c.variant.algorithm == jit || c.variant.algorithm == reference;
  });
  const ChosenDefaultsBackend slow_only(
      *onednn, [&](const kernels::LibraryCase& c) { return c.variant.algorithm == reference; });
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 2;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  ro.sentinel_clock = [] { return 1e-3; };  // a quiet machine (the test above says why)
  for (const ChosenDefaultsBackend* b : {&two, &slow_only}) {
    const Plan plan = make_plan(*models, {b}, po);
    int defaults = 0;
    for (const auto& c : plan.cases)
      defaults += !c.status && c.spec.variant.fusion.empty() && c.work.is_default;
    ASSERT_EQ(defaults, b == &two ? 2 : 1);
    TempDb tmp;
    auto db = benchdb::Database::open(tmp.file());
    ASSERT_TRUE(db.ok()) << db.error().message;
    const RaceRun r = race(*db, plan, *models, ro, b);
    EXPECT_EQ(r.summary.failed, 0);
    if (b == &two) {
      EXPECT_EQ(r.outcome.at(jit).first, "passed");
      EXPECT_EQ(r.outcome.at(reference).first, "skipped");
      EXPECT_NE(r.outcome.at(reference).second.find("its group's defaults'"), std::string::npos)
          << r.outcome.at(reference).second;
      ASSERT_TRUE(r.min_us.count(reference));
      EXPECT_GE(r.min_us.at(reference), ro.race_margin * r.min_us.at(jit));
    } else {
      // The JIT implementation, no default now, races the others as every candidate does.
      EXPECT_EQ(r.outcome.at(reference).first, "passed") << r.outcome.at(reference).second;
      double best_passed = std::numeric_limits<double>::infinity();
      for (const auto& [algorithm, o] : r.outcome)
        if (o.first == "passed" && algorithm != reference)
          best_passed = std::min(best_passed, r.min_us.at(algorithm));
      EXPECT_GT(r.min_us.at(reference), ro.race_drop * best_passed);
    }
    // One default passed: the fastest of the config's defaults, H's.
    EXPECT_EQ(scalar(*db, "SELECT count(*) FROM default_cases WHERE status = 'passed' AND fusion = ''"), 1);
  }
}

TEST(Runner, ADataTypeThatCannotBeCalibratedLeavesTheOthersCalibrated) {
  const Backend* onednn = find_backend("onednn");
  const OwnSentinelBackend no_bf16(*onednn, {}, DType::kBF16);
  TempDb tmp;
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  benchdb::SystemRow sys = benchdb::capture_host_system(1);
  describe_system(*onednn, sys);
  auto system_id = db->upsert_system(sys);
  ASSERT_TRUE(system_id.ok()) << system_id.error().message;
  CalibrationOptions co;
  co.seconds_per_repetition = 0.002;
  co.repetitions = 1;
  std::vector<std::string> failures;
  auto peaks = calibrate_missing(*db, *system_id, no_bf16, {DType::kBF16, DType::kF32}, co, &failures);
  ASSERT_TRUE(peaks.ok()) << peaks.error().message;
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rfind("bf16: ", 0), 0u) << failures[0];
  // f32's flops, bytes and memory peaks were measured and stored, after bf16 failed.
  std::set<std::string> measured;
  for (const Peak& p : *peaks) {
    EXPECT_EQ(p.dtype, "f32");
    EXPECT_GT(p.value_per_s, 0);
    measured.insert(p.peak + "/" + p.math_mode);
  }
  EXPECT_TRUE(measured.count("flops/fp32")) << peaks->size();
  EXPECT_TRUE(measured.count("bytes/memory"));
  auto stored = db->query("SELECT count(*) FROM system_peaks WHERE dtype = 'f32'");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(std::get<int64_t>(stored->rows.at(0).at(0)), static_cast<int64_t>(peaks->size()));
  // Without a list of failures, the first one is the error.
  EXPECT_FALSE(calibrate_missing(*db, *system_id, no_bf16, {DType::kBF16}, co).ok());
}

TEST(Runner, ABackendsOwnSentinelJudgesItsPeriods) {
  auto models = mp::process_model_text(kOneConv, "one_conv.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Backend* onednn = find_backend("onednn");
  PlanOptions po;
  po.max_impls = 2;
  po.conversions = false;
  po.fusion = false;
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 2;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  ro.sentinel_interval = 0;  // a reading before every visit
  // Only the sentinel times a case again here: not its repetitions' disagreement, which a busy host
  // (CTest's other test beside this one) gives any short case.
  ro.noisy_cv = 1e9;
  // The device slowed from its second reading on: every period is slowed, and its cases timed again.
  int readings = 0;
  const OwnSentinelBackend slowed(*onednn, [&readings] { return readings++ == 0 ? 1e-3 : 2e-3; });
  const Plan plan = make_plan(*models, {&slowed}, po);
  {
    TempDb tmp;
    auto db = benchdb::Database::open(tmp.file());
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto s = run_plan(&*db, *models, plan, {&slowed}, ro);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_GT(s->passed, 0);
    EXPECT_GT(readings, 2);
    // Every reading was the backend's (the CPU sentinel was not read), and every one after the first slowed.
    EXPECT_EQ(s->sentinel_readings, readings);
    EXPECT_EQ(s->sentinel_slowed, readings - 1);
    EXPECT_DOUBLE_EQ(s->sentinel_worst, 2.0);
    EXPECT_GT(s->remeasured, 0);
  }
  // A sentinel that cannot run (NaN: a device error) judges nothing: no reading, no slowed period.
  int calls = 0;
  const OwnSentinelBackend broken(*onednn, [&calls] {
    ++calls;
    return std::numeric_limits<double>::quiet_NaN();
  });
  TempDb tmp;
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  auto s = run_plan(&*db, *models, plan, {&broken}, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_GT(calls, 2);
  EXPECT_EQ(s->sentinel_readings, 0);
  EXPECT_EQ(s->sentinel_slowed, 0);
  EXPECT_EQ(s->remeasured, 0);
}

// A long case's first call is its first repetition (RunOptions::first_call_counts): with one
// repetition of one call, a case whose first call took min_time (here 1 ns: every case) is stored
// from that call alone (1 iteration, 1 repetition, the counters the benchmark body sets); with two
// repetitions, the first call and one more (2 iterations, 2 repetitions); with two calls a
// repetition, or the option off, no visit takes its first call.
TEST(Runner, ALongCasesFirstCallIsItsFirstRepetition) {
  auto models = mp::process_model_text(test::kKindsModel, "kinds.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.max_impls = 1;
  po.conversions = false;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  const Plan plan = make_plan(*models, backends, po);
  RunOptions first;
  first.passes = 1;
  first.repetitions = 1;
  first.min_iterations = 1;
  first.min_time = 1e-9;
  first.warmup_seconds = 0;  // one warm-up call
  first.remeasure = false;
  first.calibrate = false;
  first.race_margin = 0;  // no racing: every case timed
  first.first_call_counts = true;
  first.settle_repetitions = 0;  // the counts below are the method's own
  RunOptions two_repetitions = first, two_calls = first, off = first;
  two_repetitions.repetitions = 2;
  two_calls.min_iterations = 2;
  off.first_call_counts = false;
  for (const auto* ro : {&first, &two_repetitions, &two_calls, &off}) {
    TempDb tmp;
    auto db = benchdb::Database::open(tmp.file());
    ASSERT_TRUE(db.ok()) << db.error().message;
    auto s = run_plan(&*db, *models, plan, backends, *ro);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_GT(s->passed, 3);
    if (ro == &two_calls || ro == &off) {
      EXPECT_EQ(s->first_calls, 0);
      continue;
    }
    EXPECT_EQ(s->first_calls, s->passed);
    auto q = db->query(
        "SELECT min_us, iterations, repetitions, median_us, extra FROM measurements WHERE status = 'passed'");
    ASSERT_TRUE(q.ok());
    ASSERT_EQ(static_cast<int64_t>(q->rows.size()), s->passed);
    int with_flops = 0;
    const int64_t n = ro == &first ? 1 : 2;
    for (const auto& r : q->rows) {
      const double us = std::get<double>(r[0]);
      EXPECT_EQ(std::get<int64_t>(r[1]), n);
      EXPECT_EQ(std::get<int64_t>(r[2]), n);
      if (n == 2) {  // the median of the first call and the one after it
        EXPECT_GE(std::get<double>(r[3]), us);
        ++with_flops;
        continue;
      }
      EXPECT_DOUBLE_EQ(std::get<double>(r[3]), us);
      if (!std::holds_alternative<std::string>(r[4])) continue;
      const auto extra = nlohmann::json::parse(std::get<std::string>(r[4]));
      if (!extra.contains("flops")) continue;
      ++with_flops;
      EXPECT_NEAR(extra["gflops"].get<double>(), extra["flops"].get<double>() / (us * 1e3),
                  1e-6 * extra["gflops"].get<double>());
    }
    EXPECT_GT(with_flops, 0);
  }
}

// Two convolutions read the same activation: the layout conversions of that tensor are one work
// (conversion_work_key), timed once; the others take its row, named in extra.measured_as. A
// binary's key holds its full-size operand, so that a broadcast operand shared by two binaries of
// other sizes does not make them one work.
TEST(Runner, AConversionOfATensorAlreadyTimedTakesThatMeasurement) {
  constexpr const char* kTwoConvs = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
two_convs (float[1,32,28,28] x, float[32,32,3,3] w1, float[16,32,1,1] w2) => (float y1, float y2)
{
  y1 = Conv <pads = [1, 1, 1, 1]> (x, w1)
  y2 = Conv (x, w2)
}
)onnx";
  auto models = mp::process_model_text(kTwoConvs, "two_convs.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  PlanOptions po;
  po.max_impls = 0;  // every implementation: conversions of x feeding both configs
  po.fusion = false;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  const Plan plan = make_plan(*models, backends, po);
  std::map<std::string, std::vector<const PlannedCase*>> by_key;
  for (const auto& c : plan.cases) {
    const std::string k = conversion_work_key(c);
    EXPECT_EQ(k.empty(), !c.conversion) << c.spec.name;
    if (!c.status && !k.empty()) by_key[k].push_back(&c);
  }
  int64_t shared = 0;
  for (const auto& [k, cases] : by_key) {
    std::set<std::string> configs;
    for (const auto* c : cases) configs.insert(c->spec.problem.key);
    // One key, one tensor: the same dims, layouts and implementation, whatever config it is of.
    for (const auto* c : cases) {
      EXPECT_EQ(c->spec.variant.layout, cases.front()->spec.variant.layout);
      EXPECT_EQ(
          c->conversion->tensor == "src" ? c->spec.problem.inputs[0].shape : c->spec.problem.outputs[0].shape,
          cases.front()->conversion->tensor == "src" ? cases.front()->spec.problem.inputs[0].shape
                                                     : cases.front()->spec.problem.outputs[0].shape);
    }
    if (configs.size() > 1) shared += static_cast<int64_t>(cases.size()) - 1;
  }
  ASSERT_GT(shared, 0) << "no conversion of x planned for both convolutions";

  TempDb tmp;
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions ro;
  ro.passes = 1;
  ro.repetitions = 1;
  ro.min_time = 1e-5;
  ro.remeasure = false;
  ro.calibrate = false;
  ro.race_margin = 0;
  auto s = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_GT(s->conversion_copies, 0);
  auto q = db->query(
      "SELECT c.name, m.min_us, m.samples_us, json_extract(m.extra, '$.measured_as'), m.status FROM "
      "measurements m JOIN cases c ON c.id = m.case_id WHERE c.conversion_tensor <> ''");
  ASSERT_TRUE(q.ok()) << q.error().message;
  std::map<std::string, std::pair<double, std::string>> timed;  // the cases timed themselves
  std::vector<std::pair<std::string, std::pair<double, std::string>>> copies;
  for (const auto& r : q->rows) {
    if (std::get<std::string>(r[4]) != "passed") continue;
    const auto row = std::make_pair(std::get<double>(r[1]), std::get<std::string>(r[2]));
    if (const auto* as = std::get_if<std::string>(&r[3]))
      copies.emplace_back(*as, row);
    else
      timed[std::get<std::string>(r[0])] = row;
  }
  ASSERT_EQ(static_cast<int64_t>(copies.size()), s->conversion_copies);
  std::map<std::string, std::string> key_of;
  for (const auto& c : plan.cases) key_of[c.spec.name] = conversion_work_key(c);
  std::map<std::string, int> timed_of_key;
  for (const auto& [name, row] : timed) ++timed_of_key[key_of.at(name)];
  for (const auto& [as, row] : copies) {
    ASSERT_TRUE(timed.count(as)) << as << " was not timed";
    EXPECT_EQ(row, timed[as]);  // the same reading and samples
    // A key whose first passed has that one case timed; its others took the row (a key whose first
    // did not pass has its others timed themselves, and no copy).
    EXPECT_EQ(timed_of_key[key_of.at(as)], 1) << as;
  }
  EXPECT_LE(s->conversion_copies, shared);

  // A binary's broadcast operand is in the key with its full-size one.
  PlannedCase a, b;
  a.conversion = LayoutConversion{"src", "abcd", "acdb"};
  a.spec.variant.backend = "onednn";
  a.spec.variant.algorithm = "reorder";
  a.spec.variant.layout = "src:abcd>acdb";
  a.spec.feeds.algorithm = "binary_mul:jit:avx512_core";
  a.spec.problem.op = "Mul";
  a.spec.problem.kind = LayerKind::kMul;
  a.spec.problem.inputs = {{"a", {1, 672, 1, 1}}, {"b", {1, 672, 14, 14}}};
  a.spec.problem.outputs = {{"y", {1, 672, 14, 14}}};
  b = a;
  b.spec.problem.inputs[1].shape = {1, 672, 7, 7};
  b.spec.problem.outputs[0].shape = {1, 672, 7, 7};
  EXPECT_FALSE(conversion_work_key(a).empty());
  EXPECT_NE(conversion_work_key(a), conversion_work_key(b));
  // Its work: the full-size operand read and written once, not the broadcast one.
  EXPECT_EQ(conversion_work(a.spec, *a.conversion).bytes, 2 * 672 * 14 * 14 * 4);
  EXPECT_EQ(conversion_work(b.spec, *b.conversion).bytes, 2 * 672 * 7 * 7 * 4);
  PlannedCase not_one = a;
  not_one.conversion.reset();
  EXPECT_EQ(conversion_work_key(not_one), "");
}

// Stopping on confidence, on readings the zoo's batch-1 bench recorded (2026-12-07, the Zen 4 EPYC):
// a long case whose two visits read the same lowest time ends there; one whose visits are 2.8%
// apart, or a short one, does not; a pass of a slowed period is no reading.
// kOneConv's convolution on oneDNN, its first two implementations (the reference loops and the
// default), unfused, without conversions.
Plan reference_and_default(const std::vector<mp::ModelIR>& models,
                           const std::vector<const Backend*>& backends) {
  PlanOptions po;
  po.max_impls = 2;
  po.conversions = false;
  po.fusion = false;
  return make_plan(models, backends, po);
}

// The method with its counts fixed: `passes` passes of 2 repetitions, no racing, no re-measurement,
// no further placements, a quiet sentinel (every reading the same).
RunOptions fixed_method(int passes) {
  RunOptions ro;
  ro.passes = passes;
  ro.repetitions = 2;
  ro.min_time = 0.0005;
  ro.calibrate = false;
  ro.remeasure = false;
  ro.max_placements = 0;
  ro.race_margin = 0;
  ro.sentinel_clock = [] { return 1e-3; };
  return ro;
}

// An integer column of every current passed measurement (benchdb's `measurements`).
std::vector<int64_t> passed_column(benchdb::Database& db, const std::string& column) {
  auto q = db.query("SELECT " + column + " FROM measurements WHERE status = 'passed' AND superseded = 0");
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : q.error().message);
  std::vector<int64_t> out;
  if (q.ok())
    for (const auto& r : q->rows) out.push_back(std::get<int64_t>(r[0]));
  return out;
}

TEST(Runner, ALongCaseWhoseTwoReadingsAgreeStopsOnConfidence) {
  auto pass = [](std::vector<double> us, bool slowed = false) { return PassSamples{std::move(us), slowed}; };
  // deeplabv3's 3x3 convolution 128 -> 128 at 112x112, oneDNN's brgconv: 13,750 and 13,750 us.
  const std::vector<PassSamples> agree = {pass({13830, 13830, 13750}), pass({13750, 15430, 15330})};
  EXPECT_TRUE(confident_readings(agree, 3000, 0.01));
  EXPECT_FALSE(confident_readings(agree, 20000, 0.01));  // shorter than the threshold
  EXPECT_FALSE(confident_readings(agree, 0, 0.01));      // off
  EXPECT_FALSE(confident_readings({agree[0]}, 3000, 0.01));
  // The second visit in a slowed period: one reading.
  EXPECT_FALSE(confident_readings({agree[0], pass({13750, 15430, 15330}, true)}, 3000, 0.01));
  // fcn_resnet50's 1x1 convolution 1024 -> 2048 at 65x65, oneDNN's jit_1x1: 70,520 and 68,630 us.
  const std::vector<PassSamples> apart = {pass({70620, 70520, 70620}), pass({89180, 68630, 69630})};
  EXPECT_FALSE(confident_readings(apart, 3000, 0.01));
  EXPECT_TRUE(confident_readings(apart, 3000, 0.03));
  // A third visit that agrees with the lowest: 68,630 and 68,530.
  EXPECT_TRUE(confident_readings({apart[0], apart[1], pass({70100, 69290, 68530})}, 3000, 0.01));

  // In a run: the reference convolution of kOneConv and the default, timed in 3 passes with the
  // threshold at 0 us (every case long): a case whose two readings agree ends after two visits.
  auto models = mp::process_model_text(kOneConv, "one_conv.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  const Plan plan = reference_and_default(*models, backends);
  RunOptions ro = fixed_method(3);
  ro.confident_above_us = 1e-9;
  ro.confident_within = 10;  // any two readings agree
  TempDb tmp;
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  auto s = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_GT(s->passed, 0);
  EXPECT_EQ(s->confident, s->passed);
  EXPECT_EQ(s->confident_visits, s->passed);
  for (const int64_t passes : passed_column(*db, "passes")) EXPECT_EQ(passes, 2);
  // Off: every case gets its three passes.
  ro.confident_above_us = 0;
  ro.force = true;
  auto all = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->confident, 0);
  for (const int64_t passes : passed_column(*db, "passes")) EXPECT_EQ(passes, 3);
}

// Settling: a visit whose last repetition is still its lowest by more than settle_within gets one
// more, on the same build, up to settle_repetitions more.
TEST(Runner, AVisitWhoseTimeStillFallsGetsMoreRepetitions) {
  // vgg11's first MaxPool (1x64x224x224, 12.8 MB in; oneDNN's jit:avx512_core on the blocked
  // layout), one visit of 12 repetitions on the 2-core Zen 4 EPYC: its time falls for seven.
  const std::vector<double> maxpool = {545.7, 503.1, 452.3, 516.0, 326.8, 234.5, 169.4, 161.6, 282.3};
  auto first = [&](size_t n) { return std::vector<double>(maxpool.begin(), maxpool.begin() + n); };
  EXPECT_TRUE(still_settling(first(2), 0.02));
  EXPECT_TRUE(still_settling(first(3), 0.02));   // 452.3 below 503.1 by 11%
  EXPECT_FALSE(still_settling(first(4), 0.02));  // 516.0: not its lowest
  EXPECT_TRUE(still_settling(first(8), 0.02));   // 161.6 below 169.4 by 4.8%
  EXPECT_FALSE(still_settling(first(8), 0.05));  // ... not by 5%
  EXPECT_FALSE(still_settling(first(9), 0.02));
  EXPECT_FALSE(still_settling(first(1), 0.02));
  EXPECT_FALSE(still_settling({}, 0.02));
  // resnet18's 3x3 convolution 256 -> 512 (brgconv), one visit: steady at 409 us.
  EXPECT_FALSE(still_settling({409.2, 428.4, 413.6}, 0.02));

  // In a run: with settle_within at -0.99 every visit reads as still falling (a last repetition
  // under 100 times the lowest of the others), so each gets exactly settle_repetitions more.
  auto models = mp::process_model_text(kOneConv, "one_conv.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  const Plan plan = reference_and_default(*models, backends);
  RunOptions ro = fixed_method(2);
  ro.confident_above_us = 0;
  ro.settle_repetitions = 3;
  ro.settle_within = -0.99;
  ro.settle_below_us = 1e12;
  TempDb tmp;
  auto db = benchdb::Database::open(tmp.file());
  ASSERT_TRUE(db.ok()) << db.error().message;
  auto s = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_GT(s->passed, 0);
  EXPECT_EQ(s->settled_visits, 2 * s->passed);
  EXPECT_EQ(s->settle_repetitions, 6 * s->passed);
  auto q = db->query("SELECT repetitions, samples_us FROM measurements WHERE status = 'passed'");
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(static_cast<int64_t>(q->rows.size()), s->passed);
  for (const auto& r : q->rows) {
    EXPECT_EQ(std::get<int64_t>(r[0]), 10);  // two passes of 2 + 3 repetitions
    const auto samples = nlohmann::json::parse(std::get<std::string>(r[1]));
    ASSERT_EQ(samples.size(), 2u);
    for (const auto& pass : samples) EXPECT_EQ(pass.size(), 5u);
  }
  // Cases longer than settle_below_us, and settle_repetitions 0, are left as they are.
  for (auto [below, more] : {std::pair{1e-9, 3}, std::pair{1e12, 0}}) {
    ro.settle_below_us = below;
    ro.settle_repetitions = more;
    ro.force = true;
    auto again = run_plan(&*db, *models, plan, backends, ro);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->settled_visits, 0);
    for (const int64_t repetitions : passed_column(*db, "repetitions")) EXPECT_EQ(repetitions, 4);
  }
}

TEST(Runner, DryRunWritesNothing) {
  auto models = mp::process_model_text(test::kKindsModel, "kinds.onnx", {});
  ASSERT_TRUE(models.ok());
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  PlanOptions po;
  po.max_impls = 1;
  const Plan plan = make_plan(*models, backends, po);
  RunOptions ro;
  ro.dry_run = true;
  auto s = run_plan(nullptr, *models, plan, backends, ro);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->failed, 0);
  EXPECT_EQ(s->timed_seconds, 0);
  EXPECT_EQ(static_cast<size_t>(s->passed + s->skipped + s->unsupported), plan.cases.size());
}

}  // namespace
}  // namespace floorline::gen
