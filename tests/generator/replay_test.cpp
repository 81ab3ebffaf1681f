// Replay: kernels wired through their ports, and a whole model replayed from a real database.
#include "floorline/generator/replay.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/generator/cache_state.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/kernels/buffer.hpp"
#include "test_support.hpp"

namespace floorline::gen {
namespace {

// Conv → Relu → Conv → Add (residual, with the Relu) → Reshape (a view) → Sigmoid; weights are inputs.
constexpr const char* kResidual = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
residual (float[1,16,14,14] x, float[16,16,3,3] w1, float[16,16,3,3] w2, int64[2] shape) => (float y)
{
  c1 = Conv <pads = [1, 1, 1, 1]> (x, w1)
  r1 = Relu (c1)
  c2 = Conv <pads = [1, 1, 1, 1]> (r1, w2)
  a = Add (c2, r1)
  v = Flatten <axis = 1> (a)
  y = Sigmoid (v)
}
)onnx";

constexpr const char* kTwoEltwise = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
two (float[2,3,5,7] x) => (float y)
{
  s = Sigmoid (x)
  y = Tanh (s)
}
)onnx";

const PlannedCase& default_case(const Plan& plan, const std::string& op) {
  for (const auto& c : plan.cases)
    if (c.spec.problem.op == op && c.work.is_default && c.spec.variant.fusion.empty() && c.spec.feeds.empty())
      return c;
  ADD_FAILURE() << "no default case for " << op;
  return plan.cases.front();
}

// The default oneDNN cases of a model's Sigmoid and its Tanh, built.
struct SigmoidTanh {
  std::unique_ptr<kernels::Kernel> sigmoid, tanh;
};
void build_sigmoid_tanh(const char* onnx_text, SigmoidTanh& out) {
  auto models = mp::process_model_text(onnx_text, "two.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Backend* onednn = find_backend("onednn");
  const Plan plan = make_plan(*models, {onednn}, {});
  auto sigmoid = onednn->factory()(default_case(plan, "Sigmoid").spec);
  auto tanh = onednn->factory()(default_case(plan, "Tanh").spec);
  ASSERT_TRUE(sigmoid.ok() && tanh.ok());
  out.sigmoid = std::move(sigmoid).value();
  out.tanh = std::move(tanh).value();
}

TEST(Replay, ABoundInputReadsWhatTheProducerWrote) {
  SigmoidTanh k;
  ASSERT_NO_FATAL_FAILURE(build_sigmoid_tanh(kTwoEltwise, k));
  const auto out = k.sigmoid->port(true, 0);
  const auto in = k.tanh->port(false, 0);
  ASSERT_TRUE(out && in);
  EXPECT_EQ(out->layout, "plain");
  EXPECT_EQ(out->bytes, 2 * 3 * 5 * 7 * 4);
  EXPECT_EQ(in->bytes, out->bytes);
  ASSERT_TRUE(k.tanh->bind(false, 0, out->data).ok());
  k.sigmoid->run();
  k.tanh->run();
  const auto* s = static_cast<const float*>(out->data);
  const auto* y = static_cast<const float*>(k.tanh->port(true, 0)->data);
  for (int i = 0; i < 210; ++i) {
    ASSERT_GT(s[i], 0.f);  // a sigmoid output, not the tanh's own random input in [-1, 1)
    EXPECT_NEAR(y[i], std::tanh(s[i]), 1e-5) << i;
  }
  EXPECT_FALSE(k.tanh->bind(false, 1, out->data).ok());  // Tanh has one input
}

// A wired case's former buffers go back to the system (Kernel::release_unused_buffers, as replay
// calls it once a step is wired), each once, and the case still computes from what it is wired to:
// 1 MiB operands, so that they lie on their own mappings.
TEST(Replay, AWiredCaseGivesItsOwnBuffersBackAndStillReadsItsProducer) {
  SigmoidTanh k;
  ASSERT_NO_FATAL_FAILURE(build_sigmoid_tanh(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
two (float[1,64,64,64] x) => (float y)
{
  s = Sigmoid (x)
  y = Tanh (s)
}
)onnx",
                                             k));
  const auto out = k.sigmoid->port(true, 0);
  const auto was = k.tanh->port(false, 0);
  const auto tanh_out = k.tanh->port(true, 0);
  ASSERT_TRUE(out && was && tanh_out);
  const int64_t bytes = int64_t{64} * 64 * 64 * 4;
  ASSERT_EQ(was->bytes, bytes);
  ASSERT_TRUE(k.tanh->bind(false, 0, out->data).ok());
  // The port's former buffer (a plain f32 case: its only copy) is no argument of run() any more.
  const std::vector<kernels::Port> former = {*was, *tanh_out}, now = {*k.tanh->port(false, 0), *tanh_out};
  const int64_t released = k.tanh->release_unused_buffers(former, now);
  EXPECT_GE(released, bytes - 4096);
  EXPECT_LE(released, 2 * bytes);                             // the output, which run() writes, stays
  EXPECT_EQ(k.tanh->release_unused_buffers(former, now), 0);  // given back once
  EXPECT_EQ(k.sigmoid->release_unused_buffers({}, {}), 0);    // unwired: every buffer is still run()'s
  EXPECT_EQ(kernels::release_pages(nullptr, 1 << 20), 0u);
  k.sigmoid->run();
  k.tanh->run();
  const auto* s = static_cast<const float*>(out->data);
  const auto* y = static_cast<const float*>(k.tanh->port(true, 0)->data);
  for (int64_t i = 0; i < bytes / 4; i += 97) {
    ASSERT_GT(s[i], 0.f);
    ASSERT_NEAR(y[i], std::tanh(s[i]), 1e-5) << i;
  }
}

// The default, for a case that keeps nothing but its ports: a former port's buffer that no port now
// overlaps is given back, one still in use is not.
TEST(Replay, TheDefaultGivesBackTheFormerPortsNoPortStillUses) {
  struct TwoPorts final : kernels::Kernel {
    kernels::HostBuffer in{size_t{1} << 20}, out{size_t{1} << 20};
    void run() override {}
    std::string implementation() const override { return "test"; }
    int64_t workspace_bytes() const override { return 0; }
    Status verify() override { return {}; }
  } k;
  const kernels::Port in{k.in.data(), 1 << 20, "plain"}, out{k.out.data(), 1 << 20, "plain"};
  std::vector<unsigned char> elsewhere(1 << 20);
  const kernels::Port bound{elsewhere.data(), 1 << 20, "plain"};
  // The input wired elsewhere, the output still its own: the input's whole pages go back (its 1 MiB,
  // less a page where its placement offset leaves a part page at either end).
  const int64_t released = k.release_unused_buffers({in, out}, {bound, out});
  EXPECT_GE(released, (1 << 20) - 4096);
  EXPECT_LE(released, 1 << 20);
  // Nothing wired: nothing goes back.
  EXPECT_EQ(k.release_unused_buffers({in, out}, {in, out}), 0);
}

// kResidual benched on oneDNN (2 implementations per config, short repetitions) into a fresh
// database: what the whole-model replay tests start from.
class BenchedResidual : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = mp::process_model_text(kResidual, "residual.onnx", {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    models = std::move(m).value();
    PlanOptions po;
    po.max_impls = 2;
    plan = make_plan(models, backends, po);
    auto opened = benchdb::Database::open((tmp.dir / "r.db").string());
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    db.emplace(std::move(opened).value());
    ro.min_time = 0.0005;
    ro.repetitions = 3;
    ro.warmup_seconds = 0.0005;
    ro.calibrate = false;
    // Without racing: every planned case passes, so the layouts the replay may choose from do not
    // depend on which candidates a noisy reading raced out.
    ro.race_margin = 0;
    auto r = run_plan(&*db, models, plan, backends, ro);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->failed, 0);
    run = *r;
  }
  // The residual chain's layers by role: the second Conv's key, the Add's key and name, the Relu's name.
  struct Roles {
    std::string c2_key, add_key, add_name, relu_name;
  };
  Roles roles() const {
    Roles r;
    int convs = 0;
    for (const auto& l : models.front().layers) {
      if (l.op_type == "Conv" && ++convs == 2) r.c2_key = l.key;
      if (l.op_type == "Add") r.add_key = l.key, r.add_name = l.name;
      if (l.op_type == "Relu") r.relu_name = l.name;
    }
    return r;
  }
  static ReplayOptions quick_replay() {
    ReplayOptions opts;
    opts.repetitions = 3;
    opts.min_time = 0.001;
    opts.warmup_seconds = 0.001;
    return opts;
  }
  test::TempDir tmp{"replay"};
  std::vector<mp::ModelIR> models;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  Plan plan;
  std::optional<benchdb::Database> db;
  RunOptions ro;
  RunSummary run;
};

