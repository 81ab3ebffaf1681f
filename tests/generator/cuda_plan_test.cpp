// The CUDA backend's plan, without a GPU: which cases each config of real zoo models gets (every
// cuDNN algorithm, math modes, layouts, fused variants, our kernels), which the plan decides are
// unsupported and why, the descriptor geometry, and the workspace policy.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/cuda.hpp"
#include "floorline/kernels/reference.hpp"
// The kernels' host-side index plans (no device code): coalesced() and fits_int32().
#include "../../generator/backends/cuda/src/device_index.hpp"

namespace floorline::gen {
namespace {

using kernels::CaseSpec;
using kernels::CudaCase;
using kernels::Problem;
using kernels::Shape;

std::vector<mp::ModelIR> zoo_model(const std::string& name, int64_t batch = 1) {
  mp::ProcessOptions o;
  o.batches = {batch};
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

// The plan with every implementation (--all-impls, max_impls 0) unless `max_impls` says otherwise.
Plan cuda_plan(const std::vector<mp::ModelIR>& models, std::vector<DType> dtypes = {DType::kF32},
               int max_impls = 0) {
  const Backend* cuda = find_backend("cuda");
  EXPECT_NE(cuda, nullptr) << "this build has no CUDA backend";
  PlanOptions o;
  o.dtypes = std::move(dtypes);
  o.max_impls = max_impls;
  o.fused_all = max_impls == 0;
  return cuda ? make_plan(models, {cuda}, o) : Plan{};
}

// The cases of one config key with one fusion, by (algorithm, math mode, layout).
std::map<std::tuple<std::string, std::string, std::string>, const PlannedCase*> cases_of(
    const Plan& plan, const std::string& key, const std::string& fusion = "") {
  std::map<std::tuple<std::string, std::string, std::string>, const PlannedCase*> out;
  for (const auto& c : plan.cases)
    if (c.spec.problem.key == key && c.spec.variant.fusion == fusion)
      out[{c.spec.variant.algorithm, std::string(math_mode_name(c.spec.variant.math_mode)),
           c.spec.variant.layout}] = &c;
  return out;
}

std::string first_key(const Plan& plan, const std::string& op, const std::string& contains = "") {
  for (const auto& u : plan.configs)
    if (u.key.rfind(op + "|", 0) == 0 && u.key.find(contains) != std::string::npos) return u.key;
  ADD_FAILURE() << "no " << op << " config containing '" << contains << "'";
  return "";
}

TEST(CudaPlan, NoGpuHereIsReportedWithTheCudaErrorName) {
  const Status st = kernels::cuda_available();
  if (st.ok()) GTEST_SKIP() << "a GPU is usable here: the no-GPU report cannot be checked";
  EXPECT_NE(st.error().message.find("no usable GPU (cudaError"), std::string::npos) << st.error().message;
  auto choice = choose_backend();
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->backend->name(), "onednn");
  EXPECT_NE(choice->why.find("cuda: no usable GPU (cudaError"), std::string::npos) << choice->why;
  // Library versions are known without a device; device facts are not invented.
  const auto info = kernels::cuda_device_info();
  EXPECT_EQ(info.cudnn_version.rfind("9.", 0), 0u) << info.cudnn_version;
  EXPECT_FALSE(info.cublas_version.empty());
  EXPECT_TRUE(info.name.empty());
}

TEST(CudaPlan, Resnet18ConvGetsEveryLegacyAlgorithmInEachMathModeAndLayout) {
  const Plan plan = cuda_plan(zoo_model("resnet18"));
  const std::string key = first_key(plan, "Conv", "x=1x64x56x56|w=64x64x3x3");
  const auto cases = cases_of(plan, key);
  // NCHW in fp32 (TF32 off) and tf32, NHWC in tf32 only (where the layout changes the algorithm set).
  const std::vector<std::pair<std::string, std::string>> modes = {
      {"fp32", ""}, {"tf32", ""}, {"tf32", "nhwc"}};
  for (const auto& [mode, layout] : modes) {
    for (const auto& algo : kernels::cudnn_conv_algorithms()) {
      auto it = cases.find({"cudnn_conv:" + algo, mode, layout});
      ASSERT_NE(it, cases.end()) << algo << " " << mode << " " << layout;
      EXPECT_EQ(it->second->status, std::nullopt);  // support is the library's to say, when the case is built
      EXPECT_FALSE(it->second->work.is_default);
    }
    auto heuristic = cases.find({"cudnn_conv:heuristic", mode, layout});
    ASSERT_NE(heuristic, cases.end());
    EXPECT_EQ(heuristic->second->work.is_default, layout.empty())
        << "a framework's default is NCHW + the heuristic";
    EXPECT_TRUE(cases.count({"cudnn_conv:find", mode, layout}));
    // The conv has a bias: conv+bias+identity through the fused call, IMPLICIT_PRECOMP_GEMM only.
    EXPECT_TRUE(cases.count({"cudnn_conv_bias_act:IMPLICIT_PRECOMP_GEMM", mode, layout}));
    EXPECT_FALSE(cases.count({"cudnn_conv_bias_act:IMPLICIT_GEMM", mode, layout}));
  }
  EXPECT_FALSE(cases.count({"cudnn_conv:GEMM", "fp32", "nhwc"}));
  // NHWC's conversions, fed to every NHWC case of the config.
  for (const std::string conv : {"src:nchw>nhwc", "dst:nhwc>nchw"}) {
    auto it = cases.find({"cudnn_transform", "tf32", conv});
    ASSERT_NE(it, cases.end()) << conv;
    EXPECT_EQ(it->second->spec.feeds, (CaseFeeds{"", "nhwc"}));
    ASSERT_TRUE(it->second->conversion.has_value());
    EXPECT_EQ(conversion_layout(*it->second->conversion), conv);
    EXPECT_EQ(it->second->work.flops, 0);
    EXPECT_EQ(it->second->work.bytes, 2 * 64 * 56 * 56 * 4);
  }
  EXPECT_EQ(cases.size(), 3u * 11u + 2u);
  // ResNet's basic block fuses Conv → Relu and Conv → Add → Relu: cuDNN fuses ReLU with every
  // algorithm. With --all-impls (this plan) a fused variant gets every algorithm, in each math mode
  // and layout (S's activation epilogues take the fastest); under a cap, the first of each variant
  // only (the planner's policy for every backend).
  const Plan capped = cuda_plan(zoo_model("resnet18"), {DType::kF32}, 3);
  for (const std::string fusion : {"Relu", "Add+Relu"}) {
    const auto fused = cases_of(plan, key, fusion);
    EXPECT_EQ(fused.size(), 3u * kernels::cudnn_conv_algorithms().size()) << fusion;
    for (const auto& [k, c] : fused) {
      EXPECT_EQ(std::get<0>(k).rfind("cudnn_conv_bias_act:", 0), 0u) << std::get<0>(k);
      EXPECT_EQ(c->status, std::nullopt);
    }
    const auto first = cases_of(capped, key, fusion);
    ASSERT_EQ(first.size(), 3u) << fusion;
    for (const auto& [k, c] : first) EXPECT_EQ(std::get<0>(k), "cudnn_conv_bias_act:IMPLICIT_GEMM");
  }
}

// `floorline plan --backend cuda --max-impls N` on the zoo: per config, data type and math mode,
// at most N cases timed beyond the first of each variant (algorithm family and layout), every
// variant's first timed, the rest planned as skipped; NHWC's conversions beside a timed NHWC case.
TEST(CudaPlan, ZooRespectsMaxImpls) {
  std::vector<mp::ModelIR> models;
  for (const std::string name : {"resnet18", "bert_base_encoder", "squeezenet1_1"})
    for (auto& m : zoo_model(name)) models.push_back(std::move(m));
  for (const int cap : {1, 3}) {
    const Plan plan = cuda_plan(models, {DType::kF32}, cap);
    const Plan all = cuda_plan(models, {DType::kF32}, 0);
    using Config = std::tuple<std::string, std::string, std::string>;  // key, fusion, math mode
    std::map<Config, int> timed, skipped;
    std::map<Config, std::set<std::pair<std::string, std::string>>> variants, timed_variants;
    for (const auto& c : plan.cases) {
      if (c.conversion) continue;
      const Config k{c.spec.problem.key, c.spec.variant.fusion,
                     std::string(math_mode_name(c.spec.variant.math_mode))};
      if (c.status == Disposition::kSkipped) {
        ++skipped[k];
        EXPECT_NE(c.reason.find("--max-impls"), std::string::npos) << c.reason;
      }
      if (c.status) continue;
      ++timed[k];
      timed_variants[k].insert({c.group, c.spec.variant.layout});
    }
    for (const auto& c : all.cases)
      if (!c.conversion && !c.status)
        variants[{c.spec.problem.key, c.spec.variant.fusion,
                  std::string(math_mode_name(c.spec.variant.math_mode))}]
            .insert({c.group, c.spec.variant.layout});
    int capped = 0;
    for (const auto& [k, n] : timed) {
      EXPECT_EQ(timed_variants[k], variants[k]) << "every variant's first is timed: " << std::get<0>(k);
      EXPECT_LE(n, std::max<int>(cap, static_cast<int>(timed_variants[k].size()))) << std::get<0>(k);
      if (skipped[k] > 0) ++capped;
    }
    EXPECT_GT(capped, 0) << "the cap skips cases of some config";
    // The Conv of ResNet's first basic block: 11 NCHW algorithms per math mode and 11 NHWC in tf32
    // uncapped; capped, the heuristic (the default) and the first of cudnn_conv_bias_act in each,
    // and the NHWC heuristic with its two conversions.
    const std::string key = first_key(plan, "Conv", "x=1x64x56x56|w=64x64x3x3");
    int conv_timed = 0, conv_conversions = 0;
    for (const auto& c : plan.cases)
      if (c.spec.problem.key == key && c.spec.variant.fusion.empty()) {
        if (c.conversion)
          ++conv_conversions;
        else if (!c.status)
          ++conv_timed;
      }
    EXPECT_EQ(conv_timed, cap == 1 ? 2 + 4 : 3 + 4) << cap;
    EXPECT_EQ(conv_conversions, 2);
  }
}

TEST(CudaPlan, FusedActivationsCuDnnCannotFuseAreUnsupportedWithTheReason) {
  const Plan plan = cuda_plan(zoo_model("mobilenet_v2"));
  bool seen = false;
  for (const auto& c : plan.cases)
    if (c.spec.problem.op == "Conv" && c.spec.variant.fusion.rfind("Clip", 0) == 0) {
      seen = true;
      EXPECT_EQ(c.status, Disposition::kUnsupported);
      EXPECT_EQ(c.spec.variant.algorithm, "none");
      EXPECT_NE(c.reason.find("fuses ReLU or identity"), std::string::npos) << c.reason;
    }
  EXPECT_TRUE(seen) << "mobilenet_v2's Conv → Clip(0,6) is fused";
}

TEST(CudaPlan, HalfPrecisionHasOneTensorCoreModeInBothLayouts) {
  const Plan plan = cuda_plan(zoo_model("resnet18"), {DType::kF16, DType::kBF16});
  const std::string key = first_key(plan, "Conv", "x=1x64x56x56|w=64x64x3x3");
  std::set<std::tuple<std::string, std::string, std::string>> modes;
  for (const auto& c : plan.cases)
    if (c.spec.problem.key == key && c.spec.variant.fusion.empty() && c.spec.feeds.empty())
      modes.insert({std::string(dtype_name(c.spec.variant.dtype)),
                    std::string(math_mode_name(c.spec.variant.math_mode)), c.spec.variant.layout});
  const std::set<std::tuple<std::string, std::string, std::string>> expected = {
      {"f16", "f16", ""}, {"f16", "f16", "nhwc"}, {"bf16", "bf16", ""}, {"bf16", "bf16", "nhwc"}};
  EXPECT_EQ(modes, expected);
}

TEST(CudaPlan, Resnet18ClassifierGemmGetsCublasGemvAndCublasLtAlgorithms) {
  const Plan plan = cuda_plan(zoo_model("resnet18"));
  const std::string key = first_key(plan, "Gemm");
  const auto cases = cases_of(plan, key);
  ASSERT_TRUE(cases.count({"cublas_gemm", "fp32", ""}));
  EXPECT_TRUE(cases.at({"cublas_gemm", "fp32", ""})->work.is_default);
  // M = 1 at batch 1: a matrix-vector product, f32 without Tensor Cores only.
  EXPECT_EQ(cases.at({"cublas_gemv", "fp32", ""})->status, std::nullopt);
  EXPECT_EQ(cases.at({"cublas_gemv", "tf32", ""})->status, Disposition::kUnsupported);
  for (const std::string mode : {"fp32", "tf32"})
    for (int k = 0; k < 8; ++k)
      EXPECT_TRUE(cases.count({fmt::format("cublaslt_matmul:{}", k), mode, ""})) << k;
  EXPECT_EQ(cases.size(), 2u * (1 + 1 + 8));
  // At batch 32 the GEMV is gone.
  const Plan b32 = cuda_plan(zoo_model("resnet18", 32));
  const auto cases32 = cases_of(b32, first_key(b32, "Gemm"));
  EXPECT_FALSE(cases32.count({"cublas_gemv", "fp32", ""}));
}

TEST(CudaPlan, BertMatMulsAreBatchedOrFoldedAndEpiloguesFuseTheBias) {
  const Plan plan = cuda_plan(zoo_model("bert_base_encoder"));
  int strided = 0, folded = 0, bias_fused = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.problem.op != "MatMul") continue;
    if (c.spec.variant.algorithm == "cublas_gemm_strided_batched") ++strided;
    if (c.spec.variant.algorithm == "cublas_gemm") ++folded;
    if (c.spec.variant.fusion.rfind("BiasAdd", 0) == 0) {
      ++bias_fused;
      EXPECT_EQ(c.spec.variant.algorithm.rfind("cublaslt_matmul:", 0), 0u)
          << c.spec.name;  // only cuBLASLt fuses
    }
  }
  EXPECT_GT(strided, 0) << "attention's Q·Kᵀ and P·V have batch dims on both operands";
  EXPECT_GT(folded, 0) << "projections with a 2-D weight fold the batch into M";
  EXPECT_GT(bias_fused, 0);
}

