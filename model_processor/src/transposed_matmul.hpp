// Transpose-into-MatMul collapse: a Transpose that swaps the last two axes of a MatMul's right
// operand becomes part of the MatMul, which reads the operand transposed (transB), as ONNX Runtime's
// MatmulTransposeFusion and every GEMM library do (oneDNN strides, BLAS and cuBLAS trans flags).
// Attention's scores Q·Kᵀ are written this way by PyTorch exports: the copy the Transpose makes of K
// (at 2048 cached tokens, 16.8 MB per layer of a 1B decoder) is work no runtime needs to do.
// Internal to model_processor; the rule is in docs/LAYERS.md ("Transposed MatMul operands").
#pragma once

#include <string>
#include <unordered_set>

#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// Rewrites `ir`'s layers in place: each compute Transpose layer with known shapes whose perm swaps
// the last two of its r ≥ 2 axes and keeps the others, whose output is read by exactly one layer —
// a compute MatMul of the same (sub)graph, not int8 from QDQ, as its right operand (b), of the same
// rank — and is no
// graph output, is removed; the MatMul reads the Transpose's input as b, with the integer attribute
// transB = 1 (b stored (…, N, K)), and takes the Transpose's predecessors. The layers are
// renumbered and every `preds` list follows. Returns the number of Transposes collapsed.
int collapse_transposed_matmul(ModelIR& ir, const std::unordered_set<std::string>& graph_outputs);

}  // namespace floorline::mp
