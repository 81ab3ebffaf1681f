// The batched writer: resume, force, supersede, and the derived best_measurements table.
#include <random>

#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/merge.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

struct Fixture {
  TempDir dir;
  Database db = must(Database::open(dir.file("r.db")));
  std::vector<int64_t> cases = seed_cases(db, 3, 4);
  int64_t sys = must(db.upsert_system(test_system("cpu")));

  int64_t run() {
    RunRow r;
    r.system_id = sys;
    return must(db.begin_run(r));
  }
};

// best_measurements must equal the GROUP BY over current passed measurements: the row with the
// lowest min_us (schema 7: the per-case time S takes), and that row's median.
void expect_best_consistent(Database& db) {
  auto derived = must(
      db.query("SELECT config_id, system_id, math_mode, fusion, median_us, min_us FROM best_measurements "
               "ORDER BY config_id, system_id, math_mode, fusion"));
  auto direct =
      must(db.query("SELECT c.config_id, m.system_id, c.math_mode, c.fusion, m.median_us, "
                    "MIN(coalesce(m.min_us, m.median_us)) FROM measurements m "
                    "JOIN cases c ON c.id = m.case_id WHERE m.status = 'passed' AND m.superseded = 0 "
                    "GROUP BY c.config_id, m.system_id, c.dtype, c.math_mode, c.fusion ORDER BY 1, 2, 3, 4"));
  ASSERT_EQ(derived.rows.size(), direct.rows.size());
  for (size_t i = 0; i < derived.rows.size(); ++i)
    for (size_t k = 0; k < 6; ++k)
      EXPECT_EQ(value_text(derived.rows[i][k]), value_text(direct.rows[i][k])) << i;
}

TEST(Writer, BatchesCommitAndBestCaseIsTheFastest) {
  Fixture f;
  MeasurementWriter w(f.db, f.sys, f.run(), {.batch_rows = 5, .batch_seconds = 1e9});
  for (size_t i = 0; i < f.cases.size(); ++i)
    ASSERT_OK(w.add(passed(f.cases[i], 100.0 - static_cast<double>(i % 4) * 10.0)));
  EXPECT_EQ(w.batches(), 2);  // 12 rows: two full batches committed, two rows pending
  EXPECT_EQ(must(f.db.count("measurements")), 10);
  ASSERT_OK(w.flush());
  EXPECT_EQ(w.committed(), 12);
  // Each config's cases ran at 100, 90, 80, 70 µs: impl3 is the best of each.
  auto best = must(f.db.query("SELECT algorithm, median_us, gflops FROM best_cases ORDER BY config_id"));
  ASSERT_EQ(best.rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(value_text(best.rows[i][0]), "impl3");
    EXPECT_DOUBLE_EQ(std::get<double>(best.rows[i][1]), 70.0);
    // flops = 1000 * (config + 1); GFLOP/s = flops / µs / 1e3
    EXPECT_DOUBLE_EQ(std::get<double>(best.rows[i][2]), 1000.0 * static_cast<double>(i + 1) / 70.0 / 1e3);
  }
  expect_best_consistent(f.db);
}

// keep_lower (the re-timing after a replay, generator/replay.hpp): a forced re-measurement replaces
// a passed row only when its time is lower; a failed re-measurement never replaces a passed row,
// and a failed row yields to a passed one.
TEST(Writer, KeepLowerReplacesAPassedRowOnlyWithALowerTime) {
  Fixture f;
  {
    MeasurementWriter w(f.db, f.sys, f.run());
    ASSERT_OK(w.add(passed(f.cases[0], 50.0)));
    ASSERT_OK(w.add(passed(f.cases[1], 60.0)));
    ASSERT_OK(w.add(failed(f.cases[2], "out of memory")));
    ASSERT_OK(w.flush());
  }
  {
    MeasurementWriter w(f.db, f.sys, f.run(), {.force = true, .keep_lower = true});
    ASSERT_OK(w.add(passed(f.cases[0], 45.0)));            // lower: replaces
    ASSERT_OK(w.add(passed(f.cases[1], 61.0)));            // higher: the 60 µs row stays
    ASSERT_OK(w.add(failed(f.cases[1], "cannot build")));  // failed: never replaces a passed row
    ASSERT_OK(w.add(passed(f.cases[2], 70.0)));            // the failed row yields to any passed one
    ASSERT_OK(w.flush());
    EXPECT_EQ(w.committed(), 2);
    EXPECT_EQ(w.skipped_existing(), 2);
  }
  auto current = [&](int64_t c) {
    auto q = must(
        f.db.query("SELECT status, min_us FROM measurements WHERE case_id = ?1 AND superseded = 0", {c}));
    EXPECT_EQ(q.rows.size(), 1u);
    return std::make_pair(value_text(q.rows.at(0)[0]), std::get<double>(q.rows.at(0)[1]));
  };
  EXPECT_EQ(current(f.cases[0]), std::make_pair(std::string("passed"), 45.0));
  EXPECT_EQ(current(f.cases[1]), std::make_pair(std::string("passed"), 60.0));
  EXPECT_EQ(current(f.cases[2]), std::make_pair(std::string("passed"), 70.0));
  // cases 0 and 1 are config 1's impl0 and impl1: its best is now the re-timed 45 µs.
  EXPECT_DOUBLE_EQ(
      std::get<double>(must(f.db.query("SELECT min(min_us) FROM best_measurements")).rows.at(0)[0]), 45.0);
  expect_best_consistent(f.db);
}

