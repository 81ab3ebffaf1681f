// Fusable chains (patterns.hpp) on small ONNX-text models: which layers form each chain, the
// epilogue's ops and parameters, and the fused case names stored in databases.
#include <gtest/gtest.h>

#include "floorline/model_processor/patterns.hpp"
#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

// The layer writing the ONNX value `output`.
int at(const ModelIR& m, const std::string& output) {
  for (const auto& l : m.layers)
    for (const auto& o : l.output_names)
      if (o == output) return l.index;
  ADD_FAILURE() << "no layer writes " << output;
  return -1;
}

ModelIR one(const std::string& graph) {
  auto ms = process_ok(model_text(graph));
  if (ms.size() != 1) {
    ADD_FAILURE() << "expected one model";
    return {};
  }
  return ms.front();
}

TEST(Patterns, ConvFollowedByAnActivationOrBatchNormalization) {
  const auto m = one(R"(
g (float[1,4,8,8] x, float[4,4,3,3] w, float[4,4,1,1] w2, float[4] s, float[4] b, float[4] mean, float[4] var)
    => (float y1, float y2) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y1 = Relu (c)
  d = Conv (x, w2)
  y2 = BatchNormalization (d, s, b, mean, var)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].head, at(m, "c"));
  EXPECT_EQ(fs[0].absorbed, std::vector<int>{at(m, "y1")});
  EXPECT_EQ(fs[0].name, "Relu");
  ASSERT_EQ(fs[0].epilogue.size(), 1u);
  EXPECT_EQ(fs[0].epilogue[0].op, "Relu");
  EXPECT_FALSE(fs[0].folded);
  EXPECT_EQ(fs[1].head, at(m, "d"));
  EXPECT_EQ(fs[1].absorbed, std::vector<int>{at(m, "y2")});
  EXPECT_EQ(fs[1].name, "BatchNormalization(folded)");
  EXPECT_TRUE(fs[1].epilogue.empty());
  EXPECT_TRUE(fs[1].folded);
  EXPECT_TRUE(is_epilogue_fusion(fs[0]));
  EXPECT_FALSE(is_epilogue_fusion(fs[1]));  // folded into the weights: F's, no fused case
}

TEST(Patterns, ConvFollowedBySwishIsOneChainOfTwoLayers) {
  // x·sigmoid(x) after c (SiLU, as EfficientNet exports it); after d, the Sigmoid has a second
  // reader, so the pair is no epilogue.
  const auto m = one(R"(
g (float[1,4,8,8] x, float[4,4,3,3] w) => (float y1, float y2, float z) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  s = Sigmoid (c)
  y1 = Mul (s, c)
  d = Conv <pads = [1, 1, 1, 1]> (x, w)
  t = Sigmoid (d)
  y2 = Mul (d, t)
  z = Relu (t)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].head, at(m, "c"));
  EXPECT_EQ(fs[0].absorbed, (std::vector<int>{at(m, "s"), at(m, "y1")}));
  EXPECT_EQ(fs[0].name, "Swish");
  ASSERT_EQ(fs[0].epilogue.size(), 1u);
  EXPECT_EQ(fs[0].epilogue[0].op, "Swish");
  EXPECT_TRUE(is_epilogue_fusion(fs[0]));
  EXPECT_FALSE(has_residual(fs[0]));
}

