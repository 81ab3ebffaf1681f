// The analyzer's data types are text (AnalyzeOptions, database columns); the rules are
// common/dtype.hpp's, applied here once for the analyzer's sources.
#pragma once

#include <optional>
#include <string>

#include "floorline/common/dtype.hpp"

namespace floorline::analyzer {

// The data type of a name; nullopt for a name common/dtype.hpp does not know (build_report
// refuses such a base dtype before anything is costed).
inline std::optional<DType> dtype_of(const std::string& name) {
  return parse_dtype(name);
}
// The math mode a dtype runs in by its own right: "fp32" for f32, the dtype's name otherwise;
// "" for an unknown dtype (a mode no case has: such a layer has no measured time).
inline std::string math_mode_of(const std::string& dtype) {
  const auto d = dtype_of(dtype);
  return d ? std::string(math_mode_name(own_math_mode(*d))) : std::string();
}
// Bytes are counted in the models' f32: scaled to the element size of `dtype`; nullopt for an
// unknown dtype (no roofline time).
inline std::optional<double> byte_scale_of(const std::string& dtype) {
  const auto d = dtype_of(dtype);
  if (!d) return std::nullopt;
  return static_cast<double>(element_size(*d)) / static_cast<double>(element_size(DType::kF32));
}

}  // namespace floorline::analyzer
