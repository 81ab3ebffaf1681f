// Every kind the oneDNN backend maps, on a small config, checked against the plain reference
// before anything is timed; statuses of what cannot run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "floorline/generator/plan.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/kernels/onednn.hpp"
#include "floorline/kernels/reference.hpp"
#include "kinds_model.hpp"
#include "test_support.hpp"

namespace floorline::gen {
namespace {

std::vector<mp::ModelIR> kinds_models() {
  auto r = mp::process_model_text(test::kKindsModel, "kinds.onnx", {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

Plan kinds_plan(const std::vector<DType>& dtypes = {DType::kF32}) {
  PlanOptions o;
  o.dtypes = dtypes;
  return make_plan(kinds_models(), {find_backend("onednn")}, o);
}

// Sets the oneDNN kernels' threads for a scope, and puts the setting back.
class OnednnThreads {
 public:
  explicit OnednnThreads(int threads) : saved_(kernels::onednn_threads()) {
    kernels::set_onednn_threads(threads);
  }
  ~OnednnThreads() { kernels::set_onednn_threads(saved_); }

 private:
  int saved_;
};

bool split_convolution(const PlannedCase& c) {
  return c.spec.variant.algorithm.rfind("convolution_direct_split", 0) == 0;
}

// At two threads, so that the split convolutions (one-thread parts side by side) run too.
TEST(OnednnKernels, EveryPlannedCaseMatchesTheReference) {
  const OnednnThreads two(2);
  const Plan plan = kinds_plan();
  ASSERT_FALSE(plan.cases.empty());
  std::set<std::string> verified_ops, proxies;
  int verified = 0;
  for (const auto& c : plan.cases) {
    if (c.status || !c.spec.feeds.empty()) continue;
    auto k = kernels::make_onednn_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    if (!v.ok() && v.error().code == Disposition::kNotVerifiable) {
      proxies.insert(c.spec.problem.op);
      continue;
    }
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    verified_ops.insert(c.spec.problem.op +
                        (c.spec.variant.fusion.empty() ? "" : "+" + c.spec.variant.fusion));
    ++verified;
  }
  // (TopK, GatherND, RoiAlign, ScatterElements, GridSample run the floorline backend's kernels:
  // detection_kernels_test and sampling_kernels_test verify them.)
  for (const char* op : {"Conv",
                         "ConvTranspose",
                         "Gemm",
                         "MatMul",
                         "BatchNormalization",
                         "LayerNormalization",
                         "InstanceNormalization",
                         "LRN",
                         "Relu",
                         "Sigmoid",
                         "Tanh",
                         "HardSwish",
                         "HardSigmoid",
                         "Clip",
                         "LeakyRelu",
                         "Abs",
                         "Sqrt",
                         "Pow",
                         "Exp",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Softmax",
                         "LogSoftmax",
                         "MaxPool",
                         "AveragePool",
                         "GlobalAveragePool",
                         "ReduceMean",
                         "Concat",
                         "Transpose",
                         "Slice",
                         "Pad",
                         "Resize",
                         "Split",
                         "Sum",
                         "Gelu",
                         "Conv+Relu",
                         "Conv+Add+Relu",
                         "Conv+Clip(-0.5,0.5)",
                         "MatMul+BiasAdd+Relu"})
    EXPECT_TRUE(verified_ops.count(op)) << op << " has no verified case";
  EXPECT_EQ(proxies, (std::set<std::string>{"Erf", "Gather"}));
  EXPECT_GT(verified, 60);
}

// "convolution_direct@channels_last": regnet_y_400mf's grouped convolutions (8 channels a group) and
// efficientnet_b0's depthwise ones held NHWC, at 1 and 2 threads: every planned case matches the
// reference, and its input and output ports say acdb, as XNNPACK's NHWC ports do, so that a replay
// wires them without a conversion. An ungrouped convolution is not offered it.
TEST(OnednnKernels, GroupedConvolutionsHeldChannelsLastMatchTheReference) {
  std::vector<mp::ModelIR> models;
  for (const char* name : {"regnet_y_400mf", "efficientnet_b0"}) {
    auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (auto& m : *r) {
      std::erase_if(m.layers, [](const mp::Layer& l) { return l.op_type != "Conv"; });
      models.push_back(std::move(m));
    }
  }
  PlanOptions o;
  o.fusion = false;
  o.conversions = false;
  const Plan plan = make_plan(models, {find_backend("onednn")}, o);
  int grouped = 0, depthwise = 0;
  std::set<std::string> keys, ungrouped;
  for (const auto& c : plan.cases) {
    const auto& p = c.spec.problem;
    const int64_t group = p.int_attr("group");
    if (group == 1) ungrouped.insert(p.key);
    if (c.spec.variant.algorithm.rfind("convolution_direct@channels_last", 0) != 0) continue;
    EXPECT_GT(group, 1) << c.spec.name;
    if (c.status || c.reference || !keys.insert(p.key).second) continue;  // one implementation per config
    for (const int threads : {1, 2}) {
      const OnednnThreads t(threads);
      auto k = kernels::make_onednn_kernel(c.spec);
      ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
      const Status v = (*k)->verify();
      EXPECT_TRUE(v.ok()) << c.spec.name << " at " << threads << ": " << (v.ok() ? "" : v.error().message);
      const auto in = (*k)->port(false, 0), out = (*k)->port(true, 0);
      ASSERT_TRUE(in && out) << c.spec.name;
      EXPECT_EQ(in->layout, kernels::channels_last_layout(p.inputs[0].shape)) << c.spec.name;
      EXPECT_EQ(out->layout, kernels::channels_last_layout(p.outputs[0].shape)) << c.spec.name;
    }
    (group == p.inputs[0].shape[1] ? depthwise : grouped) += 1;
  }
  EXPECT_GE(grouped, 4);             // regnet_y_400mf's stages
  EXPECT_GE(depthwise, 8);           // efficientnet_b0's
  EXPECT_GE(ungrouped.size(), 10u);  // their 1x1 convolutions, planned without it
}

// "convolution_direct_split": at T threads, T one-thread convolutions side by side, at batch 1 on
// ranges of output channel blocks, at batch N on ranges of images. At one thread it is the plain
// convolution and says so; at 2 and 3 threads every form matches the reference (bias, a fused Relu,
// a fused residual sum, strides, parts of unequal size), its input and output are ports a replay can wire
// (the tensor whole, in the layout the parts share), and what it cannot cut is not planned.
TEST(OnednnKernels, SplitConvolutionCutsChannelsAtBatchOneAndImagesAtBatchN) {
  constexpr const char* kModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,16,14,14] x, float[48,16,3,3] w, float[48] b, float[3,8,9,9] u, float[24,8,3,3] v,
   float[1,16,8,8] z, float[16,2,3,3] gw, float[3,8,9,9] h, float[8,8,3,3] hw, float[8] hb)
    => (float r, float q, float gy, float hr)
{
  y = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  r = Relu (y)
  q = Conv <strides = [2, 2]> (u, v)
  gy = Conv <group = 8, pads = [1, 1, 1, 1]> (z, gw)
  h1 = Relu (h)
  hy = Conv <pads = [1, 1, 1, 1]> (h1, hw, hb)
  hs = Add (hy, h1)
  hr = Relu (hs)
}
)onnx";
  auto m = mp::process_model_text(kModel, "split.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  std::set<std::string> configs;
  {
    const OnednnThreads one(1);
    const Plan plan = make_plan(*m, {find_backend("onednn")}, PlanOptions{});
    for (const auto& c : plan.cases) {
      if (c.status || !split_convolution(c) || !c.spec.feeds.empty()) continue;
      EXPECT_EQ(c.spec.problem.int_attr("group"), 1) << c.spec.name << ": a grouped convolution is not cut";
      configs.insert(c.spec.problem.key + "|" + c.spec.variant.fusion);
      auto k = kernels::make_onednn_kernel(c.spec);
      ASSERT_FALSE(k.ok()) << c.spec.name;
      EXPECT_EQ(k.error().code, Disposition::kUnsupported);
      EXPECT_NE(k.error().message.find("at one thread is the plain convolution"), std::string::npos)
          << k.error().message;
    }
  }
  // The three ungrouped convolutions, the first also with its Relu fused, the last also with its
  // residual sum (prefilled whole, the parts adding into their windows) and Relu.
  EXPECT_EQ(configs.size(), 5u) << ::testing::PrintToString(configs);
  EXPECT_EQ(std::count_if(configs.begin(), configs.end(),
                          [](const std::string& k) { return k.ends_with("|Add+Relu"); }),
            1)
      << ::testing::PrintToString(configs);
  for (const int threads : {2, 3}) {
    const OnednnThreads at(threads);
    const Plan plan = make_plan(*m, {find_backend("onednn")}, PlanOptions{});
    std::set<std::string> verified;
    for (const auto& c : plan.cases) {
      if (c.status || !split_convolution(c) || !c.spec.feeds.empty()) continue;
      auto k = kernels::make_onednn_kernel(c.spec);
      ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
      const Status v = (*k)->verify();
      EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
      const bool images = c.spec.problem.inputs[0].shape[0] > 1;
      const std::string impl = (*k)->implementation();
      // 48 channels: 6 blocks of 8 or 3 of 16 cut in 2 or 3; 3 images in 2 (0-0, 1-2) or 3.
      EXPECT_NE(impl.find(fmt::format(", {} one-thread convolutions side by side on {}", threads,
                                      images ? "images" : "output channels")),
                std::string::npos)
          << impl;
      for (const bool output : {false, true}) {
        const auto port = (*k)->port(output, 0);
        ASSERT_TRUE(port.has_value()) << c.spec.name << (output ? ": output" : ": input");
        const auto& shape = output ? c.spec.problem.outputs[0].shape : c.spec.problem.inputs[0].shape;
        EXPECT_GE(port->bytes, static_cast<int64_t>(sizeof(float)) * kernels::elements(shape)) << c.spec.name;
        // The whole tensor, not a part's window: "plain", or "f32 aBcd8b 1x48x14x14".
        if (port->layout != "plain") {
          EXPECT_NE(port->layout.find(fmt::format(" {}", fmt::join(shape, "x"))), std::string::npos)
              << port->layout;
        }
      }
      if (v.ok()) verified.insert(c.spec.problem.key + "|" + c.spec.variant.fusion);
    }
    EXPECT_EQ(verified, configs) << threads << " threads";
  }
}

// A Conv with the Swish epilogue (x·sigmoid(x), oneDNN's eltwise_swish post-op) matches the
// reference, on every implementation that takes it.
TEST(OnednnKernels, ConvWithTheSwishEpilogueMatchesTheReference) {
  const Plan plan = kinds_plan();
  int verified = 0;
  for (const auto& c : plan.cases) {
    if (c.status || !c.spec.feeds.empty() || c.spec.problem.kind != LayerKind::kConv ||
        !c.spec.variant.fusion.empty())
      continue;
    kernels::CaseSpec spec = c.spec;
    spec.problem.post_ops = {{"Swish"}};
    spec.variant.fusion = "Swish";
    auto k = kernels::make_onednn_kernel(spec);
    if (!k.ok()) continue;  // an implementation that takes no post-op
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << spec.name << ": " << (v.ok() ? "" : v.error().message);
    ++verified;
  }
  EXPECT_GT(verified, 0);
}

// The kinds model's GELU chain is one Gelu layer, timed as oneDNN's gelu_erf and verified against
// the reference; the same case with approximate = "tanh" runs gelu_tanh and verifies against the
// tanh formula.
TEST(OnednnKernels, GeluIsOneEltwiseVerifiedInBothApproximations) {
  const Plan plan = kinds_plan();
  const PlannedCase* gelu = nullptr;
  for (const auto& c : plan.cases)
    if (c.spec.problem.kind == LayerKind::kGelu && !c.status && c.spec.feeds.empty()) gelu = &c;
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->spec.problem.key, "Gelu|x=1x8x10x10|approximate=none|f32");
  EXPECT_EQ(gelu->spec.problem.string_attr("approximate"), "none");
  auto k = kernels::make_onednn_kernel(gelu->spec);
  ASSERT_TRUE(k.ok()) << k.error().message;
  const Status v = (*k)->verify();
  EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.error().message);

