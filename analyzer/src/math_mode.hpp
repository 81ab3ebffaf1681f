// The math mode the analyzer takes as a dtype's base: "fp32" for f32, the dtype's name otherwise
// (the generator's math_mode_for, which the analyzer does not link).
#pragma once

#include <string>

namespace floorline::analyzer {

inline std::string math_mode_of(const std::string& dtype) {
  return dtype == "f32" ? "fp32" : dtype;
}

}  // namespace floorline::analyzer
