// Constant tensors and the evaluator that folds nodes whose inputs are all constant.
// Internal to model_processor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/tensor.hpp"

namespace floorline::mp {

// A constant tensor's values: integers (all integer and bool types) in `i`, floats in `f`.
struct ConstTensor {
  DataType dtype = DataType::kUndefined;
  Shape dims;
  std::vector<int64_t> i;
  std::vector<double> f;

  bool is_integer() const;
  int64_t size() const {
    return is_integer() ? static_cast<int64_t>(i.size()) : static_cast<int64_t>(f.size());
  }
  double as_double(int64_t k) const { return is_integer() ? static_cast<double>(i[k]) : f[k]; }
  int64_t as_int(int64_t k) const { return is_integer() ? i[k] : static_cast<int64_t>(f[k]); }
  std::vector<int64_t> ints() const;  // all values as integers
};

bool is_integer_type(DataType t);

// Read the values of a TensorProto held in the model (raw_data or typed fields). Values stored
// as external data are read from `base_dir` (only this tensor's bytes). Errors name the tensor.
Result<ConstTensor> read_tensor(const onnx::TensorProto& t, const std::string& base_dir);

// Write a constant as a TensorProto (typed fields) named `name`.
onnx::TensorProto to_tensor_proto(const ConstTensor& c, const std::string& name);

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