TEST_F(BenchedResidual, AModelIsReplayedFromItsBestCasesWithEveryActivationWired) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  EXPECT_EQ(chosen->size(), 4u);  // two Conv configs are one (same shapes), Relu, Add, Sigmoid
  const ReplayOptions opts = quick_replay();
  auto r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers_replayed, 5);  // Conv, Relu, Conv, Add, Sigmoid (Flatten is a view)
  EXPECT_EQ(r->layers_missing, 0);
  EXPECT_EQ(r->operands_unwired, 0);
  // Relu ← c1, Conv ← r1, Add ← c2 and r1, Sigmoid ← Flatten(a): 5 activations, each read in place
  // or through one conversion.
  EXPECT_EQ(r->operands_shared + r->conversions, 5);
  EXPECT_EQ(r->steps.size(), static_cast<size_t>(r->layers_replayed + r->conversions));
  // The memory planner: c1 is dead once the Relu has read it, so c2 (the same size) reuses its buffer.
  EXPECT_GE(r->buffers_reused, 1);
  EXPECT_EQ(r->buffers + r->buffers_reused, 5);  // one output per layer
  // Each wired port's former buffer went back to the system: 10 ports (5 inputs, 5 outputs) of
  // 12,544 bytes, at least two whole pages each.
  EXPECT_GE(r->released_bytes, 10 * 8192);
  // cases_us is S over the replayed layers: the chosen cases' times, the conv twice.
  double s = 0;
  for (const auto& l : models.front().layers)
    if (l.cost_bearing()) s += chosen->at(l.key).us;
  EXPECT_DOUBLE_EQ(r->cases_us, s);
  EXPECT_GT(r->median_us, 0);
  EXPECT_LE(r->min_us, r->median_us);
  EXPECT_EQ(r->repetitions, 3);
  EXPECT_GE(r->passes, 3);
  double in_graph = 0;
  for (const auto& st : r->steps) in_graph += st.in_graph_us;
  EXPECT_DOUBLE_EQ(in_graph, r->layers_us + r->conversions_us);
  // The paired measure: a pair per profile pass (at least profile_passes, more within
  // profile_seconds: this model's pass is far below a millisecond), each layer step timed alone in
  // it; the replay at S's host state is Σ the steps' case times × the pairs' median ratio.
  EXPECT_GE(r->pairs, opts.profile_passes);
  EXPECT_LE(r->pairs, static_cast<int>(ReplayOptions::kMaxProfilePasses));
  double alone = 0, alone_now = 0;
  for (const auto& st : r->steps) {
    if (st.conversion) {
      EXPECT_EQ(st.alone_now_us, 0) << st.label;
      continue;
    }
    EXPECT_GT(st.alone_now_us, 0) << st.label;
    alone += st.alone_us;
    alone_now += st.alone_now_us;
  }
  EXPECT_DOUBLE_EQ(r->steps_alone_us, alone);
  EXPECT_DOUBLE_EQ(r->alone_now_us, alone_now);
  // The probe: a slow step after the first has a cause, from what it touches or measured right
  // after the step before it; a step that is not slow is not probed.
  for (size_t k = 1; k < r->steps.size(); ++k) {
    const ReplayStep& st = r->steps[k];
    if (st.slow()) {
      EXPECT_FALSE(st.cause().empty()) << st.label;
    } else {
      EXPECT_EQ(st.after_previous_us, 0) << st.label;
    }
  }
  EXPECT_LE(r->slow_unexplained, 1);
  EXPECT_GT(r->paired_ratio, 0);
  EXPECT_DOUBLE_EQ(r->paired_us(), alone * r->paired_ratio);
  // How much slower the host ran than when the cases were timed: the steps alone now over them.
  EXPECT_DOUBLE_EQ(r->host_slowdown(), alone_now / alone);
  // The second look: for a replay over 1.1 × its paired figure.
  ReplayResult slowed = *r;
  slowed.min_us = 1.2 * slowed.paired_us();
  EXPECT_TRUE(wants_second_look(slowed));
  slowed.min_us = 1.05 * slowed.paired_us();
  EXPECT_FALSE(wants_second_look(slowed));

  const auto row = replay_row(*r, run.system_id, run.run_id, "f32");
  EXPECT_EQ(row.system_id, run.system_id);
  EXPECT_EQ(row.run_id, run.run_id);
  EXPECT_EQ(row.model_name, r->model);
  EXPECT_DOUBLE_EQ(row.median_us, r->median_us);
  EXPECT_EQ(nlohmann::json::parse(row.makeup).at("conversions").get<int>(), r->conversions);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(row.makeup).at("paired_us").get<double>(), r->paired_us());
  const auto stored = db->upsert_replay(row);
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 1);
}

// Without the paired measure (run --quick): no pair, no step timed alone, no paired time.
TEST_F(BenchedResidual, AReplayWithoutPairsHasNoPairedTime) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ReplayOptions opts = quick_replay();
  opts.paired = false;
  opts.profile_passes = 2;
  opts.profile_seconds = 0;
  auto r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->pairs, 0);
  EXPECT_EQ(r->paired_ratio, 0);
  EXPECT_EQ(r->paired_us(), 0);
  for (const auto& st : r->steps) EXPECT_EQ(st.alone_now_us, 0) << st.label;
  EXPECT_GT(r->steps_alone_us, 0);
  // No pair, no reading of the host: never a second look.
  EXPECT_EQ(r->host_slowdown(), 0);
  EXPECT_FALSE(wants_second_look(*r));
}

// A long pass (ReplayOptions::long_pass) gets long_repetitions repetitions and long_profile_passes
// profile passes; a short one its repetitions and profile_passes.
TEST_F(BenchedResidual, ALongPassGetsFewerRepetitionsAndPairs) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ReplayOptions opts = quick_replay();
  opts.repetitions = 5;
  opts.profile_passes = 4;
  opts.profile_seconds = 0;
  opts.long_repetitions = 2;
  opts.long_profile_passes = 2;
  opts.long_pass = 1e-9;  // every pass is long
  auto r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->repetitions, 2);
  EXPECT_EQ(r->pairs, 2);
  opts.long_pass = 1e3;  // none is
  r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->repetitions, 5);
  EXPECT_EQ(r->pairs, 4);
}

// A machine with less memory available than ReplayOptions::min_available_bytes after a step's build:
// the model's replay stops with an error that says so (here 1 PiB: no machine has it), nothing
// crashes; with the default floor the same replay runs.
TEST_F(BenchedResidual, AReplayStopsWhereTheMachineRunsOutOfMemory) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ReplayOptions opts = quick_replay();
  opts.min_available_bytes = int64_t{1} << 50;
  auto r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("replay stopped after building 0 step(s)"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find(models.front().name), std::string::npos) << r.error().message;
  opts.min_available_bytes = ReplayOptions{}.min_available_bytes;
  r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->layers_replayed, 0);
}

// The second look's replay (second_look_options: the timed repetitions only) folded into the first
// (take_second_look): the lower time stands, the first's profile stays.
TEST_F(BenchedResidual, ASecondLookKeepsTheLowerTimeAndTheFirstProfile) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  const ReplayOptions opts = quick_replay();
  auto first = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(first.ok()) << first.error().message;
  ASSERT_GT(first->pairs, 0);
  auto second = replay_model(models.front(), *chosen, *backends[0], second_look_options(opts));
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->pairs, 0);
  EXPECT_EQ(second->repetitions, first->repetitions);
  EXPECT_GT(second->min_us, 0);
  // A first replay read slow: the second's time stands, the first's steps and pairs stay.
  ReplayResult slow = *first;
  slow.min_us = slow.median_us = 10 * second->min_us;
  const int64_t passes = slow.passes;
  EXPECT_TRUE(take_second_look(slow, *second));
  EXPECT_DOUBLE_EQ(slow.min_us, second->min_us);
  EXPECT_DOUBLE_EQ(slow.median_us, second->median_us);
  EXPECT_DOUBLE_EQ(slow.second_look_us, second->min_us);
  EXPECT_EQ(slow.passes, passes + second->passes);
  EXPECT_EQ(slow.pairs, first->pairs);
  EXPECT_DOUBLE_EQ(slow.paired_ratio, first->paired_ratio);
  EXPECT_EQ(slow.steps.size(), first->steps.size());
  EXPECT_EQ(nlohmann::json::parse(replay_row(slow, run.system_id, run.run_id, "f32").makeup)
                .at("second_look_us")
                .get<double>(),
            second->min_us);
  // A second look above the first: the first's time stands.
  ReplayResult fast = *first;
  fast.min_us = second->min_us / 10;
  EXPECT_FALSE(take_second_look(fast, *second));
  EXPECT_DOUBLE_EQ(fast.min_us, second->min_us / 10);
  EXPECT_DOUBLE_EQ(fast.second_look_us, second->min_us);
}

