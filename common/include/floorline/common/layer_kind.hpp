// floorline/common/layer_kind.hpp — every layer kind Floorline understands, in one list.
//
// FLOORLINE_LAYER_KINDS is the single list of kinds: X(Name) defines the enumerator
// LayerKind::kName and its ONNX op name "Name" (default domain). It is header-only and ONNX-free
// so that both the IR (model_processor) and the kernel libraries, which must not depend on it,
// share it. What a kind means lives in tables indexed by it (docs/ADDING_A_LAYER.md):
// model_processor/src/kinds.cpp (cost class, attributes, FLOPs, bytes), the reference and one
// support table per backend; each covers every kind, checked by the compiler or by a test.
#pragma once

#include <array>
#include <optional>
#include <string_view>

// clang-format off
#define FLOORLINE_LAYER_KINDS(X)                                                                   \
  /* compute: dense */                                                                             \
  X(Conv) X(ConvTranspose) X(Gemm) X(MatMul)                                                       \
  /* compute: normalization */                                                                     \
  X(BatchNormalization) X(LayerNormalization) X(InstanceNormalization) X(LRN)                      \
  /* compute: element-wise unary */                                                                \
  X(Relu) X(LeakyRelu) X(PRelu) X(Elu) X(Selu) X(Clip) X(Sigmoid) X(Tanh) X(HardSigmoid)           \
  X(HardSwish) X(Softplus) X(Erf) X(Exp) X(Log) X(Sqrt) X(Reciprocal) X(Neg) X(Abs) X(Floor)       \
  X(Ceil) X(Not) X(Cast) X(Gelu)                                                                   \
  /* compute: element-wise binary / ternary (NumPy broadcasting) */                                \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Max) X(Min) X(Mod) X(Equal) X(Less) X(Greater) X(And)       \
  X(Or) X(Where) X(Sum)                                                                            \
  /* compute: comparisons, Xor, Mean, CumSum, arg-reductions */                             \
  X(GreaterOrEqual) X(LessOrEqual) X(Xor) X(Mean) X(CumSum) X(ArgMax) X(ArgMin)                    \
  /* compute: detection heads: selection, gather, suppression */                 \
  X(TopK) X(GatherND) X(NonZero) X(NonMaxSuppression)                                              \
  /* compute: sampling and scatter: detection heads, optical flow */                    \
  X(RoiAlign) X(ScatterElements) X(GridSample)                                                     \
  /* compute: softmax, pooling, reductions */                                                      \
  X(Softmax) X(LogSoftmax) X(MaxPool) X(AveragePool) X(GlobalAveragePool) X(GlobalMaxPool)         \
  X(ReduceMean) X(ReduceSum) X(ReduceMax) X(ReduceMin) X(ReduceProd)                               \
  /* compute: recurrent */                                                                         \
  X(LSTM) X(GRU) X(RNN)                                                                            \
  /* compute: data movement */                                                                     \
  X(Concat) X(Split) X(Slice) X(Transpose) X(Pad) X(Resize) X(Gather) X(Expand) X(Tile)            \
  X(ScatterND) X(Range)                                                                            \
  /* quantization (MatMulNBits: ONNX Runtime's com.microsoft block-quantized weights) */         \
  X(QuantizeLinear) X(DequantizeLinear) X(MatMulNBits)                                             \
  /* view */                                                                                       \
  X(Reshape) X(Flatten) X(Squeeze) X(Unsqueeze) X(Identity) X(Dropout)                             \
  /* host */                                                                                       \
  X(Shape) X(Size) X(Constant) X(ConstantOfShape)                                                  \
  /* control flow */                                                                               \
  X(If) X(Loop)                                                                                    \
  /* anything else: must stay last */                                                             \
  X(Unsupported)
// clang-format on

namespace floorline {

enum class LayerKind : int {
#define FLOORLINE_KIND_ENUMERATOR(name) k##name,
  FLOORLINE_LAYER_KINDS(FLOORLINE_KIND_ENUMERATOR)
#undef FLOORLINE_KIND_ENUMERATOR
};
inline constexpr int kLayerKindCount = static_cast<int>(LayerKind::kUnsupported) + 1;

// Every kind, in enum order: for tests and tables that must cover them all.
inline constexpr std::array<LayerKind, kLayerKindCount> kAllLayerKinds = {
#define FLOORLINE_KIND_VALUE(name) LayerKind::k##name,
    FLOORLINE_LAYER_KINDS(FLOORLINE_KIND_VALUE)
#undef FLOORLINE_KIND_VALUE
};

namespace layer_kind_detail {
inline constexpr std::array<std::string_view, kLayerKindCount> kNames = {
#define FLOORLINE_KIND_NAME(name) std::string_view(#name),
    FLOORLINE_LAYER_KINDS(FLOORLINE_KIND_NAME)
#undef FLOORLINE_KIND_NAME
};
}  // namespace layer_kind_detail

// The ONNX op name of a kind ("Conv"); "Unsupported" for kUnsupported.
constexpr std::string_view kind_name(LayerKind k) {
  const int i = static_cast<int>(k);
  return i >= 0 && i < kLayerKindCount ? layer_kind_detail::kNames[static_cast<size_t>(i)]
                                       : std::string_view("?");
}

// The kind whose ONNX op name is `name` (default domain); nullopt when there is none.
// "Unsupported" is not an op name and yields nullopt.
constexpr std::optional<LayerKind> kind_from_name(std::string_view name) {
  for (LayerKind k : kAllLayerKinds)
    if (k != LayerKind::kUnsupported && kind_name(k) == name) return k;
  return std::nullopt;
}

// Whether an input of a layer of `kind` with the IR's role `role` (docs/LAYERS.md) and `rank` dims is
// one of the layer's parameters, an initializer in a model that a pass reads once, rather than an
// activation another layer wrote: a convolution's or recurrent layer's weights ("w", "r"), a bias
// ("bias"; the "b" of a Gemm, a normalization or a recurrent layer), a normalization's "scale",
// "input_mean" and "input_var", a Gemm's "c", a MatMul's "b" where it is 2-D (a linear layer's
// weight matrix; attention's batched B is an activation), and a MatMulNBits' quantized "b" with its
// "scales", "zero_points" and "g_idx". The first input is never one.
inline bool parameter_input(LayerKind kind, std::string_view role, size_t rank) {
  if (role == "w" || role == "r" || role == "bias" || role == "scale" || role == "input_mean" ||
      role == "input_var")
    return true;
  switch (kind) {
    case LayerKind::kMatMul:
      return role == "b" && rank == 2;
    case LayerKind::kGemm:
      return role == "b" || role == "c";
    case LayerKind::kMatMulNBits:
      return role == "b" || role == "scales" || role == "zero_points" || role == "g_idx";
    case LayerKind::kBatchNormalization:
    case LayerKind::kLayerNormalization:
    case LayerKind::kInstanceNormalization:
    case LayerKind::kLSTM:
    case LayerKind::kGRU:
    case LayerKind::kRNN:
      return role == "b";
    default:
      return false;
  }
}

}  // namespace floorline