// The zoo's recurrent layers run on cudnnRNNForward; what cuDNN cannot run says why.
TEST(CudaPlan, RecurrentLayersRunOnCudnnRnnOrSayWhyNot) {
  auto models = zoo_model("lstm_lm");
  for (auto& m : zoo_model("gru_kws")) models.push_back(std::move(m));
  const Plan plan = cuda_plan(models);
  std::map<std::string, std::set<std::string>> algorithms;  // op → algorithms of timed cases
  for (const auto& c : plan.cases)
    if (!c.status) algorithms[c.spec.problem.op].insert(c.spec.variant.algorithm);
  EXPECT_EQ(algorithms["LSTM"], std::set<std::string>{"cudnn_rnn"});
  EXPECT_EQ(algorithms["GRU"], std::set<std::string>{"cudnn_rnn"});  // torch's GRU: linear_before_reset = 1
  auto text = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4,1,3] x, float[1,6,3] w, float[1,6,2] r, float[1,8,3] lw, float[1,8,2] lr) => (y, z) {
  y = GRU <hidden_size = 2> (x, w, r)
  z = LSTM <hidden_size = 2, direction = "reverse"> (x, lw, lr)
}
)onnx",
                                     "rnn.onnx", {});
  ASSERT_TRUE(text.ok()) << text.error().message;
  const Plan other = cuda_plan(*text);
  std::map<std::string, std::string> reason;
  for (const auto& c : other.cases)
    if (c.status == Disposition::kUnsupported) reason[c.spec.problem.op] = c.reason;
  EXPECT_NE(reason["GRU"].find("linear_before_reset = 1"), std::string::npos) << reason["GRU"];
  EXPECT_NE(reason["LSTM"].find("forward only"), std::string::npos) << reason["LSTM"];
}