// The replay reads the sentinel after each timed repetition, as the bench does between visits: a
// repetition after which it reads slowed (above 1.15 × its lowest reading) is timed again, at most
// `repetitions` more times. A scripted clock: the baseline, then one slowed reading, then normal;
// then a clock that reads slowed after every repetition.
TEST_F(BenchedResidual, ARepetitionTheSentinelReadsSlowedIsTimedAgain) {
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ReplayOptions opts = quick_replay();
  std::vector<double> readings = {1.0, 1.0, 2.0, 1.05, 1.1};  // baseline, rep 1, rep 2 (slowed), ...
  size_t next = 0;
  opts.sentinel = [&] { return next < readings.size() ? readings[next++] : 1.0; };
  auto r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->repetitions, 3);
  EXPECT_EQ(r->slowed_repetitions, 1);
  EXPECT_EQ(next, 5u);  // the baseline and one reading after each of the 4 repetitions timed
  EXPECT_EQ(nlohmann::json::parse(replay_row(*r, run.system_id, run.run_id, "f32").makeup)
                .at("slowed_repetitions")
                .get<int>(),
            1);

  int calls = 0;
  opts.sentinel = [&] { return ++calls == 1 ? 1.0 : 3.0; };  // slowed after every repetition
  r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->slowed_repetitions, 3);  // timed again 3 times at most, then kept
  EXPECT_EQ(r->repetitions, 3);
  EXPECT_EQ(calls, 1 + 6);

  opts.sentinel = nullptr;  // no sentinel: nothing timed again
  r = replay_model(models.front(), *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->slowed_repetitions, 0);
}

// The thread budget: kResidual timed at 1 and 2 threads (two systems of one host). Each config's
// chosen case is the faster of its two counts, with that count; the replay runs each layer at it.
TEST_F(BenchedResidual, EachLayerIsReplayedAtTheThreadCountItsCaseWonAt) {
  RunOptions two = ro;
  two.threads = 2;
  auto r2 = run_plan(&*db, models, plan, backends, two);
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  ASSERT_NE(r2->system_id, run.system_id);
  auto one = best_cases(*db, run.system_id, plan, DType::kF32);
  auto exact = best_cases(*db, r2->system_id, plan, DType::kF32, false);
  auto budget = best_cases(*db, r2->system_id, plan, DType::kF32);
  ASSERT_TRUE(one.ok() && exact.ok() && budget.ok());
  ASSERT_EQ(budget->size(), one->size());
  for (const auto& [key, c] : *budget) {
    const double fastest = std::min(one->at(key).us, exact->at(key).us);
    EXPECT_DOUBLE_EQ(c.us, fastest) << key;
    EXPECT_EQ(c.threads, one->at(key).us <= exact->at(key).us ? 1 : 2) << key;
    EXPECT_EQ(one->at(key).threads, 1);
    EXPECT_EQ(exact->at(key).threads, 2);
  }
  ReplayOptions opts = quick_replay();
  opts.threads = 2;
  auto r = replay_model(models.front(), *budget, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers_replayed, 5);
  for (const auto& st : r->steps)
    if (!st.conversion) {
      EXPECT_EQ(st.threads, budget->at(st.key).threads) << st.label;
    }
  const auto makeup = nlohmann::json::parse(replay_row(*r, r2->system_id, r2->run_id, "f32").makeup);
  for (const auto& l : makeup.at("layer_times")) EXPECT_GE(l.at("threads").get<int>(), 1);
}

// A re-timing with no replay behind it (after the bound check: `floorline run`) times a fused best
// case at the thread count it won at within the budget: here a fused case whose 2-thread row is made
// 4x slower, so that its 1-thread row is the budget's best, is timed again on the 1-thread system.
TEST_F(BenchedResidual, ARetimingWithoutAReplayTimesAFusedCaseAtTheCountItWonAt) {
  RunOptions two = ro;
  two.threads = 2;
  auto r2 = run_plan(&*db, models, plan, backends, two);
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  auto fused = best_fused_cases(*db, r2->system_id, plan, DType::kF32, false);
  ASSERT_TRUE(fused.ok() && !fused->empty());
  const auto group = fused->begin()->first;  // (config key, fusion)
  // Every case of the group 4x slower at 2 threads, in its rows and in the best row.
  for (const char* table : {"measurements", "best_measurements"})
    ASSERT_TRUE(
        db->query(fmt::format("UPDATE {} SET min_us = 4 * min_us, median_us = 4 * median_us WHERE "
                              "system_id = ?1 AND case_id IN (SELECT c.id FROM cases c JOIN "
                              "layer_configs l ON l.id = c.config_id WHERE l.key = ?2 AND c.fusion = ?3)",
                              table),
                  {r2->system_id, group.first, group.second})
            .ok());
  auto budget = best_fused_cases(*db, r2->system_id, plan, DType::kF32);
  ASSERT_TRUE(budget.ok());
  ASSERT_EQ(budget->at(group).threads, 1);
  const std::string name = budget->at(group).spec.name;
  auto chosen = best_cases(*db, r2->system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok());
  ReplayResult none;
  auto rt = retime_cases(*db, models.front(), plan, {name}, backends, two, r2->system_id, DType::kF32,
                         *chosen, none);
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  EXPECT_EQ(rt->cases, 1);
  // Its run was the 1-thread system's (the lower time kept there).
  EXPECT_EQ(rt->run.system_id, run.system_id);
  EXPECT_EQ(rt->run.threads, 1);
  EXPECT_EQ(rt->run.passed, 1);
}

// The epilogues S counts (docs/ANALYZER.md): c1's Relu runs in c1's measured fused Conv+Relu case
// when that case is faster than the two unfused ones, as one step whose output is the Relu's (which
// c2 and the Add then read); slower, the two run apart. (c2's residual Add: the next test.)
TEST_F(BenchedResidual, AnActivationInItsProducersFusedCaseIsOneStep) {
  const mp::ModelIR& model = models.front();
  std::string c1_key, relu_key, relu_name;
  for (const auto& l : model.layers) {
    if (l.op_type == "Conv" && c1_key.empty()) c1_key = l.key;
    if (l.op_type == "Relu") relu_key = l.key, relu_name = l.name;
  }
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  auto fused = best_fused_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok() && fused.ok());
  ASSERT_TRUE(fused->count({c1_key, "Relu"})) << "no fused Conv+Relu case measured";
  EXPECT_FALSE(fused->count({c1_key, ""}));                                // fused cases only
  *fused = FusedChoices{{{c1_key, "Relu"}, fused->at({c1_key, "Relu"})}};  // c1's alone
  const double unfused = chosen->at(c1_key).us + chosen->at(relu_key).us;
  auto steps_of = [&](const ReplayResult& r) {
    std::vector<std::string> labels;
    for (const auto& st : r.steps)
      if (!st.conversion) labels.push_back(st.label);
    return labels;
  };
  auto plain = replay_model(model, *chosen, *backends[0], quick_replay());
  ASSERT_TRUE(plain.ok()) << plain.error().message;

  (*fused)[{c1_key, "Relu"}].us = 0.9 * unfused;  // faster than the two: applied
  auto r = replay_model(model, *chosen, *backends[0], quick_replay(), *fused);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers_replayed, plain->layers_replayed);
  EXPECT_EQ(r->operands_unwired, 0);
  EXPECT_EQ(steps_of(*r).size() + 1, steps_of(*plain).size());
  const ReplayStep* head = nullptr;
  for (const auto& st : r->steps) {
    EXPECT_NE(st.layer, relu_name) << "the Relu ran as a step of its own";
    if (!st.fusion.empty()) head = &st;
  }
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->fusion, "Relu");
  EXPECT_EQ(head->key, c1_key);
  EXPECT_NE(head->label.find("(Conv+Relu)"), std::string::npos) << head->label;
  EXPECT_DOUBLE_EQ(head->alone_us, 0.9 * unfused);
  EXPECT_NEAR(r->cases_us, plain->cases_us - unfused + 0.9 * unfused, 1e-9 * plain->cases_us);
  // The fused case is S's case for the chain: named for re-timing where the graph beat it, and
  // rebased from the fused cases (not from `chosen`, which keeps its time).
  EXPECT_EQ(head->case_name, fused->at({c1_key, "Relu"}).spec.name);
  const auto names = cases_to_retime(*r, *chosen, 1e9);
  EXPECT_EQ(std::count(names.begin(), names.end(), head->case_name), head->beaten() ? 1 : 0);
  rebase(*r, *chosen);
  EXPECT_DOUBLE_EQ(head->alone_us, 0.9 * unfused);
  FusedChoices lower = *fused;
  lower.at({c1_key, "Relu"}).us = 0.8 * unfused;
  rebase(*r, *chosen, lower);
  EXPECT_DOUBLE_EQ(head->alone_us, 0.8 * unfused);
  EXPECT_DOUBLE_EQ(head->best_us, 0.8 * unfused);

  (*fused)[{c1_key, "Relu"}].us = 1.1 * unfused;  // slower than the two: not applied
  auto slower = replay_model(model, *chosen, *backends[0], quick_replay(), *fused);
  ASSERT_TRUE(slower.ok()) << slower.error().message;
  EXPECT_EQ(steps_of(*slower), steps_of(*plain));
}

