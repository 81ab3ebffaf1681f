// The XNNPACK and OpenBLAS backends, where their libraries were found at build time
// (FLOORLINE_TEST_XNNPACK / FLOORLINE_TEST_OPENBLAS, set by tests/CMakeLists.txt; elsewhere these
// tests report themselves skipped): every case they plan for real zoo layers built through the
// registry's plugin and checked against the plain reference, their plans, and the system row they
// share with oneDNN.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/replay.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/model_processor/model.hpp"

#ifndef FLOORLINE_TEST_XNNPACK
#define FLOORLINE_TEST_XNNPACK 0
#endif
#ifndef FLOORLINE_TEST_OPENBLAS
#define FLOORLINE_TEST_OPENBLAS 0
#endif

namespace floorline::gen {
namespace {

std::vector<mp::ModelIR> zoo(const std::string& name) {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", {});
  EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

// The backend's plugin, built here: null (and a test failure) when it does not load.
const Backend* loaded(const std::string& name) {
  const Backend* b = find_backend(name);
  if (!b) {
    ADD_FAILURE() << name << " is not in the registry";
    return nullptr;
  }
  auto path = plugin_path(*b);
  EXPECT_TRUE(path.ok()) << name << ": " << (path.ok() ? "" : path.error().message);
  return path.ok() ? b : nullptr;
}

#define REQUIRE_BUILT(flag, name)                                                       \
  if (!(flag)) GTEST_SKIP() << name << " was not found when this build was configured"; \
  const Backend* backend = loaded(name);                                                \
  ASSERT_NE(backend, nullptr)

// Builds and verifies the backend's timed cases of `models` that `pick` selects; returns a label
// per verified case ("Conv+Relu", "Conv depthwise", "MatMul sgemm_loop", "transpose src").
std::set<std::string> verify_cases(
    const Backend& backend, const std::vector<mp::ModelIR>& models,
    const std::function<bool(const PlannedCase&)>& pick,
    const std::function<std::string(const PlannedCase&, const kernels::Kernel&)>& label) {
  const Plan plan = make_plan(models, {&backend}, PlanOptions{});
  const auto factory = backend.factory();
  std::set<std::string> labels;
  for (const auto& c : plan.cases) {
    if (c.status || !pick(c)) continue;
    auto k = factory(c.spec);
    EXPECT_TRUE(k.ok()) << c.spec.name << ": " << (k.ok() ? "" : k.error().message);
    if (!k.ok()) continue;
    const Status v = (*k)->verify();
    EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
    if (v.ok()) labels.insert(label(c, **k));
  }
  return labels;
}

bool has_kind(const PlannedCase& c, std::initializer_list<LayerKind> kinds) {
  for (LayerKind k : kinds)
    if (c.spec.problem.kind == k) return true;
  return false;
}

std::string xnnpack_label(const PlannedCase& c, const kernels::Kernel& k) {
  const auto& v = c.spec.variant;
  if (!c.spec.feeds.empty()) return "transpose " + v.layout.substr(0, 3);
  const std::string impl = k.implementation();
  std::string label = c.spec.problem.op + (v.fusion.empty() ? "" : "+" + v.fusion);
  if (impl.find("depthwise") != std::string::npos) label += " depthwise";
  if (impl.find("grouped") != std::string::npos) label += " grouped";
  return label;
}

TEST(XnnpackKernels, ZooLayersMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_XNNPACK, "xnnpack");
  auto all = [](const PlannedCase&) { return true; };
  std::set<std::string> labels;
  // squeezenet1_1: the stem MaxPool (ceil_mode), 1×1 and 3×3 convolutions with their fused Relu,
  // the classifier's GlobalAveragePool; resnet18: 3×3 convolutions, its Gemm, residual Add, Relu.
  for (const char* m : {"squeezenet1_1", "resnet18"})
    for (const auto& l : verify_cases(*backend, zoo(m), all, xnnpack_label)) labels.insert(l);
  // mobilenet_v2: depthwise convolutions and Conv → Clip(0, 6); mobilenet_v3_small: HardSwish and
  // its squeeze-and-excitation Mul (broadcast).
  for (const auto& l : verify_cases(
           *backend, zoo("mobilenet_v2"),
           [](const PlannedCase& c) {
             return has_kind(c, {LayerKind::kConv}) && c.spec.problem.int_attr("group") > 1;
           },
           xnnpack_label))
    labels.insert(l);
  for (const auto& l : verify_cases(
           *backend, zoo("mobilenet_v3_small"),
           [](const PlannedCase& c) {
             return has_kind(c, {LayerKind::kHardSwish, LayerKind::kMul});
           },
           xnnpack_label))
    labels.insert(l);
  // bert_base_encoder: MatMul with 2-D weights (and its bias fused), broadcast Add, Div, Softmax
  // over the last axis (its Muls are GELU chains: Gelu layers, which XNNPACK does not map).
  for (const auto& l : verify_cases(*backend, zoo("bert_base_encoder"), all, xnnpack_label)) labels.insert(l);
  // resnext50_32x4d: grouped (32 groups, not depthwise) convolutions.
  for (const auto& l : verify_cases(
           *backend, zoo("resnext50_32x4d"),
           [](const PlannedCase& c) {
             return has_kind(c, {LayerKind::kConv}) && c.spec.feeds.empty() &&
                    c.spec.problem.int_attr("group") == 32;
           },
           xnnpack_label))
    labels.insert(l);
  // densenet121: its 2×2 AveragePool transitions.
  for (const auto& l : verify_cases(
           *backend, zoo("densenet121"),
           [](const PlannedCase& c) {
             return has_kind(c, {LayerKind::kAveragePool}) && c.spec.feeds.empty();
           },
           xnnpack_label))
    labels.insert(l);
  for (const char* want :
       {"Conv", "Conv+Relu", "Conv depthwise", "Conv+Clip(0,6) depthwise", "Conv grouped", "Gemm", "MatMul",
        "MatMul+BiasAdd", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Add", "Mul", "Div",
        "Softmax", "HardSwish", "transpose src", "transpose dst"})
    EXPECT_TRUE(labels.count(want)) << want << " has no verified case; verified: "
                                    << ::testing::PrintToString(labels);
}

// regnet_y_400mf's squeeze-excitation convolutions read a 1×1-pixel input (x = 1x208x1x1,
// w = 52x208x1x1, and the 440-channel one, with and without their Relu): these cases once threw
// std::bad_alloc (the convolution builder read its weights through a reference a later operand's
// allocation had left dangling). Every one builds and matches the reference.
TEST(XnnpackKernels, OnePixelSqueezeExcitationConvolutionsMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_XNNPACK, "xnnpack");
  std::set<std::string> keys;
  const auto labels = verify_cases(
      *backend, zoo("regnet_y_400mf"),
      [](const PlannedCase& c) {
        const std::vector<int64_t>& x = c.spec.problem.inputs.at(0).shape;
        return has_kind(c, {LayerKind::kConv}) && c.spec.feeds.empty() && x.size() == 4 && x[2] == 1 &&
               x[3] == 1;
      },
      [&keys](const PlannedCase& c, const kernels::Kernel& k) {
        keys.insert(c.spec.problem.key.substr(0, c.spec.problem.key.find("|pads")));
        return xnnpack_label(c, k);
      });
  EXPECT_EQ(labels, (std::set<std::string>{"Conv", "Conv+Relu"}));
  EXPECT_TRUE(keys.count("Conv|x=1x208x1x1|w=52x208x1x1|bias")) << ::testing::PrintToString(keys);
  EXPECT_TRUE(keys.count("Conv|x=1x440x1x1|w=110x440x1x1|bias")) << ::testing::PrintToString(keys);
}

TEST(XnnpackPlan, Squeezenet11CasesAreNhwcWithTheirConversions) {
  REQUIRE_BUILT(FLOORLINE_TEST_XNNPACK, "xnnpack");
  const Plan plan = make_plan(zoo("squeezenet1_1"), {backend}, PlanOptions{});
  std::map<std::string, const PlannedCase*> by_name;
  for (const auto& c : plan.cases) by_name[c.spec.name] = &c;
  const std::string pool =
      "MaxPool|x=1x64x111x111|kernel=3,3|pads=0,0,0,0|strides=2,2|dil=1,1|ceil_mode=1|f32";
  const std::string stem = "Conv|x=1x3x224x224|w=64x3x3x3|bias|pads=0,0,0,0|strides=2,2|dil=1,1|group=1|f32";
  const std::string gap = "GlobalAveragePool|x=1x1000x13x13|f32";
  for (const std::string& name : {"xnnpack/max_pooling2d_nhwc_f32/f32/fp32.nhwc/" + pool,
                                  "xnnpack/floorline-kernel:transpose/f32/fp32.src:nchw>nhwc/" + pool,
                                  "xnnpack/floorline-kernel:transpose/f32/fp32.dst:nhwc>nchw/" + pool,
                                  "xnnpack/convolution2d_nhwc_f32/f32/fp32.nhwc/" + stem,
                                  "xnnpack/convolution2d_nhwc_f32/f32/fp32.nhwc+Relu/" + stem,
                                  "xnnpack/global_average_pooling_nwc_f32/f32/fp32.nhwc/" + gap,
                                  "xnnpack/floorline-kernel:transpose/f32/fp32.src:nchw>nhwc/" + gap}) {
    ASSERT_TRUE(by_name.count(name)) << name << " is not planned";
    EXPECT_FALSE(by_name[name]->status) << name << ": " << by_name[name]->reason;
  }
  // The conversions feed every NHWC case of their config; [N, C, 1, 1] needs none back.
  EXPECT_EQ(by_name["xnnpack/floorline-kernel:transpose/f32/fp32.src:nchw>nhwc/" + pool]->spec.feeds,
            (CaseFeeds{"", "nhwc"}));
  EXPECT_FALSE(by_name.count("xnnpack/floorline-kernel:transpose/f32/fp32.dst:nhwc>nchw/" + gap));
  EXPECT_TRUE(by_name["xnnpack/max_pooling2d_nhwc_f32/f32/fp32.nhwc/" + pool]->work.is_default);
  // What it does not map is planned as unsupported with the table's reason, never dropped.
  const auto concat = std::find_if(plan.cases.begin(), plan.cases.end(),
                                   [](const PlannedCase& c) { return c.spec.problem.op == "Concat"; });
  ASSERT_NE(concat, plan.cases.end());
  EXPECT_EQ(concat->status, Disposition::kUnsupported);
  EXPECT_EQ(concat->reason, "Concat: not mapped: data movement is timed by the oneDNN and CUDA backends");
  // f16 is not mapped.
  PlanOptions f16;
  f16.dtypes = {DType::kF16};
  for (const auto& c : make_plan(zoo("squeezenet1_1"), {backend}, f16).cases) {
    EXPECT_EQ(c.status, Disposition::kUnsupported) << c.spec.name;
  }
}

std::string openblas_label(const PlannedCase& c, const kernels::Kernel& k) {
  const std::string impl = k.implementation();
  if (c.spec.problem.kind == LayerKind::kMatMul) return "MatMul " + c.spec.variant.algorithm;
  if (c.spec.problem.kind != LayerKind::kConv) return c.spec.problem.op;
  if (impl.find("groups") != std::string::npos) return "Conv grouped";
  return impl.rfind("im2col", 0) == 0 ? "Conv im2col" : "Conv 1x1";
}

bool split_case(const PlannedCase& c) {
  return c.spec.variant.algorithm.ends_with("_split");
}

TEST(OpenblasKernels, ZooLayersMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_OPENBLAS, "openblas");
  auto all = [](const PlannedCase& c) { return !split_case(c); };  // the _split cases: below
  std::set<std::string> labels;
  // resnet18: 7×7, 3×3 and strided 1×1 convolutions (im2col), its Gemm; squeezenet1_1: 1×1
  // stride-1 convolutions (no im2col); bert_base_encoder: MatMul with 2-D weights as one GEMM and
  // as a loop, and the batched attention products as a loop.
  for (const char* m : {"resnet18", "squeezenet1_1", "bert_base_encoder"})
    for (const auto& l : verify_cases(*backend, zoo(m), all, openblas_label)) labels.insert(l);
  // mobilenet_v2: depthwise convolutions, one GEMM per group.
  for (const auto& l : verify_cases(
           *backend, zoo("mobilenet_v2"),
           [](const PlannedCase& c) {
             return has_kind(c, {LayerKind::kConv}) && c.spec.problem.int_attr("group") > 1 &&
                    c.spec.problem.inputs[0].shape[1] <= 144;
           },
           openblas_label))
    labels.insert(l);
  EXPECT_EQ(labels, (std::set<std::string>{"Conv 1x1", "Conv im2col", "Conv grouped", "Gemm", "MatMul sgemm",
                                           "MatMul sgemm_loop"}));
}

