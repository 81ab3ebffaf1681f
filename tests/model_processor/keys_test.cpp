// Canonical keys, FLOPs and bytes on tiny models written in ONNX text, values computed by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floorline/model_processor/zoo.hpp"
#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

// x: NCHW input, w: weights, attrs: Conv attributes ("" for none), with/without bias.
std::string conv(const std::string& attrs, const std::string& x = "float[N,3,8,8]",
                 const std::string& w = "float[4,3,3,3]", bool bias = true,
                 const std::string& b = "float[4]") {
  const std::string a = attrs.empty() ? "" : "<" + attrs + ">";
  return model_text(fmt::format("g ({} x, {} w{}) => (y) {{\n  y = Conv {} (x, w{})\n}}", x, w,
                                bias ? ", " + b + " b" : "", a, bias ? ", b" : ""));
}

std::string conv_key(const std::string& text) {
  auto m = process_ok(text);
  return m.empty() ? "" : only(m[0], "Conv").key;
}

TEST(CanonicalKey, ConvWithBiasMatchesTheDocumentedForm) {
  EXPECT_EQ(conv_key(conv("pads = [1,1,1,1]")),
            "Conv|x=1x3x8x8|w=4x3x3x3|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32");
}

TEST(CanonicalKey, DefaultsAreFilledIn) {
  EXPECT_EQ(conv_key(conv("")),
            conv_key(conv("pads = [0,0,0,0], strides = [1,1], dilations = [1,1], group = 1")));
}

TEST(CanonicalKey, AutoPadResolvesToExplicitPads) {
  EXPECT_EQ(conv_key(conv("auto_pad = \"SAME_UPPER\"")), conv_key(conv("pads = [1,1,1,1]")));
  EXPECT_EQ(conv_key(conv("auto_pad = \"VALID\"")), conv_key(conv("pads = [0,0,0,0]")));
  // in 8, kernel 3, stride 2: out 4, total padding (4-1)*2 + 3 - 8 = 1; UPPER puts it at the end.
  const auto upper = conv_key(conv("auto_pad = \"SAME_UPPER\", strides = [2,2]"));
  const auto lower = conv_key(conv("auto_pad = \"SAME_LOWER\", strides = [2,2]"));
  EXPECT_NE(upper.find("|pads=0,0,1,1|"), std::string::npos) << upper;
  EXPECT_NE(lower.find("|pads=1,1,0,0|"), std::string::npos) << lower;
  EXPECT_EQ(upper, conv_key(conv("pads = [0,0,1,1], strides = [2,2]")));
}

TEST(CanonicalKey, AsymmetricPadsStayAsymmetric) {
  const auto a = conv_key(conv("pads = [0,0,1,1]"));
  const auto b = conv_key(conv("pads = [1,1,0,0]"));
  const auto c = conv_key(conv("pads = [1,0,1,0]"));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_NE(a.find("|pads=0,0,1,1|"), std::string::npos) << a;
}

TEST(CanonicalKey, EveryParameterThatChangesTheWorkChangesTheKey) {
  const auto base = conv_key(conv("pads = [1,1,1,1]"));
  EXPECT_NE(base, conv_key(conv("pads = [1,1,1,1], strides = [2,2]")));
  EXPECT_NE(base, conv_key(conv("pads = [1,1,1,1], dilations = [2,2]")));
  EXPECT_NE(base, conv_key(conv("pads = [1,1,1,1]", "float[N,3,8,8]", "float[4,3,3,3]", false)));
  EXPECT_NE(base,
            conv_key(conv("pads = [1,1,1,1]", "float16[N,3,8,8]", "float16[4,3,3,3]", true, "float16[4]")));
  EXPECT_NE(base, conv_key(conv("pads = [1,1,1,1]", "float[N,3,9,8]")));
  const auto grouped =
      conv_key(conv("pads = [1,1,1,1], group = 3", "float[N,3,8,8]", "float[3,1,3,3]", true, "float[3]"));
  EXPECT_EQ(grouped, "Conv|x=1x3x8x8|w=3x1x3x3|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=3|f32");
  const auto f16 =
      conv_key(conv("pads = [1,1,1,1]", "float16[N,3,8,8]", "float16[4,3,3,3]", true, "float16[4]"));
  EXPECT_EQ(f16.substr(f16.size() - 4), "|f16");
  EXPECT_EQ(conv_key(conv("pads = [1,1,1,1]", "float[N,3,8,8]", "float[4,3,3,3]", false)),
            "Conv|x=1x3x8x8|w=4x3x3x3|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32");
}

