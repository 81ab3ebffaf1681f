// Floorline's kernels on oneDNN's channel-blocked layout aBcd<B>b (N, ⌈C/B⌉, H, W, B; the channels
// padded with zeros to a multiple of B, as oneDNN's blocked convolutions write them), where a
// framework keeps a convolution's blocked output through the layers after it (ONNX Runtime's NCHWc
// transformer: its GlobalAveragePool and its per-channel Mul, Add), rather than converting it into
// NHWC or NCHW and back:
//
//   global_average_pool            GlobalAveragePool, the mean of each channel's pixels. Plain
//   global_average_pool@blocked<B>c   (NCHW): a contiguous row per channel. Blocked: B channels side
//                                  by side in every pixel, summed as B-wide vector adds over the
//                                  block's H·W pixels in four accumulators; the output [N, C, 1, 1]
//                                  blocked too. oneDNN 2.6's blocked pooling took 27.6 µs for a
//                                  1x672x14x14 input on an AVX2 EPYC core, its conversion into NHWC
//                                  for XNNPACK's pool 13 µs each way; this kernel 6.5 µs (4.6 on
//                                  two cores).
//   binary@blocked<B>c             Add, Sub, Mul, Div of a blocked [N, C, H, W] tensor and another,
//                                  or a per-channel [N or 1, C, 1, 1] operand held plain (an SE
//                                  block's scale, a sigmoid's output): B lanes of the operand against
//                                  each pixel's B channels. oneDNN 2.6 has only its reference binary
//                                  for a per-channel operand on the blocked layout.
//   (the replay's conversion)      plain ↔ aBcd8b/aBcd16b between any two cases' ports
//                                  (make_floorline_conversion): 8 channels × 8 pixels transposed.
//
// The padding lanes of an output are written as zeros (a Div of the inputs' zero padding would make
// them NaN), as oneDNN's blocked tensors have them.
// Verified against the reference: plain input values packed into the layout, the output unpacked.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "floorline/kernels/dispatch.hpp"
#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// The means of one block's lanes over its pixels: kV vectors of 8 floats per pixel (B = 8·kV
// lanes), `hw` pixels from x, written to y[0, B). GCC vector extensions (one ymm register in the
// AVX2 and AVX-512 builds, two xmm in the baseline), four accumulators per vector, held in
// registers; always inlined into each build of ByTarget (floorline/kernels/dispatch.hpp), so no
// vector crosses a call (-Wpsabi, off for this file).
typedef float V8 __attribute__((vector_size(32)));
[[gnu::always_inline]] inline V8 load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <int kV>
[[gnu::always_inline]] inline void block_means_body(const float* x, int64_t hw, float inv, float* y) {
  constexpr int B = 8 * kV;
  V8 a0[kV] = {}, a1[kV] = {}, a2[kV] = {}, a3[kV] = {};
  int64_t i = 0;
  for (; i + 4 <= hw; i += 4, x += 4 * B)
    for (int v = 0; v < kV; ++v) {
      a0[v] += load8(x + 8 * v);
      a1[v] += load8(x + B + 8 * v);
      a2[v] += load8(x + 2 * B + 8 * v);
      a3[v] += load8(x + 3 * B + 8 * v);
    }
  for (; i < hw; ++i, x += B)
    for (int v = 0; v < kV; ++v) a0[v] += load8(x + 8 * v);
  for (int v = 0; v < kV; ++v) {
    const V8 m = ((a0[v] + a1[v]) + (a2[v] + a3[v])) * inv;
    std::memcpy(y + 8 * v, &m, sizeof m);
  }
}

// One block of a binary on the blocked layout: `hw` pixels of B = 8·kV lanes, y = a op b, where
// each of a and b is a pixel stream (full) or B lanes held for every pixel (per channel).
enum class BinOp { kAdd, kSub, kMul, kDiv };
template <BinOp Op>
[[gnu::always_inline]] inline V8 bin(V8 a, V8 b) {
  if constexpr (Op == BinOp::kAdd) return a + b;
  if constexpr (Op == BinOp::kSub) return a - b;
  if constexpr (Op == BinOp::kMul) return a * b;
  return a / b;
}
template <BinOp Op, int kV, bool AFull, bool BFull>
[[gnu::always_inline]] inline void block_binary_body(const float* a, const float* b, int64_t hw, float* y) {
  constexpr int B = 8 * kV;
  V8 ca[kV], cb[kV];  // the per-channel lanes
  for (int v = 0; v < kV; ++v) {
    ca[v] = AFull ? V8{} : load8(a + 8 * v);
    cb[v] = BFull ? V8{} : load8(b + 8 * v);
  }
  for (int64_t i = 0; i < hw; ++i, y += B)
    for (int v = 0; v < kV; ++v) {
      const V8 r =
          bin<Op>(AFull ? load8(a + i * B + 8 * v) : ca[v], BFull ? load8(b + i * B + 8 * v) : cb[v]);
      std::memcpy(y + 8 * v, &r, sizeof r);
    }
}

