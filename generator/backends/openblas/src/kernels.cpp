// OpenBLAS kernels: Gemm and MatMul as cblas_sgemm (one GEMM, or a loop over the batch; or, at
// more than one thread, the work cut into one-thread calls on OpenMP's threads: the _split
// variants), Conv as im2col + cblas_sgemm per group (LSTM, GRU and RNN: recurrent.cpp); the
// library's version, core and threads.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "internal.hpp"

namespace floorline::kernels {
namespace {

using namespace openblas_detail;

std::atomic<int> g_threads{1};

constexpr std::string_view kSplit = "_split";

// The threads a case of `algorithm` cuts its GEMMs over: 0 for a plain case (its calls on
// OpenBLAS's own threads); for a _split variant the threads set when the kernel is built, at least
// 2 (at one thread the split is the plain call, timed as its own case).
int split_threads(const std::string& algorithm) {
  if (!algorithm.ends_with(kSplit)) return 0;
  const int threads = g_threads.load();
  if (threads < 2)
    unsupported(fmt::format("{} at one thread is the plain GEMM (case {})", algorithm,
                            algorithm.substr(0, algorithm.size() - kSplit.size())));
  return threads;
}

// Runs part(i, parts) for i in [0, parts) on `parts` OpenMP threads, OpenBLAS held to one thread
// per call meanwhile (it counts its threads globally; the kernels' setting is put back after).
template <typename Part>
void on_threads(int parts, const Part& part) {
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(parts)
  part(omp_get_thread_num(), omp_get_num_threads());
  openblas_set_num_threads(g_threads.load());
}

// The kernel API's GEMM reading of a Gemm/MatMul problem; an operand of the wrong rank is unsupported.
GemmDesc desc_of(const Problem& p) {
  auto d = gemm_desc(p);
  if (!d) unsupported(d.error().message);
  return *d;
}

// The implementation's note for a _split case: how many one-thread calls, on which blocks of y.
std::string split_note(const Gemm& g, int parts) {
  if (parts == 0) return "";
  return fmt::format(", {} one-thread calls on {} blocks of y", parts, g.n >= g.m ? "column" : "row");
}

// Gemm: y = alpha · op(A) · op(B) + beta · C, with C broadcast into y first (part of the call).
// sgemm_split: C broadcast into y's rows by the threads, then one one-thread call per block of y
// (gemm_block).
class GemmKernel final : public BlasKernel {
 public:
  GemmKernel(Problem p, const std::string& algorithm)
      : BlasKernel(std::move(p)), parts_(split_threads(algorithm)) {
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
    impl_ = fmt::format("cblas_sgemm {}x{}x{}{}{}{}", g_.m, g_.n, g_.k, g_.ta ? " A^T" : "",
                        g_.tb ? " B^T" : "", split_note(g_, parts_));
  }
  void run() override {
    float* y = out_[0].data;
    if (parts_ == 0) {
      fill_c(y, 0, g_.m);
      g_(in_[0].data, in_[1].data, y);
      return;
    }
    on_threads(parts_, [&](int part, int parts) {
      fill_c(y, g_.m * part / parts, g_.m * (part + 1) / parts);
      if (g_.n >= g_.m) {
#pragma omp barrier  // a column block reads rows of C the other threads wrote
      }
      gemm_block(g_, in_[0].data, in_[1].data, y, part, parts);
    });
  }

 private:
  // Rows [r0, r1) of y := C broadcast (nothing without C).
  void fill_c(float* y, int64_t r0, int64_t r1) const {
    if (in_.size() <= 2) return;
    const float* c = in_[2].data;
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < g_.n; ++j)
        y[i * g_.n + j] = c[(c_rows_ == 1 ? 0 : i) * c_cols_ + (c_cols_ == 1 ? 0 : j)];
  }
  int parts_;  // sgemm_split: the threads; 0: one call
  Gemm g_;
  int64_t c_rows_ = 1, c_cols_ = 1;
};

// MatMul with NumPy batch broadcasting: one GEMM per output matrix ("sgemm_loop"), or, where b is
// 2-D, one GEMM with a's batch folded into M ("sgemm"). Their _split variants: the one GEMM in
// blocks, one per thread (gemm_block); the loop's matrices shared out among the threads, each
// matrix in blocks where there are fewer matrices than threads.
class MatMulKernel final : public BlasKernel {
 public:
  MatMulKernel(Problem p, const std::string& algorithm)
      : BlasKernel(std::move(p)),
        flat_(!algorithm.starts_with("sgemm_loop")),
        parts_(split_threads(algorithm)) {
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
      impl_ = fmt::format("cblas_sgemm {}x{}x{}{} (batch folded into M){}", g_.m, g_.n, g_.k,
                          g_.tb ? " B^T" : "", split_note(g_, parts_));
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
    impl_ = fmt::format("cblas_sgemm {}x{}x{}{}, {} calls{}", g_.m, g_.n, g_.k, g_.tb ? " B^T" : "", batches,
                        parts_ == 0         ? ""
                        : batches >= parts_ ? fmt::format(", shared out among {} threads", parts_)
                                            : split_note(g_, parts_));
  }
  void run() override {
    const float* a = in_[0].data;
    const float* b = in_[1].data;
    float* y = out_[0].data;
    const auto batches = static_cast<int64_t>(a_off_.size());
    auto matrix = [&](int64_t t) { return y + t * g_.m * g_.n; };
    if (parts_ == 0 && flat_) {
      g_(a, b, y);
    } else if (parts_ == 0) {
      for (int64_t t = 0; t < batches; ++t) g_(a + a_off_[t], b + b_off_[t], matrix(t));
    } else if (flat_) {
      on_threads(parts_, [&](int part, int parts) { gemm_block(g_, a, b, y, part, parts); });
    } else if (batches < parts_) {
      on_threads(parts_, [&](int part, int parts) {
        for (int64_t t = 0; t < batches; ++t)
          gemm_block(g_, a + a_off_[t], b + b_off_[t], matrix(t), part, parts);
      });
    } else {
      on_threads(parts_, [&](int part, int parts) {
        for (int64_t t = batches * part / parts; t < batches * (part + 1) / parts; ++t)
          g_(a + a_off_[t], b + b_off_[t], matrix(t));
      });
    }
  }

 private:
  bool flat_;
  int parts_;  // the _split variants: the threads; 0: the calls on OpenBLAS's own threads
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
        return std::unique_ptr<Kernel>(std::make_unique<GemmKernel>(spec.problem, alg));
      case LayerKind::kMatMul:
        if (spec.problem.inputs.at(0).shape.size() < 2 || spec.problem.inputs.at(1).shape.size() < 2)
          unsupported("MatMul with a 1-D operand is not mapped");
        return std::unique_ptr<Kernel>(std::make_unique<MatMulKernel>(spec.problem, alg));
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
