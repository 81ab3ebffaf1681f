// The CUDA backend's plan: which cases each problem gets, decided without a device.
#include <algorithm>
#include <climits>
#include <set>

#include <fmt/format.h>

#include "cuda_internal.hpp"
#include "floorline/kernels/cuda.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

namespace {

// The library a CUDA algorithm group calls: "cudnn_conv" → cuDNN, "cublaslt_matmul" → cuBLASLt.
std::string library_of(const std::string& group) {
  if (group.rfind("cudnn", 0) == 0) return "cudnn";
  if (group.rfind("cublaslt", 0) == 0) return "cublaslt";
  if (group.rfind("cublas", 0) == 0) return "cublas";
  return std::string(kOwnBackend);  // our own kernels (common/case_id.hpp)
}

// A case of `base`: its variant with the algorithm "<group>[:<detail>]", math mode and layout
// chosen.
CudaCase make(const CaseSpec& base, std::string group, const std::string& detail, MathMode mode,
              std::string layout = "") {
  CudaCase c;
  c.variant = base.variant;
  c.variant.algorithm = detail.empty() ? group : group + ":" + detail;
  c.variant.math_mode = mode;
  c.variant.layout = std::move(layout);
  c.library = library_of(group);
  c.group = std::move(group);
  return c;
}
CudaCase make(const CaseSpec& base, std::string group, MathMode mode, std::string layout = "") {
  return make(base, std::move(group), "", mode, std::move(layout));
}

CudaCase unsupported_case(const CaseSpec& base, std::string why) {
  CudaCase c = make(base, "none", base.variant.math_mode);
  c.status = Disposition::kUnsupported;
  c.reason = std::move(why);
  return c;
}

std::string post_op_names(const Problem& p) {
  std::string s;
  for (const auto& po : p.post_ops) s += (s.empty() ? "" : "+") + po.op;
  return s;
}

// Conv: every legacy algorithm in NCHW and NHWC and each math mode, the heuristic's and Find's
// choices, the fused conv+bias+activation per algorithm, and the NCHW↔NHWC conversions.
void conv_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  auto g = conv_geometry(base.problem);
  if (!g) {
    out.push_back(unsupported_case(base, g.error().message));
    return;
  }
  const Problem& p = base.problem;
  const std::string post = post_op_names(p);
  const bool fused = !p.post_ops.empty();
  if (fused && post != "Relu" && post != "Add" && post != "Add+Relu") {
    out.push_back(unsupported_case(
        base,
        fmt::format("cudnnConvolutionBiasActivationForward fuses ReLU or identity after an optional residual "
                    "Add, not {}",
                    post)));
    return;
  }
  const bool bias = p.input("bias") != nullptr;
  const std::string pad_suffix = g->explicit_pad ? ":padded" : "";
  const bool relu = post.find("Relu") != std::string::npos;
  for (const std::string layout : {"", "nhwc"})
    for (const auto& mode : floorline::math_modes(base.variant.dtype, true)) {
      // NHWC where it changes the algorithm set: with Tensor Core math (tf32, f16, bf16).
      if (!layout.empty() && mode == MathMode::kFp32) continue;
      if (!fused) {
        CudaCase h = make(base, "cudnn_conv", "heuristic" + pad_suffix, mode, layout);
        h.is_default = layout.empty();  // a framework's default: NCHW, the heuristic's first choice
        out.push_back(h);
        out.push_back(make(base, "cudnn_conv", "find" + pad_suffix, mode, layout));
        for (const auto& a : cudnn_conv_algorithms())
          out.push_back(make(base, "cudnn_conv", a + pad_suffix, mode, layout));
        // Conv with its bias through the fused call and the identity activation, which cuDNN runs
        // with IMPLICIT_PRECOMP_GEMM only (its documentation): one more way to compute the layer.
        if (bias)
          out.push_back(
              make(base, "cudnn_conv_bias_act", "IMPLICIT_PRECOMP_GEMM" + pad_suffix, mode, layout));
      } else {
        // y = act(conv(x) + z + bias): every algorithm with ReLU; identity (a residual Add alone)
        // with IMPLICIT_PRECOMP_GEMM only.
        for (const auto& a : cudnn_conv_algorithms())
          if (relu || a == "IMPLICIT_PRECOMP_GEMM")
            out.push_back(make(base, "cudnn_conv_bias_act", a + pad_suffix, mode, layout));
      }
      if (!layout.empty() && !fused) {
        for (const LayoutConversion& conv :
             {LayoutConversion{"src", "nchw", "nhwc"}, LayoutConversion{"dst", "nhwc", "nchw"}})
          out.push_back(conversion_case(base, "cudnn_transform", mode, conv, CaseFeeds{"", layout}, "cudnn"));
      }
    }
}

