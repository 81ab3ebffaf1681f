// OpenBLAS kernels: Gemm and MatMul as cblas_sgemm (one GEMM, or a loop over the batch), Conv as
// im2col + cblas_sgemm per group (LSTM, GRU and RNN: recurrent.cpp); the library's version, core
// and threads.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "internal.hpp"

namespace floorline::kernels {
namespace {

using namespace openblas_detail;

std::atomic<int> g_threads{1};

// The kernel API's GEMM reading of a Gemm/MatMul problem; an operand of the wrong rank is unsupported.
GemmDesc desc_of(const Problem& p) {
  auto d = gemm_desc(p);
  if (!d) unsupported(d.error().message);
  return *d;
}

// Gemm: y = alpha · op(A) · op(B) + beta · C, with C broadcast into y first (part of the call).
class GemmKernel final : public BlasKernel {
 public:
  explicit GemmKernel(Problem p) : BlasKernel(std::move(p)) {
    const GemmDesc d = desc_of(p_);
    g_.ta = d.ta;
    g_.tb = d.tb;
    g_.m = d.m;
    g_.k = d.k;
    g_.n = d.n;
    g_.alpha = d.alpha;
    if (d.has_c) {
      const Shape& c = p_.inputs[2].shape;
      c_rows_ = c.size() == 2 ? c[0] : 1;
      c_cols_ = c.empty() ? 1 : c.back();
      if ((c_rows_ != 1 && c_rows_ != g_.m) || (c_cols_ != 1 && c_cols_ != g_.n))
        unsupported("Gemm's C does not broadcast to (M, N)");
      g_.beta = d.beta;
    }
    impl_ =
        fmt::format("cblas_sgemm {}x{}x{}{}{}", g_.m, g_.n, g_.k, g_.ta ? " A^T" : "", g_.tb ? " B^T" : "");
  }
  void run() override {
    float* y = out_[0].data;
    if (in_.size() > 2) {
      const float* c = in_[2].data;
      for (int64_t i = 0; i < g_.m; ++i)
        for (int64_t j = 0; j < g_.n; ++j)
          y[i * g_.n + j] = c[(c_rows_ == 1 ? 0 : i) * c_cols_ + (c_cols_ == 1 ? 0 : j)];
    }
    g_(in_[0].data, in_[1].data, y);
  }

 private:
  Gemm g_;
  int64_t c_rows_ = 1, c_cols_ = 1;
};

// MatMul with NumPy batch broadcasting: one GEMM per output matrix ("sgemm_loop"), or, where b is
// 2-D, one GEMM with a's batch folded into M ("sgemm").
class MatMulKernel final : public BlasKernel {
 public:
  MatMulKernel(Problem p, bool flat) : BlasKernel(std::move(p)), flat_(flat) {
    const Shape& a = p_.inputs.at(0).shape;
    const Shape& b = p_.inputs.at(1).shape;
    const Shape& y = p_.outputs.at(0).shape;
    const GemmDesc d = desc_of(p_);
    g_.m = a[a.size() - 2];  // one output matrix's (d.m has a's batch folded in when b has none)
    g_.k = d.k;
    g_.n = d.n;
    g_.tb = d.tb;  // transB: b stored (…, N, K), read transposed by the GEMM
    const Shape yb(y.begin(), y.end() - 2);
    if (flat_) {
      if (!d.folded) unsupported("one flattened GEMM needs 2-D weights");
      g_.m = d.m;
      impl_ =
          fmt::format("cblas_sgemm {}x{}x{}{} (batch folded into M)", g_.m, g_.n, g_.k, g_.tb ? " B^T" : "");
      return;
    }
    // Offsets of each output matrix's operands, by NumPy broadcasting of the batch dims.
    const int64_t batches = elements(yb);
    auto offsets = [&](const Shape& s, int64_t matrix) {
      const Shape sb(s.begin(), s.end() - 2);
      std::vector<int64_t> out(static_cast<size_t>(batches));
      for (int64_t t = 0; t < batches; ++t) {
        int64_t rem = t, off = 0, stride = 1;
        for (size_t d = yb.size(); d-- > 0;) {
          const int64_t idx = rem % yb[d];
          rem /= yb[d];
          const size_t back = yb.size() - d;  // position from the right
          if (back <= sb.size()) {
            const int64_t dim = sb[sb.size() - back];
            off += (dim == 1 ? 0 : idx) * stride;
            stride *= dim;
          }
        }
        out[static_cast<size_t>(t)] = off * matrix;
      }
      return out;
    };
    a_off_ = offsets(a, g_.m * g_.k);
    b_off_ = offsets(b, g_.k * g_.n);
    impl_ = fmt::format("cblas_sgemm {}x{}x{}{}, {} calls", g_.m, g_.n, g_.k, g_.tb ? " B^T" : "", batches);
  }
  void run() override {
    if (flat_) {
      g_(in_[0].data, in_[1].data, out_[0].data);
      return;
    }
    for (size_t t = 0; t < a_off_.size(); ++t)
      g_(in_[0].data + a_off_[t], in_[1].data + b_off_[t],
         out_[0].data + static_cast<int64_t>(t) * g_.m * g_.n);
  }