// resnet18_qdq's int8 layers on the CUDA backend, planned without a GPU. Its int8
// convolutions (each with the bias of its folded BatchNorm) get cuDNN's int8 fused call in NHWC,
// its classifier Gemm cuBLASLt's int8 algorithms; the first convolution (3 input channels) and the
// int8 Add and pools are unsupported, with the reason.
TEST(CudaPlan, QuantizedResnet18PlansCudnnAndCublasLtInt8Cases) {
  const Plan plan = cuda_plan(zoo_model("resnet18_qdq"));
  std::set<std::string> conv_planned, conv_unsupported, gemm_algorithms;
  std::map<std::string, std::string> reason;  // op → the reason of an unsupported int8 case
  int defaults = 0;
  for (const auto& c : plan.cases) {
    if (c.spec.variant.dtype != DType::kInt8) continue;
    const auto& p = c.spec.problem;
    if (c.status) {
      EXPECT_EQ(*c.status, Disposition::kUnsupported) << c.spec.name;
      reason[p.op] = c.reason;
      if (p.op == "Conv") conv_unsupported.insert(p.key);
      continue;
    }
    EXPECT_EQ(c.spec.variant.math_mode, MathMode::kInt8) << c.spec.name;
    defaults += c.work.is_default ? 1 : 0;
    if (p.op == "Conv") {
      conv_planned.insert(p.key);
      EXPECT_EQ(c.spec.variant.algorithm, "cudnn_conv_bias_act:IMPLICIT_PRECOMP_GEMM") << c.spec.name;
      EXPECT_EQ(c.spec.variant.layout, "nhwc") << c.spec.name;
      EXPECT_NE(p.key.find("qtypes=u8,i8>u8"), std::string::npos) << p.key;
    } else {
      EXPECT_EQ(p.op, "Gemm") << c.spec.name;
      gemm_algorithms.insert(c.spec.variant.algorithm);
    }
  }
  // 15 int8 convolution configs: conv1; in layer1 a 3×3 with its ReLU folded (output zero point 0)
  // and one without; in layers 2 to 4 the strided 3×3, the 1×1 downsample, and the 3×3 with and
  // without ReLU. All but conv1 are planned.
  EXPECT_EQ(conv_planned.size(), 14u);
  ASSERT_EQ(conv_unsupported.size(), 1u);
  EXPECT_EQ(conv_unsupported.begin()->rfind("Conv|x=1x3x224x224|w=64x3x7x7", 0), 0u)
      << *conv_unsupported.begin();
  EXPECT_NE(reason["Conv"].find("multiples of 4 (C = 3, K = 64)"), std::string::npos) << reason["Conv"];
  std::set<std::string> lt;
  for (int k = 0; k < 8; ++k) lt.insert(fmt::format("cublaslt_matmul:{}", k));
  EXPECT_EQ(gemm_algorithms, lt);  // K = 512, N = 1000: multiples of 4
  EXPECT_EQ(defaults, 14 + 1);     // one per planned config
  for (const std::string op : {"Add", "MaxPool", "GlobalAveragePool"})
    EXPECT_NE(reason[op].find("no int8 form in the CUDA backend"), std::string::npos)
        << op << ": " << reason[op];
}

