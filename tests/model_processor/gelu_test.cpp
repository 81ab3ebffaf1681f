// GELU collapse (docs/LAYERS.md, "GELU chains"): the Div/Mul → Erf → Add → Mul → Mul chain that
// exporters write before opset 20 is one Gelu layer; near misses stay five layers.
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floorline/model_processor/zoo.hpp"
#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

namespace fs = std::filesystem;

// A Relu before and after the chain, so that the DAG around it is checked; `chain` writes g from
// r (constants c = √2, ic = 1/√2, one = 1 and half = ½ are defined).
std::string gelu_model(const std::string& chain, const std::string& outputs = "y",
                       const std::string& sqrt2 = "1.4142135") {
  return model_text(
      fmt::format("g (float[N,4,8] x) => ({}) {{\n"
                  "  c = Constant <value = float {{{}}}> ()\n"
                  "  ic = Constant <value = float[1] {{0.70710677}}> ()\n"
                  "  one = Constant <value = float {{1.0}}> ()\n"
                  "  half = Constant <value = float {{0.5}}> ()\n"
                  "  r = Relu (x)\n"
                  "{}"
                  "  y = Relu (g)\n}}",
                  outputs, sqrt2, chain));
}

std::vector<const Layer*> compute_layers(const ModelIR& m) {
  std::vector<const Layer*> out;
  for (const auto& l : m.layers)
    if (l.cost_bearing()) out.push_back(&l);
  return out;
}

// PyTorch 1.13's order, x multiplied first; 0.5 multiplied first; x/√2 as x·(1/√2) with the
// Mul(Mul(v, ½), x) association; Add and Mul operands swapped.
const char* const kChains[] = {
    "  t = Div (r, c)\n  u = Erf (t)\n  v = Add (u, one)\n  w = Mul (r, v)\n  g = Mul (w, half)\n",
    "  t = Div (r, c)\n  u = Erf (t)\n  v = Add (u, one)\n  h = Mul (r, half)\n  g = Mul (h, v)\n",
    "  t = Mul (ic, r)\n  u = Erf (t)\n  v = Add (one, u)\n  w = Mul (v, half)\n  g = Mul (r, w)\n",
    "  t = Div (r, c)\n  u = Erf (t)\n  v = Add (one, u)\n  w = Mul (v, r)\n  g = Mul (half, w)\n",
};

TEST(GeluCollapse, EveryOrderOfTheDecompositionIsOneGeluLayer) {
  for (const char* chain : kChains) {
    SCOPED_TRACE(chain);
    auto m = process_ok(gelu_model(chain), {1, 8});
    ASSERT_EQ(m.size(), 2u);
    for (const ModelIR& ir : m) {
      const auto layers = compute_layers(ir);
      ASSERT_EQ(layers.size(), 3u);  // Relu, Gelu, Relu
      const Layer& gelu = *layers[1];
      const int64_t n = 4 * 8 * ir.batch;
      EXPECT_EQ(gelu.op_type, "Gelu");
      EXPECT_EQ(gelu.config.kind, LayerKind::kGelu);
      EXPECT_EQ(gelu.name, "Erf_6");  // the Erf node's (unnamed nodes are named "<op>_<index>")
      EXPECT_EQ(gelu.key, fmt::format("Gelu|x={}x4x8|approximate=none|f32", ir.batch));
      EXPECT_EQ(gelu.flops, 5 * n);
      EXPECT_EQ(gelu.bytes, 2 * 4 * n);  // one pass: read x, write y
      EXPECT_EQ(gelu.input_names, std::vector<std::string>{"r"});
      EXPECT_EQ(gelu.output_names, std::vector<std::string>{"g"});
      // Renumbered and rewired: indices are positions, the Gelu reads the first Relu and the
      // second Relu reads the Gelu.
      for (size_t k = 0; k < ir.layers.size(); ++k) EXPECT_EQ(ir.layers[k].index, static_cast<int>(k));
      EXPECT_EQ(gelu.preds, std::vector<int>{layers[0]->index});
      EXPECT_EQ(layers[2]->preds, std::vector<int>{gelu.index});
      EXPECT_GT(gelu.index, layers[0]->index);
      EXPECT_EQ(ir.total_flops(), 5 * n + 2 * n);
      ASSERT_EQ(ir.notes.size(), 1u);
      EXPECT_EQ(ir.notes[0].rfind("1 GELU chain(s)", 0), 0u) << ir.notes[0];
    }
  }
}

