// ONNX Runtime profiles mapped to the model's layers (runtime_profile.hpp), on real profiles of zoo
// models committed in tests/fixtures/ort (ONNX Runtime 1.30.0, CPU, graph optimizations on):
// resnet18 (NCHWc convolutions with fused activations and residual sums, reorders),
// bert_base_encoder (FusedMatMul, BiasGelu, LayerNormalization fusions), efficientnet_b0 (QuickGelu),
// maxvit_t (Gelu between reorders) and densenet121 (Concat and BatchNormalization in NCHWc).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/model_processor/runtime_profile.hpp"

namespace floorline::mp {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = FLOORLINE_SOURCE_DIR;
const fs::path kFixtures = kSource / "tests/fixtures/ort";

RuntimeProfile read(const std::string& model, bool with_graph = true) {
  std::optional<fs::path> graph;
  if (with_graph) graph = kFixtures / (model + "_b1_all.optimized.onnx");
  auto r = read_onnxruntime_profile(kFixtures / (model + "_b1_all.profile.json"),
                                    kSource / "models/zoo" / (model + ".onnx"), graph);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : RuntimeProfile{};
}

// The layers a node computes, less the Identity nodes that only pass a weight on (folded with it).
std::vector<std::string> computed(const RuntimeNodeTime& n) {
  std::vector<std::string> out;
  for (const auto& l : n.layers)
    if (l.rfind("Identity_", 0) != 0) out.push_back(l);
  return out;
}

const RuntimeNodeTime& node(const RuntimeProfile& p, const std::string& name) {
  for (const auto& n : p.nodes)
    if (n.node == name) return n;
  throw std::runtime_error("no runtime node " + name);
}

std::map<std::string, int> model_ops(const std::string& model) {
  std::ifstream in(kSource / "models/zoo" / (model + ".onnx"), std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in));
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ops[n.name()] = 0;
  return ops;
}

// Every model node is computed by at most one runtime node.
void expect_partition(const RuntimeProfile& p, const std::string& model) {
  auto seen = model_ops(model);
  for (const auto& n : p.nodes)
    for (const auto& l : n.layers) {
      ASSERT_TRUE(seen.count(l)) << l << " is not a node of " << model;
      EXPECT_EQ(++seen[l], 1) << l << " computed twice";
    }
  for (const auto& l : p.not_run) EXPECT_EQ(seen.at(l), 0) << l;
  size_t computed = 0;
  for (const auto& [name, n] : seen) computed += n;
  EXPECT_EQ(computed + p.not_run.size(), seen.size());
}

TEST(RuntimeProfile, Resnet18NchwcConvolutionsComputeTheirActivationsAndResidualSums) {
  const auto p = read("resnet18");
  ASSERT_EQ(p.nodes.size(), 25u);  // 20 convs, max pool, global pool, reorder, flatten, gemm
  EXPECT_EQ(p.runs, 2);            // three runs profiled, the first left out
  EXPECT_GT(p.run_median_us, 0);
  expect_partition(p, "resnet18");

  // conv1 + relu, named after the relu's output.
  const auto& first = node(p, "/relu/Relu_output_0_nchwc");
  EXPECT_EQ(first.op, "Conv");
  EXPECT_EQ(first.provider, "CPUExecutionProvider");
  EXPECT_EQ(computed(first), (std::vector<std::string>{"/conv1/Conv", "/relu/Relu"}));
  EXPECT_EQ(first.runs, 2);
  EXPECT_GT(first.median_us, 0);
  EXPECT_GE(first.median_us, first.min_us);
  // The second conv of a block also computes the residual Add and the Relu after it.
  EXPECT_EQ(computed(node(p, "/layer1/layer1.0/conv2/Conv_output_0_nchwc")),
            (std::vector<std::string>{"/layer1/layer1.0/conv2/Conv", "/layer1/layer1.0/Add",
                                      "/layer1/layer1.0/relu_1/Relu"}));
  // ... so that the next block's first conv computes only itself and its Relu.
  EXPECT_EQ(computed(node(p, "/layer1/layer1.1/relu/Relu_output_0_nchwc")),
            (std::vector<std::string>{"/layer1/layer1.1/conv1/Conv", "/layer1/layer1.1/relu/Relu"}));
  // A downsampling conv alone; the reorder back to NCHW is runtime-only work.
  EXPECT_EQ(computed(node(p, "/layer2/layer2.0/downsample/downsample.0/Conv_output_0_nchwc")),
            (std::vector<std::string>{"/layer2/layer2.0/downsample/downsample.0/Conv"}));
  EXPECT_TRUE(node(p, "ReorderOutput").layers.empty());
  EXPECT_EQ(node(p, "/fc/Gemm").layers, (std::vector<std::string>{"/fc/Gemm"}));
  // Every model node is computed: resnet18 has no node the runtime folds away.
  EXPECT_TRUE(p.not_run.empty()) << p.not_run.front();
}

