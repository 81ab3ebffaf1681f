// Each bound function of bounds.hpp alone, on hand-made graphs whose layer times are set by hand
// (no database): the expected values are computed by hand in the comments.
#include <map>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "floorline/analyzer/advisors.hpp"
#include "floorline/analyzer/bounds.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::analyzer {
namespace {

mp::ModelIR process_graph(const std::string& graph, const std::string& name) {
  auto r = mp::process_model_text("<ir_version: 8, opset_import: [\"\" : 17]>\n" + graph, name, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->front() : mp::ModelIR{};
}

// The layer writing the ONNX value `output`.
const mp::Layer& writer(const mp::ModelIR& m, const std::string& output) {
  for (const auto& l : m.layers)
    for (const auto& o : l.output_names)
      if (o == output) return l;
  throw std::runtime_error("no layer writes " + output);
}

// The cost-bearing layers of `m` with t(v) set by hand, by the value each writes: measured when
// a time is given, untimed ("none") otherwise.
std::vector<LayerCost> costed(const mp::ModelIR& m, const std::map<std::string, double>& us) {
  std::vector<LayerCost> out;
  for (const auto& l : m.layers) {
    if (!l.cost_bearing()) continue;
    LayerCost c;
    c.index = l.index;
    c.name = l.name;
    c.kind = l.op_type;
    c.key = l.key;
    if (auto it = us.find(l.output_names.at(0)); it != us.end()) {
      c.source = CostSource::kMeasured;
      c.us = it->second;
      c.best_case = "best:" + l.output_names.at(0);
    } else {
      c.source = CostSource::kNone;
    }
    out.push_back(c);
  }
  return out;
}

std::vector<int> indices(const mp::ModelIR& m, std::initializer_list<const char*> outputs) {
  std::vector<int> out;
  for (const char* o : outputs) out.push_back(writer(m, o).index);
  return out;
}

CaseTime case_time(double us, const std::string& name) {
  CaseTime t;
  t.us = us;
  t.name = name;
  return t;
}

// x → a = Relu → {b = Sigmoid, c = Tanh} → y = Add
constexpr const char* kBoundsDiamond = R"(
diamond (float[1,2000] x) => (float y) {
  a = Relu (x)
  b = Sigmoid (a)
  c = Tanh (a)
  y = Add (b, c)
})";

TEST(CriticalPath, DiamondTakesTheSlowerBranchAndCountsTheSink) {
  const auto m = process_graph(kBoundsDiamond, "diamond");
  // A sink heavier than everything else: a path that left it out would be 30.
  const auto heavy = critical_path(m, costed(m, {{"a", 10}, {"b", 20}, {"c", 5}, {"y", 100}}));
  EXPECT_DOUBLE_EQ(heavy.us, 130);
  EXPECT_EQ(heavy.layers, indices(m, {"a", "b", "y"}));
  // The faster branch takes over when it becomes the slower one.
  const auto other = critical_path(m, costed(m, {{"a", 10}, {"b", 2}, {"c", 5}, {"y", 7}}));
  EXPECT_DOUBLE_EQ(other.us, 22);
  EXPECT_EQ(other.layers, indices(m, {"a", "c", "y"}));
}

TEST(CriticalPath, ViewLayersAreOnThePathAtNoCostAndBranchesLeaveFromTheirFork) {
  const auto m = process_graph(R"(
parallel (float[1,3000] x) => (float y1, float y2, float y3) {
  y1 = Relu (x)
  b = Sigmoid (x)
  shape = Constant <value = int64[2] {3000, 1}> ()
  r = Reshape (b, shape)
  y2 = Tanh (r)
  y3 = Abs (b)
})",
                               "parallel");
  const auto layers = costed(m, {{"y1", 10}, {"b", 20}, {"y2", 5}, {"y3", 4}});
  const auto path = critical_path(m, layers);
  EXPECT_DOUBLE_EQ(path.us, 25);  // Sigmoid → (Reshape, free) → Tanh
  EXPECT_EQ(path.layers, indices(m, {"b", "r", "y2"}));
  const auto branches = branches_off(m, layers, path.layers);
  ASSERT_EQ(branches.size(), 2u);  // largest first
  EXPECT_EQ(branches[0].fork, -1);
  EXPECT_EQ(branches[0].fork_name, "(graph inputs)");
  EXPECT_DOUBLE_EQ(branches[0].us, 10);
  EXPECT_EQ(branches[1].fork, writer(m, "b").index);
  EXPECT_DOUBLE_EQ(branches[1].us, 4);
  EXPECT_EQ(branches[1].layers, 1);
}

TEST(CriticalPath, EmptyModelHasNoPath) {
  const auto path = critical_path(mp::ModelIR{}, {});
  EXPECT_DOUBLE_EQ(path.us, 0);
  EXPECT_TRUE(path.layers.empty());
}

