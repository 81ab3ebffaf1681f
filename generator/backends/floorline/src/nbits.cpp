// Floorline's own MatMulNBits (matmul_nbits): ONNX Runtime's com.microsoft operator over 4-bit
// block-quantized weights,
//
//   y[M×N] = A[M×K] · wᵀ (+ bias[N]),  w[n][k] = (q[n][k] − z[n][b]) · s[n·blocks + b],  b = k / block_size,
//
// with q packed two per byte, row n's block b at B[n][b][0 .. block_size/2) (weight k low nibble
// first), z two per byte at zero_points[n·ceil(blocks/2) + b/2] (8 without zero points). It does
// what ONNX Runtime's MLAS SQNBitGemm does on the CPU at accuracy level 0 (f32 compute): the 4-bit
// weights are the only copy of B, read per call and dequantized where they are used, so a decode
// step reads an eighth of the bytes of its f32 MatMul.
//
// M ≤ 4 (a decode step's GEMV): the threads (OpenMP, the backend's count) take contiguous ranges of
// the N weight rows. A is first laid out per 16 inputs as its 8 even then its 8 odd elements, and
// its sums per block computed, once per call. Per 16 weights, 8 bytes of the row widen to 8 dwords
// as they are loaded; their low nibbles are the even weights, bits 4-7 the odd ones (one AND, one
// shift), converted to floats and multiplied into A's split copy, never put back in order. Per
// block, y += s · Σ a·q, the blocks alternating between two totals; the zero points' part,
// Σ_blocks z·s·Σ_block a, once per row, 8 blocks at a time. B is read once; nothing but y (and the
// small copy of A) is written. Per 32 weights: 2 loads of B, 2 ANDs, 2 shifts, 4 conversions and
// 4 FMAs. 1x2048 · 2048x5632 with zero points at one thread on the AMD EPYC (Zen 3): 1.0 ms (the
// GEMV before, 6.5 vector operations per 16 weights and a scalar zero-point term per block: 1.5).
// M > 4: the threads take panels of 16 columns; per panel and per 256 of K, the weights are
// dequantized (each column's in order, then 8 × 8 transposes) into a 16 KiB panel (L1) laid out
// as sgemm_packed's, and sgemm_packed's 6 × 16 micro-kernel runs every 6-row block of A over it
// (gemm.cpp).
//
// A second case, matmul_nbits@f32_weights, dequantizes B once, when the case is built, into
// sgemm_packed's panels (an f32 copy of the weights, eight times their bytes, as a runtime that
// constant-folds a weight's DequantizeLinear at load holds) and runs sgemm_packed's product over it:
// the faster way for a prefill, whose product is compute-bound; a decode step reads 8 × the bytes.
//
// Needs AVX2 and FMA; 4 bits, a block_size that is a multiple of 16 dividing K, zero points packed
// as bytes (ONNX Runtime's quantizer writes them so) or none, and no g_idx. Elsewhere the case is
// unsupported, with why. A is the case's port; B, the scales, zero points and bias are constants.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {

NBitsDesc nbits_desc(const Problem& p) {
  if (kernel_target() == KernelTarget::kBaseline || !__builtin_cpu_supports("fma"))
    unsupported("matmul_nbits needs AVX2 and FMA (this CPU, or the ISA cap, has not)");
  NBitsDesc d;
  d.k = p.int_attr("K");
  d.n = p.int_attr("N");
  d.block = p.int_attr("block_size");
  const int64_t bits = p.int_attr("bits");
  if (bits != 4) unsupported(fmt::format("matmul_nbits reads 4-bit weights, not {}-bit", bits));
  if (d.k <= 0 || d.n <= 0 || d.block < 16 || d.block % 16 != 0 || d.k % d.block != 0)
    unsupported(
        fmt::format("matmul_nbits: block_size {} must be a multiple of 16 dividing K {}", d.block, d.k));
  if (p.input_index("g_idx") >= 0) unsupported("matmul_nbits: g_idx (act-order blocks) is not read");
  if (p.inputs.size() < 3 || p.outputs.empty()) unsupported("matmul_nbits: A, B and scales are needed");
  const Shape& a = p.inputs[0].shape;
  if (a.empty() || a.back() != d.k) unsupported("matmul_nbits: A's last dim is not K");
  d.m = elements(a) / d.k;
  const int64_t blocks = d.k / d.block;
  if (elements(p.inputs[1].shape) != d.n * blocks * d.block / 2 ||
      elements(p.inputs[2].shape) != d.n * blocks)
    unsupported("matmul_nbits: B or scales do not hold N × K / block_size blocks");
  if (const int z = p.input_index("zero_points"); z >= 0) {
    if (elements(p.inputs[static_cast<size_t>(z)].shape) != d.n * ((blocks + 1) / 2))
      unsupported("matmul_nbits reads zero points packed two per byte, not of A's type");
    d.zero_points = true;
  }
  if (const int b = p.input_index("bias"); b >= 0) {
    if (elements(p.inputs[static_cast<size_t>(b)].shape) != d.n) unsupported("matmul_nbits: a bias not of N");
    d.bias = true;
  }
  if (d.m <= 0) unsupported("matmul_nbits: an empty product");
  return d;
}