// Int8 requirements the zoo does not show, on QDQ layers written in ONNX text: a
// convolution without bias gets every legacy algorithm, the heuristic's and Find's choices; one with
// 6 output channels, and a MatMul with N = 10, are unsupported with the reason.
TEST(CudaPlan, Int8CasesNeedChannelsAndGemmDimensionsInMultiplesOfFour) {
  auto text = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8,8,8] x, int8[8,8,3,3] w8, int8[6,8,1,1] w6, float[2,16] a, int8[16,10] b10) => (y8, y6, ym) {
  s = Constant <value = float {0.02}> ()
  z = Constant <value = uint8 {128}> ()
  ws = Constant <value = float {0.1}> ()
  wz = Constant <value = int8 {0}> ()
  xq = QuantizeLinear (x, s, z)
  xd = DequantizeLinear (xq, s, z)
  w8d = DequantizeLinear (w8, ws, wz)
  w6d = DequantizeLinear (w6, ws, wz)
  c8 = Conv <pads = [1,1,1,1]> (xd, w8d)
  c6 = Conv (xd, w6d)
  q8 = QuantizeLinear (c8, s, z)
  y8 = DequantizeLinear (q8, s, z)
  q6 = QuantizeLinear (c6, s, z)
  y6 = DequantizeLinear (q6, s, z)
  aq = QuantizeLinear (a, s, z)
  ad = DequantizeLinear (aq, s, z)
  bd = DequantizeLinear (b10, ws, wz)
  m = MatMul (ad, bd)
  mq = QuantizeLinear (m, s, z)
  ym = DequantizeLinear (mq, s, z)
}
)onnx",
                                     "int8.onnx", {});
  ASSERT_TRUE(text.ok()) << text.error().message;
  const Plan plan = cuda_plan(*text);
  std::map<std::string, std::set<std::string>> algorithms;  // key → algorithms of timed int8 cases
  std::map<std::string, std::string> reason;                // key → why not
  for (const auto& c : plan.cases) {
    if (c.spec.variant.dtype != DType::kInt8) continue;
    if (c.status == Disposition::kUnsupported)
      reason[c.spec.problem.key] = c.reason;
    else if (!c.status)
      algorithms[c.spec.problem.key].insert(c.spec.variant.algorithm);
  }
  std::set<std::string> conv8 = {"cudnn_conv:heuristic", "cudnn_conv:find"};
  for (const auto& a : kernels::cudnn_conv_algorithms()) conv8.insert("cudnn_conv:" + a);
  const std::string k8 = first_key(plan, "Conv", "w=8x8x3x3");
  const std::string k6 = first_key(plan, "Conv", "w=6x8x1x1");
  const std::string km = first_key(plan, "MatMul", "b=16x10");
  EXPECT_EQ(algorithms[k8], conv8) << k8;
  EXPECT_FALSE(algorithms.count(k6)) << k6;
  EXPECT_NE(reason[k6].find("multiples of 4 (C = 8, K = 6)"), std::string::npos) << reason[k6];
  EXPECT_FALSE(algorithms.count(km)) << km;
  EXPECT_NE(reason[km].find("K and N in multiples of 4 (K = 16, N = 10)"), std::string::npos) << reason[km];
}

