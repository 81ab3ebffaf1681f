// Floorline's channel movements: the layers that only move whole channels of 4-D [N, C, H, W]
// tensors, each output channel a copy of one input channel, on the plain layout and on oneDNN's
// channel-blocked layouts aBcd8b and aBcd16b (N, ⌈C/B⌉, H, W, B; padding lanes zero):
//
//   slice, slice@blocked<B>c          a Slice of a run of channels (axis 1, step 1; any other
//                                     sliced axis whole)
//   split, split@blocked<B>c          a Split along the channels
//   channel_shuffle, ...@blocked<B>c  the channel shuffle: a Transpose of [N, G, K, H, W] by
//                                     perm (0, 2, 1, 3, 4), which ShuffleNet's exports write between
//                                     two Reshapes (to [N, G, K, H, W] and back to [N, K·G, H, W]):
//                                     output channel k·G + g is input channel g·K + k. Its ports are
//                                     named by the 4-D tensors around the Reshapes, the layout the
//                                     replay carries through a view
//   concat@blocked<B>c                a Concat along the channels whose inputs are not all a
//                                     multiple of B channels (a multiple: data.cpp's copies)
//   slice@nhwc, split@nhwc, channel_shuffle@nhwc, concat@nhwc
//                                     the same on the channels-last layout (oneDNN's acdb, XNNPACK's
//                                     NHWC), where XNNPACK's NHWC convolutions (AVX-512 hosts'
//                                     fastest 1×1s in ShuffleNet) write and read the tensors around
//                                     them
//
// A runtime that keeps a convolution's blocked output through the layers after it can run these on
// the blocked layout rather than converting around them. Without them shufflenet_v2_x1_0's replay
// converted 53 tensors around its 16 shuffles: 479 µs of a 2.42 ms S at batch 1 on 2 threads (2-core
// AMD EPYC, AVX2; docs/ANALYZER.md, where what they changed is measured). (oneDNN has a shuffle
// primitive too, shuffle_forward with group_size K; not planned here.)
//
// Plain: runs of consecutive channels from one input are one copy per image, split into pieces of
// at most kPieceFloats for the threads. Blocked: each group of 8 output lanes (half of a 16-lane
// block) is gathered, pixel by pixel, from the few 8-lane groups of the inputs its channels come
// from: a load, a permute of the lanes, a mask and an or per source (a variable __builtin_shuffle:
// vpermps where the build has AVX2); lanes past the output's channels stay zero. Two groups that
// interleave two runs of 8 input channels (the shuffle of 2 groups) gather each run once and
// interleave them (interleave_pair_body). Tiles of pixels of two groups at a time are the rows the
// threads split.
// Channels-last: per pixel, an output's channels are runs of consecutive input channels (one copy
// each) or two runs interleaved channel by channel (the shuffle of 2 groups: unpack and permute,
// AVX2); chunks of pixels are the rows the threads split.
// Verified against the reference: plain input values packed into the layout with NaN in the inputs'
// padding lanes (never read), the outputs unpacked, their padding lanes checked to be zero.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "floorline/kernels/dispatch.hpp"
#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

// One 8-lane source of an output lane group: its offset (floats, at pixel 0) in input `input`,
// the source lane of each output lane, and the lanes it fills (-1) or leaves (0).
struct LaneSource {
  size_t input = 0;
  int64_t offset = 0;
  I8 lane = {};
  I8 take = {};
};

// One output lane group of one image: where it is written (output, offset at pixel 0) and its
// sources (none: a group of padding lanes, written as zeros).
struct LaneGroup {
  size_t output = 0;
  int64_t offset = 0;
  std::vector<LaneSource> sources;  // at most 8, one per lane
  bool whole = false;               // one source, all 8 lanes in order: a copy
  // The first of a pair of groups whose 16 channels interleave two runs of 8 consecutive input
  // channels, a₀ b₀ a₁ b₁ … (a channel shuffle of 2 groups): each run's sources (run a one input
  // lane group, run b one or two: 8 consecutive channels span two), gathered into one vector per
  // pixel and interleaved into both groups (interleave_pair_body). Empty where the pair is not one.
  std::vector<LaneSource> run_a, run_b;
};