// The 8 × 8 transpose of r[0..8) (AVX's unpack, shuffle and permute2f128 sequence, written as
// shuffles of the vector extension: one instruction each where the build has AVX). The loops are
// unrolled by pragma: GCC at -O2 kept them, and the arrays in memory, which made a 1x58x28x28
// reorder 17-25 µs rather than 6.5-8.6 (one AVX2 EPYC core).
typedef int32_t I8 __attribute__((vector_size(32)));
[[gnu::always_inline]] inline void transpose8(V8 r[8]) {
  const I8 lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
  const I8 s0 = {0, 1, 8, 9, 4, 5, 12, 13}, s1 = {2, 3, 10, 11, 6, 7, 14, 15};
  const I8 p0 = {0, 1, 2, 3, 8, 9, 10, 11}, p1 = {4, 5, 6, 7, 12, 13, 14, 15};
  V8 t[8], u[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; k += 2) {
    t[k] = __builtin_shuffle(r[k], r[k + 1], lo);
    t[k + 1] = __builtin_shuffle(r[k], r[k + 1], hi);
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; k += 4) {
    u[k] = __builtin_shuffle(t[k], t[k + 2], s0);
    u[k + 1] = __builtin_shuffle(t[k], t[k + 2], s1);
    u[k + 2] = __builtin_shuffle(t[k + 1], t[k + 3], s0);
    u[k + 3] = __builtin_shuffle(t[k + 1], t[k + 3], s1);
  }
#pragma GCC unroll 8
  for (int k = 0; k < 4; ++k) {
    r[k] = __builtin_shuffle(u[k], u[k + 4], p0);
    r[k + 4] = __builtin_shuffle(u[k], u[k + 4], p1);
  }
}

// One channel block of one image between plain (`plain`: its first channel's row, rows of `hw`
// floats, `have` ≤ B of them real) and blocked (`blocked`: hw pixels of B lanes): 8 channels × 8
// pixels at a time through transpose8, the pixel tail element by element; to blocked, the lanes
// past `have` are zeros.
template <int B, bool ToBlocked>
[[gnu::always_inline]] inline void reorder_block_body(const float* src, float* dst, int64_t hw,
                                                      int64_t have) {
  int64_t i = 0;
  for (; i + 8 <= hw; i += 8)
#pragma GCC unroll 2
    for (int half = 0; half < B / 8; ++half) {
      V8 r[8];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const int64_t c = half * 8 + k;
        if constexpr (ToBlocked)
          r[k] = c < have ? load8(src + c * hw + i) : V8{};
        else
          r[k] = load8(src + (i + k) * B + half * 8);
      }
      transpose8(r);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const int64_t c = half * 8 + k;
        if constexpr (ToBlocked)
          std::memcpy(dst + (i + k) * B + half * 8, &r[k], sizeof r[k]);
        else if (c < have)
          std::memcpy(dst + c * hw + i, &r[k], sizeof r[k]);
      }
    }
  for (; i < hw; ++i)
    for (int64_t c = 0; c < B; ++c) {
      if constexpr (ToBlocked)
        dst[i * B + c] = c < have ? src[c * hw + i] : 0.f;
      else if (c < have)
        dst[c * hw + i] = src[i * B + c];
    }
}

// The mean of a row of n contiguous floats (a plain channel): 16 lanes at a time in four
// accumulators of 8, the tail element by element.
[[gnu::always_inline]] inline float row_mean_body(const float* x, int64_t n, float inv) {
  V8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 += load8(x + i);
    a1 += load8(x + i + 8);
    a2 += load8(x + i + 16);
    a3 += load8(x + i + 24);
  }
  for (; i + 8 <= n; i += 8) a0 += load8(x + i);
  const V8 a = (a0 + a1) + (a2 + a3);
  float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) s += x[i];
  return s * inv;
}

