// Floorline's own CPU kernels for kinds the vendor libraries do have a primitive for, planned
// beside their cases, where a plain formulation beats the primitive as runtimes do (ONNX Runtime's
// CPU kernels):
//   concat       Concat on the plain layout: each input's contiguous chunks memcpy'd into the output
//                (one chunk per input per outer index), as ONNX Runtime's Concat copies them.
//   softmax      Softmax and LogSoftmax over any axis (outer × axis × inner): max, exp and sum, scale,
//   log_softmax  vectorised (a range-reduced polynomial exp over float arrays, built for AVX-512,
//                AVX2 and the baseline, one chosen under the ISA cap: kernels/dispatch.hpp).
//   copy         Resize whose output shape equals its input shape: the identity, one copy.
//   reduce       ReduceMean/Sum/Max/Min over one run of adjacent axes (outer × reduced × inner).
// The buffers are host buffers of the case's placement; OpenMP over independent pieces when the
// runtime has more than one thread. Verified against the reference: the copies exactly, softmax
// per element (verify_tolerance, reference.hpp).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "floorline/kernels/dispatch.hpp"
#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// --- softmax arithmetic, per ISA build -----------------------------------------------------------

// e^−t for t ≥ 0 (t = max − x): −t = n·ln2 + r with |r| ≤ ln2/2 (n rounded to nearest by the
// 1.5·2^23 shift, ln2 split in two so that n·ln2 is exact enough), e^r by its degree-6 Taylor
// polynomial (relative error below 2e-7 on that range), 2^n built in the exponent bits. t is
// clamped to 87 (e^−87 = 1.6e-38, still normal; +inf and NaN too) on its bits, an integer min
// (non-negative floats order as their bits): a float compare would be control flow that GCC at -O2
// does not if-convert, and the loop would stay scalar. So: straight-line code, no call, no branch.
// Written once for a float and for 16 floats (GCC vector extensions: one zmm register in the
// AVX-512 build; in the AVX2 build GCC 12 handles them badly, and the rows run row_max_avx2 and
// exp_sum_avx2 below instead). Always inlined, so the vector ABI warning (-Wpsabi, off for this
// file) concerns no real call.
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
template <class F, class I>
[[gnu::always_inline]] inline F exp_neg(F t) {
  const I tb = std::bit_cast<I>(t);
  const I limit = tb - tb + 0x42AE0000;  // 87.f
  const F x = -std::bit_cast<F>(tb < limit ? tb : limit);
  const F n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  F r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  F p = r - r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  I k;
  if constexpr (sizeof(F) == sizeof(float))
    k = static_cast<I>(n);
  else
    k = __builtin_convertvector(n, I);
  return p * std::bit_cast<F>((k + 127) * (1 << 23));
}
[[gnu::always_inline]] inline F16 load16(const float* p) {
  F16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The 16 lanes reduced as a tree (depth 4, not a chain of 15 dependent operations per row).
[[gnu::always_inline]] inline float lanes_sum(F16 v) {
  float a[8];
  for (int l = 0; l < 8; ++l) a[l] = v[l] + v[l + 8];
  for (int l = 0; l < 4; ++l) a[l] += a[l + 4];
  return (a[0] + a[2]) + (a[1] + a[3]);
}
[[gnu::always_inline]] inline float lanes_max(F16 v) {
  float a[8];
  for (int l = 0; l < 8; ++l) a[l] = v[l] > v[l + 8] ? v[l] : v[l + 8];
  for (int l = 0; l < 4; ++l) a[l] = a[l] > a[l + 4] ? a[l] : a[l + 4];
  const float b = a[0] > a[2] ? a[0] : a[2], c = a[1] > a[3] ? a[1] : a[3];
  return b > c ? b : c;
}

// The loops below are the bodies; each is compiled for AVX-512F, AVX2 and the baseline and called
// through ByTarget (floorline/kernels/dispatch.hpp), which picks the build under the ISA cap.
#define FLOORLINE_MULTIVERSION [[gnu::always_inline]] inline

// Rows: 16 lanes at a time, the lanes reduced at the end; the tail element by element.
// Rows of at least 16: the last n mod 16 elements run as one more vector, the row's last 16
// (overlapping the previous block: the max does not mind, the sum keeps only the new lanes, the
// overlapped outputs are written again with the same values); shorter rows element by element.
FLOORLINE_MULTIVERSION float row_max_body(const float* x, int64_t n) {
  if (n < 16) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
    return m;
  }
  F16 acc = load16(x);
  for (int64_t j = 16; j + 16 <= n; j += 16) {
    const F16 v = load16(x + j);
    acc = v > acc ? v : acc;
  }
  if (n % 16) {
    const F16 v = load16(x + n - 16);
    acc = v > acc ? v : acc;
  }
  return lanes_max(acc);
}

// y = e^(x − m) (y null: not written); returns Σ e^(x − m).
FLOORLINE_MULTIVERSION float exp_sum_body(const float* x, float m, float* y, int64_t n) {
  if (n < 16) {
    float s = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      const float e = exp_neg<float, int32_t>(m - x[j]);
      if (y) y[j] = e;
      s += e;
    }
    return s;
  }
  F16 acc = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const F16 e = exp_neg<F16, I16>(m - load16(x + j));
    if (y) std::memcpy(y + j, &e, sizeof e);
    acc += e;
  }
  if (j < n) {
    const F16 e = exp_neg<F16, I16>(m - load16(x + n - 16));
    if (y) std::memcpy(y + n - 16, &e, sizeof e);
    const I16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const I16 first_new = lane - lane + static_cast<int32_t>(16 - (n - j));
    const F16 zero = {};
    acc += lane >= first_new ? e : zero;
  }
  return lanes_sum(acc);
}

FLOORLINE_MULTIVERSION void scale_body(float* y, float k, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= k;
}

FLOORLINE_MULTIVERSION void shift_body(const float* x, float c, float* y, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - c;
}