TEST(ConvCost, TwoDimensional) {
  auto m = process_ok(conv("pads = [1,1,1,1]"));
  ASSERT_EQ(m.size(), 1u);
  const Layer& l = only(m[0], "Conv");
  // y = 1x4x8x8 = 256 outputs, 3·3·3 = 27 MACs each, plus one bias add per output.
  EXPECT_EQ(l.flops, 2 * 256 * 27 + 256);
  // x 192 + w 108 + b 4 + y 256 floats.
  EXPECT_EQ(l.bytes, (192 + 108 + 4 + 256) * 4);
  EXPECT_EQ(l.cost, CostClass::kCompute);
}

TEST(ConvCost, DepthwiseCountsOneInputChannelPerOutput) {
  auto m = process_ok(conv("pads = [1,1,1,1], group = 3", "float[N,3,8,8]", "float[3,1,3,3]", false));
  // y = 1x3x8x8 = 192 outputs, 1·3·3 MACs each.
  EXPECT_EQ(only(m[0], "Conv").flops, 2 * 192 * 9);
}

TEST(ConvCost, OneDimensional) {
  auto m = process_ok(conv("pads = [2,2]", "float[N,3,16]", "float[4,3,5]", false));
  const Layer& l = only(m[0], "Conv");
  EXPECT_EQ(l.key, "Conv|x=1x3x16|w=4x3x5|pads=2,2|strides=1|dil=1|group=1|f32");
  EXPECT_EQ(l.flops, 2 * 64 * 15);  // y = 1x4x16
}

TEST(ConvCost, ThreeDimensional) {
  auto m = process_ok(conv("pads = [1,1,1,1,1,1]", "float[N,2,4,4,4]", "float[3,2,3,3,3]", false));
  const Layer& l = only(m[0], "Conv");
  EXPECT_EQ(l.key, "Conv|x=1x2x4x4x4|w=3x2x3x3x3|pads=1,1,1,1,1,1|strides=1,1,1|dil=1,1,1|group=1|f32");
  EXPECT_EQ(l.flops, 2 * 192 * 54);  // y = 1x3x4x4x4, 2·27 MACs each
}

TEST(ConvTransposeCost, StridedWithOutputPadding) {
  auto m = process_ok(model_text(
      "g (float[N,4,4,4] x, float[4,2,3,3] w) => (y) {\n"
      "  y = ConvTranspose <strides = [2,2], pads = [1,1,1,1], output_padding = [1,1]> (x, w)\n}"));
  const Layer& l = only(m[0], "ConvTranspose");
  // out = (4-1)*2 + 3 - (1+1) + 1 = 8 per spatial dim.
  EXPECT_EQ(l.key,
            "ConvTranspose|x=1x4x4x4|w=4x2x3x3|pads=1,1,1,1|strides=2,2|dil=1,1|group=1|output_padding=1,1"
            "|y=1x2x8x8|f32");
  // Each of the 64 input elements scatters into 2 output channels x 3x3 taps.
  EXPECT_EQ(l.flops, 2 * 64 * 2 * 9);
}

TEST(ConvTransposeCost, OutputShapeResolvesPadsPerTheSpec) {
  // total padding = 2*(4-1) + 0 + 3 - 8 = 1; without SAME_UPPER the odd pixel goes at the start.
  auto notset =
      process_ok(model_text("g (float[N,4,4,4] x, float[4,2,3,3] w) => (y) {\n"
                            "  y = ConvTranspose <strides = [2,2], output_shape = [8,8]> (x, w)\n}"));
  EXPECT_NE(only(notset[0], "ConvTranspose").key.find("|pads=1,1,0,0|"), std::string::npos)
      << only(notset[0], "ConvTranspose").key;
  auto upper = process_ok(model_text(
      "g (float[N,4,4,4] x, float[4,2,3,3] w) => (y) {\n"
      "  y = ConvTranspose <strides = [2,2], output_shape = [8,8], auto_pad = \"SAME_UPPER\"> (x, w)\n}"));
  EXPECT_NE(only(upper[0], "ConvTranspose").key.find("|pads=0,0,1,1|"), std::string::npos)
      << only(upper[0], "ConvTranspose").key;
}

TEST(GemmCost, TransposedWeightsAndBias) {
  auto m = process_ok(
      model_text("g (float[N,3] a, float[4,3] w, float[4] c) => (y) {\n  y = Gemm <transB = 1> (a, w, c)\n}"),
      {1, 2});
  ASSERT_EQ(m.size(), 2u);
  const Layer& l1 = only(m[0], "Gemm");
  EXPECT_EQ(l1.key, "Gemm|a=1x3|b=4x3|bias=4|transA=0|transB=1|alpha=1|beta=1|f32");
  EXPECT_EQ(l1.flops, 2 * 1 * 4 * 3 + 4);
  EXPECT_EQ(l1.bytes, (3 + 12 + 4 + 4) * 4);
  EXPECT_EQ(only(m[1], "Gemm").flops, 2 * 2 * 4 * 3 + 8);
}

