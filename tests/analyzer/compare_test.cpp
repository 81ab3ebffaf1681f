// Systems side by side (analyzer/compare.hpp) on recorded times with hand-computed ratios: two
// hosts in one database, a host at 1 and 2 threads, and two single-system files merged into one.
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/compare.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/benchdb/merge.hpp"
#include "recorded_db.hpp"

namespace floorline::analyzer {
namespace {

using recorded::check;
using recorded::value;

struct CompareDb : recorded::RecordedDb {
  explicit CompareDb(const std::string& name)
      : RecordedDb("compare_" + name, recorded::kReluSigmoidTanh, "compare_chain") {}
};

// Host A: Relu 10, Sigmoid 20, Tanh 40 (S 70); host B: Relu 5, Sigmoid 20, Tanh 10 (S 35).
void two_hosts(CompareDb& t, int64_t a, int64_t b) {
  t.time(a, "Relu", 10);
  t.time(a, "Sigmoid", 20);
  t.time(a, "Tanh", 40);
  t.time(b, "Relu", 5);
  t.time(b, "Sigmoid", 20);
  t.time(b, "Tanh", 10);
}

TEST(Compare, TwoHostsSpeedupsKindsAndTheConfigsThatChangeMost) {
  CompareDb t("hosts");
  const int64_t a = t.system("CPU A"), b = t.system("CPU B");
  two_hosts(t, a, b);
  // Each host's ONNX Runtime names its CPU: A's 90 µs is above A's S, B's 30 is below B's S (a
  // violation on B only); neither is the other's M.
  t.runtime("cpu:CPU A", 1, 90);
  t.runtime("cpu:CPU B", 1, 30);
  const auto c = value(compare_systems(*t.db, {t.model}));
  ASSERT_EQ(c.systems.size(), 2u);
  EXPECT_EQ(c.systems[0].id, a);
  EXPECT_EQ(c.baseline, 0u);
  ASSERT_EQ(c.models.size(), 1u);
  const auto& m = c.models[0];
  EXPECT_DOUBLE_EQ(m.systems[0].S, 70);
  EXPECT_DOUBLE_EQ(m.systems[1].S, 35);
  EXPECT_DOUBLE_EQ(*m.speedup(1, 0), 2.0);
  EXPECT_DOUBLE_EQ(*m.speedup(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(*m.systems[0].M, 90);
  EXPECT_DOUBLE_EQ(*m.systems[1].M, 30);
  EXPECT_EQ(m.systems[0].violations, 0);
  EXPECT_EQ(m.systems[1].violations, 1);
  ASSERT_TRUE(m.fastest);
  EXPECT_EQ(*m.fastest, 1u);
  EXPECT_EQ(c.fastest_count, (std::vector<int64_t>{0, 1}));
  // Largest spread first: Tanh 40 → 10, Relu 10 → 5, Sigmoid unchanged.
  ASSERT_EQ(m.configs.size(), 3u);
  EXPECT_EQ(m.configs[0].kind, "Tanh");
  EXPECT_DOUBLE_EQ(m.configs[0].spread_us, 30);
  EXPECT_EQ(m.configs[1].kind, "Relu");
  EXPECT_EQ(m.configs[2].kind, "Sigmoid");
  EXPECT_DOUBLE_EQ(m.configs[2].spread_us, 0);
  // Kinds by the baseline's time: Tanh 40, Sigmoid 20, Relu 10.
  ASSERT_EQ(c.kinds.size(), 3u);
  EXPECT_EQ(c.kinds[0].kind, "Tanh");
  EXPECT_DOUBLE_EQ(c.kinds[0].us[0] / c.kinds[0].us[1], 4.0);
  EXPECT_EQ(c.kinds[2].kind, "Relu");
  EXPECT_DOUBLE_EQ(c.kinds[2].us[0] / c.kinds[2].us[1], 2.0);
  EXPECT_TRUE(c.scaling.empty());  // two hosts, one thread each: nothing to scale

  // Baseline B: A is half as fast.
  CompareOptions o;
  o.baseline = b;
  const auto cb = value(compare_systems(*t.db, {t.model}, o));
  EXPECT_DOUBLE_EQ(*cb.models[0].speedup(0, cb.baseline), 0.5);
  o.baseline = 999;
  EXPECT_FALSE(compare_systems(*t.db, {t.model}, o).ok());

  // The formats carry the same figures.
  const auto j = nlohmann::json::parse(format_compare_json(c));
  EXPECT_EQ(j["baseline"], a);
  EXPECT_DOUBLE_EQ(j["models"][0]["systems"][1]["speedup"].get<double>(), 2.0);
  EXPECT_EQ(j["models"][0]["fastest_system"], b);
  const std::string csv = format_compare_csv(c);
  EXPECT_NE(csv.find("compare_chain,1," + std::to_string(b) + ",1,35.000,"), std::string::npos) << csv;
  const std::string html = format_compare_html(c);
  EXPECT_NE(html.find("id=\"chart-speedup\""), std::string::npos);
  EXPECT_NE(html.find("2.00×"), std::string::npos);
  EXPECT_NE(format_compare_table(c).find("1 below S"), std::string::npos);
}

// Host B has no Tanh measured (its layer takes the roofline there): the kinds compare only the
// layers both hosts measured, so Tanh is in no kind total and B is not "faster" on it; nor is Tanh
// among the configurations that change.
TEST(Compare, KindsAndConfigsCompareOnlyWhatEverySystemMeasured) {
  CompareDb t("missing");
  const int64_t a = t.system("CPU A"), b = t.system("CPU B");
  t.time(a, "Relu", 10);
  t.time(a, "Sigmoid", 20);
  t.time(a, "Tanh", 40);
  t.time(b, "Relu", 5);
  t.time(b, "Sigmoid", 20);
  const auto c = value(compare_systems(*t.db, {t.model}));
  ASSERT_EQ(c.kinds.size(), 2u);
  EXPECT_EQ(c.kinds[0].kind, "Sigmoid");
  EXPECT_DOUBLE_EQ(c.kinds[0].us[0], 20);
  EXPECT_DOUBLE_EQ(c.kinds[0].us[1], 20);
  EXPECT_EQ(c.kinds[1].kind, "Relu");
  EXPECT_DOUBLE_EQ(c.kinds[1].us[1], 5);
  ASSERT_EQ(c.models.size(), 1u);
  for (const auto& cfg : c.models[0].configs) EXPECT_NE(cfg.kind, "Tanh");
}

TEST(Compare, ThreadScalingOfOneHostAtOneAndTwoThreads) {
  CompareDb t("threads");
  const int64_t one = t.system("CPU A", 1), two = t.system("CPU A", 2);
  // Relu scales perfectly (10 → 5), Sigmoid loses to the fork/join at 2 threads (20 → 30: the
  // budget keeps it at 1 thread), Tanh scales half way (40 → 30).
  t.time(one, "Relu", 10);
  t.time(one, "Sigmoid", 20);
  t.time(one, "Tanh", 40);
  t.time(two, "Relu", 5);
  t.time(two, "Sigmoid", 30);
  t.time(two, "Tanh", 30);
  // A row of unknown host ("cpu") compares with every CPU system at its thread count.
  t.runtime("cpu", 2, 60);
  const auto c = value(compare_systems(*t.db, {t.model}));
  ASSERT_EQ(c.scaling.size(), 1u);
  const auto& s = c.scaling[0];
  EXPECT_EQ(c.systems[s.one].id, one);
  EXPECT_EQ(c.systems[s.many].id, two);
  EXPECT_EQ(s.threads, 2);
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_DOUBLE_EQ(s.models[0].S_one, 70);
  EXPECT_DOUBLE_EQ(s.models[0].S_many, 55);  // 5 + 20 (1 thread) + 30
  EXPECT_DOUBLE_EQ(s.efficiency(s.models[0].S_one, s.models[0].S_many), 70.0 / 55 / 2);
  // Worst: Sigmoid (efficiency 0.5, 10 µs lost) before Tanh (0.67, 10 µs lost: same loss, kept in
  // key order); Relu (1.0) scales.
  ASSERT_EQ(s.worst.size(), 2u);
  EXPECT_EQ(s.worst[0].kind, "Sigmoid");
  EXPECT_EQ(s.worst[1].kind, "Tanh");
  EXPECT_EQ(s.worst[0].threads_chosen, 1);
  EXPECT_DOUBLE_EQ(*c.models[0].systems[s.many].M, 60);
  EXPECT_FALSE(c.models[0].systems[s.one].M);  // the runtime ran at 2 threads only
  // Exactly 2 threads for every layer: Sigmoid's 30 counts.
  CompareOptions exact;
  exact.thread_budget = false;
  EXPECT_DOUBLE_EQ(value(compare_systems(*t.db, {t.model}, exact)).models[0].systems[1].S, 65);
}

// One host as it is and capped at AVX2: the capped system is its own, and takes no framework
// latency (the runtime ran uncapped), not even one of unknown host.
TEST(Compare, AnIsaCappedSystemIsItsOwnAndTakesNoFrameworkLatency) {
  CompareDb t("isa");
  const int64_t full = t.system("CPU A"), avx2 = t.system("CPU A", 1, "avx2");
  ASSERT_NE(full, avx2);
  two_hosts(t, full, avx2);  // uncapped S 70, capped S 35 (hand-made: the ratio is what is checked)
  t.runtime("cpu:CPU A", 1, 80);
  t.runtime("cpu", 1, 85);
  const auto c = value(compare_systems(*t.db, {t.model}));
  ASSERT_EQ(c.systems.size(), 2u);
  EXPECT_NE(c.systems[1].label.find("avx2 cap"), std::string::npos) << c.systems[1].label;
  EXPECT_DOUBLE_EQ(*c.models[0].systems[0].M, 80);
  EXPECT_FALSE(c.models[0].systems[1].M);
  EXPECT_EQ(c.models[0].systems[1].latencies, 0);
  EXPECT_DOUBLE_EQ(*c.models[0].speedup(1, 0), 2.0);
}

TEST(Compare, TwoSingleSystemFilesMergedCompareWithoutAnyFlag) {
  CompareDb x("merge_x"), out("merge_out");
  const int64_t xa = x.system("CPU A"), xb = x.system("CPU B");
  two_hosts(x, xa, xb);
  // Each host's file holds its own system only.
  CompareDb ha("merge_a"), hb("merge_b");
  const int64_t a = ha.system("CPU A");
  ha.time(a, "Relu", 10);
  ha.time(a, "Sigmoid", 20);
  ha.time(a, "Tanh", 40);
  const int64_t b = hb.system("CPU B");
  hb.time(b, "Relu", 5);
  hb.time(b, "Sigmoid", 20);
  hb.time(b, "Tanh", 10);
  ha.db.reset();
  hb.db.reset();
  value(benchdb::merge_into(*out.db, ha.path.string()));
  value(benchdb::merge_into(*out.db, hb.path.string()));
  const auto merged = value(compare_systems(*out.db, {out.model}));
  const auto together = value(compare_systems(*x.db, {x.model}));
  ASSERT_EQ(merged.systems.size(), 2u);
  EXPECT_DOUBLE_EQ(merged.models[0].systems[0].S, together.models[0].systems[0].S);
  EXPECT_DOUBLE_EQ(merged.models[0].systems[1].S, together.models[0].systems[1].S);
  EXPECT_DOUBLE_EQ(*merged.models[0].speedup(1, 0), 2.0);
}

TEST(Compare, NoMeasurementIsAnErrorAndAMissingSystemHasNoColumn) {
  CompareDb t("empty");
  EXPECT_FALSE(compare_systems(*t.db, {t.model}).ok());
  const int64_t a = t.system("CPU A"), b = t.system("CPU B");
  t.time(a, "Relu", 10);
  CompareOptions o;
  o.systems = {a, b};
  const auto c = value(compare_systems(*t.db, {t.model}, o));
  EXPECT_TRUE(c.models[0].systems[0].present);
  EXPECT_FALSE(c.models[0].systems[1].present);
  EXPECT_FALSE(c.models[0].speedup(1, 0));
  EXPECT_FALSE(c.models[0].fastest);  // A's S is incomplete (Sigmoid and Tanh have no time)
  EXPECT_NE(format_compare_csv(c).find("compare_chain,1," + std::to_string(a)), std::string::npos);
  EXPECT_EQ(format_compare_csv(c).find("compare_chain,1," + std::to_string(b)), std::string::npos);
}

// `floorline run` times again the cases of a model a framework beat (report.hpp, cases_to_retime):
// without a per-layer profile, every layer's best case.
TEST(BoundCheck, AFrameworkBelowSNamesTheBestCasesToTimeAgain) {
  CompareDb t("retime");
  const int64_t a = t.system("CPU A");
  t.time(a, "Relu", 10);
  t.time(a, "Sigmoid", 20);
  t.time(a, "Tanh", 40);
  t.runtime("cpu:CPU A", 1, 75);  // above S (70): nothing to time again
  EXPECT_TRUE(cases_to_retime(value(build_report(*t.db, {t.model}, a))).empty());
  // A row of unknown host gives way to the host's own row of the same identity: still nothing.
  t.runtime("cpu", 1, 60);
  {
    const auto r = value(build_report(*t.db, {t.model}, a));
    EXPECT_DOUBLE_EQ(*r.models.at(0).bounds.M, 75);
    EXPECT_TRUE(cases_to_retime(r).empty());
  }
  t.runtime("cpu:CPU A", 1, 60);  // below S
  const auto report = value(build_report(*t.db, {t.model}, a));
  EXPECT_DOUBLE_EQ(s_of(report, "compare_chain", 1), 70);
  EXPECT_DOUBLE_EQ(s_of(report, "compare_chain", 8), 0);
  const auto names = cases_to_retime(report);
  ASSERT_EQ(names.size(), 1u);
  const auto& n = names.at({"compare_chain", 1});
  ASSERT_EQ(n.size(), 3u);
  std::vector<std::string> best;
  for (const auto& l : report.models.at(0).bounds.layers) best.push_back(l.best_case);
  std::sort(best.begin(), best.end());
  EXPECT_EQ(n, best);
  for (const auto& c : n) EXPECT_FALSE(c.empty());
}

}  // namespace
}  // namespace floorline::analyzer
