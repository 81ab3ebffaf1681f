// Floorline's convolution over its valid taps (conv_valid_taps): a 2-D Conv with unit strides and
// one group, on NCHW (x: N × C × H × W, w: K × C × kh × kw, bias: K, y: N × K × Ho × Wo), computed
// as the sum over its kernel taps (ky, kx) of a 1×1 convolution of the input shifted by
// (ky·dil_h − pad_top, kx·dil_w − pad_left), each only over the output pixels whose input pixel
// for that tap is inside the image. A tap's other outputs read the padding's zeros, and are skipped:
//
//   y[k, p] = bias[k] + Σ_(ky, kx) Σ_c w[k, c, ky, kx] · x[c, p + shift(ky, kx)],  p in the tap's region
//
// DeepLabV3's ASPP convolutions dilate a 3 × 3 kernel by 12, 24 and 36 on a 33 × 33 map padded as
// much: at dilation 36 only the centre tap reads the image (a 1 × 1 convolution, a ninth of the
// direct count), at 24 the taps' regions add up to 27% of it, at 12 to 57%. Every CPU library in the
// tree computes all nine (oneDNN's gemm:jit 60 ms for 1x960x33x33 → 256 at dilation 36 on one AVX2
// EPYC core, OpenBLAS's im2col 64, XNNPACK 144); ONNX Runtime's NCHWc convolution skips them
// (13.0 ms) and was below S: the bound check's violation on deeplabv3_mobilenet_v3_large.
//
// Per image: y is set to the bias; then per tap, its region's input pixels are packed in panels of
// 16 (the region's pixels in row-major order: a panel may span rows), C × 16 floats each, and
// sgemm_packed's 6 × 16 AVX2 micro-kernel (gemm.cpp) adds W_tap (K × C, packed when the case is
// built) times each panel into y (through a 6 × 16 tile where the panel's outputs are not one run),
// the input channels in blocks of kKc (a block of W_tap stays in L2 across a thread's panels; the
// threads take panels). A panel per row of the region had left 5 of 16 columns used in its last
// panel at dilation 12 (64 ms against ONNX Runtime's 44). A fused Relu is applied at the end. Planned only
// where the taps' regions cover at most kMaxCover of the direct count (elsewhere the direct and Winograd
// cases are the ones to time). Verified against the reference. Needs AVX2 and FMA. The analyzer keeps its
// FLOP/s out of the roofline's peak (it does fewer multiplications than the direct count).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

constexpr int64_t kNr = kGemmNr;    // pixels per panel
constexpr int64_t kKc = 256;        // input channels per block of the product
constexpr double kMaxCover = 0.75;  // planned where the taps' regions are at most this of the direct count

// A tap's shift and the output rectangle [y0, y1) × [x0, x1) whose input pixels are in the image.
struct Tap {
  int64_t ky = 0, kx = 0, dy = 0, dx = 0;
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  int64_t area() const { return (y1 - y0) * (x1 - x0); }
};

std::vector<Tap> taps_of(const ConvDesc& d) {
  std::vector<Tap> out;
  const int64_t h = d.in[0], w = d.in[1], ho = d.out[0], wo = d.out[1];
  for (int64_t ky = 0; ky < d.kernel[0]; ++ky)
    for (int64_t kx = 0; kx < d.kernel[1]; ++kx) {
      Tap t;
      t.ky = ky;
      t.kx = kx;
      t.dy = ky * d.dilations[0] - d.pads_begin[0];
      t.dx = kx * d.dilations[1] - d.pads_begin[1];
      t.y0 = std::clamp<int64_t>(-t.dy, 0, ho);
      t.y1 = std::clamp<int64_t>(h - t.dy, t.y0, ho);
      t.x0 = std::clamp<int64_t>(-t.dx, 0, wo);
      t.x1 = std::clamp<int64_t>(w - t.dx, t.x0, wo);
      if (t.area() > 0) out.push_back(t);
    }
  return out;
}

}  // namespace

