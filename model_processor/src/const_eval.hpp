// The evaluator that folds nodes whose inputs are all constant (constant tensors: tensor_io.hpp).
// Internal to model_processor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tensor_io.hpp"

namespace floorline::mp {

// Evaluate a node of the default domain on constant inputs. `inputs[k]` is null for an absent
// optional input. `input_shapes` serves Shape/Size, whose input need not be constant.
// Returns nullopt when the op is not one the evaluator implements, or the result would exceed
// `max_elements`.
std::optional<std::vector<ConstTensor>> evaluate_node(const onnx::NodeProto& node, int64_t opset,
                                                      const std::vector<const ConstTensor*>& inputs,
                                                      const std::vector<std::optional<Shape>>& input_shapes,
                                                      int64_t max_elements);

// Ops whose outputs depend on more than their inputs (random generators): never folded.
bool is_nondeterministic_op(const std::string& op_type);

}  // namespace floorline::mp
