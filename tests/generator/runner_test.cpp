// The runner writes every case's outcome to a database; a second run resumes.
#include <filesystem>

#include <gtest/gtest.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/generator/runner.hpp"
#include "kinds_model.hpp"

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
  // ScatterElements and GridSample, which oneDNN has no primitive for (the floorline backend runs them).
  EXPECT_EQ(s->unsupported, 8);
  EXPECT_GT(s->verified, 40);
  EXPECT_GT(s->timed_seconds, 0);
  EXPECT_LE(s->timed_seconds, s->wall_seconds);

  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements"), static_cast<int64_t>(plan.cases.size()));
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE status='passed'"), s->passed);
  // Passed rows carry statistics over the repetitions (3 per pass, 3 passes, more for further placements or
  // to re-measure, each with at least min_iterations calls), the passes' samples, and the counters.
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM measurements WHERE status='passed' AND (median_us IS NULL OR median_us <= 0 "
          "OR min_us > median_us OR repetitions < 9 OR repetitions % 3 != 0 OR passes < 3 OR "
          "placements != passes OR json_array_length(samples_us) != passes OR iterations < 2 * repetitions "
          "OR workspace_bytes IS NULL)"),
      0);
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
  // The roofline peaks were calibrated once for the system: a MatMul (FLOP/s) and a copy (bytes/s).
  // Any CPU that runs this suite does more than 1 GFLOP/s and copies more than 0.5 GB/s on one core.
  ASSERT_TRUE(s->calibration_error.empty()) << s->calibration_error;
  ASSERT_EQ(s->peaks.size(), 2u);
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM system_peaks WHERE peak = 'flops' AND dtype = 'f32' AND math_mode = 'fp32' "
          "AND value_per_s > 1e9 AND method LIKE 'onednn MatMul 2048x2048x2048%'"),
      1);
  EXPECT_EQ(
      scalar(
          *db,
          "SELECT count(*) FROM system_peaks WHERE peak = 'bytes' AND dtype = 'f32' AND value_per_s > 5e8"),
      1);

  // Resume: passed and unsupported cases are not measured again, nor are the cases the plan skips
  // (the --max-impls cap) already recorded as skipped; cases skipped at build time are tried again.
  int64_t planned_skips = 0;
  for (const auto& c : plan.cases) planned_skips += c.status == Disposition::kSkipped ? 1 : 0;
  ASSERT_GT(planned_skips, 0);
  const int64_t rows_before = scalar(*db, "SELECT count(*) FROM measurements");
  auto again = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->passed, 0);
  EXPECT_EQ(again->already_measured, s->passed + s->unsupported + planned_skips);
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements") - rows_before, again->skipped + again->failed);
  EXPECT_TRUE(again->peaks.empty());  // the system's peaks are stored: no second calibration
  EXPECT_EQ(scalar(*db, "SELECT count(*) FROM measurements WHERE superseded = 0"),
            static_cast<int64_t>(plan.cases.size()));
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
