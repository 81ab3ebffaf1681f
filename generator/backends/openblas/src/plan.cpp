// The OpenBLAS kind table and planner.
#include <string_view>

#include <fmt/format.h>

#include "floorline/kernels/openblas.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

KindSupport openblas_support(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv:
      return {"im2col + cblas_sgemm per group (NCHW, 2-D)", {}};
    case LayerKind::kGemm:
      return {"cblas_sgemm", {}};
    case LayerKind::kMatMul:
      return {
          "cblas_sgemm (2-D weights: one GEMM over the flattened batch, or a loop); a loop of GEMMs when "
          "batched",
          {}};
    case LayerKind::kLSTM:
    case LayerKind::kGRU:
    case LayerKind::kRNN:
      return {"cblas_sgemm: X·Wᵀ of every time step in one GEMM, then per step H·Rᵀ and the gate math", {}};
    case LayerKind::kConvTranspose:
      return {{}, "not mapped: col2im deconvolution is not implemented over OpenBLAS"};
    case LayerKind::kBatchNormalization:
    case LayerKind::kLayerNormalization:
    case LayerKind::kInstanceNormalization:
    case LayerKind::kLRN:
    case LayerKind::kRelu:
    case LayerKind::kLeakyRelu:
    case LayerKind::kPRelu:
    case LayerKind::kElu:
    case LayerKind::kSelu:
    case LayerKind::kClip:
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
    case LayerKind::kHardSigmoid:
    case LayerKind::kHardSwish:
    case LayerKind::kSoftplus:
    case LayerKind::kErf:
    case LayerKind::kGelu:
    case LayerKind::kExp:
    case LayerKind::kLog:
    case LayerKind::kSqrt:
    case LayerKind::kReciprocal:
    case LayerKind::kNeg:
    case LayerKind::kAbs:
    case LayerKind::kFloor:
    case LayerKind::kCeil:
    case LayerKind::kNot:
    case LayerKind::kCast:
    case LayerKind::kAdd:
    case LayerKind::kSub:
    case LayerKind::kMul:
    case LayerKind::kDiv:
    case LayerKind::kPow:
    case LayerKind::kMax:
    case LayerKind::kMin:
    case LayerKind::kMod:
    case LayerKind::kEqual:
    case LayerKind::kLess:
    case LayerKind::kGreater:
    case LayerKind::kAnd:
    case LayerKind::kOr:
    case LayerKind::kWhere:
    case LayerKind::kSum:
    case LayerKind::kGreaterOrEqual:  // comparisons, logic and reductions
    case LayerKind::kLessOrEqual:
    case LayerKind::kXor:
    case LayerKind::kMean:
    case LayerKind::kCumSum:
    case LayerKind::kArgMax:
    case LayerKind::kArgMin:
    case LayerKind::kTopK:
    case LayerKind::kGatherND:
    case LayerKind::kNonZero:
    case LayerKind::kNonMaxSuppression:
    case LayerKind::kRoiAlign:
    case LayerKind::kScatterElements:
    case LayerKind::kGridSample:
    case LayerKind::kSoftmax:
    case LayerKind::kLogSoftmax:
    case LayerKind::kMaxPool:
    case LayerKind::kAveragePool:
    case LayerKind::kGlobalAveragePool:
    case LayerKind::kGlobalMaxPool:
    case LayerKind::kReduceMean:
    case LayerKind::kReduceSum:
    case LayerKind::kReduceMax:
    case LayerKind::kReduceMin:
    case LayerKind::kReduceProd:
    case LayerKind::kConcat:
    case LayerKind::kSplit:
    case LayerKind::kSlice:
    case LayerKind::kTranspose:
    case LayerKind::kPad:
    case LayerKind::kResize:
    case LayerKind::kGather:
    case LayerKind::kExpand:
    case LayerKind::kTile:
    case LayerKind::kScatterND:
    case LayerKind::kRange:
    /* quantization */
    case LayerKind::kQuantizeLinear:
    case LayerKind::kDequantizeLinear:
    case LayerKind::kReshape:
    case LayerKind::kFlatten:
    case LayerKind::kSqueeze:
    case LayerKind::kUnsqueeze:
    case LayerKind::kIdentity:
    case LayerKind::kDropout:
    case LayerKind::kShape:
    case LayerKind::kSize:
    case LayerKind::kConstant:
    case LayerKind::kConstantOfShape:
    case LayerKind::kIf:
    case LayerKind::kLoop:
    case LayerKind::kUnsupported:
      return {{}, "not mapped: OpenBLAS is a BLAS (matrix products only)"};
    case LayerKind::kMatMulNBits:
      return {{}, "not mapped: BLAS has no product with 4-bit block-quantized weights"};
  }
  return {{}, "not mapped"};
}

