// Issue 19: recurrent layers, Einsum as MatMul, the new element-wise kinds and the
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

}  // namespace
}  // namespace floorline::mp::test
