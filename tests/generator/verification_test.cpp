// Per-element verification (reference.hpp): the tolerance rule on hand-computed values, one wrong
// element in a large output failing every CPU backend's verify(), and real long accumulations
// passing it.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/onednn.hpp"
#include "floorline/kernels/plain_kernel.hpp"
#include "floorline/kernels/reference.hpp"
#include "floorline/model_processor/model.hpp"

#ifndef FLOORLINE_TEST_XNNPACK
#define FLOORLINE_TEST_XNNPACK 0
#endif
#ifndef FLOORLINE_TEST_OPENBLAS
#define FLOORLINE_TEST_OPENBLAS 0
#endif

namespace floorline::gen {
namespace {

using kernels::HostTensor;
using kernels::Problem;

Problem conv_problem(int64_t c, int64_t k) {
  Problem p;
  p.kind = LayerKind::kConv;
  p.op = "Conv";
  p.inputs = {{"x", {1, c, 7, 7}}, {"w", {c, c, k, k}}};
  p.outputs = {{"y", {1, c, 7, 7}}};
  p.ints["group"] = {1};
  return p;
}

TEST(Verification, ToleranceFollowsTheRule) {
  constexpr double u = 0x1p-24;
  const Problem conv = conv_problem(512, 3);
  EXPECT_EQ(kernels::accumulation_length(conv), 4608);  // 512 · 3 · 3
  auto t = kernels::verify_tolerance(conv);
  EXPECT_DOUBLE_EQ(t.rtol, (16 + 8 * std::sqrt(4608.0)) * u);  // 3.33e-5
  EXPECT_DOUBLE_EQ(t.rms_atol, t.rtol);
  EXPECT_EQ(t.step, 0);
  EXPECT_NE(t.rule.find("K=4608"), std::string::npos) << t.rule;
  // Winograd: 64 times; bf16 storage: 4 bf16 roundings more; tf32: 8 tf32 roundings more.
  EXPECT_DOUBLE_EQ(
      kernels::verify_tolerance(conv, DType::kF32, MathMode::kFp32, kernels::FastAlgorithm::kWinograd).rtol,
      64 * t.rtol);
  EXPECT_DOUBLE_EQ(kernels::verify_tolerance(conv, DType::kBF16, MathMode::kBF16).rtol, t.rtol + 4 * 0x1p-8);
  EXPECT_DOUBLE_EQ(kernels::verify_tolerance(conv, DType::kF32, MathMode::kTf32).rtol, t.rtol + 8 * 0x1p-11);
  // int8: one quantization step, nothing relative.
  t = kernels::verify_tolerance(conv, DType::kInt8, MathMode::kInt8);
  EXPECT_EQ(t.step, 1);
  EXPECT_EQ(t.rtol, 0);

  Problem gemm;
  gemm.kind = LayerKind::kGemm;
  gemm.op = "Gemm";
  gemm.inputs = {{"a", {300, 20}}, {"b", {300, 7}}};
  gemm.ints["transA"] = {1};
  EXPECT_EQ(kernels::accumulation_length(gemm), 300);
  Problem concat;
  concat.kind = LayerKind::kConcat;
  concat.op = "Concat";
  concat.inputs = {{"x0", {1, 3, 4, 4}}, {"x1", {1, 5, 4, 4}}};
  EXPECT_EQ(kernels::verify_tolerance(concat).rtol, 0);  // exact
  Problem tanh;
  tanh.kind = LayerKind::kTanh;
  tanh.op = "Tanh";
  tanh.inputs = {{"x", {10}}};
  EXPECT_DOUBLE_EQ(kernels::verify_tolerance(tanh).rtol, 16 * u);
  Problem pool;
  pool.kind = LayerKind::kGlobalAveragePool;
  pool.op = "GlobalAveragePool";
  pool.inputs = {{"x", {1, 8, 7, 7}}};
  EXPECT_EQ(kernels::accumulation_length(pool), 49);
}

TEST(Verification, OneWrongElementInAMillionFails) {
  const int64_t n = int64_t{1} << 20;
  HostTensor want{{4, 256, 1024}, std::vector<float>(static_cast<size_t>(n))};
  kernels::fill_uniform(want.data.data(), n, 5);
  std::vector<float> got = want.data;
  const kernels::Tolerance tol = kernels::verify_tolerance(conv_problem(512, 3));
  EXPECT_TRUE(kernels::compare_output(got.data(), want, tol).ok());
  EXPECT_EQ(kernels::last_worst_ratio(), 0);
  // Element 765432 = [2,235,504] off by 1e-3 of the output's RMS (about 0.58): about 11 times the
  // tolerance there. The relative L2 error of the whole output is 1e-6, which the former global
  // check (1e-3) accepted.
  double sq = 0;
  for (float v : want.data) sq += static_cast<double>(v) * v;
  const double rms = std::sqrt(sq / static_cast<double>(n));
  got[765432] += static_cast<float>(1e-3 * rms);
  const Status s = kernels::compare_output(got.data(), want, tol);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  EXPECT_NE(m.find("1 of 1048576 elements"), std::string::npos) << m;
  EXPECT_NE(m.find("element 765432 [2,235,504]"), std::string::npos) << m;
  EXPECT_NE(m.find("K=4608"), std::string::npos) << m;
  EXPECT_GT(kernels::last_worst_ratio(), 5);
  // Half the tolerance passes.
  got[765432] = want.data[765432] + static_cast<float>(0.5 * tol.rtol * (rms + std::abs(want.data[765432])));
  EXPECT_TRUE(kernels::compare_output(got.data(), want, tol).ok());
  // NaN: where both are NaN it passes; in one only it fails.
  got[7] = want.data[7] = std::nanf("");
  EXPECT_TRUE(kernels::compare_output(got.data(), want, tol).ok());
  got[8] = std::nanf("");
  EXPECT_FALSE(kernels::compare_output(got.data(), want, tol).ok());
  // An exact kind (Concat) tolerates no difference at all: one ulp fails.
  Problem concat;
  concat.kind = LayerKind::kConcat;
  concat.op = "Concat";
  got = want.data;
  got[9] = std::nextafter(got[9], 2.f);
  EXPECT_FALSE(kernels::compare_output(got.data(), want, kernels::verify_tolerance(concat)).ok());
}

// --- real kernels of every CPU backend ------------------------------------------------------------

std::vector<mp::ModelIR> zoo(const std::string& name) {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", {});
  EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

const Backend* loaded(const std::string& name) {
  const Backend* b = find_backend(name);
  if (!b || !plugin_path(*b).ok()) {
    ADD_FAILURE() << name << " does not load";
    return nullptr;
  }
  return b;
}

// The backend's timed cases of resnet18's Conv whose weights have shape `w` (no layout conversion).
std::vector<PlannedCase> resnet18_convs(const Backend& backend, const std::vector<int64_t>& w) {
  static const auto models = zoo("resnet18");
  const Plan plan = make_plan(models, {&backend}, PlanOptions{});
  std::vector<PlannedCase> out;
  for (const auto& c : plan.cases)
    if (!c.status && c.spec.feeds.empty() && c.spec.problem.kind == LayerKind::kConv &&
        c.spec.problem.inputs.size() > 1 && c.spec.problem.inputs[1].shape == w)
      out.push_back(c);
  return out;
}

// A _split case (oneDNN's convolution_direct_split) runs at two threads: at one it is the plain case.
class ThreadsFor {
 public:
  ThreadsFor(const Backend& backend, const PlannedCase& c)
      : backend_(backend), split_(c.spec.variant.algorithm.find("_split") != std::string::npos) {
    if (split_) backend_.set_threads(2);
  }
  ~ThreadsFor() {
    if (split_) backend_.set_threads(1);
  }

 private:
  const Backend& backend_;
  bool split_;
};

// verify() of `k` passes on its real output, and fails naming element `index` (multi-index `at`,
// of `n`) when that one element is off by 1e-3 of the output's RMS.
void expect_one_wrong_element_fails(kernels::Kernel& k, const std::string& name, int64_t index,
                                    const std::string& at, int64_t n) {
  const Status ok = k.verify();
  EXPECT_TRUE(ok.ok()) << name << ": " << (ok.ok() ? "" : ok.error().message);
  Status bad;
  {
    kernels::OutputFault fault(index, 1e-3);
    bad = k.verify();
  }
  ASSERT_FALSE(bad.ok()) << name << " accepted one wrong element";
  const std::string& m = bad.error().message;
  EXPECT_NE(m.find(fmt::format("1 of {} elements", n)), std::string::npos) << name << ": " << m;
  EXPECT_NE(m.find(fmt::format("element {} {}", index, at)), std::string::npos) << name << ": " << m;
}

// resnet18's stem: 1x3x224x224 ⊛ 64x3x7x7 → 1x64x112x112, 802816 outputs; element 500001 is
// [0,39,96,33].
void stem_fails_on_one_wrong_element(const std::string& backend_name) {
  const Backend* backend = loaded(backend_name);
  ASSERT_NE(backend, nullptr);
  const auto cases = resnet18_convs(*backend, {64, 3, 7, 7});
  ASSERT_FALSE(cases.empty()) << backend_name;
  const auto factory = backend->factory();
  for (const auto& c : cases) {
    const ThreadsFor threads(*backend, c);
    auto k = factory(c.spec);
    ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
    expect_one_wrong_element_fails(**k, c.spec.name, 500001, "[0,39,96,33]", 802816);
  }
}

TEST(Verification, OneWrongElementFailsOnednn) {
  stem_fails_on_one_wrong_element("onednn");
}

TEST(Verification, OneWrongElementFailsXnnpack) {
  if (!FLOORLINE_TEST_XNNPACK) GTEST_SKIP() << "XNNPACK was not found when this build was configured";
  stem_fails_on_one_wrong_element("xnnpack");
}

TEST(Verification, OneWrongElementFailsOpenblas) {
  if (!FLOORLINE_TEST_OPENBLAS) GTEST_SKIP() << "OpenBLAS was not found when this build was configured";
  stem_fails_on_one_wrong_element("openblas");
}

// Floorline's own kernels: softmax over the last axis of 1x1024x1024 (K = 1024).
TEST(Verification, OneWrongElementFailsOwnKernels) {
  kernels::CaseSpec spec;
  spec.problem.kind = LayerKind::kSoftmax;
  spec.problem.op = "Softmax";
  spec.problem.key = "Softmax";
  spec.problem.inputs = {{"x", {1, 1024, 1024}}};
  spec.problem.outputs = {{"y", {1, 1024, 1024}}};
  spec.problem.ints["axis"] = {2};
  spec.variant.backend = "floorline";
  spec.variant.algorithm = "softmax";
  spec.variant.dtype = DType::kF32;
  const Backend* floorline = loaded("floorline");
  ASSERT_NE(floorline, nullptr);
  auto k = floorline->factory()(spec);
  ASSERT_TRUE(k.ok()) << k.error().message;
  expect_one_wrong_element_fails(**k, "own softmax", 654321, "[0,638,1009]", 1048576);
}

// The longest sums of resnet18, 512x512x3x3 convolutions (K = 4608), verify on every CPU backend
// and every implementation planned, in strict f32.
TEST(Verification, LongAccumulationsPassOnEveryCpuBackend) {
  std::vector<std::string> names = {"onednn"};
  if (FLOORLINE_TEST_XNNPACK) names.push_back("xnnpack");
  if (FLOORLINE_TEST_OPENBLAS) names.push_back("openblas");
  for (const auto& name : names) {
    const Backend* backend = loaded(name);
    ASSERT_NE(backend, nullptr);
    const auto cases = resnet18_convs(*backend, {512, 512, 3, 3});
    ASSERT_FALSE(cases.empty()) << name;
    const auto factory = backend->factory();
    for (const auto& c : cases) {
      EXPECT_EQ(kernels::accumulation_length(c.spec.problem), 4608);
      const ThreadsFor threads(*backend, c);
      auto k = factory(c.spec);
      ASSERT_TRUE(k.ok()) << c.spec.name << ": " << k.error().message;
      const Status v = (*k)->verify();
      EXPECT_TRUE(v.ok()) << c.spec.name << ": " << (v.ok() ? "" : v.error().message);
      // A real rounding error, within the tolerance.
      EXPECT_GT(kernels::last_worst_ratio(), 0) << c.spec.name;
      EXPECT_LT(kernels::last_worst_ratio(), 1) << c.spec.name;
      std::printf("%s: worst element at %.3f of its tolerance\n", c.spec.name.c_str(),
                  kernels::last_worst_ratio());
    }
  }
}

}  // namespace
}  // namespace floorline::gen