TEST(SumBounds, SequentialHeuristicAndRoofline) {
  const auto m = process_graph(kBoundsDiamond, "diamond");
  auto layers = costed(m, {{"a", 10}, {"b", 20}, {"c", 5}, {"y", 7}});
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 42);
  layers[0].heuristic_us = 15;  // the library default of Relu is slower; the others did not pass
  EXPECT_DOUBLE_EQ(heuristic_bound(layers), 47);
  EXPECT_FALSE(roofline_bound(layers));  // no roofline time at all
  for (auto& l : layers) l.roofline_us = 2;
  EXPECT_DOUBLE_EQ(roofline_bound(layers).value_or(-1), 8);
  layers[3].roofline_us.reset();  // one layer without: no bound over the others only
  EXPECT_FALSE(roofline_bound(layers));
  EXPECT_FALSE(roofline_bound({}));
}

// c = Conv 3x3 → y1 = Relu; d = Conv 1x1 → y2 = BatchNormalization.
constexpr const char* kBoundsConvs = R"(
convs (float[1,4,8,8] x, float[4,4,3,3] w, float[4,4,1,1] w2, float[4] s, float[4] b, float[4] m, float[4] v)
    => (float y1, float y2) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y1 = Relu (c)
  d = Conv (x, w2)
  y2 = BatchNormalization (d, s, b, m, v)
})";

TEST(FusedBound, ReplacesConvReluByItsFusedCaseAndFoldsBatchNormalization) {
  const auto m = process_graph(kBoundsConvs, "convs");
  const auto layers = costed(m, {{"c", 100}, {"y1", 10}, {"d", 50}, {"y2", 8}});
  CostTable costs;
  costs.best[{writer(m, "c").key, "f32", "fp32", "Relu"}] = case_time(104, "fused");
  const auto f = fused_bound(m, layers, costs, "f32");
  EXPECT_DOUBLE_EQ(f.us, 168 - (110 - 104) - 8);
  ASSERT_EQ(f.fusions.size(), 2u);
  EXPECT_EQ(f.fusions[0].pattern, "Conv+Relu");
  EXPECT_EQ(f.fusions[0].layers, indices(m, {"c", "y1"}));
  EXPECT_DOUBLE_EQ(f.fusions[0].unfused_us, 110);
  EXPECT_DOUBLE_EQ(f.fusions[0].fused_us.value_or(-1), 104);
  EXPECT_EQ(f.fusions[0].fused_case, "fused");
  EXPECT_TRUE(f.fusions[0].applied);
  EXPECT_EQ(f.fusions[1].pattern, "Conv+BatchNormalization(folded)");
  EXPECT_DOUBLE_EQ(f.fusions[1].fused_us.value_or(-1), 50);  // the conv alone
  EXPECT_EQ(f.fusions[1].fused_case, "best:d");
  EXPECT_TRUE(f.fusions[1].applied);
}

TEST(FusedBound, NoFusedCaseASlowerOneOrAnUntimedLayerLeaveS) {
  const auto m = process_graph(kBoundsConvs, "convs");
  CostTable costs;
  costs.best[{writer(m, "c").key, "f32", "fp32", "Relu"}] = case_time(111, "fused");  // slower than 110
  auto layers = costed(m, {{"c", 100}, {"y1", 10}, {"d", 50}});  // BatchNormalization untimed
  const auto f = fused_bound(m, layers, costs, "f32");
  EXPECT_DOUBLE_EQ(f.us, 160);
  ASSERT_EQ(f.fusions.size(), 1u);  // the chain with an untimed layer is not listed
  EXPECT_FALSE(f.fusions[0].applied);
  // A fused case in another dtype is not this dtype's.
  costs.best.clear();
  costs.best[{writer(m, "c").key, "bf16", "bf16", "Relu"}] = case_time(50, "fused bf16");
  EXPECT_DOUBLE_EQ(fused_bound(m, layers, costs, "f32").us, 160);
}