// `hw` pixels of one output lane group, each pixel `stride` floats after the last in the inputs and
// the output: the lanes of each of its S sources permuted into place and blended, the permutations
// and masks held in registers, two pixels a step. Always inlined into each build of ByTarget (no
// vector crosses a call: they are passed by pointer). A loop over a run-time count of sources, the
// masks reloaded per pixel, took 11.5 µs for a 1x116x28x28 → 1x58x28x28 slice on aBcd8b against the
// plain copy's 4.2 (one AVX2 EPYC core).
template <int S>
[[gnu::always_inline]] inline void gather_lanes_body(const float* const* src, const I8* lane, const I8* take,
                                                     int64_t hw, int64_t stride, float* dst) {
  I8 l[S > 0 ? S : 1], t[S > 0 ? S : 1];
  const float* x[S > 0 ? S : 1];
#pragma GCC unroll 8
  for (int s = 0; s < S; ++s) {
    l[s] = lane[s];
    t[s] = take[s];
    x[s] = src[s];
  }
  // The sources fill disjoint lanes: each one's permuted lanes, masked, are or-ed in.
  auto pixel = [&](int64_t i) {
    I8 r = {};
#pragma GCC unroll 8
    for (int s = 0; s < S; ++s) {
      V8 v;
      std::memcpy(&v, x[s] + i * stride, sizeof v);
      r |= reinterpret_cast<I8>(__builtin_shuffle(v, l[s])) & t[s];
    }
    std::memcpy(dst + i * stride, &r, sizeof r);
  };
  int64_t i = 0;
  for (; i + 4 <= hw; i += 4) {
    pixel(i);
    pixel(i + 1);
    pixel(i + 2);
    pixel(i + 3);
  }
  for (; i < hw; ++i) pixel(i);
}

