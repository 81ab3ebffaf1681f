// LSTM, GRU and RNN as the standard formulation on oneDNN matmul, planned beside oneDNN's RNN
// primitive: the skeleton and gate math both CPU backends share
// (floorline/kernels/standard_recurrent.hpp) with its two products as matmul primitives:
// - the input projection X·Wᵀ of every time step and direction, [T·N, I] × [I, D·G·H], one matmul;
// - per step the recurrent product H(t-1)·Rᵀ, M = the batch, into a row of its own that the gate
//   math adds: "matmul_standard" one 2-D matmul per direction, "matmul_standard_batched"
//   (bidirectional layers) one matmul batched over the two directions, which run in lockstep.
// W and R are reordered once, when the case is built and outside timing, into the layout the
// primitive picks (format any), as frameworks pack weights when they load them. oneDNN 2.6's brgemm
// matmul packs 2-D weights into blocks (BA16a64b) but keeps batched (3-D) ones plain and copies them
// into blocks on every call: the batched form saves a call per step (gru_kws's GRUs, R 192×64:
// 63-77 µs where one call per direction took 74-88), the per-direction one wins with large weights.
// Each is offered with every implementation oneDNN has for the per-step product
// ("matmul_standard:brg:avx512_core", "matmul_standard:gemm:jit"), the projection taking oneDNN's
// first. On lstm_lm's LSTM (AVX-512, 1 thread) oneDNN's matmul took 38 µs for the projection where
// cblas_sgemm took 220 (2026-11-24).
#include "floorline/kernels/standard_recurrent.hpp"
#include "internal.hpp"

#include <unordered_map>

namespace floorline::kernels::onednn_detail {
namespace {

constexpr std::string_view kPerDirection = "matmul_standard";
constexpr std::string_view kBatched = "matmul_standard_batched";

// One matmul, batched over B (the directions): src [B, M, K] plain, weights [B, K, cols] given as
// the plain rows of each batch's Bᵀ [cols, K] (bt_stride floats apart) and packed once, dst
// [B, M, cols] with rows ldd apart. 2-D where B is 1. The impl_index-th implementation.
dnnl::matmul::primitive_desc matmul_pd(int64_t B, int64_t M, int64_t K, int64_t cols, int64_t ldd,
                                       int impl_index) {
  const bool flat = B == 1;
  const memory::desc src(flat ? dims{M, K} : dims{B, M, K}, dt::f32, flat ? dims{K, 1} : dims{M * K, K, 1});
  const memory::desc wei(flat ? dims{K, cols} : dims{B, K, cols}, dt::f32, memory::format_tag::any);
  const memory::desc dst(flat ? dims{M, cols} : dims{B, M, cols}, dt::f32,
                         flat ? dims{ldd, 1} : dims{M * ldd, ldd, 1});
  // (The iterator keeps a pointer to the operation descriptor: it must outlive next_impl(), below.)
  const dnnl::matmul::desc d(src, wei, dst);
  dnnl::matmul::primitive_desc pd(d, cpu_engine());
  for (int k = 0; k < impl_index; ++k)
    if (!pd.next_impl())  // the plan's implementation is gone (another oneDNN): skipped, not final
      throw KernelError(Disposition::kSkipped,
                        fmt::format("oneDNN now offers only {} implementation(s) of this matmul", k + 1));
  return pd;  // (never iterated again)
}

struct PackedMatmul {
  dnnl::matmul prim;
  memory src, weights, dst;
  std::unordered_map<int, memory> args;  // made once: a map per call costs more than a small product
  std::string impl;

  PackedMatmul(int64_t B, int64_t M, int64_t K, int64_t cols, const float* bt, int64_t bt_stride, int64_t ldd,
               int impl_index) {
    const auto pd = matmul_pd(B, M, K, cols, ldd, impl_index);
    impl = pd.impl_info_str();
    prim = dnnl::matmul(pd);
    // Bᵀ's rows are B's columns: B [K, cols] with strides (1, K).
    const bool flat = B == 1;
    memory plain(memory::desc(flat ? dims{K, cols} : dims{B, K, cols}, dt::f32,
                              flat ? dims{1, K} : dims{bt_stride, 1, K}),
                 cpu_engine(), const_cast<float*>(bt));
    weights = memory(pd.weights_desc(), cpu_engine());
    dnnl::reorder(plain, weights).execute(cpu_stream(), plain, weights);
    cpu_stream().wait();
    src = memory(pd.src_desc(), cpu_engine(), nullptr);
    dst = memory(pd.dst_desc(), cpu_engine(), nullptr);
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  }

