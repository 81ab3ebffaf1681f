// The layer-kind table and node normalization. Internal to model_processor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "const_eval.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::mp {

// What the normalizer knows about one input or output of a node.
struct ValueDesc {
  std::string name;
  bool present = false;  // false for an absent optional input ("")
  DataType dtype = DataType::kUndefined;
  std::optional<Shape> shape;          // nullopt when even the rank is unknown
  const ConstTensor* value = nullptr;  // set when the value is a known constant
};

struct NodeView {
  const onnx::NodeProto* node = nullptr;
  int64_t opset = 0;
  const onnx::OpSchema* schema = nullptr;  // null for ops ONNX does not know
  std::vector<ValueDesc> in;
  std::vector<ValueDesc> out;
};

// Build the normalized LayerConfig of a node of the given kind (kUnsupported for unknown ops).
// Never fails: what cannot be resolved (unknown shapes) is left as -1 and reported by the caller.
// `operand_names`, when given, receives the ONNX value name of each of config.inputs, in order.
LayerConfig normalize(const NodeView& view, LayerKind kind,
                      std::vector<std::string>* operand_names = nullptr);

}  // namespace floorline::mp