class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(Problem p, uint64_t seed, int block) : p_(std::move(p)), seed_(seed), block_(block) {
    if (p_.inputs.empty() || p_.outputs.size() != 1)
      unsupported(p_.op + ": one input and one output expected");
    const Shape& x = p_.inputs[0].shape;
    if (x.size() < 3 || std::any_of(x.begin(), x.end(), [](int64_t d) { return d <= 0; }))
      unsupported(p_.op + ": an input of rank 3 or more with known, non-zero dims expected");
    if (block_ > 0 && x.size() != 4) unsupported(p_.op + " on a blocked layout: 4-D only");
    n_ = x[0];
    c_ = x[1];
    hw_ = elements(Shape(x.begin() + 2, x.end()));
    const int64_t lanes = block_ > 0 ? block_ : 1;
    groups_ = block_ > 0 ? (c_ + block_ - 1) / block_ : c_;  // rows of lanes: channel blocks, or channels
    x_ = Placed<float>(n_ * groups_ * hw_ * lanes);
    y_ = Placed<float>(n_ * groups_ * lanes);
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_);
  }

  // (The case's algorithm names its layout, as concat@blocked<B>c's.)
  std::string implementation() const override { return "floorline global_average_pool"; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_;
    if (block_ == 0) return Port{t.data(), t.bytes(), "plain"};
    return Port{t.data(), t.bytes(),
                blocked_channels_layout(block_, output ? p_.outputs[0].shape : p_.inputs[0].shape)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_).bind(data);
    return {};
  }

  void run() override {
    for_rows(n_ * groups_, [this](int64_t r) { row(r); });
  }

  Status verify() override {
    std::vector<float> plain(static_cast<size_t>(n_ * c_ * hw_));
    fill_uniform(plain.data(), static_cast<int64_t>(plain.size()), seed_ + 7);
    const int64_t lanes = block_ > 0 ? block_ : 1;
    std::fill(x_.begin(), x_.end(), 0.f);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t i = 0; i < hw_; ++i)
          x_[static_cast<size_t>(((n * groups_ + c / lanes) * hw_ + i) * lanes + c % lanes)] =
              plain[static_cast<size_t>((n * c_ + c) * hw_ + i)];
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, {{p_.inputs[0].shape, plain}}, {}));
    if (ref.empty() || ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's output is not of shape {}", fmt::join(p_.outputs[0].shape, "x"));
    std::vector<float> got(static_cast<size_t>(n_ * c_));
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t c = 0; c < c_; ++c)
        got[static_cast<size_t>(n * c_ + c)] =
            y_[static_cast<size_t>((n * groups_ + c / lanes) * lanes + c % lanes)];
    // The padding lanes of each image's last block: zero, as the input's.
    for (int64_t n = 0; block_ > 0 && c_ % lanes != 0 && n < n_; ++n)
      for (int64_t l = c_ % lanes; l < lanes; ++l)
        if (const float v = y_[static_cast<size_t>((n * groups_ + groups_ - 1) * lanes + l)]; v != 0.f)
          return make_error("padding lane {} of image {}'s last block is {}, not 0", l, n, v);
    return compare_output(got.data(), ref[0], verify_tolerance(p_));
  }

 private:
  // Row r: a channel's pixels (plain), or a block's pixels of B lanes each.
  void row(int64_t r) const {
    const float inv = 1.f / static_cast<float>(hw_);
    if (block_ == 0) {
      y_[static_cast<size_t>(r)] = ByTarget<row_mean_body>::call(x_.data() + r * hw_, hw_, inv);
      return;
    }
    if (block_ == 8)
      lanes<8>(r, inv);
    else
      lanes<16>(r, inv);
    // The last block's padding lanes are zero, whatever the input's padding held.
    if (const int64_t have = c_ - (r % groups_) * block_; have < block_)
      std::fill(y_.data() + r * block_ + have, y_.data() + (r + 1) * block_, 0.f);
  }
  template <int B>
  void lanes(int64_t r, float inv) const {
    if (B == 8)
      ByTarget<block_means_body<1>>::call(x_.data() + r * hw_ * B, hw_, inv, y_.data() + r * B);
    else
      ByTarget<block_means_body<2>>::call(x_.data() + r * hw_ * B, hw_, inv, y_.data() + r * B);
  }

  Problem p_;
  uint64_t seed_;
  int block_;
  int64_t n_ = 0, c_ = 0, hw_ = 0, groups_ = 0;
  Placed<float> x_, y_;
};