  void operator()(const float* a, float* y) {
    src.set_data_handle(const_cast<float*>(a));
    dst.set_data_handle(y);
    prim.execute(cpu_stream(), args);
    // The gate math reads y next. oneDNN's CPU execution is synchronous (its stream's wait() returns
    // at once) except on a threadpool runtime.
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_THREADPOOL
    cpu_stream().wait();
#endif
  }
};

class MatmulRecurrent final : public StandardRecurrent {
 public:
  MatmulRecurrent(Problem p, bool batched, int impl_index)
      : StandardRecurrent(std::move(p)), batched_(batched && D_ > 1) {
    if (batched && D_ == 1) unsupported(std::string(kBatched) + " is for bidirectional layers");
    const int64_t GH = G_ * H_;
    projection_.emplace_back(1, T_ * N_, I_, D_ * GH, input_weights(), 0, D_ * GH, 0);
    for (const Product& pr : products()) {
      if (batched_) {
        step_.emplace_back(D_, N_, H_, pr.rows, recurrent_weights(0) + pr.row0 * H_, GH * H_, GH, impl_index);
        continue;
      }
      for (int64_t d = 0; d < D_; ++d)
        step_.emplace_back(1, N_, H_, pr.rows, recurrent_weights(d) + pr.row0 * H_, 0, GH, impl_index);
    }
    impl_ = describe(fmt::format("matmul {}", projection_[0].impl),
                     fmt::format("{}matmul {}", batched_ ? "batched " : "", step_[0].impl));
  }
  const std::string& step_impl() const { return step_[0].impl; }

 private:
  void project(const float* x, float* xw) override { projection_[0](x, xw); }
  void multiply(size_t k, const float* h, float* y) override {
    if (batched_) {
      step_[k](h, y);
      return;
    }
    for (int64_t d = 0; d < D_; ++d)
      step_[k * static_cast<size_t>(D_) + static_cast<size_t>(d)](h + d * N_ * H_, y + d * N_ * G_ * H_);
  }

  bool batched_ = false;
  std::vector<PackedMatmul> projection_, step_;
};

bool recurrent(const Problem& p) {
  return standard_recurrent_kind(p.kind) && p.input_index("sequence_lens") < 0;
}

// The kernel, or the error (coded unsupported where it does not run the case).
Result<std::unique_ptr<MatmulRecurrent>> build_kernel(const CaseSpec& spec, bool batched, int impl_index) {
  if (!recurrent(spec.problem))
    return make_error(Disposition::kUnsupported, "{} runs LSTM, GRU and RNN without sequence_lens",
                      kPerDirection);
  if (spec.variant.dtype != DType::kF32)
    return make_error(Disposition::kUnsupported, "{} runs f32, not {}", kPerDirection,
                      dtype_name(spec.variant.dtype));
  if (!spec.problem.post_ops.empty())
    return make_error(Disposition::kUnsupported, "{} fuses no epilogue", kPerDirection);
  const PlacementScope placement(spec.placement);
  try {
    return std::make_unique<MatmulRecurrent>(spec.problem, batched, impl_index);
  } catch (const KernelError& e) {
    return make_error(e.code, "{}", e.what());
  } catch (const MissingAttribute& e) {
    return make_error("{}", e.what());
  } catch (const dnnl::error& e) {
    return make_error(Disposition::kUnsupported, "oneDNN: {}", e.what());
  } catch (const std::bad_alloc&) {
    return make_error(Disposition::kSkipped, "out of memory allocating the tensors of {}", spec.problem.key);
  }
}

}  // namespace

bool is_recurrent_matmul(const std::string& variant) {
  return variant == kPerDirection || variant == kBatched;
}

Result<std::unique_ptr<Kernel>> make_recurrent_matmul(const CaseSpec& spec, const std::string& variant) {
  FL_ASSIGN_OR_RETURN(auto k, build_kernel(spec, variant == kBatched, spec.impl_index));
  if (!spec.impl_name.empty() && k->step_impl() != spec.impl_name)
    return make_error(Disposition::kSkipped, "implementation {} of {} is now {}, not {} as planned",
                      spec.impl_index, variant, k->step_impl(), spec.impl_name);
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::vector<Implementation>> recurrent_matmul_implementations(const CaseSpec& spec) {
  std::vector<Implementation> out;
  std::optional<Error> first_error;
  for (const std::string_view variant : {kPerDirection, kBatched}) {
    // The per-step product's implementations, in next_impl() order, each built once to check it.
    for (int index = 0;; ++index) {
      auto k = build_kernel(spec, variant == kBatched, index);
      if (!k.ok()) {
        if (index == 0 && !first_error) first_error = k.error();
        break;
      }
      Implementation im;
      im.impl_name = (*k)->step_impl();
      im.algorithm = fmt::format("{}:{}", variant, im.impl_name);
      im.variant = std::string(variant);
      im.impl_index = index;
      im.reference = is_reference_implementation(im.impl_name);
      out.push_back(std::move(im));
    }
  }
  if (out.empty())
    return first_error ? *first_error : make_error(Disposition::kUnsupported, "no implementation");
  return out;
}

}  // namespace floorline::kernels::onednn_detail
