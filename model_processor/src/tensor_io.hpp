// Constant tensors: their values, read from a TensorProto (its typed fields, raw_data, or external
// data inside the model's folder) and written back as one. Internal to model_processor.
#pragma once

#include <cstdint>
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
  int64_t as_int(int64_t k) const;

  std::vector<int64_t> ints() const;  // all values as integers
};

bool is_integer_type(DataType t);

// A double as int64: truncated toward zero, saturated at the int64 range, NaN as 0 (a plain cast
// of an out-of-range double is undefined behaviour).
int64_t saturate_to_int64(double v);

// Where one model's external data may come from and how much of it may be loaded
// (docs/SECURITY.md): regular files inside the model's folder only, at most `max_bytes` in all.
struct ExternalDataScope {
  std::string dir;                        // the model's folder; empty: external data is refused
  int64_t max_bytes = int64_t{64} << 20;  // 64 MiB: shape constants are a few KiB
  int64_t loaded_bytes = 0;               // read so far
};

// Read the values of a TensorProto held in the model (raw_data or typed fields). Values stored as
// external data are read through `scope` (only this tensor's bytes; null: external data refused).
// Errors name the tensor.
Result<ConstTensor> read_tensor(const onnx::TensorProto& t, ExternalDataScope* scope);

// Write a constant as a TensorProto (typed fields) named `name`.
onnx::TensorProto to_tensor_proto(const ConstTensor& c, const std::string& name);

}  // namespace floorline::mp