TEST(MatMulCost, BroadcastBatchedMatMul) {
  auto m = process_ok(model_text("g (float[N,5,3,4] a, float[4,6] b) => (y) {\n  y = MatMul (a, b)\n}"));
  const Layer& l = only(m[0], "MatMul");
  EXPECT_EQ(l.key, "MatMul|a=1x5x3x4|b=4x6|f32");
  EXPECT_EQ(l.flops, 2 * (5 * 3 * 6) * 4);
  EXPECT_EQ(l.bytes, (60 + 24 + 90) * 4);
}

TEST(SumCost, VariadicWithBroadcastOperand) {
  // Sum's inputs are one variadic formal (data_0): x0, x1, x2. One add per output element for each
  // input after the first; every input read once, the output written once.
  auto m = process_ok(model_text("g (float[N,8,4,4] a, float[N,8,4,4] b, float[8,1,1] c) => (y) {\n"
                                 "  y = Sum (a, b, c)\n}"),
                      {1, 2});
  ASSERT_EQ(m.size(), 2u);
  const Layer& l = only(m[0], "Sum");
  EXPECT_EQ(l.cost, CostClass::kCompute);
  EXPECT_EQ(l.config.kind, LayerKind::kSum);
  EXPECT_EQ(l.key, "Sum|x0=1x8x4x4|x1=1x8x4x4|x2=8x1x1|f32");
  EXPECT_EQ(l.flops, 2 * 128);
  EXPECT_EQ(l.bytes, (128 + 128 + 8 + 128) * 4);
  EXPECT_EQ(only(m[1], "Sum").flops, 2 * 256);
}

// --- detection heads: docs/LAYERS.md's formulas by hand.
TEST(DetectionCost, TopKGatherNdNonZeroAndNonMaxSuppression) {
  // --max-detections 100 (the default) is more than NonZero's 6 elements and NMS's 5 boxes: their
  // sizes bound the counts.
  auto m = process_ok(
      model_text("g (float[1,6] s, float[2,3,4] d, int64[2,2] i, float[1,5,4] boxes, float[1,1,5] scores)\n"
                 "    => (v, ix, gnd, nz, sel) {\n"
                 "  k = Constant <value = int64[1] {3}> ()\n"
                 "  v, ix = TopK <axis = -1> (s, k)\n"
                 "  gnd = GatherND (d, i)\n"
                 "  nz = NonZero (s)\n"
                 "  mo = Constant <value = int64[1] {10}> ()\n"
                 "  iou = Constant <value = float[1] {0.5}> ()\n"
                 "  sel = NonMaxSuppression (boxes, scores, mo, iou)\n}"));
  ASSERT_EQ(m.size(), 1u);
  // TopK: K = 3 kept of 6: n(x) · ⌈log₂ 3⌉ = 12; x 6 floats, values 3 floats, indices 3 int64.
  const Layer& topk = only(m[0], "TopK");
  EXPECT_EQ(topk.config.kind, LayerKind::kTopK);
  EXPECT_EQ(topk.key, "TopK|x=1x6|k=3|axis=1|largest=1|sorted=1|f32");
  EXPECT_EQ(topk.flops, 12);
  EXPECT_EQ(topk.bytes, 6 * 4 + 3 * 4 + 3 * 8);
  // GatherND: 2 tuples of 2 indices, each a row of 4: y [2, 4]; 2 · bytes(y) + bytes(indices).
  const Layer& g = only(m[0], "GatherND");
  EXPECT_EQ(g.config.kind, LayerKind::kGatherND);
  EXPECT_EQ(g.key, "GatherND|x=2x3x4|indices=2x2:i64|batch_dims=0|f32");
  EXPECT_EQ(g.flops, 0);
  EXPECT_EQ(g.bytes, 2 * 8 * 4 + 4 * 8);
  // NonZero: min(100, 6) = 6 selected: y [2, 6] int64; one comparison per element.
  const Layer& nz = only(m[0], "NonZero");
  EXPECT_EQ(nz.config.kind, LayerKind::kNonZero);
  EXPECT_EQ(nz.key, "NonZero|x=1x6|y=2x6:i64|f32");
  EXPECT_EQ(nz.flops, 6);
  EXPECT_EQ(nz.bytes, 6 * 4 + 12 * 8);
  // NMS: B·C·S = 5, ⌈log₂ 5⌉ = 3: 5 · (3 + 3) = 30, + 13 · K · S = 13 · 5 · 5 = 325; K = min(100, 5).
  const Layer& nms = only(m[0], "NonMaxSuppression");
  EXPECT_EQ(nms.config.kind, LayerKind::kNonMaxSuppression);
  EXPECT_EQ(nms.key,
            "NonMaxSuppression|boxes=1x5x4|scores=1x1x5|max_output_boxes_per_class=10|iou_threshold=0.5|"
            "center_point_box=0|y=5x3:i64|f32");
  EXPECT_EQ(nms.flops, 355);
  EXPECT_EQ(nms.bytes, 20 * 4 + 5 * 4 + 15 * 8);
}

