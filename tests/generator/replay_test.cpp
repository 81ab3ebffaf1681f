// Replay: kernels wired through their ports, and a whole model replayed from a real database.
#include "floorline/generator/replay.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/generator/runner.hpp"

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

struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    dir = std::filesystem::temp_directory_path() / ("floorline_replay_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
};

const PlannedCase& default_case(const Plan& plan, const std::string& op) {
  for (const auto& c : plan.cases)
    if (c.spec.problem.op == op && c.work.is_default && c.spec.variant.fusion.empty() && c.spec.feeds.empty())
      return c;
  ADD_FAILURE() << "no default case for " << op;
  return plan.cases.front();
}

TEST(Replay, ABoundInputReadsWhatTheProducerWrote) {
  auto models = mp::process_model_text(kTwoEltwise, "two.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Backend* onednn = find_backend("onednn");
  const Plan plan = make_plan(*models, {onednn}, {});
  auto sigmoid = onednn->factory()(default_case(plan, "Sigmoid").spec);
  auto tanh = onednn->factory()(default_case(plan, "Tanh").spec);
  ASSERT_TRUE(sigmoid.ok() && tanh.ok());
  const auto out = (*sigmoid)->port(true, 0);
  const auto in = (*tanh)->port(false, 0);
  ASSERT_TRUE(out && in);
  EXPECT_EQ(out->layout, "plain");
  EXPECT_EQ(out->bytes, 2 * 3 * 5 * 7 * 4);
  EXPECT_EQ(in->bytes, out->bytes);
  ASSERT_TRUE((*tanh)->bind(false, 0, out->data).ok());
  (*sigmoid)->run();
  (*tanh)->run();
  const auto* s = static_cast<const float*>(out->data);
  const auto* y = static_cast<const float*>((*tanh)->port(true, 0)->data);
  for (int k = 0; k < 210; ++k) {
    ASSERT_GT(s[k], 0.f);  // a sigmoid output, not the tanh's own random input in [-1, 1)
    EXPECT_NEAR(y[k], std::tanh(s[k]), 1e-5) << k;
  }
  EXPECT_FALSE((*tanh)->bind(false, 1, out->data).ok());  // Tanh has one input
}

TEST(Replay, AModelIsReplayedFromItsBestCasesWithEveryActivationWired) {
  TempDir tmp;
  auto models = mp::process_model_text(kResidual, "residual.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  PlanOptions po;
  po.max_impls = 2;
  const Plan plan = make_plan(*models, backends, po);
  auto db = benchdb::Database::open((tmp.dir / "r.db").string());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions ro;
  ro.min_time = 0.0005;
  ro.repetitions = 3;
  ro.warmup_seconds = 0.0005;
  ro.calibrate = false;
  auto run = run_plan(&*db, *models, plan, backends, ro);
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->failed, 0);

  auto chosen = best_cases(*db, run->system_id, plan, DType::kF32);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  EXPECT_EQ(chosen->size(), 4u);  // two Conv configs are one (same shapes), Relu, Add, Sigmoid
  ReplayOptions opts;
  opts.repetitions = 3;
  opts.min_time = 0.001;
  opts.warmup_seconds = 0.001;
  auto r = replay_model(models->front(), *chosen, *backends[0], opts);
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
  // cases_us is S over the replayed layers: the chosen cases' times, the conv twice.
  double s = 0;
  for (const auto& l : models->front().layers)
    if (l.cost_bearing()) s += chosen->at(l.key).us;
  EXPECT_DOUBLE_EQ(r->cases_us, s);
  EXPECT_GT(r->median_us, 0);
  EXPECT_LE(r->min_us, r->median_us);
  EXPECT_EQ(r->repetitions, 3);
  EXPECT_GE(r->passes, 3);
  double in_graph = 0;
  for (const auto& st : r->steps) in_graph += st.in_graph_us;
  EXPECT_DOUBLE_EQ(in_graph, r->layers_us + r->conversions_us);

  const auto row = replay_row(*r, run->system_id, run->run_id, "f32");
  EXPECT_EQ(row.system_id, run->system_id);
  EXPECT_EQ(row.run_id, run->run_id);
  EXPECT_EQ(row.model_name, r->model);
  EXPECT_DOUBLE_EQ(row.median_us, r->median_us);
  EXPECT_EQ(nlohmann::json::parse(row.makeup).at("conversions").get<int>(), r->conversions);
  const auto stored = db->upsert_replay(row);
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  EXPECT_EQ(*stored, 1);
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
