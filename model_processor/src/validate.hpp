// Floorline's own checks of an untrusted model, made before ONNX 1.12's shape inference sees it
// (that code trusts its input: a zero or negative dimension, a rank of 9, a zero stride crash it),
// and after it (what it computed must still make sense). docs/SECURITY.md lists them with their
// caps. Internal to model_processor.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <onnx/onnx_pb.h>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/tensor.hpp"
#include "inference.hpp"

namespace floorline::mp {

// The largest rank a tensor may have (ONNX models in practice stay at 6 or below).
constexpr int kMaxRank = 8;
// The largest dimension of a graph input or initializer, and the largest value of a spatial
// attribute (kernel, stride, dilation, pad, group): 2^31. Larger values are rejected as absurd
// before any arithmetic multiplies them.
constexpr int64_t kMaxDim = int64_t{1} << 31;
// The largest element count of any tensor, so that its size in bytes (≤ 8 bytes per element) and
// sums of a few such sizes fit int64: 2^59.
constexpr int64_t kMaxElements = int64_t{1} << 59;

// "name" of the node, or "<op>_<index>" for an unnamed node.
std::string node_label(const onnx::NodeProto& n, size_t index);

// Replaces invalid UTF-8 (U+FFFD) in every name and string attribute of the model that can reach
// an output: graph, node, op, domain, value and attribute names, string attributes. The same bytes
// always map to the same text, so the graph's wiring is kept.
void sanitize_names(onnx::ModelProto& model);

// Before shape inference, on the main graph and every subgraph: tensor ranks and dimensions
// (graph inputs: 1..kMaxDim; initializers and tensor attributes: 0..kMaxDim, element count ≤
// kMaxElements), spatial attributes of convolutions and pools (kernel/strides/dilations 1..kMaxDim,
// pads ≥ 0, group 1..kMaxDim dividing the weights' channels, list lengths matching the kernel's
// rank, operand ranks ≥ 3), single assignment (no value produced twice, no node reading its own
// output), and for the main graph: every input defined, no cycle. Errors name the node.
Status validate_graph(const onnx::GraphProto& graph);

// After ONNX's shape inference of the main graph `graph` (its result in `inferred`): no inferred
// dimension is negative, no rank above kMaxRank, no element count above kMaxElements. Errors name
// the node that produces the value.
Status check_inferred_dims(const onnx::GraphProto& graph, const onnx::GraphProto& inferred);

// A convolution's input channels agree with its weights and group (C = W[1]·group for Conv,
// C = W[0] for ConvTranspose), where the shapes are known.
Status check_conv_channels(const onnx::GraphProto& graph, const ShapeMap& shapes);

}  // namespace floorline::mp
