// Operators read as their decomposition: ONNX Runtime's com.microsoft operators of language-model
// exports and the opset-20/23 operators that ONNX 1.12 does not know become, before shape
// inference, the opset-17 subgraphs they are defined as, so that ONNX's shape inference, Floorline's
// layer kinds, costs, kernels and patterns (the GELU collapse, the transposed-MatMul fold, the
// epilogues) read them. Internal to model_processor; the rules, per operator, are in
// docs/LAYERS.md ("Operators read as their decomposition"). And the merged decoder's If.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// Registers with ONNX's schema registry (once per process) the com.microsoft operators Floorline
// reads as layer kinds of their own rather than as a decomposition: MatMulNBits (LayerKind
// kMatMulNBits), with its shape inference, so that ONNX's inference types what follows it. The
// schema follows ONNX Runtime's docs/ContribOperators.md (inputs A, B, scales, zero_points, g_idx,
// bias; attributes K, N, bits, block_size, accuracy_level). Called before a model is read.
void register_contrib_schemas();

// Replaces, in the top-level graph of `model` (whose default-domain opset, as declared, is
// `opset`), every node of an operator listed below by the nodes of its decomposition, in place
// (so the graph stays in topological order):
// - com.microsoft: SkipLayerNormalization, SkipSimplifiedLayerNormalization, FastGelu, BiasGelu,
//   Gelu, RotaryEmbedding, MultiHeadAttention, GroupQueryAttention; SimplifiedLayerNormalization
//   in the com.microsoft or the default domain (ONNX Runtime registers it in the latter);
// - default domain, opset >= 20: Gelu; opset >= 23: RMSNormalization, RotaryEmbedding, Attention.
// The new nodes are named "<node>/<part>" (the node's name, or "<op>_<index>" when it has none) and
// write the node's own output names. A node in a form the decomposition does not cover (an output
// it does not produce, a packed form it does not read) stays as it is, unsupported, and a warning
// names it and says why. `read_as_17` (top-level node indices, opset18.hpp) is renumbered. Returns
// the number of nodes replaced; one warning per operator counts them.
int expand_composite_ops(onnx::ModelProto& model, int64_t opset, std::set<int>& read_as_17,
                         std::vector<std::string>& warnings);

// The merged decoder (optimum's decoder_model_merged): a top-level If whose condition is a boolean
// graph input (its name contains "use_cache"). Its index in `g`, or -1.
int merged_decoder_if(const onnx::GraphProto& g);

// Inlines the merged decoder's If (merged_decoder_if) in `model`. The branch is picked from the dims of the
// scenario: the cache branch (then) where the past length is above 0, the other where it is 0. The past
// length is the value in `dims` of the symbolic dim at axis 2 (axis 1 for rank 3) of the first
// graph input whose name contains "past". The picked branch's nodes and initializers take the
// If's place (its outputs renamed to the If's). Returns the branch it ran, or nullopt where the model
// has no such If; an If it cannot decide on (no past input with a symbolic length, the dim not
// given) is an error naming the If.
struct MergedDecoderBranch {
  std::string branch;  // "then-branch (with the cache)" or "else-branch (without the cache)"
  std::string note;    // a line for the model's warnings: the If, its condition, the branch and the dim
};
Result<std::optional<MergedDecoderBranch>> inline_merged_decoder_if(onnx::ModelProto& model,
                                                                    const DimValues& dims);

}  // namespace floorline::mp
