// Fusable chains (patterns.hpp) on small ONNX-text models: which layers form each chain, the
// epilogue's ops and parameters, and the fused case names stored in databases.
#include <gtest/gtest.h>

#include <cmath>

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
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].head, at(m, "c"));
  EXPECT_EQ(fs[0].absorbed, (std::vector<int>{at(m, "s"), at(m, "y1")}));
  EXPECT_EQ(fs[0].name, "Swish");
  ASSERT_EQ(fs[0].epilogue.size(), 1u);
  EXPECT_EQ(fs[0].epilogue[0].op, "Swish");
  EXPECT_TRUE(is_epilogue_fusion(fs[0]));
  EXPECT_FALSE(has_residual(fs[0]));
  // The same SiLU on its own, its Sigmoid the head (S and the replay take the chain that saves more).
  EXPECT_EQ(fs[1].head, at(m, "s"));
  EXPECT_EQ(fs[1].absorbed, std::vector<int>{at(m, "y1")});
  EXPECT_EQ(fs[1].name, "MulInput");
}

TEST(Patterns, BatchNormalizationThenReluIsAChainOfItsOwn) {
  // DenseNet's pre-activation: norm → relu (no convolution before the norm); a norm read twice is not.
  const auto m = one(R"(
g (float[1,4,8,8] a, float[1,4,8,8] b, float[4] s, float[4] o, float[4] mean, float[4] var) => (float y1, float y2, float z) {
  x = Add (a, b)
  n = BatchNormalization (x, s, o, mean, var)
  y1 = Relu (n)
  p = BatchNormalization (a, s, o, mean, var)
  y2 = Relu (p)
  z = Sigmoid (p)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].head, at(m, "n"));
  EXPECT_EQ(fs[0].absorbed, std::vector<int>{at(m, "y1")});
  EXPECT_EQ(fs[0].name, "Relu");
  EXPECT_TRUE(is_epilogue_fusion(fs[0]));
}

TEST(Patterns, SiluOnItsOwnIsTheSigmoidWithItsMulByItsInput) {
  // After an Add (no head of its own): a SiLU, either operand order. An SE block's scale (x times
  // the sigmoid of something else) and a Sigmoid read twice are not.
  const auto m = one(R"(
g (float[1,4,8,8] a, float[1,4,8,8] b, float[1,4,1,1] q) => (float y1, float y2, float y3, float z) {
  x = Add (a, b)
  s = Sigmoid (x)
  y1 = Mul (x, s)
  t = Sigmoid (q)
  y2 = Mul (x, t)
  u = Sigmoid (y1)
  y3 = Mul (u, y1)
  z = Relu (u)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].head, at(m, "s"));
  EXPECT_EQ(fs[0].absorbed, std::vector<int>{at(m, "y1")});
  ASSERT_EQ(fs[0].epilogue.size(), 1u);
  EXPECT_EQ(fs[0].epilogue[0].op, "MulInput");
  EXPECT_TRUE(is_epilogue_fusion(fs[0]));
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

TEST(Patterns, ScaledDotProductAttentionIsOneChainToTheProductByV) {
  // HF BERT's form: Q·Kᵀ (K transposed by a Transpose of the last two axes: collapsed into the
  // MatMul's transB), a Div by √D, the mask Add of [1,1,1,Sk], the softmax, the product by V.
  // Swin's relative position bias is a [1,H,Sq,Sk] Add; ViT has neither the Div nor an Add.
  const auto m = one(R"(
g (float[2,4,6,8] q, float[2,4,6,8] k, float[2,4,6,8] v, float[1,1,1,6] mask, float[1,4,6,6] rel)
    => (float y, float z) {
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul (q, kt)
  d = Constant <value = float {2.828}> ()
  sc = Div (s, d)
  sm = Add (sc, mask)
  p = Softmax <axis = -1> (sm)
  y = MatMul (p, v)
  kt2 = Transpose <perm = [0, 1, 3, 2]> (v)
  s2 = MatMul (q, kt2)
  b2 = Add (rel, s2)
  p2 = Softmax <axis = 3> (b2)
  dr = Dropout (p2)
  z = MatMul (dr, k)
})");
  const auto fs = fusion_matches(m);
  ASSERT_EQ(fs.size(), 2u);
  const auto& a = fs[0].head == at(m, "s") ? fs[0] : fs[1];
  const auto& b = fs[0].head == at(m, "s") ? fs[1] : fs[0];
  EXPECT_EQ(a.absorbed, (std::vector<int>{at(m, "sc"), at(m, "sm"), at(m, "p"), at(m, "y")}));
  EXPECT_EQ(a.name, "Scale+AttentionBias(1x1x1x6)+Softmax+MatMul(2x4x6x8)");
  ASSERT_EQ(a.epilogue.size(), 4u);
  EXPECT_NEAR(a.epilogue[0].alpha, 1 / std::sqrt(8.0), 1e-12);  // 1/√D: the constant is not in the IR
  EXPECT_EQ(a.operands, (std::vector<std::pair<int, size_t>>{{at(m, "sm"), 1}, {at(m, "y"), 1}}));
  EXPECT_TRUE(is_attention(a));
  EXPECT_TRUE(is_epilogue_fusion(a));
  EXPECT_FALSE(has_residual(a));
  // The bias first in the Add: its operand is input 0; Swin's Dropout (a view) between the Softmax
  // and the product by V is passed through.
  EXPECT_EQ(b.head, at(m, "s2"));
  EXPECT_EQ(b.absorbed, (std::vector<int>{at(m, "b2"), at(m, "p2"), at(m, "z")}));
  EXPECT_EQ(b.name, "AttentionBias(1x4x6x6)+Softmax+MatMul(2x4x6x8)");
  EXPECT_EQ(b.operands, (std::vector<std::pair<int, size_t>>{{at(m, "b2"), 0}, {at(m, "z"), 1}}));
}

TEST(Patterns, NoAttentionWhereTheChainBranchesOrTheSoftmaxIsNotAlongTheKeys) {
  const auto m = one(R"(
g (float[4,6,8] q, float[4,8,6] kt, float[4,6,8] v) => (float y, float p, float z) {
  s = MatMul (q, kt)
  p = Softmax <axis = -1> (s)
  y = MatMul (p, v)
  s2 = MatMul (q, kt)
  p2 = Softmax <axis = 1> (s2)
  z = MatMul (p2, v)
})");
  // p is a graph output too (two readers: the chain would hide it); p2 normalizes over the queries.
  for (const auto& f : fusion_matches(m)) EXPECT_FALSE(is_attention(f)) << f.name;
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
  mp::Epilogue bias{"AttentionBias"}, pv{"MatMul"};
  bias.shape = {1, 3, 49, 49};
  pv.shape = {64, 3, 49, 32};
  EXPECT_EQ(fusion_name({{"Scale", 0.125}, bias, {"Softmax"}, pv}),
            "Scale+AttentionBias(1x3x49x49)+Softmax+MatMul(64x3x49x32)");
}

}  // namespace
}  // namespace floorline::mp::test
