// Re-batching, constant propagation, layer classes, the DAG, unknown ops and subgraphs.
#include <algorithm>

#include <gtest/gtest.h>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

bool any_warning(const ModelIR& m, const std::string& needle) {
  return std::any_of(m.warnings.begin(), m.warnings.end(),
                     [&](const std::string& w) { return w.find(needle) != std::string::npos; });
}

TEST(Rebatch, LeadingDimBecomesTheBatch) {
  auto m = process_ok(model_text("g (float[N,3,8,8] x, float[4,3,3,3] w) => (y) {\n"
                                 "  y = Conv <pads = [1,1,1,1]> (x, w)\n}"),
                      {1, 8});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].batch, 8);
  const Layer& l8 = only(m[1], "Conv");
  EXPECT_EQ(l8.config.inputs[0].shape, (Shape{8, 3, 8, 8}));
  EXPECT_EQ(l8.config.outputs[0].shape, (Shape{8, 4, 8, 8}));
  EXPECT_EQ(l8.flops, 8 * only(m[0], "Conv").flops);
}

TEST(DataDependent, ReduceMaxOfConstantsFolds) {
  // Detection models compute their padded image size as ReduceMax over constant sizes.
  auto m =
      process_ok(model_text("g (float[1,6] x) => (y) <int64[2,2] s = {2, 1, 3, 2}> {\n"
                            "  t = ReduceMax <axes = [0], keepdims = 0> (s)\n  y = Reshape (x, t)\n}"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(only(m[0], "Reshape").config.outputs[0].shape, (Shape{3, 2}));
}

TEST(DataDependent, NonZeroAndNmsSizesComeFromMaxDetections) {
  // NonZero selects min(max_detections, its input's elements); NMS min(max_detections,
  // batches x classes x boxes); the Gather/Transpose downstream take their shapes from that.
  const auto text = model_text(
      "g (float[N,10,4] boxes, float[N,2,10] scores, float[N,12] x) => (sel, nz) "
      "<int64[1] k = {5}> {\n"
      "  idx = NonMaxSuppression (boxes, scores, k)\n  sel = Transpose (idx)\n"
      "  nzi = NonZero (x)\n  nz = Transpose (nzi)\n}");
  ProcessOptions o;
  o.max_detections = 7;
  auto r = process_model_text(text, "test.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelIR& m = (*r)[0];
  EXPECT_EQ(only(m, "NonMaxSuppression").config.outputs[0].shape, (Shape{7, 3}));
  EXPECT_EQ(only(m, "NonZero").config.outputs[0].shape, (Shape{2, 7}));
  for (const auto& l : m.layers) EXPECT_TRUE(l.shapes_known) << l.name;
  EXPECT_EQ(m.assumption,
            "--max-detections 7: 2 NonZero/NonMaxSuppression layer(s) assumed to select 7 element(s) (fewer "
            "where their input has fewer)");
  o.max_detections = 100;  // more than the inputs hold: their sizes bound the count
  r = process_model_text(text, "test.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(only((*r)[0], "NonMaxSuppression").config.outputs[0].shape, (Shape{20, 3}));
  EXPECT_EQ(only((*r)[0], "NonZero").config.outputs[0].shape, (Shape{2, 12}));
  // Without data-dependent ops, no assumption is stated.
  EXPECT_EQ(process_ok(model_text("g (float[N,4] x) => (y) {\n  y = Relu (x)\n}"))[0].assumption, "");
}

TEST(Rebatch, StaticBatchOneIsRebatchedToo) {
  auto m = process_ok(model_text("g (float[1,16] x) => (y) {\n  y = Relu (x)\n}"), {4});
  EXPECT_EQ(only(m[0], "Relu").key, "Relu|x=4x16|f32");
}

TEST(Rebatch, ReshapeToLiteralBatchIsNotRebatchable) {
  const auto text =
      model_text("g (float[N,3,4,4] x) => (y) <int64[2] s = {1, 48}> {\n  y = Reshape (x, s)\n}");
  process_ok(text, {1});
  const auto err = process_error(text, {2});
  EXPECT_NE(err.find("test.onnx: not re-batchable at batch 2"), std::string::npos) << err;
}

TEST(Rebatch, BatchFoldedIntoFeaturesIsCaughtDownstream) {
  // Reshape to [1, -1] keeps the element count, so the batch lands in the feature dim and the
  // MatMul's inner dimension no longer matches its weights.
  const auto text = model_text(
      "g (float[N,3,4,4] x, float[48,10] w) => (y) <int64[2] s = {1, -1}> {\n"
      "  f = Reshape (x, s)\n  y = MatMul (f, w)\n}");
  process_ok(text, {1});
  const auto err = process_error(text, {4});
  EXPECT_NE(err.find("not re-batchable at batch 4"), std::string::npos) << err;
}

TEST(Rebatch, ConstantWithLiteralBatchIsCaughtByTheConsistencyCheck) {
  // A Concat with a [1,4] constant along the batch axis: 2 rows at batch 1, 3 (not 4) at batch 2.
  const auto text =
      model_text("g (float[N,4] x) => (y) <float[1,4] c = {1,2,3,4}> {\n  y = Concat <axis = 0> (x, c)\n}");
  process_ok(text, {1});
  const auto err = process_error(text, {2});
  EXPECT_NE(
      err.find("not re-batchable at batch 2: node Concat_0 (Concat) output 'y' is 2x4 at batch 1 but 3x4"),
      std::string::npos)
      << err;
}

// Shape -> Gather -> Div -> Concat -> Reshape: ONNX 1.12's data propagation stops at Div, the
// folder carries the constant the rest of the way.
const char* kFlatten =
    "g (float[N,3,4,4] x, float[10,48] w) => (y) {\n"
    "  sh = Shape (x)\n"
    "  i0 = Constant <value = int64[1] {0}> ()\n"
    "  n = Gather <axis = 0> (sh, i0)\n"
    "  one = Constant <value = int64[1] {1}> ()\n"
    "  n2 = Div (n, one)\n"
    "  m1 = Constant <value = int64[1] {-1}> ()\n"
    "  s = Concat <axis = 0> (n2, m1)\n"
    "  f = Reshape (x, s)\n"
    "  y = Gemm <transB = 1> (f, w)\n}";

TEST(ConstantFolding, ShapeArithmeticResolvesReshape) {
  auto m = process_ok(model_text(kFlatten), {1, 4});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(only(m[0], "Gemm").key, "Gemm|a=1x48|b=10x48|transA=0|transB=1|alpha=1|beta=1|f32");
  EXPECT_EQ(only(m[1], "Gemm").config.inputs[0].shape, (Shape{4, 48}));
  EXPECT_EQ(only(m[1], "Gemm").flops, 2 * 4 * 10 * 48);
  for (const char* host : {"Shape", "Constant", "Gather", "Div", "Concat"})
    for (const auto& l : m[1].layers)
      if (l.op_type == host) {
        EXPECT_EQ(l.cost, CostClass::kHost) << host;
      }
  const Layer& reshape = only(m[1], "Reshape");
  EXPECT_EQ(reshape.cost, CostClass::kView);
  EXPECT_EQ(reshape.flops, 0);
  EXPECT_EQ(reshape.bytes, 0);
  EXPECT_TRUE(m[1].warnings.empty());
}

TEST(ConstantFolding, WeightsFromConstantOfShape) {
  auto m =
      process_ok(model_text("g (float[N,3,8,8] x) => (y) {\n"
                            "  ws = Constant <value = int64[4] {4,3,3,3}> ()\n"
                            "  w = ConstantOfShape <value = float[1] {0.5}> (ws)\n"
                            "  y = Conv <pads = [1,1,1,1]> (x, w)\n}"));
  EXPECT_EQ(only(m[0], "Conv").key, "Conv|x=1x3x8x8|w=4x3x3x3|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32");
  EXPECT_EQ(only(m[0], "ConstantOfShape").cost, CostClass::kHost);
}

TEST(ConstantFolding, WeightsFromConstantNode) {
  auto m =
      process_ok(model_text("g (float[N,3] x) => (y) {\n  w = Constant <value = float[3,2] {1,2,3,4,5,6}> "
                            "()\n  y = MatMul (x, w)\n}"));
  EXPECT_EQ(only(m[0], "MatMul").key, "MatMul|a=1x3|b=3x2|f32");
  EXPECT_EQ(only(m[0], "Constant").cost, CostClass::kHost);
}

TEST(LayerIr, PredecessorsFormTheDag) {
  auto m = process_ok(model_text(
      "g (float[N,8] x) => (y) {\n  a = Relu (x)\n  b = Sigmoid (a)\n  c = Tanh (a)\n  y = Add (b, c)\n}"));
  ASSERT_EQ(m[0].layers.size(), 4u);
  EXPECT_TRUE(only(m[0], "Relu").preds.empty());
  EXPECT_EQ(only(m[0], "Sigmoid").preds, (std::vector<int>{0}));
  EXPECT_EQ(only(m[0], "Tanh").preds, (std::vector<int>{0}));
  EXPECT_EQ(only(m[0], "Add").preds, (std::vector<int>{1, 2}));
  EXPECT_EQ(only(m[0], "Sigmoid").flops, 4 * 8);
}

TEST(LayerIr, OpUnknownToOnnxIsUnsupportedAndNamed) {
  auto m = process_ok(model_text("g (float[N,4] x) => (y) {\n  a = Relu (x)\n  y = FooBar (a)\n}"));
  ASSERT_EQ(m.size(), 1u);
  const Layer& l = only(m[0], "FooBar");
  EXPECT_EQ(l.cost, CostClass::kUnsupported);
  EXPECT_TRUE(any_warning(m[0], "op FooBar: not known to ONNX 1.12")) << m[0].warnings.front();
}

TEST(LayerIr, CustomDomainOpIsUnsupported) {
  auto m = process_ok(
      "<ir_version: 8, opset_import: [\"\" : 17, \"com.example\" : 1]>\n"
      "g (float[N,4] x) => (y) {\n  y = com.example.Thing (x)\n}");
  EXPECT_EQ(only(m[0], "Thing").cost, CostClass::kUnsupported);
  EXPECT_TRUE(any_warning(m[0], "domain 'com.example'"));
}

TEST(LayerIr, KnownOpWithoutAKindKeepsItsShapes) {
  auto m = process_ok(model_text(
      "g (float[N,10] x) => (y) {\n  y = Hardmax <axis = 1> (x)\n}"));  // (TopK is a kind of its own)
  const Layer& l = only(m[0], "Hardmax");
  EXPECT_EQ(l.cost, CostClass::kUnsupported);
  EXPECT_TRUE(l.shapes_known);
  EXPECT_EQ(l.key, "Unsupported|op=Hardmax|x=1x10|axis=1|y=1x10|f32");
  EXPECT_TRUE(any_warning(m[0], "op Hardmax: no Floorline layer kind"));
}

TEST(LayerIr, NewerOpsetWarnsAndNamesRedefinedOps) {
  auto m = process_ok(model_text("g (float[N,4] x) => (y) {\n  a = Relu (x)\n  y = Softmax (a)\n}", 18));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(any_warning(m[0], "opset 18 is newer than ONNX 1.12 knows"));
  EXPECT_EQ(only(m[0], "Relu").cost, CostClass::kCompute);
  // The opset-18 forms with an exact opset-17 equivalent are read (opset18.hpp); a
  // run-time axes input has none, so that ReduceMean stays Unsupported and is named.
  auto r = process_ok(model_text(
      "g (float[N,4] x, int64[1] axes) => (y) {\n  y = ReduceMean <keepdims = 1> (x, axes)\n}", 18));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(only(r[0], "ReduceMean").cost, CostClass::kUnsupported);
  EXPECT_TRUE(any_warning(r[0], "op ReduceMean: redefined after opset 17"));
  auto all = process_ok(model_text("g (float[N,4] x) => (y) {\n  y = ReduceMean <keepdims = 1> (x)\n}", 18));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(only(all[0], "ReduceMean").cost, CostClass::kCompute);  // no axes: every axis in both opsets
}

TEST(LayerIr, OpsetNineAttributesAreNormalized) {
  // Before opset 10 Slice takes starts/ends/axes as attributes; before 13 Softmax coerces to 2-D.
  auto m = process_ok(model_text("g (float[N,4,6] x) => (y) {\n"
                                 "  s = Slice <starts = [0, 1], ends = [4, 5], axes = [1, 2]> (x)\n"
                                 "  y = Softmax <axis = 1> (s)\n}",
                                 9),
                      {1, 2});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(only(m[0], "Slice").key, "Slice|x=1x4x6|starts=0,1|axes=1,2|steps=1,1|y=1x4x4|f32");
  EXPECT_EQ(only(m[1], "Softmax").key, "Softmax|x=2x4x4|axis=1|coerce_2d=1|f32");
  EXPECT_EQ(only(m[1], "Slice").bytes, 2 * 32 * 4);
}

TEST(LayerIr, SubgraphLayersAreCountedAndMarked) {
  auto m =
      process_ok(model_text("g (bool c, float[N,4] x) => (y) {\n"
                            "  y = If (c) <then_branch = g1 () => (float[N,4] t) { t = Relu (x) },"
                            " else_branch = g2 () => (float[N,4] e) { e = Sigmoid (x) }>\n}"));
  ASSERT_EQ(m[0].layers.size(), 3u);
  EXPECT_EQ(only(m[0], "If").cost, CostClass::kControl);
  const Layer& relu = only(m[0], "Relu");
  EXPECT_EQ(relu.subgraph, "If_0/then_branch");
  EXPECT_EQ(relu.cost, CostClass::kCompute);
  EXPECT_EQ(only(m[0], "Sigmoid").subgraph, "If_0/else_branch");
}

}  // namespace
}  // namespace floorline::mp::test