// A residual Add is its producer's epilogue too: c2's fused Conv+Add case, where faster than the two,
// runs as one step that sums into r1's buffer in place (the Add is r1's last reader), as a runtime
// does: no Add step, no buffer of its own, the summand wired (not unwired).
TEST_F(BenchedResidual, AResidualAddSumsIntoItsOperandInPlace) {
  const mp::ModelIR& model = models.front();
  const auto [c2_key, add_key, add_name, relu_name] = roles();
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  auto fused = best_fused_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok() && fused.ok());
  ASSERT_TRUE(fused->count({c2_key, "Add"})) << "no fused Conv+Add case measured";
  FusedChoices add_only{{{c2_key, "Add"}, fused->at({c2_key, "Add"})}};
  add_only.at({c2_key, "Add"}).us = 0.9 * (chosen->at(c2_key).us + chosen->at(add_key).us);
  auto r = replay_model(model, *chosen, *backends[0], quick_replay(), add_only);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->operands_unwired, 0);
  const ReplayStep* relu = nullptr;
  const ReplayStep* head = nullptr;
  for (const auto& st : r->steps) {
    EXPECT_NE(st.layer, add_name) << "the Add ran as a step of its own";
    if (st.layer == relu_name) relu = &st;
    if (st.fusion == "Add") head = &st;
  }
  ASSERT_NE(relu, nullptr);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->key, c2_key);
  EXPECT_NE(head->label.find("(Conv+Add)"), std::string::npos) << head->label;
  // In place: the fused step writes the buffer the Relu wrote, and reads it.
  ASSERT_FALSE(relu->writes.empty());
  ASSERT_FALSE(head->writes.empty());
  EXPECT_EQ(head->writes.front().first, relu->writes.front().first);
  EXPECT_EQ(r->layers_replayed, 5);
}

// Every measured Conv+Add case of the residual chain sums into the Relu's value: in place where its
// destination has the Relu's layout, else into a conversion of it made just before (as a runtime
// reorders the summand); the summand is never left out.
TEST_F(BenchedResidual, ASummandInAnotherLayoutIsConvertedIntoTheFusedDestination) {
  const mp::ModelIR& model = models.front();
  const auto [c2_key, add_key, add_name, relu_name] = roles();
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  auto all = passed_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok() && all.ok());
  ASSERT_TRUE(all->count({c2_key, "Add"})) << "no fused Conv+Add case measured";
  int in_place = 0, converted = 0;
  for (ChosenCase c : all->at({c2_key, "Add"})) {
    c.us = 0.9 * (chosen->at(c2_key).us + chosen->at(add_key).us);  // so that the chain is fused
    const FusedChoices one{{{c2_key, "Add"}, c}};
    auto r = replay_model(model, *chosen, *backends[0], quick_replay(), one);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->operands_unwired, 0) << c.spec.name;
    const ReplayStep* relu = nullptr;
    const ReplayStep* head = nullptr;
    const ReplayStep* summand = nullptr;
    for (const auto& st : r->steps) {
      if (st.layer == relu_name) relu = &st;
      if (st.fusion == "Add") head = &st;
      if (st.conversion && st.label.find("(its summand)") != std::string::npos) summand = &st;
    }
    ASSERT_TRUE(relu && head) << c.spec.name;
    ASSERT_FALSE(head->writes.empty());
    if (summand) {
      ++converted;
      // The conversion runs after the Relu and before the fused case, and writes the buffer the fused
      // case adds into.
      EXPECT_LT(relu, summand);
      EXPECT_LT(summand, head);
      ASSERT_FALSE(summand->writes.empty());
      EXPECT_EQ(head->writes.front().first, summand->writes.front().first);
      EXPECT_NE(head->writes.front().first, relu->writes.front().first);
    } else {
      ++in_place;
      EXPECT_EQ(head->writes.front().first, relu->writes.front().first) << c.spec.name;
    }
    // The fused result: the replayed model's output passes through the Sigmoid of (conv + r1).
    EXPECT_EQ(r->layers_replayed, 5);
  }
  EXPECT_GT(in_place + converted, 0);
}

// A case measured while the machine was slower (here: its rows made 4x slower in the database, as a
// sustained slowdown over all its passes would) runs faster in the graph than alone; it is the one
// timed again after the replay, the lower time is kept, and S over the replayed layers comes down.
TEST_F(BenchedResidual, CasesTheReplayBeatsAreTimedAgainKeepingTheLowerTime) {
  const mp::ModelIR& model = models.front();
  std::string conv_key;
  for (const auto& l : model.layers)
    if (l.op_type == "Conv") conv_key = l.key;
  ASSERT_FALSE(conv_key.empty());
  auto measured = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(measured.ok()) << measured.error().message;
  const double conv_us = measured->at(conv_key).us;
  ASSERT_GT(conv_us, 0);
  // Every measurement of the Conv config, and its best, 4x slower.
  for (const char* sql :
       {"UPDATE measurements SET min_us = min_us * 4, median_us = median_us * 4 WHERE case_id IN "
        "(SELECT c.id FROM cases c JOIN layer_configs lc ON lc.id = c.config_id WHERE lc.key = ?1)",
        "UPDATE best_measurements SET min_us = min_us * 4, median_us = median_us * 4 WHERE config_id = "
        "(SELECT id FROM layer_configs WHERE key = ?1)"})
    ASSERT_TRUE(db->query(sql, {conv_key}).ok());
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ASSERT_DOUBLE_EQ(chosen->at(conv_key).us, 4 * conv_us);
  const std::string conv_case = chosen->at(conv_key).spec.name;

  const ReplayOptions opts = quick_replay();
  auto r = replay_model(model, *chosen, *backends[0], opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Nothing to do when replay / S is at least `below`.
  EXPECT_TRUE(cases_to_retime(*r, *chosen, 0).empty());
  const auto names = cases_to_retime(*r, *chosen, 1e9);
  ASSERT_FALSE(names.empty());
  EXPECT_NE(std::find(names.begin(), names.end(), conv_case), names.end());
  for (const auto& name : names) {  // each one a case some layer ran faster in the graph
    bool beaten = false;
    for (const auto& st : r->steps) beaten |= st.beaten() && chosen->at(st.key).spec.name == name;
    EXPECT_TRUE(beaten) << name;
  }
  const auto untouched = db->query("SELECT count(*) FROM measurements WHERE superseded = 1");
  ASSERT_TRUE(untouched.ok());
  EXPECT_EQ(std::get<int64_t>(untouched->rows.at(0)[0]), 0);

  const double before = r->cases_us;
  auto rt = retime_cases(*db, model, plan, names, backends, ro, run.system_id, DType::kF32, *chosen, *r);
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  EXPECT_EQ(rt->cases, static_cast<int>(names.size()));
  EXPECT_EQ(rt->run.passed, static_cast<int64_t>(names.size()));
  EXPECT_GE(rt->lowered, 1);
  EXPECT_DOUBLE_EQ(rt->cases_us_before, before);
  EXPECT_DOUBLE_EQ(rt->cases_us_after, r->cases_us);
  // The Conv's time is its own again (well under the 4x), and S over the layers follows `chosen`.
  EXPECT_LT(chosen->at(conv_key).us, 2 * conv_us);
  EXPECT_LT(r->cases_us, before);
  double s = 0;
  for (const auto& l : model.layers)
    if (l.cost_bearing()) s += chosen->at(l.key).us;
  EXPECT_DOUBLE_EQ(r->cases_us, s);
  for (const auto& st : r->steps) {
    if (!st.conversion) {
      EXPECT_DOUBLE_EQ(st.alone_us, chosen->at(st.key).us) << st.label;
    }
  }
  // The slowed Conv row was superseded by the lower one; a case not named was not measured again.
  auto rows = db->query(
      "SELECT c.name, m.superseded FROM measurements m JOIN cases c ON c.id = m.case_id ORDER BY m.id");
  ASSERT_TRUE(rows.ok());
  int conv_rows = 0, superseded = 0;
  for (const auto& row : rows->rows) {
    const auto& name = std::get<std::string>(row[0]);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      EXPECT_EQ(std::get<int64_t>(row[1]), 0) << name;
    } else {
      superseded += static_cast<int>(std::get<int64_t>(row[1]));
    }
    conv_rows += name == conv_case;
  }
  EXPECT_EQ(conv_rows, 2);
  EXPECT_GE(superseded, 1);
  // Timed again, a case never gets slower: the lower measurement stays.
  const double after = chosen->at(conv_key).us;
  auto again =
      retime_cases(*db, model, plan, {conv_case}, backends, ro, run.system_id, DType::kF32, *chosen, *r);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_LE(chosen->at(conv_key).us, after);
  // What `floorline run` calls: nothing below `below` 0; when asked at any ratio, a round exactly
  // when cases_to_retime names cases, at most 3.
  const auto rows_before = db->query("SELECT count(*) FROM measurements");
  const bool expect_round = !cases_to_retime(*r, *chosen, 1e9).empty();
  auto none = retime_after_replay(*db, model, plan, backends, ro, run.system_id, DType::kF32, *chosen, *r, 0);
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->rounds, 0);
  EXPECT_EQ(none->cases, 0);
  EXPECT_EQ(db->query("SELECT count(*) FROM measurements")->rows, rows_before->rows);
  auto asked =
      retime_after_replay(*db, model, plan, backends, ro, run.system_id, DType::kF32, *chosen, *r, 1e9);
  ASSERT_TRUE(asked.ok()) << asked.error().message;
  EXPECT_EQ(asked->rounds > 0, expect_round);
  EXPECT_LE(asked->rounds, 3 + 1);  // and one round of every case where still below S
  EXPECT_DOUBLE_EQ(asked->cases_us_after, r->cases_us);
  EXPECT_LE(asked->cases_us_after, asked->cases_us_before);
  // Still below S after its rounds (a replay of 1 µs stays below whatever the cases take): one more
  // round times every replayed layer's case.
  r->min_us = 1;
  const auto first_round = cases_to_retime(*r, *chosen, 1e9);
  const auto every = cases_to_retime(*r, *chosen, 1e9, true);
  ASSERT_FALSE(first_round.empty());
  auto last =
      retime_after_replay(*db, model, plan, backends, ro, run.system_id, DType::kF32, *chosen, *r, 1e9, 1);
  ASSERT_TRUE(last.ok()) << last.error().message;
  // (Unless the first round already was every case: every layer beat its case this time.)
  const bool first_was_every = first_round == every;
  EXPECT_EQ(last->rounds, first_was_every ? 1 : 2);
  EXPECT_EQ(last->cases, static_cast<int>(first_round.size() + (first_was_every ? 0 : every.size())));
  // A name that is not a timed case of the plan is an error, before anything is timed.
  auto bad =
      retime_cases(*db, model, plan, {"no such case"}, backends, ro, run.system_id, DType::kF32, *chosen, *r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "residual.onnx (batch 1): 1 case(s) to time again are not timed cases of the plan");
}

