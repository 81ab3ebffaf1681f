// Floorline's own Winograd convolution: a 2-D Conv with a 3×3 kernel, unit strides and dilations and
// one group, on NCHW (x: N × C × H × W, w: K × C × 3 × 3, bias: K, y: N × K × Ho × Wo; any pads),
// as the minimal filtering algorithm F(m×m, 3×3) computes it (A. Lavin and S. Gray, "Fast
// Algorithms for Convolutional Neural Networks", CVPR 2016):
//
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d Bᵀᵀ) ] A   per output tile of m × m pixels, d its α × α input patch
//                                         (α = m + 2), g one 3 × 3 filter,
//
// summed over the input channels in the transformed domain: for each of the α² positions ξ of the
// transform, one product M_ξ[K × tiles] = U_ξ[K × C] · V_ξ[C × tiles]. That is oneDNN's
// `convolution_winograd` (jit_wino_4x3, F(4×4, 3×3), which oneDNN builds on AVX-512 only) and
// cuDNN's CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD(_NONFUSED), here for the AVX2 machines where no
// CPU library in the tree has one. Two cases: winograd_f4x4_3x3 (α = 6: 36 products of C × K per
// 16 outputs, 2.25 multiplies per output and input channel against the direct 9) and
// winograd_f2x2_3x3 (α = 4: 4 per output, smaller transforms and rounding error). The transforms
// (Bᵀ, G, Aᵀ) are the ones the points 0, ±1, ±2 (F(4×4)) and 0, ±1 (F(2×2)) give, as Lavin's paper
// and the wincnn generator write them.
//
// The weights U_ξ = G g Gᵀ are transformed once, when the case is built (as a runtime prepacks a
// constant weight), and packed per 6 output channels (GotoBLAS's packed A). A call copies x into a
// padded input (the pads and the rows and columns past the last tile zeros), then runs the tiles
// (N × ⌈Ho/m⌉ × ⌈Wo/m⌉, the pixels past the output's edge computed and not stored) in chunks whose
// transformed input and output (α² × tiles × (C + K) floats) fit in the chunk budget
// (set_winograd_chunk_bytes, 8 MiB), and per chunk:
//   1. the input transform, per input channel and 8 tiles (the tiles in the 8 lanes of a vector,
//      their patches' rows transposed in), into V[ξ][panel of 16 tiles][c][16];
//   2. the α² products, a 6 × 16 AVX2 micro-kernel (U's 6 rows by a panel of V), the threads taking
//      contiguous ranges of the (ξ, 6 output channels) pairs, into M[ξ][k][tile];
//   3. the output transform, per output channel and 8 tiles, plus the bias, the residual where the
//      case is Conv → Add (a ResNet basic block's sum: added into the output, which holds the
//      summand, as oneDNN's sum post-op does) and the Relu where it is Conv (→ Add) → Relu, 8 whole
//      4 × 4 tiles stored a row of 4 pixels each at a time.
// The threads (OpenMP, the backend's count) share each step; the steps are separated by barriers.
//
// Accuracy: the transforms' coefficients (up to 8 in F(4×4)'s Aᵀ, 1/24 in G) amplify f32 rounding;
// verify() uses the Winograd tolerance (reference.hpp, FastAlgorithm::kWinograd), as oneDNN's
// Winograd cases do. Needs AVX2 and FMA (the micro-kernel); elsewhere the case is unsupported.
// x is the case's port and y its output; w and the bias are constants.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// Eight lanes: one channel of eight tiles. GCC vector extensions in AVX2 functions (one ymm
// register); the helpers are always inlined, so no vector crosses a call (-Wpsabi, off for this file).
typedef float V8 __attribute__((vector_size(32)));

#define FL_WINO [[gnu::always_inline, gnu::target("avx2,fma")]] inline

