// What the floorline kernel library's files share (src/*.cpp): the placed tensor, the factory
// wrapper and the kernels' builders, one per family, that the kind table (kinds.cpp) dispatches to.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/floorline.hpp"
#include "floorline/kernels/random.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels::floorline_detail {

// A tensor's elements on a HostBuffer: placed by the factory's PlacementScope, on huge pages where
// asked and allowed (buffer.hpp), as every vendor library's tensors are; zeroed. data() may be
// rebound to a buffer outside (replay's bind()).
template <class T>
class Placed {
 public:
  Placed() = default;
  explicit Placed(int64_t n)
      : own_(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)),
        data_(static_cast<T*>(own_.data())),
        n_(static_cast<size_t>(std::max<int64_t>(n, 0))) {}
  T* data() const { return data_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* begin() const { return data_; }
  T* end() const { return data_ + n_; }
  T& operator[](size_t i) const { return data_[i]; }
  void fill(T v) const { std::fill(begin(), end(), v); }
  int64_t bytes() const { return static_cast<int64_t>(n_ * sizeof(T)); }
  void bind(void* data) { data_ = static_cast<T*>(data); }
  const HostBuffer& buffer() const { return own_; }

 private:
  HostBuffer own_;
  T* data_ = nullptr;
  size_t n_ = 0;
};

// The sum and the maximum of an AVX2 vector's 8 lanes (as a tree: depth 3).
[[gnu::target("avx2,fma")]] inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}
[[gnu::target("avx2,fma")]] inline float hmax8(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// e^−t for t ≥ 0, 8 lanes (the Softmax kernel's exp, data.cpp's exp_neg with FMAs): −t = n·ln2 + r
// with |r| ≤ ln2/2, e^r by its degree-6 Taylor polynomial (relative error below 2e-7), 2^n in the
// exponent bits; t clamped to 87 on its bits (a NaN with its sign bit set stays NaN).
[[gnu::target("avx2,fma")]] inline __m256 exp_neg8(__m256 t) {
  // Clamped on the bits, as exp_neg is: a NaN with its sign bit set stays NaN, any other becomes 87.
  const __m256i tb = _mm256_min_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x42AE0000));
  const __m256 x = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_castsi256_ps(tb));
  const __m256 shift = _mm256_set1_ps(12582912.f);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), shift), shift);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.f / 720.f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i k = _mm256_cvtps_epi32(n);
  return _mm256_mul_ps(
      p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)));
}