namespace {

constexpr int64_t kKc = 256;  // K per dequantized panel (16 KiB of floats, as sgemm_packed's)

// 16 weights, in order, from 8 bytes (two per byte, low nibble first), as two vectors of 8 floats
// (q·s − z·s).
[[gnu::target("avx2,fma")]] inline void unpack16(const uint8_t* bytes, __m256 scale, __m256 offset,
                                                 __m256& w0, __m256& w1) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
  const __m128i lo = _mm_and_si128(v, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  const __m128i q = _mm_unpacklo_epi8(lo, hi);
  w0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), scale, offset);
  w1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), scale, offset);
}

class NBitsKernel final : public Kernel {
 public:
  NBitsKernel(Problem p, uint64_t seed, bool f32_weights)
      : p_(std::move(p)), seed_(seed), d_(nbits_desc(p_)), f32_weights_(f32_weights) {
    blocks_ = d_.k / d_.block;
    zbytes_ = (blocks_ + 1) / 2;
    a_ = Placed<float>(d_.m * d_.k);
    y_ = Placed<float>(d_.m * d_.n);
    b_ = Placed<uint8_t>(d_.n * blocks_ * d_.block / 2);
    scales_ = Placed<float>(d_.n * blocks_);
    if (d_.zero_points) zp_ = Placed<uint8_t>(d_.n * zbytes_);
    if (d_.bias) bias_ = Placed<float>(d_.n);
    if (d_.m <= 4) {
      a_split_ = Placed<float>(d_.m * d_.k);
      a_sums_ = Placed<float>(d_.m * blocks_);
    }
    fill_uniform(a_.data(), d_.m * d_.k, seed_);
    // Random bytes for the weights and zero points; scales that keep y's magnitude near A's
    // ((q − z) within ±15, K terms).
    fill_bytes(b_, seed_ + 1);
    if (d_.zero_points) fill_bytes(zp_, seed_ + 2);
    const float s = 1.f / (8.f * std::sqrt(static_cast<float>(d_.k)));
    fill_uniform(scales_.data(), d_.n * blocks_, seed_ + 3, 0.5f * s, s);
    if (d_.bias) fill_uniform(bias_.data(), d_.n, seed_ + 4);
    if (f32_weights_) dequantize_all();
  }

  std::string implementation() const override {
    return f32_weights_ ? "floorline matmul_nbits@f32_weights" : "floorline matmul_nbits";
  }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override { return a_y_port(a_, y_, output, k); }
  Status bind(bool output, size_t k, void* data) override { return bind_a_y(a_, y_, output, k, data); }

  void run() override {
    const int threads = std::max(1, omp_get_max_threads());
    const bool gemv = d_.m <= 4 && !f32_weights_;
    if (gemv) split_a();  // A's copy and block sums, once per call
    const int64_t units = gemv ? d_.n : (d_.n + kGemmNr - 1) / kGemmNr;
    const int used = static_cast<int>(std::min<int64_t>(threads, units));
    auto work = [&](int64_t u0, int64_t u1) {
      if (gemv)
        rows(u0, u1);
      else if (f32_weights_)
        packed_panels(u0, u1);
      else
        panels(u0, u1);
    };
    if (used <= 1) {
      work(0, units);
      return;
    }
#pragma omp parallel num_threads(used)
    {
      const int64_t t = omp_get_thread_num();
      work(units * t / used, units * (t + 1) / used);
    }
  }