TEST(GeluCollapse, NearMissesStayFiveLayers) {
  const std::string pytorch = kChains[0];
  struct Case {
    const char* why;
    std::string text;
  };
  const Case cases[] = {
      {"Erf's output read twice", gelu_model(pytorch + "  e2 = Relu (u)\n", "y, e2")},
      {"the scaled value read twice", gelu_model(pytorch + "  t2 = Relu (t)\n", "y, t2")},
      {"x·v is a graph output", gelu_model(pytorch, "y, w")},
      {"divided by 1.5, not √2", gelu_model(pytorch, "y", "1.5")},
      {"Erf + 2, not + 1",
       gelu_model("  two = Constant <value = float {2.0}> ()\n  t = Div (r, c)\n  u = Erf (t)\n"
                  "  v = Add (u, two)\n  w = Mul (r, v)\n  g = Mul (w, half)\n")},
      {"multiplied by another value than x",
       gelu_model("  t = Div (r, c)\n  u = Erf (t)\n  v = Add (u, one)\n  w = Mul (x, v)\n"
                  "  g = Mul (w, half)\n")},
      {"x broadcast against a constant vector",
       gelu_model("  c4 = Constant <value = float[8] {1.4142135, 1.4142135, 1.4142135, 1.4142135, "
                  "1.4142135, 1.4142135, 1.4142135, 1.4142135}> ()\n  t = Div (r, c4)\n  u = Erf (t)\n"
                  "  v = Add (u, one)\n  w = Mul (r, v)\n  g = Mul (w, half)\n")},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    auto m = process_ok(c.text);
    ASSERT_EQ(m.size(), 1u);
    std::map<std::string, int> ops;
    for (const Layer* l : compute_layers(m[0])) ++ops[l->op_type];
    EXPECT_EQ(ops.count("Gelu"), 0u);
    EXPECT_EQ(ops["Erf"], 1);
    EXPECT_EQ(ops["Mul"] + ops["Div"], 3);
    EXPECT_TRUE(m[0].notes.empty());
  }
}

// The tanh approximation as PyTorch 1.13 writes gelu(approximate='tanh') (GPT-2's MLP): x³ as
// Mul(x, Mul(x, x)) or Pow(x, 3), then √(2/π)·(x + 0.044715·x³), Tanh, +1, ·x, ·½.
std::string tanh_gelu_model(const std::string& cube, const std::string& cubic = "0.044715") {
  return model_text(
      fmt::format("g (float[N,4,8] x) => (y) {{\n"
                  "  k = Constant <value = float {{{}}}> ()\n"
                  "  s = Constant <value = float {{0.7978846}}> ()\n"
                  "  one = Constant <value = float {{1.0}}> ()\n"
                  "  half = Constant <value = float {{0.5}}> ()\n"
                  "  three = Constant <value = float {{3.0}}> ()\n"
                  "  r = Relu (x)\n"
                  "{}"
                  "  m2 = Mul (k, x3)\n  a3 = Add (r, m2)\n  m3 = Mul (s, a3)\n  t = Tanh (m3)\n"
                  "  a4 = Add (one, t)\n  m4 = Mul (r, a4)\n  g = Mul (half, m4)\n"
                  "  y = Relu (g)\n}}",
                  cubic, cube));
}

TEST(GeluCollapse, TheTanhApproximationIsOneGeluLayer) {
  for (const char* cube : {"  m0 = Mul (r, r)\n  x3 = Mul (r, m0)\n", "  x3 = Pow (r, three)\n"}) {
    SCOPED_TRACE(cube);
    auto m = process_ok(tanh_gelu_model(cube), {2});
    ASSERT_EQ(m.size(), 1u);
    const auto layers = compute_layers(m[0]);
    ASSERT_EQ(layers.size(), 3u);  // Relu, Gelu, Relu
    const Layer& gelu = *layers[1];
    EXPECT_EQ(gelu.key, "Gelu|x=2x4x8|approximate=tanh|f32");
    EXPECT_EQ(gelu.flops, 9 * 2 * 4 * 8);
    EXPECT_EQ(gelu.name.rfind("Tanh_", 0), 0u) << gelu.name;  // after its Tanh, as the erf form after its Erf
    ASSERT_EQ(gelu.preds.size(), 1u);
    EXPECT_EQ(m[0].layers[static_cast<size_t>(gelu.preds[0])].op_type, "Relu");
    EXPECT_EQ(layers[2]->preds, std::vector<int>{gelu.index});
  }
  // Another cubic coefficient is another function: the chain stays.
  auto m = process_ok(tanh_gelu_model("  m0 = Mul (r, r)\n  x3 = Mul (r, m0)\n", "0.05"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(compute_layers(m[0]).size(), 11u);
}

// The zoo's transformer and ConvNeXt exports (PyTorch 1.13, opset 17) write every GELU as the
// five-node chain: each becomes one Gelu layer and no Erf is left.
TEST(GeluCollapse, ZooTransformersHaveGeluLayers) {
  const std::map<std::string, int> want = {
      {"convnext_tiny", 18}, {"bert_base_encoder", 12}, {"vit_b_16", 12}, {"swin_t", 12}, {"maxvit_t", 45}};
  for (const auto& [name, count] : want) {
    SCOPED_TRACE(name);
    auto r = process_model(fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo" / (name + ".onnx"), {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    const ModelIR& m = r->at(0);
    std::map<LayerKind, int> kinds;
    for (const auto& l : m.layers)
      if (l.cost_bearing()) ++kinds[l.config.kind];
    EXPECT_EQ(kinds[LayerKind::kGelu], count);
    EXPECT_EQ(kinds[LayerKind::kErf], 0);
    // swin_t's attention scores also fold a Transpose into their MatMul (the second note).
    ASSERT_EQ(m.notes.size(), name == "swin_t" ? 2u : 1u);
    EXPECT_EQ(m.notes[0].rfind(fmt::format("{} GELU chain(s)", count), 0), 0u) << m.notes[0];
    for (size_t k = 0; k < m.layers.size(); ++k) {
      EXPECT_EQ(m.layers[k].index, static_cast<int>(k));
      for (int p : m.layers[k].preds) EXPECT_LT(p, static_cast<int>(k)) << m.layers[k].name;
    }
  }
}

}  // namespace
}  // namespace floorline::mp::test