// Softmax along a strided axis: rows of `inner` contiguous elements, reduced element-wise.
FLOORLINE_MULTIVERSION void cols_max_body(const float* row, float* m, int64_t inner) {
#pragma omp simd
  for (int64_t i = 0; i < inner; ++i) m[i] = row[i] > m[i] ? row[i] : m[i];
}
FLOORLINE_MULTIVERSION void cols_exp_sum_body(const float* row, const float* m, float* y, float* s,
                                              int64_t inner) {
#pragma omp simd
  for (int64_t i = 0; i < inner; ++i) {
    const float e = exp_neg<float, int32_t>(m[i] - row[i]);
    if (y) y[i] = e;
    s[i] += e;
  }
}
FLOORLINE_MULTIVERSION void cols_scale_body(float* y, const float* k, int64_t inner) {
#pragma omp simd
  for (int64_t i = 0; i < inner; ++i) y[i] *= k[i];
}
FLOORLINE_MULTIVERSION void cols_shift_body(const float* row, const float* c, float* y, int64_t inner) {
#pragma omp simd
  for (int64_t i = 0; i < inner; ++i) y[i] = row[i] - c[i];
}

#undef FLOORLINE_MULTIVERSION

// The rows in AVX2 intrinsics, where the build chosen is AVX2 (and the CPU has FMA). The bodies
// above use GCC's generic 16-float vectors, one register in the AVX-512 build; in the AVX2 one they
// went through the stack 16 bytes at a time and their compares lane by lane in general registers
// (the softmax of 96 × 197 × 197 took 11.9 ms at one thread, against 3.3 for oneDNN's jit:avx2).
// Here the accumulators stay in registers, and exp_sum runs two vectors per step, so that two
// polynomials' chains overlap. exp_neg8 (internal.hpp) is exp_neg's steps with FMAs.
// As row_max_body and exp_sum_body, 8 lanes (rows of at least 8; shorter ones go to the bodies).
[[gnu::target("avx2,fma")]] float row_max_avx2(const float* x, int64_t n) {
  __m256 a = _mm256_loadu_ps(x), b = a;
  int64_t j = 8;
  // max_ps(v, acc) is acc where either is NaN: as row_max_body's v > acc ? v : acc.
  for (; j + 16 <= n; j += 16) {
    a = _mm256_max_ps(_mm256_loadu_ps(x + j), a);
    b = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), b);
  }
  for (; j + 8 <= n; j += 8) a = _mm256_max_ps(_mm256_loadu_ps(x + j), a);
  if (j < n) b = _mm256_max_ps(_mm256_loadu_ps(x + n - 8), b);
  return hmax8(_mm256_max_ps(a, b));
}
[[gnu::target("avx2,fma")]] float exp_sum_avx2(const float* x, float m, float* y, int64_t n) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 e0 = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(x + j)));
    const __m256 e1 = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(x + j + 8)));
    if (y) {
      _mm256_storeu_ps(y + j, e0);
      _mm256_storeu_ps(y + j + 8, e1);
    }
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(x + j)));
    if (y) _mm256_storeu_ps(y + j, e);
    s0 = _mm256_add_ps(s0, e);
  }
  if (j < n) {  // the row's last 8, the lanes already summed masked out
    const __m256 e = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(x + n - 8)));
    if (y) _mm256_storeu_ps(y + n - 8, e);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i keep = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int32_t>(7 - (n - j))));
    s1 = _mm256_add_ps(s1, _mm256_and_ps(e, _mm256_castsi256_ps(keep)));
  }
  return hsum8(_mm256_add_ps(s0, s1));
}
// --- short rows: the whole row in registers ---------------------------------------------------------
// A Softmax along rows of at most 256 elements in the AVX-512 build, 64 in the AVX2 one (Swin's 49
// keys, BERT's 128, ViT's 197, a decoder's first tokens) as one pass per row: the row loaded once,
// its max, e^(x − max) and their sum in registers, the scaled row stored once. The three passes
// above cost three calls, a pass over memory and an overlapped tail each: on Swin's 64 × 3 × 49 × 49
// at one thread on a Zen 4 EPYC they took 330 µs (AVX-512; 344 in the AVX2 build), the one pass
// 195–220 (243–249), ONNX Runtime's softmax node 262 µs (its first look's profile).
constexpr int64_t kShortRowAvx512 = 256, kShortRowAvx2 = 64;

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unmasked lanes' source, which its
// -Wmaybe-uninitialized and -Wuninitialized take for a read of an uninitialised value (GCC bug
// 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// exp_neg8 on 16 lanes (AVX-512F).
[[gnu::target("avx512f")]] inline __m512 exp_neg16(__m512 t) {
  const __m512i tb = _mm512_min_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x42AE0000));
  const __m512 x = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_castsi512_ps(tb));
  const __m512 shift = _mm512_set1_ps(12582912.f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shift), shift);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 720.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  const __m512i k = _mm512_cvtps_epi32(n);
  return _mm512_mul_ps(
      p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23)));
}

// R rows at x, y of n elements, V = ⌈n / 16⌉ vectors each (1 ≤ V ≤ 16), step by step across the rows:
// one row's steps are a chain (the max's and the sum's reductions, the exp's polynomial), two rows
// side by side overlap theirs. The loops are unrolled (GCC at -O2 would keep v[][] on the stack).
template <int V, int R>
[[gnu::target("avx512f")]] inline void short_row_block_avx512(const float* x, float* y, int64_t n) {
  const auto tail = static_cast<__mmask16>((1u << (n - 16 * (V - 1))) - 1u);
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 v[R][V], m[R], sum[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int k = 0; k < V - 1; ++k) v[r][k] = _mm512_loadu_ps(x + r * n + 16 * k);
    v[r][V - 1] = _mm512_mask_loadu_ps(minus_inf, tail, x + r * n + 16 * (V - 1));
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    __m512 mx = v[r][0];
#pragma GCC unroll 16
    for (int k = 1; k < V; ++k) mx = _mm512_max_ps(mx, v[r][k]);
    m[r] = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    sum[r] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) {
      v[r][k] = exp_neg16(_mm512_sub_ps(m[r], v[r][k]));
      if (k == V - 1) v[r][k] = _mm512_maskz_mov_ps(tail, v[r][k]);  // e^−87 in the −∞ lanes: out
      sum[r] = _mm512_add_ps(sum[r], v[r][k]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(sum[r]));
#pragma GCC unroll 16
    for (int k = 0; k < V - 1; ++k) _mm512_storeu_ps(y + r * n + 16 * k, _mm512_mul_ps(v[r][k], inv));
    _mm512_mask_storeu_ps(y + r * n + 16 * (V - 1), tail, _mm512_mul_ps(v[r][V - 1], inv));
  }
}