std::vector<OpenblasCase> openblas_cases(const CaseSpec& base) {
  const Problem& p = base.problem;
  const KindSupport s = openblas_support(p.kind);
  if (!s.supported()) return {unsupported_case(base, MathMode::kFp32, std::string(s.reason))};
  if (base.variant.dtype != DType::kF32)
    return {unsupported_case(base, MathMode::kFp32,
                             fmt::format("cblas_sgemm is f32, not {}", dtype_name(base.variant.dtype)))};
  if (!p.post_ops.empty())
    return {unsupported_case(base, MathMode::kFp32,
                             "OpenBLAS has no fused epilogue (a separate pass is the unfused case)")};
  auto make = [&](const char* algorithm, bool is_default) {
    OpenblasCase c;
    c.variant = base.variant;
    c.variant.algorithm = algorithm;
    c.variant.math_mode = MathMode::kFp32;
    c.variant.layout = "";
    c.group = algorithm;
    c.library = "openblas";
    c.is_default = is_default;
    c.multi_thread_only = std::string_view(algorithm).ends_with("_split");
    return c;
  };
  switch (p.kind) {
    case LayerKind::kConv:
      if (p.inputs.at(0).shape.size() != 4)
        return {unsupported_case(
            base, MathMode::kFp32,
            fmt::format("im2col is mapped for 2-D convolutions, not {}-D", p.inputs.at(0).shape.size() - 2))};
      return {make("im2col_sgemm", true)};
    // Each GEMM formulation also as its _split variant: at T > 1 threads, the work cut into T
    // one-thread calls on OpenMP's threads (ONNX Runtime's MLAS cuts a GEMM so, on its one pool);
    // at one thread the kernel reports it unsupported (it is the plain case).
    case LayerKind::kGemm:
      return {make("sgemm", true), make("sgemm_split", false)};
    case LayerKind::kMatMul: {
      const Shape& a = p.inputs.at(0).shape;
      const Shape& b = p.inputs.at(1).shape;
      if (a.size() < 2 || b.size() < 2)
        return {unsupported_case(base, MathMode::kFp32, "MatMul with a 1-D operand is not mapped")};
      const bool weights_2d = elements(Shape(b.begin(), b.end() - 2)) == 1;
      const bool batched_a = elements(Shape(a.begin(), a.end() - 2)) > 1;
      if (weights_2d && batched_a)
        return {make("sgemm", true), make("sgemm_split", false), make("sgemm_loop", false),
                make("sgemm_loop_split", false)};
      if (weights_2d) return {make("sgemm", true), make("sgemm_split", false)};
      return {make("sgemm_loop", true), make("sgemm_loop_split", false)};
    }
    case LayerKind::kLSTM:
    case LayerKind::kGRU:
    case LayerKind::kRNN:
      // cuDNN's name for this formulation (CUDNN_RNN_ALGO_STANDARD): the input projection of all
      // time steps as one GEMM, the recurrent products step by step.
      if (p.input("sequence_lens"))
        return {
            unsupported_case(base, MathMode::kFp32, "sequence_lens (per-sequence lengths) is not mapped")};
      return {make("sgemm_standard", true)};
    default:
      break;
  }
  return {unsupported_case(base, MathMode::kFp32, std::string(s.reason))};
}

}  // namespace floorline::kernels