// The _split variants: at T threads, T one-thread calls on OpenMP's threads, each on a block of y
// (columns where N >= M, rows otherwise) or on its share of a loop's matrices. At one thread they are
// the plain case and say so; at 2 and 3 threads every form matches the reference: C broadcast into
// row and column blocks, transposed operands, a loop with fewer matrices than threads, and
// bert_base_encoder's and resnet18's GEMMs.
TEST(OpenblasKernels, SplitCasesCutTheGemmIntoOneThreadCallsThatMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_OPENBLAS, "openblas");
  constexpr const char* kModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
g (float[50,97] a, float[50,21] b, float[1,21] c, float[19,40] d, float[243,40] e, float[243] f,
   float[2,37,50] x, float[2,50,29] w)
    => (float rows, float cols, float loop)
{
  rows = Gemm <transA = 1> (a, b, c)
  cols = Gemm <transB = 1> (d, e, f)
  loop = MatMul (x, w)
}
)onnx";
  auto m = mp::process_model_text(kModel, "split.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Plan plan = make_plan(*m, {backend}, PlanOptions{});
  const auto factory = backend->factory();
  int at_one = 0;
  for (const auto& c : plan.cases) {
    if (c.status || !split_case(c)) continue;
    auto k = factory(c.spec);
    ASSERT_FALSE(k.ok()) << c.spec.name;
    EXPECT_EQ(k.error().code, Disposition::kUnsupported);
    EXPECT_NE(k.error().message.find("at one thread is the plain GEMM"), std::string::npos)
        << k.error().message;
    ++at_one;
  }
  EXPECT_EQ(at_one, 3);
  std::set<std::string> impls;
  auto record = [&impls](const PlannedCase& c, const kernels::Kernel& k) {
    impls.insert(k.implementation());
    return c.spec.variant.algorithm;
  };
  for (const int threads : {2, 3}) {
    backend->set_threads(threads);
    EXPECT_EQ(verify_cases(*backend, *m, split_case, record),
              (std::set<std::string>{"sgemm_split", "sgemm_loop_split"}));
  }
  EXPECT_TRUE(impls.count("cblas_sgemm 97x21x50 A^T, 2 one-thread calls on row blocks of y"))
      << ::testing::PrintToString(impls);
  EXPECT_TRUE(impls.count("cblas_sgemm 19x243x40 B^T, 3 one-thread calls on column blocks of y"));
  EXPECT_TRUE(impls.count("cblas_sgemm 37x29x50, 2 calls, shared out among 2 threads"));
  EXPECT_TRUE(impls.count("cblas_sgemm 37x29x50, 2 calls, 3 one-thread calls on row blocks of y"));
  backend->set_threads(2);
  std::set<std::string> zoo_labels;
  for (const char* name : {"resnet18", "bert_base_encoder"})
    for (const auto& l : verify_cases(*backend, zoo(name), split_case, record)) zoo_labels.insert(l);
  EXPECT_EQ(zoo_labels, (std::set<std::string>{"sgemm_split", "sgemm_loop_split"}));
  EXPECT_TRUE(
      impls.count("cblas_sgemm 128x2304x768 (batch folded into M), 2 one-thread calls on column blocks of y"))
      << ::testing::PrintToString(impls);
  backend->set_threads(1);
}