ConvDesc valid_taps_desc(const Problem& p) {
  if (kernel_target() == KernelTarget::kBaseline || !__builtin_cpu_supports("fma"))
    unsupported("conv_valid_taps needs AVX2 and FMA (this CPU, or the ISA cap, has not)");
  const auto d = conv_desc(p);
  if (!d) unsupported(d.error().message);
  if (d->transposed || d->spatial() != 2) unsupported("conv_valid_taps: 2-D convolutions only");
  if (d->group != 1) unsupported(fmt::format("conv_valid_taps: one group only, not {}", d->group));
  if (d->strides != std::vector<int64_t>{1, 1}) unsupported("conv_valid_taps: unit strides only");
  if (d->n <= 0 || d->c <= 0 || d->k <= 0 || d->out[0] <= 0 || d->out[1] <= 0)
    unsupported("conv_valid_taps: an empty convolution");
  for (const auto& po : p.post_ops)
    if (po.op != "Relu") unsupported(fmt::format("conv_valid_taps fuses a Relu only, not {}", po.op));
  int64_t cover = 0;
  for (const auto& t : taps_of(*d)) cover += t.area();
  const int64_t direct = d->kernel[0] * d->kernel[1] * d->out[0] * d->out[1];
  if (static_cast<double>(cover) > kMaxCover * static_cast<double>(direct))
    unsupported(
        fmt::format("conv_valid_taps: the taps read the image for {:.0f}% of the direct count (planned at "
                    "{:.0f}% or less)",
                    100.0 * static_cast<double>(cover) / static_cast<double>(direct), 100 * kMaxCover));
  return *d;
}

namespace {

class ValidTapsKernel final : public Kernel {
 public:
  ValidTapsKernel(Problem p, uint64_t seed) : p_(std::move(p)), seed_(seed), d_(valid_taps_desc(p_)) {
    n_ = d_.n;
    c_ = d_.c;
    k_ = d_.k;
    h_ = d_.in[0];
    w_ = d_.in[1];
    ho_ = d_.out[0];
    wo_ = d_.out[1];
    relu_ = !p_.post_ops.empty();
    taps_ = taps_of(d_);
    // Per tap, its region's pixels in row-major order in panels of 16 (the last short): each
    // pixel's output and input offsets within an image's channel. A panel within one row reads and
    // writes 16 contiguous floats; one across rows (a region narrower than 16 pixels wide, or its
    // rows' ends) is gathered, and its product added into y through a 6 × 16 tile.
    int64_t most = 0;
    for (const Tap& tap : taps_) {
      std::vector<Panel> panels;
      Panel pl;
      for (int64_t y = tap.y0; y < tap.y1; ++y)
        for (int64_t x = tap.x0; x < tap.x1; ++x) {
          pl.out[pl.pixels] = y * wo_ + x;
          pl.in[pl.pixels] = (y + tap.dy) * w_ + x + tap.dx;
          if (++pl.pixels == kNr) {
            panels.push_back(finish(pl));
            pl = Panel{};
          }
        }
      if (pl.pixels > 0) panels.push_back(finish(pl));
      most = std::max<int64_t>(most, static_cast<int64_t>(panels.size()));
      panels_.push_back(std::move(panels));
    }
    x_ = Placed<float>(n_ * c_ * h_ * w_);
    wt_ = Placed<float>(k_ * c_ * d_.kernel[0] * d_.kernel[1]);
    bias_ = Placed<float>(d_.has_bias ? k_ : 0);
    y_ = Placed<float>(n_ * k_ * ho_ * wo_);
    a_ = Placed<float>(static_cast<int64_t>(taps_.size()) * k_ * c_);
    b_ = Placed<float>(most * c_ * kNr);
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_);
    const float half = fill_half_width(p_, 1);
    fill_uniform(wt_.data(), static_cast<int64_t>(wt_.size()), seed_ + 1, -half, 2 * half);
    if (d_.has_bias) fill_uniform(bias_.data(), k_, seed_ + 2);
    pack_weights();
  }

  std::string implementation() const override { return "floorline conv_valid_taps"; }
  int64_t workspace_bytes() const override { return b_.bytes(); }
  // The packed panels, written by every call before it reads them.
  bool share_workspace(void* data) override {
    b_.bind(data);
    return true;
  }

  std::optional<Port> port(bool output, size_t k) const override { return a_y_port(x_, y_, output, k); }
  Status bind(bool output, size_t k, void* data) override { return bind_a_y(x_, y_, output, k, data); }