// Which cases the re-timing names, on a replay made by hand: the beaten layers' cases; every
// layer's only when none is beaten and the replay is below S itself; none at or above `below`.
TEST(Replay, TheCasesToRetimeAreTheBeatenOnesOrAllBelowS) {
  std::map<std::string, ChosenCase> chosen;
  for (const char* k : {"a", "b", "c"}) chosen[k].spec.name = std::string("case-") + k;
  ReplayResult r;
  auto step = [](const char* key, double in_graph, double alone) {
    ReplayStep s;
    s.key = key;
    s.in_graph_us = in_graph;
    s.alone_us = alone;
    return s;
  };
  ReplayStep conversion;
  conversion.conversion = true;
  conversion.in_graph_us = 1;
  r.steps = {step("a", 10, 12), conversion, step("b", 30, 25), step("a", 11, 12), step("c", 5, 5)};
  r.cases_us = 12 + 25 + 12 + 5;  // 54
  r.min_us = 56;                  // replay / S = 1.04
  EXPECT_EQ(cases_to_retime(r, chosen, 1.05), std::vector<std::string>{"case-a"});
  EXPECT_TRUE(cases_to_retime(r, chosen, 1.03).empty());
  // `every` (retime_after_replay's last round): every replayed layer's case, beaten or not.
  EXPECT_EQ(cases_to_retime(r, chosen, 1.05, true), (std::vector<std::string>{"case-a", "case-b", "case-c"}));
  EXPECT_TRUE(cases_to_retime(r, chosen, 1.03, true).empty());
  // No layer beaten: nothing above S, every case below it.
  r.steps = {step("a", 12, 12), step("b", 30, 25), step("c", 6, 5)};
  r.cases_us = 42;
  r.min_us = 43;
  EXPECT_TRUE(cases_to_retime(r, chosen, 1.05).empty());
  r.min_us = 41;
  EXPECT_EQ(cases_to_retime(r, chosen, 1.05), (std::vector<std::string>{"case-a", "case-b", "case-c"}));
  // rebase: each layer's time from `chosen`, and S over them.
  chosen["b"].us = 20;
  chosen["a"].us = 12;
  chosen["c"].us = 5;
  rebase(r, chosen);
  EXPECT_DOUBLE_EQ(r.cases_us, 37);
  EXPECT_DOUBLE_EQ(r.steps[1].alone_us, 20);
}