TEST(CudaPlan, OpsWithoutALibraryKernelRunOursLabelledAsSuch) {
  const Plan plan = cuda_plan(zoo_model("squeezenet1_1"));
  std::map<std::string, std::set<std::string>> algorithms;  // op → algorithms
  for (const auto& c : plan.cases) algorithms[c.spec.problem.op].insert(c.spec.variant.algorithm);
  EXPECT_EQ(algorithms["Concat"], std::set<std::string>{"floorline-kernel:copy"});
  EXPECT_EQ(algorithms["Relu"], (std::set<std::string>{"cudnn_activation", "floorline-kernel:eltwise"}));
  // SqueezeNet's MaxPools have ceil_mode, but their sizes divide evenly: cuDNN computes the same
  // output and is the default.
  for (const auto& c : plan.cases)
    if (c.spec.problem.op == "MaxPool" && c.spec.variant.algorithm == "cudnn_pooling") {
      EXPECT_EQ(c.status, std::nullopt);
      EXPECT_EQ(c.work.is_default, c.spec.variant.layout.empty());
    }
  // GoogLeNet's 56×56 → 28×28 MaxPool rounds up: cuDNN rounds down, so our kernel is the default.
  const Plan google = cuda_plan(zoo_model("googlenet"));
  const std::string key = first_key(google, "MaxPool", "x=1x192x56x56|kernel=3,3|pads=0,0,0,0|strides=2,2");
  for (const auto& [k, c] : cases_of(google, key)) {
    if (std::get<0>(k) == "cudnn_pooling") {
      EXPECT_EQ(c->status, Disposition::kUnsupported);
      EXPECT_NE(c->reason.find("ceil_mode"), std::string::npos) << c->reason;
    } else {
      EXPECT_EQ(std::get<0>(k), "floorline-kernel:pooling");
      EXPECT_TRUE(c->work.is_default);
    }
  }
  // Our kernels say so by the one rule (is_own_kernel) and in params' library; cuDNN's do not.
  for (const auto& c : plan.cases) {
    const bool ours = c.spec.variant.algorithm.rfind("floorline-kernel", 0) == 0;
    EXPECT_EQ(is_own_kernel(c.spec.variant), ours) << c.spec.name;
    if (ours) {
      EXPECT_NE(c.params.find("\"library\":\"floorline\""), std::string::npos) << c.params;
    }
  }
}