TEST(Patterns, ResidualAddThenActivationIsOneChainPerConv) {
  // Both convs feed only the Add: each can take the other's output as its residual input.
  const auto m = one(R"(
g (float[1,4,8,8] x, float[1,4,8,8] x2, float[4,4,3,3] w, float[4] b) => (float y) {
  c2 = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  c3 = Conv <pads = [1, 1, 1, 1]> (x2, w, b)
  r = Add (c2, c3)
  y = Relu (r)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(fs[k].head, at(m, k == 0 ? "c2" : "c3"));
    EXPECT_EQ(fs[k].absorbed, (std::vector<int>{at(m, "r"), at(m, "y")}));
    EXPECT_EQ(fs[k].name, "Add+Relu");
    ASSERT_EQ(fs[k].epilogue.size(), 2u);
    EXPECT_EQ(fs[k].epilogue[0].op, "Add");
    EXPECT_EQ(fs[k].epilogue[1].op, "Relu");
    EXPECT_TRUE(is_epilogue_fusion(fs[k]));
    EXPECT_TRUE(has_residual(fs[k]));
  }
}

TEST(Patterns, ClipWithConstantBoundsFusesAndRunTimeBoundsDoNot) {
  const auto m = one(R"(
g (float[1,4,8,8] x, float[4,4,3,3] w, float lo_in, float hi_in) => (float y1, float y2) {
  lo = Constant <value = float {0.0}> ()
  hi = Constant <value = float {6.0}> ()
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y1 = Clip (c, lo, hi)
  d = Conv (x, w)
  y2 = Clip (d, lo_in, hi_in)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].head, at(m, "c"));
  EXPECT_EQ(fs[0].name, "Clip(0,6)");
  ASSERT_EQ(fs[0].epilogue.size(), 1u);
  EXPECT_DOUBLE_EQ(fs[0].epilogue[0].alpha, 0);
  EXPECT_DOUBLE_EQ(fs[0].epilogue[0].beta, 6);
}

TEST(Patterns, MatMulBiasVectorThenActivation) {
  const auto m = one(R"(
g (float[2,8,16] a, float[16,32] bw, float[32] bias) => (float y1, float y2) {
  mm = MatMul (a, bw)
  mmb = Add (mm, bias)
  y1 = Relu (mmb)
  m2 = MatMul (a, bw)
  m2b = Add (bias, m2)
  y2 = Erf (m2b)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].head, at(m, "mm"));
  EXPECT_EQ(fs[0].absorbed, (std::vector<int>{at(m, "mmb"), at(m, "y1")}));
  EXPECT_EQ(fs[0].name, "BiasAdd+Relu");
  // Erf is no fusable activation: the bias alone, whichever side of the Add it is on.
  EXPECT_EQ(fs[1].head, at(m, "m2"));
  EXPECT_EQ(fs[1].absorbed, std::vector<int>{at(m, "m2b")});
  EXPECT_EQ(fs[1].name, "BiasAdd");
}

TEST(Patterns, ActivationParametersWithTheirOnnxDefaults) {
  const auto m = one(R"(
g (float[4,16] a, float[16,16] b, float[1,4,8,8] x, float[4,4,2,2] w) => (float y1, float y2, float y3, float y4) {
  g1 = Gemm (a, b)
  y1 = LeakyRelu (g1)
  g2 = Gemm <transB = 1> (a, b)
  y2 = HardSigmoid (g2)
  t = ConvTranspose (x, w)
  y3 = Elu <alpha = 0.5> (t)
  g3 = Gemm <alpha = 2.0> (a, b)
  y4 = Sigmoid (g3)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 4u);
  EXPECT_EQ(fs[0].name, "LeakyRelu(0.01)");
  EXPECT_DOUBLE_EQ(fs[0].epilogue.at(0).alpha, static_cast<double>(0.01f));  // ONNX float attribute
  EXPECT_EQ(fs[1].name, "HardSigmoid(0.2,0.5)");
  EXPECT_EQ(fs[2].head, at(m, "t"));
  EXPECT_EQ(fs[2].name, "Elu(0.5)");
  EXPECT_EQ(fs[3].name, "Sigmoid");
}

TEST(Patterns, NoChainWhenTheHeadHasTwoConsumersOrTheAddIsNotResidual) {
  const auto m = one(R"(
g (float[1,4,8,8] x, float[4,4,3,3] w, float[1,4,1,1] s) => (float y1, float y2, float y3) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y1 = Relu (c)
  y2 = Sigmoid (c)
  d = Conv <pads = [1, 1, 1, 1]> (x, w)
  y3 = Add (d, s)
})");
  // c has two consumers; d's Add broadcasts a [1,4,1,1] input (a conv's bias-like vector is
  // BiasAdd for MatMul only) and reads a graph input, not another layer.
  EXPECT_TRUE(fusion_matches(m).empty());
}

TEST(Patterns, FusionNamesAreTheDatabaseSpelling) {
  EXPECT_EQ(fusion_name({{"Relu"}}), "Relu");
  EXPECT_EQ(fusion_name({{"Add"}, {"Relu"}}), "Add+Relu");
  EXPECT_EQ(fusion_name({{"Clip", 0, 6}}), "Clip(0,6)");
  EXPECT_EQ(fusion_name({{"Clip", -0.5, 0.5}}), "Clip(-0.5,0.5)");
  EXPECT_EQ(fusion_name({{"BiasAdd"}, {"Erf"}}), "BiasAdd+Erf");
  EXPECT_EQ(fusion_name({{"LeakyRelu", 0.01}}), "LeakyRelu(0.01)");
  EXPECT_EQ(fusion_name({{"HardSigmoid", 0.2, 0.5}}), "HardSigmoid(0.2,0.5)");
  EXPECT_EQ(fusion_name({{"Add"}, {"Elu", 1}}), "Add+Elu(1)");
  EXPECT_EQ(fusion_name({}), "");
}

}  // namespace
}  // namespace floorline::mp::test
