// Merging databases from different machines: content matching, idempotence, commutativity.
#include <fstream>

#include "floorline/benchdb/merge.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

struct Counts {
  int64_t systems, runs, configs, cases, measurements, current, best;
  bool operator==(const Counts&) const = default;
};

Counts counts(Database& db) {
  return {must(db.count("systems")),
          must(db.count("runs")),
          must(db.count("layer_configs")),
          must(db.count("cases")),
          must(db.count("measurements")),
          scalar(db, "SELECT count(*) FROM measurements WHERE superseded = 0"),
          must(db.count("best_measurements"))};
}

// A database measured on one machine: `configs` configs, their cases measured by one run.
void make_machine_db(const std::string& path, const std::string& system, int configs, double base_us,
                     const std::string& started_at, const std::string& host) {
  auto db = must(Database::open(path));
  const auto cases = seed_cases(db, configs, 2);
  RunRow run;
  run.system_id = must(db.upsert_system(test_system(system)));
  run.host_name = host;
  run.started_at = started_at;
  const int64_t run_id = must(db.begin_run(run));
  MeasurementWriter w(db, run.system_id, run_id);
  for (size_t i = 0; i < cases.size(); ++i)
    if (auto st = w.add(passed(cases[i], base_us + static_cast<double>(i))); !st)
      ADD_FAILURE() << st.error().message;
  if (auto st = w.flush(); !st) ADD_FAILURE() << st.error().message;
  FrameworkLatencyRow f;
  f.model_name = "resnet50";
  f.runtime = "pytorch";
  f.runtime_version = "1.13";
  f.device = system;
  f.median_us = 1000 * base_us;
  f.measured_at = started_at;
  if (auto r = db.upsert_framework_latency(f); !r) ADD_FAILURE() << r.error().message;
  // The first case's time with its weights from memory (v10).
  CacheTimeRow c;
  c.system_id = run.system_id;
  c.case_id = cases[0];
  c.state = "memory";
  c.median_us = c.min_us = 2 * base_us;
  c.samples = 5;
  c.flush_bytes = 1 << 26;
  c.measured_at = started_at;
  if (auto st = db.upsert_cache_time(c); !st) ADD_FAILURE() << st.error().message;
}

TEST(Merge, IdempotentAndCommutative) {
  TempDir dir;
  // A: 3 configs on cpu-a; B: 5 configs (3 shared with A) on cpu-b.
  make_machine_db(dir.file("a.db"), "cpu-a", 3, 10.0, "2026-11-01T00:00:00Z", "host-a");
  make_machine_db(dir.file("b.db"), "cpu-b", 5, 20.0, "2026-11-02T00:00:00Z", "host-b");
  auto ab = must(Database::open(dir.file("ab.db")));
  auto s1 = must(merge_into(ab, dir.file("a.db")));
  EXPECT_EQ(s1.measurements_added, 6);
  auto s2 = must(merge_into(ab, dir.file("b.db")));
  EXPECT_EQ(s2.configs_added, 2);
  EXPECT_EQ(s2.cases_added, 4);
  const Counts after_ab = counts(ab);
  EXPECT_EQ(after_ab, (Counts{2, 2, 5, 10, 16, 16, 8}));
  // Merging an input again adds nothing.
  auto again = must(merge_into(ab, dir.file("a.db")));
  EXPECT_EQ(again.measurements_added, 0);
  EXPECT_EQ(again.measurements_present, 6);
  EXPECT_EQ(again.systems_added + again.runs_added + again.configs_added + again.cases_added, 0);
  EXPECT_EQ(counts(ab), after_ab);
  // B then A gives the same counts and the same best cases.
  auto ba = must(Database::open(dir.file("ba.db")));
  ASSERT_OK(merge_into(ba, dir.file("b.db")));
  ASSERT_OK(merge_into(ba, dir.file("a.db")));
  EXPECT_EQ(counts(ba), after_ab);
  const std::string best_sql =
      "SELECT s.device_name, lc.key, b.median_us FROM best_measurements b JOIN systems s ON s.id = "
      "b.system_id "
      "JOIN layer_configs lc ON lc.id = b.config_id ORDER BY 1, 2";
  auto best_ab = must(ab.query(best_sql));
  auto best_ba = must(ba.query(best_sql));
  ASSERT_EQ(best_ab.rows.size(), best_ba.rows.size());
  for (size_t i = 0; i < best_ab.rows.size(); ++i)
    for (size_t k = 0; k < 3; ++k) EXPECT_EQ(value_text(best_ab.rows[i][k]), value_text(best_ba.rows[i][k]));
  EXPECT_EQ(must(ab.count("framework_latencies")), 2);
  // The cache times come along, on their own systems and cases, once.
  EXPECT_EQ(s1.cache_times_changed, 1);
  EXPECT_EQ(again.cache_times_changed, 0);
  EXPECT_EQ(
      scalar(ab,
             "SELECT count(*) FROM cache_times t JOIN systems s ON s.id = t.system_id JOIN measurements m "
             "ON m.case_id = t.case_id AND m.system_id = t.system_id WHERE t.min_us = 2 * m.median_us"),
      2);
  EXPECT_EQ(must(ba.count("cache_times")), 2);
  EXPECT_FALSE(merge_into(ab, dir.file("ab.db")).ok());  // into itself
}

