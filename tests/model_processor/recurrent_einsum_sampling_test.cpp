// Costs and shapes of recurrent layers (LSTM, GRU, RNN), Einsum read as MatMul, the comparison,
// Mean, CumSum and ArgMax kinds, the sampling kinds (RoiAlign, GridSample, ScatterElements) and the
// opset-18 forms, on tiny ONNX-text models and the committed opset-18 fixture; values by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

bool has_warning(const ModelIR& m, const std::string& part) {
  return std::any_of(m.warnings.begin(), m.warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

TEST(RecurrentCost, BidirectionalLstmPerTheDocumentedFormula) {
  // T 5, N 1, I 8, H 4, D 2: T·D·(2·N·4H·(I+H) + 26·N·H) = 5·2·(2·16·12 + 104) = 4880.
  auto m = process_ok(
      model_text("g (float[5,1,8] x, float[2,16,8] w, float[2,16,4] r, float[2,32] b) => (y, yh, yc) {\n"
                 "  y, yh, yc = LSTM <hidden_size = 4, direction = \"bidirectional\"> (x, w, r, b)\n}"));
  ASSERT_EQ(m.size(), 1u);
  const Layer& l = only(m[0], "LSTM");
  EXPECT_EQ(l.config.kind, LayerKind::kLSTM);
  EXPECT_EQ(l.cost, CostClass::kCompute);
  EXPECT_EQ(l.key,
            "LSTM|x=5x1x8|w=2x16x8|r=2x16x4|b=2x32|direction=bidirectional|hidden_size=4|layout=0|"
            "input_forget=0|f32");
  EXPECT_EQ(l.flops, 4880);
  // x 40, W 256, R 128, B 64, Y 5·2·1·4 = 40, Y_h 8, Y_c 8 floats.
  EXPECT_EQ(l.bytes, (40 + 256 + 128 + 64 + 40 + 8 + 8) * 4);
}

TEST(RecurrentCost, DefaultActivationsSpelledOutAreTheSameWork) {
  auto gru = [](const std::string& extra) {
    return model_text(
        "g (float[7,1,3] x, float[1,6,3] w, float[1,6,2] r) => (y) {\n  y = GRU <hidden_size = 2" + extra +
        "> (x, w, r)\n}");
  };
  const auto plain = process_ok(gru(""));
  const auto spelled = process_ok(gru(", activations = [\"Sigmoid\", \"Tanh\"]"));
  const auto relu = process_ok(gru(", activations = [\"Relu\", \"Tanh\"]"));
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(spelled.size(), 1u);
  ASSERT_EQ(relu.size(), 1u);
  EXPECT_EQ(only(plain[0], "GRU").key, only(spelled[0], "GRU").key);
  EXPECT_NE(only(relu[0], "GRU").key.find("activations=Relu,Tanh"), std::string::npos)
      << only(relu[0], "GRU").key;
  // GRU: T·D·(2·N·3H·(I+H) + 19·N·H) = 7·(2·6·5 + 38) = 686.
  EXPECT_EQ(only(plain[0], "GRU").flops, 686);
}

TEST(EinsumAsMatMul, AttentionScoresAreABatchedMatMulWithTheRightShapes) {
  auto m =
      process_ok(model_text("g (float[N,2,3,4] q, float[N,2,5,4] k) => (y) {\n  y = Einsum <equation = "
                            "\"bhid,bhjd->bhij\"> (q, k)\n}"));
  ASSERT_EQ(m.size(), 1u);
  const Layer& l = only(m[0], "Einsum");
  EXPECT_EQ(l.config.kind, LayerKind::kMatMul);
  EXPECT_EQ(l.key, "MatMul|a=1x2x3x4|b=1x2x4x5|f32");
  EXPECT_EQ(l.flops, 2 * (2 * 3 * 5) * 4);
  EXPECT_EQ(l.bytes, (24 + 40 + 30) * 4);
}

TEST(EinsumAsMatMul, EllipsisAndPlainBatchedForms) {
  auto m = process_ok(
      model_text("g (float[N,3,4,6] a, float[N,3,6,5] b, float[N,4,6] c, float[N,6,2] d) => (y, z) {\n"
                 "  y = Einsum <equation = \"...ij,...jk->...ik\"> (a, b)\n"
                 "  z = Einsum <equation = \"bij,bjk->bik\"> (c, d)\n}"));
  ASSERT_EQ(m.size(), 1u);
  std::vector<std::string> keys;
  for (const auto& l : m[0].layers) keys.push_back(l.key);
  EXPECT_NE(std::find(keys.begin(), keys.end(), "MatMul|a=1x3x4x6|b=1x3x6x5|f32"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "MatMul|a=1x4x6|b=1x6x2|f32"), keys.end());
}

TEST(EinsumAsMatMul, OtherEquationsStayUnsupportedAndAreNamed) {
  auto m =
      process_ok(model_text("g (float[N,4,4] a) => (y) {\n  y = Einsum <equation = \"bii->bi\"> (a)\n}"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(only(m[0], "Einsum").config.kind, LayerKind::kUnsupported);
  EXPECT_TRUE(has_warning(m[0], "equation 'bii->bi' is not a matrix product")) << m[0].warnings.size();
}

TEST(NewElementwiseKinds, MeanCumSumArgMaxAndComparisons) {
  auto m = process_ok(model_text(
      "g (float[N,4,6] a, float[N,4,6] b, float[N,4,6] c, int64 axis) => (mean, cs, am, ge, le) {\n"
      "  mean = Mean (a, b, c)\n"
      "  cs = CumSum (a, axis)\n"
      "  am = ArgMax <axis = -1, keepdims = 0> (a)\n"
      "  ge = GreaterOrEqual (a, b)\n"
      "  le = LessOrEqual (a, b)\n}"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(only(m[0], "Mean").flops, 3 * 24);  // k adds-or-divide per output
  EXPECT_EQ(only(m[0], "Mean").config.kind, LayerKind::kMean);
  EXPECT_EQ(only(m[0], "CumSum").config.kind, LayerKind::kCumSum);
  EXPECT_EQ(only(m[0], "CumSum").flops, 24);
  const Layer& am = only(m[0], "ArgMax");
  EXPECT_EQ(am.key, "ArgMax|x=1x4x6|axis=2|keepdims=0|select_last_index=0|f32");
  EXPECT_EQ(am.flops, 24);
  EXPECT_EQ(am.bytes, 24 * 4 + 4 * 8);                         // int64 indices out
  EXPECT_EQ(only(m[0], "GreaterOrEqual").bytes, 48 * 4 + 24);  // bool out
  EXPECT_EQ(only(m[0], "LessOrEqual").config.kind, LayerKind::kLessOrEqual);
}

TEST(Opset18Forms, FixtureFromTheOnnxHelperReadsWithFloorlinesOwnRules) {
  // tests/fixtures/make_opset18.py
  const std::string path = std::string(FLOORLINE_SOURCE_DIR) + "/tests/fixtures/opset18_forms.onnx";
  ProcessOptions opts;
  opts.batches = {1, 2};
  auto r = process_model(path, opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  const ModelIR& m = (*r)[0];
  for (const auto& l : m.layers) {
    EXPECT_NE(l.config.kind, LayerKind::kUnsupported) << l.name;
    EXPECT_TRUE(l.shapes_known) << l.name;
  }
  EXPECT_EQ(only(m, "ReduceMean").key, "ReduceMean|x=1x8x6x6|axes=2,3|keepdims=1|f32");
  EXPECT_EQ(only(m, "ReduceMean").config.outputs[0].shape, (Shape{1, 8, 1, 1}));
  EXPECT_EQ(only(m, "Split").config.outputs[1].shape, (Shape{1, 4, 6, 6}));
  EXPECT_EQ(only(m, "Pad").config.outputs[0].shape, (Shape{1, 4, 6, 8}));
  EXPECT_NE(only(m, "Pad").key.find("pads=0,0,0,1,0,0,0,1"), std::string::npos) << only(m, "Pad").key;
  EXPECT_EQ(only(m, "Resize").config.outputs[0].shape, (Shape{1, 4, 12, 12}));
  EXPECT_EQ(only((*r)[1], "Resize").config.outputs[0].shape, (Shape{2, 4, 12, 12}));
  EXPECT_TRUE(has_warning(m, "opset-18 form"));
}

// --- RoiAlign, ScatterElements, GridSample, GatherND with batch_dims: docs/LAYERS.md's formulas by
// hand, on the shapes of torchvision's Faster R-CNN box head (MultiScaleRoIAlign: 256 channels,
// 7 × 7, sampling_ratio 2, the stride-16 level of a 320-pixel image; its ONNX merge of the levels
// is a ScatterElements along axis 0) and RAFT's correlation lookup (bilinear, zeros, align_corners).
TEST(SamplingCost, RoiAlignScatterElementsGridSampleAndBatchedGatherNd) {
  auto m = process_ok(model_text(
      "g (float[1,256,20,20] f, float[8,4] rois, int64[8] bi, float[8,256,7,7] base, int64[3,256,7,7] si,\n"
      "   float[3,256,7,7] su, float[2,1,16,32] corr, float[2,9,9,2] grid, float[2,3,4] d, int64[2,1] gi)\n"
      "    => (r, s, sa, gs, gnd) {\n"
      "  r = RoiAlign <output_height = 7, output_width = 7, sampling_ratio = 2, spatial_scale = 0.0625,\n"
      "                coordinate_transformation_mode = \"output_half_pixel\"> (f, rois, bi)\n"
      "  s = ScatterElements <axis = -4> (base, si, su)\n"
      "  sa = ScatterElements <axis = 0, reduction = \"add\"> (base, si, su)\n"
      "  gs = GridSample <align_corners = 1> (corr, grid)\n"
      "  gnd = GatherND <batch_dims = 1> (d, gi)\n}",
      16));
  ASSERT_EQ(m.size(), 1u);
  for (const auto& l : m[0].layers) EXPECT_NE(l.config.kind, LayerKind::kUnsupported) << l.name;
  // RoiAlign: y [8, 256, 7, 7] = 100352 elements, s = 2² = 4: 100352 · 33 + 10 · 8·49·4 = 3327296.
  // Bytes: X once (409600 < the 4 · 4 · 100352 · 4 neighbour reads), rois 128, indices 64, y 401408.
  const Layer& r = only(m[0], "RoiAlign");
  EXPECT_EQ(r.config.kind, LayerKind::kRoiAlign);
  EXPECT_EQ(r.key,
            "RoiAlign|x=1x256x20x20|rois=8x4|batch_indices=8:i64|mode=avg|output_height=7|output_width=7|"
            "sampling_ratio=2|spatial_scale=0.0625|coordinate_transformation_mode=output_half_pixel|f32");
  EXPECT_EQ(r.config.outputs[0].shape, (Shape{8, 256, 7, 7}));
  EXPECT_EQ(r.flops, 3327296);
  EXPECT_EQ(r.bytes, 409600 + 128 + 64 + 401408);
  // ScatterElements: a copy (0 FLOPs), one add per update with reduction add (3 · 256 · 49).
  std::vector<const Layer*> scatters;
  for (const auto& l : m[0].layers)
    if (l.config.op_type == "ScatterElements") scatters.push_back(&l);
  ASSERT_EQ(scatters.size(), 2u);
  EXPECT_EQ(scatters[0]->config.kind, LayerKind::kScatterElements);
  EXPECT_EQ(scatters[0]->key,
            "ScatterElements|x=8x256x7x7|indices=3x256x7x7:i64|updates=3x256x7x7|axis=0|"
            "reduction=none|f32");
  EXPECT_EQ(scatters[0]->flops, 0);
  EXPECT_EQ(scatters[0]->bytes, 401408 + 301056 + 150528 + 401408);
  EXPECT_EQ(scatters[1]->flops, 3 * 256 * 49);
  // GridSample: y [2, 1, 9, 9] = 162; bilinear 9 per element + 10 per point: 1458 + 1620 = 3078.
  // Bytes: the 4 neighbours per element (2592 < X's 4096), grid 1296, y 648.
  const Layer& gs = only(m[0], "GridSample");
  EXPECT_EQ(gs.config.kind, LayerKind::kGridSample);
  EXPECT_EQ(gs.key,
            "GridSample|x=2x1x16x32|grid=2x9x9x2|mode=bilinear|padding_mode=zeros|align_corners=1|f32");
  EXPECT_EQ(gs.flops, 3078);
  EXPECT_EQ(gs.bytes, 2592 + 1296 + 648);
  // GatherND batch_dims 1: y [2, 4]; 2 · 32 + 16 bytes, as Gather.
  const Layer& g = only(m[0], "GatherND");
  EXPECT_EQ(g.config.outputs[0].shape, (Shape{2, 4}));
  EXPECT_EQ(g.key, "GatherND|x=2x3x4|indices=2x1:i64|batch_dims=1|f32");
  EXPECT_EQ(g.bytes, 80);
}

TEST(SamplingCost, AdaptiveRoiAlignOfOpset10AssumesTwoByTwoSamples) {
  // Opset 10 has no coordinate_transformation_mode: output_half_pixel. sampling_ratio 0: s = 4
  // (docs/LAYERS.md). y [4, 8, 14, 14] = 6272: 6272 · 33 + 10 · 4·196·4 = 238336. Max mode: the same.
  auto m = process_ok(
      model_text("g (float[2,8,32,32] f, float[4,4] rois, int64[4] bi) => (r) {\n"
                 "  r = RoiAlign <mode = \"max\", output_height = 14, output_width = 14> (f, rois, bi)\n}",
                 10));
  ASSERT_EQ(m.size(), 1u);
  const Layer& r = only(m[0], "RoiAlign");
  EXPECT_EQ(r.key,
            "RoiAlign|x=2x8x32x32|rois=4x4|batch_indices=4:i64|mode=max|output_height=14|output_width=14|"
            "sampling_ratio=0|spatial_scale=1|coordinate_transformation_mode=output_half_pixel|f32");
  EXPECT_EQ(r.flops, 238336);
}

// The boxes of one FPN level, as torchvision's MultiScaleRoIAlign exports them: the proposals whose
// level matches (Equal → NonZero → Gather), their batch column cast to indices. The box count is
// data-dependent: it is the --max-detections assumption, in RoiAlign's rois and output.
TEST(SamplingCost, RoiAlignBoxCountIsTheMaxDetectionsAssumption) {
  const std::string text = model_text(
      "g (float[1,256,20,20] f, float[1000,5] proposals, int64[1000] levels) => (r) {\n"
      "  lv = Constant <value = int64[1] {2}> ()\n"
      "  hit = Equal (levels, lv)\n"
      "  nz = NonZero (hit)\n"
      "  ax0 = Constant <value = int64[1] {0}> ()\n"
      "  idx = Squeeze (nz, ax0)\n"
      "  sel = Gather <axis = 0> (proposals, idx)\n"
      "  s0 = Constant <value = int64[1] {0}> ()\n"
      "  s1 = Constant <value = int64[1] {1}> ()\n"
      "  s5 = Constant <value = int64[1] {5}> ()\n"
      "  ax1 = Constant <value = int64[1] {1}> ()\n"
      "  col = Slice (sel, s0, s1, ax1)\n"
      "  colv = Squeeze (col, ax1)\n"
      "  bi = Cast <to = 7> (colv)\n"
      "  rois = Slice (sel, s1, s5, ax1)\n"
      "  r = RoiAlign <output_height = 7, output_width = 7, sampling_ratio = 2, spatial_scale = 0.0625>\n"
      "      (f, rois, bi)\n}",
      16);
  ProcessOptions o;
  o.max_detections = 37;
  auto m = process_model_text(text, "level.onnx", o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ(m->size(), 1u);
  const Layer& r = only((*m)[0], "RoiAlign");
  EXPECT_EQ(r.config.kind, LayerKind::kRoiAlign);
  EXPECT_TRUE(r.shapes_known);
  ASSERT_EQ(r.config.inputs.size(), 3u);
  EXPECT_EQ(r.config.inputs[1].shape, (Shape{37, 4}));
  EXPECT_EQ(r.config.inputs[2].shape, (Shape{37}));
  EXPECT_EQ(r.config.outputs[0].shape, (Shape{37, 256, 7, 7}));
  EXPECT_NE((*m)[0].assumption.find("--max-detections 37"), std::string::npos) << (*m)[0].assumption;
}

// torchvision's RPN filters its kept boxes by score with GreaterOrEqual, an ONNX function with no
// inference function in ONNX 1.12: Floorline broadcasts its shape itself, so the count assumed for
// the first NonZero reaches the second, and the boxes RoiAlign receives (the real
// fasterrcnn_mobilenet_v3_large_320_fpn export lost 160 layers' shapes there).
TEST(SamplingCost, ScoreFilterWithGreaterOrEqualKeepsTheAssumedCount) {
  const std::string text = model_text(
      "g (float[1,256,20,20] f, float[1000,4] boxes, float[1000] scores, int64[1000] levels) => (r) {\n"
      "  lv = Constant <value = int64[1] {2}> ()\n"
      "  hit = Equal (levels, lv)\n"
      "  nz = NonZero (hit)\n"
      "  ax0 = Constant <value = int64[1] {0}> ()\n"
      "  idx = Squeeze (nz, ax0)\n"
      "  sel = Gather <axis = 0> (boxes, idx)\n"
      "  sc = Gather <axis = 0> (scores, idx)\n"
      "  thr = Constant <value = float {0.05}> ()\n"
      "  ok = GreaterOrEqual (sc, thr)\n"
      "  nz2 = NonZero (ok)\n"
      "  idx2 = Squeeze (nz2, ax0)\n"
      "  rois = Gather <axis = 0> (sel, idx2)\n"
      "  bsc = Gather <axis = 0> (sc, idx2)\n"
      "  bi = Cast <to = 7> (bsc)\n"
      "  r = RoiAlign <output_height = 7, output_width = 7, sampling_ratio = 2, spatial_scale = 0.0625>\n"
      "      (f, rois, bi)\n}",
      16);
  ProcessOptions o;
  o.max_detections = 37;
  auto m = process_model_text(text, "filter.onnx", o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Layer& ge = only((*m)[0], "GreaterOrEqual");
  EXPECT_EQ(ge.config.outputs[0].shape, (Shape{37}));
  EXPECT_EQ(ge.config.outputs[0].dtype, DataType::kBool);
  const Layer& r = only((*m)[0], "RoiAlign");
  EXPECT_TRUE(r.shapes_known);
  EXPECT_EQ(r.config.inputs[1].shape, (Shape{37, 4}));
  EXPECT_EQ(r.config.outputs[0].shape, (Shape{37, 256, 7, 7}));
}

TEST(Opset18Forms, ScatterElementsWithTheMaxAndMinReductionsIsAKind) {
  auto m =
      process_ok(model_text("g (float[4,6] d, int64[2,6] i, float[2,6] u) => (a, b) {\n"
                            "  a = ScatterElements <axis = 0, reduction = \"max\"> (d, i, u)\n"
                            "  b = ScatterElements <axis = 1, reduction = \"min\"> (d, i, u)\n}",
                            18));
  ASSERT_EQ(m.size(), 1u);
  int seen = 0;
  for (const auto& l : m[0].layers) {
    if (l.config.op_type != "ScatterElements") continue;
    ++seen;
    EXPECT_EQ(l.config.kind, LayerKind::kScatterElements) << l.name;
    EXPECT_EQ(l.config.outputs[0].shape, (Shape{4, 6}));
    EXPECT_EQ(l.flops, 12);  // one max (min) per update
  }
  EXPECT_EQ(seen, 2);
  EXPECT_FALSE(has_warning(m[0], "no Floorline layer kind"));
}

}  // namespace
}  // namespace floorline::mp::test
