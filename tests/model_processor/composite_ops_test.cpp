// Operators read as their decomposition (docs/LAYERS.md): ONNX Runtime's com.microsoft operators,
// the opset-20/23 ones, and the merged decoder's If. Output shapes against ONNX Runtime's, on the
// models of tests/fixtures/composite/ (make_composite_ops.py; ort_shapes.js recorded ONNX Runtime
// 1.30's output shapes), and the layers each decomposition gives, against the operators' formulas.
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

const std::string kCompositeDir = std::string(FLOORLINE_SOURCE_DIR) + "/tests/fixtures/composite/";

nlohmann::json composite_json(const std::string& name) {
  std::ifstream f(kCompositeDir + name);
  EXPECT_TRUE(f.good()) << name;
  return nlohmann::json::parse(f);
}

// "dims batch_size=2 sequence_length=3 past_sequence_length=5": the named dims, the batch apart.
ProcessOptions composite_options(const std::string& note) {
  ProcessOptions o;
  o.batches = {2};
  std::istringstream in(note);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || word.substr(0, eq) == "batch_size") continue;
    o.dims[word.substr(0, eq)] = {std::stoll(word.substr(eq + 1))};
  }
  return o;
}

const GraphValue* output_value(const ModelIR& m, const std::string& name) {
  for (const auto& v : m.outputs)
    if (v.name == name) return &v;
  return nullptr;
}

int kind_count(const ModelIR& m, LayerKind kind) {
  int k = 0;
  for (const auto& l : m.layers) k += l.config.kind == kind && !l.folded;
  return k;
}

bool warned(const ModelIR& m, const std::string& part) {
  for (const auto& w : m.warnings)
    if (w.find(part) != std::string::npos) return true;
  return false;
}

ModelIR process_composite(const std::string& file, const ProcessOptions& opts) {
  auto r = process_model(kCompositeDir + file, opts);
  EXPECT_TRUE(r.ok()) << file << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok() || r->empty()) return {};
  return (*r)[0];
}

TEST(CompositeOps, OutputShapesAreOnnxRuntimes) {
  const auto cases = composite_json("cases.json");
  const auto ort = composite_json("ort_shapes.json");
  ASSERT_EQ(cases.size(), ort.size());
  ASSERT_GE(cases.size(), 20u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string file = cases[i]["model"];
    SCOPED_TRACE(file + " " + cases[i]["note"].get<std::string>());
    const ModelIR m = process_composite(file, composite_options(cases[i]["note"]));
    for (const auto& l : m.layers) {
      EXPECT_NE(l.config.kind, LayerKind::kUnsupported) << l.name;
      EXPECT_TRUE(l.shapes_known) << l.name;
      EXPECT_TRUE(l.subgraph.empty()) << l.name;
    }
    EXPECT_FALSE(warned(m, "kept as Unsupported"));
    for (const auto& [name, dims] : ort[i]["outputs"].items()) {
      const GraphValue* v = output_value(m, name);
      ASSERT_NE(v, nullptr) << name;
      EXPECT_TRUE(v->shape_known) << name;
      EXPECT_EQ(v->shape, dims.get<Shape>()) << name;
    }
  }
}

TEST(CompositeOps, SkipSimplifiedLayerNormIsAnAddAndRmsNormLayersNamedAfterTheNode) {
  const ModelIR m = process_composite("skip_simplified_layer_norm.onnx", composite_options(""));
  // sum = x + skip; y = sum / sqrt(mean(sum²) + ε) · g: Add, Pow, ReduceMean, Add, Sqrt,
  // Reciprocal, Mul, Mul on [2, 3, 64].
  EXPECT_EQ(kind_count(m, LayerKind::kAdd), 2);
  EXPECT_EQ(kind_count(m, LayerKind::kPow), 1);
  EXPECT_EQ(kind_count(m, LayerKind::kReduceMean), 1);
  EXPECT_EQ(kind_count(m, LayerKind::kSqrt), 1);
  EXPECT_EQ(kind_count(m, LayerKind::kReciprocal), 1);
  EXPECT_EQ(kind_count(m, LayerKind::kMul), 2);
  EXPECT_EQ(only(m, "ReduceMean").config.outputs[0].shape, (Shape{2, 3, 1}));
  EXPECT_EQ(only(m, "ReduceMean").name, "SkipSimplifiedLayerNormalization_0/mean_square");
  EXPECT_TRUE(
      warned(m, "1 com.microsoft.SkipSimplifiedLayerNormalization node(s) read as their decomposition"));
}

