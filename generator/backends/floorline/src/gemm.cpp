// Floorline's own SGEMM over weights packed once (sgemm_packed): what ONNX Runtime's MLAS does for
// a MatMul or Gemm whose B is a constant, and what no library in the tree offers on the CPU (OpenBLAS
// packs B again at every call; XNNPACK's fully connected operator packs it once but this XNNPACK
// build runs it at a third of the FMA peak on AVX2).
//
//   y[M×N] = A[M×K] · B[K×N] (+ c[N])
//
// for a Gemm with transA 0, alpha 1 and no C or a C of N elements with beta 1 (B read transposed
// where transB), and a MatMul whose B is 2-D (A's leading dims folded into M). The blocking is
// GotoBLAS's (K. Goto and R. van de Geijn, "Anatomy of High-Performance Matrix Multiplication", ACM
// TOMS 34(3), 2008): B is packed when the case is built into panels of kNr = 16 columns, each
// panel K × 16 contiguous (zero columns past N); K runs in blocks of kKc rows, so that a panel's
// block (kKc × 16 floats, 16 KiB) stays in L1 while a micro-kernel reads it, and N in blocks of
// kNc columns, so that a kKc × kNc block of B (256 KiB) stays in L2 while every row block of A
// passes over it. The micro-kernel computes kMr = 6 rows × 16 columns in 12 AVX2 registers with
// fused multiply-adds (2 loads of B and 6 broadcasts of A per 12 FMAs), adding into y after the
// first K block. The threads (OpenMP, the backend's count) take contiguous ranges of panels, or of
// 6-row blocks where there are fewer panels than twice the threads.
//
// It needs AVX2 and FMA (kernel_target() at AVX2 or above, under the ISA cap): elsewhere the case
// is unsupported. A is the case's port; B and c are constants (packed, or read, once), as a
// runtime holds weights: where a MatMul's B is an activation the replay reads the case's own B.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

constexpr int kMr = 6;
constexpr int64_t kNr = 16;
constexpr int64_t kKc = 256;
constexpr int64_t kNc = 256;

// y[0..mr)[0..nr) (row stride ldy) = (accumulate ? y : bias or 0) + a[0..mr)[0..kc) (row stride
// lda) · b (kc rows of 16, row stride ldb: 16 where packed). nr ≤ 16 columns are stored (the
// panel's zero columns are not).
template <int Mr>
[[gnu::target("avx2,fma")]] void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b,
                                              int64_t ldb, float* y, int64_t ldy, bool accumulate,
                                              const float* bias, int64_t nr) {
  // The row loops are unrolled whole (Mr is a constant) so that the 2·Mr accumulators stay in
  // registers.
  __m256 acc[Mr][2];
#pragma GCC unroll 8
  for (int i = 0; i < Mr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * ldb);
    const __m256 b1 = _mm256_loadu_ps(b + k * ldb + 8);
#pragma GCC unroll 8
    for (int i = 0; i < Mr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * lda + k);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  alignas(32) float row[kNr];
#pragma GCC unroll 8
  for (int i = 0; i < Mr; ++i) {
    float* yi = y + i * ldy;
    if (nr == kNr) {
      __m256 lo = acc[i][0], hi = acc[i][1];
      if (accumulate) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(yi));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(yi + 8));
      } else if (bias) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(bias));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(bias + 8));
      }
      _mm256_storeu_ps(yi, lo);
      _mm256_storeu_ps(yi + 8, hi);
      continue;
    }
    _mm256_store_ps(row, acc[i][0]);
    _mm256_store_ps(row + 8, acc[i][1]);
    for (int64_t j = 0; j < nr; ++j) yi[j] = row[j] + (accumulate ? yi[j] : bias ? bias[j] : 0.f);
  }
}

using MicroKernel = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, bool,
                             const float*, int64_t);
constexpr MicroKernel kMicro[kMr + 1] = {nullptr,          &micro_kernel<1>, &micro_kernel<2>,
                                         &micro_kernel<3>, &micro_kernel<4>, &micro_kernel<5>,
                                         &micro_kernel<6>};

}  // namespace

void gemm_micro_kernel(int mr, int64_t kc, const float* a, int64_t lda, const float* b, float* y, int64_t ldy,
                       bool accumulate, const float* bias, int64_t nr, int64_t ldb) {
  kMicro[mr](kc, a, lda, b, ldb, y, ldy, accumulate, bias, nr);
}

GemmDesc packed_gemm_desc(const Problem& p) {
  if (kernel_target() == KernelTarget::kBaseline || !__builtin_cpu_supports("fma"))
    unsupported("sgemm_packed needs AVX2 and FMA (this CPU, or the ISA cap, has not)");
  const auto g = gemm_desc(p);
  if (!g) unsupported(g.error().message);
  if (!g->folded || g->batch != 1) unsupported("sgemm_packed: B must be 2-D (no batched product)");
  if (g->ta) unsupported("sgemm_packed reads A untransposed (transA = 1)");
  if (g->alpha != 1.f) unsupported("sgemm_packed: alpha must be 1");
  if (g->has_c && (g->beta != 1.f || elements(p.inputs[2].shape) != g->n))
    unsupported("sgemm_packed adds a C of N elements with beta 1, not this C");
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) unsupported("sgemm_packed: an empty product");
  return *g;
}