// A group of one source taken whole and in order: a copy of 8 floats per pixel (one copy of the
// whole group where the pixels are contiguous, stride 8).
[[gnu::always_inline]] inline void copy_lanes_body(const float* src, int64_t hw, int64_t stride, float* dst) {
  if (stride == 8) {
    std::memcpy(dst, src, static_cast<size_t>(hw) * 8 * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < hw; ++i) {
    V8 v;
    std::memcpy(&v, src + i * stride, sizeof v);
    std::memcpy(dst + i * stride, &v, sizeof v);
  }
}

// Two output lane groups of `hw` pixels that interleave two runs of 8 input channels: per pixel
// each run gathered into one vector (SA, SB sources: permuted, masked, or-ed), then
// a₀ b₀ a₁ b₁ a₂ b₂ a₃ b₃ into `dst0` and a₄ b₄ … a₇ b₇ into `dst1` (unpack and 128-bit permutes
// in the AVX2 build). The channel shuffle of 2 groups so takes 2 gathers per 2 output vectors
// where the general path takes 3 or 4 per vector: 1x2x58x28x28 on aBcd8b took 20–30 µs that way
// (one AVX2 EPYC core).
template <int SA, int SB>
[[gnu::always_inline]] inline void interleave_pair_body(const float* const* src, const I8* lane,
                                                        const I8* take, int64_t hw, int64_t stride,
                                                        float* dst0, float* dst1) {
  I8 l[SA + SB], t[SA + SB];
  const float* x[SA + SB];
#pragma GCC unroll 4
  for (int s = 0; s < SA + SB; ++s) {
    l[s] = lane[s];
    t[s] = take[s];
    x[s] = src[s];
  }
  const I8 lo = {0, 8, 1, 9, 2, 10, 3, 11}, hi = {4, 12, 5, 13, 6, 14, 7, 15};
  for (int64_t i = 0; i < hw; ++i) {
    I8 a = {}, b = {};
#pragma GCC unroll 4
    for (int s = 0; s < SA + SB; ++s) {
      V8 v;
      std::memcpy(&v, x[s] + i * stride, sizeof v);
      (s < SA ? a : b) |= reinterpret_cast<I8>(__builtin_shuffle(v, l[s])) & t[s];
    }
    const I8 y0 = __builtin_shuffle(a, b, lo), y1 = __builtin_shuffle(a, b, hi);
    std::memcpy(dst0 + i * stride, &y0, sizeof y0);
    std::memcpy(dst1 + i * stride, &y1, sizeof y1);
  }
}

constexpr int64_t kPieceFloats = 16384;  // a plain copy is split into pieces of at most 64 KiB

int64_t normalized_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

std::optional<ChannelMove> channel_move(const Problem& p) {
  auto four_d = [](const Shape& s) {
    return s.size() == 4 && std::all_of(s.begin(), s.end(), [](int64_t d) { return d > 0; });
  };
  auto same_off_channels = [](const Shape& a, const Shape& b) {
    return a[0] == b[0] && a[2] == b[2] && a[3] == b[3];
  };
  ChannelMove m;
  switch (p.kind) {
    case LayerKind::kConcat: {
      if (p.inputs.empty() || p.outputs.size() != 1 || !four_d(p.outputs[0].shape)) return std::nullopt;
      if (normalized_axis(p.int_attr("axis", 0), 4) != 1) return std::nullopt;
      m.out = {p.outputs[0].shape};
      m.from.resize(1);
      for (size_t k = 0; k < p.inputs.size(); ++k) {
        const Shape& x = p.inputs[k].shape;
        if (!four_d(x) || !same_off_channels(x, m.out[0])) return std::nullopt;
        m.in.push_back(x);
        for (int64_t c = 0; c < x[1]; ++c) m.from[0].push_back({k, c});
      }
      if (static_cast<int64_t>(m.from[0].size()) != m.out[0][1]) return std::nullopt;
      return m;
    }
    case LayerKind::kSlice: {
      if (p.inputs.empty() || p.outputs.size() != 1) return std::nullopt;
      const Shape& x = p.inputs[0].shape;
      const Shape& y = p.outputs[0].shape;
      if (!four_d(x) || !four_d(y) || !same_off_channels(x, y)) return std::nullopt;
      const auto starts = p.ints_attr("starts"), axes = p.ints_attr("axes"), steps = p.ints_attr("steps");
      // (No starts: run-time ones, which the key does not hold.)
      if (starts.empty() || starts.size() != axes.size() || (!steps.empty() && steps.size() != axes.size()))
        return std::nullopt;
      int64_t start = 0;
      for (size_t k = 0; k < axes.size(); ++k) {
        const int64_t axis = normalized_axis(axes[k], 4);
        if (!steps.empty() && steps[k] != 1) return std::nullopt;
        if (axis != 1) {
          // Another axis, taken whole: a start of 0 (or its equivalent) and the dim unchanged.
          if (axis < 0 || axis > 3 || (starts[k] != 0 && starts[k] + x[axis] != 0)) return std::nullopt;
          continue;
        }
        start = starts[k] < 0 ? std::max<int64_t>(0, starts[k] + x[1]) : std::min(starts[k], x[1]);
      }
      if (start + y[1] > x[1]) return std::nullopt;
      m.in = {x};
      m.out = {y};
      m.from.resize(1);
      for (int64_t c = 0; c < y[1]; ++c) m.from[0].push_back({0, start + c});
      return m;
    }
    case LayerKind::kSplit: {
      if (p.inputs.empty() || p.outputs.empty()) return std::nullopt;
      const Shape& x = p.inputs[0].shape;
      if (!four_d(x) || normalized_axis(p.int_attr("axis", 0), 4) != 1) return std::nullopt;
      m.in = {x};
      int64_t at = 0;
      for (const auto& o : p.outputs) {
        if (!four_d(o.shape) || !same_off_channels(x, o.shape)) return std::nullopt;
        m.out.push_back(o.shape);
        m.from.emplace_back();
        for (int64_t c = 0; c < o.shape[1]; ++c) m.from.back().push_back({0, at + c});
        at += o.shape[1];
      }
      if (at != x[1]) return std::nullopt;
      return m;
    }
    case LayerKind::kTranspose: {
      if (p.inputs.empty() || p.outputs.size() != 1) return std::nullopt;
      const Shape& x = p.inputs[0].shape;   // [N, G, K, H, W]
      const Shape& y = p.outputs[0].shape;  // [N, K, G, H, W]
      if (x.size() != 5 || y.size() != 5 || p.ints_attr("perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
        return std::nullopt;
      if (std::any_of(x.begin(), x.end(), [](int64_t d) { return d <= 0; })) return std::nullopt;
      if (y != Shape{x[0], x[2], x[1], x[3], x[4]}) return std::nullopt;
      const int64_t g = x[1], k = x[2];
      m.in = {{x[0], g * k, x[3], x[4]}};
      m.out = {{x[0], g * k, x[3], x[4]}};
      m.from.resize(1);
      for (int64_t c = 0; c < g * k; ++c) m.from[0].push_back({0, (c % g) * k + c / g});
      return m;
    }
    default:
      return std::nullopt;
  }
}

namespace {

// dst[2k] = a[k], dst[2k + 1] = b[k] for k in [0, n).
[[gnu::target("avx2")]] void interleave_avx2(const float* a, const float* b, float* dst, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k), y = _mm256_loadu_ps(b + k);
    const __m256 lo = _mm256_unpacklo_ps(x, y), hi = _mm256_unpackhi_ps(x, y);  // per 128-bit half
    _mm256_storeu_ps(dst + 2 * k, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + 2 * k + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  for (; k < n; ++k) {
    dst[2 * k] = a[k];
    dst[2 * k + 1] = b[k];
  }
}
void interleave(const float* a, const float* b, float* dst, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return interleave_avx2(a, b, dst, n);
  for (int64_t k = 0; k < n; ++k) {
    dst[2 * k] = a[k];
    dst[2 * k + 1] = b[k];
  }
}

class ChannelKernel final : public Kernel {
 public:
  ChannelKernel(Problem p, std::string name, uint64_t seed, int block, ChannelMove m)
      : p_(std::move(p)), name_(std::move(name)), seed_(seed), block_(block), m_(std::move(m)) {
    if (block_ != 0 && block_ != 8 && block_ != 16 && block_ != kNhwc)
      unsupported(fmt::format("no blocked{}c layout", block_));
    n_ = m_.out[0][0];
    hw_ = m_.out[0][2] * m_.out[0][3];
    for (const auto& s : m_.in) in_.emplace_back(stored(s));
    for (const auto& s : m_.out) out_.emplace_back(stored(s));
    if (block_ == 0)
      plan_plain();
    else if (block_ == kNhwc)
      plan_nhwc();
    else
      plan_blocked();
    for (size_t k = 0; k < in_.size(); ++k)
      fill_uniform(in_[k].data(), static_cast<int64_t>(in_[k].size()), seed_ + k);
  }

  std::string implementation() const override { return "floorline " + name_; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    const auto& list = output ? out_ : in_;
    if (k >= list.size()) return std::nullopt;
    const Placed<float>& t = list[k];
    const Shape& dims = (output ? m_.out : m_.in)[k];
    // Without pixels (H = W = 1) channels-last is the plain order, as XNNPACK's ports say.
    if (block_ == 0 || (block_ == kNhwc && hw_ == 1)) return Port{t.data(), t.bytes(), "plain"};
    if (block_ == kNhwc) return Port{t.data(), t.bytes(), channels_last_layout(dims)};
    return Port{t.data(), t.bytes(), blocked_channels_layout(block_, dims)};
  }
  Status bind(bool output, size_t k, void* data) override {
    auto& list = output ? out_ : in_;
    if (k >= list.size())
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    list[k].bind(data);
    return {};
  }

  void run() override {
    if (block_ == kNhwc) {
      for_rows((n_ * hw_ + kChunkPixels - 1) / kChunkPixels, [this](int64_t r) {
        const int64_t p0 = r * kChunkPixels, p1 = std::min(n_ * hw_, p0 + kChunkPixels);
        for (const Segment& g : segments_) {
          const int64_t ci = m_.in[g.input][1], co = m_.out[g.output][1];
          const float* src = in_[g.input].data();
          const float* src_b = in_[g.input_b].data();
          float* dst = out_[g.output].data();
          for (int64_t px = p0; px < p1; ++px) {
            if (g.interleaved)
              interleave(src + px * ci + g.from, src_b + px * m_.in[g.input_b][1] + g.from_b,
                         dst + px * co + g.to, g.count);
            else
              std::memcpy(dst + px * co + g.to, src + px * ci + g.from,
                          static_cast<size_t>(g.count) * sizeof(float));
          }
        }
      });
      return;
    }
    if (block_ == 0) {
      for_rows(static_cast<int64_t>(pieces_.size()), [this](int64_t r) {
        const Piece& c = pieces_[static_cast<size_t>(r)];
        std::memcpy(out_[c.output].data() + c.to, in_[c.input].data() + c.from,
                    static_cast<size_t>(c.floats) * sizeof(float));
      });
      return;
    }
    // A row: a tile of pixels of two consecutive lane groups (a 16-lane block, or two 8-lane
    // blocks), so that the second group's lanes find the cache lines the first one brought in.
    for_rows(static_cast<int64_t>(tiles_.size()), [this](int64_t r) {
      const Tile& t = tiles_[static_cast<size_t>(r)];
      const int64_t at = t.pixel * block_;
      for (size_t k = t.group; k < t.group + t.groups; ++k) {
        const LaneGroup& g = groups_[k];
        float* dst = out_[g.output].data() + g.offset + at;
        if (!g.run_a.empty()) {
          const LaneGroup& next = groups_[k + 1];
          const float* src[4];
          I8 lane[4], take[4];
          size_t s = 0;
          for (const auto* run : {&g.run_a, &g.run_b})
            for (const LaneSource& ls : *run) {
              src[s] = in_[ls.input].data() + ls.offset + at;
              lane[s] = ls.lane;
              take[s++] = ls.take;
            }
          float* dst1 = out_[next.output].data() + next.offset + at;
          if (g.run_b.size() == 1)
            ByTarget<interleave_pair_body<1, 1>>::call(src, lane, take, t.pixels, block_, dst, dst1);
          else
            ByTarget<interleave_pair_body<1, 2>>::call(src, lane, take, t.pixels, block_, dst, dst1);
          ++k;  // the pair's second group is written
          continue;
        }
        const auto& sources = g.sources;
        if (g.whole) {
          ByTarget<copy_lanes_body>::call(in_[sources[0].input].data() + sources[0].offset + at, t.pixels,
                                          block_, dst);
          continue;
        }
        const float* src[8];
        I8 lane[8], take[8];
        for (size_t s = 0; s < sources.size(); ++s) {
          src[s] = in_[sources[s].input].data() + sources[s].offset + at;
          lane[s] = sources[s].lane;
          take[s] = sources[s].take;
        }
        gather(static_cast<int>(sources.size()), src, lane, take, t.pixels, dst);
      }
    });
  }

  Status verify() override {
    // Plain values per input, packed into the layout; the inputs' padding lanes NaN (never read),
    // the outputs' NaN before the call (their padding must come out zero).
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<HostTensor> plain;
    for (size_t k = 0; k < m_.in.size(); ++k) {
      HostTensor t;
      t.shape = p_.inputs[k].shape;  // the layer's own (the shuffle's 5-D), the same row-major values
      t.data.resize(static_cast<size_t>(elements(m_.in[k])));
      fill_uniform(t.data.data(), static_cast<int64_t>(t.data.size()), seed_ + 101 + k);
      in_[k].fill(nan);
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t c = 0; c < m_.in[k][1]; ++c)
          for (int64_t i = 0; i < hw_; ++i)
            in_[k][static_cast<size_t>(at(m_.in[k], n, c, i))] =
                t.data[static_cast<size_t>((n * m_.in[k][1] + c) * hw_ + i)];
      plain.push_back(std::move(t));
    }
    for (auto& o : out_) o.fill(nan);
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, plain, {}));
    if (ref.size() != out_.size())
      return make_error("the reference gave {} outputs, not {}", ref.size(), out_.size());
    for (size_t k = 0; k < out_.size(); ++k) {
      const Shape& s = m_.out[k];
      std::vector<float> got(static_cast<size_t>(elements(s)));
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t c = 0; c < s[1]; ++c)
          for (int64_t i = 0; i < hw_; ++i)
            got[static_cast<size_t>((n * s[1] + c) * hw_ + i)] = out_[k][static_cast<size_t>(at(s, n, c, i))];
      FL_TRY(compare_output(got.data(), ref[k], verify_tolerance(p_)));
      if (block_ <= 0) continue;
      const int64_t padded = blocks(s[1]) * block_;
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t c = s[1]; c < padded; ++c)
          for (int64_t i = 0; i < hw_; ++i)
            if (const float v = out_[k][static_cast<size_t>(at(s, n, c, i))]; v != 0.f)
              return make_error("output {}: padding channel {} of image {} holds {}, not 0", k, c, n, v);
    }
    return {};
  }

 private:
  struct Piece {
    size_t input = 0, output = 0;
    int64_t from = 0, to = 0, floats = 0;
  };

  // gather_lanes_body<S> for S = `sources` (0 to 8: a group has 8 lanes).
  template <int S = 0>
  void gather(int sources, const float* const* src, const I8* lane, const I8* take, int64_t pixels,
              float* dst) const {
    if constexpr (S < 8)
      if (sources != S) return gather<S + 1>(sources, src, lane, take, pixels, dst);
    ByTarget<gather_lanes_body<S>>::call(src, lane, take, pixels, block_, dst);
  }

  int64_t blocks(int64_t c) const { return (c + block_ - 1) / block_; }
  // Floats the layout holds for a [N, C, H, W] tensor (the blocked ones with their padding lanes).
  int64_t stored(const Shape& s) const {
    return block_ <= 0 ? elements(s) : s[0] * blocks(s[1]) * block_ * hw_;
  }
  // The offset of element (n, c, pixel i) of a [N, C, H, W] tensor in the layout.
  int64_t at(const Shape& s, int64_t n, int64_t c, int64_t i) const {
    if (block_ == 0) return (n * s[1] + c) * hw_ + i;
    if (block_ == kNhwc) return (n * hw_ + i) * s[1] + c;
    return ((n * blocks(s[1]) + c / block_) * hw_ + i) * block_ + c % block_;
  }

  // Runs of consecutive channels from one input, one copy per image, split into pieces.
  void plan_plain() {
    for (size_t o = 0; o < m_.out.size(); ++o) {
      const auto& from = m_.from[o];
      for (int64_t n = 0; n < n_; ++n)
        for (size_t c = 0; c < from.size();) {
          size_t e = c + 1;
          while (e < from.size() && from[e].input == from[c].input &&
                 from[e].channel == from[e - 1].channel + 1)
            ++e;
          const int64_t floats = static_cast<int64_t>(e - c) * hw_;
          const int64_t src = at(m_.in[from[c].input], n, from[c].channel, 0);
          const int64_t dst = at(m_.out[o], n, static_cast<int64_t>(c), 0);
          for (int64_t done = 0; done < floats; done += kPieceFloats)
            pieces_.push_back(
                {from[c].input, o, src + done, dst + done, std::min(kPieceFloats, floats - done)});
          c = e;
        }
    }
  }

  // Channels-last: each output's channels as segments, the same at every pixel: a run of
  // consecutive channels of one input, or two such runs interleaved channel by channel.
  void plan_nhwc() {
    for (size_t o = 0; o < m_.out.size(); ++o) {
      const auto& from = m_.from[o];
      const auto next = [&](size_t c, size_t d) {  // from[c + d] continues from[c]'s run by d / 2
        return from[c + d].input == from[c].input &&
               from[c + d].channel == from[c].channel + static_cast<int64_t>(d / 2);
      };
      for (size_t c = 0; c < from.size();) {
        // Interleaved: a₀ b₀ a₁ b₁ …, at least 4 pairs, b not a's continuation.
        size_t pairs = 0;
        if (c + 1 < from.size() &&
            !(from[c + 1].input == from[c].input && from[c + 1].channel == from[c].channel + 1))
          while (c + 2 * pairs + 1 < from.size() && next(c, 2 * pairs) &&
                 from[c + 2 * pairs + 1].input == from[c + 1].input &&
                 from[c + 2 * pairs + 1].channel == from[c + 1].channel + static_cast<int64_t>(pairs))
            ++pairs;
        if (pairs >= 4) {
          segments_.push_back({from[c].input, from[c + 1].input, o, from[c].channel, from[c + 1].channel,
                               static_cast<int64_t>(c), static_cast<int64_t>(pairs), true});
          c += 2 * pairs;
          continue;
        }
        size_t e = c + 1;
        while (e < from.size() && from[e].input == from[c].input &&
               from[e].channel == from[e - 1].channel + 1)
          ++e;
        segments_.push_back({from[c].input, from[c].input, o, from[c].channel, 0, static_cast<int64_t>(c),
                             static_cast<int64_t>(e - c), false});
        c = e;
      }
    }
  }

  // Per image, output and group of 8 output lanes: its sources (8-lane groups of the inputs).
  // The sources of 8 lanes of image n whose channels are from[0..8) (an entry per lane, absent
  // past the output's channels).
  std::vector<LaneSource> lane_sources(int64_t n, const std::vector<ChannelMove::From>& from) const {
    std::vector<LaneSource> out;
    for (size_t l = 0; l < from.size(); ++l) {
      const auto& f = from[l];
      const int64_t src = at(m_.in[f.input], n, f.channel / 8 * 8, 0);
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const LaneSource& ls) { return ls.input == f.input && ls.offset == src; });
      if (it == out.end()) {
        out.push_back({f.input, src, I8{}, I8{}});
        it = out.end() - 1;
      }
      it->lane[l] = static_cast<int32_t>(f.channel % 8);
      it->take[l] = -1;
    }
    return out;
  }

  // Per image, output and group of 8 output lanes: its sources (8-lane groups of the inputs), and
  // where two groups interleave two runs of input channels, the runs' sources.
  void plan_blocked() {
    for (size_t o = 0; o < m_.out.size(); ++o) {
      const Shape& s = m_.out[o];
      const auto& from = m_.from[o];
      const int64_t groups = blocks(s[1]) * block_ / 8;
      for (int64_t n = 0; n < n_; ++n) {
        const size_t first = groups_.size();
        for (int64_t q = 0; q < groups; ++q) {
          LaneGroup g;
          g.output = o;
          g.offset = at(s, n, q * 8, 0);
          const auto b = from.begin() + std::min<int64_t>(q * 8, s[1]);
          g.sources = lane_sources(n, {b, from.begin() + std::min<int64_t>(q * 8 + 8, s[1])});
          g.whole = g.sources.size() == 1;
          for (int l = 0; l < 8 && g.whole; ++l)
            g.whole = g.sources[0].take[l] != 0 && g.sources[0].lane[l] == l;
          groups_.push_back(std::move(g));
        }
        // Pairs (q, q + 1), q even, whose 16 channels are a₀ b₀ … a₇ b₇ of two runs of 8.
        for (int64_t q = 0; q + 1 < groups && (q + 2) * 8 <= s[1]; q += 2) {
          std::vector<ChannelMove::From> a, b;
          bool runs = true;
          for (int64_t i = 0; i < 8 && runs; ++i) {
            a.push_back(from[static_cast<size_t>(q * 8 + 2 * i)]);
            b.push_back(from[static_cast<size_t>(q * 8 + 2 * i + 1)]);
            runs = a[i].input == a[0].input && a[i].channel == a[0].channel + i && b[i].input == b[0].input &&
                   b[i].channel == b[0].channel + i;
          }
          if (!runs) continue;
          // Run a is one input lane group in the shuffle of 2 groups (it starts at channel 8·(q/2));
          // a pair whose a-run spans two takes the general path.
          auto run_a = lane_sources(n, a);
          if (run_a.size() != 1) continue;
          LaneGroup& g = groups_[first + static_cast<size_t>(q)];
          g.run_a = std::move(run_a);
          g.run_b = lane_sources(n, b);
        }
        // Tiles of kTilePixels pixels over two groups of the image (a 16-lane block; two 8-lane
        // blocks, a pair's).
        for (int64_t q = 0; q < groups; q += 2)
          for (int64_t p = 0; p < hw_; p += kTilePixels)
            tiles_.push_back({first + static_cast<size_t>(q),
                              static_cast<size_t>(std::min<int64_t>(2, groups - q)), p,
                              std::min(kTilePixels, hw_ - p)});
      }
    }
  }

  Problem p_;
  std::string name_;
  uint64_t seed_;
  int block_;
  ChannelMove m_;
  int64_t n_ = 0, hw_ = 0;
  std::vector<Placed<float>> in_, out_;
  std::vector<Piece> pieces_;  // plain
  struct Segment {
    size_t input = 0, input_b = 0, output = 0;
    int64_t from = 0, from_b = 0, to = 0, count = 0;  // channels; interleaved: pairs
    bool interleaved = false;
  };
  std::vector<Segment> segments_;              // channels-last
  static constexpr int64_t kChunkPixels = 64;  // channels-last: pixels per row of the threads
  std::vector<LaneGroup> groups_;              // blocked: per image and output block, its lane groups
  struct Tile {
    size_t group = 0, groups = 0;  // its first lane group and how many
    int64_t pixel = 0, pixels = 0;
  };
  std::vector<Tile> tiles_;                    // blocked: the rows run() splits among the threads
  static constexpr int64_t kTilePixels = 256;  // 16 KiB of a 16-lane block
};

}  // namespace

std::unique_ptr<Kernel> make_channel_kernel(const Problem& p, const std::string& name, uint64_t seed,
                                            int block) {
  auto m = channel_move(p);
  if (!m) unsupported(fmt::format("{}: not a movement of whole channels of 4-D tensors", p.op));
  return std::make_unique<ChannelKernel>(p, name, seed, block, std::move(*m));
}

}  // namespace floorline::kernels::floorline_detail
