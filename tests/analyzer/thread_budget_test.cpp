// The thread budget (docs/ANALYZER.md "Thread budget"): S at T threads takes each layer's fastest
// case over the systems of the same host timed at T threads or fewer, on recorded times in a test
// database with hand-computed sums; a system of another host never contributes; --threads-exact
// keeps the system's own cases.
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/model_processor/model.hpp"
#include "recorded_db.hpp"

namespace floorline::analyzer {
namespace {

using recorded::value;

struct BudgetDb : recorded::RecordedDb {
  explicit BudgetDb(int64_t batch = 1)
      : RecordedDb("budget", recorded::kReluSigmoidTanh, "budget_chain", batch) {}
  int64_t system(int64_t threads, const std::string& cpu = "Test CPU") {
    return RecordedDb::system(cpu, threads);
  }
  void runtime(int64_t threads, double us) { RecordedDb::runtime("cpu", threads, us); }
  const LayerCost& layer(const ModelBounds& b, const std::string& kind) {
    return recorded::layer_of_kind(b, kind);
  }
};

TEST(ThreadBudget, CountsAreOneThePowersOfTwoBelowAndTheBudget) {
  EXPECT_EQ(gen::budget_thread_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(gen::budget_thread_counts(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(gen::budget_thread_counts(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(gen::budget_thread_counts(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(gen::budget_thread_counts(8, true), (std::vector<int>{8}));
  EXPECT_EQ(gen::budget_thread_counts(0), (std::vector<int>{1}));
}

TEST(ThreadBudget, EachLayerTakesItsFastestCountUpToTheBudgetOnItsOwnHost) {
  BudgetDb t;
  const int64_t one = t.system(1), two = t.system(2), four = t.system(4);
  const int64_t other_host = t.system(1, "Other CPU");
  // Relu scales (10 → 6), Sigmoid loses to the fork/join (20 → 25), Tanh only timed at 2 threads
  // there (and 40 at one thread). At 4 threads everything is slower than at 2.
  t.time(one, "Relu", 10);
  t.time(one, "Sigmoid", 20);
  t.time(one, "Tanh", 40);
  t.time(two, "Relu", 6);
  t.time(two, "Sigmoid", 25);
  t.time(two, "Tanh", 30);
  t.time(four, "Relu", 7);
  t.time(four, "Sigmoid", 27);
  t.time(four, "Tanh", 31);
  t.time(other_host, "Relu", 1);  // another machine: never part of this host's budget

  const auto budget = value(t.db->thread_budget(two));
  ASSERT_EQ(budget.size(), 2u);
  EXPECT_EQ(budget[0].system_id, one);
  EXPECT_EQ(budget[0].threads, 1);
  EXPECT_EQ(budget[1].system_id, two);
  EXPECT_EQ(value(t.db->thread_budget(four)).size(), 3u);
  EXPECT_EQ(value(t.db->thread_budget(other_host)).size(), 1u);
  EXPECT_FALSE(t.db->thread_budget(9999).ok());

  const auto s1 = analyze_model(t.model, value(load_costs(*t.db, one)));
  const auto s2 = analyze_model(t.model, value(load_costs(*t.db, two)));
  const auto s4 = analyze_model(t.model, value(load_costs(*t.db, four)));
  const auto exact2 = analyze_model(t.model, value(load_costs(*t.db, two, false)));
  EXPECT_DOUBLE_EQ(s1.S, 70);      // 10 + 20 + 40
  EXPECT_DOUBLE_EQ(s2.S, 56);      // 6 (2 threads) + 20 (1 thread) + 30 (2 threads)
  EXPECT_DOUBLE_EQ(s4.S, 56);      // nothing at 4 threads beats 1 or 2
  EXPECT_DOUBLE_EQ(exact2.S, 61);  // 6 + 25 + 30: every layer forced onto 2 threads
  EXPECT_LE(s2.S, s1.S);
  EXPECT_LE(s4.S, s2.S);
  EXPECT_EQ(t.layer(s2, "Relu").threads, 2);
  EXPECT_EQ(t.layer(s2, "Sigmoid").threads, 1);
  EXPECT_EQ(t.layer(s2, "Tanh").threads, 2);
  EXPECT_EQ(t.layer(exact2, "Sigmoid").threads, 2);
  // H is what a framework gets by default at the system's own count: the defaults at 2 threads.
  EXPECT_DOUBLE_EQ(s2.H, 61);
  // The system line says what the budget took.
  EXPECT_NE(value(load_costs(*t.db, two)).system.find("thread budget 2"), std::string::npos);
  EXPECT_EQ(value(load_costs(*t.db, two, false)).system.find("thread budget"), std::string::npos);
}

// How close the runner-up came, per layer (the per-layer table's candidates): counted on the system
// the layer's best case comes from, raced-out cases among the candidates but never the runner-up.
TEST(ThreadBudget, EachLayerCountsTheCandidatesOfItsBestCasesSystem) {
  BudgetDb t;
  const int64_t one = t.system(1), two = t.system(2);
  t.time(one, "Relu", 10);
  t.time(one, "Relu", 12.5, "eltwise:jit:avx2");
  t.time(one, "Relu", 11, "eltwise:ref", /*raced_out=*/true);  // a reading below the runner-up's
  t.time(one, "Relu", 31, "eltwise:jit:sse41", /*raced_out=*/true);
  t.time(one, "Sigmoid", 20);
  t.time(one, "Tanh", 40);
  t.time(two, "Relu", 6);
  t.time(two, "Sigmoid", 25);
  t.time(two, "Sigmoid", 50, "eltwise:jit:avx2");
  t.time(two, "Tanh", 30);

  const auto s1 = analyze_model(t.model, value(load_costs(*t.db, one)));
  const LayerCost& relu1 = t.layer(s1, "Relu");
  EXPECT_EQ(relu1.candidates, 4);
  EXPECT_EQ(relu1.raced_out, 2);
  ASSERT_TRUE(relu1.runner_up_us.has_value());
  EXPECT_DOUBLE_EQ(*relu1.runner_up_us, 12.5);
  EXPECT_EQ(t.layer(s1, "Tanh").candidates, 1);
  EXPECT_FALSE(t.layer(s1, "Tanh").runner_up_us.has_value());
  // At a budget of 2: Relu's best is the 2-thread case (one candidate there), Sigmoid's the 1-thread
  // one: its candidates are system one's, not the two of system two.
  const auto s2 = analyze_model(t.model, value(load_costs(*t.db, two)));
  EXPECT_EQ(t.layer(s2, "Relu").candidates, 1);
  EXPECT_EQ(t.layer(s2, "Relu").raced_out, 0);
  EXPECT_EQ(t.layer(s2, "Sigmoid").threads, 1);
  EXPECT_EQ(t.layer(s2, "Sigmoid").candidates, 1);
  EXPECT_FALSE(t.layer(s2, "Sigmoid").runner_up_us.has_value());
}

// The bound check at a batch above 1 and a budget of 2 threads: S at 2 threads (the budget's) is
// checked against the runtime's latency at 2 threads, S at 1 against the latency at 1.
TEST(ThreadBudget, TheBoundCheckComparesEachThreadCountAtItsBatch) {
  BudgetDb t(8);
  ASSERT_EQ(t.model.batch, 8);
  const int64_t one = t.system(1), two = t.system(2);
  t.time(one, "Relu", 80);
  t.time(one, "Sigmoid", 160);
  t.time(one, "Tanh", 320);
  t.time(two, "Relu", 45);
  t.time(two, "Sigmoid", 170);
  t.time(two, "Tanh", 200);
  t.runtime(1, 600);  // above S_1 = 560: holds
  t.runtime(2, 400);  // below S_2 = 45 + 160 + 200 = 405: a violation at 2 threads
  AnalyzeOptions at2;
  at2.threads = 2;
  auto r2 = build_report(*t.db, {t.model}, std::nullopt, at2);
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  ASSERT_EQ(r2->models.size(), 1u);
  EXPECT_EQ(r2->costs.system_id, two);
  EXPECT_DOUBLE_EQ(r2->models[0].bounds.S, 405);
  const BoundCheck& c2 = r2->models[0].bound_check;
  EXPECT_EQ(c2.latencies, 1);  // the 1-thread latency is not comparable with S at 2 threads
  ASSERT_EQ(c2.violations.size(), 1u);
  EXPECT_EQ(c2.violations[0].batch, 8);
  EXPECT_EQ(c2.violations[0].threads, 2);
  EXPECT_DOUBLE_EQ(c2.violations[0].S_us, 405);
  EXPECT_DOUBLE_EQ(c2.violations[0].latency_us, 400);

  AnalyzeOptions at1;
  at1.threads = 1;
  auto r1 = build_report(*t.db, {t.model}, std::nullopt, at1);
  ASSERT_TRUE(r1.ok()) << r1.error().message;
  EXPECT_EQ(r1->costs.system_id, one);
  EXPECT_DOUBLE_EQ(r1->models[0].bounds.S, 560);
  EXPECT_EQ(r1->models[0].bound_check.latencies, 1);
  EXPECT_TRUE(r1->models[0].bound_check.violations.empty());
  AnalyzeOptions at4;
  at4.threads = 4;
  EXPECT_FALSE(build_report(*t.db, {t.model}, std::nullopt, at4).ok());  // nothing measured at 4 threads
}

}  // namespace
}  // namespace floorline::analyzer