// A config's best case is the one with the lowest repetition mean (min_us), not the lowest median.
// The first case's repetitions are those of a squeezenet1_1 case timed on a loaded 2-core machine
// (a neighbour on the core makes them bimodal, 2.4x apart); the second is a steady case
// slower than the first's fast mode.
TEST(Writer, BestCaseIsChosenByItsLowestRepetitionMean) {
  Fixture f;
  MeasurementWriter w(f.db, f.sys, f.run(), {});
  MeasurementRow a = passed(f.cases[0], 0);
  fill_passed(a, {40.05, 96.05, 40.53, 95.81, 95.75, 41.8, 108.0});  // bimodal: median 95.75
  MeasurementRow b = passed(f.cases[1], 0);
  fill_passed(b, {51.2, 51.9, 52.4, 51.6, 52.0, 51.8, 53.1});  // steady: median 51.9, min 51.2
  ASSERT_OK(w.add(std::move(a)));
  ASSERT_OK(w.add(std::move(b)));
  ASSERT_OK(w.flush());
  const int64_t config = scalar(f.db, "SELECT config_id FROM cases WHERE id = ?1", {f.cases[0]});
  ASSERT_EQ(scalar(f.db, "SELECT config_id FROM cases WHERE id = ?1", {f.cases[1]}), config);
  EXPECT_EQ(scalar(f.db, "SELECT case_id FROM best_measurements WHERE config_id = ?1", {config}), f.cases[0]);
  auto best =
      must(f.db.query("SELECT min_us, median_us FROM best_measurements WHERE config_id = ?1", {config}));
  EXPECT_DOUBLE_EQ(std::get<double>(best.rows.at(0)[0]), 40.05);
  EXPECT_DOUBLE_EQ(std::get<double>(best.rows.at(0)[1]), 95.75);
  expect_best_consistent(f.db);
}

TEST(Writer, ALayoutConversionIsNeverAConfigsBestCase) {
  Fixture f;
  // A reorder feeding impl0 of config 1: faster than every implementation, but not one of them.
  CaseRow conv;
  conv.config_id = scalar(f.db, "SELECT config_id FROM cases WHERE id = ?1", {f.cases[0]});
  conv.conversion = LayoutConversion{"src", "abcd", "aBcd16b"};
  conv.identity = {"onednn", "reorder", "f32", "fp32", conversion_layout(*conv.conversion), "", ""};
  conv.feeds = {"impl0", ""};
  EXPECT_TRUE(is_conversion(conv));
  const int64_t reorder = must(f.db.upsert_case(conv));
  {
    MeasurementWriter w(f.db, f.sys, f.run());
    ASSERT_OK(w.add(passed(reorder, 1.0)));
    ASSERT_OK(w.add(passed(f.cases[0], 80.0)));
    ASSERT_OK(w.add(passed(f.cases[1], 60.0)));
    ASSERT_OK(w.flush());
  }
  EXPECT_EQ(scalar(f.db, "SELECT case_id FROM best_measurements WHERE config_id = ?1", {conv.config_id}),
            f.cases[1]);
  // A merge rebuilds the table with the same rule.
  Database merged = must(Database::open(f.dir.file("merged.db")));
  must(merge_into(merged, f.dir.file("r.db")));
  EXPECT_EQ(scalar(merged,
                   "SELECT count(*) FROM best_measurements b JOIN cases c ON c.id = b.case_id "
                   "WHERE c.algorithm = 'reorder'"),
            0);
  EXPECT_EQ(scalar(merged, "SELECT count(*) FROM best_measurements"),
            scalar(f.db, "SELECT count(*) FROM best_measurements"));
}