  kernels::Problem tanh = gelu->spec.problem;
  tanh.strings["approximate"] = "tanh";
  const std::vector<kernels::HostTensor> in = {{{1, 1, 1, 3}, {-1.0f, 0.5f, 2.0f}}};
  tanh.inputs[0].shape = tanh.outputs[0].shape = {1, 1, 1, 3};
  auto yt = kernels::reference(tanh, in, {});
  auto ye = kernels::reference(gelu->spec.problem, in, {});
  ASSERT_TRUE(yt.ok() && ye.ok());
  // 0.5·x·(1 + erf(x/√2)) and 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), worked out in double.
  const std::vector<double> erf_want = {-0.15865525393145707, 0.34573123063700656, 1.9544997361036416};
  const std::vector<double> tanh_want = {-0.15880800939172324, 0.34571400982514394, 1.954597694087775};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR((*ye)[0].data[i], erf_want[i], 1e-6);
    EXPECT_NEAR((*yt)[0].data[i], tanh_want[i], 1e-6);
  }
  kernels::CaseSpec spec = gelu->spec;
  spec.problem.strings["approximate"] = "tanh";
  auto kt = kernels::make_onednn_kernel(spec);
  ASSERT_TRUE(kt.ok()) << kt.error().message;
  const Status vt = (*kt)->verify();
  EXPECT_TRUE(vt.ok()) << (vt.ok() ? "" : vt.error().message);
}

