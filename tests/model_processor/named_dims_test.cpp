// Named symbolic input dims (ProcessOptions::dims): values, sweeps into scenarios, their names,
// zero-size dims, and the errors for a dim left without a value.
#include <gtest/gtest.h>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

// A decoder-shaped graph: tokens [batch, seq] attend over [batch, past + seq] keys, with the causal
// mask (Trilu) and a rotary-style table (Cos, Sin of a Range) computed from the dims, as PyTorch
// exports compute them.
const std::string kDecoder = model_text(R"(
g (float[batch_size,seq,8] x, float[batch_size,past,8] past_k, float[8,8] w) => (y, present) {
  q = MatMul (x, w)
  present = Concat <axis = 1> (past_k, q)
  kt = Transpose <perm = [0,2,1]> (present)
  scores = MatMul (q, kt)
  ss = Shape (scores)
  one = Constant <value = float {1.0}> ()
  ones = ConstantOfShape <value = float[1] {1.0}> (ss)
  mask = Trilu <upper = 1> (ones)
  zero = Constant <value = int64 {0}> ()
  step = Constant <value = int64 {1}> ()
  two = Constant <value = int64 {2}> ()
  t = Gather <axis = 0> (ss, two)
  pos = Range (zero, t, step)
  posf = Cast <to = 1> (pos)
  c = Cos (posf)
  s = Sin (posf)
  cs = Add (c, s)
  masked = Add (scores, mask)
  y = Mul (masked, cs)
}
)");

// The k-th layer of an op type, in graph order.
const Layer& nth(const ModelIR& m, const std::string& op, int k) {
  for (const auto& l : m.layers)
    if (l.op_type == op && k-- == 0) return l;
  ADD_FAILURE() << "no such " << op;
  static const Layer none;
  return none;
}

ProcessOptions with_dims(std::map<std::string, std::vector<int64_t>> dims,
                         std::vector<int64_t> batches = {1}) {
  ProcessOptions o;
  o.dims = std::move(dims);
  o.batches = std::move(batches);
  return o;
}