// The activation epilogue (layer_costs): Relu is the sole reader of conv c, so S counts it at what
// c's fused Conv+Relu case adds to c: 104 − 100 = 4 instead of its own 10; the BatchNormalization
// after d is no activation and keeps its time (F folds it). F then finds no saving left in c+y1.
TEST(ActivationEpilogue, SCountsAnActivationAtWhatTheFusedCaseAddsToItsProducer) {
  const auto m = process_graph(kBoundsConvs, "convs");
  CostTable costs;
  auto unfused = [&](const char* out, double us) {
    costs.best[{writer(m, out).key, "f32", "fp32", ""}] = case_time(us, std::string("best:") + out);
  };
  unfused("c", 100);
  unfused("y1", 10);
  unfused("d", 50);
  unfused("y2", 8);
  costs.best[{writer(m, "c").key, "f32", "fp32", "Relu"}] = case_time(104, "fused");
  costs.heuristic[{writer(m, "y1").key, "f32", "fp32", ""}] = case_time(12, "default:y1");
  auto layers = layer_costs(m, costs, "f32");
  ASSERT_EQ(layers.size(), 4u);
  auto at = [&](const char* out) -> const LayerCost& {
    for (const auto& l : layers)
      if (l.index == writer(m, out).index) return l;
    throw std::runtime_error(out);
  };
  EXPECT_DOUBLE_EQ(at("c").us, 100);  // the producer keeps its own case and time
  EXPECT_EQ(at("c").best_case, "best:c");
  EXPECT_DOUBLE_EQ(at("y1").us, 4);
  EXPECT_DOUBLE_EQ(at("y1").own_us, 10);
  EXPECT_EQ(at("y1").epilogue_case, "fused");
  EXPECT_DOUBLE_EQ(at("y1").vendor_us, 4);
  // H's default Relu runs in the epilogue as well: H − S stays algorithm choice.
  EXPECT_DOUBLE_EQ(at("y1").heuristic_us.value_or(-1), 4);
  EXPECT_TRUE(at("y2").epilogue_case.empty());
  EXPECT_DOUBLE_EQ(at("y2").us, 8);
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 162);
  const auto f = fused_bound(m, layers, costs, "f32");
  EXPECT_DOUBLE_EQ(f.us, 162 - 8);  // only the folded BatchNormalization saves
  EXPECT_FALSE(f.fusions[0].applied);

  // A fused case faster than the conv's own best: the conv runs it (as the replay does) and the
  // Relu costs nothing more; the pair costs the fused case, never more than the replay of it.
  costs.best[{writer(m, "c").key, "f32", "fp32", "Relu"}] = case_time(95, "fused");
  layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(at("c").us, 95);
  EXPECT_EQ(at("c").best_case, "fused");
  EXPECT_DOUBLE_EQ(at("c").vendor_us, 95);
  EXPECT_DOUBLE_EQ(at("y1").us, 0);
  EXPECT_DOUBLE_EQ(at("y1").vendor_us, 0);
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 153);
  // A fused case slower than the two layers leaves both.
  costs.best[{writer(m, "c").key, "f32", "fp32", "Relu"}] = case_time(111, "fused");
  layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(at("y1").us, 10);
  EXPECT_TRUE(at("y1").epilogue_case.empty());
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 168);
}

// A Swish is two layers (Sigmoid, Mul): S counts the pair at what the fused Conv+Swish case adds to
// the conv, on the Sigmoid, and the Mul at 0.
TEST(ActivationEpilogue, ASwishCostsWhatItsFusedCaseAddsOverBothItsLayers) {
  const auto m = process_graph(R"(
silu (float[1,4,8,8] x, float[4,4,3,3] w) => (float y) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  s = Sigmoid (c)
  y = Mul (c, s)
}
)",
                               "silu");
  CostTable costs;
  for (auto [out, us] : {std::pair{"c", 100.0}, {"s", 12.0}, {"y", 9.0}})
    costs.best[{writer(m, out).key, "f32", "fp32", ""}] = case_time(us, std::string("best:") + out);
  costs.best[{writer(m, "c").key, "f32", "fp32", "Swish"}] = case_time(106, "fused");
  auto layers = layer_costs(m, costs, "f32");
  auto at = [&](const char* out) -> const LayerCost& {
    for (const auto& l : layers)
      if (l.index == writer(m, out).index) return l;
    throw std::runtime_error(out);
  };
  EXPECT_DOUBLE_EQ(at("c").us, 100);
  EXPECT_DOUBLE_EQ(at("s").us, 6);
  EXPECT_DOUBLE_EQ(at("y").us, 0);
  EXPECT_DOUBLE_EQ(at("s").own_us, 12);
  EXPECT_DOUBLE_EQ(at("y").own_us, 9);
  EXPECT_EQ(at("y").epilogue_case, "fused");
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 106);
  // Slower than the three: each keeps its own time.
  costs.best[{writer(m, "c").key, "f32", "fp32", "Swish"}] = case_time(122, "fused");
  layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 121);
  EXPECT_TRUE(at("y").epilogue_case.empty());
}

