// Equivalent formulations of the same layer, planned as cases of the same configuration and checked
// against the reference on real zoo layers: a 1x1 convolution as a GEMM per image (oneDNN matmul
// on NCHW), a MatMul with one right matrix as one GEMM (the batch folded into the rows), and the
// blocked activation layout offered in the block the convolutions write on this host.
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "floorline/generator/plan.hpp"
#include "floorline/kernels/onednn.hpp"
#include "test_support.hpp"

namespace floorline::gen {
namespace {

using test::zoo_model;

Plan onednn_plan(const std::string& model) {
  return make_plan(zoo_model(model), {find_backend("onednn")}, PlanOptions{});
}

std::string variant_of(const PlannedCase& c) {
  return c.group;
}

// Builds and verifies the timed cases of `variant` for `op` (at most `limit`); returns how many
// passed, and the fusions among them.
int verify_variant(const Plan& plan, const std::string& op, const std::string& variant, size_t limit,
                   std::set<std::string>* fusions) {
  int passed = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != op || variant_of(c) != variant || c.status || !c.spec.feeds.empty()) continue;
    if (static_cast<size_t>(passed) >= limit) break;
    auto k = kernels::make_onednn_kernel(c.spec);
    EXPECT_TRUE(k.ok()) << c.spec.name << ": " << (k.ok() ? "" : k.error().message);
    if (!k.ok()) continue;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    if (!v.ok()) continue;
    ++passed;
    if (fusions) fusions->insert(c.spec.variant.fusion);
  }
  return passed;
}

TEST(Reformulation, OneByOneConvolutionAsMatmulMatchesTheReference) {
  // SqueezeNet's squeeze and expand 1x1 convolutions, with bias, alone and fused with their ReLU.
  const Plan plan = onednn_plan("squeezenet1_1");
  int offered = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "Conv" || variant_of(c) != "matmul") continue;
    ++offered;
    // Only 1x1 convolutions get the formulation.
    EXPECT_NE(c.spec.problem.key.find("x1x1|"), std::string::npos) << c.spec.name;
  }
  EXPECT_GT(offered, 0);
  std::set<std::string> fusions;
  EXPECT_GE(verify_variant(plan, "Conv", "matmul", 6, &fusions), 2);
  EXPECT_TRUE(fusions.count("Relu")) << "no fused 1x1 convolution verified as a matmul";
}

TEST(Reformulation, GroupedOneByOneConvolutionAsBatchedMatmulMatchesTheReference) {
  // No zoo model has a grouped 1x1 convolution (ShuffleNet v1 would): one built here, two groups,
  // alone and with a fused ReLU (with a bias, oneDNN 2.6 would run it in its reference matmul only,
  // so it is not offered).
  auto r = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
grouped (float[1,8,5,7] x, float[6,4,1,1] w) => (float y) {
  c = Conv <group = 2> (x, w)
  y = Relu (c)
}
)onnx",
                                  "grouped.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Plan plan = make_plan(*r, {find_backend("onednn")}, PlanOptions{});
  std::set<std::string> fusions;
  EXPECT_GE(verify_variant(plan, "Conv", "matmul", 4, &fusions), 2);
  EXPECT_EQ(fusions, (std::set<std::string>{"", "Relu"}));
}

TEST(Reformulation, MatmulWithOneWeightMatrixAsOneGemmMatchesTheReference) {
  // BERT's projections: MatMul (128, 1, 768) x (768, 2304) etc., planned as 128 GEMVs ("matmul")
  // and as one 128x768 by 768x2304 GEMM ("matmul_flat").
  const Plan plan = onednn_plan("bert_base_encoder");
  std::set<std::string> keys_flat, keys_batched;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "MatMul" || !c.spec.feeds.empty()) continue;
    (variant_of(c) == "matmul_flat" ? keys_flat : keys_batched).insert(c.spec.problem.key);
  }
  ASSERT_FALSE(keys_flat.empty());
  for (const auto& k : keys_flat) EXPECT_TRUE(keys_batched.count(k)) << "no batched case for " << k;
  EXPECT_GE(verify_variant(plan, "MatMul", "matmul_flat", 3, nullptr), 1);
}

TEST(Reformulation, BlockedVariantsUseTheBlockTheConvolutionsWrite) {
  // Pooling, batch normalization and concat are offered in the channel-blocked layout; its block
  // must be one the convolutions of the same plan write (16 with AVX-512, 8 with AVX2), or every
  // such layer would need a conversion after a convolution.
  const Plan plan = onednn_plan("squeezenet1_1");
  std::set<std::string> conv_blocks, variant_blocks;
  const std::regex dst_block(R"(dst:aBcd(\d+)b)"), variant_block(R"(@blocked(\d+)c)");
  for (const auto& c : plan.cases) {
    std::smatch m;
    if (c.spec.problem.op == "Conv" && std::regex_search(c.params, m, dst_block)) conv_blocks.insert(m[1]);
    if (std::regex_search(c.spec.variant.algorithm, m, variant_block)) variant_blocks.insert(m[1]);
  }
  if (conv_blocks.empty()) GTEST_SKIP() << "no convolution here writes a channel-blocked layout";
  ASSERT_EQ(variant_blocks.size(), 1u);
  EXPECT_TRUE(conv_blocks.count(*variant_blocks.begin()))
      << "blocked variants use a " << *variant_blocks.begin() << "-channel block";
}

}  // namespace
}  // namespace floorline::gen