// MatMul/Gemm as (batched) row-major GEMM (the kernel API's gemm_desc): a batch-free b folds a's
// batch dims into M; strided-batched GEMM takes a whole-operand broadcast of a only.
Result<GemmDesc> gemm_shape(const Problem& p) {
  FL_ASSIGN_OR_RETURN(GemmDesc g, gemm_desc(p));
  if (p.kind == LayerKind::kMatMul && g.tb)
    return make_error(
        "MatMul with a transposed right operand (transB) is not mapped until verified on a GPU");
  if (!g.folded && ((g.a_batch != g.batch && g.a_batch != 1) || g.b_batch != g.batch))
    return make_error("MatMul broadcasting other than a whole operand is not mapped to strided-batched GEMM");
  return g;
}

void gemm_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  auto g = gemm_shape(p);
  if (!g) {
    out.push_back(unsupported_case(base, g.error().message));
    return;
  }
  const std::string post = post_op_names(p);
  const bool fused = !p.post_ops.empty();
  if (fused && !lt_epilogue_for(p)) {
    out.push_back(unsupported_case(
        base,
        fmt::format("cuBLASLt epilogues fuse a bias, ReLU or GELU (after an optional residual Add), not {}",
                    post)));
    return;
  }
  const Operand* c = p.kind == LayerKind::kGemm && p.inputs.size() > 2 ? &p.inputs[2] : nullptr;
  for (const auto& mode : floorline::math_modes(base.variant.dtype, true)) {
    if (!fused) {
      CudaCase d = make(base, !g->folded ? "cublas_gemm_strided_batched" : "cublas_gemm", mode);
      d.is_default = true;  // cuBLAS's own heuristic (CUBLAS_GEMM_DEFAULT): what a framework calls
      out.push_back(d);
      if ((g->m == 1 || g->n == 1) && g->folded) {
        CudaCase v = make(base, "cublas_gemv", mode);
        if (mode != MathMode::kFp32) {
          v.status = Disposition::kUnsupported;
          v.reason = "cublasSgemv is f32 without Tensor Cores only";
        }
        out.push_back(v);
      }
    }
    for (int k = 0; k < kLtAlgorithms; ++k) {
      CudaCase lt = make(base, "cublaslt_matmul", std::to_string(k), mode);
      if (c && c->shape.size() == 2 && c->shape != p.outputs[0].shape) {
        lt.status = Disposition::kUnsupported;
        lt.reason = "a Gemm C broadcast along M is not a cuBLASLt bias (a vector of N) nor a full matrix";
      }
      out.push_back(lt);
    }
  }
}

// Unary ops: cuDNN's activation where it has the function, and our element-wise kernel.
void unary_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  if (!unary_op_for(p.kind)) {
    out.push_back(unsupported_case(base, fmt::format("no CUDA kernel for {}", p.op)));
    return;
  }
  if (p.kind == LayerKind::kPow && p.floats.count("y") == 0) {
    out.push_back(unsupported_case(base, "Pow with a run-time (non-constant) exponent"));
    return;
  }
  const MathMode mode = own_math_mode(base.variant.dtype);
  static const std::set<LayerKind> kCudnn = {LayerKind::kRelu, LayerKind::kSigmoid, LayerKind::kTanh,
                                             LayerKind::kElu, LayerKind::kClip};
  if (kCudnn.count(p.kind)) {
    CudaCase c = make(base, "cudnn_activation", mode);
    c.is_default = true;
    if (p.kind == LayerKind::kClip && (p.float_attr("min", -1) != 0.0 || p.inputs.size() > 1)) {
      c.status = Disposition::kUnsupported;
      c.reason = "cuDNN's clipped ReLU clips to [0, max]; this Clip's minimum is not 0";
      c.is_default = false;
    }
    out.push_back(c);
  }
  CudaCase own = make(base, "floorline-kernel", "eltwise", mode);
  own.is_default = !kCudnn.count(p.kind) || out.back().status == Disposition::kUnsupported;
  out.push_back(own);
}