// row(r) for r in [0, rows): the threads of the OpenMP pool split them, without a parallel region
// for one thread or one row (the blocked layouts' kernels and the channel movements work row by row:
// an image's channel block, a plain channel, a tile of pixels).
template <class Row>
void for_rows(int64_t rows, const Row& row) {
  if (omp_get_max_threads() == 1 || rows == 1) {
    for (int64_t r = 0; r < rows; ++r) row(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) row(r);
}

// A convolution case's output after its call (input x, weights wt and bias as the case holds them,
// the bias absent where `has_bias` is not) against the reference's, `extras` a fused Add's summand.
inline Status compare_conv_output(const Problem& p, bool has_bias, const Placed<float>& x,
                                  const Placed<float>& wt, const Placed<float>& bias, const Placed<float>& y,
                                  const std::vector<HostTensor>& extras, const Tolerance& tol) {
  std::vector<HostTensor> ins;
  ins.push_back({p.inputs[0].shape, std::vector<float>(x.begin(), x.end())});
  ins.push_back({p.inputs[1].shape, std::vector<float>(wt.begin(), wt.end())});
  if (has_bias) ins.push_back({p.inputs[2].shape, std::vector<float>(bias.begin(), bias.end())});
  FL_ASSIGN_OR_RETURN(auto ref, reference(p, ins, extras));
  if (ref.empty() || ref[0].shape != p.outputs[0].shape)
    return make_error("the reference's output is not of shape {}", fmt::join(p.outputs[0].shape, "x"));
  return compare_output(y.data(), ref[0], tol);
}

// The ports of a kernel whose one activation input is `a` (input 0) and whose output is `y`
// (output 0), its other operands constants it holds (sgemm_packed, matmul_nbits): what a kernel's
// port() and bind() answer.
inline std::optional<Port> a_y_port(const Placed<float>& a, const Placed<float>& y, bool output, size_t k) {
  if (k != 0) return std::nullopt;
  return output ? Port{y.data(), y.bytes(), "plain"} : Port{a.data(), a.bytes(), "plain"};
}
inline Status bind_a_y(Placed<float>& a, Placed<float>& y, bool output, size_t k, void* data) {
  if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
  (output ? y : a).bind(data);
  return {};
}

// The factory of a kernel named `name` around `build`: f32 and no epilogue, or an unsupported
// error; what `build` throws (KernelError, MissingAttribute, std::bad_alloc) becomes the case's error.
// `fuses_epilogue`: the kernel checks the problem's post-ops itself (the Winograd convolution's Relu).
Result<std::unique_ptr<Kernel>> own_kernel_or_error(const CaseSpec& spec, const std::string& name,
                                                    const std::function<std::unique_ptr<Kernel>()>& build,
                                                    bool fuses_epilogue = false);

// TopK, GatherND, NonZero, NonMaxSuppression, CumSum, ArgMax and ArgMin (detection.cpp).
std::unique_ptr<Kernel> make_detection_kernel(const Problem& p, const std::string& name, uint64_t seed);
// Concat, Softmax, LogSoftmax, the identity Resize, ReduceMean/Sum/Max/Min and Add, Sub, Mul, Div
// with broadcasting, a Transpose or Slice as runs (copy_runs) (data.cpp). `block` > 0: a Concat along the
// channels of 4-D tensors held in oneDNN's blocked layout aBcd<block>b (concat@blocked<block>c).
std::unique_ptr<Kernel> make_data_kernel(const Problem& p, const std::string& name, uint64_t seed,
                                         int block = 0);
// A Transpose, or a Slice with positive steps, as copies of runs of contiguous elements
// (copy_runs, data.cpp): y's elements in order are `pieces` runs of `run` contiguous elements of x,
// the i-th at x offset base + the outer odometer's offset. `outer` holds y's remaining dims,
// outermost first, each with its stride in x (elements); dims of size 1 are dropped.
struct CopyRuns {
  int64_t base = 0;
  int64_t run = 1;
  std::vector<std::pair<int64_t, int64_t>> outer;  // (size, x stride)
  int64_t pieces = 1;
};
// The shortest run copy_runs takes (16 floats: a 64-byte cache line), and the most runs.
constexpr int64_t kMinRunFloats = 16, kMaxRuns = int64_t{1} << 20;
// `p` as runs; nullopt where it is neither such a Transpose nor such a Slice, where its runs are
// shorter than kMinRunFloats or more than kMaxRuns (a transpose that moves the last axis: each run
// one element), or its attributes do not give y's shape.
std::optional<CopyRuns> copy_runs(const Problem& p);
// GlobalAveragePool (blocked.cpp): `block` 0 on the plain layout; 8 or 16 on oneDNN's blocked
// layout aBcd<block>b, input and output (global_average_pool@blocked<block>c).
std::unique_ptr<Kernel> make_pool_kernel(const Problem& p, uint64_t seed, int block);
// Add, Sub, Mul, Div on oneDNN's blocked layout aBcd<block>b, block 8 or 16 (blocked.cpp,
// binary@blocked<block>c): each input the output's shape (blocked) or per channel (plain).
std::unique_ptr<Kernel> make_blocked_binary_kernel(const Problem& p, uint64_t seed, int block);
// A layer that only moves whole channels of 4-D tensors (channels.cpp): its inputs' and outputs'
// [N, C, H, W] dims (a channel shuffle's 5-D tensors as the 4-D ones around its Reshapes) and, per
// output and output channel, the input and the channel it is a copy of.
struct ChannelMove {
  struct From {
    size_t input = 0;
    int64_t channel = 0;
  };
  std::vector<Shape> in, out;
  std::vector<std::vector<From>> from;
};
// The channel movement `p` is: a Concat or a Split along the channels, a Slice of a run of channels
// (step 1), a channel shuffle (Transpose of [N, G, K, H, W] by perm (0, 2, 1, 3, 4)); nullopt for
// any other layer.
std::optional<ChannelMove> channel_move(const Problem& p);
// Its kernel (channels.cpp), `block` 0 on the plain layout, 8 or 16 on oneDNN's blocked layout
// aBcd<block>b, every input and output (slice@blocked<B>c, split@..., channel_shuffle@...,
// concat@blocked<B>c), kNhwc on the channels-last layout (slice@nhwc...); unsupported where `p`
// is no channel movement.
constexpr int kNhwc = -1;
// The offset of element (n, c, pixel i) of a [N, C, H, W] tensor held in `block`'s layout: 0 plain,
// 8 or 16 oneDNN's aBcd<block>b (the channels padded to a multiple of the block), kNhwc channels-last.
inline int64_t held_offset(int block, const Shape& s, int64_t n, int64_t c, int64_t i) {
  const int64_t hw = s[2] * s[3];
  if (block == 0) return (n * s[1] + c) * hw + i;
  if (block == kNhwc) return (n * hw + i) * s[1] + c;
  const int64_t blocks = (s[1] + block - 1) / block;
  return ((n * blocks + c / block) * hw + i) * block + c % block;
}
// Plain NCHW values `plain` into `held` (`block`'s layout; padding lanes left as they are), and back.
inline void hold_nchw(const float* plain, int block, const Shape& s, float* held) {
  const int64_t hw = s[2] * s[3];
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < hw; ++i) held[held_offset(block, s, n, c, i)] = plain[(n * s[1] + c) * hw + i];
}
inline void unhold_nchw(const float* held, int block, const Shape& s, float* plain) {
  const int64_t hw = s[2] * s[3];
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < hw; ++i) plain[(n * s[1] + c) * hw + i] = held[held_offset(block, s, n, c, i)];
}
std::unique_ptr<Kernel> make_channel_kernel(const Problem& p, const std::string& name, uint64_t seed,
                                            int block);
