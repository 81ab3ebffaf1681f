// Einsum equations that are matrix products, read as MatMul layers. Internal to model_processor.
#pragma once

#include <optional>
#include <string>

#include "floorline/model_processor/layer.hpp"

namespace floorline::mp {

// The MatMul an Einsum of two operands computes: a [batch..., M, K], b [batch..., K, N],
// y [batch..., M, N], where each of M, N and K is the product of the sizes of its labels
// (M: in the first operand and the output only; N: the second and the output; K: both operands,
// not the output; batch: all three, in the output's order; an operand's own ellipsis dims count as
// its M or N, or as batch where both have them, broadcast as NumPy does). The element counts, hence
// FLOPs (2 · n(y) · K) and bytes, are the Einsum's; operand and output permutations are not costed:
// a GEMM takes them as its transpose flags and strides (docs/LAYERS.md).
struct EinsumMatMul {
  Shape a, b, y;
};

// nullopt, with *why set, when the equation is not such a product: not two operands, a label
// repeated within an operand (a diagonal), a label summed in one operand only (a reduction), sizes
// that disagree, or shapes not known.
std::optional<EinsumMatMul> einsum_as_matmul(const std::string& equation, const Shape& a, const Shape& b,
                                             std::string* why);

// The output shape of an Einsum of any number of operands (ONNX 1.12's shape inference gives its
// rank only): each output label's size, broadcast over the operands (1 repeats). nullopt when an
// operand shape is unknown or the equation does not fit the shapes.
std::optional<Shape> einsum_output_shape(const std::string& equation, const std::vector<Shape>& operands);

}  // namespace floorline::mp