// --- quantization: Q → DQ → Conv (+ Relu) → Q → DQ with per-channel int8 weights and an int32 bias.
TEST(QdqFusion, ConvBetweenQuantizeAndDequantizeIsOneInt8Layer) {
  auto m =
      process_ok(model_text("g (float[N,3,8,8] x, int8[4,3,3,3] wq, int32[4] bq) => (y) {\n"
                            "  s = Constant <value = float {0.02}> ()\n"
                            "  z = Constant <value = uint8 {128}> ()\n"
                            "  oz = Constant <value = uint8 {0}> ()\n"
                            "  ws = Constant <value = float[4] {0.1, 0.1, 0.1, 0.1}> ()\n"
                            "  wz = Constant <value = int8[4] {0, 0, 0, 0}> ()\n"
                            "  bz = Constant <value = int32[4] {0, 0, 0, 0}> ()\n"
                            "  xq = QuantizeLinear (x, s, z)\n"
                            "  xd = DequantizeLinear (xq, s, z)\n"
                            "  wd = DequantizeLinear <axis = 0> (wq, ws, wz)\n"
                            "  bd = DequantizeLinear <axis = 0> (bq, ws, bz)\n"
                            "  c = Conv <pads = [1,1,1,1]> (xd, wd, bd)\n"
                            "  r = Relu (c)\n"
                            "  yq = QuantizeLinear (r, s, oz)\n"
                            "  y = DequantizeLinear (yq, s, oz)\n}"));
  const Layer& c = only(m[0], "Conv");
  EXPECT_EQ(c.key,
            "Conv|x=1x3x8x8|w=4x3x3x3:i8|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|qtypes=u8,i8>u8|"
            "zero_points=1,0,0|per_channel=1|u8");
  EXPECT_EQ(c.flops, 2 * 256 * 27 + 256);
  EXPECT_EQ(c.bytes, 192 + 108 + 4 * 4 + 256);           // u8 x, s8 w, int32 bias, u8 y
  EXPECT_EQ(only(m[0], "Relu").cost, CostClass::kView);  // the output's clamp at zero point 0 is the Relu
  std::vector<std::string> cost_bearing;
  for (const auto& l : m[0].layers)
    if (l.cost_bearing()) cost_bearing.push_back(l.key);
  ASSERT_EQ(cost_bearing.size(), 3u);
  EXPECT_EQ(cost_bearing[0], "QuantizeLinear|x=1x3x8x8|y_scale|y_zero_point|to=u8|f32");
  EXPECT_EQ(cost_bearing[2], "DequantizeLinear|x=1x4x8x8|x_scale|x_zero_point|from=u8|u8");
  for (const auto& l : m[0].layers)
    if (l.config.kind == LayerKind::kQuantizeLinear && l.cost_bearing()) {
      EXPECT_EQ(l.flops, 3 * 192);
      EXPECT_EQ(l.bytes, 192 * 4 + 4 + 1 + 192);
    } else if (l.config.kind == LayerKind::kDequantizeLinear && l.cost_bearing()) {
      EXPECT_EQ(l.flops, 2 * 256);
      EXPECT_EQ(l.bytes, 256 + 4 + 1 + 256 * 4);
    }
}

TEST(KeyHash, IsFnv1a64) {
  EXPECT_EQ(key_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(key_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(key_hash_hex("a"), "af63dc4c8601ec8c");
}

TEST(Dedup, IdenticalWorkInTwoModelsIsOneConfig) {
  auto a = process_ok(conv("pads = [1,1,1,1]"));
  auto b = process_ok(conv("auto_pad = \"SAME_UPPER\""));
  auto c = process_ok(conv("pads = [0,0,0,0]"));
  ASSERT_EQ(a.size() + b.size() + c.size(), 3u);
  a[0].name = "a";
  b[0].name = "b";
  c[0].name = "c";
  auto unique = dedup({a[0], b[0], c[0]});
  ASSERT_EQ(unique.size(), 2u);
  const auto& padded = unique[0].key.find("pads=1,1,1,1") != std::string::npos ? unique[0] : unique[1];
  EXPECT_EQ(padded.count, 2);
  EXPECT_EQ(padded.models.size(), 2u);
  EXPECT_EQ(padded.models.count("a@b1"), 1u);
  EXPECT_EQ(padded.models.count("b@b1"), 1u);
}

}  // namespace
}  // namespace floorline::mp::test