// A residual Add and the Relu after it are the conv's epilogue in S (oneDNN's sum post-op, cuDNN's z,
// ONNX Runtime's fused Conv with Sum and Relu): the chain costs its fused case, the Add carries what
// it adds over the conv, the Relu costs 0, and F has nothing left to fuse there.
TEST(Epilogue, AResidualAddAndItsActivationCostTheFusedCase) {
  const auto m = process_graph(R"(
res (float[1,4,8,8] x, float[4,4,3,3] w) => (float y) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  s = Sigmoid (x)
  r = Add (c, s)
  y = Relu (r)
})",
                               "res");
  CostTable costs;
  for (const char* out : {"c", "s", "r", "y"})
    costs.best[{writer(m, out).key, "f32", "fp32", ""}] = case_time(20, std::string("best:") + out);
  costs.best[{writer(m, "c").key, "f32", "fp32", "Add+Relu"}] = case_time(21, "fused");
  const auto layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 80 - (60 - 21));
  auto at = [&](const std::string& out) {
    for (const auto& l : layers)
      if (l.name == writer(m, out).name) return l;
    return LayerCost{};
  };
  EXPECT_DOUBLE_EQ(at("c").us, 20);
  EXPECT_DOUBLE_EQ(at("r").us, 1);
  EXPECT_DOUBLE_EQ(at("y").us, 0);
  EXPECT_EQ(at("r").epilogue_case, "fused");
  EXPECT_EQ(at("y").epilogue_case, "fused");
  EXPECT_DOUBLE_EQ(at("r").own_us, 20);
  EXPECT_DOUBLE_EQ(fused_bound(m, layers, costs, "f32").us, sequential_bound(layers));
}

// Two convolutions feed one residual Add (then a Relu): either can absorb it.
constexpr const char* kTwoConvsOneAdd = R"(
res (float[1,4,8,8] x, float[4,4,3,3] w, float[4,4,1,1] w2) => (float y) {
  c2 = Conv <pads = [1, 1, 1, 1]> (x, w)
  c3 = Conv (x, w2)
  r = Add (c2, c3)
  y = Relu (r)
})";

// Two convolutions feed one Add: S takes the chain of the larger saving, each layer in one chain.
TEST(Epilogue, TwoConvolutionsOfOneAddTakeTheLargerSavingOnce) {
  const auto m = process_graph(kTwoConvsOneAdd, "res");
  CostTable costs;
  const std::map<std::string, double> own = {{"c2", 100}, {"c3", 60}, {"r", 10}, {"y", 5}};
  for (const auto& [out, us] : own) costs.best[{writer(m, out).key, "f32", "fp32", ""}] = case_time(us, out);
  costs.best[{writer(m, "c2").key, "f32", "fp32", "Add+Relu"}] = case_time(101, "c2 fused");  // saves 14
  costs.best[{writer(m, "c3").key, "f32", "fp32", "Add+Relu"}] = case_time(62, "c3 fused");   // saves 13
  const auto layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(sequential_bound(layers), 175 - 14);
  for (const auto& l : layers) {
    if (l.name == writer(m, "r").name || l.name == writer(m, "y").name) {
      EXPECT_EQ(l.epilogue_case, "c2 fused");
    }
  }
}

// The activation traffic follows the replay's memory planner (activation_traffic): a residual Add
// in a convolution's epilogue is summed into its summand's buffer in place, so the convolution
// writes the buffer Sigmoid wrote (3 KiB back: Tanh's 2 KiB and its own output's 1 KiB; with a
// private cache of 1 KiB, 1 − 1 / 3 of it beyond). Each value is 1x4x8x8 floats (1 KiB); the
// weights 576 bytes.
TEST(ActivationTraffic, AResidualEpilogueWritesIntoItsSummandsBuffer) {
  const auto m = process_graph(R"(
res (float[1,4,8,8] x, float[4,4,3,3] w) => (float y) {
  a = Sigmoid (x)
  b = Tanh (x)
  c = Conv <pads = [1, 1, 1, 1]> (b, w)
  r = Add (c, a)
  y = Relu (r)
})",
                               "res");
  CostTable costs;
  for (const char* out : {"a", "b", "c", "r", "y"})
    costs.best[{writer(m, out).key, "f32", "fp32", ""}] = case_time(20, std::string("best:") + out);
  costs.best[{writer(m, "c").key, "f32", "fp32", "Add+Relu"}] = case_time(21, "fused");
  const auto layers = layer_costs(m, costs, "f32");
  const auto fused = activation_traffic(m, layers, 1024);
  const int conv = writer(m, "c").index;
  ASSERT_TRUE(fused.count(conv));
  EXPECT_DOUBLE_EQ(fused.at(conv).output_bytes, 1024);
  EXPECT_DOUBLE_EQ(fused.at(conv).cold_output_bytes, 1024 * (1 - 1.0 / 3));
  EXPECT_DOUBLE_EQ(fused.at(conv).cold_input_bytes, 0);  // Tanh's output, read right after (1 KiB)
  EXPECT_FALSE(fused.count(writer(m, "r").index));       // in the epilogue: touches nothing itself
  // Unfused (the fused case slower than the three), the convolution writes a new buffer, last
  // touched by the Add's read in the pass before: 7 KiB back (the Relu's 2 KiB, Sigmoid's and
  // Tanh's, and its own 1 KiB; 1 − 1 / 7 beyond).
  costs.best[{writer(m, "c").key, "f32", "fp32", "Add+Relu"}] = case_time(90, "fused");
  const auto apart = activation_traffic(m, layer_costs(m, costs, "f32"), 1024);
  EXPECT_DOUBLE_EQ(apart.at(conv).cold_output_bytes, 1024 * (1 - 1.0 / 7));
}