 private:
  bool flat_;
  Gemm g_;
  std::vector<int64_t> a_off_, b_off_;
};

// Conv (2-D, groups, dilation, asymmetric pads): per image and group, the input patches as a
// (C/g · kh · kw) × (OH · OW) matrix (im2col), then W_g · col into the output; the bias is written
// into the output first. A 1×1, stride-1, unpadded convolution reads the input as that matrix.
class ConvKernel final : public BlasKernel {
 public:
  explicit ConvKernel(Problem p) : BlasKernel(std::move(p)) {
    const auto d = conv_desc(p_);  // the kernel API's one reading of the geometry
    if (!d) unsupported(d.error().message);
    if (d->spatial() != 2) unsupported("im2col is mapped for 2-D convolutions");
    n_ = d->n, c_ = d->c, h_ = d->in[0], w_ = d->in[1];
    oc_ = d->k, kh_ = d->kernel[0], kw_ = d->kernel[1], oh_ = d->out[0], ow_ = d->out[1];
    groups_ = d->group;
    pt_ = d->pads_begin[0], pl_ = d->pads_begin[1], sh_ = d->strides[0], sw_ = d->strides[1];
    dh_ = d->dilations[0], dw_ = d->dilations[1];
    gic_ = d->c_per_group();
    goc_ = d->k_per_group();
    direct_ = d->pointwise();
    if (!direct_) {
      col_ = Buffer(gic_ * kh_ * kw_ * oh_ * ow_);
      workspace_ = col_.elements * static_cast<int64_t>(sizeof(float));
    }
    g_.m = goc_;
    g_.n = oh_ * ow_;
    g_.k = gic_ * kh_ * kw_;
    g_.beta = p_.inputs.size() > 2 ? 1.f : 0.f;
    impl_ = fmt::format("{}cblas_sgemm {}x{}x{}{}", direct_ ? "" : "im2col + ", g_.m, g_.n, g_.k,
                        groups_ > 1 ? fmt::format(", {} groups", groups_) : "");
  }
  void run() override {
    const float* x = in_[0].data;
    const float* wt = in_[1].data;
    float* y = out_[0].data;
    const int64_t pixels = oh_ * ow_;
    if (in_.size() > 2) {
      const float* bias = in_[2].data;
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t o = 0; o < oc_; ++o) std::fill_n(y + (n * oc_ + o) * pixels, pixels, bias[o]);
    }
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t g = 0; g < groups_; ++g) {
        const float* xg = x + (n * c_ + g * gic_) * h_ * w_;
        const float* col = direct_ ? xg : im2col(xg);
        g_(wt + g * goc_ * g_.k, col, y + (n * oc_ + g * goc_) * pixels);
      }
  }

 private:
  bool is_port(size_t k) const override { return k == 0; }
  const float* im2col(const float* x) {
    float* col = col_.data;
    for (int64_t c = 0; c < gic_; ++c)
      for (int64_t r = 0; r < kh_; ++r)
        for (int64_t s = 0; s < kw_; ++s) {
          float* row = col + ((c * kh_ + r) * kw_ + s) * oh_ * ow_;
          for (int64_t i = 0; i < oh_; ++i) {
            const int64_t hi = i * sh_ - pt_ + r * dh_;
            float* out = row + i * ow_;
            if (hi < 0 || hi >= h_) {
              std::fill_n(out, ow_, 0.f);
              continue;
            }
            const float* in = x + (c * h_ + hi) * w_;
            for (int64_t j = 0; j < ow_; ++j) {
              const int64_t wi = j * sw_ - pl_ + s * dw_;
              out[j] = wi >= 0 && wi < w_ ? in[wi] : 0.f;
            }
          }
        }
    return col;
  }
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, oc_ = 0, kh_ = 0, kw_ = 0, oh_ = 0, ow_ = 0, groups_ = 1;
  int64_t pt_ = 0, pl_ = 0, sh_ = 1, sw_ = 1, dh_ = 1, dw_ = 1, gic_ = 0, goc_ = 0;
  bool direct_ = false;
  Buffer col_;
  Gemm g_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_openblas_kernel(const CaseSpec& spec) {
  if (spec.variant.dtype != DType::kF32)
    return make_error(Disposition::kUnsupported, "cblas_sgemm is f32, not {}",
                      dtype_name(spec.variant.dtype));
  if (!spec.problem.post_ops.empty())
    return make_error(Disposition::kUnsupported, "OpenBLAS has no fused epilogue");
  openblas_set_num_threads(g_threads.load());
  const std::string& alg = spec.variant.algorithm;
  const PlacementScope placement(spec.placement);
  try {
    switch (spec.problem.kind) {
      case LayerKind::kConv:
        if (spec.problem.inputs.at(0).shape.size() != 4) unsupported("im2col is mapped for 2-D convolutions");
        return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(spec.problem));
      case LayerKind::kGemm:
        return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(spec.problem));
      case LayerKind::kMatMul:
        if (spec.problem.inputs.at(0).shape.size() < 2 || spec.problem.inputs.at(1).shape.size() < 2)
          unsupported("MatMul with a 1-D operand is not mapped");
        return std::unique_ptr<Kernel>(std::make_unique<MatMulKernel>(spec.problem, alg == "sgemm"));
      case LayerKind::kLSTM:
      case LayerKind::kGRU:
      case LayerKind::kRNN:
        return make_recurrent_kernel(spec.problem);
      default:
        return make_error(Disposition::kUnsupported, "{}: {}", spec.problem.op,
                          openblas_support(spec.problem.kind).reason);
    }
  } catch (const MissingAttribute& e) {
    return make_error("{}", e.what());
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

benchmark::internal::Benchmark* register_openblas_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_openblas_kernel);
}

std::string openblas_version() {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  return version;
}

std::string openblas_core() {
  return openblas_get_corename();
}

void set_openblas_threads(int threads) {
  g_threads = std::max(1, threads);
  openblas_set_num_threads(g_threads.load());
}

int openblas_threads() {
  return g_threads.load();
}

}  // namespace floorline::kernels