// BERT's Gelu runs on our element-wise kernel (cuDNN's legacy activations have none), its default;
// a bf16 GlobalAveragePool keeps cuDNN's pooling and ours, and says why cudnnReduceTensor is out.
TEST(CudaPlan, GeluRunsOursAndBf16ReductionsSayWhyCudnnCannot) {
  const Plan bert = cuda_plan(zoo_model("bert_base_encoder"));
  int gelu = 0;
  for (const auto& c : bert.cases)
    if (c.spec.problem.op == "Gelu" && c.spec.variant.fusion.empty()) {
      ++gelu;
      EXPECT_EQ(c.spec.variant.algorithm, "floorline-kernel:eltwise");
      EXPECT_EQ(c.status, std::nullopt) << c.reason;
      EXPECT_TRUE(c.work.is_default);
    }
  EXPECT_GT(gelu, 0);
  const Plan half = cuda_plan(zoo_model("resnet18"), {DType::kBF16});
  int reduce = 0, others = 0;
  for (const auto& c : half.cases) {
    if (c.spec.problem.op != "GlobalAveragePool") continue;
    if (c.spec.variant.algorithm == "cudnn_reduce") {
      ++reduce;
      EXPECT_EQ(c.status, Disposition::kUnsupported);
      EXPECT_NE(c.reason.find("bf16"), std::string::npos) << c.reason;
    } else if (!c.status) {
      ++others;
    }
  }
  EXPECT_EQ(reduce, 1);
  EXPECT_GE(others, 2);  // cudnn_pooling (NCHW, NHWC) and floorline-kernel:pooling
}

TEST(CudaPlan, EveryConfigOfTheZooHasOneDefaultOrSaysWhyNot) {
  std::vector<mp::ModelIR> models;
  for (const std::string name :
       {"resnet50", "mobilenet_v3_large", "densenet121", "swin_t", "r3d_18", "deeplabv3_mobilenet_v3_large"})
    for (auto& m : zoo_model(name)) models.push_back(std::move(m));
  const Plan plan = cuda_plan(models);
  std::map<std::tuple<std::string, std::string, std::string>, int> defaults, cases, unsupported;
  std::set<std::string> names;
  for (const auto& c : plan.cases) {
    EXPECT_TRUE(names.insert(c.spec.name).second) << "duplicate " << c.spec.name;
    auto parsed = benchdb::parse_case_name(c.spec.name);
    ASSERT_TRUE(parsed.has_value()) << c.spec.name;
    EXPECT_EQ(parsed->algorithm, c.spec.variant.algorithm);
    EXPECT_EQ(parsed->layout, c.spec.variant.layout);
    EXPECT_EQ(case_variant(*parsed), c.spec.variant) << c.spec.name;  // every part, typed, back
    if (!c.spec.feeds.empty()) continue;
    const auto k = std::make_tuple(c.spec.problem.key, std::string(math_mode_name(c.spec.variant.math_mode)),
                                   c.spec.variant.fusion);
    ++cases[k];
    if (c.work.is_default) ++defaults[k];
    if (c.status == Disposition::kUnsupported) {
      EXPECT_FALSE(c.reason.empty()) << c.spec.name;
      ++unsupported[k];
    }
  }
  for (const auto& [k, n] : cases) {
    const bool fused = !std::get<2>(k).empty();
    // A framework's default exists for every unfused config (fused variants are alternatives), or
    // the config says why it is not run (a kind with no mapping: TopK).
    if (!fused && unsupported[k] < n) {
      EXPECT_EQ(defaults[k], 1) << std::get<0>(k) << " " << std::get<1>(k);
    }
  }
  // 3-D convolutions (r3d_18) keep three spatial dims.
  bool three_d = false;
  for (const auto& u : plan.configs)
    if (u.key.rfind("Conv|", 0) == 0 && u.key.find("x=1x3x16x112x112") != std::string::npos) three_d = true;
  EXPECT_TRUE(three_d);
}

Problem conv_problem(Shape x, Shape w, Shape y, std::vector<int64_t> pads, std::vector<int64_t> strides) {
  Problem p;
  p.kind = LayerKind::kConv;
  p.op = "Conv";
  p.key = "Conv|test";
  p.inputs = {{"x", std::move(x)}, {"w", std::move(w)}};
  p.outputs = {{"y", std::move(y)}};
  const size_t n = strides.size();
  p.ints["pads"] = std::move(pads);
  p.ints["strides"] = std::move(strides);
  p.ints["dil"] = std::vector<int64_t>(n, 1);
  p.ints["group"] = {1};
  return p;
}

