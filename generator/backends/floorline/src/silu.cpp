// silu: SiLU, x · sigmoid(x), in one pass: a Sigmoid with its Mul by its own input fused (post-op
// MulInput, mp::fusion_matches), as ONNX Runtime runs the pair (its QuickGelu node).
//
// Why: EfficientNet's SiLUs ran as two cases (XNNPACK's sigmoid, then a Mul), each reading and
// writing the whole tensor, and oneDNN's swish (one pass) is slower than both; ONNX Runtime's fused
// node beat their sum: 56.5 µs against 35.8 + 37.5 for efficientnet_b0's 1x32x112x112 on one core
// of the 2-core Zen 4 EPYC (79 of the per-layer bound violations at batch 1 on that host were these).
//
// y = x / (1 + e^−x), x clamped to [−87, 87] (e^87 is finite; y is ~0 below, x above).
// e^−x = 2^n · e^t with n = round(−x / ln 2), t = −x − n ln 2, e^t by a degree-5 polynomial fitted
// to it on |t| ≤ ln 2 / 2 (relative error about 2e-7; the coefficients are the usual minimax ones
// of f32 exp kernels), 2^n by vscalefps with AVX-512F (16 lanes, two vectors a step), by the
// exponent bits with AVX2 and FMA (8 lanes);
// 1 / (1 + e^−x) by the reciprocal estimate and one Newton step. Largest relative error against the
// double-precision formula: 1.4e-6, at the clamp. The ISA cap picks the build (kernel_target()); the
// tail, and a CPU with neither, run the formula in double. Chunks of 16 Ki floats for the threads.
#include <cmath>
#include <iterator>
#include <limits>

#include "floorline/common/isa.hpp"
#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

constexpr int64_t kChunk = int64_t{1} << 14;

// e^t ≈ 1 + t·(c1 + t·(c2 + t·(c3 + t·(c4 + t·c5)))) on |t| ≤ ln 2 / 2.
constexpr float kC5 = 0x1.0F9F9Cp-7f, kC4 = 0x1.573A1Ap-5f, kC3 = 0x1.555A80p-3f, kC2 = 0x1.FFFDC6p-2f,
                kC1 = 0x1.FFFFF6p-1f, kLn2 = 0x1.62E430p-1f, kMinusLog2e = -0x1.715476p0f;

// (GCC 12 takes the _mm512_undefined_ps() source of the unmasked intrinsics for an uninitialized
// read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 silu16(__m512 v) {
  const __m512 one = _mm512_set1_ps(1.f);
  // x clamped to [-87, 87] for e^−x (the operand order keeps a NaN: maxps and minps return their
  // second operand where either is one); below −87 the product takes −87 too (y about 0, as the
  // formula's), above 87 the product takes x (1 / (1 + e^−87) is 1).
  const __m512 xl = _mm512_max_ps(_mm512_set1_ps(-87.f), v);
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(87.f), xl);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kMinusLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 t = _mm512_fnmsub_ps(k, _mm512_set1_ps(kLn2), xc);  // −x − n ln 2
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kC5), t, _mm512_set1_ps(kC4));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC3));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC2));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kC1));
  p = _mm512_fmadd_ps(p, t, one);
  const __m512 den = _mm512_add_ps(one, _mm512_scalef_ps(p, k));  // 1 + e^−x
  __m512 d = _mm512_rcp14_ps(den);
  d = _mm512_fmadd_ps(_mm512_fnmadd_ps(den, d, one), d, d);
  return _mm512_mul_ps(xl, d);
}

[[gnu::target("avx512f")]] int64_t silu_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = silu16(_mm512_loadu_ps(x + i)), b = silu16(_mm512_loadu_ps(x + i + 16));
    _mm512_storeu_ps(y + i, a);
    _mm512_storeu_ps(y + i + 16, b);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
  return i;
}
#pragma GCC diagnostic pop