// Verifies a binary of a 4-D output [n, c, hw pixels] whose inputs are each its shape (`full`: laid
// out as the output, element at(n, c, i) of channel c, pixel i, image n; zero elsewhere, as a oneDNN
// case writes a blocked tensor's padding) or per channel (plain): plain inputs (a Div's divisor in
// [1, 2)) laid out so, `run` called, the output read back through `at` and compared with the
// reference's. binary@blocked<B>c's and binary@nhwc's check.
template <class At, class Run>
Status verify_laid_out_binary(const Problem& p, uint64_t seed, const bool (&full)[2], int64_t n_, int64_t c_,
                              int64_t hw_, Placed<float> (&x)[2], const Placed<float>& y, At at, Run run) {
  std::vector<std::vector<float>> plain(2);
  std::vector<HostTensor> ins;
  for (size_t k = 0; k < 2; ++k) {
    plain[k].resize(static_cast<size_t>(elements(p.inputs[k].shape)));
    fill_uniform(plain[k].data(), static_cast<int64_t>(plain[k].size()), seed + 7 + k);
    if (p.kind == LayerKind::kDiv && k == 1)  // a divisor in [1, 2)
      for (auto& v : plain[k]) v = 1.5f + 0.5f * v;
    if (full[k]) {
      std::fill(x[k].begin(), x[k].end(), 0.f);
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t c = 0; c < c_; ++c)
          for (int64_t i = 0; i < hw_; ++i)
            x[k][static_cast<size_t>(at(n, c, i))] = plain[k][static_cast<size_t>((n * c_ + c) * hw_ + i)];
    } else {
      std::copy(plain[k].begin(), plain[k].end(), x[k].begin());
    }
    ins.push_back({p.inputs[k].shape, plain[k]});
  }
  run();
  FL_ASSIGN_OR_RETURN(auto ref, reference(p, ins, {}));
  if (ref.empty() || ref[0].shape != p.outputs[0].shape)
    return make_error("the reference's output is not of shape {}", fmt::join(p.outputs[0].shape, "x"));
  std::vector<float> got(static_cast<size_t>(n_ * c_ * hw_));
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t i = 0; i < hw_; ++i)
        got[static_cast<size_t>((n * c_ + c) * hw_ + i)] = y[static_cast<size_t>(at(n, c, i))];
  return compare_output(got.data(), ref[0], verify_tolerance(p));
}

// Add, Sub, Mul, Div on the blocked layout (binary@blocked<B>c): a 4-D output [N, C, H, W], each
// input the output's shape (blocked) or a per-channel [N or 1, C, 1, 1] (plain), not both
// per-channel.
class BlockedBinaryKernel final : public Kernel {
 public:
  BlockedBinaryKernel(Problem p, uint64_t seed, int block) : p_(std::move(p)), seed_(seed), block_(block) {
    if (p_.inputs.size() != 2 || p_.outputs.size() != 1)
      unsupported(p_.op + ": two inputs and one output expected");
    if (block_ != 8 && block_ != 16)
      unsupported(fmt::format("{} on blocked{}c: blocks of 8 or 16 only", p_.op, block_));
    const Shape& y = p_.outputs[0].shape;
    if (y.size() != 4 || std::any_of(y.begin(), y.end(), [](int64_t d) { return d <= 0; }))
      unsupported(p_.op + " on a blocked layout: a 4-D output with known, non-zero dims");
    n_ = y[0];
    c_ = y[1];
    hw_ = y[2] * y[3];
    groups_ = (c_ + block_ - 1) / block_;
    for (size_t k = 0; k < 2; ++k) {
      const Shape& x = p_.inputs[k].shape;
      full_[k] = x == y;
      const bool per_channel =
          x.size() == 4 && (x[0] == 1 || x[0] == n_) && x[1] == c_ && x[2] == 1 && x[3] == 1 && hw_ > 1;
      if (!full_[k] && !per_channel)
        unsupported(
            fmt::format("{} on a blocked layout: input {} ({}) is neither the output's shape nor per channel",
                        p_.op, k, fmt::join(x, "x")));
      images_[k] = x[0];
    }
    if (!full_[0] && !full_[1]) unsupported(p_.op + " on a blocked layout: both inputs per channel");
    for (size_t k = 0; k < 2; ++k)
      x_[k] = Placed<float>(full_[k] ? n_ * groups_ * hw_ * block_ : elements(p_.inputs[k].shape));
    y_ = Placed<float>(n_ * groups_ * hw_ * block_);
    for (size_t k = 0; k < 2; ++k) fill_operand(k, seed_ + k);
  }

  std::string implementation() const override { return "floorline binary"; }
  int64_t workspace_bytes() const override { return 0; }