// Whether `small` broadcasts to `big` dimension by dimension (right-aligned, equal or 1).
bool broadcasts_to(Shape small, const Shape& big) {
  if (small.size() > big.size()) return false;
  while (small.size() < big.size()) small.insert(small.begin(), 1);
  for (size_t k = 0; k < big.size(); ++k)
    if (small[k] != big[k] && small[k] != 1) return false;
  return true;
}

void binary_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  if (!binary_op_for(p.kind) || p.inputs.size() != 2) {
    out.push_back(unsupported_case(base, fmt::format("no CUDA kernel for {}", p.op)));
    return;
  }
  const MathMode mode = own_math_mode(base.variant.dtype);
  const Shape& y = p.outputs.at(0).shape;
  const Shape& a = p.inputs[0].shape;
  const Shape& b = p.inputs[1].shape;
  const LayerKind k = p.kind;
  const bool library_op = k == LayerKind::kAdd || k == LayerKind::kSub || k == LayerKind::kMul ||
                          k == LayerKind::kMax || k == LayerKind::kMin;
  // cudnnOpTensor: C = op(A, B) with A of C's shape and B broadcast, up to 5-D (Sub as A + (-1)·B).
  const bool a_full = a == y, b_full = b == y;
  bool first = true;
  if (library_op && y.size() <= 5 && ((a_full && broadcasts_to(b, y)) || (b_full && broadcasts_to(a, y)))) {
    if (k != LayerKind::kSub || a_full) {
      CudaCase c = make(base, "cudnn_op_tensor", mode);
      c.is_default = first;
      first = false;
      out.push_back(c);
    }
    // cudnnAddTensor: C += bias, a vector along dimension 1 (per channel), in place.
    const Shape& other = a_full ? b : a;
    Shape padded = other;
    while (padded.size() < y.size()) padded.insert(padded.begin(), 1);
    if (k == LayerKind::kAdd && y.size() >= 4 && y.size() <= 5 && padded.size() == y.size() &&
        elements(padded) == y[1] && padded[1] == y[1])
      out.push_back(make(base, "cudnn_add_tensor", mode));
  }
  CudaCase own = make(base, "floorline-kernel", "binary", mode);
  own.is_default = first;
  out.push_back(own);
}

// cudnnReduceTensor on f32 and f16 tensors: with bf16 ones it answers CUDNN_STATUS_NOT_SUPPORTED at
// run time (cuDNN 9.19 on an H100), so a bf16 reduction is unsupported from the plan on.
CudaCase cudnn_reduce_case(const CaseSpec& base, MathMode mode) {
  CudaCase c = make(base, "cudnn_reduce", mode);
  if (base.variant.dtype == DType::kBF16) {
    c.status = Disposition::kUnsupported;
    c.reason = "cudnnReduceTensor has no bf16 tensors (CUDNN_STATUS_NOT_SUPPORTED)";
  }
  return c;
}

void pooling_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  const MathMode mode = own_math_mode(base.variant.dtype);
  const Shape& x = p.inputs.at(0).shape;
  if (x.size() < 3 || x.size() > 5) {
    out.push_back(unsupported_case(base, fmt::format("pooling over a rank-{} tensor", x.size())));
    return;
  }
  const bool global = p.kind == LayerKind::kGlobalAveragePool || p.kind == LayerKind::kGlobalMaxPool;
  std::string why_not;
  if (!global) {
    const size_t n = x.size() - 2;
    auto pads = p.ints_attr("pads");
    pads.resize(2 * n, 0);
    auto dil = p.ints_attr("dil");
    for (size_t k = 0; k < n; ++k)
      if (pads[k] != pads[k + n]) why_not = "cuDNN pads symmetrically; these pads differ at the two ends";
    for (auto d : dil)
      if (d != 1) why_not = "cuDNN pooling has no dilation";
    auto kernel = p.ints_attr("kernel"), strides = p.ints_attr("strides");
    strides.resize(n, 1);
    for (size_t k = 0; k < n && why_not.empty() && k < kernel.size(); ++k) {
      const int64_t floor_out = (x[2 + k] + 2 * pads[k] - kernel[k]) / strides[k] + 1;
      if (floor_out != p.outputs.at(0).shape[2 + k]) why_not = "ceil_mode output sizes: cuDNN rounds down";
    }
  }
  for (const std::string layout : {"", "nhwc"}) {
    CudaCase c = make(base, "cudnn_pooling", mode, layout);
    c.is_default = layout.empty() && why_not.empty();
    if (!why_not.empty()) {
      c.status = Disposition::kUnsupported;
      c.reason = why_not;
    }
    out.push_back(c);
  }
  if (global) out.push_back(cudnn_reduce_case(base, mode));
  CudaCase own = make(base, "floorline-kernel", "pooling", mode);
  own.is_default = !why_not.empty();
  out.push_back(own);
}