TEST(OnednnKernels, WhatCannotRunIsUnsupportedNotFailed) {
  const Plan plan = kinds_plan();
  std::map<std::string, std::string> status;  // op or key fragment → status
  auto name = [](const PlannedCase& c) { return std::string(c.status ? disposition_name(*c.status) : ""); };
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op == "Floor") status["Floor"] = name(c);
    if (c.spec.problem.op == "Resize" && c.spec.problem.string_attr("mode", "") == "cubic")
      status["cubic"] = name(c);
    if (c.spec.problem.op == "Sub" && c.spec.problem.inputs[0].shape == std::vector<int64_t>{1, 8, 1, 1})
      status["Sub(bc,x)"] = name(c) + ": " + c.reason;
  }
  EXPECT_EQ(status["Floor"], "unsupported");
  EXPECT_EQ(status["cubic"], "unsupported");
  EXPECT_EQ(status["Sub(bc,x)"].rfind("unsupported: oneDNN binary needs the first operand", 0), 0u)
      << status["Sub(bc,x)"];
}

// The kernel API's readings of a problem's geometry, which every backend builds from.
TEST(ProblemGeometry, ConvDescReadsConvAndConvTranspose) {
  kernels::Problem conv;
  conv.kind = LayerKind::kConv;
  conv.op = "Conv";
  conv.inputs = {{"x", {2, 8, 15, 17}}, {"w", {12, 4, 3, 5}}, {"bias", {12}}};
  conv.outputs = {{"y", {2, 12, 8, 9}}};
  conv.ints = {{"pads", {1, 2, 0, 3}}, {"strides", {2, 2}}, {"dil", {1, 2}}, {"group", {2}}};
  auto d = kernels::conv_desc(conv);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_FALSE(d->transposed);
  EXPECT_EQ(d->n, 2);
  EXPECT_EQ(d->c, 8);
  EXPECT_EQ(d->k, 12);
  EXPECT_EQ(d->group, 2);
  EXPECT_EQ(d->c_per_group(), 4);
  EXPECT_EQ(d->k_per_group(), 6);
  EXPECT_EQ(d->in, (std::vector<int64_t>{15, 17}));
  EXPECT_EQ(d->out, (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(d->kernel, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(d->pads_begin, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d->pads_end, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(d->dilations, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(d->output_padding, (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(d->has_bias);
  EXPECT_FALSE(d->pointwise());
  EXPECT_FALSE(d->symmetric_pads());

  kernels::Problem deconv;  // (C, K/group, k) weights: 3 groups of 2 output channels
  deconv.kind = LayerKind::kConvTranspose;
  deconv.op = "ConvTranspose";
  deconv.inputs = {{"x", {1, 6, 7}}, {"w", {6, 2, 1}}};
  deconv.outputs = {{"y", {1, 6, 8}}};
  deconv.ints = {{"group", {3}}, {"output_padding", {1}}};  // pads, strides, dil: the ONNX defaults
  d = kernels::conv_desc(deconv);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_TRUE(d->transposed);
  EXPECT_EQ(d->k, 6);
  EXPECT_EQ(d->k_per_group(), 2);
  EXPECT_EQ(d->output_padding, (std::vector<int64_t>{1}));
  EXPECT_EQ(d->strides, (std::vector<int64_t>{1}));
  EXPECT_TRUE(d->pointwise());
  EXPECT_FALSE(d->has_bias);

  conv.ints["group"] = {3};  // does not divide the 8 input channels
  EXPECT_FALSE(kernels::conv_desc(conv).ok());
  conv.ints["group"] = {2};
  conv.ints["strides"] = {2};  // one value for two spatial dims
  EXPECT_FALSE(kernels::conv_desc(conv).ok());
  conv.ints["strides"] = {2, 2};
  conv.inputs[0].shape = {2, 8};  // no spatial dim
  EXPECT_FALSE(kernels::conv_desc(conv).ok());
}

// A weight operand's fill is on ±√(3 / fan-in) (variance 1 / fan-in); every other input keeps [-1, 1).
TEST(ProblemGeometry, WeightsAreFilledOnTheirFanInScale) {
  kernels::Problem conv;  // 2 groups of 4 input channels, a 3×5 kernel: fan-in 60
  conv.kind = LayerKind::kConv;
  conv.op = "Conv";
  conv.inputs = {{"x", {2, 8, 15, 17}}, {"w", {12, 4, 3, 5}}, {"bias", {12}}};
  conv.outputs = {{"y", {2, 12, 8, 9}}};
  conv.ints = {{"pads", {1, 2, 0, 3}}, {"strides", {2, 2}}, {"dil", {1, 2}}, {"group", {2}}};
  EXPECT_FLOAT_EQ(kernels::fill_half_width(conv, 1), std::sqrt(3.f / 60.f));
  EXPECT_EQ(kernels::fill_half_width(conv, 0), 1.f);  // the activation
  EXPECT_EQ(kernels::fill_half_width(conv, 2), 1.f);  // the bias

  kernels::Problem deconv;  // 64 input channels, 4×4 taps at stride 2: 4 land on each output, fan-in 256
  deconv.kind = LayerKind::kConvTranspose;
  deconv.op = "ConvTranspose";
  deconv.inputs = {{"x", {1, 64, 8, 8}}, {"w", {64, 32, 4, 4}}};
  deconv.outputs = {{"y", {1, 32, 16, 16}}};
  deconv.ints = {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"group", {1}}};
  EXPECT_FLOAT_EQ(kernels::fill_half_width(deconv, 1), std::sqrt(3.f / 256.f));

  kernels::Problem gemm;  // transB: B is (N, K) = (1000, 512)
  gemm.kind = LayerKind::kGemm;
  gemm.op = "Gemm";
  gemm.inputs = {{"a", {1, 512}}, {"b", {1000, 512}}, {"c", {1000}}};
  gemm.outputs = {{"y", {1, 1000}}};
  gemm.ints = {{"transA", {0}}, {"transB", {1}}};
  gemm.floats = {{"alpha", {1.0}}, {"beta", {1.0}}};
  EXPECT_FLOAT_EQ(kernels::fill_half_width(gemm, 1), std::sqrt(3.f / 512.f));

  kernels::Problem matmul;  // (197, 768) · (768, 3072): K 768
  matmul.kind = LayerKind::kMatMul;
  matmul.op = "MatMul";
  matmul.inputs = {{"a", {1, 197, 768}}, {"b", {768, 3072}}};
  matmul.outputs = {{"y", {1, 197, 3072}}};
  EXPECT_FLOAT_EQ(kernels::fill_half_width(matmul, 1), 1.f / 16.f);

  // A fan-in of 3 or less keeps [-1, 1); kinds without weights keep it for every input.
  conv.inputs = {{"x", {1, 3, 8, 8}}, {"w", {3, 1, 1, 1}}};
  conv.outputs = {{"y", {1, 3, 8, 8}}};
  conv.ints = {{"group", {3}}};
  EXPECT_EQ(kernels::fill_half_width(conv, 1), 1.f);
  kernels::Problem add;
  add.kind = LayerKind::kAdd;
  add.op = "Add";
  add.inputs = {{"a", {4, 4}}, {"b", {4, 4}}};
  add.outputs = {{"y", {4, 4}}};
  EXPECT_EQ(kernels::fill_half_width(add, 1), 1.f);
}

// The operands the cache stage leaves cold (generator/cache_state.hpp): a layer's parameters.
TEST(ProblemGeometry, WeightOperandsAreTheLayersParameters) {
  kernels::Problem p;
  p.kind = LayerKind::kConv;
  p.inputs = {{"x", {1, 8, 4, 4}}, {"w", {8, 8, 3, 3}}, {"bias", {8}}};
  EXPECT_FALSE(kernels::weight_operand(p, 0));
  EXPECT_TRUE(kernels::weight_operand(p, 1));
  EXPECT_TRUE(kernels::weight_operand(p, 2));
  EXPECT_FALSE(kernels::weight_operand(p, 3));  // no such input
  p.kind = LayerKind::kGemm;
  p.inputs = {{"a", {1, 512}}, {"b", {1000, 512}}, {"c", {1000}}};
  EXPECT_FALSE(kernels::weight_operand(p, 0));
  EXPECT_TRUE(kernels::weight_operand(p, 1));
  EXPECT_TRUE(kernels::weight_operand(p, 2));
  p.kind = LayerKind::kMatMul;  // a linear layer's 2-D B; attention's batched B is an activation
  p.inputs = {{"a", {1, 197, 768}}, {"b", {768, 3072}}};
  EXPECT_TRUE(kernels::weight_operand(p, 1));
  p.inputs = {{"a", {12, 197, 64}}, {"b", {12, 64, 197}}};
  EXPECT_FALSE(kernels::weight_operand(p, 1));
  p.kind = LayerKind::kBatchNormalization;
  p.inputs = {{"x", {1, 8, 4, 4}}, {"scale", {8}}, {"b", {8}}, {"input_mean", {8}}, {"input_var", {8}}};
  for (size_t k = 1; k < 5; ++k) EXPECT_TRUE(kernels::weight_operand(p, k)) << k;
  p.kind = LayerKind::kLSTM;
  p.inputs = {
      {"x", {5, 1, 16}}, {"w", {1, 64, 16}}, {"r", {1, 64, 16}}, {"b", {1, 128}}, {"initial_h", {1, 1, 16}}};
  EXPECT_TRUE(kernels::weight_operand(p, 3));
  EXPECT_FALSE(kernels::weight_operand(p, 4));  // a state, not a parameter
  p.kind = LayerKind::kAdd;                     // both operands activations
  p.inputs = {{"x0", {4, 4}}, {"x1", {4, 4}}};
  EXPECT_FALSE(kernels::weight_operand(p, 1));
}

TEST(Reference, MatchesHandComputedValues) {
  // The reference is what every kernel is judged by: check it on values worked out by hand.
  kernels::Problem conv;
  conv.kind = LayerKind::kConv;
  conv.op = "Conv";
  conv.inputs = {{"x", {1, 1, 3, 3}}, {"w", {1, 1, 2, 2}}, {"bias", {1}}};
  conv.outputs = {{"y", {1, 1, 2, 2}}};
  conv.ints = {{"pads", {0, 0, 0, 0}}, {"strides", {1, 1}}, {"dil", {1, 1}}, {"group", {1}}};
  conv.post_ops = {{"Relu"}};
  const std::vector<kernels::HostTensor> in = {
      {{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {{1, 1, 2, 2}, {1, 0, 0, -2}}, {{1}, {0.5f}}};
  auto y = kernels::reference(conv, in, {});
  ASSERT_TRUE(y.ok()) << y.error().message;
  // y[i][j] = x[i][j] − 2·x[i+1][j+1] + 0.5, then Relu: 1−10+.5 < 0 → 0 everywhere.
  EXPECT_EQ((*y)[0].data, (std::vector<float>{0, 0, 0, 0}));
  conv.post_ops.clear();
  y = kernels::reference(conv, in, {});
  EXPECT_EQ((*y)[0].data, (std::vector<float>{-8.5f, -9.5f, -11.5f, -12.5f}));
  // Swish: v·sigmoid(v) = v / (1 + e^-v).
  conv.post_ops = {{"Swish"}};
  y = kernels::reference(conv, in, {});
  ASSERT_TRUE(y.ok()) << y.error().message;
  for (size_t i = 0; i < 4; ++i) {
    const double v = std::vector<double>{-8.5, -9.5, -11.5, -12.5}[i];
    EXPECT_NEAR((*y)[0].data[i], v / (1 + std::exp(-v)), 1e-9) << i;
  }
  conv.post_ops.clear();

  kernels::Problem pool;
  pool.kind = LayerKind::kMaxPool;
  pool.op = "MaxPool";
  pool.inputs = {{"x", {1, 1, 3, 3}}};
  pool.outputs = {{"y", {1, 1, 2, 2}}};  // ceil mode: windows at 0 and 2
  pool.ints = {{"kernel", {2, 2}}, {"pads", {0, 0, 0, 0}}, {"strides", {2, 2}}, {"dil", {1, 1}}};
  auto p = kernels::reference(pool, {in[0]}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].data, (std::vector<float>{5, 6, 8, 9}));

  kernels::Problem sm;
  sm.kind = LayerKind::kSoftmax;
  sm.op = "Softmax";
  sm.inputs = {{"x", {1, 2}}};
  sm.outputs = {{"y", {1, 2}}};
  sm.ints = {{"axis", {1}}};
  auto s = kernels::reference(sm, {{{1, 2}, {0.f, std::log(3.f)}}}, {});
  ASSERT_TRUE(s.ok());
  EXPECT_NEAR((*s)[0].data[0], 0.25f, 1e-6);
  EXPECT_NEAR((*s)[0].data[1], 0.75f, 1e-6);
}

TEST(Reference, ComparisonRejectsWrongOutputs) {
  // verify() is only as good as this check: a close output passes, a wrong one or a NaN does not.
  // Tanh: 16 ulps of |want| plus 16 ulps of the RMS (2.74): 6.4e-6 at the last element.
  kernels::Problem tanh;
  tanh.kind = LayerKind::kTanh;
  tanh.op = "Tanh";
  const kernels::Tolerance tol = kernels::verify_tolerance(tanh);
  const kernels::HostTensor expected{{4}, {1.f, -2.f, 3.f, -4.f}};
  const std::vector<float> close = {1.f, -2.f, 3.f, -4.000002f};
  const std::vector<float> off = {1.f, -2.f, 3.f, -4.00001f};
  const std::vector<float> wrong = {1.f, -2.f, 3.f, 4.f};
  const std::vector<float> nan = {1.f, std::nanf(""), 3.f, -4.f};
  EXPECT_TRUE(kernels::compare_output(close.data(), expected, tol).ok());
  EXPECT_FALSE(kernels::compare_output(off.data(), expected, tol).ok());
  const Status w = kernels::compare_output(wrong.data(), expected, tol);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("element 3 [3]"), std::string::npos) << w.error().message;
  EXPECT_FALSE(kernels::compare_output(nan.data(), expected, tol).ok());
}

// A kernel whose library call fails on the third call.
class FailingKernel final : public kernels::Kernel {
 public:
  void run() override {
    if (++calls_ > 2) throw std::runtime_error("library error on call 3");
  }
  std::string implementation() const override { return "failing"; }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override { return {}; }

 private:
  int calls_ = 0;
};

// A kernel that spins for `wall_us` per call and reports `reported_us` from timed_run: a
// device-timed case (CUDA events leave out the host's enqueue) when it says so.
class SpinningKernel final : public kernels::Kernel {
 public:
  SpinningKernel(double wall_us, double reported_us, bool device = true)
      : wall_us_(wall_us), reported_us_(reported_us), device_(device) {}
  bool device_timed() const override { return device_; }
  void run() override {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() <
           wall_us_) {
    }
  }
  double timed_run() override {
    run();
    return reported_us_ * 1e-6;
  }
  std::string implementation() const override { return "spinning"; }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override { return {}; }

 private:
  double wall_us_, reported_us_;
  bool device_;
};

// The warm-up reads both what a call reports and what it costs the host; a repetition is sized by
// wall time only where the kernel is device-timed.
TEST(BenchmarkBody, DeviceTimedCasesAreSizedByTheirWallTime) {
  SpinningKernel device(200, 20);  // 20 µs on the device, 200 µs of host time per call
  const kernels::WarmUp d = kernels::warm_up_calls(device, 0.005);
  EXPECT_GE(d.calls, 2);
  EXPECT_DOUBLE_EQ(d.lowest, 20e-6);
  EXPECT_GE(d.wall_per_call, 200e-6);
  EXPECT_DOUBLE_EQ(gen::repetition_call_seconds(d.lowest, d.wall_per_call, device.device_timed()),
                   d.wall_per_call);
  // A host-timed kernel (every CPU one) is sized by what it reports, whatever its wall time.
  SpinningKernel host(200, 20, false);
  EXPECT_FALSE(host.device_timed());
  const kernels::WarmUp h = kernels::warm_up_calls(host, 0.005);
  EXPECT_DOUBLE_EQ(gen::repetition_call_seconds(h.lowest, h.wall_per_call, host.device_timed()), 20e-6);
  // One call only (a warm-up shorter than a call): its wall time is the first call's.
  SpinningKernel slow(3000, 300);
  const kernels::WarmUp s1 = kernels::warm_up_calls(slow, 0.001);
  EXPECT_EQ(s1.calls, 1);
  EXPECT_GE(s1.wall_per_call, 3000e-6);
  EXPECT_DOUBLE_EQ(gen::repetition_call_seconds(300e-6, 0, true), 300e-6);
  EXPECT_DOUBLE_EQ(kernels::warm_up(slow, 0.001), 300e-6);
}

class CapturingReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) errors.push_back(r.error_occurred ? r.error_message : "");
  }
  std::vector<std::string> errors;
};

TEST(BenchmarkBody, ALibraryErrorFailsTheCaseNotTheRun) {
  kernels::CaseSpec spec;
  spec.name = "test/failing/f32/fp32/Relu|x=1|f32";
  benchmark::ClearRegisteredBenchmarks();
  kernels::register_case(spec, {}, nullptr, std::make_shared<FailingKernel>())->Iterations(10);
  CapturingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  benchmark::ClearRegisteredBenchmarks();
  ASSERT_EQ(rep.errors.size(), 1u);
  EXPECT_EQ(rep.errors[0], "library error on call 3");
}

TEST(OnednnKernels, Bf16ConvolutionMatchesWithinBf16Tolerance) {
  const Plan plan = kinds_plan({DType::kBF16});
  int checked = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "Conv" || c.status || !c.spec.feeds.empty() || !c.work.is_default) continue;
    auto k = kernels::make_onednn_kernel(c.spec);
    if (!k.ok() && k.error().code == Disposition::kUnsupported) continue;
    ASSERT_TRUE(k.ok()) << k.error().message;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "oneDNN offers no bf16 convolution on this CPU";
}

// --- quantization: the int8 cases oneDNN runs for the zoo's QDQ ResNet-18 (u8 activations with
// and without zero points, per-channel s8 weights, int32 bias, the 7x7 stem, 1x1 projections, the
// Gemm, MaxPool, GlobalAveragePool, the input's QuantizeLinear and the logits' DequantizeLinear)
// and a float convolution of ResNet-18 planned in int8 (--dtype int8): each default case against
// the reference's int8 semantics (the first timed case of each config: MaxPool's default is oneDNN's
// plain-loop one, which is not timed).
TEST(OnednnKernels, Int8CasesOfTheQuantizedResnet18MatchTheReference) {
  const std::string zoo = std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/";
  std::vector<mp::ModelIR> models;
  for (const char* name : {"resnet18_qdq", "resnet18"}) {
    auto r = mp::process_model(zoo + name + ".onnx", {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    models.push_back(std::move(r->front()));
  }
  PlanOptions o;
  o.dtypes = {DType::kF32, DType::kInt8};
  o.max_impls = 1;
  const Plan plan = make_plan(models, {find_backend("onednn")}, o);
  std::map<std::string, int> verified;
  std::set<std::string> proxies;
  int float_conv_in_int8 = 0;
  std::set<std::string> keys;
  for (const auto& c : plan.cases) {
    if (c.spec.variant.dtype != DType::kInt8 || c.status || !c.spec.feeds.empty() ||
        !keys.insert(c.spec.problem.key).second)
      continue;
    const bool qdq = !c.spec.problem.string_attr("qtypes", "").empty() ||
                     c.spec.problem.kind == LayerKind::kQuantizeLinear ||
                     c.spec.problem.kind == LayerKind::kDequantizeLinear;
    if (!qdq && float_conv_in_int8++ > 0) continue;  // one float convolution in int8 is enough
    auto k = kernels::make_onednn_kernel(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    const Status v = (*k)->verify();
    if (!v.ok() && v.error().code == Disposition::kNotVerifiable) {
      proxies.insert(c.spec.problem.op);
      continue;
    }
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    ++verified[c.spec.problem.op + (qdq ? "" : " (f32 model)")];
  }
  EXPECT_EQ(verified, (std::map<std::string, int>{{"Conv", 15},
                                                  {"Conv (f32 model)", 1},
                                                  {"DequantizeLinear", 1},
                                                  {"Gemm", 1},
                                                  {"GlobalAveragePool", 1},
                                                  {"MaxPool", 1},
                                                  {"QuantizeLinear", 1}}));
  EXPECT_EQ(proxies, std::set<std::string>{"Add"});  // oneDNN 2.6's binary takes no zero points
}

TEST(OnednnKernels, ImplementationsAreEnumeratedCompletely) {
  // Every implementation appears once, in next_impl() order, with oneDNN's first choice marked:
  // asking twice gives the same list (the iterator must not depend on earlier primitives).
  const Plan plan = kinds_plan();
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "Relu") continue;
    auto a = kernels::onednn_implementations(c.spec);
    auto k = kernels::make_onednn_kernel(c.spec);  // a primitive of this descriptor now exists
    auto b = kernels::onednn_implementations(c.spec);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    ASSERT_GE(a->size(), 2u);
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].impl_name, (*b)[i].impl_name);
      EXPECT_EQ((*a)[i].impl_index, static_cast<int>(i));
    }
    EXPECT_TRUE(a->front().is_default);
    EXPECT_TRUE(a->back().reference);
    return;
  }
  FAIL() << "no Relu case";
}