template <int V>
[[gnu::target("avx512f")]] void short_rows_avx512(const float* x, float* y, int64_t rows, int64_t n) {
  constexpr int R = V <= 4 ? 2 : 1;  // 32 zmm registers: two rows of at most 4 vectors
  int64_t o = 0;
  for (; o + R <= rows; o += R) short_row_block_avx512<V, R>(x + o * n, y + o * n, n);
  if (o < rows) short_row_block_avx512<V, 1>(x + o * n, y + o * n, n);
}

#pragma GCC diagnostic pop

// The same on 8 lanes (AVX2 and FMA), V = ⌈n / 8⌉ vectors (2 ≤ V ≤ 8: rows of 9 to 64). No masked
// loads or stores (vmaskmovps stores are microcoded on AMD's cores: this path with them took 1.5×
// the three passes' time on a Zen 4 EPYC): the last vector is the row's last 8, its lanes before the
// previous vector's end kept out of the sum (the max does not mind them) and stored last, with the
// same values the vector before wrote there.
template <int V, int R>
[[gnu::target("avx2,fma")]] inline void short_row_block_avx2(const float* x, float* y, int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 keep =
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int32_t>(8 * V - n - 1))));
  __m256 v[R][V], m[R], sum[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int k = 0; k < V - 1; ++k) v[r][k] = _mm256_loadu_ps(x + r * n + 8 * k);
    v[r][V - 1] = _mm256_loadu_ps(x + r * n + n - 8);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    __m256 mx = v[r][0];
#pragma GCC unroll 16
    for (int k = 1; k < V; ++k) mx = _mm256_max_ps(mx, v[r][k]);
    m[r] = _mm256_set1_ps(hmax8(mx));
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    sum[r] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int k = 0; k < V; ++k) {
      v[r][k] = exp_neg8(_mm256_sub_ps(m[r], v[r][k]));
      sum[r] = _mm256_add_ps(sum[r], k == V - 1 ? _mm256_and_ps(v[r][k], keep) : v[r][k]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256 inv = _mm256_set1_ps(1.f / hsum8(sum[r]));
#pragma GCC unroll 16
    for (int k = 0; k < V - 1; ++k) _mm256_storeu_ps(y + r * n + 8 * k, _mm256_mul_ps(v[r][k], inv));
    _mm256_storeu_ps(y + r * n + n - 8, _mm256_mul_ps(v[r][V - 1], inv));
  }
}

template <int V>
[[gnu::target("avx2,fma")]] void short_rows_avx2(const float* x, float* y, int64_t rows, int64_t n) {
  constexpr int R = V <= 4 ? 2 : 1;  // 16 ymm registers: two rows of at most 4 vectors
  int64_t o = 0;
  for (; o + R <= rows; o += R) short_row_block_avx2<V, R>(x + o * n, y + o * n, n);
  if (o < rows) short_row_block_avx2<V, 1>(x + o * n, y + o * n, n);
}

bool rows_in_avx2();

// The one-pass function for rows of n elements, of the AVX-512 build (n ≤ kShortRowAvx512) or the
// AVX2 one with FMA (8 < n ≤ kShortRowAvx2) where that is the build chosen; null elsewhere.
using ShortRows = void (*)(const float* x, float* y, int64_t rows, int64_t n);
template <int... V>
constexpr auto avx512_by_v(std::integer_sequence<int, V...>) {
  return std::array<ShortRows, sizeof...(V)>{short_rows_avx512<V + 1>...};
}
ShortRows short_rows(int64_t n) {
  if (n < 1) return nullptr;
  if (ByTarget<row_max_body>::chosen() == KernelTarget::kAvx512) {
    if (n > kShortRowAvx512) return nullptr;
    static constexpr auto by_v = avx512_by_v(std::make_integer_sequence<int, kShortRowAvx512 / 16>{});
    return by_v[static_cast<size_t>((n + 15) / 16 - 1)];
  }
  if (n > 8 && n <= kShortRowAvx2 && rows_in_avx2()) {
    static constexpr ShortRows by_v[] = {short_rows_avx2<2>, short_rows_avx2<3>, short_rows_avx2<4>,
                                         short_rows_avx2<5>, short_rows_avx2<6>, short_rows_avx2<7>,
                                         short_rows_avx2<8>};
    return by_v[(n + 7) / 8 - 2];
  }
  return nullptr;
}

bool rows_in_avx2() {
  static const bool yes =
      ByTarget<row_max_body>::chosen() == KernelTarget::kAvx2 && __builtin_cpu_supports("fma");
  return yes;
}

float row_max(const float* x, int64_t n) {
  if (n >= 8 && rows_in_avx2()) return row_max_avx2(x, n);
  return ByTarget<row_max_body>::call(x, n);
}
float exp_sum(const float* x, float m, float* y, int64_t n) {
  if (n >= 8 && rows_in_avx2()) return exp_sum_avx2(x, m, y, n);
  return ByTarget<exp_sum_body>::call(x, m, y, n);
}
void scale(float* y, float k, int64_t n) {
  ByTarget<scale_body>::call(y, k, n);
}
void shift(const float* x, float c, float* y, int64_t n) {
  ByTarget<shift_body>::call(x, c, y, n);
}
void cols_max(const float* row, float* m, int64_t inner) {
  ByTarget<cols_max_body>::call(row, m, inner);
}
void cols_exp_sum(const float* row, const float* m, float* y, float* s, int64_t inner) {
  ByTarget<cols_exp_sum_body>::call(row, m, y, s, inner);
}
void cols_scale(float* y, const float* k, int64_t inner) {
  ByTarget<cols_scale_body>::call(y, k, inner);
}
void cols_shift(const float* row, const float* c, float* y, int64_t inner) {
  ByTarget<cols_shift_body>::call(row, c, y, inner);
}