// Pad, mode constant, non-negative pads (pad.cpp): `block` 0 on the plain layout, 8 or 16 on
// oneDNN's blocked layout aBcd<block>b, kNhwc channels-last (pad@blocked<B>c, pad@nhwc: H and W
// padded only). With `check_only` its checks alone (nullptr): no buffers.
std::unique_ptr<Kernel> make_pad_kernel(const Problem& p, uint64_t seed, int block, bool check_only = false);
// A 4-D Transpose by perm (0, 2, 3, 1) or (0, 3, 1, 2) whose NCHW side has pixels: whether it goes
// to NHWC (true) or from it (false); nullopt for any other (relabel.cpp).
std::optional<bool> nhwc_relabel(const Problem& p);
// Its kernel, transpose@nhwc: the NCHW side held channels-last, the other plain, a copy; with
// `check_only` its checks alone (nullptr). Unsupported where nhwc_relabel gives nullopt.
std::unique_ptr<Kernel> make_relabel_kernel(const Problem& p, uint64_t seed, bool check_only = false);
// A Sigmoid with its Mul by its own input fused (post-op MulInput): SiLU (silu.cpp).
bool silu_problem(const Problem& p);
// Its kernel, silu: x · sigmoid(x) in one pass; with `check_only` its checks alone (nullptr).
std::unique_ptr<Kernel> make_silu_kernel(const Problem& p, uint64_t seed, bool check_only = false);
// Gemm and MatMul over a B packed once: sgemm_packed (gemm.cpp).
std::unique_ptr<Kernel> make_gemm_kernel(const Problem& p, uint64_t seed);
// The product sgemm_packed runs for `p`, or a KernelError (unsupported, with why) where it runs
// none: the kernel's checks, without its buffers (check_floorline_case).
GemmDesc packed_gemm_desc(const Problem& p);
// sgemm_packed's micro-kernel (gemm.cpp): y[0..mr)[0..nr) (row stride ldy) = (accumulate ? y : bias or 0)
// + a[0..mr)[0..kc) (row stride lda) · b, a panel of kc rows of kGemmNr floats (row stride ldb:
// kGemmNr where packed; every row's kGemmNr floats are read). mr ≤ kGemmMr; nr ≤ kGemmNr columns
// are stored. Needs AVX2 and FMA.
constexpr int kGemmMr = 6;
constexpr int64_t kGemmNr = 16;
void gemm_micro_kernel(int mr, int64_t kc, const float* a, int64_t lda, const float* b, float* y, int64_t ldy,
                       bool accumulate, const float* bias, int64_t nr, int64_t ldb = kGemmNr);