TEST(NamedDims, ValuesSetTheShapesAndNameTheScenario) {
  auto r = process_model_text(kDecoder, "dec", with_dims({{"seq", {3}}, {"past", {5}}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  const ModelIR& m = (*r)[0];
  EXPECT_EQ(m.name, "dec[past=5;seq=3]");
  EXPECT_EQ(m.dims, (DimValues{{"past", 5}, {"seq", 3}}));
  EXPECT_EQ(only(m, "Concat").config.outputs[0].shape, (Shape{1, 8, 8}));
  const Layer& scores = nth(m, "MatMul", 1);
  EXPECT_EQ(scores.config.outputs[0].shape, (Shape{1, 3, 8}));
  EXPECT_EQ(scores.flops, 2 * 3 * 8 * 8);
  // The mask and the tables depend on the dims only: folded, no work, no warning about them.
  for (const char* op : {"Trilu", "Cos", "Sin", "Range"}) {
    const Layer& l = only(m, op);
    EXPECT_TRUE(l.folded) << op;
    EXPECT_FALSE(l.cost_bearing()) << op;
  }
  for (const auto& w : m.warnings) EXPECT_EQ(w.find("Trilu"), std::string::npos) << w;
}

TEST(NamedDims, SeveralValuesSweepEveryCombinationAtEveryBatch) {
  auto r = process_model_text(kDecoder, "dec", with_dims({{"seq", {1, 4}}, {"past", {0, 16}}}, {1, 2}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::vector<std::pair<std::string, int64_t>> got;
  for (const auto& m : *r) got.emplace_back(m.name, m.batch);
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"dec[past=0;seq=1]", 1},  {"dec[past=0;seq=1]", 2},  {"dec[past=0;seq=4]", 1},
      {"dec[past=0;seq=4]", 2},  {"dec[past=16;seq=1]", 1}, {"dec[past=16;seq=1]", 2},
      {"dec[past=16;seq=4]", 1}, {"dec[past=16;seq=4]", 2}};
  EXPECT_EQ(got, want);
  // The last scenario at batch 2: [2, 16 + 4, 8] keys.
  EXPECT_EQ(only(r->back(), "Concat").config.outputs[0].shape, (Shape{2, 20, 8}));
}

TEST(NamedDims, ZeroSizeDimsAreLegal) {
  // An empty KV cache: the Concat copies nothing of it, the attention covers the new tokens only.
  auto r = process_model_text(kDecoder, "dec", with_dims({{"seq", {2}}, {"past", {0}}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelIR& m = (*r)[0];
  EXPECT_EQ(only(m, "Concat").config.inputs[0].shape, (Shape{1, 0, 8}));
  EXPECT_EQ(only(m, "Concat").config.outputs[0].shape, (Shape{1, 2, 8}));
  EXPECT_EQ(nth(m, "MatMul", 1).config.outputs[0].shape, (Shape{1, 2, 2}));
}

TEST(NamedDims, ADimWithoutAValueIsAnErrorNamingItAndItsInput) {
  auto r = process_model_text(kDecoder, "dec", with_dims({{"seq", {3}}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.error().message,
      "dec: graph input 'past_k' has the symbolic dim 'past' at axis 1: give its value with --dim past=N");
  auto none = process_model_text(kDecoder, "dec", ProcessOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("'seq' at axis 1"), std::string::npos) << none.error().message;
}

TEST(NamedDims, TheBatchDimIsSetByBatchNotDim) {
  auto r = process_model_text(kDecoder, "dec", with_dims({{"seq", {3}}, {"past", {5}}, {"batch_size", {4}}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "dec: --dim batch_size: 'batch_size' is the batch dim of graph input 'x' (its axis 0); set it "
            "with --batch");
}

TEST(NamedDims, AModelWithoutNamedDimsKeepsItsNameAndIgnoresOthers) {
  auto r = process_model_text(model_text("g (float[N,4] x, float[4,2] w) => (y) {\n  y = MatMul (x, w)\n}"),
                              "plain", with_dims({{"seq", {1, 2, 3}}}, {1, 8}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);  // one scenario: no dim of the sweep is used
  EXPECT_EQ((*r)[0].name, "plain");
  EXPECT_TRUE((*r)[0].dims.empty());
  EXPECT_EQ(only((*r)[1], "MatMul").config.inputs[0].shape, (Shape{8, 4}));
}

TEST(NamedDims, ARankOneInputTakesItsNamedValueOverTheBatch) {
  // position_ids [seq]: its only dim is named, so it is not the batch.
  auto r = process_model_text(model_text("g (int64[seq] ids, float[100,4] table) => (y) {\n"
                                         "  y = Gather <axis = 0> (table, ids)\n}"),
                              "pos", with_dims({{"seq", {7}}}, {2}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "Gather").config.outputs[0].shape, (Shape{7, 4}));
}

TEST(NamedDims, TheInferenceWorkerGetsTheDimsToo) {
  // process_model_text infers in-process; process_model through the worker process. Same shapes.
  ProcessOptions o = with_dims({{"seq", {3}}, {"past", {5}}});
  o.isolate = true;
  auto iso = process_model_text(kDecoder, "dec", o);
  o.isolate = false;
  auto in = process_model_text(kDecoder, "dec", o);
  ASSERT_TRUE(iso.ok() && in.ok());
  EXPECT_EQ(only((*iso)[0], "Concat").config.outputs[0].shape,
            only((*in)[0], "Concat").config.outputs[0].shape);
  EXPECT_EQ((*iso)[0].name, (*in)[0].name);
}

// MODEL:NAME=V applies to the model of that stem only, over NAME=V; other models' scoped dims are
// left out (a prefill and a decode graph that both name the new tokens' dim, in one run).
TEST(NamedDims, AScopedDimAppliesToItsModelOnly) {
  const std::map<std::string, std::vector<int64_t>> dims = {
      {"seq", {3}}, {"past", {2}}, {"dec:seq", {1}}, {"other:past", {7, 8}}, {"decoder:seq", {9}}};
  EXPECT_EQ(dims_for("dec", dims),
            (std::map<std::string, std::vector<int64_t>>{{"past", {2}}, {"seq", {1}}}));
  EXPECT_EQ(dims_for("other", dims),
            (std::map<std::string, std::vector<int64_t>>{{"past", {7, 8}}, {"seq", {3}}}));
  auto r = process_model_text(kDecoder, "dec", with_dims(dims));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "dec[past=2;seq=1]");
  auto o = process_model_text(kDecoder, "other", with_dims(dims));
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->size(), 2u);
  EXPECT_EQ((*o)[1].name, "other[past=8;seq=3]");
  // A model without a value of its own, nor a plain one, still gets the usual error.
  auto e = process_model_text(kDecoder, "third", with_dims({{"dec:past", {2}}, {"seq", {1}}}));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("give its value with --dim past=N"), std::string::npos)
      << e.error().message;
}

TEST(NamedDims, ScenarioNames) {
  EXPECT_EQ(scenario_name("m", {}), "m");
  EXPECT_EQ(scenario_name("m", {{"a", 0}, {"b", 2048}}), "m[a=0;b=2048]");
}

}  // namespace
}  // namespace floorline::mp::test