// Recurrent layers as one input-projection GEMM over all time steps plus per-step recurrent
// products and the gate math (the equivalent formulation ONNX Runtime runs): lstm_lm's two LSTM
// layers and gru_kws's bidirectional GRU (linear_before_reset), against the reference.
TEST(OpenblasKernels, RecurrentZooLayersMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_OPENBLAS, "openblas");
  std::set<std::string> labels, impls;
  for (const char* m : {"lstm_lm", "gru_kws"})
    for (const auto& l : verify_cases(
             *backend, zoo(m),
             [](const PlannedCase&c) {
               return has_kind(c, {LayerKind::kLSTM, LayerKind::kGRU, LayerKind::kRNN});
             },
             [&impls](const PlannedCase&c, const kernels::Kernel&k) {
               EXPECT_EQ(c.spec.variant.algorithm, "sgemm_standard");
               EXPECT_TRUE(c.work.is_default);
               impls.insert(k.implementation());
               return openblas_label(c, k);
             }))
      labels.insert(l);
  EXPECT_EQ(labels, (std::set<std::string>{"LSTM", "GRU"}));
  // lstm_lm: width 256, 35 tokens, batch 1: one 35×1024×256 GEMM, then 35 products with R (1024×256), as GEMV
  // at batch 1.
  EXPECT_TRUE(
      impls.count("cblas_sgemm X·Wᵀ 35x1024x256 once, then 35 steps × 1 of cblas_sgemv H·Rᵀ 1x1024x256 "
                  "and the gates"))
      << ::testing::PrintToString(impls);
}

