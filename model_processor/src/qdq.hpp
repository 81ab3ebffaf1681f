// QDQ fusion: the int8 layers of a quantized (QDQ) model, as runtimes fuse them. Internal to
// model_processor; the rules are in docs/LAYERS.md ("Quantized (QDQ) models").
#pragma once

#include <functional>
#include <string>
#include <unordered_set>

#include "const_eval.hpp"
#include "floorline/model_processor/layer.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// The known constant value of an ONNX value (small initializers, folded constants), or nullptr.
using ValueLookup = std::function<const ConstTensor*(const std::string&)>;

// Rewrites `ir`'s layers in place, as ONNX Runtime's QDQ transformer does:
//  - a Conv, Gemm, MatMul, Add, MaxPool, AveragePool or GlobalAveragePool whose data inputs all
//    come from DequantizeLinear and whose output goes to one QuantizeLinear (through a Relu whose
//    clamp that QuantizeLinear implies: zero point at the type's minimum) becomes an int8 layer:
//    its operands take their 8-bit types (bias int32 when it is dequantized), and three attributes
//    join its key: `qtypes` ("u8,i8>u8": the quantized inputs, then the output), `zero_points`
//    (1 where that operand's zero point is not known to be 0) and, for Conv/Gemm/MatMul,
//    `per_channel` (1 when the weight scales are per output channel);
//  - the QuantizeLinear (and Relu) after it and each DequantizeLinear that only feeds int8 layers
//    become view layers (no cost: the int8 layer does their work);
//  - a Cast to the type its input already has is a view layer (ONNX Runtime removes it).
// `graph_outputs` are the main graph's outputs (a value the model returns is never fused away).
// Returns the number of int8 layers.
int fuse_qdq(ModelIR& ir, const ValueLookup& value_of, const std::unordered_set<std::string>& graph_outputs);

}  // namespace floorline::mp
