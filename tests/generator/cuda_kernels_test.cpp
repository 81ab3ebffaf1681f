// The CUDA kernels on a GPU (CTest label `gpu`): every planned case of real zoo models is built and
// its output checked against the plain reference computation, as the oneDNN backend's are; then
// timing (events, cold cache) and the device samples. Without a usable GPU each test reports itself
// skipped, with the CUDA error that says why.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "floorline/generator/cache_state.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/cuda.hpp"

namespace floorline::gen {
namespace {

#define REQUIRE_GPU()                                                                 \
  do {                                                                                \
    if (auto st = kernels::cuda_available(); !st) GTEST_SKIP() << st.error().message; \
  } while (0)

// The checkout's root: FLOORLINE_SOURCE_DIR from the environment (scripts/gpu-run, on another
// machine), else where this test was built.
std::string source_dir() {
  const char* env = std::getenv("FLOORLINE_SOURCE_DIR");
  return env && *env ? env : FLOORLINE_SOURCE_DIR;
}

std::vector<mp::ModelIR> zoo_model(const std::string& name) {
  auto r = mp::process_model(source_dir() + "/models/zoo/" + name + ".onnx", {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

struct Tally {
  int built = 0, verified = 0, not_verifiable = 0, unsupported = 0, skipped = 0;
  std::vector<std::string> failures;
  // Layer configs (key, math mode, fusion) the plan times, those with a case verified, and those
  // with a case built whose output has no reference (Gather): every planned one must be measurable.
  std::set<std::string> planned, verified_configs, unverifiable_configs;
};

// Builds and verifies every case the plan times for `models` in `dtypes`.
Tally verify_plan(const std::vector<mp::ModelIR>& models, const std::vector<DType>& dtypes) {
  PlanOptions o;
  o.dtypes = dtypes;
  o.max_impls = 0;  // every algorithm the plan offers
  o.fused_all = true;
  const Plan plan = make_plan(models, {find_backend("cuda")}, o);
  Tally t;
  for (const auto& c : plan.cases) {
    if (c.status) continue;
    const bool conversion = !c.spec.feeds.empty();
    const std::string config = c.spec.problem.key + " " +
                               std::string(math_mode_name(c.spec.variant.math_mode)) + " " +
                               c.spec.variant.fusion;
    if (!conversion) t.planned.insert(config);
    auto k = kernels::make_cuda_kernel(c.spec);
    if (!k) {
      const std::string& m = k.error().message;
      if (k.error().code == Disposition::kUnsupported)
        ++t.unsupported;
      else if (k.error().code == Disposition::kSkipped)
        ++t.skipped;
      else
        t.failures.push_back(c.spec.name + ": " + m);
      continue;
    }
    ++t.built;
    auto v = (*k)->verify();
    if (v.ok()) {
      ++t.verified;
      if (!conversion) t.verified_configs.insert(config);
    } else if (v.error().code == Disposition::kNotVerifiable) {
      ++t.not_verifiable;
      if (!conversion) t.unverifiable_configs.insert(config);
    } else {
      t.failures.push_back(c.spec.name + " (" + (*k)->implementation() + "): " + v.error().message);
    }
  }
  return t;
}

// No case failed, and every layer config the plan times has a case that passed verification (or,
// for an op without a reference, one that was built): each layer of the models is measurable.
void expect_clean(const Tally& t) {
  for (const auto& f : t.failures) ADD_FAILURE() << f;
  EXPECT_GT(t.verified, 0);
  for (const auto& config : t.planned)
    if (!t.verified_configs.count(config) && !t.unverifiable_configs.count(config))
      ADD_FAILURE() << "no case of " << config << " could be built and verified";
  std::printf("built %d, verified %d, not verifiable %d, unsupported %d, skipped %d, failed %zu\n", t.built,
              t.verified, t.not_verifiable, t.unsupported, t.skipped, t.failures.size());
}

TEST(CudaKernelsGpu, SqueezeNetEveryCaseMatchesTheReferenceInF32) {
  REQUIRE_GPU();
  const auto models = zoo_model("squeezenet1_1");
  const Tally t = verify_plan(models, {DType::kF32});
  expect_clean(t);
}

TEST(CudaKernelsGpu, ResNet18FusedAndHalfPrecisionCasesMatchTheReference) {
  REQUIRE_GPU();
  const Tally t = verify_plan(zoo_model("resnet18"), {DType::kF32, DType::kF16, DType::kBF16});
  expect_clean(t);
  bool fused = false;
  for (const auto& k : t.verified_configs) fused = fused || k.find("Add+Relu") != std::string::npos;
  EXPECT_TRUE(fused) << "conv+bias+residual+ReLU through cudnnConvolutionBiasActivationForward";
}

TEST(CudaKernelsGpu, MobileNetV3AndBertOpsMatchTheReference) {
  REQUIRE_GPU();
  auto models = zoo_model("mobilenet_v3_small");
  for (auto& m : zoo_model("bert_base_encoder")) models.push_back(std::move(m));
  for (auto& m : zoo_model("lraspp_mobilenet_v3_large")) models.push_back(std::move(m));
  const Tally t = verify_plan(models, {DType::kF32});
  expect_clean(t);
}

// lstm_lm's LSTMs and gru_kws's bidirectional GRUs on cudnnRNNForward.
TEST(CudaKernelsGpu, RecurrentZooLayersMatchTheReference) {
  REQUIRE_GPU();
  auto models = zoo_model("lstm_lm");
  for (auto& m : zoo_model("gru_kws")) models.push_back(std::move(m));
  const Tally t = verify_plan(models, {DType::kF32});
  expect_clean(t);
  bool lstm = false, gru = false;
  for (const auto& k : t.verified_configs) {
    lstm = lstm || k.rfind("LSTM|", 0) == 0;
    gru = gru || k.rfind("GRU|", 0) == 0;
  }
  EXPECT_TRUE(lstm && gru) << "an LSTM and a GRU case verified";
}

// resnet18_qdq's int8 layers: its convolutions on cuDNN's int8 convolution (NHWC) and its
// classifier Gemm on cuBLASLt's int8 matmul, each checked against the reference's symmetric int8
// form (s8 operands, no zero points, the case's output scales); every planned int8 config verified.
TEST(CudaKernelsGpu, QuantizedResnet18Int8CasesMatchTheReference) {
  REQUIRE_GPU();
  const Tally t = verify_plan(zoo_model("resnet18_qdq"), {DType::kInt8});
  expect_clean(t);
  int conv = 0, gemm = 0;
  for (const auto& k : t.verified_configs) {
    conv += k.rfind("Conv|", 0) == 0 ? 1 : 0;
    gemm += k.rfind("Gemm|", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(conv, 14) << "every int8 convolution config but the first (3 input channels)";
  EXPECT_EQ(gemm, 1);
}

// A case of the cuda backend in f32 (fp32 math) with this algorithm; the caller fills the problem.
kernels::CaseSpec f32_case(const std::string& algorithm) {
  kernels::CaseSpec spec;
  spec.variant.backend = "cuda";
  spec.variant.algorithm = algorithm;
  spec.variant.dtype = DType::kF32;
  spec.variant.math_mode = MathMode::kFp32;
  return spec;
}

// cuBLAS's f32 GEMM for a MatMul [m, k] · [k, n].
kernels::CaseSpec cublas_matmul(int64_t m, int64_t k, int64_t n) {
  kernels::CaseSpec spec = f32_case("cublas_gemm");
  spec.problem.kind = LayerKind::kMatMul;
  spec.problem.op = "MatMul";
  spec.problem.key = fmt::format("MatMul|a={}x{}|b={}x{}|f32", m, k, k, n);
  spec.problem.inputs = {{"a", {m, k}}, {"b", {k, n}}};
  spec.problem.outputs = {{"y", {m, n}}};
  return spec;
}

TEST(CudaKernelsGpu, TimedCallsUseEventsAndSampleTheDevice) {
  REQUIRE_GPU();
  // 1024³: the reference's plain loops check it in seconds (2048³ took 50 s on the H100 machine's CPU).
  auto k = kernels::make_cuda_kernel(cublas_matmul(1024, 1024, 1024));
  ASSERT_TRUE(k.ok()) << k.error().message;
  ASSERT_TRUE((*k)->verify().ok());
  (*k)->sample_device(false);
  double warm = 0;
  for (int i = 0; i < 5; ++i) warm = (*k)->timed_run();
  kernels::set_cuda_cold_cache(true);
  double cold = 0;
  for (int i = 0; i < 5; ++i) cold = (*k)->timed_run();
  kernels::set_cuda_cold_cache(false);
  (*k)->sample_device(true);
  // 2.1 GFLOP: over 10 µs on any GPU (42 µs at the H100's 51 TFLOP/s fp32), and under a second.
  EXPECT_GT(warm, 1e-5);
  EXPECT_LT(warm, 1.0);
  EXPECT_GT(cold, 1e-5);
  const auto counters = (*k)->device_counters();
  if (!counters.empty()) {
    EXPECT_TRUE(counters.count("sm_clock_mhz_before"));
    EXPECT_TRUE(counters.count("sm_clock_mhz_after"));
    EXPECT_GT(counters.at("sm_clock_mhz_after"), 0);
  } else {
    std::printf("NVML is not available: no clock, temperature or throttle samples\n");
  }
  const auto info = kernels::cuda_device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.sm_count, 0);
  EXPECT_EQ(info.uuid.rfind("GPU-", 0), 0u);
}

// The cache stage's device path (time_on_device) on the CUDA backend: a matrix-vector product
// 1x8192 · 8192x1024 reads 32 MiB of weights per call, which the L2 of a large GPU (50 MiB on the
// H100) keeps between calls and the cold-cache mode's flush (twice the L2) evicts.
TEST(CudaKernelsGpu, TheCacheStagesMemoryStateFlushesTheL2) {
  REQUIRE_GPU();
  const Backend* cuda = find_backend("cuda");
  ASSERT_NE(cuda, nullptr);
  auto k = kernels::make_cuda_kernel(cublas_matmul(1, 8192, 1024));
  ASSERT_TRUE(k.ok()) << k.error().message;
  ASSERT_TRUE((*k)->verify().ok());
  const auto t = time_on_device(**k, *cuda, {CacheState::kWarm, CacheState::kLlc, CacheState::kMemory}, 9);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_FALSE(kernels::cuda_cold_cache());  // the mode is off again
  const auto info = kernels::cuda_device_info();
  EXPECT_EQ(t[2].flush_bytes, 2 * std::max<int64_t>(info.l2_bytes, int64_t{1} << 20));  // device.cpp's size
  EXPECT_EQ(cuda->cold_cache_bytes(), t[2].flush_bytes);
  std::printf("1x8192 · 8192x1024 on %s (L2 %.0f MiB): warm %.1f µs, llc %.1f, memory %.1f\n",
              info.name.c_str(), static_cast<double>(info.l2_bytes) / 1048576, t[0].min_us, t[1].min_us,
              t[2].min_us);
  for (const CacheTiming& s : t) EXPECT_GT(s.min_us, 0.5);  // 32 MiB: a microsecond or more anywhere
  // Weights the L2 holds are faster warm than from device memory; beyond it, both read memory.
  if (info.l2_bytes > (int64_t{40} << 20)) {
    EXPECT_GT(t[2].min_us, t[0].min_us);
  }
  EXPECT_GE(t[2].min_us, 0.9 * t[0].min_us);
}

TEST(CudaKernelsGpu, OversizedWorkspaceOrUnsupportedAlgorithmsBecomeStatuses) {
  REQUIRE_GPU();
  // WINOGRAD implements 3×3 filters only: a 1×1 conv is unsupported, never a crash or a failure.
  kernels::CaseSpec spec = f32_case("cudnn_conv:WINOGRAD");
  spec.problem.kind = LayerKind::kConv;
  spec.problem.op = "Conv";
  spec.problem.key = "Conv|1x1";
  spec.problem.inputs = {{"x", {1, 64, 56, 56}}, {"w", {256, 64, 1, 1}}};
  spec.problem.outputs = {{"y", {1, 256, 56, 56}}};
  spec.problem.ints = {{"pads", {0, 0, 0, 0}}, {"strides", {1, 1}}, {"dil", {1, 1}}, {"group", {1}}};
  auto k = kernels::make_cuda_kernel(spec);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, Disposition::kUnsupported) << k.error().message;
}

}  // namespace
}  // namespace floorline::gen
