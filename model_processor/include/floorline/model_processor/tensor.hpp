// floorline/model_processor/tensor.hpp — element types and shapes of the layer IR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace floorline::mp {

// Element types, numbered as onnx.TensorProto.DataType so that a value read from a model maps 1:1.
enum class DataType : int32_t {
  kUndefined = 0,
  kF32 = 1,
  kU8 = 2,
  kI8 = 3,
  kU16 = 4,
  kI16 = 5,
  kI32 = 6,
  kI64 = 7,
  kString = 8,
  kBool = 9,
  kF16 = 10,
  kF64 = 11,
  kU32 = 12,
  kU64 = 13,
  kBF16 = 16,
};

// Short name used in canonical keys and reports: f32, f16, bf16, i64, ...
std::string_view dtype_name(DataType t);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DataType> dtype_from_name(std::string_view name);
// Size of one element in bytes (0 for undefined/string).
int64_t dtype_size(DataType t);

// A tensor shape. A dimension of -1 is unknown (ONNX left it symbolic or unset).
using Shape = std::vector<int64_t>;

bool shape_known(const Shape& s);
// Number of elements; -1 if any dimension is unknown, kNumelOverflow if the count does not fit
// int64 (never a wrapped value). A rank-0 shape has 1 element.
constexpr int64_t kNumelOverflow = -2;
int64_t numel(const Shape& s);
// "8x64x56x56"; a scalar is "scalar"; an unknown dim prints as "?".
std::string shape_string(const Shape& s);
// "1,2,3" — the form used for integer-list attributes in canonical keys.
std::string ints_string(const std::vector<int64_t>& v);

}  // namespace floorline::mp