// The pools of two libraries in one chain (docs/MEASUREMENT.md, "Threads of several libraries"):
// an XNNPACK Sigmoid then a oneDNN Tanh on 1x64x224x224, each on 2 threads, replayed as a graph,
// take no more than their times alone (each library's workers spinning between its calls) × 1.2.
// Measured on the 2-core Xeon: 0.97-1.07 × (1.3 ms against 0.56 + 0.70 ms). Unparked, XNNPACK's
// workers spin for ~10 ms after each call and oneDNN's second thread waits for a core (6.1 ms
// against 0.27 ms alone on 1x64x112x112). The tensor is larger than a core's L2 (2 MB here), so that
// the halves each library's threads leave in their own cache do not decide it, and each of the three
// is at least twice the last-level cache (1x64x224x224 where that is 6.4 MB or less): where the
// chain's 3 operands fit in the LLC alone but not together, the graph streams from memory what
// its parts alone read from the LLC (the 2-core Zen 4 EPYC with 32 MB: 1.31-1.36 x at 224x224,
// paired 1.05-1.09). On the 2-core AMD
// EPYC (AVX2) oneDNN's Tanh is slower (8.1 ms alone) and the chain 1.04-1.07 x; one CI run on a
// shared host read 1.35 x once, hence the attempts below. Timed, so ctest runs it alone (ReplayTiming is
// excluded from the parallel runs: tests/CMakeLists.txt).
TEST(ReplayTiming, ATwoLibraryChainAtTwoThreadsCostsItsPartsAlone) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread: no pool to share";
  const Backend* onednn = find_backend("onednn");
  const Backend* xnnpack = find_backend("xnnpack");
  if (!xnnpack || !xnnpack->available().ok()) GTEST_SKIP() << "XNNPACK is not built here";
  // H = W: 64 × H² × 4 bytes ≥ 2 × LLC, 224 at least, 1024 at most (256 MB).
  const auto llc = static_cast<double>(cache_sizes().llc);
  const int side = std::clamp(8 * static_cast<int>(std::ceil(std::sqrt(2 * llc / 256) / 8)), 224, 1024);
  const std::string chain = fmt::format(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
chain (float[1,64,{0},{0}] x) => (float y)
{{
  s = Sigmoid (x)
  y = Tanh (s)
}}
)onnx",
                                        side);
  auto models = mp::process_model_text(chain, "chain.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Plan plan = make_plan(*models, {onednn, xnnpack}, {});
  auto pick = [&](const std::string& op, const std::string& backend) -> const PlannedCase* {
    for (const auto& c : plan.cases)
      if (c.spec.problem.op == op && c.spec.variant.backend == backend && !c.status &&
          c.spec.variant.fusion.empty() && c.spec.feeds.empty())
        return &c;
    return nullptr;
  };
  const PlannedCase* sigmoid = pick("Sigmoid", "xnnpack");
  const PlannedCase* tanh = pick("Tanh", "onednn");
  ASSERT_TRUE(sigmoid && tanh);
  // Each case alone at 2 threads: the lowest mean of 5 repetitions of 50 calls; then its workers
  // are parked, as the bench does when it is done with a backend.
  // (Fewer calls on a larger tensor: 50 × 224² / side², 5 at least.)
  const int calls = std::max(5, 50 * 224 * 224 / (side * side));
  auto alone = [calls](const Backend* b, const kernels::CaseSpec& spec) {
    b->set_threads(2);
    auto k = b->factory()(spec);
    if (!k) throw std::runtime_error(k.error().message);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) (*k)->run();
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
    b->park_threads();
    return best * 1e6;
  };
  // A shared host can slow any one of these timings (a neighbour's burst during the replay reads as
  // contention); a pool that really fights for the cores fails every attempt. So up to three
  // attempts, each timing the parts alone and then the chain, and the test holds on the first that
  // meets the bound.
  double ratio = 0, paired = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const double sigmoid_us = alone(xnnpack, sigmoid->spec), tanh_us = alone(onednn, tanh->spec);
    std::map<std::string, ChosenCase> chosen;
    chosen[sigmoid->spec.problem.key] = {sigmoid->spec, sigmoid_us, 2};
    chosen[tanh->spec.problem.key] = {tanh->spec, tanh_us, 2};
    ReplayOptions opts;
    opts.threads = 2;
    opts.repetitions = 10;
    opts.min_time = 0.02;
    auto r = replay_model(models->front(), chosen, *onednn, opts);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->layers_replayed, 2);
    EXPECT_EQ(r->conversions, 0);
    EXPECT_EQ(r->operands_shared, 1);  // the Tanh reads the Sigmoid's output where XNNPACK wrote it
    ratio = r->min_us / (sigmoid_us + tanh_us);
    // The paired measure on the same chain: its passes against its two steps alone in the same
    // moments. Nothing here is cold in the graph that is not cold alone (each 12.8 MB operand is
    // beyond any L2), so a pool that does not fight for the cores keeps it near 1 as well.
    paired = r->paired_ratio;
    std::printf(
        "attempt %d: replay %.1f us (steps %.1f, %.1f; median %.1f) = %.2f x (Sigmoid alone %.1f us + "
        "Tanh alone %.1f us); paired %.2f (%d pairs)\n",
        attempt, r->min_us, r->steps[0].in_graph_us, r->steps[1].in_graph_us, r->median_us, ratio, sigmoid_us,
        tanh_us, paired, r->pairs);
    if (ratio <= 1.2 && paired <= 1.2 && paired > 0.8) break;
  }
  EXPECT_LE(ratio, 1.2) << "the chain took more than 1.2 x its parts alone in each of 3 attempts";
  EXPECT_LE(paired, 1.2) << "the chain's pairs took more than 1.2 x its steps alone in each of 3 attempts";
  EXPECT_GT(paired, 0.8) << "the chain's pairs took under 0.8 x its steps alone in each of 3 attempts";
}

// Conv → Relu (element-wise: keeps its input's layout) → Softmax (reads one layout).
constexpr const char* kConvReluSoftmax = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
crs (float[1,64,56,56] x, float[64,64,1,1] w) => (float y)
{
  c = Conv (x, w)
  r = Relu (c)
  y = Softmax <axis = 1> (r)
}
)onnx";

// The layout-aware choice on recorded times and ports: Conv's best case writes a blocked layout the
// Softmax cannot read (a conversion of the 802,816-byte tensor, 80.3 µs at kConversionBytesPerUs);
// another Conv case writes the plain layout.
TEST(LayoutChoice, AProducerTakesTheCaseItsConsumerReadsWhereThatCostsLessThanTheConversion) {
  using namespace layout_choice;
  auto models = mp::process_model_text(kConvReluSoftmax, "crs.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const mp::ModelIR& model = models->front();
  const int64_t bytes = 64 * 56 * 56 * 4;
  const double conversion_us = static_cast<double>(bytes) / kConversionBytesPerUs;
  const PortSig plain{"plain", bytes}, blocked{"f32 aBcd16b 1x64x56x56", bytes};
  const CaseSig conv_blocked{{plain, std::nullopt}, {blocked}}, conv_plain{{plain, std::nullopt}, {plain}};
  const CaseSig eltwise{{plain}, {plain}};
  ChosenCase conv_best{{}, 100, 1}, conv_alt{{}, 150, 1}, relu{{}, 20, 1}, softmax{{}, 30, 1};
  std::vector<WalkItem> walk;
  std::vector<LayerChoice> choices;
  for (const auto& l : model.layers) {
    if (!l.cost_bearing()) continue;
    LayerChoice c;
    if (l.op_type == "Conv") c = {{&conv_best, &conv_alt}, {&conv_blocked, &conv_plain}, 0};
    if (l.op_type == "Relu") c = {{&relu}, {&eltwise}, 0};
    if (l.op_type == "Softmax") c = {{&softmax}, {&eltwise}, 0};
    ASSERT_FALSE(c.cases.empty()) << l.op_type;
    walk.push_back({&l, static_cast<int>(choices.size())});
    choices.push_back(c);
  }
  ASSERT_EQ(choices.size(), 3u);
  int n = -1;
  // The Relu keeps the blocked layout; the Softmax's input is converted once.
  EXPECT_DOUBLE_EQ(estimate_pass(walk, choices, n), 100 + 20 + 30 + conversion_us);
  EXPECT_EQ(n, 1);
  choices[0].taken = 1;
  EXPECT_DOUBLE_EQ(estimate_pass(walk, choices, n), 150 + 20 + 30);
  EXPECT_EQ(n, 0);

  choices[0].taken = 0;
  EXPECT_EQ(choose_for_layouts(walk, choices), std::make_pair(1, 0));
  EXPECT_EQ(choices[0].taken, 1u);  // 50 µs more for the Conv, 80.3 less in conversions

  conv_alt.us = 100 + conversion_us + 1;  // now the conversion is cheaper
  choices[0].taken = 0;
  EXPECT_EQ(choose_for_layouts(walk, choices), std::make_pair(1, 1));
  EXPECT_EQ(choices[0].taken, 0u);
}

// ShuffleNet's shuffle unit, its sizes scaled: Concat → Reshape → channel shuffle → Reshape →
// Slice → Conv (1x1), the Reshapes views.
constexpr const char* kShuffleUnit = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
shuffle (float[1,32,28,28] a, float[1,32,28,28] b, float[16,32,1,1] w) => (float y)
{
  s5 = Constant <value = int64[5] {1, 2, 32, 28, 28}> ()
  s4 = Constant <value = int64[4] {1, 64, 28, 28}> ()
  st = Constant <value = int64[1] {32}> ()
  en = Constant <value = int64[1] {64}> ()
  ax = Constant <value = int64[1] {1}> ()
  c = Concat <axis = 1> (a, b)
  r = Reshape (c, s5)
  t = Transpose <perm = [0, 2, 1, 3, 4]> (r)
  u = Reshape (t, s4)
  s = Slice (u, st, en, ax)
  y = Conv (s, w)
}
)onnx";

