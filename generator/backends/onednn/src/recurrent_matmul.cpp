// LSTM, GRU and RNN as the standard formulation on oneDNN matmul (algorithm "matmul_standard"),
// planned beside oneDNN's RNN primitive: the skeleton and gate math both CPU backends share
// (floorline/kernels/standard_recurrent.hpp) with its two products as matmul primitives:
// - the input projection X·Wᵀ of every time step and direction, [T·N, I] × [I, D·G·H], one matmul;
// - per step and direction the recurrent product H(t-1)·Rᵀ, M = the batch, accumulated onto the
//   step's rows of the projection by a sum post-op (GRU: written into a row of its own).
// W and R are reordered once, when the case is built and outside timing, into the layout the
// primitive picks (format any: brgemm's blocked weights), as frameworks pack weights when they load
// them. On lstm_lm's LSTM (35 steps, 1×1024×256, AVX-512, 1 thread) oneDNN's matmul took 38 µs for
// the projection where cblas_sgemm took 220, and 219 µs for the 35 products where cblas_sgemv took
// 393 (2026-11-24).
#include "floorline/kernels/standard_recurrent.hpp"
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {
namespace {

// One matmul: src [M, K] plain (rows lds apart), weights B [K, Ncols] given as the plain rows of
// Bᵀ [Ncols, K] and packed once, dst [M, Ncols] (rows ldd apart), optionally accumulated.
struct PackedMatmul {
  dnnl::matmul prim;
  memory src, weights, dst;
  std::string impl;

  PackedMatmul(int64_t M, int64_t K, int64_t cols, const float* bt, int64_t ldd, bool accumulate) {
    const memory::desc src_md({M, K}, dt::f32, dims{K, 1});
    const memory::desc wei_any({K, cols}, dt::f32, memory::format_tag::any);
    const memory::desc dst_md({M, cols}, dt::f32, dims{ldd, 1});
    primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    const dnnl::matmul::desc d(src_md, wei_any, dst_md);
    const dnnl::matmul::primitive_desc pd(d, attr, cpu_engine());
    impl = pd.impl_info_str();
    prim = dnnl::matmul(pd);
    // Bᵀ's rows are B's columns: B [K, cols] with strides (1, K).
    memory plain(memory::desc({K, cols}, dt::f32, dims{1, K}), cpu_engine(), const_cast<float*>(bt));
    weights = memory(pd.weights_desc(), cpu_engine());
    dnnl::reorder(plain, weights).execute(cpu_stream(), plain, weights);
    cpu_stream().wait();
    src = memory(pd.src_desc(), cpu_engine(), nullptr);
    dst = memory(pd.dst_desc(), cpu_engine(), nullptr);
  }

  void operator()(const float* a, float* y) {
    src.set_data_handle(const_cast<float*>(a));
    dst.set_data_handle(y);
    prim.execute(cpu_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    cpu_stream().wait();
  }
};

class MatmulRecurrent final : public StandardRecurrent {
 public:
  explicit MatmulRecurrent(Problem p) : StandardRecurrent(std::move(p)) {
    projection_.emplace_back(T_ * N_, I_, D_ * G_ * H_, input_weights(), D_ * G_ * H_, false);
    for (const Product& pr : products())
      step_.emplace_back(N_, H_, pr.rows, recurrent_weights(pr.d) + pr.row0 * H_, pr.ldy, pr.accumulate);
    impl_ = describe(fmt::format("matmul {}", projection_[0].impl), fmt::format("matmul {}", step_[0].impl));
  }

 private:
  void project(const float* x, float* xw) override { projection_[0](x, xw); }
  void multiply(size_t k, const float* h, float* y) override { step_[k](h, y); }

  std::vector<PackedMatmul> projection_, step_;
};

}  // namespace

std::string recurrent_matmul_name(const Problem& p) {
  const bool recurrent =
      p.kind == LayerKind::kLSTM || p.kind == LayerKind::kGRU || p.kind == LayerKind::kRNN;
  return recurrent && p.input_index("sequence_lens") < 0 ? "matmul_standard" : "";
}

Result<std::unique_ptr<Kernel>> make_recurrent_matmul(const CaseSpec& spec) {
  if (recurrent_matmul_name(spec.problem).empty())
    return make_error(Disposition::kUnsupported, "matmul_standard runs LSTM, GRU and RNN without sequence_lens");
  if (spec.variant.dtype != DType::kF32)
    return make_error(Disposition::kUnsupported, "matmul_standard runs f32, not {}", dtype_name(spec.variant.dtype));
  if (!spec.problem.post_ops.empty())
    return make_error(Disposition::kUnsupported, "matmul_standard fuses no epilogue");
  const PlacementScope placement(spec.placement);
  try {
    return std::unique_ptr<Kernel>(std::make_unique<MatmulRecurrent>(spec.problem));
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

}  // namespace floorline::kernels::onednn_detail