// Every form of the ONNX recurrent operators the formulation maps: initial states and Y_h/Y_c,
// reverse and bidirectional, peepholes, GRU with and without linear_before_reset, RNN with Relu,
// batch-first layout, batch 2 (per-step cblas_sgemm), clip and input_forget.
TEST(OpenblasKernels, RecurrentFormsMatchTheReference) {
  REQUIRE_BUILT(FLOORLINE_TEST_OPENBLAS, "openblas");
  constexpr const char* kModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
rec (float[6,2,5] x, float[1,12,5] w, float[1,12,3] r, float[1,24] b, float[1,2,3] h0, float[1,2,3] c0,
     float[2,12,5] w2, float[2,12,3] r2, float[2,24] b2, float[2,9] p2, float[2,2,3] h02,
     float[1,9,5] gw, float[1,9,3] gr, float[1,18] gb, float[2,9,5] gw2, float[2,9,3] gr2, float[2,18] gb2,
     float[1,3,5] rw, float[1,3,3] rr, float[1,6] rb, float[2,6,5] xb)
    => (float y1, float yh1, float yc1, float y2, float y3, float yh3, float y4, float y5, float y6,
        float y7, float y8, float y9, float y10)
{
  y1, yh1, yc1 = LSTM <hidden_size = 3> (x, w, r, b, , h0, c0)
  y2 = LSTM <hidden_size = 3, direction = "reverse", clip = 0.5> (x, w, r)
  y3, yh3 = LSTM <hidden_size = 3, direction = "bidirectional"> (x, w2, r2, b2, , h02, , p2)
  y4 = GRU <hidden_size = 3, direction = "reverse"> (x, gw, gr, gb)
  y5 = GRU <hidden_size = 3, linear_before_reset = 1, direction = "bidirectional"> (x, gw2, gr2, gb2)
  y6 = RNN <hidden_size = 3> (x, rw, rr, rb)
  y7 = RNN <hidden_size = 3, activations = ["Relu"]> (x, rw, rr, rb)
  y8 = LSTM <hidden_size = 3, layout = 1> (xb, w, r, b)
  y9 = GRU <hidden_size = 3, linear_before_reset = 1> (x, gw, gr)
  y10 = LSTM <hidden_size = 3, input_forget = 1> (x, w, r, b)
}
)onnx";
  auto m = mp::process_model_text(kModel, "rec.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  int cases = 0;
  const auto labels = verify_cases(
      *backend, *m, [](const PlannedCase&) { return true; },
      [&cases](const PlannedCase& c, const kernels::Kernel& k) {
        ++cases;
        return openblas_label(c, k);
      });
  EXPECT_EQ(labels, (std::set<std::string>{"LSTM", "GRU", "RNN"}));
  EXPECT_EQ(cases, 10);
}