  // A full operand and the output in the blocked layout; a per-channel operand plain.
  std::optional<Port> port(bool output, size_t k) const override {
    if (output ? k != 0 : k >= 2) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_[k];
    if (!output && !full_[k]) return Port{t.data(), t.bytes(), "plain"};
    return Port{t.data(), t.bytes(), blocked_channels_layout(block_, p_.outputs[0].shape)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (!port(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_[k]).bind(data);
    return {};
  }

  void run() override {
    for_rows(n_ * groups_, [this](int64_t r) { row(r); });
  }

  Status verify() override {
    return verify_laid_out_binary(
        p_, seed_, full_, n_, c_, hw_, x_, y_,
        [this](int64_t n, int64_t c, int64_t i) { return blocked_index(n, c, i); }, [this] { run(); });
  }

 private:
  int64_t blocked_index(int64_t n, int64_t c, int64_t i) const {
    return ((n * groups_ + c / block_) * hw_ + i) * block_ + c % block_;
  }
  // Operand k's values for timing: uniform, a divisor in [1, 2).
  void fill_operand(size_t k, uint64_t seed) {
    fill_uniform(x_[k].data(), static_cast<int64_t>(x_[k].size()), seed);
    if (p_.kind == LayerKind::kDiv && k == 1)
      for (auto& v : x_[k]) v = 1.5f + 0.5f * v;
  }
  // Row r = (image, channel block): a full operand's pixels of that block, a per-channel one's B
  // lanes (zero past C: a padded copy for the last block).
  void row(int64_t r) const {
    const int64_t n = r / groups_, g = r % groups_;
    const float* op[2];
    alignas(64) float lanes[2][16] = {};
    for (size_t k = 0; k < 2; ++k) {
      if (full_[k]) {
        op[k] = x_[k].data() + r * hw_ * block_;
        continue;
      }
      const float* ch = x_[k].data() + (images_[k] == 1 ? 0 : n) * c_ + g * block_;
      const int64_t have = std::min<int64_t>(block_, c_ - g * block_);
      std::copy(ch, ch + have, lanes[k]);
      op[k] = lanes[k];
    }
    float* y = y_.data() + r * hw_ * block_;
    switch (p_.kind) {
      case LayerKind::kAdd:
        call<BinOp::kAdd>(op, y);
        break;
      case LayerKind::kSub:
        call<BinOp::kSub>(op, y);
        break;
      case LayerKind::kMul:
        call<BinOp::kMul>(op, y);
        break;
      default:
        call<BinOp::kDiv>(op, y);
        break;
    }
    // The last block's padding lanes are zero whatever the op made of the inputs' (a Div's 0 / 0):
    // a oneDNN case reading this output counts on it.
    if (const int64_t have = c_ - g * block_; have < block_)
      for (int64_t i = 0; i < hw_; ++i) std::fill(y + i * block_ + have, y + (i + 1) * block_, 0.f);
  }
  template <BinOp Op>
  void call(const float* const* op, float* y) const {
    if (block_ == 8)
      call<Op, 1>(op, y);
    else
      call<Op, 2>(op, y);
  }
  // (A loop-invariant branch per pixel costs the 8-lane loop half its speed: the operands' forms
  // are template arguments.)
  template <BinOp Op, int kV>
  void call(const float* const* op, float* y) const {
    if (full_[0] && full_[1])
      ByTarget<block_binary_body<Op, kV, true, true>>::call(op[0], op[1], hw_, y);
    else if (full_[0])
      ByTarget<block_binary_body<Op, kV, true, false>>::call(op[0], op[1], hw_, y);
    else
      ByTarget<block_binary_body<Op, kV, false, true>>::call(op[0], op[1], hw_, y);
  }

  Problem p_;
  uint64_t seed_;
  int block_;
  int64_t n_ = 0, c_ = 0, hw_ = 0, groups_ = 0;
  bool full_[2] = {};
  int64_t images_[2] = {};
  Placed<float> x_[2], y_;
};

// "f32 aBcd<B>b NxCxHxW" → (B, dims); B 0 for any other layout.
std::pair<int, std::vector<int64_t>> blocked_layout_of(const std::string& layout) {
  for (const int block : {8, 16})
    if (auto dims = tagged_layout_dims(layout, fmt::format("aBcd{}b", block)); dims.size() == 4)
      return {block, dims};
  return {0, {}};
}

// Replay's conversion between plain and aBcd<B>b (make_floorline_conversion).
class ReorderKernel final : public Kernel {
 public:
  ReorderKernel(const float* src, void* dst, std::vector<int64_t> dims, int block, bool to_blocked,
                std::string dst_layout)
      : src_(src),
        dims_(std::move(dims)),
        block_(block),
        to_blocked_(to_blocked),
        layout_(std::move(dst_layout)) {
    groups_ = (dims_[1] + block_ - 1) / block_;
    hw_ = dims_[2] * dims_[3];
    const int64_t n = to_blocked_ ? dims_[0] * groups_ * block_ * hw_ : dims_[0] * dims_[1] * hw_;
    if (dst) {
      dst_.bind(dst);
      bytes_ = n * 4;
    } else {
      dst_ = Placed<float>(n);
      bytes_ = dst_.bytes();
    }
  }
  std::optional<Port> port(bool output, size_t k) const override {
    if (!output || k != 0) return std::nullopt;
    return Port{dst_.data(), bytes_, layout_};
  }
  void run() override {
    for_rows(dims_[0] * groups_, [this](int64_t r) { row(r); });
  }
  std::string implementation() const override { return "floorline reorder"; }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override {
    return make_error(Disposition::kNotVerifiable, "a layout conversion has no ONNX counterpart");
  }

 private:
  void row(int64_t r) const {
    const int64_t n = r / groups_, g = r % groups_, c = dims_[1];
    const int64_t have = std::min<int64_t>(block_, c - g * block_);
    const float* plain = nullptr;
    float* plain_out = nullptr;
    if (to_blocked_)
      plain = src_ + (n * c + g * block_) * hw_;
    else
      plain_out = dst_.data() + (n * c + g * block_) * hw_;
    const float* blocked_in = src_ + r * hw_ * block_;
    float* blocked_out = dst_.data() + r * hw_ * block_;
    if (block_ == 8) {
      if (to_blocked_)
        ByTarget<reorder_block_body<8, true>>::call(plain, blocked_out, hw_, have);
      else
        ByTarget<reorder_block_body<8, false>>::call(blocked_in, plain_out, hw_, have);
    } else {
      if (to_blocked_)
        ByTarget<reorder_block_body<16, true>>::call(plain, blocked_out, hw_, have);
      else
        ByTarget<reorder_block_body<16, false>>::call(blocked_in, plain_out, hw_, have);
    }
  }

  const float* src_;
  Placed<float> dst_;
  int64_t bytes_ = 0;
  std::vector<int64_t> dims_;
  int block_;
  bool to_blocked_;
  std::string layout_;
  int64_t groups_ = 0, hw_ = 0;
};

// --- channels-last (NHWC, oneDNN's acdb; "@nhwc") -------------------------------------------------

// acc[0, c) = the sums of `pixels` NHWC pixels of `c` channels each from x (rows of c floats),
// in blocks of kSumPixels rows (in L1 after the first read): per block, 64 channels at a time summed
// in registers over the block's rows, then added into acc; the channels past the last multiple of
// 64 eight at a time, the last few one by one. Memory is read once, in order.
constexpr int64_t kSumPixels = 16;
[[gnu::always_inline]] inline void nhwc_sum_body(const float* x, int64_t pixels, int64_t c, float* acc) {
  std::fill(acc, acc + c, 0.f);
  for (int64_t p0 = 0; p0 < pixels; p0 += kSumPixels, x += kSumPixels * c) {
    const int64_t rows = std::min(kSumPixels, pixels - p0);
    int64_t k = 0;
    for (; k + 64 <= c; k += 64) {
      V8 a[8] = {};
      for (int64_t i = 0; i < rows; ++i)
#pragma GCC unroll 8
        for (int v = 0; v < 8; ++v) a[v] += load8(x + i * c + k + 8 * v);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        const V8 r = load8(acc + k + 8 * v) + a[v];
        std::memcpy(acc + k + 8 * v, &r, sizeof r);
      }
    }
    for (; k + 8 <= c; k += 8) {
      V8 a = {};
      for (int64_t i = 0; i < rows; ++i) a += load8(x + i * c + k);
      const V8 r = load8(acc + k) + a;
      std::memcpy(acc + k, &r, sizeof r);
    }
    for (; k < c; ++k)
      for (int64_t i = 0; i < rows; ++i) acc[k] += x[i * c + k];
  }
}

// One pixel's `c` channels: y = a op b, each of a and b the pixel's channels (full) or the
// per-channel operand's.
template <BinOp Op>
[[gnu::always_inline]] inline void nhwc_binary_body(const float* a, const float* b, int64_t c, float* y) {
  int64_t k = 0;
  for (; k + 8 <= c; k += 8) {
    const V8 r = bin<Op>(load8(a + k), load8(b + k));
    std::memcpy(y + k, &r, sizeof r);
  }
  for (; k < c; ++k) {
    const V8 r = bin<Op>(V8{} + a[k], V8{} + b[k]);
    y[k] = r[0];
  }
}

// global_average_pool@nhwc: GlobalAveragePool of a 4-D input held channels-last [N, H, W, C]; its
// output [N, C, 1, 1] is the plain order. Each of the pool's threads sums a range of an image's
// pixels, row after row, into C sums of its own; the threads' sums are then added. (Summing a range of
// channels over all pixels instead reads every row in pieces, and an image larger than L2 more than
// once: 14 µs against 10 for oneDNN's blocked layout on efficientnet_b0's 1x144x56x56 at 2 threads.)
// Where XNNPACK's NHWC convolutions (or oneDNN's channels-last ones) write an SE block's input, its
// squeeze reads it in place rather than after a conversion.
class NhwcGlobalPoolKernel final : public Kernel {
 public:
  NhwcGlobalPoolKernel(Problem p, uint64_t seed) : p_(std::move(p)), seed_(seed) {
    if (p_.inputs.empty() || p_.outputs.size() != 1)
      unsupported(p_.op + ": one input and one output expected");
    const Shape& x = p_.inputs[0].shape;
    if (x.size() != 4 || std::any_of(x.begin(), x.end(), [](int64_t d) { return d <= 0; }))
      unsupported(p_.op + " on the channels-last layout: a 4-D input with known, non-zero dims");
    n_ = x[0];
    c_ = x[1];
    hw_ = x[2] * x[3];
    if (hw_ < 2) unsupported(p_.op + " on the channels-last layout: one pixel is the plain layout");
    x_ = Placed<float>(n_ * hw_ * c_);
    y_ = Placed<float>(n_ * c_);
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_);
  }