TEST(CompositeOps, GelusBecomeOneGeluLayer) {
  const ModelIR fast = process_composite("fast_gelu.onnx", composite_options(""));
  const Layer& g = only(fast, "Gelu");
  const Attr* approximate = g.config.find_attr("approximate");
  ASSERT_NE(approximate, nullptr);
  EXPECT_EQ(std::get<std::string>(approximate->value), "tanh");
  EXPECT_EQ(kind_count(fast, LayerKind::kAdd), 1);  // the bias
  EXPECT_EQ(kind_count(fast, LayerKind::kTanh), 0);
  const ModelIR bias = process_composite("bias_gelu.onnx", composite_options(""));
  EXPECT_EQ(std::get<std::string>(only(bias, "Gelu").config.find_attr("approximate")->value), "none");
  EXPECT_EQ(kind_count(bias, LayerKind::kAdd), 1);
  EXPECT_EQ(kind_count(bias, LayerKind::kErf), 0);
  // ONNX's own Gelu of opset 20, read as opset 17 with its approximation kept.
  const ModelIR gelu20 = process_composite("gelu_20.onnx", composite_options(""));
  ASSERT_EQ(gelu20.layers.size(), 1u);
  EXPECT_EQ(gelu20.layers[0].config.kind, LayerKind::kGelu);
  EXPECT_EQ(std::get<std::string>(gelu20.layers[0].config.find_attr("approximate")->value), "tanh");
}

// Grouped-query attention at a decode step: 4 query heads over 2 key/value heads of 16, one new
// token after 5: the two query heads of a group are stacked (no copy of the keys per query head),
// so the scores are a batched [2 query rows × 16] · [16 × 6] per (batch, kv head).
TEST(CompositeOps, GroupQueryAttentionStacksTheGroupsQueriesInsteadOfCopyingKeys) {
  const ModelIR m = process_composite("group_query_attention.onnx", composite_options(""));
  EXPECT_EQ(kind_count(m, LayerKind::kExpand), 0);
  EXPECT_EQ(kind_count(m, LayerKind::kTile), 0);
  std::vector<const Layer*> matmuls;
  for (const auto& l : m.layers)
    if (l.config.kind == LayerKind::kMatMul) matmuls.push_back(&l);
  ASSERT_EQ(matmuls.size(), 2u);
  EXPECT_EQ(matmuls[0]->config.outputs[0].shape, (Shape{2, 2, 2, 6}));   // scores
  EXPECT_EQ(matmuls[0]->flops, 2 * 2 * 2 * 2 * 6 * 16);                  // 2·B·Nkv·(g·S)·T·H
  EXPECT_EQ(matmuls[1]->config.outputs[0].shape, (Shape{2, 2, 2, 16}));  // probabilities · V
  // The transpose of K is read by the scores' MatMul (docs/LAYERS.md, "Transposed MatMul operands").
  EXPECT_EQ(kind_count(m, LayerKind::kSoftmax), 1);
  EXPECT_EQ(only(m, "Softmax").config.outputs[0].shape, (Shape{2, 2, 2, 6}));
  // Present K and V: the past (5) and the new token, Concat on the sequence axis.
  // and the rotary halves of Q and K joined again: 4 Concat layers.
  EXPECT_EQ(kind_count(m, LayerKind::kConcat), 4);
}

// A partial rotary: on heads of 32, cos_cache of 8 angles rotates the first 16 entries of each head
// of Q and K, as ONNX Runtime does (its rotary dim is twice the tables' last dim); the other 16 pass.
TEST(CompositeOps, GroupQueryAttentionRotatesThePartItsTablesCover) {
  const ModelIR full = process_composite("group_query_attention.onnx", composite_options(""));
  const ModelIR m = process_composite("group_query_attention_partial_rotary.onnx", composite_options(""));
  // Q [2, 1, 4, 32] and K [2, 1, 2, 32]: each sliced into its rotary part and the rest (4 Slice
  // layers more than the full rotary's), rotated over 16 entries, and joined again (2 Concat more).
  EXPECT_EQ(kind_count(m, LayerKind::kSlice), kind_count(full, LayerKind::kSlice) + 4);
  EXPECT_EQ(kind_count(m, LayerKind::kConcat), kind_count(full, LayerKind::kConcat) + 2);
  std::vector<Shape> rotated, passed, halves;
  for (const auto& l : m.layers) {
    if (l.name.find("rotary_part") != std::string::npos) rotated.push_back(l.config.outputs[0].shape);
    if (l.name.find("pass_part") != std::string::npos) passed.push_back(l.config.outputs[0].shape);
    if (l.config.kind == LayerKind::kSplit && l.name.find("split_halves") != std::string::npos)
      halves.push_back(l.config.outputs[0].shape);
  }
  EXPECT_EQ(rotated, (std::vector<Shape>{{2, 1, 4, 16}, {2, 1, 2, 16}}));
  EXPECT_EQ(passed, (std::vector<Shape>{{2, 1, 4, 16}, {2, 1, 2, 16}}));
  // The rotation's halves are of 8 entries, the tables' width.
  EXPECT_EQ(halves, (std::vector<Shape>{{2, 1, 4, 8}, {2, 1, 2, 8}}));
  EXPECT_EQ(output_value(m, "y")->shape, (Shape{2, 1, 128}));
}