// The layout-aware choice on a chain that is cheaper all blocked, where no one layer's change is
// (each would add a conversion of the 200,704-byte shuffled tensor, 20.1 µs): from the best cases
// (all plain, one conversion of the 100,352-byte slice for the Conv, 10.0 µs) the descent alone
// stays; its start from the aBcd8b family finds 64 µs against 66. With the blocked shuffle 10 µs
// slower, plain wins again.
TEST(LayoutChoice, AChainOfDataMovesGoesBlockedTogetherWhereThatIsCheaper) {
  using namespace layout_choice;
  auto models = mp::process_model_text(kShuffleUnit, "shuffle.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const mp::ModelIR& model = models->front();
  const int64_t whole = 64 * 28 * 28 * 4, half = whole / 2;
  const PortSig plain_whole{"plain", whole}, plain_half{"plain", half};
  const PortSig blocked_whole{"f32 aBcd8b 1x64x28x28", whole}, blocked_half{"f32 aBcd8b 1x32x28x28", half};
  const PortSig blocked_a{"f32 aBcd8b 1x32x28x28", half};
  const CaseSig concat_plain{{plain_half, plain_half}, {plain_whole}};
  const CaseSig concat_blocked{{blocked_a, blocked_a}, {blocked_whole}};
  const CaseSig move_plain{{plain_whole}, {plain_whole}}, move_blocked{{blocked_whole}, {blocked_whole}};
  const CaseSig slice_plain{{plain_whole}, {plain_half}}, slice_blocked{{blocked_whole}, {blocked_half}};
  const CaseSig conv{{blocked_half, std::nullopt}, {PortSig{"f32 aBcd8b 1x16x28x28", 16 * 28 * 28 * 4}}};
  ChosenCase concat_best{{}, 6, 1}, concat_alt{{}, 9, 1}, shuffle_best{{}, 6, 1}, shuffle_alt{{}, 10, 1};
  ChosenCase slice_best{{}, 4, 1}, slice_alt{{}, 5, 1}, conv_case{{}, 40, 1};
  std::vector<WalkItem> walk;
  std::vector<LayerChoice> choices;
  for (const auto& l : model.layers) {
    if (l.cost == mp::CostClass::kView) {
      walk.push_back({&l, -1});
      continue;
    }
    if (!l.cost_bearing()) continue;
    LayerChoice c;
    if (l.op_type == "Concat") c = {{&concat_best, &concat_alt}, {&concat_plain, &concat_blocked}, 0};
    if (l.op_type == "Transpose") c = {{&shuffle_best, &shuffle_alt}, {&move_plain, &move_blocked}, 0};
    if (l.op_type == "Slice") c = {{&slice_best, &slice_alt}, {&slice_plain, &slice_blocked}, 0};
    if (l.op_type == "Conv") c = {{&conv_case}, {&conv}, 0};
    ASSERT_FALSE(c.cases.empty()) << l.op_type;
    walk.push_back({&l, static_cast<int>(choices.size())});
    choices.push_back(c);
  }
  ASSERT_EQ(choices.size(), 4u);
  int n = -1;
  const double slice_conversion = static_cast<double>(half) / kConversionBytesPerUs;
  EXPECT_DOUBLE_EQ(estimate_pass(walk, choices, n), 6 + 6 + 4 + 40 + slice_conversion);
  EXPECT_EQ(n, 1);
  for (size_t k = 0; k < 3; ++k) {  // one layer blocked alone: dearer than the start
    choices[k].taken = 1;
    EXPECT_GT(estimate_pass(walk, choices, n), 6 + 6 + 4 + 40 + slice_conversion) << k;
    choices[k].taken = 0;
  }
  EXPECT_EQ(choose_for_layouts(walk, choices), std::make_pair(1, 0));
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(choices[k].taken, 1u) << k;
  EXPECT_DOUBLE_EQ(estimate_pass(walk, choices, n), 9 + 10 + 5 + 40);

  shuffle_alt.us = 20;  // all blocked 74 µs: the start's 66 stays
  for (auto& c : choices) c.taken = 0;
  EXPECT_EQ(choose_for_layouts(walk, choices), std::make_pair(1, 1));
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(choices[k].taken, 0u) << k;
}

TEST(LayoutChoice, AnElementWiseLayerConvertsItsOtherInputsToTheLayoutItKeeps) {
  using namespace layout_choice;
  constexpr const char* kAdd = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
add (float[1,64,56,56] x, float[64,64,1,1] w, float[1,64,56,56] z) => (float y)
{
  c = Conv (x, w)
  s = Sigmoid (z)
  y = Add (s, c)
}
)onnx";
  auto models = mp::process_model_text(kAdd, "add.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const int64_t bytes = 64 * 56 * 56 * 4;
  const PortSig plain{"plain", bytes}, blocked{"f32 aBcd16b 1x64x56x56", bytes};
  const CaseSig conv{{plain, std::nullopt}, {blocked}}, unary{{plain}, {plain}},
      binary{{plain, plain}, {plain}};
  ChosenCase c{{}, 100, 1}, e{{}, 10, 1};
  std::vector<WalkItem> walk;
  std::vector<LayerChoice> choices;
  for (const auto& l : models->front().layers) {
    if (!l.cost_bearing()) continue;
    const CaseSig* sig = l.op_type == "Conv" ? &conv : l.op_type == "Add" ? &binary : &unary;
    walk.push_back({&l, static_cast<int>(choices.size())});
    choices.push_back({{l.op_type == "Conv" ? &c : &e}, {sig}, 0});
  }
  ASSERT_EQ(choices.size(), 3u);
  int n = -1;
  // The Add keeps the Conv's blocked layout (its first blocked input) and converts the Sigmoid's.
  EXPECT_DOUBLE_EQ(estimate_pass(walk, choices, n), 120 + static_cast<double>(bytes) / kConversionBytesPerUs);
  EXPECT_EQ(n, 1);
}

TEST(Replay, ACaseRunsCorrectlyOnASharedWorkspace) {
  // Some implementation of the residual model's 3x3 convolution needs a scratchpad on every x86
  // oneDNN (the im2col of gemm-based convolution, a Winograd or brgemm buffer).
  auto models = mp::process_model_text(kResidual, "residual.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Backend* onednn = find_backend("onednn");
  PlanOptions po;
  po.max_impls = 10000;
  const Plan plan = make_plan(*models, {onednn}, po);
  std::unique_ptr<kernels::Kernel> kernel;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "Conv" || c.status || !c.spec.variant.fusion.empty()) continue;
    auto built = onednn->factory()(c.spec);
    if (built.ok() && (*built)->workspace_bytes() > 0) {
      kernel = std::move(built).value();
      break;
    }
  }
  if (!kernel) GTEST_SKIP() << "no oneDNN implementation of the 3x3 convolution needs a scratchpad here";
  const auto bytes = static_cast<size_t>(kernel->workspace_bytes());
  std::vector<unsigned char> shared(bytes + 64, 0xff);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(shared.data()) + 63) / 64 * 64);
  ASSERT_TRUE(kernel->share_workspace(aligned)) << kernel->implementation();
  const auto* w = static_cast<const unsigned char*>(aligned);
  kernel->run();
  EXPECT_TRUE(std::any_of(w, w + bytes, [](unsigned char b) { return b != 0xff; }))
      << kernel->implementation() << " did not use the shared workspace";
  std::fill(shared.begin(), shared.end(), 0xff);  // NaNs where the case would read stale values
  const Status ok = kernel->verify();
  EXPECT_TRUE(ok.ok()) << kernel->implementation() << ": " << ok.error().message;
}

// The replay builds its cases with their own buffers placed as the bench placed them: a fully
// connected layer's 512 KiB of weights on a mapping advised huge pages where the run asks for them
// (and the system allows it), on plain pages where it does not. (The plan's specs carry no
// placement: built as they were, alexnet's fully connected weights streamed at half their bench
// speed in the graph on the 2-core EPYC VM.)
TEST(Replay, TheCasesOwnBuffersArePlacedAsTheBenchPlacedThem) {
  auto models = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
fc (float[1,256] x, float[512,256] w, float[512] b) => (float y)
{
  g = Gemm <transB = 1> (x, w, b)
  y = Relu (g)
}
)onnx",
                                       "fc.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  PlanOptions po;
  po.max_impls = 1;
  const Plan plan = make_plan(*models, backends, po);
  test::TempDir tmp("replay-pages");
  auto db = benchdb::Database::open((tmp.dir / "p.db").string());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 2;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  auto run = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto chosen = best_cases(*db, run->system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  ReplayOptions opts;
  opts.repetitions = 1;
  opts.min_time = 0.001;
  opts.warmup_seconds = 0.001;
  opts.profile_passes = 1;
  opts.profile_seconds = 0;
  opts.paired = false;
  constexpr int64_t kWeights = 512 * 256 * 4;
  for (const bool huge : {true, false}) {
    opts.huge_pages = huge;
    auto r = replay_model(models->front(), *chosen, *backends[0], opts);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->own_large_bytes, kWeights) << "huge pages " << huge;  // x and the bias are small
    if (!huge) {
      EXPECT_EQ(r->own_huge_advised_bytes, 0);
    } else if (kernels::huge_pages_allowed(kernels::transparent_huge_pages()) &&
               std::filesystem::exists("/proc/self/smaps")) {
      EXPECT_EQ(r->own_huge_advised_bytes, kWeights);
    }
    const auto makeup = nlohmann::json::parse(replay_row(*r, run->system_id, run->run_id, "f32").makeup);
    EXPECT_EQ(makeup.at("own_large_bytes"), r->own_large_bytes);
    EXPECT_EQ(makeup.at("own_huge_advised_bytes"), r->own_huge_advised_bytes);
  }
}