// As the replay runs the layers (layer_costs with in_graph_order): c2 cannot sum into c3's output,
// written after it, so the Add goes to c3, whose summand c2 is written before it; S takes c2's chain
// (the larger saving). E follows the replay: c2 on its own case (100 µs, cold 200), c3's chain on
// its fused case (62 µs, cold 124).
TEST(Epilogue, InGraphOrderAResidualAddGoesToTheHeadWrittenAfterItsSummand) {
  const auto m = process_graph(kTwoConvsOneAdd, "res");
  CostTable costs;
  const std::map<std::string, double> own = {{"c2", 100}, {"c3", 60}, {"r", 10}, {"y", 5}};
  int64_t id = 1;
  for (const auto& [out, us] : own) {
    auto t = case_time(us, out);
    t.case_id = id++;
    costs.best[{writer(m, out).key, "f32", "fp32", ""}] = t;
  }
  auto fused = [&](const char* head, double us, int64_t case_id) {
    auto t = case_time(us, std::string(head) + " fused");
    t.case_id = case_id;
    costs.best[{writer(m, head).key, "f32", "fp32", "Add+Relu"}] = t;
  };
  fused("c2", 101, 10);  // saves 14
  fused("c3", 62, 11);   // saves 13
  auto chain_of = [&](const std::vector<LayerCost>& layers) {
    for (const auto& l : layers)
      if (l.name == writer(m, "r").name) return l.epilogue_case;
    return std::string("?");
  };
  EXPECT_EQ(chain_of(layer_costs(m, costs, "f32")), "c2 fused");
  const auto as_run = layer_costs(m, costs, "f32", /*in_graph_order=*/true);
  EXPECT_EQ(chain_of(as_run), "c3 fused");
  EXPECT_DOUBLE_EQ(sequential_bound(as_run), 100 + 62);

  // E on those layers: every case twice as long from memory and from the last-level cache.
  for (int64_t c : {1, 2, 3, 4, 10, 11}) {
    double us = 0;
    for (const auto& [key, t] : costs.best)
      if (t.case_id == c) us = t.us;
    costs.cache_times[{0, c}] = {{"llc", 2 * us}, {"memory", 2 * us}};
  }
  ModelBounds b;
  b.dtype = "f32";
  b.layers = layer_costs(m, costs, "f32");
  EXPECT_DOUBLE_EQ(sequential_bound(b.layers), 175 - 14);  // S: c2's chain
  estimate_E(b, m, costs);
  ASSERT_TRUE(b.E.has_value());
  EXPECT_DOUBLE_EQ(*b.E, 200 + 124);
  auto at = [&](const char* out) -> const LayerCost& {
    for (const auto& l : b.layers)
      if (l.name == writer(m, out).name) return l;
    throw std::runtime_error(out);
  };
  EXPECT_EQ(at("r").epilogue_case, "c2 fused");  // S's layers stay S's
  EXPECT_DOUBLE_EQ(*at("c2").e_us, 200);
}

TEST(FusedBound, LargestSavingFirstAndEachLayerFusedOnce) {
  // Both convs can absorb the same Add+Relu.
  const auto m = process_graph(kTwoConvsOneAdd, "res");
  const auto layers = costed(m, {{"c2", 100}, {"c3", 60}, {"r", 10}, {"y", 5}});
  CostTable costs;
  costs.best[{writer(m, "c2").key, "f32", "fp32", "Add+Relu"}] = case_time(101, "c2 fused");  // saves 14
  costs.best[{writer(m, "c3").key, "f32", "fp32", "Add+Relu"}] = case_time(62, "c3 fused");   // saves 13
  const auto f = fused_bound(m, layers, costs, "f32");
  EXPECT_DOUBLE_EQ(f.us, 175 - 14);
  ASSERT_EQ(f.fusions.size(), 2u);
  EXPECT_TRUE(f.fusions[0].applied);
  EXPECT_FALSE(f.fusions[1].applied);
}