TEST(OpenblasPlan, MatMulWithTwoDWeightsIsOneGemmAndALoop) {
  REQUIRE_BUILT(FLOORLINE_TEST_OPENBLAS, "openblas");
  const Plan plan = make_plan(zoo("bert_base_encoder"), {backend}, PlanOptions{});
  std::map<std::string, const PlannedCase*> by_name;
  for (const auto& c : plan.cases) by_name[c.spec.name] = &c;
  // The attention projection that oneDNN runs as 128 batched GEMVs: here one 128×768 by 768×2304
  // GEMM (the default) and the loop.
  const std::string qkv = "MatMul|a=128x1x768|b=768x2304|f32";
  ASSERT_TRUE(by_name.count("openblas/sgemm/f32/fp32/" + qkv));
  ASSERT_TRUE(by_name.count("openblas/sgemm_loop/f32/fp32/" + qkv));
  EXPECT_TRUE(by_name["openblas/sgemm/f32/fp32/" + qkv]->work.is_default);
  EXPECT_FALSE(by_name["openblas/sgemm_loop/f32/fp32/" + qkv]->work.is_default);
  auto k = backend->factory()(by_name["openblas/sgemm/f32/fp32/" + qkv]->spec);
  ASSERT_TRUE(k.ok()) << k.error().message;
  EXPECT_EQ((*k)->implementation(), "cblas_sgemm 128x2304x768 (batch folded into M)");
  // Batched operands: a loop only.
  const std::string scores = "MatMul|a=12x128x64|b=12x64x128|f32";
  EXPECT_TRUE(by_name.count("openblas/sgemm_loop/f32/fp32/" + scores));
  EXPECT_FALSE(by_name.count("openblas/sgemm/f32/fp32/" + scores));
}

