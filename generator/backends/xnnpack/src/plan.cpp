// The XNNPACK kind table and planner: which operator each kind runs on, and the cases of a config.
#include <fmt/format.h>

#include "internal.hpp"

namespace floorline::kernels {

namespace {

struct XnnRow {
  std::string_view mapping;  // the operator(s)
  std::string_view reason;   // why not mapped
  // The case's algorithm and layout: "nhwc" (convolution, pooling) or "" (plain).
  std::string_view algorithm;
  bool nhwc = false;
};

constexpr XnnRow op(std::string_view mapping, std::string_view algorithm, bool nhwc) {
  return {mapping, {}, algorithm, nhwc};
}
constexpr XnnRow none(std::string_view reason) {
  return {{}, reason, {}, false};
}

XnnRow xnnpack_row(LayerKind k) {
  using K = LayerKind;
  constexpr std::string_view kNoOp = "not mapped: XNNPACK 2022-02 has no f32 operator for it";
  switch (k) {
    case K::kConv:
      return op("xnn_create_convolution2d_nhwc_f32 (2-D; grouped and depthwise)", "convolution2d_nhwc_f32",
                true);
    case K::kConvTranspose:
      return none("not mapped: xnn_create_deconvolution2d_nhwc_f32 exists but Floorline does not map it yet");
    case K::kGemm:
    case K::kMatMul:
      return op("xnn_create_fully_connected_nc_f32 (2-D weights)", "fully_connected_nc_f32", false);
    case K::kMaxPool:
      return op("xnn_create_max_pooling2d_nhwc_f32", "max_pooling2d_nhwc_f32", true);
    case K::kAveragePool:
      return op("xnn_create_average_pooling2d_nhwc_f32", "average_pooling2d_nhwc_f32", true);
    case K::kGlobalAveragePool:
      return op("xnn_create_global_average_pooling_nwc_f32", "global_average_pooling_nwc_f32", true);
    case K::kRelu:
    case K::kClip:
      return op("xnn_create_clamp_nc_f32", "clamp_nc_f32", false);
    case K::kLeakyRelu:
      return op("xnn_create_leaky_relu_nc_f32", "leaky_relu_nc_f32", false);
    case K::kElu:
      return op("xnn_create_elu_nc_f32", "elu_nc_f32", false);
    case K::kSigmoid:
      return op("xnn_create_sigmoid_nc_f32", "sigmoid_nc_f32", false);
    case K::kHardSwish:
      return op("xnn_create_hardswish_nc_f32", "hardswish_nc_f32", false);
    case K::kAbs:
      return op("xnn_create_abs_nc_f32", "abs_nc_f32", false);
    case K::kNeg:
      return op("xnn_create_negate_nc_f32", "negate_nc_f32", false);
    case K::kSqrt:
      return op("xnn_create_square_root_nc_f32", "square_root_nc_f32", false);
    case K::kFloor:
      return op("xnn_create_floor_nc_f32", "floor_nc_f32", false);
    case K::kCeil:
      return op("xnn_create_ceiling_nc_f32", "ceiling_nc_f32", false);
    case K::kSoftmax:
      return op("xnn_create_softmax_nc_f32 (last axis)", "softmax_nc_f32", false);
    case K::kAdd:
      return op("xnn_create_add_nd_f32", "add_nd_f32", false);
    case K::kSub:
      return op("xnn_create_subtract_nd_f32", "subtract_nd_f32", false);
    case K::kMul:
      return op("xnn_create_multiply_nd_f32", "multiply_nd_f32", false);
    case K::kDiv:
      return op("xnn_create_divide_nd_f32", "divide_nd_f32", false);
    case K::kMax:
      return op("xnn_create_maximum_nd_f32", "maximum_nd_f32", false);
    case K::kMin:
      return op("xnn_create_minimum_nd_f32", "minimum_nd_f32", false);
    case K::kTanh:
      return none("not mapped: XNNPACK 2022-02 has tanh for quantized types only");
    case K::kPRelu:
      return none(
          "not mapped: xnn_create_prelu_nc_f32 takes a slope per last-dimension channel, not ONNX "
          "broadcasting");
    case K::kGlobalMaxPool:
      return none("not mapped: XNNPACK 2022-02 has no global max pooling");
    case K::kGelu:
      return none("not mapped: XNNPACK 2022-02 has no GELU operator (nor erf, to build it from)");
    case K::kBatchNormalization:
    case K::kLayerNormalization:
    case K::kInstanceNormalization:
    case K::kLRN:
    case K::kSelu:
    case K::kHardSigmoid:
    case K::kSoftplus:
    case K::kErf:
    case K::kExp:
    case K::kLog:
    case K::kReciprocal:
    case K::kNot:
    case K::kCast:
    case K::kPow:
    case K::kMod:
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kAnd:
    case K::kOr:
    case K::kWhere:
    case K::kSum:
    // --- comparisons, logic and reductions
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
    case K::kXor:
    case K::kMean:
    case K::kCumSum:
    case K::kArgMax:
    case K::kArgMin:
    // --- detection heads
    case K::kTopK:
    case K::kGatherND:
    case K::kNonZero:
    case K::kNonMaxSuppression:
    case K::kRoiAlign:
    case K::kScatterElements:
    case K::kGridSample:
    // ---
    case K::kLogSoftmax:
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kReduceProd:
      return none(kNoOp);
    case K::kLSTM:  // recurrent layers
    case K::kGRU:
    case K::kRNN:
      return none("not mapped: this XNNPACK snapshot has no recurrent operator");
    case K::kConcat:
    case K::kSplit:
    case K::kSlice:
    case K::kTranspose:
    case K::kPad:
    case K::kResize:
    case K::kGather:
    case K::kExpand:
    case K::kTile:
    case K::kScatterND:
    case K::kRange:
      return none("not mapped: data movement is timed by the oneDNN and CUDA backends");
    /* quantization */
    case K::kQuantizeLinear:
    case K::kDequantizeLinear:
      return none("not mapped: XNNPACK's quantized operators are not mapped (f32 only); oneDNN times int8");
    case K::kMatMulNBits:
      return none("not mapped: this XNNPACK's 4-bit fully connected operators quantize the activations too");
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
    case K::kIf:
    case K::kLoop:
    case K::kUnsupported:
      return none("not mapped: no computation (view, host or control flow)");
  }
  return none("not mapped");
}

// Why XNNPACK cannot run `p` as planned ("" when it can); what only the operator's create call can
// decide is found when the case is built.
std::string plan_limit(const Problem& p) {
  const auto rank = [&](size_t k) { return k < p.inputs.size() ? p.inputs[k].shape.size() : size_t{0}; };
  switch (p.kind) {
    case LayerKind::kConv:
    case LayerKind::kMaxPool:
    case LayerKind::kAveragePool:
    case LayerKind::kGlobalAveragePool:
      if (rank(0) != 4) return fmt::format("XNNPACK's {} is 2-D (NHWC), not {}-D", p.op, rank(0) - 2);
      break;
    case LayerKind::kMatMul:
      if (rank(0) < 2 || rank(1) < 2) return "MatMul with a 1-D operand is not mapped to fully connected";
      if (p.int_attr("transB", 0) != 0)
        return "MatMul with a transposed right operand (transB) is not mapped";
      if (elements(Shape(p.inputs[1].shape.begin(), p.inputs[1].shape.end() - 2)) != 1)
        return "XNNPACK 2022-02 has no batched matrix multiplication: the right operand must be 2-D weights";
      break;
    case LayerKind::kAdd:
    case LayerKind::kSub:
    case LayerKind::kMul:
    case LayerKind::kDiv:
    case LayerKind::kMax:
    case LayerKind::kMin:
      if (p.inputs.size() != 2)
        return fmt::format("XNNPACK's binary operators take two operands, not {}", p.inputs.size());
      if (rank(0) > XNN_MAX_TENSOR_DIMS || rank(1) > XNN_MAX_TENSOR_DIMS)
        return fmt::format("XNNPACK's binary operators take at most {} dimensions", XNN_MAX_TENSOR_DIMS);
      break;
    default:
      break;
  }
  if (!p.post_ops.empty()) {
    try {
      (void)xnnpack_detail::epilogue_clamp(p, p.kind == LayerKind::kMatMul);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "";
}

// A conversion is a no-op where the tensor has one channel or one pixel.
bool transposes(const Shape& s) {
  if (s.size() < 3) return false;
  int64_t hw = 1;
  for (size_t k = 2; k < s.size(); ++k) hw *= s[k];
  return s[1] > 1 && hw > 1;
}

}  // namespace

KindSupport xnnpack_support(LayerKind kind) {
  const XnnRow r = xnnpack_row(kind);
  return {r.mapping, r.reason};
}

std::vector<XnnpackCase> xnnpack_cases(const CaseSpec& base) {
  const Problem& p = base.problem;
  const XnnRow row = xnnpack_row(p.kind);
  if (row.mapping.empty()) return {unsupported_case(base, MathMode::kFp32, std::string(row.reason))};
  if (base.variant.dtype != DType::kF32)
    return {unsupported_case(
        base, MathMode::kFp32,
        fmt::format("XNNPACK's operators are mapped for f32, not {}", dtype_name(base.variant.dtype)))};
  if (const std::string why = plan_limit(p); !why.empty())
    return {unsupported_case(base, MathMode::kFp32, why)};
  std::vector<XnnpackCase> out;
  XnnpackCase c;
  c.variant = base.variant;
  c.variant.algorithm = std::string(row.algorithm);
  c.variant.math_mode = MathMode::kFp32;
  c.variant.layout = row.nhwc ? "nhwc" : "";
  c.group = c.variant.algorithm;
  c.library = "xnnpack";
  c.is_default = true;
  out.push_back(c);
  if (row.nhwc && p.post_ops.empty()) {
    const Shape& x = p.inputs.at(0).shape;
    const Shape& y = p.outputs.at(0).shape;
    for (const auto& [conv, shape] : {std::pair{LayoutConversion{"src", "nchw", "nhwc"}, x},
                                      std::pair{LayoutConversion{"dst", "nhwc", "nchw"}, y}}) {
      if (!transposes(shape)) continue;
      out.push_back(conversion_case(base, "floorline-kernel:transpose", MathMode::kFp32, conv,
                                    CaseFeeds{"", "nhwc"}, std::string(kOwnBackend)));
    }
  }
  return out;
}

}  // namespace floorline::kernels