  std::string implementation() const override { return "floorline global_average_pool"; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    if (output) return Port{y_.data(), y_.bytes(), "plain"};
    return Port{x_.data(), x_.bytes(), channels_last_layout(p_.inputs[0].shape)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_).bind(data);
    return {};
  }

  void run() override {
    const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), hw_));
    sums_.resize(static_cast<size_t>(n_ * parts * c_));
    for_rows(n_ * parts, [this, parts](int64_t r) {
      const int64_t n = r / parts, t = r % parts;
      const int64_t first = hw_ * t / parts, last = hw_ * (t + 1) / parts;
      ByTarget<nhwc_sum_body>::call(x_.data() + (n * hw_ + first) * c_, last - first, c_,
                                    sums_.data() + r * c_);
    });
    const float inv = 1.f / static_cast<float>(hw_);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t c = 0; c < c_; ++c) {
        float s = 0;
        for (int64_t t = 0; t < parts; ++t) s += sums_[static_cast<size_t>((n * parts + t) * c_ + c)];
        y_[static_cast<size_t>(n * c_ + c)] = s * inv;
      }
  }

  Status verify() override {
    std::vector<float> plain(static_cast<size_t>(n_ * c_ * hw_));
    fill_uniform(plain.data(), static_cast<int64_t>(plain.size()), seed_ + 7);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t i = 0; i < hw_; ++i)
          x_[static_cast<size_t>((n * hw_ + i) * c_ + c)] =
              plain[static_cast<size_t>((n * c_ + c) * hw_ + i)];
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, {{p_.inputs[0].shape, plain}}, {}));
    if (ref.empty() || ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's output is not of shape {}", fmt::join(p_.outputs[0].shape, "x"));
    return compare_output(y_.data(), ref[0], verify_tolerance(p_));
  }

 private:
  Problem p_;
  uint64_t seed_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  Placed<float> x_, y_;
  std::vector<float> sums_;  // per image and thread: its pixels' sums
};