TEST(ReducedPrecision, TakesTheModesTimeWhereMeasuredAndKeepsTheRest) {
  const auto m = process_graph(kBoundsDiamond, "diamond");
  const auto layers = costed(m, {{"a", 10}, {"b", 20}, {"c", 5}, {"y", 7}});
  CostTable costs;
  costs.modes = {{"f32", "fp32"}, {"bf16", "bf16"}};
  costs.best[{writer(m, "b").key, "bf16", "bf16", ""}] = case_time(12, "b bf16");
  costs.best[{writer(m, "b").key, "bf16", "bf16", "Relu"}] = case_time(1, "fused: not S_bf16's");
  const auto r = reduced_precision_bounds(layers, costs, "f32");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].dtype, "bf16");
  EXPECT_DOUBLE_EQ(r[0].us, 10 + 12 + 5 + 7);
  EXPECT_EQ(r[0].layers_reduced, 1);
  EXPECT_EQ(r[0].layers_kept, 3);
  EXPECT_DOUBLE_EQ(r[0].by_kind.at("Sigmoid").first, 20);
  EXPECT_DOUBLE_EQ(r[0].by_kind.at("Sigmoid").second, 12);
  EXPECT_DOUBLE_EQ(r[0].by_kind.at("Relu").second, 10);
}

benchdb::FrameworkLatencyRow latency(const std::string& runtime, double us, int64_t threads,
                                     const std::string& settings = "eager",
                                     const std::string& model = "diamond") {
  benchdb::FrameworkLatencyRow r;
  r.model_name = model;
  r.runtime = runtime;
  r.device = "cpu";
  r.settings = settings;
  r.threads = threads;
  r.median_us = us;
  return r;
}

TEST(Measured, FastestComparableRuntimeOfThisModelAndNeverTheReplay) {
  CostTable costs;
  costs.system_id = 3;
  costs.device_kind = "cpu";
  costs.threads = 1;
  costs.framework = {latency("onnxruntime", 90, 1), latency("pytorch", 84, 0),  // 0: thread count unknown
                     latency("pytorch", 50, 2),                                 // another thread count
                     latency("onnxruntime", 10, 1, "eager", "other")};          // another model
  benchdb::ReplayRow faster;  // Floorline's own replay, faster than every runtime: never M
  faster.system_id = 3;
  faster.model_name = "diamond";
  faster.median_us = 45;
  costs.replays[{"diamond", 1, "f32"}] = faster;
  const auto m = measured_latency(costs, "diamond", 1, "f32");
  EXPECT_DOUBLE_EQ(m.us.value_or(-1), 84);
  ASSERT_EQ(m.framework.size(), 2u);
  EXPECT_EQ(m.framework[0].runtime, "onnxruntime");
  EXPECT_EQ(m.framework[1].runtime, "pytorch");
  EXPECT_FALSE(measured_latency(costs, "diamond", 8, "f32").us);  // another batch
  costs.device_kind = "gpu";                                      // thread counts do not matter on a GPU
  EXPECT_DOUBLE_EQ(measured_latency(costs, "diamond", 1, "f32").us.value_or(-1), 50);
}

TEST(Replay, ThisSystemsRowWithItsConversions) {
  CostTable costs;  // load_costs keeps only this system's replays
  costs.system_id = 3;
  benchdb::ReplayRow row;
  row.system_id = 3;
  row.model_name = "diamond";
  row.median_us = 45.5;
  row.makeup = R"({"layers":4,"conversions":2,"conversions_us":1.5,"buffers":3,"buffers_reused":1})";
  costs.replays[{"diamond", 1, "f32"}] = row;
  costs.framework = {latency("onnxruntime", 30, 1)};  // a runtime's row is never the replay
  const auto r = replay_of(costs, "diamond", 1, "f32");
  EXPECT_DOUBLE_EQ(r.us.value_or(-1), 45.5);
  EXPECT_DOUBLE_EQ(r.conversions_us.value_or(-1), 1.5);
  EXPECT_EQ(r.conversions, 2);
  EXPECT_EQ(r.note, "4 layers, 2 layout conversions (1.5 µs), 1 of 4 output buffers reused");
  EXPECT_FALSE(replay_of(costs, "other", 1, "f32").us);
  EXPECT_FALSE(replay_of(costs, "diamond", 8, "f32").us);
  EXPECT_FALSE(r.paired_us);  // a replay without the paired measure (before it, or --quick)
}