TEST(Merge, SameStackOnTwoMachinesIsOneSystemAndTheLaterRunIsCurrent) {
  TempDir dir;
  make_machine_db(dir.file("m1.db"), "same-cpu", 2, 10.0, "2026-11-01T00:00:00Z", "host-1");
  make_machine_db(dir.file("m2.db"), "same-cpu", 2, 30.0, "2026-11-05T00:00:00Z", "host-2");
  for (const auto& order :
       {std::vector<std::string>{"m1.db", "m2.db"}, std::vector<std::string>{"m2.db", "m1.db"}}) {
    auto out = must(Database::open(dir.file("out-" + order[0])));
    for (const auto& in : order) ASSERT_OK(merge_into(out, dir.file(in)));
    EXPECT_EQ(must(out.count("systems")), 1);
    EXPECT_EQ(must(out.count("runs")), 2);
    EXPECT_EQ(must(out.count("measurements")), 8);
    // The later run (host-2, 30 µs and up) is current, the earlier kept as superseded.
    EXPECT_EQ(scalar(out,
                     "SELECT count(*) FROM measurements m JOIN runs r ON r.id = m.run_id "
                     "WHERE m.superseded = 0 AND r.host_name = 'host-2'"),
              4);
    EXPECT_EQ(scalar(out, "SELECT count(*) FROM measurements WHERE superseded = 1"), 4);
    auto best = must(out.query("SELECT min(median_us) FROM best_measurements"));
    EXPECT_DOUBLE_EQ(std::get<double>(best.rows[0][0]), 30.0);
    // Framework latencies: the newer figure wins in either order.
    auto fw = must(out.query("SELECT median_us FROM framework_latencies"));
    ASSERT_EQ(fw.rows.size(), 1u);
    EXPECT_DOUBLE_EQ(std::get<double>(fw.rows[0][0]), 30000.0);
  }
}

TEST(Merge, BadInputLeavesTheOutputAsItWas) {
  TempDir dir;
  make_machine_db(dir.file("a.db"), "cpu-a", 2, 10.0, "2026-11-01T00:00:00Z", "h");
  auto out = must(Database::open(dir.file("out.db")));
  ASSERT_OK(merge_into(out, dir.file("a.db")));
  const Counts before = counts(out);
  std::ofstream(dir.file("junk.db"))
      << "not a database at all, just text that is long enough to have a header";
  auto r = merge_into(out, dir.file("junk.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("junk.db: not a SQLite database"), std::string::npos) << r.error().message;
  EXPECT_FALSE(merge_into(out, dir.file("missing.db")).ok());
  EXPECT_EQ(counts(out), before);
}

}  // namespace
}  // namespace floorline::benchdb::test