namespace {

class PackedGemmKernel final : public Kernel {
 public:
  PackedGemmKernel(Problem p, uint64_t seed) : p_(std::move(p)), seed_(seed) {
    const GemmDesc g = packed_gemm_desc(p_);
    m_ = g.m;
    n_ = g.n;
    k_ = g.k;
    tb_ = g.tb;
    has_c_ = g.has_c;
    panels_ = (n_ + kNr - 1) / kNr;
    a_ = Placed<float>(m_ * k_);
    b_ = Placed<float>(k_ * n_);
    if (has_c_) c_ = Placed<float>(n_);
    y_ = Placed<float>(m_ * n_);
    packed_ = Placed<float>(panels_ * k_ * kNr);
    fill_uniform(a_.data(), m_ * k_, seed_);
    const float w = fill_half_width(p_, 1);
    fill_uniform(b_.data(), k_ * n_, seed_ + 1, -w, 2 * w);
    if (has_c_) fill_uniform(c_.data(), n_, seed_ + 2);
    pack();
  }

  std::string implementation() const override { return "floorline sgemm_packed"; }
  int64_t workspace_bytes() const override { return 0; }

  // A and y are ports; B and C are constants (packed or read once when the case is built).
  std::optional<Port> port(bool output, size_t k) const override { return a_y_port(a_, y_, output, k); }
  Status bind(bool output, size_t k, void* data) override { return bind_a_y(a_, y_, output, k, data); }

  void run() override {
    const int threads = std::max(1, omp_get_max_threads());
    const bool by_panels = panels_ >= 2 * threads || m_ <= kMr;
    const int64_t blocks = by_panels ? panels_ : (m_ + kMr - 1) / kMr;
    const int used = static_cast<int>(std::min<int64_t>(threads, blocks));
    if (used <= 1) {
      compute(0, m_, 0, panels_);
      return;
    }
#pragma omp parallel num_threads(used)
    {
      const int64_t t = omp_get_thread_num();
      const int64_t b0 = blocks * t / used, b1 = blocks * (t + 1) / used;
      if (by_panels)
        compute(0, m_, b0, b1);
      else
        compute(b0 * kMr, std::min(m_, b1 * kMr), 0, panels_);
    }
  }

  Status verify() override {
    fill_uniform(a_.data(), m_ * k_, seed_ + 7);
    run();
    std::vector<HostTensor> ins;
    ins.push_back({p_.inputs[0].shape, std::vector<float>(a_.data(), a_.data() + m_ * k_)});
    ins.push_back({p_.inputs[1].shape, std::vector<float>(b_.data(), b_.data() + k_ * n_)});
    if (has_c_) ins.push_back({p_.inputs[2].shape, std::vector<float>(c_.data(), c_.data() + n_)});
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, {}));
    if (ref.empty() || ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's output is not of shape {}", fmt::join(p_.outputs[0].shape, "x"));
    return compare_output(y_.data(), ref[0], verify_tolerance(p_));
  }

 private:
  // Panel p holds columns [16p, 16p + 16) of B, row by row (k × 16 contiguous), zeros past N.
  void pack() {
    const float* b = b_.data();
    float* out = packed_.data();
    for (int64_t p = 0; p < panels_; ++p)
      for (int64_t k = 0; k < k_; ++k)
        for (int64_t j = 0; j < kNr; ++j) {
          const int64_t col = p * kNr + j;
          out[(p * k_ + k) * kNr + j] = col >= n_ ? 0.f : tb_ ? b[col * k_ + k] : b[k * n_ + col];
        }
  }

  // Rows [r0, r1) of y over panels [p0, p1).
  void compute(int64_t r0, int64_t r1, int64_t p0, int64_t p1) const {
    const float* a = a_.data();
    const float* bias = has_c_ ? c_.data() : nullptr;
    float* y = y_.data();
    for (int64_t pj = p0; pj < p1; pj += kNc / kNr) {
      const int64_t pj1 = std::min(p1, pj + kNc / kNr);
      for (int64_t pc = 0; pc < k_; pc += kKc) {
        const int64_t kc = std::min(kKc, k_ - pc);
        for (int64_t i = r0; i < r1; i += kMr) {
          const int mr = static_cast<int>(std::min<int64_t>(kMr, r1 - i));
          for (int64_t p = pj; p < pj1; ++p) {
            const int64_t col = p * kNr;
            kMicro[mr](kc, a + i * k_ + pc, k_, packed_.data() + (p * k_ + pc) * kNr, kNr, y + i * n_ + col,
                       n_, pc > 0, bias ? bias + col : nullptr, std::min(kNr, n_ - col));
          }
        }
      }
    }
  }

  Problem p_;
  uint64_t seed_;
  int64_t m_ = 0, n_ = 0, k_ = 0, panels_ = 0;
  bool tb_ = false, has_c_ = false;
  Placed<float> a_, b_, c_, y_, packed_;
};

}  // namespace

std::unique_ptr<Kernel> make_gemm_kernel(const Problem& p, uint64_t seed) {
  return std::make_unique<PackedGemmKernel>(p, seed);
}

}  // namespace floorline::kernels::floorline_detail