// The paired measure (generator ReplayResult::paired_us) is read from the make-up; 0 is none.
TEST(Replay, ThePairedTimeIsReadFromTheMakeUp) {
  CostTable costs;
  costs.system_id = 3;
  benchdb::ReplayRow row;
  row.system_id = 3;
  row.model_name = "diamond";
  row.median_us = 45.5;
  row.min_us = 44.0;
  row.makeup = R"({"layers":4,"conversions":0,"conversions_us":0,"paired_ratio":1.25,"steps_alone_us":30,)"
               R"("paired_us":37.5})";
  costs.replays[{"diamond", 1, "f32"}] = row;
  auto r = replay_of(costs, "diamond", 1, "f32");
  EXPECT_DOUBLE_EQ(r.us.value_or(-1), 44.0);
  EXPECT_DOUBLE_EQ(r.paired_us.value_or(-1), 37.5);
  costs.replays[{"diamond", 1, "f32"}].makeup =
      R"({"layers":4,"conversions":0,"conversions_us":0,"paired_us":0})";
  EXPECT_FALSE(replay_of(costs, "diamond", 1, "f32").paired_us);
}

TEST(LayerCosts, MeasuredThenRooflineThenNoneAndPredsThroughViews) {
  const auto m = process_graph(R"(
chain (float[1,1000] x) => (float y) {
  a = Relu (x)
  shape = Constant <value = int64[2] {1000, 1}> ()
  r = Reshape (a, shape)
  b = Sigmoid (r)
  y = Tanh (b)
})",
                               "chain");
  CostTable costs;
  costs.best[{writer(m, "a").key, "f32", "fp32", ""}] = case_time(10, "relu best");
  costs.heuristic[{writer(m, "a").key, "f32", "fp32", ""}] = case_time(15, "relu default");
  auto layers = layer_costs(m, costs, "f32");
  ASSERT_EQ(layers.size(), 3u);  // the Reshape is a view layer
  EXPECT_EQ(layers[0].source, CostSource::kMeasured);
  EXPECT_DOUBLE_EQ(layers[0].us, 10);
  EXPECT_EQ(layers[0].best_case, "relu best");
  EXPECT_DOUBLE_EQ(layers[0].heuristic_us.value_or(-1), 15);
  EXPECT_EQ(layers[1].source, CostSource::kNone);  // no case, no peaks: no time, never 0 silently
  EXPECT_FALSE(layers[1].roofline_us);
  EXPECT_EQ(layers[1].preds, std::vector<int>{writer(m, "a").index});  // through the Reshape
  // With peaks of 1 GFLOP/s and 1 GB/s, 1000 f32 in and out (8000 bytes) take 8 µs.
  costs.peaks = {{{"flops", "f32"}, 1e9}, {{"bytes", "f32"}, 1e9}};
  layers = layer_costs(m, costs, "f32");
  EXPECT_EQ(layers[1].source, CostSource::kRoofline);
  EXPECT_DOUBLE_EQ(layers[1].us, 8);
  EXPECT_DOUBLE_EQ(roofline_time(writer(m, "y"), costs, "f32").value_or(-1), 8);
  EXPECT_FALSE(roofline_time(writer(m, "y"), costs, "bf16"));  // no bf16 peaks
}