// A case per algorithm for kinds that map onto one library call (or one kernel of ours).
void single(const CaseSpec& base, std::vector<CudaCase>& out, std::string group,
            const std::string& detail = "", std::string layout = "") {
  CudaCase c =
      make(base, std::move(group), detail, math_modes(base.variant.dtype, false)[0], std::move(layout));
  c.is_default = out.empty();
  out.push_back(c);
}

void batch_norm_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  if (p.inputs.size() < 5 || p.inputs[0].shape.size() < 3 || p.inputs[0].shape.size() > 5) {
    out.push_back(
        unsupported_case(base, "BatchNormalization needs scale, B, mean and var and a 3-D to 5-D x"));
  } else {
    single(base, out, "cudnn_batchnorm_inference");
    single(base, out, "cudnn_batchnorm_inference", "", "nhwc");
  }
}
void lrn_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  const int64_t size = p.int_attr("size");
  if (size < 1 || size > 16 || p.inputs[0].shape.size() < 3)
    out.push_back(unsupported_case(base, "cuDNN's LRN window is 1 to 16 channels"));
  else
    single(base, out, "cudnn_lrn");
}
void softmax_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  single(base, out, "cudnn_softmax");
}
void reduce_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  if (base.problem.inputs[0].shape.size() > 8)
    out.push_back(unsupported_case(base, "cuDNN reduces tensors of rank 8 or less"));
  else {
    CudaCase c = cudnn_reduce_case(base, math_modes(base.variant.dtype, false)[0]);
    c.is_default = out.empty();
    out.push_back(c);
  }
}
void transpose_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  if (base.problem.inputs[0].shape.size() <= 8) single(base, out, "cudnn_transform");
  single(base, out, "floorline-kernel", "copy");
}
void copy_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  single(base, out, "floorline-kernel", "copy");
}
void pad_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  if (base.problem.string_attr("mode") != "constant")
    out.push_back(unsupported_case(base, "Pad modes other than constant"));
  else
    single(base, out, "floorline-kernel", "copy");
}
void gather_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  if (base.problem.inputs.size() < 2)
    out.push_back(unsupported_case(base, "Gather needs its indices"));
  else
    single(base, out, "floorline-kernel", "gather");
}
void resize_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  const std::string m = p.string_attr("mode");
  const Shape& x = p.inputs[0].shape;
  const Shape& y = p.outputs[0].shape;
  if ((m != "nearest" && m != "linear") || x.size() < 3 || x.size() > 5 || x[0] != y[0] || x[1] != y[1])
    out.push_back(unsupported_case(
        base, "Resize other than nearest or linear over the spatial dims of a 3-D to 5-D tensor"));
  else
    single(base, out, "floorline-kernel", "resize");
}
// LSTM/GRU/RNN: cudnnRNNForward; what cuDNN cannot run is said at planning time.
void rnn_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  if (p.int_attr("layout") != 0)
    out.push_back(unsupported_case(base, "layout 1 (batch first) is not mapped"));
  else if (p.string_attr("direction") == "reverse")
    out.push_back(unsupported_case(base, "cuDNN runs one direction forward only"));
  else if (p.kind == LayerKind::kGRU && p.int_attr("linear_before_reset") == 0)
    out.push_back(unsupported_case(base, "cuDNN's GRU is ONNX's linear_before_reset = 1 form only"));
  else
    single(base, out, "cudnn_rnn");
}
void layer_norm_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  single(base, out, "floorline-kernel", "layer_norm");
}