  void run() override {
    const int threads = std::max(1, omp_get_max_threads());
    const int64_t hw = ho_ * wo_, kblocks = (k_ + kGemmMr - 1) / kGemmMr;
#pragma omp parallel num_threads(threads) if (threads > 1)
    for (int64_t n = 0; n < n_; ++n) {
      float* y = y_.data() + n * k_ * hw;
      const float* x = x_.data() + n * c_ * h_ * w_;
#pragma omp for schedule(static)
      for (int64_t k = 0; k < k_; ++k) std::fill(y + k * hw, y + (k + 1) * hw, d_.has_bias ? bias_[k] : 0.f);
      for (size_t t = 0; t < taps_.size(); ++t) {
        const auto& panels = panels_[t];
        const auto np = static_cast<int64_t>(panels.size());
        // Pack: panel q holds, per input channel, its 16 pixels (zeros past a short panel's end).
#pragma omp for schedule(static)
        for (int64_t q = 0; q < np; ++q) {
          const Panel& pl = panels[static_cast<size_t>(q)];
          float* b = b_.data() + q * c_ * kNr;
          for (int64_t c = 0; c < c_; ++c) {
            const float* xc = x + c * h_ * w_;
            float* bc = b + c * kNr;
            if (pl.in_run)
              std::memcpy(bc, xc + pl.in[0], static_cast<size_t>(pl.pixels) * sizeof(float));
            else
              for (int64_t j = 0; j < pl.pixels; ++j) bc[j] = xc[pl.in[j]];
            if (pl.pixels < kNr) std::fill(bc + pl.pixels, bc + kNr, 0.f);
          }
        }
        const float* a = a_.data() + static_cast<int64_t>(t) * k_ * c_;
        for (int64_t c0 = 0; c0 < c_; c0 += kKc) {
          const int64_t kc = std::min(kKc, c_ - c0);
#pragma omp for schedule(static)
          for (int64_t q = 0; q < np; ++q) {
            const Panel& pl = panels[static_cast<size_t>(q)];
            const float* b = b_.data() + (q * c_ + c0) * kNr;
            for (int64_t kb = 0; kb < kblocks; ++kb) {
              const int mr = static_cast<int>(std::min<int64_t>(kGemmMr, k_ - kb * kGemmMr));
              float* yk = y + kb * kGemmMr * hw;
              if (pl.out_run) {
                gemm_micro_kernel(mr, kc, a + kb * kGemmMr * c_ + c0, c_, b, yk + pl.out[0], hw, true,
                                  nullptr, pl.pixels);
                continue;
              }
              alignas(32) float tile[kGemmMr * kNr];
              gemm_micro_kernel(mr, kc, a + kb * kGemmMr * c_ + c0, c_, b, tile, kNr, false, nullptr,
                                pl.pixels);
              for (int i = 0; i < mr; ++i)
                for (int64_t j = 0; j < pl.pixels; ++j) yk[i * hw + pl.out[j]] += tile[i * kNr + j];
            }
          }
        }
      }
      if (relu_) {
#pragma omp for schedule(static)
        for (int64_t k = 0; k < k_; ++k)
          for (int64_t i = 0; i < hw; ++i) {
            float& v = y[k * hw + i];
            v = v > 0.f ? v : 0.f;
          }
      }
    }
  }

  Status verify() override {
    fill_uniform(x_.data(), static_cast<int64_t>(x_.size()), seed_ + 7);
    run();
    return compare_conv_output(p_, d_.has_bias, x_, wt_, bias_, y_, {}, verify_tolerance(p_));
  }

 private:
  // Up to 16 pixels of a tap's region: their offsets in an image's output and input channel, and
  // whether each side is one contiguous run.
  struct Panel {
    int64_t out[kNr] = {}, in[kNr] = {};
    int64_t pixels = 0;
    bool out_run = false, in_run = false;
  };
  static Panel finish(Panel pl) {
    pl.out_run = pl.in_run = true;
    for (int64_t j = 1; j < pl.pixels; ++j) {
      pl.out_run = pl.out_run && pl.out[j] == pl.out[0] + j;
      pl.in_run = pl.in_run && pl.in[j] == pl.in[0] + j;
    }
    return pl;
  }

  // W_tap[k][c] = w[k][c][ky][kx], K × C row-major per tap.
  void pack_weights() {
    const int64_t kh = d_.kernel[0], kw = d_.kernel[1];
    for (size_t t = 0; t < taps_.size(); ++t)
      for (int64_t k = 0; k < k_; ++k)
        for (int64_t c = 0; c < c_; ++c)
          a_[static_cast<size_t>((static_cast<int64_t>(t) * k_ + k) * c_ + c)] =
              wt_[static_cast<size_t>(((k * c_ + c) * kh + taps_[t].ky) * kw + taps_[t].kx)];
  }

  Problem p_;
  uint64_t seed_;
  ConvDesc d_;
  int64_t n_ = 0, c_ = 0, k_ = 0, h_ = 0, w_ = 0, ho_ = 0, wo_ = 0;
  bool relu_ = false;
  std::vector<Tap> taps_;
  std::vector<std::vector<Panel>> panels_;  // per tap
  Placed<float> x_, wt_, bias_, y_, a_, b_;
};

}  // namespace

std::unique_ptr<Kernel> make_valid_taps_kernel(const Problem& p, uint64_t seed) {
  return std::make_unique<ValidTapsKernel>(p, seed);
}

}  // namespace floorline::kernels::floorline_detail