  Status verify() override {
    fill_uniform(a_.data(), d_.m * d_.k, seed_ + 7);
    run();
    auto as_floats = [](const auto& placed) { return std::vector<float>(placed.begin(), placed.end()); };
    std::vector<HostTensor> ins;
    for (const auto& op : p_.inputs) {
      if (op.role == "a") ins.push_back({op.shape, as_floats(a_)});
      if (op.role == "b") ins.push_back({op.shape, as_floats(b_)});
      if (op.role == "scales") ins.push_back({op.shape, as_floats(scales_)});
      if (op.role == "zero_points") ins.push_back({op.shape, as_floats(zp_)});
      if (op.role == "bias") ins.push_back({op.shape, as_floats(bias_)});
    }
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, {}));
    if (ref.empty() || ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's output is not of shape {}", fmt::join(p_.outputs[0].shape, "x"));
    return compare_output(y_.data(), ref[0], verify_tolerance(p_));
  }

 private:
  static void fill_bytes(const Placed<uint8_t>& out, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (auto& v : out) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<uint8_t>(x >> 24);
    }
  }
  // The zero point of row n, block b.
  float zero_point(int64_t n, int64_t b) const {
    if (!d_.zero_points) return 8.f;
    const uint8_t z = zp_[static_cast<size_t>(n * zbytes_ + b / 2)];
    return static_cast<float>(b % 2 != 0 ? z >> 4 : z & 0x0f);
  }

  // y[m][n] for n in [n0, n1), every m (≤ 4 rows).
  void rows(int64_t n0, int64_t n1) const {
    switch (d_.m) {
      case 1:
        return rows_split<1>(n0, n1);
      case 2:
        return rows_split<2>(n0, n1);
      case 3:
        return rows_split<3>(n0, n1);
      default:
        return rows_split<4>(n0, n1);
    }
  }

  // A per 16 inputs as its 8 even then 8 odd elements (a_split_), and its sums per block
  // (a_sums_[m·blocks + b]), for rows_split.
  void split_a() {
    const int64_t K = d_.k;
    for (int64_t m = 0; m < d_.m; ++m) {
      const float* a = a_.data() + m * K;
      float* out = a_split_.data() + m * K;
      for (int64_t c = 0; c < K; c += 16)
        for (int64_t j = 0; j < 8; ++j) {
          out[c + j] = a[c + 2 * j];
          out[c + 8 + j] = a[c + 2 * j + 1];
        }
      for (int64_t b = 0; b < blocks_; ++b) {
        float sum = 0.f;
        for (int64_t k = b * d_.block; k < (b + 1) * d_.block; ++k) sum += a[k];
        a_sums_[static_cast<size_t>(m * blocks_ + b)] = sum;
      }
    }
  }

  // Σ_b z[n][b] · s[n][b] · Σ_block a[m]: the zero points' part of row n's dot product with A's
  // row m, 8 blocks at a time.
  [[gnu::target("avx2,fma")]] float zero_offset(int64_t n, int64_t m) const {
    const float* s = scales_.data() + n * blocks_;
    const float* sums = a_sums_.data() + m * blocks_;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    if (!d_.zero_points) {
      for (; b + 8 <= blocks_; b += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(s + b), _mm256_loadu_ps(sums + b), acc);
      float rest = 0.f;
      for (; b < blocks_; ++b) rest += s[b] * sums[b];
      return 8.f * (hsum8(acc) + rest);
    }
    const uint8_t* z = zp_.data() + n * zbytes_;
    const __m128i mask = _mm_set1_epi32(0x0f);
    for (; b + 8 <= blocks_; b += 8) {
      int32_t four;  // 8 zero points, two per byte, low nibble first
      std::memcpy(&four, z + b / 2, sizeof four);
      const __m128i bytes = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(four));
      const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_srli_epi32(bytes, 4);
      const __m256i zi = _mm256_set_m128i(_mm_unpackhi_epi32(lo, hi), _mm_unpacklo_epi32(lo, hi));
      const __m256 zs = _mm256_mul_ps(_mm256_cvtepi32_ps(zi), _mm256_loadu_ps(s + b));
      acc = _mm256_fmadd_ps(zs, _mm256_loadu_ps(sums + b), acc);
    }
    float rest = 0.f;
    for (; b < blocks_; ++b) rest += zero_point(n, b) * s[b] * sums[b];
    return hsum8(acc) + rest;
  }

  // tot[m] += s_b · Σ_{k in block b} a_m[k] · q[k] for row `row` (its packed bytes) and block b.
  template <int M>
  [[gnu::target("avx2,fma"), gnu::always_inline]] inline void add_block(const uint8_t* row,
                                                                        const float* scale, int64_t b,
                                                                        __m256* tot) const {
    const int64_t bs = d_.block, K = d_.k;
    const __m256i mask = _mm256_set1_epi32(0x0f);
    __m256 sum[M][2];
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) sum[m][0] = sum[m][1] = _mm256_setzero_ps();
    for (int64_t c = b * bs; c < (b + 1) * bs; c += 16) {
      const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c / 2)));
      const __m256 even = _mm256_cvtepi32_ps(_mm256_and_si256(v, mask));
      const __m256 odd = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) {
        const float* a = a_split_.data() + m * K + c;
        sum[m][0] = _mm256_fmadd_ps(_mm256_loadu_ps(a), even, sum[m][0]);
        sum[m][1] = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8), odd, sum[m][1]);
      }
    }
    const __m256 vs = _mm256_broadcast_ss(scale + b);
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) tot[m] = _mm256_fmadd_ps(_mm256_add_ps(sum[m][0], sum[m][1]), vs, tot[m]);
  }

  // Rows [n0, n1) of y for M ≤ 4 rows of A: per row n and block b, y += s · Σ a·q over the block
  // (then the zero points' part, zero_offset). 8 bytes of a row (16 weights) widen to 8 dwords
  // (a load that zero-extends), whose low nibbles are the even weights and whose bits 4-7 the odd
  // ones: one AND and one shift, against A's split copy. Two totals, the blocks alternating between
  // them, so that consecutive blocks' scalings do not wait for each other.
  template <int M>
  [[gnu::target("avx2,fma")]] void rows_split(int64_t n0, int64_t n1) const {
    const int64_t bs = d_.block;
    for (int64_t n = n0; n < n1; ++n) {
      __m256 total[2][M];
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m) total[0][m] = total[1][m] = _mm256_setzero_ps();
      const uint8_t* row = b_.data() + n * blocks_ * bs / 2;
      const float* scale = scales_.data() + n * blocks_;
      int64_t b = 0;
      for (; b + 2 <= blocks_; b += 2) {
        add_block<M>(row, scale, b, total[0]);
        add_block<M>(row, scale, b + 1, total[1]);
      }
      if (b < blocks_) add_block<M>(row, scale, b, total[0]);
      const float bias = d_.bias ? bias_[static_cast<size_t>(n)] : 0.f;
#pragma GCC unroll 4
      for (int m = 0; m < M; ++m)
        y_[static_cast<size_t>(m * d_.n + n)] =
            hsum8(_mm256_add_ps(total[0][m], total[1][m])) - zero_offset(n, m) + bias;
    }
  }

  // Panels [p0, p1) of 16 columns, every row. Per K chunk, each column's weights are unpacked in
  // order into cols (16 × kc, a column's weights contiguous: vector stores), then turned into the
  // panel's rows (kc × 16) by 8 × 8 transposes.
  [[gnu::target("avx2,fma")]] void panels(int64_t p0, int64_t p1) const {
    static thread_local std::vector<float> panel, cols;
    const int64_t bs = d_.block, K = d_.k, N = d_.n;
    const int64_t kc_max = std::max(kKc, bs) / bs * bs;  // whole blocks per K chunk
    panel.assign(static_cast<size_t>(kc_max * kGemmNr), 0.f);
    cols.assign(static_cast<size_t>(kc_max * kGemmNr), 0.f);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t col = p * kGemmNr, nr = std::min(kGemmNr, N - col);
      for (int64_t pc = 0; pc < K; pc += kc_max) {
        const int64_t kc = std::min(kc_max, K - pc);
        for (int64_t j = 0; j < kGemmNr; ++j) {
          float* out = cols.data() + j * kc_max;
          if (j >= nr) {
            std::fill(out, out + kc, 0.f);
            continue;
          }
          const int64_t n = col + j;
          const uint8_t* row = b_.data() + n * blocks_ * bs / 2;
          for (int64_t k = 0; k < kc; k += 16) {
            const int64_t kk = pc + k, b = kk / bs;
            const float s = scales_[static_cast<size_t>(n * blocks_ + b)];
            __m256 w0, w1;
            unpack16(row + kk / 2, _mm256_set1_ps(s), _mm256_set1_ps(-zero_point(n, b) * s), w0, w1);
            _mm256_storeu_ps(out + k, w0);
            _mm256_storeu_ps(out + k + 8, w1);
          }
        }
        for (int64_t k = 0; k < kc; k += 8)
          for (int64_t j = 0; j < kGemmNr; j += 8)
            transpose8(cols.data() + j * kc_max + k, kc_max, panel.data() + k * kGemmNr + j);
        for (int64_t i = 0; i < d_.m; i += kGemmMr) {
          const int mr = static_cast<int>(std::min<int64_t>(kGemmMr, d_.m - i));
          gemm_micro_kernel(mr, kc, a_.data() + i * K + pc, K, panel.data(), y_.data() + i * N + col, N,
                            pc > 0, d_.bias ? bias_.data() + col : nullptr, nr);
        }
      }
    }
  }

  // Every weight dequantized into sgemm_packed's panels (K × 16 each, zero columns past N).
  void dequantize_all() {
    const int64_t panels = (d_.n + kGemmNr - 1) / kGemmNr;
    packed_ = Placed<float>(panels * d_.k * kGemmNr);
    for (int64_t n = 0; n < d_.n; ++n) {
      const int64_t p = n / kGemmNr, j = n % kGemmNr;
      const uint8_t* row = b_.data() + n * blocks_ * d_.block / 2;
      for (int64_t k = 0; k < d_.k; ++k) {
        const int64_t b = k / d_.block;
        const uint8_t byte = row[k / 2];
        const float q = static_cast<float>(k % 2 != 0 ? byte >> 4 : byte & 0x0f);
        packed_[static_cast<size_t>((p * d_.k + k) * kGemmNr + j)] =
            (q - zero_point(n, b)) * scales_[static_cast<size_t>(n * blocks_ + b)];
      }
    }
  }

  // Panels [p0, p1) of the dequantized copy, every row: sgemm_packed's loops (gemm.cpp).
  void packed_panels(int64_t p0, int64_t p1) const {
    constexpr int64_t kNc = 256;
    const int64_t K = d_.k, N = d_.n;
    for (int64_t pj = p0; pj < p1; pj += kNc / kGemmNr) {
      const int64_t pj1 = std::min(p1, pj + kNc / kGemmNr);
      for (int64_t pc = 0; pc < K; pc += kKc) {
        const int64_t kc = std::min(kKc, K - pc);
        for (int64_t i = 0; i < d_.m; i += kGemmMr) {
          const int mr = static_cast<int>(std::min<int64_t>(kGemmMr, d_.m - i));
          for (int64_t p = pj; p < pj1; ++p) {
            const int64_t col = p * kGemmNr;
            gemm_micro_kernel(mr, kc, a_.data() + i * K + pc, K, packed_.data() + (p * K + pc) * kGemmNr,
                              y_.data() + i * N + col, N, pc > 0, d_.bias ? bias_.data() + col : nullptr,
                              std::min(kGemmNr, N - col));
          }
        }
      }
    }
  }

  // out[i][r] = in[r][i] for an 8 × 8 tile: in's rows `ld` floats apart, out's kGemmNr.
  [[gnu::target("avx2,fma")]] static void transpose8(const float* in, int64_t ld, float* out) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * ld);
    t[0] = _mm256_unpacklo_ps(r[0], r[1]);
    t[1] = _mm256_unpackhi_ps(r[0], r[1]);
    t[2] = _mm256_unpacklo_ps(r[2], r[3]);
    t[3] = _mm256_unpackhi_ps(r[2], r[3]);
    t[4] = _mm256_unpacklo_ps(r[4], r[5]);
    t[5] = _mm256_unpackhi_ps(r[4], r[5]);
    t[6] = _mm256_unpacklo_ps(r[6], r[7]);
    t[7] = _mm256_unpackhi_ps(r[6], r[7]);
    r[0] = _mm256_shuffle_ps(t[0], t[2], 0x44);
    r[1] = _mm256_shuffle_ps(t[0], t[2], 0xee);
    r[2] = _mm256_shuffle_ps(t[1], t[3], 0x44);
    r[3] = _mm256_shuffle_ps(t[1], t[3], 0xee);
    r[4] = _mm256_shuffle_ps(t[4], t[6], 0x44);
    r[5] = _mm256_shuffle_ps(t[4], t[6], 0xee);
    r[6] = _mm256_shuffle_ps(t[5], t[7], 0x44);
    r[7] = _mm256_shuffle_ps(t[5], t[7], 0xee);
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_ps(out + i * kGemmNr, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
      _mm256_storeu_ps(out + (i + 4) * kGemmNr, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
  }

  Problem p_;
  uint64_t seed_;
  NBitsDesc d_;
  bool f32_weights_ = false;
  int64_t blocks_ = 0, zbytes_ = 0;
  Placed<float> a_, y_, scales_, bias_, a_split_, a_sums_, packed_;
  Placed<uint8_t> b_, zp_;
};

}  // namespace

std::unique_ptr<Kernel> make_nbits_kernel(const Problem& p, uint64_t seed, bool f32_weights) {
  return std::make_unique<NBitsKernel>(p, seed, f32_weights);
}

}  // namespace floorline::kernels::floorline_detail