TEST(CudaPlan, ConvGeometryRunsOneDAsTwoDAndPadsAsymmetricPaddingExplicitly) {
  // Conv1d: N C W → N C 1 W, with a unit stride and no padding along H.
  auto g1 = kernels::conv_geometry(conv_problem({2, 8, 100}, {16, 8, 5}, {2, 16, 50}, {2, 2}, {2}));
  ASSERT_TRUE(g1.ok()) << g1.error().message;
  EXPECT_EQ(g1->spatial, 2);
  EXPECT_EQ(g1->x, (std::vector<int>{2, 8, 1, 100}));
  EXPECT_EQ(g1->w, (std::vector<int>{16, 8, 1, 5}));
  EXPECT_EQ(g1->y, (std::vector<int>{2, 16, 1, 50}));
  EXPECT_EQ(g1->pads, (std::vector<int>{0, 2}));
  EXPECT_EQ(g1->strides, (std::vector<int>{1, 2}));
  EXPECT_FALSE(g1->explicit_pad);
  // TensorFlow-style SAME padding of a stride-2 3×3 conv on an even input: 0 before, 1 after.
  auto g2 = kernels::conv_geometry(
      conv_problem({1, 3, 224, 224}, {32, 3, 3, 3}, {1, 32, 112, 112}, {0, 0, 1, 1}, {2, 2}));
  ASSERT_TRUE(g2.ok());
  EXPECT_TRUE(g2->explicit_pad);
  EXPECT_EQ(g2->x, (std::vector<int>{1, 3, 225, 225}));
  EXPECT_EQ(g2->x_unpadded, (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(g2->pads, (std::vector<int>{0, 0}));
  EXPECT_EQ(g2->pad_begin, (std::vector<int64_t>{0, 0}));
  // The (padded H − 3) / 2 + 1 = 112 output cuDNN computes matches the layer's.
  EXPECT_EQ((g2->x[2] - 3) / 2 + 1, 112);
  CaseSpec spec;
  spec.problem = conv_problem({1, 3, 224, 224}, {32, 3, 3, 3}, {1, 32, 112, 112}, {0, 0, 1, 1}, {2, 2});
  spec.variant.dtype = DType::kF32;
  spec.variant.math_mode = MathMode::kFp32;
  for (const CudaCase& c : kernels::cuda_cases(spec))
    if (c.variant.algorithm.rfind("cudnn_conv", 0) == 0) {
      EXPECT_NE(c.variant.algorithm.find(":padded"), std::string::npos) << c.variant.algorithm;
    }
  // 3-D stays 3-D; rank 6 is not a cuDNN convolution.
  auto g3 = kernels::conv_geometry(conv_problem({1, 3, 16, 112, 112}, {64, 3, 3, 7, 7}, {1, 64, 16, 56, 56},
                                                {1, 3, 3, 1, 3, 3}, {1, 2, 2}));
  ASSERT_TRUE(g3.ok());
  EXPECT_EQ(g3->spatial, 3);
  EXPECT_EQ(g3->pads, (std::vector<int>{1, 3, 3}));
  auto bad = kernels::conv_geometry(
      conv_problem({1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 2, 2, 2, 2}, {}, {1, 1, 1, 1}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Disposition::kUnsupported);
}

TEST(CudaPlan, WorkspacePolicyLeavesAReserveOfFreeMemory) {
  constexpr int64_t MiB = int64_t{1} << 20, GiB = int64_t{1} << 30;
  EXPECT_EQ(kernels::workspace_limit(80 * GiB), 80 * GiB - 4 * GiB - 256 * MiB);
  EXPECT_EQ(kernels::workspace_limit(1 * GiB), GiB - GiB / 20 - 256 * MiB);
  EXPECT_EQ(kernels::workspace_limit(200 * MiB), 0);
  EXPECT_EQ(kernels::workspace_limit(0), 0);
}

TEST(CudaPlan, BinaryOpsGetOpTensorAddTensorForPerChannelBiasAndOurs) {
  CaseSpec spec;
  spec.variant.dtype = DType::kF32;
  spec.variant.math_mode = MathMode::kFp32;
  spec.problem.kind = LayerKind::kAdd;
  spec.problem.op = "Add";
  spec.problem.key = "Add|test";
  spec.problem.inputs = {{"a", {8, 64, 28, 28}}, {"b", {1, 64, 1, 1}}};
  spec.problem.outputs = {{"y", {8, 64, 28, 28}}};
  std::vector<std::string> algorithms;
  for (const auto& c : kernels::cuda_cases(spec)) algorithms.push_back(c.variant.algorithm);
  EXPECT_EQ(algorithms,
            (std::vector<std::string>{"cudnn_op_tensor", "cudnn_add_tensor", "floorline-kernel:binary"}));
  spec.problem.kind = LayerKind::kSub;
  spec.problem.op = "Sub";
  spec.problem.inputs = {{"a", {1, 64, 1, 1}},
                         {"b", {8, 64, 28, 28}}};  // A − B with A broadcast: not cudnnOpTensor
  algorithms.clear();
  for (const auto& c : kernels::cuda_cases(spec)) algorithms.push_back(c.variant.algorithm);
  EXPECT_EQ(algorithms, (std::vector<std::string>{"floorline-kernel:binary"}));
  spec.problem.kind = LayerKind::kDiv;
  spec.problem.op = "Div";
  spec.problem.inputs = {{"a", {8, 64, 28, 28}}, {"b", {8, 64, 28, 28}}};
  const auto div = kernels::cuda_cases(spec);
  ASSERT_EQ(div.size(), 1u);
  EXPECT_EQ(div[0].variant.algorithm, "floorline-kernel:binary");
  EXPECT_TRUE(div[0].is_default);
  spec.problem.kind = LayerKind::kUnsupported;
  spec.problem.op = "Hardmax";
  const auto none = kernels::cuda_cases(spec);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].status, Disposition::kUnsupported);
  EXPECT_NE(none[0].reason.find("Hardmax"), std::string::npos);
  // A data type no backend measures cannot reach a CaseSpec: the command line's --dtype is parsed
  // against common/dtype.hpp's table.
  EXPECT_EQ(parse_dtype("f64"), std::nullopt);
}

// Every element offset of a strided copy, in the kernel's order (element i of the row-major index
// space over dims), as the kernel computes it: the outermost index undivided.
std::vector<std::pair<int64_t, int64_t>> copy_offsets(const kernels::device::StridedCopy& c) {
  int64_t n = 1;
  for (int k = 0; k < c.rank; ++k) n *= c.dims[k];
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, s = c.src_offset, d = c.dst_offset;
    for (int k = c.rank - 1; k > 0; --k) {
      s += rest % c.dims[k] * c.src_strides[k];
      d += rest % c.dims[k] * c.dst_strides[k];
      rest /= c.dims[k];
    }
    out.emplace_back(s + rest * c.src_strides[0], d + rest * c.dst_strides[0]);
  }
  return out;
}