TEST(RuntimeProfile, BertFusionsComputeTheChainsTheyReplace) {
  const auto p = read("bert_base_encoder");
  EXPECT_EQ(p.runs, 1);
  expect_partition(p, "bert_base_encoder");
  // Q·Kᵀ with the transposes and the 1/sqrt(d) scale folded into one FusedMatMul.
  const auto& qk = node(
      p, "/layers.0/self_attn/MatMul_1/MatmulTransposeFusion//MatMulScaleFusion//MatmulTransposeFusion/");
  EXPECT_EQ(qk.op, "FusedMatMul");
  EXPECT_TRUE(std::count(qk.layers.begin(), qk.layers.end(), "/layers.0/self_attn/MatMul_1"));
  EXPECT_GE(qk.layers.size(), 2u);
  // Each encoder layer's Gelu (Div, Erf, Add, Mul, Mul) and its bias Add are one BiasGelu.
  int bias_gelus = 0;
  for (const auto& n : p.nodes) {
    if (n.op != "BiasGelu") continue;
    ++bias_gelus;
    EXPECT_GE(n.layers.size(), 5u) << n.node;
    EXPECT_TRUE(std::any_of(n.layers.begin(), n.layers.end(), [](const std::string& l) {
      return l.find("Erf") != std::string::npos;
    })) << n.node;
  }
  EXPECT_EQ(bias_gelus, 12);
  // Shape arithmetic folded into constants at load time does not run.
  EXPECT_FALSE(p.not_run.empty());
}

// efficientnet_b0's SiLUs: ONNX Runtime fuses each Sigmoid and its Mul into a QuickGelu node named
// after the Mul ("<Mul>/QuickGeluFusion/"), inside the NCHWc domain: it writes no value of the model.
// It computes that Sigmoid and Mul; until 2026-12-07 it computed nothing, and the next convolution
// or a reorder took the pair (the reorder's 31 µs read as a SiLU faster than every case we time).
TEST(RuntimeProfile, EfficientnetQuickGeluNodesComputeTheSigmoidAndMulTheyReplace) {
  const auto p = read("efficientnet_b0");
  expect_partition(p, "efficientnet_b0");
  const auto& silu = node(p, "/features/features.0/features.0.2/Mul/QuickGeluFusion/");
  EXPECT_EQ(silu.op, "QuickGelu");
  EXPECT_EQ(computed(silu), (std::vector<std::string>{"/features/features.0/features.0.2/Sigmoid",
                                                      "/features/features.0/features.0.2/Mul"}));
  // The convolution after it computes itself alone.
  EXPECT_EQ(
      computed(node(p, "/features/features.1/features.1.0/block/block.0/block.0.0/Conv_output_0_nchwc")),
      (std::vector<std::string>{"/features/features.1/features.1.0/block/block.0/block.0.0/Conv"}));
  int quick_gelus = 0;
  for (const auto& n : p.nodes) {
    if (n.op == "QuickGelu") {
      ++quick_gelus;
      EXPECT_EQ(computed(n).size(), 2u) << n.node;
    }
    if (n.op == "ReorderOutput" || n.op == "ReorderInput") {
      EXPECT_TRUE(n.layers.empty()) << n.node;
    }
  }
  EXPECT_EQ(quick_gelus, 49);  // every SiLU of the model: 16 blocks' two, the SE blocks', stem and head
}

// maxvit_t's Gelus: ONNX Runtime runs each (Div, Erf, Add, Mul, Mul) as one Gelu node named
// "Gelu_token_N", between a reorder out of the NCHWc domain and one back: it writes no value of the
// model and carries no model node's name. It computes the element-wise chain fed by the value it
// reads (the convolution before it, through the reorder); before, the next convolution took it
// ("Gelu+Conv": 992 µs against 1,830) or a reorder did (a 125 µs ReorderOutput against a 215 µs Gelu).
TEST(RuntimeProfile, MaxvitGeluNodesComputeTheErfChainOfTheValueTheyRead) {
  const auto p = read("maxvit_t");
  expect_partition(p, "maxvit_t");
  const std::string gelu = "/blocks.0/layers.0/layers/MBconv/layers/conv_b/conv_b.2/";
  const auto& g = node(p, "Gelu_token_21");
  EXPECT_EQ(g.op, "Gelu");
  const auto layers = computed(g);
  for (const char* op : {"Div", "Erf", "Add", "Mul", "Mul_1"})
    EXPECT_TRUE(std::count(layers.begin(), layers.end(), gelu + op)) << op;
  EXPECT_EQ(std::count_if(layers.begin(), layers.end(),
                          [&](const std::string& l) { return l.rfind(gelu, 0) != 0; }),
            0);
  // The depthwise convolution before it computes itself alone, and so does the one after the
  // first Gelu of the block.
  EXPECT_EQ(computed(node(p, "/blocks.0/layers.0/layers/MBconv/layers/conv_b/conv_b.0/Conv_output_0_nchwc")),
            (std::vector<std::string>{"/blocks.0/layers.0/layers/MBconv/layers/conv_b/conv_b.0/Conv"}));
  int gelus = 0;
  for (const auto& n : p.nodes)
    if (n.op == "Gelu") {
      ++gelus;
      EXPECT_GE(computed(n).size(), 5u) << n.node;
    }
  EXPECT_EQ(gelus, 23);
}