[[gnu::target("avx2,fma"), gnu::always_inline]] inline __m256 silu8(__m256 v) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 xl = _mm256_max_ps(_mm256_set1_ps(-87.f), v);  // as silu16's
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(87.f), xl);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kMinusLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 t = _mm256_fnmsub_ps(k, _mm256_set1_ps(kLn2), xc);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC5), t, _mm256_set1_ps(kC4));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC3));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC2));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kC1));
  p = _mm256_fmadd_ps(p, t, one);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  const __m256 den = _mm256_fmadd_ps(p, _mm256_castsi256_ps(e), one);  // 1 + e^−x
  __m256 d = _mm256_rcp_ps(den);
  d = _mm256_fmadd_ps(_mm256_fnmadd_ps(den, d, one), d, d);
  return _mm256_mul_ps(xl, d);
}

[[gnu::target("avx2,fma")]] int64_t silu_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = silu8(_mm256_loadu_ps(x + i)), b = silu8(_mm256_loadu_ps(x + i + 8));
    _mm256_storeu_ps(y + i, a);
    _mm256_storeu_ps(y + i + 8, b);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
  return i;
}

void silu(const float* x, float* y, int64_t n) {
  static const KernelTarget target = kernel_target();
  const int64_t done = target == KernelTarget::kAvx512 ? silu_avx512(x, y, n)
                       : target == KernelTarget::kAvx2 ? silu_avx2(x, y, n)
                                                       : 0;
  for (int64_t i = done; i < n; ++i)
    y[i] = static_cast<float>(x[i] / (1.0 + std::exp(-static_cast<double>(x[i]))));
}

class SiluKernel final : public Kernel {
 public:
  SiluKernel(Problem p, uint64_t seed)
      : p_(std::move(p)), seed_(seed), n_(elements(p_.inputs[0].shape)), x_(n_), y_(n_) {
    fill_uniform(x_.data(), n_, seed_, -8.f, 16.f);
  }
  std::string implementation() const override { return "floorline silu"; }
  int64_t workspace_bytes() const override { return 0; }
  std::optional<Port> port(bool output, size_t k) const override { return a_y_port(x_, y_, output, k); }
  Status bind(bool output, size_t k, void* data) override { return bind_a_y(x_, y_, output, k, data); }
  void run() override {
    for_rows((n_ + kChunk - 1) / kChunk, [this](int64_t c) {
      const int64_t lo = c * kChunk, hi = std::min(n_, lo + kChunk);
      silu(x_.data() + lo, y_.data() + lo, hi - lo);
    });
  }
  Status verify() override {
    // Beyond the clamp too: [-100, 100).
    HostTensor in{p_.inputs[0].shape, {}};
    in.data.resize(static_cast<size_t>(n_));
    fill_uniform(in.data.data(), n_, seed_ + 101, -100.f, 200.f);
    // and the far ends of the range, where e^−x overflows or underflows
    const float ends[] = {3.0e38f, -3.0e38f, 1.0e20f, -1.0e20f, 88.7f, -88.7f, 1.0e-30f, -0.f};
    for (size_t i = 0; i < std::size(ends) && i < in.data.size(); ++i)
      in.data[(i * 7919) % in.data.size()] = ends[i];
    std::copy(in.data.begin(), in.data.end(), x_.begin());
    y_.fill(std::numeric_limits<float>::quiet_NaN());
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, {in}, {}));
    if (ref.size() != 1) return make_error("the reference gave {} outputs, not 1", ref.size());
    return compare_output(y_.data(), ref[0], verify_tolerance(p_));
  }

 private:
  Problem p_;
  uint64_t seed_;
  int64_t n_;
  Placed<float> x_, y_;
};

}  // namespace

bool silu_problem(const Problem& p) {
  return p.kind == LayerKind::kSigmoid && p.post_ops.size() == 1 && p.post_ops[0].op == "MulInput" &&
         p.inputs.size() == 1 && p.outputs.size() == 1 && p.inputs[0].shape == p.outputs[0].shape;
}

std::unique_ptr<Kernel> make_silu_kernel(const Problem& p, uint64_t seed, bool check_only) {
  if (!silu_problem(p))
    unsupported("silu: a Sigmoid with its Mul by its input fused (post-op MulInput) only");
  if (elements(p.inputs[0].shape) > (int64_t{1} << 34)) unsupported("silu: the tensor is too large");
  if (check_only) return nullptr;
  return std::make_unique<SiluKernel>(p, seed);
}

}  // namespace floorline::kernels::floorline_detail