kernels::device::StridedCopy make_copy(const std::vector<int64_t>& dims, const std::vector<int64_t>& src,
                                       const std::vector<int64_t>& dst, int64_t src_offset = 0) {
  return kernels::device::make_strided_copy(dims, src, src_offset, dst, 0);
}

TEST(CudaOwnKernels, CoalescedCopiesVisitTheSameElementsInFewerDims) {
  using kernels::device::coalesced;
  struct Case {
    kernels::device::StridedCopy copy;
    int rank;  // after coalescing
  };
  const std::vector<Case> cases = {
      // bert's Slice of the fused QKV projection: [32, 128, 768] of [32, 128, 2304], the second third.
      {make_copy({32, 128, 768}, {128 * 2304, 2304, 1}, {128 * 768, 768, 1}, 768), 2},
      // A contiguous copy with unit dims (Reshape/Squeeze-like): one dim.
      {make_copy({1, 4, 1, 6}, {24, 6, 6, 1}, {24, 6, 6, 1}), 1},
      // A transpose [2, 3, 4] -> perm (0, 2, 1): nothing merges but the outer pair... which does not.
      {make_copy({2, 4, 3}, {12, 1, 4}, {12, 3, 1}), 3},
      // Expand (stride 0) of a row over 5 rows, then contiguous: the broadcast dim stays.
      {make_copy({5, 7}, {0, 1}, {7, 1}), 2},
      // A reversed Slice (negative step) of the last axis, whole rows: dims stay apart.
      {make_copy({3, 4}, {4, -1}, {4, 1}, 3), 2},
      // All extents 1: a scalar copy.
      {make_copy({1, 1}, {5, 1}, {1, 1}, 2), 1},
  };
  for (const Case& c : cases) {
    const auto merged = coalesced(c.copy);
    EXPECT_EQ(merged.rank, c.rank);
    EXPECT_EQ(copy_offsets(merged), copy_offsets(c.copy)) << "rank " << c.copy.rank;
  }
}

TEST(CudaOwnKernels, CoalescedBroadcastsReadTheSameOperandsAndIndexIn32BitsWhereTheyFit) {
  using kernels::device::Broadcast;
  using kernels::device::coalesced;
  using kernels::device::fits_int32;
  // bert's attention scale: [32, 12, 128, 64] / a scalar: one dim, b never moves.
  Broadcast s;
  s.rank = 4;
  const int64_t dims[4] = {32, 12, 128, 64};
  for (int k = 3, step = 1; k >= 0; step *= static_cast<int>(dims[k]), --k) {
    s.dims[k] = dims[k];
    s.a_strides[k] = step;
    s.b_strides[k] = 0;
  }
  Broadcast m = coalesced(s);
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.dims[0], 32 * 12 * 128 * 64);
  EXPECT_EQ(m.a_strides[0], 1);
  EXPECT_EQ(m.b_strides[0], 0);
  // A bias over channels of NCHW [2, 3, 4, 5] (b is [3, 1, 1]): [2, 3, 20], b moves on the middle dim.
  Broadcast bias;
  bias.rank = 4;
  const int64_t d2[4] = {2, 3, 4, 5}, a2[4] = {60, 20, 5, 1}, b2[4] = {0, 1, 0, 0};
  for (int k = 0; k < 4; ++k) {
    bias.dims[k] = d2[k];
    bias.a_strides[k] = a2[k];
    bias.b_strides[k] = b2[k];
  }
  m = coalesced(bias);
  ASSERT_EQ(m.rank, 3);
  EXPECT_EQ(m.dims[0], 2);
  EXPECT_EQ(m.dims[1], 3);
  EXPECT_EQ(m.dims[2], 20);
  EXPECT_EQ(m.b_strides[1], 1);
  EXPECT_EQ(m.b_strides[2], 0);
  // 32-bit offsets: up to INT32_MAX (2^31 elements at stride 1 reach it), from the offset through the
  // farthest element either way.
  const int64_t big[1] = {(int64_t{1} << 31) + 1}, unit[1] = {1}, back[1] = {-1};
  EXPECT_FALSE(fits_int32(1, big, unit, 0));
  EXPECT_TRUE(fits_int32(1, unit, unit, INT32_MAX));
  EXPECT_TRUE(fits_int32(1, dims, unit, 0));
  EXPECT_FALSE(fits_int32(1, dims, back, 0));  // reaches below 0
  EXPECT_TRUE(fits_int32(1, dims, back, 31));
}

}  // namespace
}  // namespace floorline::gen