// --- the kernel -----------------------------------------------------------------------------------

struct Piece {                                             // one memcpy
  int64_t src = 0, offset = 0, dst_offset = 0, bytes = 0;  // input index, byte offsets, length
};

constexpr int64_t kPieceBytes = 256 << 10;  // copies are split at this size for the threads

class DataKernel final : public Kernel {
 public:
  DataKernel(Problem p, std::string name, uint64_t seed, int block)
      : p_(std::move(p)), name_(std::move(name)), seed_(seed), block_(block) {
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const auto& op : *list)
        if (std::any_of(op.shape.begin(), op.shape.end(), [](int64_t d) { return d < 0; }))
          unsupported("a shape is unknown");
    if (p_.outputs.size() != 1) unsupported(p_.op + ": one output expected");
    if (name_ == "copy_runs") {
      plan_copy_runs();
    } else if (p_.kind == LayerKind::kConcat) {
      plan_concat();
    } else if (p_.kind == LayerKind::kResize) {
      if (p_.inputs.empty() || p_.inputs[0].shape != p_.outputs[0].shape)
        unsupported("Resize: the identity copy runs only where the output shape equals the input's");
      add_pieces(0, 0, 0, elements(p_.outputs[0].shape) * 4);
    } else if (is_reduce()) {
      plan_reduce();
    } else if (is_binary()) {
      plan_binary();
    } else if (is_expand()) {
      plan_expand();
    } else {
      plan_softmax();
    }
    for (const auto& op : p_.inputs) in_.emplace_back(elements(op.shape));
    out_ = Placed<float>(elements(p_.outputs[0].shape));
    fill(seed_);
  }

  std::string implementation() const override { return "floorline " + name_; }
  int64_t workspace_bytes() const override { return 0; }

  // Every operand, plain, or a blocked concat's in oneDNN's blocked layout aBcd<B>b, named as its
  // ports name it (replay wires them).
  std::optional<Port> port(bool output, size_t k) const override {
    if (output ? k != 0 : k >= in_.size()) return std::nullopt;
    const Placed<float>& t = output ? out_ : in_[k];
    if (block_ == 0) return Port{t.data(), t.bytes(), "plain"};
    const Shape& s = output ? p_.outputs[0].shape : p_.inputs[k].shape;
    return Port{t.data(), t.bytes(), blocked_channels_layout(block_, s)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (!port(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? out_ : in_[k]).bind(data);
    return {};
  }

  void run() override {
    if (!pieces_.empty())
      copy();
    else if (is_reduce())
      reduce();
    else if (is_binary())
      binary();
    else if (is_expand())
      expand();
    else
      softmax();
  }

  Status verify() override {
    fill(seed_ + 7);
    run();
    std::vector<HostTensor> ins;
    for (size_t k = 0; k < in_.size(); ++k) {
      const float* v = in_[k].data();
      ins.push_back({p_.inputs[k].shape, std::vector<float>(v, v + elements(p_.inputs[k].shape))});
    }
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, {}));
    if (ref.empty() || ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's output is not of shape {}", fmt::join(p_.outputs[0].shape, "x"));
    const float* y = out_.data();
    if (pieces_.empty() && !is_expand()) return compare_output(y, ref[0], verify_tolerance(p_));
    for (size_t e = 0; e < ref[0].data.size(); ++e)  // a copy: exactly
      if (y[e] != ref[0].data[e])
        return make_error("output element {}: {} vs the reference's {}", e, y[e], ref[0].data[e]);
    return {};
  }

 private:
  // Concat: per outer index (the dims before the axis), input k's chunk of shape[axis]·inner
  // elements goes after the chunks of inputs 0..k−1.
  void plan_concat() {
    const Shape& ys = p_.outputs[0].shape;
    const int64_t rank = static_cast<int64_t>(ys.size());
    int64_t axis = p_.int_attr("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) unsupported(fmt::format("Concat: axis {} out of range", axis));
    const int64_t outer = elements(Shape(ys.begin(), ys.begin() + axis));
    const int64_t inner = elements(Shape(ys.begin() + axis + 1, ys.end()));
    int64_t at = 0;
    for (const auto& in : p_.inputs) {
      if (static_cast<int64_t>(in.shape.size()) != rank) unsupported("Concat: inputs of another rank");
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && in.shape[static_cast<size_t>(d)] != ys[static_cast<size_t>(d)])
          unsupported("Concat: an input differs from the output off the axis");
      at += in.shape[static_cast<size_t>(axis)];
    }
    if (at != ys[static_cast<size_t>(axis)]) unsupported("Concat: the inputs do not fill the output");
    // On the blocked layout aBcd<B>b (N, C/B, H, W, B) with every input's channels a multiple of B,
    // input k's channels of one image are C_k·H·W contiguous floats at the same offsets as in NCHW:
    // the plain plan below copies them unchanged.
    if (block_ > 0) {
      if (rank != 4 || axis != 1) unsupported("Concat on a blocked layout: 4-D, along the channels only");
      for (const auto& in : p_.inputs)
        if (in.shape[1] % block_ != 0)
          unsupported(fmt::format("Concat on blocked{}c: an input's {} channels are no multiple of {}",
                                  block_, in.shape[1], block_));
    }
    const int64_t out_chunk = ys[static_cast<size_t>(axis)] * inner * 4;
    for (int64_t o = 0; o < outer; ++o) {
      int64_t dst = o * out_chunk;
      for (size_t k = 0; k < p_.inputs.size(); ++k) {
        const int64_t chunk = p_.inputs[k].shape[static_cast<size_t>(axis)] * inner * 4;
        add_pieces(static_cast<int64_t>(k), o * chunk, dst, chunk);
        dst += chunk;
      }
    }
  }
  // A Transpose or Slice as runs of contiguous elements (copy_runs): one piece per run, in y's order.
  void plan_copy_runs() {
    const auto r = copy_runs(p_);
    if (!r)
      unsupported(
          fmt::format("{}: not runs of {} contiguous elements or more (copy_runs)", p_.op, kMinRunFloats));
    pieces_.reserve(static_cast<size_t>(r->pieces));
    std::vector<int64_t> at(r->outer.size(), 0);
    const int64_t run_bytes = r->run * 4;
    for (int64_t i = 0, src = r->base; i < r->pieces; ++i) {
      add_pieces(0, src * 4, i * run_bytes, run_bytes);
      // The odometer: the innermost outer dim first.
      for (size_t d = r->outer.size(); d-- > 0;) {
        const auto [size, stride] = r->outer[d];
        src += stride;
        if (++at[d] < size) break;
        src -= size * stride;
        at[d] = 0;
      }
    }
  }
  void add_pieces(int64_t src, int64_t offset, int64_t dst, int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += kPieceBytes)
      pieces_.push_back({src, offset + b, dst + b, std::min(kPieceBytes, bytes - b)});
    if (bytes == 0) pieces_.push_back({src, offset, dst, 0});  // (a copy case has one piece at least)
  }

  void plan_softmax() {
    const Shape& xs = p_.inputs.at(0).shape;
    if (xs != p_.outputs[0].shape) unsupported(p_.op + ": output shape differs from the input's");
    const int64_t rank = static_cast<int64_t>(xs.size());
    int64_t axis = p_.int_attr("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) unsupported(fmt::format("{}: axis {} out of range", p_.op, axis));
    outer_ = elements(Shape(xs.begin(), xs.begin() + axis));
    if (p_.int_attr("coerce_2d", 0) != 0) {  // opset < 13: over the flattened trailing dims
      len_ = elements(Shape(xs.begin() + axis, xs.end()));
      inner_ = 1;
    } else {
      len_ = xs[static_cast<size_t>(axis)];
      inner_ = elements(Shape(xs.begin() + axis + 1, xs.end()));
    }
    if (len_ == 0) unsupported(p_.op + ": an empty axis");
    m_.resize(static_cast<size_t>(inner_));
    s_.resize(static_cast<size_t>(inner_));
  }

  bool is_reduce() const {
    return p_.kind == LayerKind::kReduceMean || p_.kind == LayerKind::kReduceSum ||
           p_.kind == LayerKind::kReduceMax || p_.kind == LayerKind::kReduceMin;
  }

  // ReduceMean/Sum/Max/Min over one run of adjacent axes: the input as outer × len × inner, the
  // output outer × inner (keepdims or not, the same elements). mnasnet's x.mean([2, 3]) (1280 rows
  // of 49) took oneDNN 2.6's reduction 337 µs at one thread; rows of contiguous elements take a
  // few µs.
  void plan_reduce() {
    const Shape& xs = p_.inputs.at(0).shape;
    const int64_t rank = static_cast<int64_t>(xs.size());
    std::vector<int64_t> axes = p_.ints_attr("axes");
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);  // no axes: every axis
    for (auto& a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) unsupported(fmt::format("{}: axis {} out of range", p_.op, a));
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    if (axes.back() - axes.front() + 1 != static_cast<int64_t>(axes.size()))
      unsupported(p_.op + ": the reduced axes are not adjacent");
    outer_ = elements(Shape(xs.begin(), xs.begin() + axes.front()));
    len_ = elements(Shape(xs.begin() + axes.front(), xs.begin() + axes.back() + 1));
    inner_ = elements(Shape(xs.begin() + axes.back() + 1, xs.end()));
    if (len_ == 0) unsupported(p_.op + ": an empty reduced axis");
    if (elements(p_.outputs[0].shape) != outer_ * inner_)
      unsupported(p_.op + ": the output is not the input without its reduced axes");
  }

  void reduce() {
    const float* x = in_[0].data();
    float* y = out_.data();
    const LayerKind kind = p_.kind;
    const bool mean = kind == LayerKind::kReduceMean;
    const int64_t len = len_, inner = inner_;
    auto slab = [&](int64_t o) {
      const float* xs = x + o * len * inner;
      float* ys = y + o * inner;
      if (inner == 1) {  // one row of len contiguous elements
        if (kind == LayerKind::kReduceMax) {
          *ys = row_max(xs, len);
        } else if (kind == LayerKind::kReduceMin) {
          float m = xs[0];
          for (int64_t i = 1; i < len; ++i) m = std::min(m, xs[i]);
          *ys = m;
        } else {
          float s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t i = 0; i < len; ++i) s += xs[i];
          *ys = mean ? s / static_cast<float>(len) : s;
        }
        return;
      }
      std::copy(xs, xs + inner, ys);  // rows of `inner` combined element-wise
      for (int64_t k = 1; k < len; ++k) {
        const float* r = xs + k * inner;
        if (kind == LayerKind::kReduceMax) {
          cols_max(r, ys, inner);
        } else if (kind == LayerKind::kReduceMin) {
          for (int64_t i = 0; i < inner; ++i) ys[i] = std::min(ys[i], r[i]);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < inner; ++i) ys[i] += r[i];
        }
      }
      if (mean)
        for (int64_t i = 0; i < inner; ++i) ys[i] /= static_cast<float>(len);
    };
    if (omp_get_max_threads() == 1 || outer_ == 1) {  // no parallel region for one thread
      for (int64_t o = 0; o < outer_; ++o) slab(o);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer_; ++o) slab(o);
  }

  bool is_binary() const {
    return p_.kind == LayerKind::kAdd || p_.kind == LayerKind::kSub || p_.kind == LayerKind::kMul ||
           p_.kind == LayerKind::kDiv;
  }

  // Add, Sub, Mul, Div with ONNX (numpy) broadcasting. Each output dimension gets both inputs'
  // element strides (0 where an input is broadcast along it, the inputs aligned on their last
  // dimensions); adjacent dimensions whose strides chain are merged, so that a per-channel
  // operand (ssdlite's 3x320x320 − 3x1x1 normalization: 0.1 ms, oneDNN 2.6's reference binary
  // 14 ms there) leaves a few long rows. A row is the innermost merged dimension, split in pieces of
  // kBinaryPiece elements for the threads; its inputs' strides there are 0 or 1.
  void plan_binary() {
    if (p_.inputs.size() != 2) unsupported(p_.op + ": two inputs expected");
    const Shape& ys = p_.outputs[0].shape;
    if (elements(ys) == 0) unsupported(p_.op + ": an empty output");
    const size_t rank = ys.size();
    std::vector<int64_t> size(rank), sa(rank), sb(rank);
    auto strides = [&](const Shape& xs, std::vector<int64_t>& st) {
      if (xs.size() > rank) unsupported(p_.op + ": an input of higher rank than the output");
      int64_t step = 1;
      for (size_t k = 0; k < rank; ++k) {
        const size_t d = rank - 1 - k;  // output dim, from the last
        const int64_t x = k < xs.size() ? xs[xs.size() - 1 - k] : 1;
        if (x != ys[d] && x != 1) unsupported(p_.op + ": an input does not broadcast to the output");
        st[d] = x == 1 && ys[d] != 1 ? 0 : step;
        step *= x;
      }
    };
    strides(p_.inputs[0].shape, sa);
    strides(p_.inputs[1].shape, sb);
    for (size_t d = 0; d < rank; ++d) size[d] = ys[d];
    dims_.clear();
    for (size_t d = 0; d < rank; ++d) {
      if (size[d] == 1) continue;  // a dimension of 1 moves nothing
      dims_.push_back({size[d], sa[d], sb[d]});
    }
    std::reverse(dims_.begin(), dims_.end());  // innermost first
    merge_rows();
  }

  // dims_, innermost first, merged (an outer dim into the inner one when both strides chain) and
  // turned outermost first; the last is a row, split in pieces of kBinaryPiece elements.
  void merge_rows() {
    std::vector<BinaryDim> merged;
    for (const BinaryDim& d : dims_) {
      if (!merged.empty()) {
        BinaryDim& inner = merged.back();
        if (d.sa == inner.sa * inner.n && d.sb == inner.sb * inner.n) {
          inner.n *= d.n;
          continue;
        }
      }
      merged.push_back(d);
    }
    std::reverse(merged.begin(), merged.end());
    if (merged.empty()) merged.push_back({1, 1, 1});  // one element
    dims_ = std::move(merged);
    const BinaryDim& row = dims_.back();
    if ((row.sa != 0 && row.sa != 1) || (row.sb != 0 && row.sb != 1))
      unsupported(p_.op + ": no contiguous innermost run");
    rows_ = elements(p_.outputs[0].shape) / row.n;
    pieces_per_row_ = (row.n + kBinaryPiece - 1) / kBinaryPiece;
  }

  // Piece i of the rows: its row's offsets into the inputs (element strides sa, sb), where it
  // starts in the row, and its length.
  struct RowPiece {
    int64_t row = 0, oa = 0, ob = 0, from = 0, n = 0;
  };
  RowPiece row_piece(int64_t i) const {
    const BinaryDim& row = dims_.back();
    RowPiece rp;
    rp.row = i / pieces_per_row_;
    rp.from = (i % pieces_per_row_) * kBinaryPiece;
    rp.n = std::min(kBinaryPiece, row.n - rp.from);
    int64_t rest = rp.row;
    for (int64_t d = static_cast<int64_t>(dims_.size()) - 2; d >= 0; --d) {  // the row's outer index
      const BinaryDim& dim = dims_[static_cast<size_t>(d)];
      const int64_t at = rest % dim.n;
      rest /= dim.n;
      rp.oa += at * dim.sa;
      rp.ob += at * dim.sb;
    }
    return rp;
  }
  template <class F>
  void over_pieces(const F& piece) const {
    const int64_t n = rows_ * pieces_per_row_;
    if (n == 1 || omp_get_max_threads() == 1) {  // no parallel region for one thread
      for (int64_t i = 0; i < n; ++i) piece(row_piece(i));
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) piece(row_piece(i));
  }

  bool is_expand() const {
    return p_.kind == LayerKind::kExpand || p_.kind == LayerKind::kTile;
  }

  // Expand (x broadcast to the output shape, NumPy rules) and Tile (x repeated r_d times along each
  // dim d) as rows of copies. Each output dim gets x's element stride, 0 where x is broadcast along
  // it. A Tile's dim of r_d·x_d elements is two dims, r_d of stride 0 outside x_d of x's stride,
  // since its output index is rep·x_d + i. Merged as the binary ops' dims are, the innermost is a
  // row: a memcpy where x's stride there is 1, a fill of one value where it is 0. Llama's
  // grouped-query K/V Expand (1x4x1xTx64 to 1x4x8xTx64) is 32 copies of T·64 floats: it reads an
  // eighth of what a copy of its output (the oneDNN backend's proxy) reads.
  void plan_expand() {
    if (p_.inputs.size() != 1) unsupported(p_.op + ": its shape or repeats are not constant");
    const Shape& xs = p_.inputs[0].shape;
    const Shape& ys = p_.outputs[0].shape;
    if (elements(ys) == 0) unsupported(p_.op + ": an empty output");
    const bool tile = p_.kind == LayerKind::kTile;
    if (tile ? xs.size() != ys.size() : xs.size() > ys.size())
      unsupported(p_.op + ": the input's rank does not fit the output's");
    dims_.clear();
    int64_t step = 1;
    for (size_t k = 0; k < ys.size(); ++k) {  // from the last dim
      const int64_t y = ys[ys.size() - 1 - k], x = k < xs.size() ? xs[xs.size() - 1 - k] : 1;
      if (tile) {
        if (x == 0 || y % x != 0) unsupported("Tile: an output dim is not a multiple of the input's");
        if (x != 1) dims_.push_back({x, step, 0});
        if (y / x != 1) dims_.push_back({y / x, 0, 0});
      } else {
        if (x != y && x != 1) unsupported("Expand: the input does not broadcast to the output");
        if (y != 1) dims_.push_back({y, x == 1 ? 0 : step, 0});
      }
      step *= x;
    }
    merge_rows();
  }

  void expand() {
    const float* x = in_[0].data();
    float* y = out_.data();
    const int64_t row_n = dims_.back().n;
    const bool contiguous = dims_.back().sa != 0;
    over_pieces([&](const RowPiece& rp) {
      float* py = y + rp.row * row_n + rp.from;
      if (contiguous)
        std::memcpy(py, x + rp.oa + rp.from, static_cast<size_t>(rp.n) * sizeof(float));
      else
        std::fill_n(py, rp.n, x[rp.oa]);
    });
  }

  template <int Op, int A, int B>
  static void binary_run(const float* a, const float* b, float* y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float x = a[A * i], z = b[B * i];
      if constexpr (Op == 0)
        y[i] = x + z;
      else if constexpr (Op == 1)
        y[i] = x - z;
      else if constexpr (Op == 2)
        y[i] = x * z;
      else
        y[i] = x / z;
    }
  }
  template <int Op>
  static void binary_row(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
    if (sa && sb)
      binary_run<Op, 1, 1>(a, b, y, n);
    else if (sa)
      binary_run<Op, 1, 0>(a, b, y, n);
    else if (sb)
      binary_run<Op, 0, 1>(a, b, y, n);
    else
      binary_run<Op, 0, 0>(a, b, y, n);
  }

  void binary() {
    const float* a = in_[0].data();
    const float* b = in_[1].data();
    float* y = out_.data();
    const BinaryDim& row = dims_.back();
    const int op = p_.kind == LayerKind::kAdd   ? 0
                   : p_.kind == LayerKind::kSub ? 1
                   : p_.kind == LayerKind::kMul ? 2
                                                : 3;
    over_pieces([&](const RowPiece& rp) {
      const float* pa = a + rp.oa + rp.from * row.sa;
      const float* pb = b + rp.ob + rp.from * row.sb;
      float* py = y + rp.row * row.n + rp.from;
      switch (op) {
        case 0:
          return binary_row<0>(pa, row.sa, pb, row.sb, py, rp.n);
        case 1:
          return binary_row<1>(pa, row.sa, pb, row.sb, py, rp.n);
        case 2:
          return binary_row<2>(pa, row.sa, pb, row.sb, py, rp.n);
        default:
          return binary_row<3>(pa, row.sa, pb, row.sb, py, rp.n);
      }
    });
  }

  void fill(uint64_t seed) {
    for (size_t k = 0; k < in_.size(); ++k) {
      float* v = in_[k].data();
      const int64_t n = elements(p_.inputs[k].shape);
      fill_uniform(v, n, seed + k);
      if (is_binary()) {
        // A divisor in [1, 2): no quotient blows up (a normalization's std, a mean's count).
        if (p_.kind == LayerKind::kDiv && k == 1)
          for (int64_t e = 0; e < n; ++e) v[e] = 1.5f + 0.5f * v[e];
        continue;
      }
      // Softmax: logits in [−8, 8), as attention scores spread, so the exp sees a real range.
      if (pieces_.empty() && !is_expand())
        for (int64_t e = 0; e < n; ++e) v[e] *= 8.f;
    }
  }

  void copy() {
    char* y = reinterpret_cast<char*>(out_.data());
    const int64_t n = static_cast<int64_t>(pieces_.size());
    auto one = [&](int64_t i) {
      const Piece& c = pieces_[static_cast<size_t>(i)];
      std::memcpy(y + c.dst_offset,
                  reinterpret_cast<const char*>(in_[static_cast<size_t>(c.src)].data()) + c.offset,
                  static_cast<size_t>(c.bytes));
    };
    if (n == 1 || omp_get_max_threads() == 1) {  // no parallel region for one thread
      for (int64_t i = 0; i < n; ++i) one(i);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) one(i);
  }

  void softmax() {
    const float* x = in_[0].data();
    float* y = out_.data();
    const bool log = p_.kind == LayerKind::kLogSoftmax;
    const int64_t len = len_, inner = inner_;
    const ShortRows in_registers = inner == 1 && !log ? short_rows(len) : nullptr;
    if (in_registers) {  // short rows in one pass each, a block of rows per thread
      if (omp_get_max_threads() == 1 || outer_ == 1) {
        in_registers(x, y, outer_, len);
        return;
      }
#pragma omp parallel
      {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t begin = outer_ * t / nt, end = outer_ * (t + 1) / nt;
        in_registers(x + begin * len, y + begin * len, end - begin, len);
      }
      return;
    }
    if (inner == 1) {  // rows of len contiguous elements
      auto row = [&](int64_t o) {
        const float* xr = x + o * len;
        float* yr = y + o * len;
        const float m = row_max(xr, len);
        if (log) {
          shift(xr, m + std::log(exp_sum(xr, m, nullptr, len)), yr, len);
        } else {
          scale(yr, 1.f / exp_sum(xr, m, yr, len), len);
        }
      };
      if (omp_get_max_threads() == 1 || outer_ == 1) {
        for (int64_t o = 0; o < outer_; ++o) row(o);
        return;
      }
#pragma omp parallel for schedule(static)
      for (int64_t o = 0; o < outer_; ++o) row(o);
      return;
    }
    // Along a strided axis: per outer index, element-wise over rows of `inner`.
    auto slab = [&](int64_t o, std::vector<float>& m, std::vector<float>& s) {
      const float* xs = x + o * len * inner;
      float* ys = y + o * len * inner;
      std::copy(xs, xs + inner, m.begin());
      for (int64_t k = 1; k < len; ++k) cols_max(xs + k * inner, m.data(), inner);
      std::fill(s.begin(), s.end(), 0.f);
      for (int64_t k = 0; k < len; ++k)
        cols_exp_sum(xs + k * inner, m.data(), log ? nullptr : ys + k * inner, s.data(), inner);
      if (log) {
        for (int64_t i = 0; i < inner; ++i)
          s[static_cast<size_t>(i)] = m[static_cast<size_t>(i)] + std::log(s[static_cast<size_t>(i)]);
        for (int64_t k = 0; k < len; ++k) cols_shift(xs + k * inner, s.data(), ys + k * inner, inner);
      } else {
        for (auto& v : s) v = 1.f / v;
        for (int64_t k = 0; k < len; ++k) cols_scale(ys + k * inner, s.data(), inner);
      }
    };
    if (omp_get_max_threads() == 1 || outer_ == 1) {
      for (int64_t o = 0; o < outer_; ++o) slab(o, m_, s_);
      return;
    }
#pragma omp parallel
    {
      std::vector<float> m(static_cast<size_t>(inner)), s(m);
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer_; ++o) slab(o, m, s);
    }
  }

  Problem p_;
  std::string name_;
  uint64_t seed_;
  int block_ = 0;                  // concat@blocked<B>c: B; 0: plain
  std::vector<Placed<float>> in_;  // the operands, on placed host buffers
  Placed<float> out_;
  std::vector<Piece> pieces_;                // the copies (Concat, Resize), empty for softmax
  int64_t outer_ = 1, len_ = 1, inner_ = 1;  // softmax
  struct BinaryDim {
    int64_t n = 1, sa = 0, sb = 0;  // size, the inputs' element strides (0: broadcast)
  };
  std::vector<BinaryDim> dims_;  // a binary op's or an Expand's merged dims, outermost first; the last a row
  int64_t rows_ = 0, pieces_per_row_ = 1;
  static constexpr int64_t kBinaryPiece = 16384;  // elements of a row per thread's piece
  std::vector<float> m_, s_;                      // softmax scratch along a strided axis (one thread)
};

}  // namespace

