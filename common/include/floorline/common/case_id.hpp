// floorline/common/case_id.hpp — what identifies one benchmark case, and its name.
//
// A case is a layer configuration (its canonical key) × backend × algorithm (or implementation) ×
// data type × math mode × layout × fusion. Its name spells all of them:
//
//   {backend}/{algorithm}/{dtype}/{math_mode}[.{layout}][+{fusion}]/{key}
//   onednn/convolution_direct:brg:avx512_core/f32/fp32+Relu/Conv|x=1x64x56x56|...|f32
//
// The name is derived here and parsed here, nowhere else (the database stores it in cases.name,
// written through this function, and its views read that column). Names are in databases and in generated
// sources: they must never change for the same identity. The parts are text, as the database stores them;
// dtype and math mode are dtype_name() / math_mode_name() of common/dtype.hpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace floorline {

struct CaseId {
  std::string backend;    // "onednn", "cuda"
  std::string algorithm;  // as the library spells it; no '/'
  std::string dtype;      // "f32", "f16", "bf16"
  std::string math_mode;  // "fp32", "tf32", "f16", "bf16"
  std::string layout;     // "" where it does not apply; "nhwc"; a conversion "src:abcd>aBcd16b"
  std::string fusion;     // "" or the fused ops: "Relu", "Add+Relu"
  std::string key;        // the layer configuration's canonical key

  bool operator==(const CaseId&) const = default;
};

// The case name (see above).
inline std::string case_name(const CaseId& c) {
  std::string n;
  n.reserve(c.backend.size() + c.algorithm.size() + c.dtype.size() + c.math_mode.size() + c.layout.size() +
            c.fusion.size() + c.key.size() + 6);
  n += c.backend;
  n += '/';
  n += c.algorithm;
  n += '/';
  n += c.dtype;
  n += '/';
  n += c.math_mode;
  if (!c.layout.empty()) n += "." + c.layout;
  if (!c.fusion.empty()) n += "+" + c.fusion;
  n += '/';
  n += c.key;
  return n;
}

// The inverse of case_name(); nullopt when `name` does not have that form (an empty backend,
// algorithm, dtype or math mode, or no key). The key is everything after the fourth '/'.
inline std::optional<CaseId> parse_case_name(std::string_view name) {
  CaseId p;
  std::string* fields[] = {&p.backend, &p.algorithm, &p.dtype};
  for (std::string* f : fields) {
    const auto slash = name.find('/');
    if (slash == std::string_view::npos || slash == 0) return std::nullopt;
    *f = std::string(name.substr(0, slash));
    name.remove_prefix(slash + 1);
  }
  const auto slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  std::string_view mode = name.substr(0, slash);
  p.key = std::string(name.substr(slash + 1));
  if (p.key.empty()) return std::nullopt;
  if (const auto plus = mode.find('+'); plus != std::string_view::npos) {
    p.fusion = std::string(mode.substr(plus + 1));
    mode = mode.substr(0, plus);
  }
  if (const auto dot = mode.find('.'); dot != std::string_view::npos) {
    p.layout = std::string(mode.substr(dot + 1));
    mode = mode.substr(0, dot);
  }
  p.math_mode = std::string(mode);
  return p;
}

}  // namespace floorline