TEST(CpuBackends, ShareOneSystemRowWithEveryLibraryVersion) {
  if (!FLOORLINE_TEST_XNNPACK || !FLOORLINE_TEST_OPENBLAS)
    GTEST_SKIP() << "XNNPACK or OpenBLAS was not found when this build was configured";
  const Backend* onednn = loaded("onednn");
  const Backend* xnnpack = loaded("xnnpack");
  const Backend* openblas = loaded("openblas");
  ASSERT_TRUE(onednn && xnnpack && openblas);
  // One Gemm (resnet18's fc) timed by each library into one database.
  auto models = zoo("resnet18");
  const Plan full = make_plan(models, {onednn, xnnpack, openblas}, PlanOptions{});
  Plan plan = full;
  plan.cases.clear();
  for (const auto& c : full.cases)
    if (c.spec.problem.kind == LayerKind::kGemm && !c.status && c.work.is_default) plan.cases.push_back(c);
  ASSERT_EQ(plan.cases.size(), 3u);
  const auto path = std::filesystem::temp_directory_path() /
                    ("floorline_cpu_backends_" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  auto db = benchdb::Database::open(path.string());
  ASSERT_TRUE(db.ok()) << db.error().message;
  RunOptions o;
  o.min_time = 0.001;
  o.repetitions = 2;
  o.calibrate = false;
  o.race_margin = 0;  // every library's case timed: on a host where one is 2x another's, racing drops it
  auto sum = run_plan(&*db, models, plan, {onednn, xnnpack, openblas}, o);
  ASSERT_TRUE(sum.ok()) << sum.error().message;
  EXPECT_EQ(sum->passed, 3);
  auto systems = db->query(
      "SELECT count(*), json_extract(libraries, '$.onednn'), json_extract(libraries, '$.xnnpack'), "
      "json_extract(libraries, '$.openblas') FROM systems");
  ASSERT_TRUE(systems.ok()) << systems.error().message;
  const auto& row = systems->rows.at(0);
  EXPECT_EQ(std::get<int64_t>(row[0]), 1);  // one system for the three libraries
  EXPECT_FALSE(std::get<std::string>(row[1]).empty());
  EXPECT_NE(std::get<std::string>(row[2]).find("git"), std::string::npos);  // the Debian package version
  EXPECT_EQ(std::get<std::string>(row[3]).substr(0, 2), "0.");
  // One command, one run of that system, naming the three libraries.
  auto runs = db->query("SELECT count(*), json_extract(min(options), '$.backend') FROM runs");
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  EXPECT_EQ(std::get<int64_t>(runs->rows.at(0).at(0)), 1);
  EXPECT_EQ(std::get<std::string>(runs->rows.at(0).at(1)), "onednn,xnnpack,openblas");
  // best_measurements holds one best case for the config, from whichever library was fastest.
  auto best = db->query("SELECT count(*) FROM best_measurements");
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(std::get<int64_t>(best->rows.at(0).at(0)), 1);
  { const benchdb::Database closed = std::move(*db); }  // closed first, so SQLite removes -wal and -shm
  std::filesystem::remove(path);
}

TEST(CpuBackends, ReplayWiresXnnpackNhwcCasesToOnednnCases) {
  REQUIRE_BUILT(FLOORLINE_TEST_XNNPACK, "xnnpack");
  const Backend* onednn = loaded("onednn");
  ASSERT_NE(onednn, nullptr);
  // squeezenet1_1 with XNNPACK's case for every layer it runs (NHWC convolutions and pools, Relu)
  // and oneDNN's default for the rest (Concat): values cross between the libraries.
  const auto models = zoo("squeezenet1_1");
  ASSERT_EQ(models.size(), 1u);
  const Plan plan = make_plan(models, {backend, onednn}, PlanOptions{});
  std::map<std::string, ChosenCase> chosen;
  for (const auto& c : plan.cases) {
    if (c.status || !c.work.is_default || !c.spec.variant.fusion.empty() || !c.spec.feeds.empty()) continue;
    auto it = chosen.find(c.spec.problem.key);
    if (it == chosen.end() || c.spec.variant.backend == "xnnpack") chosen[c.spec.problem.key] = {c.spec, 1.0};
  }
  int xnnpack_layers = 0;
  for (const auto& [key, c] : chosen) xnnpack_layers += c.spec.variant.backend == "xnnpack" ? 1 : 0;
  ASSERT_GT(xnnpack_layers, 20);
  ReplayOptions o;
  o.min_time = 0.001;
  o.repetitions = 1;
  o.warmup_seconds = 0;
  o.profile_passes = 1;
  auto r = replay_model(models[0], chosen, *onednn, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->layers_missing, 0);
  EXPECT_EQ(r->operands_unwired, 0);
  EXPECT_GT(r->conversions, 0);  // NHWC → plain before each Concat, plain → NHWC after it
  // 26 convolutions chained on weights at their fan-in's scale: every value stays normal and finite.
  EXPECT_EQ(r->denormal_steps, 0);
  EXPECT_EQ(r->nonfinite_steps, 0);
  EXPECT_GT(r->median_us, 0);
  // A conversion is XNNPACK's or oneDNN's (it reads XNNPACK's NHWC ports as acdb), whichever ran
  // faster alone, at the faster thread count, and runs on that library's pool: its step is that
  // library's, so that the replay parks that pool before the next library's step (not the other's,
  // whose step would leave these workers spinning through it). Its time alone is measured.
  int conversion_steps = 0;
  for (const auto& s : r->steps) {
    if (s.conversion) {
      EXPECT_TRUE(s.backend == "xnnpack" || s.backend == "onednn") << s.label;
      EXPECT_GT(s.alone_us, 0) << s.label;
      EXPECT_EQ(s.threads, 1) << s.label;  // the one count of this replay's budget (o.threads 1)
    } else {
      EXPECT_EQ(s.backend, chosen.at(s.key).spec.variant.backend) << s.label;
    }
    conversion_steps += s.conversion ? 1 : 0;
  }
  EXPECT_EQ(conversion_steps, r->conversions);
  // With a thread budget of 2, each conversion is built and timed at 1 and 2 threads and runs at
  // the faster count; the layers keep their cases' counts.
  o.threads = 2;
  o.conversion_threads = {1, 2};
  auto r2 = replay_model(models[0], chosen, *onednn, o);
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  EXPECT_EQ(r2->operands_unwired, 0);
  EXPECT_EQ(r2->conversions, r->conversions);
  for (const auto& s : r2->steps) {
    if (!s.conversion) continue;
    EXPECT_TRUE(s.threads == 1 || s.threads == 2) << s.label;
    EXPECT_GT(s.alone_us, 0) << s.label;
  }
}

// Weights are filled on ±√(3 / fan-in) (kernels::fill_half_width) in every CPU backend, so that a
// layer's output keeps its input's scale and a chain of cases (the replay) keeps f32's normal range.
// resnet18's 64-channel 3×3 convolution (fan-in 576) and its Gemm (fan-in 512), each run once on its
// own random input (uniform in [-1, 1), RMS 0.577) and bias (the same): the output's RMS is about
// √2 × the input's (the weights' term plus the bias's); with weights in [-1, 1) it would be
// √(fan-in / 3) ≈ 13 × larger.
TEST(CpuBackends, ALayersOutputKeepsItsInputsScaleInEveryBackend) {
  const auto models = zoo("resnet18");
  ASSERT_EQ(models.size(), 1u);
  auto rms = [](const kernels::Port& port) {
    const auto* v = static_cast<const float*>(port.data);
    const int64_t n = port.bytes / 4;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
    return std::sqrt(sum / static_cast<double>(std::max<int64_t>(n, 1)));
  };
  std::vector<std::string> names = {"onednn"};
  if (FLOORLINE_TEST_XNNPACK) names.push_back("xnnpack");
  if (FLOORLINE_TEST_OPENBLAS) names.push_back("openblas");
  for (const auto& name : names) {
    const Backend* backend = loaded(name);
    ASSERT_NE(backend, nullptr);
    const Plan plan = make_plan(models, {backend}, PlanOptions{});
    const auto factory = backend->factory();
    std::set<std::string> checked;
    for (const auto& c : plan.cases) {
      const auto& p = c.spec.problem;
      const bool conv64 =
          p.kind == LayerKind::kConv && p.inputs[1].shape == std::vector<int64_t>{64, 64, 3, 3};
      const bool fc = p.kind == LayerKind::kGemm;
      if (c.status || !c.spec.variant.fusion.empty() || !c.spec.feeds.empty() || !(conv64 || fc) ||
          checked.count(p.op))
        continue;
      EXPECT_NEAR(kernels::fill_half_width(p, 1), std::sqrt(3.0 / (conv64 ? 576 : 512)), 1e-6) << c.spec.name;
      auto k = factory(c.spec);
      ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
      (*k)->run();
      const auto x = (*k)->port(false, 0), y = (*k)->port(true, 0);
      ASSERT_TRUE(x && y) << c.spec.name;
      const double ratio = rms(*y) / rms(*x);
      EXPECT_GT(ratio, 0.7) << c.spec.name;
      EXPECT_LT(ratio, 2.5) << c.spec.name;
      checked.insert(p.op);
    }
    EXPECT_EQ(checked, (std::set<std::string>{"Conv", "Gemm"})) << name;
  }
}

// Where XNNPACK keeps pthreadpool's own threads (a build whose XNNPACK imports a pthreadpool function
// the kernel library's OpenMP pool does not define): parked (Backend::park_threads), its workers sleep: a
// pool of 2 threads that just ran a case uses under 3 ms of CPU over the next 30 ms. Unparked they spin for
// their next call (a million iterations of pause, about 10 ms on the 2-core Xeon), and the bench and the
// replay would hand the next library a machine with a core taken. The unparked spin is measured first: where
// it ends within 3 ms (a CPU whose pause is a few cycles) parking cannot be told apart, and the test says so
// instead of passing.
TEST(CpuBackends, ParkedXnnpackWorkersSleep) {
  REQUIRE_BUILT(FLOORLINE_TEST_XNNPACK, "xnnpack");
  benchdb::SystemRow row;
  backend->describe(row);
  if (row.libraries["xnnpack"].find("(openmp pool)") != std::string::npos)
    GTEST_SKIP()
        << "XNNPACK runs on the OpenMP pool (" << row.libraries["xnnpack"]
        << "): its workers are libgomp's, and nothing parks them (xnnpack_pool_tests checks the pool)";
  auto models = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
one (float[1,64,112,112] x) => (float y)
{
  y = Sigmoid (x)
}
)onnx",
                                       "one.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const Plan plan = make_plan(*models, {backend}, PlanOptions{});
  const PlannedCase* sigmoid = nullptr;
  for (const auto& c : plan.cases)
    if (!c.status && c.spec.problem.op == "Sigmoid") sigmoid = &c;
  ASSERT_NE(sigmoid, nullptr);
  backend->set_threads(2);
  auto k = backend->factory()(sigmoid->spec);
  ASSERT_TRUE(k.ok()) << k.error().message;
  auto cpu_seconds = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  // CPU time of the process over 30 ms of sleep right after 20 calls, parked first or not.
  auto idle_cpu_ms = [&](bool park) {
    for (int i = 0; i < 20; ++i) (*k)->run();
    if (park) backend->park_threads();
    const double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return (cpu_seconds() - before) * 1e3;
  };
  const double spinning_ms = idle_cpu_ms(false);
  const double parked_ms = idle_cpu_ms(true);
  backend->set_threads(1);
  if (spinning_ms < 3.0)
    GTEST_SKIP() << "unparked, the workers spun only " << spinning_ms
                 << " ms of CPU here: parking cannot be told apart";
  EXPECT_LT(parked_ms, 3.0) << "CPU time while the process slept: " << parked_ms << " ms parked, "
                            << spinning_ms << " ms unparked";
}

}  // namespace
}  // namespace floorline::gen