// binary@nhwc: Add, Sub, Mul, Div of a 4-D output [N, C, H, W] held channels-last, each input the
// output's shape (channels-last too) or a per-channel [N or 1, C, 1, 1] (plain), not both per
// channel: an SE block's scale, or a residual Add, between NHWC convolutions. Rows of kChunk
// pixels on the pool.
class NhwcBinaryKernel final : public Kernel {
 public:
  NhwcBinaryKernel(Problem p, uint64_t seed) : p_(std::move(p)), seed_(seed) {
    if (p_.inputs.size() != 2 || p_.outputs.size() != 1)
      unsupported(p_.op + ": two inputs and one output expected");
    const Shape& y = p_.outputs[0].shape;
    if (y.size() != 4 || std::any_of(y.begin(), y.end(), [](int64_t d) { return d <= 0; }))
      unsupported(p_.op + " on the channels-last layout: a 4-D output with known, non-zero dims");
    n_ = y[0];
    c_ = y[1];
    hw_ = y[2] * y[3];
    if (hw_ < 2) unsupported(p_.op + " on the channels-last layout: one pixel is the plain layout");
    for (size_t k = 0; k < 2; ++k) {
      const Shape& x = p_.inputs[k].shape;
      full_[k] = x == y;
      const bool per_channel =
          x.size() == 4 && (x[0] == 1 || x[0] == n_) && x[1] == c_ && x[2] == 1 && x[3] == 1;
      if (!full_[k] && !per_channel)
        unsupported(fmt::format(
            "{} on the channels-last layout: input {} ({}) is neither the output's shape nor per channel",
            p_.op, k, fmt::join(x, "x")));
      images_[k] = x[0];
    }
    if (!full_[0] && !full_[1]) unsupported(p_.op + " on the channels-last layout: both inputs per channel");
    for (size_t k = 0; k < 2; ++k) {
      x_[k] = Placed<float>(elements(p_.inputs[k].shape));
      fill_uniform(x_[k].data(), static_cast<int64_t>(x_[k].size()), seed_ + k);
      if (p_.kind == LayerKind::kDiv && k == 1)
        for (auto& v : x_[k]) v = 1.5f + 0.5f * v;
    }
    y_ = Placed<float>(n_ * hw_ * c_);
  }