// --- int8 ----------------------------------------------------------------------------------------
// An int8 (QDQ) Conv: cuDNN's int8 convolution (int8.cpp), NHWC int8 activations and filter (the
// layer's input is the previous int8 layer's NHWC output: no layout conversion is charged), int32
// accumulation, one output scale, no zero points. cuDNN's INT8 configuration wants input and output
// channels in multiples of 4; 3-D, grouped and asymmetrically padded int8 convolutions are not mapped.
void int8_conv_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  auto g = conv_geometry(p);
  if (!g) {
    out.push_back(unsupported_case(base, g.error().message));
    return;
  }
  std::string why;
  if (g->x.size() != 4)
    why = "cuDNN int8 convolutions are mapped in 2-D (NHWC) only";
  else if (g->groups != 1)
    why = fmt::format("grouped int8 convolutions (group = {}) are not mapped", g->groups);
  else if (g->explicit_pad)
    why = "asymmetric padding in int8 is not mapped (the explicit pad copy runs on f32, f16 and bf16)";
  else if (g->x[1] % 4 != 0 || g->y[1] % 4 != 0)
    why = fmt::format(
        "cuDNN int8 convolutions (CUDNN_DATA_INT8, NHWC) need input and output channels in multiples of 4 "
        "(C = {}, K = {})",
        g->x[1], g->y[1]);
  if (!why.empty()) {
    out.push_back(unsupported_case(base, why));
    return;
  }
  const MathMode mode = own_math_mode(base.variant.dtype);
  if (p.input("bias")) {
    // The bias through the fused call with the identity activation, which cuDNN runs with
    // IMPLICIT_PRECOMP_GEMM only (its documentation).
    CudaCase c = make(base, "cudnn_conv_bias_act", "IMPLICIT_PRECOMP_GEMM", mode, "nhwc");
    c.is_default = true;
    out.push_back(c);
    return;
  }
  CudaCase h = make(base, "cudnn_conv", "heuristic", mode, "nhwc");
  h.is_default = true;
  out.push_back(h);
  out.push_back(make(base, "cudnn_conv", "find", mode, "nhwc"));
  for (const auto& a : cudnn_conv_algorithms()) out.push_back(make(base, "cudnn_conv", a, mode, "nhwc"));
}

// An int8 Gemm/MatMul: cuBLASLt's int8 matmul (IMMA), the heuristic's first kLtAlgorithms, "TN" with
// the weight held N×K (as a runtime lays out a constant weight), K and N in multiples of 4.
void int8_gemm_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  auto g = gemm_shape(p);
  if (!g) {
    out.push_back(unsupported_case(base, g.error().message));
    return;
  }
  std::string why;
  const Operand* c = p.kind == LayerKind::kGemm && p.inputs.size() > 2 ? &p.inputs[2] : nullptr;
  if (!g->folded)
    why =
        "int8 MatMul with batch dims on both operands is not mapped (cuBLASLt's int8 B is a weight held N×K)";
  else if (p.kind == LayerKind::kGemm && p.int_attr("transA") != 0)
    why = "int8 Gemm with transA is not mapped (cuBLASLt's int8 GEMM is TN: a is read M×K)";
  else if (c && (c->shape.empty() || c->shape.back() != g->n || elements(c->shape) != g->n))
    why = "an int8 Gemm's C other than a bias vector of N is not mapped";
  else if (g->k % 4 != 0 || g->n % 4 != 0)
    why = fmt::format("cuBLASLt int8 (IMMA) needs K and N in multiples of 4 (K = {}, N = {})", g->k, g->n);
  if (!why.empty()) {
    out.push_back(unsupported_case(base, why));
    return;
  }
  const MathMode mode = own_math_mode(base.variant.dtype);
  for (int k = 0; k < kLtAlgorithms; ++k) {
    CudaCase lt = make(base, "cublaslt_matmul", std::to_string(k), mode);
    lt.is_default = k == 0;
    out.push_back(lt);
  }
}