// densenet121's dense layers in the NCHWc domain: the Concat runs as a node named as the model's
// Concat, and norm1 (with relu1) as an NCHWc convolution named "<norm1's output>_bn_nchwc"; neither
// writes a value of the model. Each computes its own; before, the convolution after them took the
// Concat, norm1, relu1 (and conv1) as one "Concat+BatchNormalization+Relu+Conv+Relu" node.
TEST(RuntimeProfile, DensenetConcatAndBatchNormalizationNodesComputeTheirOwn) {
  const auto p = read("densenet121");
  expect_partition(p, "densenet121");
  const std::string layer = "/features/denseblock1/denselayer1/";
  EXPECT_EQ(computed(node(p, layer + "Concat")), std::vector<std::string>{layer + "Concat"});
  EXPECT_EQ(computed(node(p, layer + "norm1/BatchNormalization_output_0_bn_nchwc")),
            (std::vector<std::string>{layer + "norm1/BatchNormalization", layer + "relu1/Relu"}));
  EXPECT_EQ(computed(node(p, layer + "relu2/Relu_output_0_nchwc")),
            (std::vector<std::string>{layer + "conv1/Conv", layer + "relu2/Relu"}));
}

TEST(RuntimeProfile, WithoutTheOptimizedGraphOnlyNamesThatMatchMap) {
  const auto p = read("bert_base_encoder", false);
  int mapped = 0;
  for (const auto& n : p.nodes) {
    if (n.layers.empty()) continue;
    ++mapped;
    EXPECT_EQ(n.layers, (std::vector<std::string>{n.node}));
  }
  EXPECT_GT(mapped, 600);
  EXPECT_TRUE(node(p, "BiasGelu").layers.empty());
}

// An optimized graph is a file the user names (`db import --framework-profile`): a Gelu fed by a
// cycle of reorders maps in finite time, computing nothing.
TEST(RuntimeProfile, ACycleOfReordersInTheOptimizedGraphEnds) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("cyclic");
  auto node = [&](const std::string& name, const std::string& op, const std::string& in,
                  const std::string& out) {
    auto* n = g->add_node();
    n->set_name(name);
    n->set_op_type(op);
    n->set_domain(op == "Gelu" ? "com.microsoft" : "com.microsoft.nchwc");
    n->add_input(in);
    n->add_output(out);
  };
  node("ReorderOutput_a", "ReorderOutput", "b", "a");
  node("ReorderInput_b", "ReorderInput", "a", "b");
  node("Gelu_token_1", "Gelu", "a", "c");
  const fs::path dir = fs::temp_directory_path() / "floorline_cyclic_reorders";
  fs::create_directories(dir);
  {
    std::ofstream graph(dir / "cyclic.onnx", std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&graph));
    std::ofstream profile(dir / "cyclic.json");
    profile
        << R"([{"cat":"Session","name":"model_run","ts":0,"dur":10},)"
        << R"({"cat":"Node","name":"Gelu_token_1_kernel_time","ts":1,"dur":2,"args":{"op_name":"Gelu"}}])";
  }
  auto r = read_onnxruntime_profile(dir / "cyclic.json", kSource / "models/zoo/resnet18.onnx",
                                    dir / "cyclic.onnx");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->nodes.size(), 1u);
  EXPECT_TRUE(r->nodes[0].layers.empty());
  fs::remove_all(dir);
}

TEST(RuntimeProfile, ErrorsNameTheFile) {
  const fs::path model = kSource / "models/zoo/resnet18.onnx";
  auto missing = read_onnxruntime_profile(kFixtures / "absent.json", model, std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("absent.json"), std::string::npos);
  // A JSON file that is not a profile.
  auto not_profile = read_onnxruntime_profile(kFixtures / "profiles.json", model, std::nullopt);
  ASSERT_FALSE(not_profile.ok());
  EXPECT_NE(not_profile.error().message.find("profiles.json"), std::string::npos);
  // A model that is not ONNX.
  auto bad_model = read_onnxruntime_profile(kFixtures / "resnet18_b1_all.profile.json",
                                            kFixtures / "profiles.json", std::nullopt);
  ASSERT_FALSE(bad_model.ok());
  EXPECT_NE(bad_model.error().message.find("not an ONNX model"), std::string::npos);
  // A device that never ends is refused before it is read, with the file named (not bad_alloc).
  auto endless = read_onnxruntime_profile("/dev/zero", model, std::nullopt);
  ASSERT_FALSE(endless.ok());
  EXPECT_NE(endless.error().message.find("/dev/zero: not a regular file"), std::string::npos);
  auto endless_model =
      read_onnxruntime_profile(kFixtures / "resnet18_b1_all.profile.json", "/dev/zero", std::nullopt);
  ASSERT_FALSE(endless_model.ok());
  EXPECT_NE(endless_model.error().message.find("/dev/zero: not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace floorline::mp