TEST(Writer, ResumeKeepsFinalResultsAndRetriesFailures) {
  Fixture f;
  {
    MeasurementWriter w(f.db, f.sys, f.run());
    ASSERT_OK(w.add(passed(f.cases[0], 50.0)));
    ASSERT_OK(w.add(failed(f.cases[1], "out of memory")));
    ASSERT_OK(w.flush());
  }
  auto settled = must(f.db.settled_cases(f.sys));
  EXPECT_EQ(settled.size(), 1u);
  EXPECT_TRUE(settled.count(f.cases[0]));
  {
    MeasurementWriter w(f.db, f.sys, f.run());   // resume: the default
    ASSERT_OK(w.add(passed(f.cases[0], 10.0)));  // already passed: not written
    ASSERT_OK(w.add(passed(f.cases[1], 60.0)));  // failed before: measured again
    ASSERT_OK(w.flush());
    EXPECT_EQ(w.committed(), 1);
    EXPECT_EQ(w.skipped_existing(), 1);
  }
  EXPECT_EQ(must(f.db.count("measurements")), 3);
  EXPECT_EQ(scalar(f.db, "SELECT count(*) FROM measurements WHERE superseded = 0"), 2);
  EXPECT_EQ(scalar(f.db, "SELECT count(*) FROM measurements WHERE superseded = 1 AND status = 'failed'"), 1);
  auto kept = must(f.db.query("SELECT median_us FROM measurements WHERE case_id = ?1", {f.cases[0]}));
  ASSERT_EQ(kept.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(std::get<double>(kept.rows[0][0]), 50.0);
  expect_best_consistent(f.db);
}

TEST(Writer, ForceSupersedesAndBestFollowsTheCurrentRows) {
  Fixture f;
  {
    MeasurementWriter w(f.db, f.sys, f.run());
    ASSERT_OK(w.add(passed(f.cases[0], 5.0)));  // the best of config 1
    ASSERT_OK(w.add(passed(f.cases[1], 8.0)));
    ASSERT_OK(w.flush());
  }
  {
    MeasurementWriter w(f.db, f.sys, f.run(), {.force = true});
    ASSERT_OK(w.add(passed(f.cases[0], 12.0)));  // re-measured slower: 8 µs (impl1) is now the best
    ASSERT_OK(w.flush());
    EXPECT_EQ(w.committed(), 1);
  }
  EXPECT_EQ(must(f.db.count("measurements")), 3);
  auto best = must(f.db.query("SELECT algorithm, median_us FROM best_cases"));
  ASSERT_EQ(best.rows.size(), 1u);
  EXPECT_EQ(value_text(best.rows[0][0]), "impl1");
  EXPECT_DOUBLE_EQ(std::get<double>(best.rows[0][1]), 8.0);
  expect_best_consistent(f.db);

  // Random sequences of measurements, failures and forced re-measurements keep it consistent.
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    MeasurementWriter w(f.db, f.sys, f.run(), {.batch_rows = 3, .force = (round % 3 == 0)});
    for (int k = 0; k < 8; ++k) {
      const int64_t c = f.cases[rng() % f.cases.size()];
      if (rng() % 4 == 0) {
        ASSERT_OK(w.add(failed(c, "injected")));
      } else {
        ASSERT_OK(w.add(passed(c, 1.0 + static_cast<double>(rng() % 100))));
      }
    }
    ASSERT_OK(w.flush());
    expect_best_consistent(f.db);
  }
  // One current measurement per case and system, always.
  EXPECT_EQ(scalar(f.db,
                   "SELECT count(*) FROM (SELECT case_id FROM measurements WHERE superseded = 0 "
                   "GROUP BY case_id, system_id HAVING count(*) > 1)"),
            0);
}

}  // namespace
}  // namespace floorline::benchdb::test