void int8_cases(const CaseSpec& base, std::vector<CudaCase>& out) {
  const Problem& p = base.problem;
  const bool conv = p.kind == LayerKind::kConv;
  const bool gemm = p.kind == LayerKind::kGemm || p.kind == LayerKind::kMatMul;
  if (!conv && !gemm) {
    out.push_back(unsupported_case(
        base, fmt::format("{}: no int8 form in the CUDA backend (int8 Conv, Gemm and MatMul only)", p.op)));
    return;
  }
  if (!quantization(p)) {
    out.push_back(unsupported_case(
        base, fmt::format("{}: unreadable quantization '{}'", p.op, p.string_attr("qtypes", ""))));
    return;
  }
  if (!p.post_ops.empty()) {
    out.push_back(unsupported_case(base, "Floorline fuses no epilogue into an int8 case"));
    return;
  }
  if (conv)
    int8_conv_cases(base, out);
  else
    int8_gemm_cases(base, out);
}

using Planner = void (*)(const CaseSpec&, std::vector<CudaCase>&);
struct CudaRow {
  Planner plan = nullptr;
  std::string_view mapping;  // the library calls and kernels of ours it plans
  std::string_view reason;   // not mapped: why
};

constexpr std::string_view kNoKernel =
    "not mapped: no cuDNN or cuBLAS call and no Floorline CUDA kernel for it";

// The CUDA kind table: for every kind, its planner and what it maps to, or why it is not mapped.
// A switch with no default: a kind added to layer_kind.hpp and left out here does not compile.
CudaRow cuda_row(LayerKind k) {
  using K = LayerKind;
  switch (k) {
    case K::kConv:
      return {
          conv_cases, "cudnnConvolutionForward (every algorithm), cudnnConvolutionBiasActivationForward", {}};
    case K::kConvTranspose:
      return {nullptr, {}, kNoKernel};
    case K::kGemm:
    case K::kMatMul:
      return {gemm_cases, "cublasGemmEx, cublasGemmStridedBatchedEx, cublasSgemv, cublasLtMatmul", {}};
    case K::kBatchNormalization:
      return {batch_norm_cases, "cudnnBatchNormalizationForwardInference", {}};
    case K::kLayerNormalization:
      return {layer_norm_cases, "floorline-kernel:layer_norm", {}};
    case K::kInstanceNormalization:
      return {nullptr, {}, kNoKernel};
    case K::kLRN:
      return {lrn_cases, "cudnnLRNCrossChannelForward", {}};
    case K::kRelu:
    case K::kSigmoid:
    case K::kTanh:
    case K::kElu:
    case K::kClip:
      return {unary_cases, "cudnnActivationForward, floorline-kernel:eltwise", {}};
    case K::kLeakyRelu:
    case K::kSelu:
    case K::kHardSigmoid:
    case K::kHardSwish:
    case K::kSoftplus:
    case K::kErf:
    case K::kExp:
    case K::kLog:
    case K::kSqrt:
    case K::kReciprocal:
    case K::kNeg:
    case K::kAbs:
    case K::kPow:
    case K::kGelu:  // cuDNN's legacy activations have no GELU
      return {unary_cases, "floorline-kernel:eltwise", {}};
    case K::kFloor:
    case K::kCeil:
    case K::kNot:
    case K::kCast:
      return {nullptr, {}, kNoKernel};
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kMax:
    case K::kMin:
      return {binary_cases, "cudnnOpTensor, cudnnAddTensor, floorline-kernel:binary", {}};
    case K::kDiv:
    case K::kPRelu:
      return {binary_cases, "floorline-kernel:binary", {}};
    case K::kMod:
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kAnd:
    case K::kOr:
    case K::kWhere:
      return {nullptr, {}, kNoKernel};
    case K::kSum:
      return {nullptr,
              {},
              "not mapped: no variadic add kernel yet (a chain of binary adds would time N-1 passes)"};
    // --- comparisons, logic and reductions
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
    case K::kXor:
    case K::kCumSum:
    case K::kArgMax:
    case K::kArgMin:
      return {nullptr, {}, kNoKernel};
    // --- detection heads; cuDNN and cuBLAS have no top-k, gather-ND or NMS
    case K::kTopK:
    case K::kGatherND:
    case K::kNonZero:
    case K::kNonMaxSuppression:
    case K::kRoiAlign:  // no roi-align, grid-sample or scatter in cuDNN/cuBLAS
    case K::kScatterElements:
    case K::kGridSample:
      return {nullptr, {}, kNoKernel};
    case K::kMean:
      return {nullptr,
              {},
              "not mapped: no variadic add kernel yet (a chain of binary adds would time N-1 passes)"};
    case K::kSoftmax:
    case K::kLogSoftmax:
      return {softmax_cases, "cudnnSoftmaxForward", {}};
    case K::kMaxPool:
    case K::kAveragePool:
      return {pooling_cases, "cudnnPoolingForward, floorline-kernel:pooling", {}};
    case K::kGlobalAveragePool:
    case K::kGlobalMaxPool:
      return {pooling_cases, "cudnnPoolingForward, cudnnReduceTensor, floorline-kernel:pooling", {}};
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kReduceProd:
      return {reduce_cases, "cudnnReduceTensor", {}};
    case K::kLSTM:  // recurrent layers
    case K::kGRU:
    case K::kRNN:
      return {rnn_cases, "cudnnRNNForward (cudnnSetRNNDescriptor_v8)", {}};
    case K::kTranspose:
      return {transpose_cases, "cudnnTransformTensor, floorline-kernel:copy", {}};
    case K::kConcat:
    case K::kSlice:
    case K::kSplit:
    case K::kExpand:
      return {copy_cases, "floorline-kernel:copy", {}};
    case K::kPad:
      return {pad_cases, "floorline-kernel:copy", {}};
    case K::kGather:
      return {gather_cases, "floorline-kernel:gather", {}};
    case K::kResize:
      return {resize_cases, "floorline-kernel:resize", {}};
    case K::kTile:
    case K::kScatterND:
    case K::kRange:
      return {nullptr, {}, kNoKernel};
    /* quantization */
    case K::kQuantizeLinear:
    case K::kDequantizeLinear:
      return {
          nullptr,
          {},
          "not mapped: no standalone QuantizeLinear/DequantizeLinear case (int8 Conv, Gemm and MatMul run on "
          "cuDNN and cuBLASLt)"};
    case K::kMatMulNBits:
      return {nullptr, {}, "not mapped: cuBLAS and cuBLASLt have no GEMM over 4-bit block-quantized weights"};
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
      return {nullptr, {}, "not mapped: a view moves no data"};
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
      return {nullptr, {}, "not mapped: a host op runs before inference"};
    case K::kIf:
    case K::kLoop:
      return {nullptr, {}, "not mapped: control flow (its subgraphs' layers are)"};
    case K::kUnsupported:
      return {nullptr, {}, "not mapped: not a kind Floorline knows"};
  }
  return {nullptr, {}, {}};  // not a kind: an empty reason, which kind_support_test rejects
}

}  // namespace