// S_vendor: S over the vendor libraries' cases only. x → a = Relu → b = Softmax → y = Tanh, 1000
// f32 each; peaks 1 GFLOP/s and 1 GB/s (a layer's roofline time: 8000 bytes, 8 µs).
//   a  oneDNN 10 µs (its best)                                  S 10, S_vendor 10
//   b  ours (floorline softmax) 4 µs, oneDNN's softmax 7 µs     S 4,  S_vendor 7
//   y  ours only (floorline) 3 µs                               S 3,  S_vendor 8 (roofline, flagged)
// S = 17, S_vendor = 25, one layer costed by roofline in S_vendor.
TEST(SumBounds, VendorBoundLeavesOurKernelsOut) {
  const auto m = process_graph(R"(
g (float[1,1000] x) => (float y) {
  a = Relu (x)
  b = Softmax <axis = -1> (a)
  y = Tanh (b)
})",
                               "g");
  auto timed = [](double us, const std::string& backend, const std::string& algorithm,
                  const std::string& key) {
    CaseTime t;
    t.us = us;
    t.id = CaseId{backend, algorithm, "f32", "fp32", "", "", key};
    t.name = case_name(t.id);
    return t;
  };
  const std::string a = writer(m, "a").key, b = writer(m, "b").key, y = writer(m, "y").key;
  CostTable costs;
  costs.peaks = {{{"flops", "f32"}, 1e9}, {{"bytes", "f32"}, 1e9}};
  costs.best[{a, "f32", "fp32", ""}] = timed(10, "onednn", "eltwise:jit:avx2", a);
  costs.best_vendor[{a, "f32", "fp32", ""}] = timed(10, "onednn", "eltwise:jit:avx2", a);
  costs.best[{b, "f32", "fp32", ""}] = timed(4, "floorline", "softmax", b);
  costs.best_vendor[{b, "f32", "fp32", ""}] = timed(7, "onednn", "softmax_v2:jit:avx2", b);
  costs.best[{y, "f32", "fp32", ""}] = timed(3, "floorline", "tanh", y);
  const ModelBounds bounds = analyze_model(m, costs);
  ASSERT_EQ(bounds.layers.size(), 3u);
  EXPECT_DOUBLE_EQ(bounds.S, 17);
  EXPECT_DOUBLE_EQ(bounds.S_vendor, 25);
  EXPECT_EQ(bounds.vendor_roofline_layers, 1);
  EXPECT_EQ(bounds.vendor_untimed_layers, 0);
  EXPECT_EQ(bounds.layers[1].source, CostSource::kMeasured);  // S takes ours
  EXPECT_DOUBLE_EQ(bounds.layers[1].us, 4);
  EXPECT_EQ(bounds.layers[1].vendor_source, CostSource::kMeasured);  // S_vendor oneDNN's
  EXPECT_DOUBLE_EQ(bounds.layers[1].vendor_us, 7);
  EXPECT_EQ(bounds.layers[2].vendor_source, CostSource::kRoofline);
  EXPECT_DOUBLE_EQ(bounds.layers[2].vendor_us, 8);
  EXPECT_DOUBLE_EQ(vendor_sequential_bound(bounds.layers), 25);
  // Without peaks the layer only our kernel ran has no vendor time: S_vendor is incomplete, S is not.
  costs.peaks.clear();
  const ModelBounds no_peaks = analyze_model(m, costs);
  EXPECT_DOUBLE_EQ(no_peaks.S, 17);
  EXPECT_EQ(no_peaks.layers[2].vendor_source, CostSource::kNone);
  EXPECT_EQ(no_peaks.vendor_untimed_layers, 1);
  EXPECT_DOUBLE_EQ(no_peaks.S_vendor, 17);  // 10 + 7: the untimed layer adds nothing, and is counted
}

// --- quantization, on the zoo's ResNet-18 and its QDQ export: a QDQ model's quantized layers are
// costed by their int8 cases (whatever the base dtype), and a float model with int8 cases of its
// convolutions gets S_int8 and the advisor line "int8 would save".
namespace quantized {

mp::ModelIR zoo_model(const std::string& name) {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->front() : mp::ModelIR{};
}

TEST(Int8, QdqLayersTakeTheirInt8CaseAndFloatModelsGetSInt8) {
  const mp::ModelIR qdq = zoo_model("resnet18_qdq"), f32 = zoo_model("resnet18");
  CostTable costs;
  costs.modes = {{"f32", "fp32"}, {"int8", "int8"}};
  for (const auto* m : {&qdq, &f32})
    for (const auto& l : m->layers) {
      if (!l.cost_bearing()) continue;
      costs.best[{l.key, "f32", "fp32", ""}] = case_time(10, "f32: never a quantized layer's");
      if (l.config.kind == mp::LayerKind::kConv)
        costs.best[{l.key, "int8", "int8", ""}] = case_time(4, "int8");
    }
  // resnet18_qdq: 33 cost-bearing layers, the 20 int8 convolutions at 4 µs; the other 13 (int8
  // Add, pools, Gemm, the input's QuantizeLinear, the logits' DequantizeLinear) have no int8 case
  // here and no peaks: untimed, never their float key's 10 µs.
  const auto q = layer_costs(qdq, costs, "f32");
  ASSERT_EQ(q.size(), 33u);
  EXPECT_DOUBLE_EQ(sequential_bound(q), 20 * 4);
  for (const auto& c : q)
    EXPECT_EQ(c.source, c.kind == "Conv" ? CostSource::kMeasured : CostSource::kNone) << c.key;

  // resnet18 (f32): 48 layers at 10 µs, of which 20 Conv have an int8 case at 4 µs.
  const auto f = layer_costs(f32, costs, "f32");
  ASSERT_EQ(f.size(), 48u);
  EXPECT_DOUBLE_EQ(sequential_bound(f), 480);
  const auto r = reduced_precision_bounds(f, costs, "f32");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].dtype, "int8");
  EXPECT_EQ(r[0].layers_reduced, 20);
  EXPECT_DOUBLE_EQ(r[0].us, 480 - 20 * 6);
  ModelBounds b;
  b.S = sequential_bound(f);
  b.reduced = r;
  bool said = false;
  for (const auto& finding : advise(b))
    if (finding.advisor == "precision") {
      said = true;
      EXPECT_NE(finding.summary.find("int8 would save 120.0 µs (S 480.0 → S_int8 360.0 µs)"),
                std::string::npos)
          << finding.summary;
    }
  EXPECT_TRUE(said);
}

}  // namespace quantized

}  // namespace
}  // namespace floorline::analyzer