TEST(CompositeOps, TheMergedDecodersBranchIsPickedByThePastLength) {
  ProcessOptions opts = composite_options("past_sequence_length=5 sequence_length=3");
  opts.dims["past_sequence_length"] = {0, 5};
  auto r = process_model(kCompositeDir + "merged_decoder.onnx", opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  const ModelIR& none = (*r)[0];
  const ModelIR& cache = (*r)[1];
  EXPECT_EQ(none.dims, (DimValues{{"past_sequence_length", 0}, {"sequence_length", 3}}));
  EXPECT_TRUE(warned(none, "runs its else-branch (without the cache) (past_sequence_length = 0)"));
  EXPECT_TRUE(warned(cache, "runs its then-branch (with the cache) (past_sequence_length = 5)"));
  EXPECT_EQ(kind_count(none, LayerKind::kConcat), 0);
  EXPECT_EQ(kind_count(cache, LayerKind::kConcat), 1);
  EXPECT_EQ(output_value(cache, "present")->shape, (Shape{2, 8, 8}));
  EXPECT_EQ(output_value(none, "scores")->shape, (Shape{2, 3, 3}));
  EXPECT_EQ(kind_count(cache, LayerKind::kIf), 0);
}

TEST(CompositeOps, AMergedDecoderWithoutItsPastLengthIsAnErrorNamingTheIfAndTheDim) {
  ProcessOptions opts;
  opts.dims["sequence_length"] = {1};
  auto r = process_model(kCompositeDir + "merged_decoder.onnx", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("past_sequence_length"), std::string::npos) << r.error().message;
}

// MatMulNBits is a kind of its own: x [2, 3, 64] · 4-bit weights of N = 48 in blocks of 32.
TEST(CompositeOps, MatMulNBitsIsOneLayerCostedByItsPackedBytes) {
  const ModelIR m = process_composite("matmul_nbits.onnx", composite_options(""));
  const Layer& l = only(m, "MatMulNBits");
  EXPECT_EQ(l.config.kind, LayerKind::kMatMulNBits);
  EXPECT_EQ(l.config.outputs[0].shape, (Shape{2, 3, 48}));
  EXPECT_EQ(l.key,
            "MatMulNBits|a=2x3x64|b=48x2x16:u8|scales=96|zero_points|K=64|N=48|accuracy_level=0|bits=4|"
            "block_size=32|f32");
  // 2·(2·3·48)·64 for the product + 2·64·48 to dequantize the weights.
  EXPECT_EQ(l.flops, 2 * 2 * 3 * 48 * 64 + 2 * 64 * 48);
  // A (1,536) + B's bytes (1,536) + scales (384) + zero points (48) + y (1,152).
  EXPECT_EQ(l.bytes, 1536 + 1536 + 384 + 48 + 1152);
  EXPECT_FALSE(warned(m, "kept as Unsupported"));
}

TEST(CompositeOps, AFormTheDecompositionDoesNotCoverStaysUnsupportedWithAWarning) {
  // axis counted from the front: the rule reads axes from the end only.
  const auto m = process_ok(model_text(R"(
g (float[1,3,8] x, float[8] s) => (y) {
  y = SimplifiedLayerNormalization <axis = 2> (x, s)
}
)"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(kind_count(m[0], LayerKind::kUnsupported), 1);
  EXPECT_TRUE(warned(m[0],
                     "node 'SimplifiedLayerNormalization_0' (SimplifiedLayerNormalization): axis 2 is "
                     "not counted from the end; kept as Unsupported"));
}

}  // namespace
}  // namespace floorline::mp::test