KindSupport cuda_support(LayerKind kind) {
  const CudaRow row = cuda_row(kind);
  return row.plan ? KindSupport{row.mapping, {}} : KindSupport{{}, row.reason};
}

std::vector<CudaCase> cuda_cases(const CaseSpec& base) {
  std::vector<CudaCase> out;
  const Problem& p = base.problem;
  const std::string& op = p.op;
  const LayerKind kind = p.kind;
  const CudaRow row = cuda_row(kind);
  if (!row.plan) {
    out.push_back(unsupported_case(base, fmt::format("{}: {}", op, row.reason)));
    return out;
  }
  if (p.outputs.empty() || p.inputs.empty()) {
    out.push_back(unsupported_case(base, fmt::format("{} without inputs or outputs", op)));
    return out;
  }
  for (const auto& t : p.inputs)
    for (auto d : t.shape)
      if (d < 0) {
        out.push_back(unsupported_case(base, "a dimension is unknown"));
        return out;
      }
  // --- quantization: int8 Conv on cuDNN, int8 Gemm/MatMul on cuBLASLt; nothing else in int8.
  if (base.variant.dtype == DType::kInt8) {
    try {
      int8_cases(base, out);
    } catch (const MissingAttribute& e) {
      out.clear();
      out.push_back(unsupported_case(base, e.what()));
    }
    return out;
  }
  const bool conv_or_gemm =
      kind == LayerKind::kConv || kind == LayerKind::kGemm || kind == LayerKind::kMatMul;
  if (!p.post_ops.empty() && !conv_or_gemm) {
    out.push_back(unsupported_case(
        base, fmt::format("the CUDA backend fuses into Conv, Gemm and MatMul only, not {}", op)));
    return out;
  }
  try {
    row.plan(base, out);
  } catch (const MissingAttribute& e) {
    out.clear();
    out.push_back(unsupported_case(base, e.what()));
  }
  return out;
}

}  // namespace floorline::kernels