// A 3x3 Conv with unit strides and dilations and one group, 2-D, optionally fused with a Relu: its
// geometry, or a KernelError (unsupported, with why) where the Winograd kernel runs none
// (winograd.cpp).
ConvDesc winograd_desc(const Problem& p);
// The Winograd convolution F(m×m, 3×3), m = 2 (winograd_f2x2_3x3) or 4 (winograd_f4x4_3x3).
std::unique_ptr<Kernel> make_winograd_kernel(const Problem& p, uint64_t seed, int m);
// A 2-D Conv with unit strides and one group whose taps read the image for at most 3/4 of the
// direct count (dilated convolutions on maps padded as much: DeepLabV3's ASPP): its geometry, or a
// KernelError (unsupported, with why) (taps.cpp).
ConvDesc valid_taps_desc(const Problem& p);
// The convolution over its valid taps, conv_valid_taps (taps.cpp).
std::unique_ptr<Kernel> make_valid_taps_kernel(const Problem& p, uint64_t seed);
// MatMulNBits over 4-bit weights (nbits.cpp): the product's sizes, or a KernelError (unsupported,
// with why) where matmul_nbits runs none.
struct NBitsDesc {
  int64_t m = 0, n = 0, k = 0, block = 0;
  bool zero_points = false, bias = false;
};
NBitsDesc nbits_desc(const Problem& p);
// `f32_weights`: matmul_nbits@f32_weights, B dequantized once when the case is built.
std::unique_ptr<Kernel> make_nbits_kernel(const Problem& p, uint64_t seed, bool f32_weights);
// Scaled dot-product attention, a MatMul whose post-ops are mp::fusion_matches' attention chain
// ([Scale], [AttentionBias(shape)]..., Softmax, MatMul(V's shape)) (attention.cpp): its sizes, or a
// KernelError (unsupported, with why) where the kernel runs none.
struct AttentionDesc {
  Shape q, k, v, o;           // Q [..., Sq, D]; K [..., D, Sk] or, transposed, [..., Sk, D]; V, O
  std::vector<Shape> biases;  // each broadcast to the scores [..., Sq, Sk]
  int64_t bh = 1, sq = 0, sk = 0, d = 0, dv = 0;
  bool k_transposed = false;  // K stored [..., Sk, D] (the MatMul's transB)
  float scale = 1.f;          // the Scale post-op's factor (1 without one)
};
AttentionDesc attention_desc(const Problem& p);
// Whether `p`'s post-ops are an attention chain (the last is "MatMul").
bool is_attention_problem(const Problem& p);
std::unique_ptr<Kernel> make_attention_kernel(const Problem& p, uint64_t seed);
// RoiAlign, GridSample and ScatterElements (sampling.cpp).
std::unique_ptr<Kernel> make_sampling_kernel(const Problem& p, const std::string& name, uint64_t seed);

}  // namespace floorline::kernels::floorline_detail