// 4 floats of each of 8 rows (a[l], l < 8) into 4 vectors, lane l of vector s holding a[l][s]:
// rows l and l + 4 side by side in the two 128-bit halves, then a 4 × 4 transpose in each half
// (unpack, shuffle). 8 loads of 4 floats and 12 shuffles, where a lane at a time took 32 loads and
// 32 stores.
FL_WINO void transpose_8x4(const float* const a[8], __m256 s[4]) {
  __m256 y[4];
  for (int l = 0; l < 4; ++l) y[l] = _mm256_set_m128(_mm_loadu_ps(a[l + 4]), _mm_loadu_ps(a[l]));
  const __m256 t0 = _mm256_unpacklo_ps(y[0], y[1]), t1 = _mm256_unpackhi_ps(y[0], y[1]);
  const __m256 t2 = _mm256_unpacklo_ps(y[2], y[3]), t3 = _mm256_unpackhi_ps(y[2], y[3]);
  s[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  s[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  s[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  s[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// The inverse: 4 vectors of 8 lanes into 4 floats at each of 8 places (y[l] gets lane l of each).
FL_WINO void store_4x8(const __m256 s[4], float* const y[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(s[0], s[1]), t1 = _mm256_unpackhi_ps(s[0], s[1]);
  const __m256 t2 = _mm256_unpacklo_ps(s[2], s[3]), t3 = _mm256_unpackhi_ps(s[2], s[3]);
  const __m256 r[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                       _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
  for (int l = 0; l < 4; ++l) {
    _mm_storeu_ps(y[l], _mm256_castps256_ps128(r[l]));
    _mm_storeu_ps(y[l + 4], _mm256_extractf128_ps(r[l], 1));
  }
}

// The 1-D transforms of F(m, 3), applied to the rows and then the columns of a tile: Bᵀ (α × α) on
// the input, Aᵀ (m × α) on the output: the α inputs are `s` vectors apart, the outputs `t`.
template <int M>
struct Transform;

template <>
struct Transform<4> {
  static constexpr int kAlpha = 6;
  // Bᵀ = [4 0 −5 0 1 0; 0 −4 −4 1 1 0; 0 4 −4 −1 1 0; 0 −2 −1 2 1 0; 0 2 −1 −2 1 0; 0 4 0 −5 0 1]
  FL_WINO static void input(const V8* d, int s, V8* r, int t) {
    const V8 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    const V8 p = d3 - d1, q = d4 - d2;
    r[0] = 4.f * d0 - 5.f * d2 + d4;
    r[t] = (d3 + d4) - 4.f * (d1 + d2);
    r[2 * t] = (d4 - d3) + 4.f * (d1 - d2);
    r[3 * t] = q + 2.f * p;
    r[4 * t] = q - 2.f * p;
    r[5 * t] = 4.f * d1 - 5.f * d3 + d5;
  }
  // Aᵀ = [1 1 1 1 1 0; 0 1 −1 2 −2 0; 0 1 1 4 4 0; 0 1 −1 8 −8 1]
  FL_WINO static void output(const V8* m, int s, V8* o, int t) {
    const V8 a = m[s] + m[2 * s], b = m[s] - m[2 * s], c = m[3 * s] + m[4 * s], e = m[3 * s] - m[4 * s];
    o[0] = m[0] + a + c;
    o[t] = b + 2.f * e;
    o[2 * t] = a + 4.f * c;
    o[3 * t] = b + 8.f * e + m[5 * s];
  }
  // G (α × 3), row by row.
  static constexpr double kG[6][3] = {{1. / 4, 0, 0},
                                      {-1. / 6, -1. / 6, -1. / 6},
                                      {-1. / 6, 1. / 6, -1. / 6},
                                      {1. / 24, 1. / 12, 1. / 6},
                                      {1. / 24, -1. / 12, 1. / 6},
                                      {0, 0, 1}};
};

template <>
struct Transform<2> {
  static constexpr int kAlpha = 4;
  // Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1]
  FL_WINO static void input(const V8* d, int s, V8* r, int t) {
    const V8 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s];
    r[0] = d0 - d2;
    r[t] = d1 + d2;
    r[2 * t] = d2 - d1;
    r[3 * t] = d1 - d3;
  }
  // Aᵀ = [1 1 1 0; 0 1 −1 −1]
  FL_WINO static void output(const V8* m, int s, V8* o, int t) {
    o[0] = m[0] + m[s] + m[2 * s];
    o[t] = m[s] - m[2 * s] - m[3 * s];
  }
  static constexpr double kG[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
};

// M[0..6)[0..16) (row stride ldm) = (accumulate ? M : 0) + a · b over kc: a is 6 rows of U packed
// per input channel (kc × 6, GotoBLAS's packed A: one sequential stream, which the prefetchers
// follow at L3's bandwidth where 6 rows C apart ran at half of it: U is 9.4 MB for 256 × 256
// channels and is read once per call), b a panel of V (kc × 16, in L1). 12 AVX2 accumulators, as
// sgemm_packed's micro-kernel (gemm.cpp); U is prefetched 192 floats (768 bytes) ahead.
[[gnu::target("avx2,fma")]] void packed_micro_kernel(int64_t kc, const float* a, const float* b, float* m,
                                                     int64_t ldm, bool accumulate) {
  constexpr int kMr = 6;
  __m256 acc[kMr][2];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * 16);
    const __m256 b1 = _mm256_loadu_ps(b + k * 16 + 8);
    _mm_prefetch(reinterpret_cast<const char*>(a + k * kMr + 192), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + k * kMr + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    float* mi = m + i * ldm;
    __m256 lo = acc[i][0], hi = acc[i][1];
    if (accumulate) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(mi));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(mi + 8));
    }
    _mm256_storeu_ps(mi, lo);
    _mm256_storeu_ps(mi + 8, hi);
  }
}

// The transformed input and output of a chunk of tiles stay within this (in L3 on the machines we
// measure): U is streamed once per chunk. set_winograd_chunk_bytes() changes it.
std::atomic<int64_t> chunk_bytes{int64_t{8} << 20};

}  // namespace

ConvDesc winograd_desc(const Problem& p) {
  if (kernel_target() == KernelTarget::kBaseline || !__builtin_cpu_supports("fma"))
    unsupported("the Winograd convolution needs AVX2 and FMA (this CPU, or the ISA cap, has not)");
  const auto d = conv_desc(p);
  if (!d) unsupported(d.error().message);
  if (d->transposed) unsupported("Winograd: a ConvTranspose is not run");
  if (d->spatial() != 2) unsupported(fmt::format("Winograd: 2-D convolutions only, not {}-D", d->spatial()));
  if (d->kernel != std::vector<int64_t>{3, 3})
    unsupported(fmt::format("Winograd: a 3x3 kernel only, not {}", fmt::join(d->kernel, "x")));
  if (d->strides != std::vector<int64_t>{1, 1} || d->dilations != std::vector<int64_t>{1, 1})
    unsupported("Winograd: unit strides and dilations only");
  if (d->group != 1) unsupported(fmt::format("Winograd: one group only, not {}", d->group));
  if (d->n <= 0 || d->c <= 0 || d->k <= 0 || d->out[0] <= 0 || d->out[1] <= 0)
    unsupported("Winograd: an empty convolution");
  for (size_t i = 0; i < 2; ++i)
    if (d->pads_begin[i] > 2 || d->pads_end[i] > 2)
      unsupported("Winograd: pads of at most 2 (a 3x3 window with a real pixel)");
  // The epilogues: Relu, a residual Add (into the prefilled output), or the Add then a Relu.
  std::vector<std::string> ops;
  for (const auto& po : p.post_ops) ops.push_back(po.op);
  if (!ops.empty() && ops != std::vector<std::string>{"Relu"} && ops != std::vector<std::string>{"Add"} &&
      ops != std::vector<std::string>{"Add", "Relu"})
    unsupported(fmt::format("Winograd fuses a Relu, a residual Add or both, not {}", fmt::join(ops, "+")));
  return *d;
}

namespace {

template <int M>
class WinogradKernel final : public Kernel {
  static constexpr int kAlpha = Transform<M>::kAlpha;
  static constexpr int kXi = kAlpha * kAlpha;

 public:
  WinogradKernel(Problem p, uint64_t seed) : p_(std::move(p)), seed_(seed), d_(winograd_desc(p_)) {
    n_ = d_.n;
    c_ = d_.c;
    k_ = d_.k;
    h_ = d_.in[0];
    w_ = d_.in[1];
    ho_ = d_.out[0];
    wo_ = d_.out[1];
    for (const auto& po : p_.post_ops) (po.op == "Add" ? sum_ : relu_) = true;
    tiles_h_ = (ho_ + M - 1) / M;
    tiles_w_ = (wo_ + M - 1) / M;
    tiles_ = n_ * tiles_h_ * tiles_w_;
    // The padded input: every tile's patch inside it, the pads and the rows and columns past the
    // last tile's zeros.
    hp_ = tiles_h_ * M + 2;
    wp_ = tiles_w_ * M + 2;
    const int64_t per_tile = kXi * (c_ + k_ + kMr) * int64_t{sizeof(float)};
    chunk_ = std::max<int64_t>(kPanel, chunk_bytes.load() / per_tile / kPanel * kPanel);
    chunk_ = std::min(chunk_, tiles_);
    chunk_panels_ = (chunk_ + kPanel - 1) / kPanel;
    x_ = Placed<float>(n_ * c_ * h_ * w_);
    xp_ = Placed<float>(n_ * c_ * hp_ * wp_);
    wt_ = Placed<float>(k_ * c_ * 9);
    bias_ = Placed<float>(d_.has_bias ? k_ : 0);
    y_ = Placed<float>(n_ * k_ * ho_ * wo_);
    k_pad_ = (k_ + kMr - 1) / kMr * kMr;
    u_ = Placed<float>(kXi * k_pad_ * c_);
    v_ = Placed<float>(kXi * chunk_panels_ * c_ * kPanel);
    m_ = Placed<float>(kXi * k_pad_ * chunk_panels_ * kPanel);
    tile_offset_.resize(static_cast<size_t>(tiles_));
    tile_out_.resize(static_cast<size_t>(tiles_));
    for (int64_t t = 0; t < tiles_; ++t) {
      const int64_t n = t / (tiles_h_ * tiles_w_), r = t % (tiles_h_ * tiles_w_);
      const int64_t ty = r / tiles_w_, tx = r % tiles_w_;
      tile_offset_[t] = n * c_ * hp_ * wp_ + ty * M * wp_ + tx * M;
      tile_out_[t] = {n * k_ * ho_ * wo_ + ty * M * wo_ + tx * M,
                      static_cast<int>(std::min<int64_t>(M, ho_ - ty * M)),
                      static_cast<int>(std::min<int64_t>(M, wo_ - tx * M))};
    }
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_);
    const float half = fill_half_width(p_, 1);
    fill_uniform(wt_.data(), static_cast<int64_t>(wt_.size()), seed_ + 1, -half, 2 * half);
    if (d_.has_bias) fill_uniform(bias_.data(), k_, seed_ + 2);
    // A residual sum adds into the output, prefilled once with the summand (as oneDNN's sum
    // post-op's cases are; the replay binds the output to the summand's buffer).
    if (sum_) fill_uniform(y_.data(), static_cast<int64_t>(y_.size()), seed_ + 3);
    transform_weights();
  }

  std::string implementation() const override { return fmt::format("floorline winograd_f{}x{}_3x3", M, M); }
  // The padded input and a chunk's transformed input and output (the weights' transform is the
  // constant's), each at a 64-byte boundary.
  int64_t workspace_bytes() const override { return aligned(xp_.bytes()) + aligned(v_.bytes()) + m_.bytes(); }
  // The three in `data`, in that order: every call writes all of them before it reads them (the
  // padded input's zeros too), so a scratchpad the model's other cases share serves.
  bool share_workspace(void* data) override {
    auto* at = static_cast<unsigned char*>(data);
    xp_.bind(at);
    v_.bind(at + aligned(xp_.bytes()));
    m_.bind(at + aligned(xp_.bytes()) + aligned(v_.bytes()));
    return true;
  }

  std::optional<Port> port(bool output, size_t k) const override { return a_y_port(x_, y_, output, k); }
  Status bind(bool output, size_t k, void* data) override { return bind_a_y(x_, y_, output, k, data); }

  void run() override {
    const int threads = std::max(1, omp_get_max_threads());
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      pad_step();
      for (int64_t t0 = 0; t0 < tiles_; t0 += chunk_) {
        const int64_t count = std::min(chunk_, tiles_ - t0);
        input_step(t0, count);
        product_step(count);
        output_step(t0, count);
      }
    }
  }

  Status verify() override {
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_ + 7);
    std::vector<HostTensor> extras;
    if (sum_) {  // the summand, in the output it is added into
      fill_uniform(y_.data(), static_cast<int64_t>(y_.size()), seed_ + 8);
      extras.push_back({p_.outputs[0].shape, std::vector<float>(y_.begin(), y_.end())});
    }
    run();
    return compare_conv_output(p_, d_.has_bias, x_, wt_, bias_, y_, extras,
                               verify_tolerance(p_, DType::kF32, MathMode::kFp32, FastAlgorithm::kWinograd));
  }

 private:
  // Tiles per panel of V (the product's B), output channels per block of U (its A).
  static constexpr int64_t kPanel = 16;
  static constexpr int64_t kMr = 6;
  static int64_t aligned(int64_t bytes) {
    return (bytes + 63) / 64 * 64;
  }

  // U_ξ[k][c] = (G g_kc Gᵀ)[ξ], the product's A: per ξ, blocks of 6 output channels (zeros past K),
  // each packed per input channel: U[ξ][k / 6][c][k % 6].
  void transform_weights() {
    const auto& g = Transform<M>::kG;
    float* u = u_.data();
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t c = 0; c < c_; ++c) {
        const float* f = wt_.data() + (k * c_ + c) * 9;
        double gf[kAlpha][3];  // G · f
        for (int i = 0; i < kAlpha; ++i)
          for (int b = 0; b < 3; ++b) gf[i][b] = g[i][0] * f[b] + g[i][1] * f[3 + b] + g[i][2] * f[6 + b];
        for (int i = 0; i < kAlpha; ++i)
          for (int j = 0; j < kAlpha; ++j) {
            const double v = gf[i][0] * g[j][0] + gf[i][1] * g[j][1] + gf[i][2] * g[j][2];
            u[((i * kAlpha + j) * k_pad_ + k / kMr * kMr) * c_ + c * kMr + k % kMr] = static_cast<float>(v);
          }
      }
  }

  // x into the padded input, plane by plane, its borders (the pads, and the rows and columns past the
  // last tile) written as zeros: the buffer may be a scratchpad other cases wrote (share_workspace).
  void pad_step() {
    const int64_t pt = d_.pads_begin[0], pl = d_.pads_begin[1], pr = wp_ - pl - w_;
#pragma omp for schedule(static)
    for (int64_t plane = 0; plane < n_ * c_; ++plane) {
      const float* src = x_.data() + plane * h_ * w_;
      float* dst = xp_.data() + plane * hp_ * wp_;
      std::memset(dst, 0, sizeof(float) * pt * wp_);
      for (int64_t iy = 0; iy < h_; ++iy) {
        float* row = dst + (pt + iy) * wp_;
        std::memset(row, 0, sizeof(float) * pl);
        std::memcpy(row + pl, src + iy * w_, sizeof(float) * w_);
        std::memset(row + pl + w_, 0, sizeof(float) * pr);
      }
      std::memset(dst + (pt + h_) * wp_, 0, sizeof(float) * (hp_ - pt - h_) * wp_);
    }
  }

  // V_ξ for tiles [t0, t0 + count): per item one channel and 8 tiles (the tiles in the lanes), each
  // tile's α × α patch of the padded input transformed (Bᵀ d Bᵀᵀ); stored as the product's B,
  // panels of 16 tiles, V[ξ][panel][c][16] (a group's lanes past `count` its first tile again, a
  // panel's lanes that no group fills zeros).
  [[gnu::target("avx2,fma")]] void input_step(int64_t t0, int64_t count) {
    const int64_t groups = (count + 7) / 8;
    float* v = v_.data();
#pragma omp for schedule(static)
    for (int64_t item = 0; item < groups * c_; ++item) {
      const int64_t g = item / c_, c = item % c_, lanes = std::min<int64_t>(8, count - 8 * g);
      // The 8 tiles' patches into the lanes, row by row: 4 pixels of each tile's row transposed
      // (transpose_8x4), and for α = 6 its last 2 from the 4 at offset 2. A lane past `count` reads
      // the first tile again: its column of the product is never stored.
      const float* src = xp_.data() + c * hp_ * wp_;
      const float* first[8];
      for (int64_t l = 0; l < 8; ++l) first[l] = src + tile_offset_[t0 + 8 * g + (l < lanes ? l : 0)];
      V8 d[kAlpha][kAlpha], t1[kAlpha][kAlpha], out[kAlpha][kAlpha];
      for (int r = 0; r < kAlpha; ++r) {
        const float* row[8];
        for (int l = 0; l < 8; ++l) row[l] = first[l] + r * wp_;
        __m256 q[4];
        transpose_8x4(row, q);
        for (int s = 0; s < 4; ++s) d[r][s] = V8(q[s]);
        if constexpr (kAlpha == 6) {
          for (auto& p : row) p += 2;
          transpose_8x4(row, q);
          d[r][4] = V8(q[2]);
          d[r][5] = V8(q[3]);
        }
      }
      for (int s = 0; s < kAlpha; ++s) Transform<M>::input(&d[0][s], kAlpha, &t1[0][s], kAlpha);  // columns
      for (int r = 0; r < kAlpha; ++r) Transform<M>::input(&t1[r][0], 1, &out[r][0], 1);          // rows
      const int64_t panel = 8 * g / kPanel, lane0 = 8 * g % kPanel;
      for (int xi = 0; xi < kXi; ++xi)
        std::memcpy(v + ((xi * chunk_panels_ + panel) * c_ + c) * kPanel + lane0,
                    &out[xi / kAlpha][xi % kAlpha], sizeof(V8));
      // An odd count of groups leaves the last panel's lanes 8-15 to no group: zeros, not what the
      // scratchpad held (another case's data, NaN, denormals), under the product's FMAs.
      if (lane0 == 0 && g == groups - 1)
        for (int xi = 0; xi < kXi; ++xi)
          std::memset(v + ((xi * chunk_panels_ + panel) * c_ + c) * kPanel + 8, 0, sizeof(V8));
    }
  }

  // M_ξ[K × tiles] = U_ξ[K × C] · V_ξ[C × tiles] for the chunk's `count` tiles: the items are (ξ,
  // 6 output channels), U's block read once per item and every panel of V (in L2) under it; C in
  // blocks of 256 (a 16 KiB panel block in L1).
  void product_step(int64_t count) {
    constexpr int64_t kKc = 256;
    const int64_t row_blocks = k_pad_ / kMr, ldm = chunk_panels_ * kPanel;
    const int64_t panels = (count + kPanel - 1) / kPanel;
#pragma omp for schedule(static)
    for (int64_t item = 0; item < kXi * row_blocks; ++item) {
      const int64_t xi = item / row_blocks, k = item % row_blocks * kMr;
      const float* a = u_.data() + (xi * k_pad_ + k) * c_;
      const float* b = v_.data() + xi * chunk_panels_ * c_ * kPanel;
      float* y = m_.data() + (xi * k_pad_ + k) * ldm;
      for (int64_t pc = 0; pc < c_; pc += kKc) {
        const int64_t kc = std::min(kKc, c_ - pc);
        for (int64_t p = 0; p < panels; ++p)
          packed_micro_kernel(kc, a + pc * kMr, b + (p * c_ + pc) * kPanel, y + p * kPanel, ldm, pc > 0);
      }
    }
  }

  // y = Aᵀ M A (+ bias, Relu) for tiles [t0, t0 + count): per item one output channel and 8 tiles
  // (in the lanes); the pixels past the output's edge are not stored.
  [[gnu::target("avx2,fma")]] void output_step(int64_t t0, int64_t count) {
    const int64_t groups = (count + 7) / 8, ldm = chunk_panels_ * kPanel;
    float* y = y_.data();
#pragma omp for schedule(static)
    for (int64_t item = 0; item < k_ * groups; ++item) {
      const int64_t k = item / groups, g = item % groups, lanes = std::min<int64_t>(8, count - 8 * g);
      V8 m[kAlpha][kAlpha], t1[M][kAlpha], o[M][M];
      for (int xi = 0; xi < kXi; ++xi)
        std::memcpy(&m[xi / kAlpha][xi % kAlpha], m_.data() + (xi * k_pad_ + k) * ldm + 8 * g, sizeof(V8));
      for (int s = 0; s < kAlpha; ++s) Transform<M>::output(&m[0][s], kAlpha, &t1[0][s], kAlpha);  // columns
      for (int r = 0; r < M; ++r) Transform<M>::output(&t1[r][0], 1, &o[r][0], 1);                 // rows
      const float bias = d_.has_bias ? bias_[static_cast<size_t>(k)] : 0.f;
      const V8 zero = {};
      // With a residual sum the Relu comes after it, where the output is read (below).
      for (auto& row : o)
        for (auto& val : row) {
          val += bias;
          if (relu_ && !sum_) val = val > zero ? val : zero;
        }
      float* dst[8];
      bool whole = lanes == 8;
      for (int64_t l = 0; l < lanes; ++l) {
        const TileOut& to = tile_out_[t0 + 8 * g + l];
        dst[l] = y + to.offset + k * ho_ * wo_;
        whole = whole && to.rows == M && to.cols == M;
      }
      // F(4x4): 8 whole tiles stored a row of 4 pixels each at a time (store_4x8).
      if constexpr (M == 4) {
        if (whole) {
          for (int r = 0; r < M; ++r) {
            float* at[8];
            for (int l = 0; l < 8; ++l) at[l] = dst[l] + r * wo_;
            __m256 q[4] = {__m256(o[r][0]), __m256(o[r][1]), __m256(o[r][2]), __m256(o[r][3])};
            if (sum_) {  // the summand's row of 4 pixels of each of the 8 tiles, transposed in
              __m256 prev[4];
              transpose_8x4(at, prev);
              for (int s = 0; s < 4; ++s) {
                q[s] = _mm256_add_ps(q[s], prev[s]);
                if (relu_) q[s] = _mm256_max_ps(q[s], _mm256_setzero_ps());
              }
            }
            store_4x8(q, at);
          }
          continue;
        }
      }
      alignas(32) float res[M][M][8];
      std::memcpy(res, o, sizeof res);
      for (int64_t l = 0; l < lanes; ++l) {
        const TileOut& to = tile_out_[t0 + 8 * g + l];
        for (int r = 0; r < to.rows; ++r)
          for (int s = 0; s < to.cols; ++s) {
            float& out = dst[l][r * wo_ + s];
            if (!sum_) {
              out = res[r][s][l];
              continue;
            }
            const float v = out + res[r][s][l];
            out = relu_ && !(v > 0.f) ? 0.f : v;
          }
      }
    }
  }

  Problem p_;
  uint64_t seed_;
  ConvDesc d_;
  int64_t n_ = 0, c_ = 0, k_ = 0, h_ = 0, w_ = 0, ho_ = 0, wo_ = 0, hp_ = 0, wp_ = 0;
  int64_t tiles_h_ = 0, tiles_w_ = 0, tiles_ = 0, chunk_ = 0, chunk_panels_ = 0, k_pad_ = 0;
  bool relu_ = false, sum_ = false;   // the fused Relu; the residual sum into the output (before it)
  std::vector<int64_t> tile_offset_;  // each tile's patch in the padded input, channel 0
  struct TileOut {
    int64_t offset;  // the tile's first pixel in y, output channel 0
    int rows, cols;  // its pixels inside the output (M × M but at the edges)
  };
  std::vector<TileOut> tile_out_;
  Placed<float> x_, xp_, wt_, bias_, y_, u_, v_, m_;
};

}  // namespace

std::unique_ptr<Kernel> make_winograd_kernel(const Problem& p, uint64_t seed, int m) {
  if (m == 2) return std::make_unique<WinogradKernel<2>>(p, seed);
  return std::make_unique<WinogradKernel<4>>(p, seed);
}

}  // namespace floorline::kernels::floorline_detail

namespace floorline::kernels {

void set_winograd_chunk_bytes(int64_t bytes) {
  floorline_detail::chunk_bytes = std::max<int64_t>(1, bytes);
}
int64_t winograd_chunk_bytes() {
  return floorline_detail::chunk_bytes.load();
}

}  // namespace floorline::kernels