  std::string implementation() const override { return "floorline binary"; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    if (output ? k != 0 : k >= 2) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_[k];
    if (!output && !full_[k]) return Port{t.data(), t.bytes(), "plain"};
    return Port{t.data(), t.bytes(), channels_last_layout(p_.outputs[0].shape)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (!port(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_[k]).bind(data);
    return {};
  }

  void run() override {
    const int64_t pixels = n_ * hw_;
    for_rows((pixels + kChunk - 1) / kChunk, [this, pixels](int64_t r) {
      const int64_t p1 = std::min(pixels, (r + 1) * kChunk);
      for (int64_t px = r * kChunk; px < p1; ++px) {
        const int64_t n = px / hw_;
        const float* op[2];
        for (size_t k = 0; k < 2; ++k)
          op[k] = full_[k] ? x_[k].data() + px * c_ : x_[k].data() + (images_[k] == 1 ? 0 : n) * c_;
        float* y = y_.data() + px * c_;
        switch (p_.kind) {
          case LayerKind::kAdd:
            ByTarget<nhwc_binary_body<BinOp::kAdd>>::call(op[0], op[1], c_, y);
            break;
          case LayerKind::kSub:
            ByTarget<nhwc_binary_body<BinOp::kSub>>::call(op[0], op[1], c_, y);
            break;
          case LayerKind::kMul:
            ByTarget<nhwc_binary_body<BinOp::kMul>>::call(op[0], op[1], c_, y);
            break;
          default:
            ByTarget<nhwc_binary_body<BinOp::kDiv>>::call(op[0], op[1], c_, y);
            break;
        }
      }
    });
  }

  Status verify() override {
    return verify_laid_out_binary(
        p_, seed_, full_, n_, c_, hw_, x_, y_,
        [this](int64_t n, int64_t c, int64_t i) { return (n * hw_ + i) * c_ + c; }, [this] { run(); });
  }

 private:
  static constexpr int64_t kChunk = 64;  // pixels per row of the pool
  Problem p_;
  uint64_t seed_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  bool full_[2] = {};
  int64_t images_[2] = {};
  Placed<float> x_[2], y_;
};

}  // namespace

std::unique_ptr<Kernel> make_blocked_binary_kernel(const Problem& p, uint64_t seed, int block) {
  if (block == kNhwc) return std::make_unique<NhwcBinaryKernel>(p, seed);
  return std::make_unique<BlockedBinaryKernel>(p, seed, block);
}

std::unique_ptr<Kernel> make_pool_kernel(const Problem& p, uint64_t seed, int block) {
  if (block == kNhwc) return std::make_unique<NhwcGlobalPoolKernel>(p, seed);
  return std::make_unique<GlobalPoolKernel>(p, seed, block);
}

}  // namespace floorline::kernels::floorline_detail

namespace floorline::kernels {

Result<std::unique_ptr<Kernel>> make_floorline_conversion(const PortRef& from, const PortRef& to) {
  using floorline_detail::blocked_layout_of;
  if (!from.kernel || !to.kernel)
    return make_error(Disposition::kUnsupported, "a conversion needs both ports");
  const auto a = from.kernel->port(from.output, from.index), b = to.kernel->port(to.output, to.index);
  if (!a || !b) return make_error(Disposition::kUnsupported, "a port of the conversion is missing");
  const auto [a_block, a_dims] = blocked_layout_of(a->layout);
  const auto [b_block, b_dims] = blocked_layout_of(b->layout);
  const bool to_blocked = a->layout == "plain" && b_block > 0;
  if (!to_blocked && !(a_block > 0 && b->layout == "plain"))
    return make_error(Disposition::kUnsupported,
                      "Floorline converts between plain and aBcd8b/aBcd16b, not {} and {}", a->layout,
                      b->layout);
  const std::vector<int64_t>& dims = to_blocked ? b_dims : a_dims;
  const int block = to_blocked ? b_block : a_block;
  const int64_t plain_bytes = dims[0] * dims[1] * dims[2] * dims[3] * 4;
  if ((to_blocked ? a->bytes : b->bytes) != plain_bytes)
    return make_error(Disposition::kUnsupported, "the plain side holds {} bytes, not {}x{}x{}x{} floats",
                      to_blocked ? a->bytes : b->bytes, dims[0], dims[1], dims[2], dims[3]);
  return std::unique_ptr<Kernel>(std::make_unique<floorline_detail::ReorderKernel>(
      static_cast<const float*>(from.data ? from.data : a->data), to.data, dims, block, to_blocked,
      b->layout));
}

}  // namespace floorline::kernels