// Which implementations oneDNN offers, and in what order, depends on the thread count its
// primitives are created for (AVX-512: densenet121's 3x3 convolutions 128 -> 32 are offered
// jit_fp32_wino_2x3 then jit_wino_4x3 at 2 threads, jit_wino_4x3 first at 1): one plan serves both,
// each case built by its implementation's name, and at each count every planned implementation
// builds as itself or is skipped as not offered there, never by its position in another count's list.
TEST(OnednnKernels, EachPlannedImplementationIsBuiltByNameAtEveryThreadCount) {
  const auto models = test::zoo_model("densenet121");
  ASSERT_FALSE(models.empty());
  PlanOptions o;
  o.dtypes = {DType::kF32};
  o.fusion = false;
  const Plan plan = make_plan(models, {find_backend("onednn")}, o);
  for (const int threads : {1, 2}) {
    const OnednnThreads scope(threads);
    int built = 0, not_offered = 0;
    std::set<std::string> winograd_built;
    for (const auto& c : plan.cases) {
      // The 3x3 convolutions of one or the other dense block: where oneDNN's Winograd lists differ.
      const auto& key = c.spec.problem.key;
      if (c.status || c.spec.problem.op != "Conv" || key.find("w=32x128x3x3") == std::string::npos ||
          split_convolution(c) || c.spec.impl_name.rfind("ref", 0) == 0)
        continue;
      auto k = kernels::make_onednn_kernel(c.spec);
      if (k.ok()) {
        ++built;
        if (c.spec.variant.algorithm.rfind("convolution_winograd", 0) == 0) winograd_built.insert(key);
        continue;
      }
      const std::string& why = k.error().message;
      // A conversion's implementation may hold the tensor in another format here.
      const bool other_format = !c.spec.feeds.empty() && why.find(" holds ") != std::string::npos;
      EXPECT_TRUE(why.find("offers no " + c.spec.impl_name) != std::string::npos || other_format)
          << c.spec.name << " at " << threads << " thread(s): " << why;
      EXPECT_EQ(why.find("as planned"), std::string::npos) << why;
      EXPECT_EQ(why.find("now offers only"), std::string::npos) << why;
      if (c.spec.feeds.empty()) ++not_offered;
    }
    EXPECT_GE(built, 4) << threads << " thread(s)";
    // Where oneDNN has a Winograd convolution for these at all, it builds at either count.
    const bool any_winograd = std::any_of(plan.cases.begin(), plan.cases.end(), [](const PlannedCase& c) {
      return !c.status && c.spec.variant.algorithm.rfind("convolution_winograd", 0) == 0 &&
             c.spec.problem.key.find("w=32x128x3x3") != std::string::npos;
    });
    if (any_winograd) {
      EXPECT_FALSE(winograd_built.empty()) << threads << " thread(s)";
    }
    std::printf("[ info ] %d thread(s): %d planned implementation(s) and conversions built, %d not offered\n",
                threads, built, not_offered);
  }
}

}  // namespace
}  // namespace floorline::gen
