// The analyzer's data types are text (AnalyzeOptions, database columns); the rules are
// common/dtype.hpp's, applied here once for the analyzer's sources.
#pragma once

#include <string>

#include "floorline/common/dtype.hpp"

namespace floorline::analyzer {

// An unknown name is taken as f32 (the CLI allows f32 and bf16 only).
inline DType dtype_of(const std::string& name) {
  return parse_dtype(name).value_or(DType::kF32);
}
// The math mode a dtype runs in by its own right: "fp32" for f32, the dtype's name otherwise.
inline std::string math_mode_of(const std::string& dtype) {
  return std::string(math_mode_name(own_math_mode(dtype_of(dtype))));
}
// Bytes are counted in the models' f32: scaled to the element size of `dtype`.
inline double byte_scale_of(const std::string& dtype) {
  return static_cast<double>(element_size(dtype_of(dtype))) / static_cast<double>(element_size(DType::kF32));
}

}  // namespace floorline::analyzer
