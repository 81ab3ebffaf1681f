// The Transpose-into-MatMul collapse (transposed_matmul.hpp): which Transposes fold into their
// MatMul, and the key, FLOPs, bytes and predecessors of the MatMul that reads its operand transposed.
#include <gtest/gtest.h>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

int count(const ModelIR& m, const std::string& op) {
  int n = 0;
  for (const auto& l : m.layers) n += l.op_type == op;
  return n;
}

TEST(TransposedMatMul, AttentionScoresReadKeysTransposed) {
  // q · kᵀ as PyTorch exports it: Transpose(k, perm 0,1,3,2) -> MatMul(q, ·).
  auto m = process_ok(model_text("g (float[N,4,3,8] q, float[N,4,9,8] k) => (s) {\n"
                                 "  kt = Transpose <perm = [0, 1, 3, 2]> (k)\n  s = MatMul (q, kt)\n}"),
                      {2});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(count(m[0], "Transpose"), 0);
  const Layer& mm = only(m[0], "MatMul");
  EXPECT_EQ(mm.key, "MatMul|a=2x4x3x8|b=2x4x9x8|transB=1|f32");
  EXPECT_EQ(mm.flops, 2 * (2 * 4 * 3 * 9) * 8);                              // 2·|y|·K, K = 8
  EXPECT_EQ(mm.bytes, 4 * (2 * 4 * 3 * 8 + 2 * 4 * 9 * 8 + 2 * 4 * 3 * 9));  // a, b read once; y written
  EXPECT_EQ(mm.input_names, (std::vector<std::string>{"q", "k"}));
  EXPECT_TRUE(mm.preds.empty());
  ASSERT_EQ(m[0].notes.size(), 1u);
  EXPECT_NE(m[0].notes[0].find("1 Transpose(s)"), std::string::npos) << m[0].notes[0];
}

TEST(TransposedMatMul, ThePredecessorsOfTheTransposeBecomeTheMatMuls) {
  auto m =
      process_ok(model_text("g (float[1,6,8] q, float[1,5,8] k) => (s) {\n  r = Relu (k)\n"
                            "  kt = Transpose <perm = [0, 2, 1]> (r)\n  s = MatMul (q, kt)\n}"));
  ASSERT_EQ(m.size(), 1u);
  const Layer& mm = only(m[0], "MatMul");
  EXPECT_EQ(mm.key, "MatMul|a=1x6x8|b=1x5x8|transB=1|f32");
  ASSERT_EQ(mm.preds.size(), 1u);
  EXPECT_EQ(m[0].layers[static_cast<size_t>(mm.preds[0])].op_type, "Relu");
}

TEST(TransposedMatMul, OtherTransposesStay) {
  // Another permutation; a transposed left operand; a Transpose read twice; one that is a graph output.
  const char* graphs[] = {
      "g (float[1,6,8] q, float[8,1,5] k) => (s) {\n  kt = Transpose <perm = [1, 0, 2]> (k)\n  s = MatMul "
      "(q, kt)\n}",
      "g (float[1,8,6] q, float[1,8,5] k) => (s) {\n  qt = Transpose <perm = [0, 2, 1]> (q)\n  s = MatMul "
      "(qt, k)\n}",
      "g (float[1,6,8] q, float[1,5,8] k) => (s, u) {\n  kt = Transpose <perm = [0, 2, 1]> (k)\n"
      "  s = MatMul (q, kt)\n  u = Relu (kt)\n}",
      "g (float[1,6,8] q, float[1,5,8] k) => (s, kt) {\n  kt = Transpose <perm = [0, 2, 1]> (k)\n"
      "  s = MatMul (q, kt)\n}",
  };
  for (const char* g : graphs) {
    auto m = process_ok(model_text(g));
    ASSERT_EQ(m.size(), 1u) << g;
    EXPECT_EQ(count(m[0], "Transpose"), 1) << g;
    EXPECT_EQ(only(m[0], "MatMul").key.find("transB"), std::string::npos) << g;
  }
}

}  // namespace
}  // namespace floorline::mp::test