std::optional<CopyRuns> copy_runs(const Problem& p) {
  if (p.inputs.size() != 1 || p.outputs.size() != 1) return std::nullopt;
  const Shape& x = p.inputs[0].shape;
  const Shape& y = p.outputs[0].shape;
  const size_t rank = x.size();
  if (rank == 0 || y.size() != rank || std::any_of(x.begin(), x.end(), [](int64_t d) { return d < 0; }) ||
      std::any_of(y.begin(), y.end(), [](int64_t d) { return d <= 0; }))
    return std::nullopt;
  // x's strides, plain; every product checked (a hostile shape must not wrap an offset).
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    if (__builtin_mul_overflow(stride[d + 1], x[d + 1], &stride[d])) return std::nullopt;
  if (int64_t all = 0; __builtin_mul_overflow(stride[0], x[0], &all)) return std::nullopt;
  CopyRuns r;
  std::vector<std::pair<int64_t, int64_t>> dims;  // y's dims, outermost first: (size, x stride)
  if (p.kind == LayerKind::kTranspose) {
    std::vector<int64_t> perm = p.ints_attr("perm");
    if (perm.empty())  // ONNX's default: the dims reversed
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != rank) return std::nullopt;
    std::vector<bool> seen(rank, false);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t a = perm[d];
      if (a < 0 || a >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(a)] ||
          y[d] != x[static_cast<size_t>(a)])
        return std::nullopt;
      seen[static_cast<size_t>(a)] = true;
      dims.emplace_back(y[d], stride[static_cast<size_t>(a)]);
    }
  } else if (p.kind == LayerKind::kSlice) {
    const auto starts = p.ints_attr("starts"), axes = p.ints_attr("axes"), steps = p.ints_attr("steps");
    // (No starts: run-time ones, which the key does not hold.)
    if (starts.empty() || starts.size() != axes.size() || (!steps.empty() && steps.size() != axes.size()))
      return std::nullopt;
    std::vector<int64_t> start(rank, 0), step(rank, 1);
    std::vector<bool> sliced(rank, false);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t a = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
      if (a < 0 || a >= static_cast<int64_t>(rank) || sliced[static_cast<size_t>(a)]) return std::nullopt;
      const size_t ai = static_cast<size_t>(a);
      sliced[ai] = true;
      step[ai] = steps.empty() ? 1 : steps[k];
      if (step[ai] <= 0) return std::nullopt;
      start[ai] = starts[k] < 0 ? std::max<int64_t>(0, starts[k] + x[ai]) : std::min(starts[k], x[ai]);
    }
    for (size_t d = 0; d < rank; ++d) {
      if (!sliced[d] && y[d] != x[d]) return std::nullopt;
      // y's last element along d lies in x: (y − 1)·step < x − start, the product checked.
      int64_t span = 0, s = 0;
      if (__builtin_mul_overflow(y[d] - 1, step[d], &span) || span >= x[d] - start[d] ||
          __builtin_mul_overflow(stride[d], step[d], &s))
        return std::nullopt;
      r.base += start[d] * stride[d];
      dims.emplace_back(y[d], s);
    }
  } else {
    return std::nullopt;
  }
  // The run: y's innermost dims while each follows the last in x (stride = the run so far).
  size_t d = rank;
  for (; d-- > 0;) {
    const auto [size, s] = dims[d];
    if (size == 1) continue;
    if (s != r.run) break;
    r.run *= size;  // within x's elements: no overflow
  }
  for (size_t k = 0; k <= d && d < rank; ++k)
    if (dims[k].first > 1) {
      r.outer.push_back(dims[k]);
      if (__builtin_mul_overflow(r.pieces, dims[k].first, &r.pieces) || r.pieces > kMaxRuns)
        return std::nullopt;
    }
  if (r.run < kMinRunFloats) return std::nullopt;
  return r;
}

std::unique_ptr<Kernel> make_data_kernel(const Problem& p, const std::string& name, uint64_t seed,
                                         int block) {
  return std::make_unique<DataKernel>(p, name, seed, block);
}

}  // namespace floorline::kernels::floorline_detail

namespace floorline::kernels {

int64_t copy_run_count(const Problem& p) {
  const auto r = floorline_detail::copy_runs(p);
  return r ? r->pieces : 0;
}

KernelTarget floorline_softmax_target() {
  return ByTarget<floorline_detail::row_max_body>::chosen();
}

}  // namespace floorline::kernels