TEST_F(BenchedResidual, TheLayoutChoiceKeepsSAndRunsEveryLayerWithinTheSlack) {
  const mp::ModelIR& model = models.front();
  auto chosen = best_cases(*db, run.system_id, plan, DType::kF32);
  auto alternatives = passed_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok() && alternatives.ok());
  auto fused = best_fused_cases(*db, run.system_id, plan, DType::kF32);
  ASSERT_TRUE(fused.ok());
  for (const auto& [key, cases] : *alternatives) {
    ASSERT_FALSE(cases.empty());
    const ChosenCase& best = key.second.empty() ? chosen->at(key.first) : fused->at(key);
    EXPECT_EQ(cases.front().spec.name, best.spec.name) << key.first;  // fastest first: the best
    EXPECT_DOUBLE_EQ(cases.front().us, best.us);
    EXPECT_TRUE(std::is_sorted(cases.begin(), cases.end(),
                               [](const ChosenCase& a, const ChosenCase& b) { return a.us < b.us; }));
  }
  auto plain = replay_model(model, *chosen, *backends[0], quick_replay());
  ReplayOptions opts = quick_replay();
  opts.layout_slack = 1e9;  // every passed case a candidate
  auto r = replay_model(model, *chosen, *backends[0], opts, {}, *alternatives);
  ASSERT_TRUE(plain.ok() && r.ok());
  EXPECT_DOUBLE_EQ(r->cases_us, plain->cases_us);  // S over the layers: their best cases either way
  EXPECT_EQ(r->layers_replayed, plain->layers_replayed);
  int alternative_steps = 0;
  for (const auto& st : r->steps) {
    if (st.conversion) continue;
    const ChosenCase& best = chosen->at(st.key);
    if (!st.alternative) {
      EXPECT_EQ(st.case_name, best.spec.name) << st.label;
      continue;
    }
    ++alternative_steps;
    EXPECT_NE(st.case_name, best.spec.name) << st.label;
    EXPECT_GE(st.alone_us, best.us) << st.label;
  }
  EXPECT_EQ(alternative_steps, r->alternatives);
  // What each step touches: values written by steps before it; every layer writes its output.
  double medians = 0;
  for (size_t k = 0; k < r->steps.size(); ++k) {
    for (const auto& [from, bytes] : r->steps[k].reads) {
      EXPECT_LT(from, k) << r->steps[k].label;
      EXPECT_GT(bytes, 0) << r->steps[k].label;
    }
    // The median over the profile passes is no lower than their minimum; each step's is summed.
    EXPECT_GE(r->steps[k].in_graph_median_us, r->steps[k].in_graph_us) << r->steps[k].label;
    medians += r->steps[k].in_graph_median_us;
    if (!r->steps[k].conversion) {
      EXPECT_GT(r->steps[k].written_bytes, 0) << r->steps[k].label;
    }
  }
  for (const auto& name : cases_to_retime(*r, *chosen, 1e9)) {
    for (const auto& st : r->steps) {
      if (st.alternative) {
        EXPECT_NE(name, st.case_name);
      }
    }
  }
  EXPECT_DOUBLE_EQ(r->steps_median_us, medians);
  EXPECT_GE(r->steps_median_us, r->layers_us + r->conversions_us);
  rebase(*r, *chosen);
  EXPECT_DOUBLE_EQ(r->cases_us, plain->cases_us);
  // No slack: every layer its best case.
  opts.layout_slack = 1.0;
  auto none = replay_model(model, *chosen, *backends[0], opts, {}, *alternatives);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->alternatives, 0);
}

// The named causes of slow steps, on a hand-made replay with a 1 MB L2.
TEST(Replay, SlowStepsGetTheirCausesNamed) {
  auto step = [](double alone, double in_graph, int threads) {
    ReplayStep s;
    s.alone_us = alone;
    s.in_graph_us = in_graph;
    s.threads = threads;
    return s;
  };
  ReplayResult r;
  r.steps = {step(100, 200, 1), step(10, 12, 1),  step(40, 41, 1), step(10, 30, 1),
             step(2, 6, 2),     step(50, 100, 2), step(50, 60, 2)};
  r.steps[0].own_bytes = 4'000'000;  // weights the rest of the pass evicts
  r.steps[0].written_bytes = 1'000'000;
  r.steps[1].reads = {{0, 1'000'000}};
  r.steps[1].written_bytes = 1'000'000;
  r.steps[2].reads = {{1, 1'000'000}};
  r.steps[2].written_bytes = 3'000'000;
  r.steps[3].reads = {{0, 1'000'000}};  // written before 6 MB were touched
  r.steps[4].reads = {{3, 1'000}};
  r.steps[5].reads = {{4, 1'000}};
  r.steps[5].writes = {{42, 200'000}};  // a buffer only it uses: last touched a pass ago
  r.steps[5].written_bytes = 200'000;
  r.steps[6].own_bytes = 4'000'000;  // cold weights too, but not slow: no cause given
  name_slow_steps(r, 1'000'000);
  EXPECT_EQ(r.steps[0].cause(), "cold weights 4.0 MB");
  EXPECT_EQ(r.steps[1].cause(), "");
  EXPECT_EQ(r.steps[3].cause(), "cold input 1.0 MB");
  EXPECT_EQ(r.steps[4].cause(), "thread switch 1>2; short step");
  EXPECT_EQ(r.steps[5].cause(), "cold output 0.2 MB");
  EXPECT_EQ(r.steps[6].cause(), "");
  EXPECT_EQ(r.slow_steps, 4);
  EXPECT_EQ(r.slow_unexplained, 0);
  // The excess of every step slower in the graph gets the same causes, slow or not: 6's weights
  // are cold; 1 and 2 read what the step before wrote, warm; a slow step's are its cause.
  EXPECT_EQ(r.steps[6].excess_cause, "cold weights 4.0 MB");
  EXPECT_EQ(r.steps[1].excess_cause, "");
  EXPECT_EQ(r.steps[2].excess_cause, "");
  for (const int k : {0, 3, 4, 5}) EXPECT_EQ(r.steps[k].excess_cause, r.steps[k].cause()) << k;
  // With an L2 that holds the whole pass, nothing is cold.
  name_slow_steps(r, 100'000'000);
  EXPECT_EQ(r.steps[6].excess_cause, "");
  EXPECT_EQ(r.steps[0].cause(), "");
  EXPECT_EQ(r.steps[3].cause(), "");
  EXPECT_EQ(r.steps[5].cause(), "");
  EXPECT_EQ(r.slow_unexplained, 3);
  // The buffer written by the step just before, then 5's: warm again in a 1 MB L2.
  r.steps[4].writes = {{42, 200'000}};
  name_slow_steps(r, 1'000'000);
  EXPECT_EQ(r.steps[5].cause(), "");
  EXPECT_EQ(r.slow_unexplained, 1);
  // The probe's reading names it: slow right after the step before it (over 1.5 × its 50 us
  // alone), or not, where the pass before it is the cause.
  r.steps[4].label = "/b/Relu (Relu)";
  r.steps[5].after_previous_us = 90;
  name_slow_steps(r, 1'000'000);
  EXPECT_EQ(r.steps[5].cause(), "after /b/Relu (Relu): 90.0 us");
  EXPECT_EQ(r.slow_unexplained, 0);
  r.steps[5].after_previous_us = 55;
  name_slow_steps(r, 1'000'000);
  EXPECT_EQ(r.steps[5].cause(), "the pass before it: 55.0 us after /b/Relu (Relu)");
  EXPECT_EQ(r.slow_unexplained, 0);
  // A cause from what it touches comes first; the probe's reading is not added to it.
  r.steps[4].writes.clear();
  name_slow_steps(r, 1'000'000);
  EXPECT_EQ(r.steps[5].cause(), "cold output 0.2 MB");
}

TEST(Replay, TheDataCheckCountsDenormalAndNonFiniteValues) {
  const float denormal = std::numeric_limits<float>::denorm_min(),
              smallest = std::numeric_limits<float>::min();
  const std::vector<float> x = {0.f,
                                -0.f,
                                1.f,
                                smallest,
                                -smallest,
                                denormal,
                                -smallest / 2,
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::max()};
  const DataCount c = count_abnormal(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(c.denormals, 2);  // denorm_min and -FLT_MIN / 2; zeros and FLT_MIN are normal
  EXPECT_EQ(c.nonfinite, 3);
  EXPECT_EQ(count_abnormal(x.data(), 5).denormals + count_abnormal(x.data(), 5).nonfinite, 0);
}

TEST(Replay, NoMeasuredCaseIsAnError) {
  auto models = mp::process_model_text(kTwoEltwise, "two.onnx", {});
  ASSERT_TRUE(models.ok());
  auto r = replay_model(models->front(), {}, *find_backend("onednn"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "two.onnx (batch 1): no layer has a measured case to replay");
}

}  // namespace
}  // namespace floorline::gen
