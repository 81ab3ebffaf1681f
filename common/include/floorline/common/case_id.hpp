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
// sources: they must never change for the same identity.
//
// Two forms of one identity, with one conversion each way:
//   CaseId       the parts as text, as databases and names hold them (dtype and math mode are
//                dtype_name() / math_mode_name() of common/dtype.hpp). Rows read from a file keep
//                whatever text it has, also names this build does not know ("fp16" of older files).
//   CaseVariant  what code carries (kernels::CaseSpec, the planners): data type and math mode typed,
//                and no key, which belongs to the problem the variant is of (Problem::key). A
//                CaseVariant and a key make a CaseId (case_id()); a CaseId whose dtype and math
//                mode this build knows gives its CaseVariant back (case_variant()).
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "floorline/common/dtype.hpp"

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

// What tells the cases of one layer configuration apart, typed (see above).
struct CaseVariant {
  std::string backend;                   // "onednn", "cuda"
  std::string algorithm;                 // as the library spells it; no '/'
  DType dtype = DType::kF32;             // storage type of the tensors
  MathMode math_mode = MathMode::kFp32;  // own_math_mode(dtype), or tf32 for f32 on a GPU
  std::string layout;                    // as CaseId::layout
  std::string fusion;                    // as CaseId::fusion

  bool operator==(const CaseVariant&) const = default;
};

// The identity of the case `v` of the configuration `key`, as text.
inline CaseId case_id(const CaseVariant& v, std::string key) {
  return CaseId{v.backend,
                v.algorithm,
                std::string(dtype_name(v.dtype)),
                std::string(math_mode_name(v.math_mode)),
                v.layout,
                v.fusion,
                std::move(key)};
}

// Whose kernel a case runs: Floorline's own, or a vendor library's. The one rule, for every
// backend: the cases of the `floorline` backend (Floorline's own CPU kernels), and the cases of a
// GPU backend whose algorithm is one of its own kernels, named "floorline-kernel:<name>" (they run
// in that backend's device context and stream, so they stay in its plugin). Every other case runs
// a vendor library (oneDNN, XNNPACK, OpenBLAS, cuDNN, cuBLAS). The analyzer's S_vendor leaves the
// own ones out.
inline constexpr std::string_view kOwnBackend = "floorline";
inline constexpr std::string_view kOwnKernelPrefix = "floorline-kernel";
inline bool is_own_kernel(std::string_view backend, std::string_view algorithm) {
  return backend == kOwnBackend || algorithm.substr(0, kOwnKernelPrefix.size()) == kOwnKernelPrefix;
}
inline bool is_own_kernel(const CaseVariant& v) {
  return is_own_kernel(v.backend, v.algorithm);
}
inline bool is_own_kernel(const CaseId& id) {
  return is_own_kernel(id.backend, id.algorithm);
}
// The library whose kernel a case runs: "floorline" for our own, else the backend's name.
inline std::string library_of(const CaseVariant& v) {
  return is_own_kernel(v) ? std::string(kOwnBackend) : v.backend;
}

// An algorithm name's two parts at its first ':': oneDNN's variant and implementation
// ("convolution_direct" and "jit_1x1:avx512_core"), CUDA's family and variant ("cudnn_conv" and
// "IMPLICIT_GEMM:padded"); the whole name and "" where it has no ':'. The one reader of that
// separator (join_algorithm is its writer).
struct AlgorithmParts {
  std::string family;
  std::string rest;
};
inline AlgorithmParts split_algorithm(std::string_view algorithm) {
  const auto colon = algorithm.find(':');
  if (colon == std::string_view::npos) return {std::string(algorithm), ""};
  return {std::string(algorithm.substr(0, colon)), std::string(algorithm.substr(colon + 1))};
}
inline std::string join_algorithm(std::string_view family, std::string_view rest) {
  return std::string(family) + ":" + std::string(rest);
}

// "onednn/brg:avx512_core" for a case name: its backend and algorithm, what a reader of a report
// needs of it (parse_case_name; the name itself where it has not the form).
inline std::string backend_and_algorithm(std::string_view name) {
  const auto id = parse_case_name(name);
  return id ? id->backend + "/" + id->algorithm : std::string(name);
}

// The typed variant of `id` (its key dropped); nullopt when its dtype or math mode is not a name
// of common/dtype.hpp.
inline std::optional<CaseVariant> case_variant(const CaseId& id) {
  const auto dtype = parse_dtype(id.dtype);
  const auto mode = parse_math_mode(id.math_mode);
  if (!dtype || !mode) return std::nullopt;
  return CaseVariant{id.backend, id.algorithm, *dtype, *mode, id.layout, id.fusion};
}

// A layout-conversion case (a reorder, a transpose) converts one activation tensor of its
// configuration between two layouts: `tensor` is "src" (the layer's input, converted before the
// case it feeds) or "dst" (its output, converted after). Its text form is the case's layout,
// "src:abcd>aBcd16b": conversion_layout() writes it and parse_conversion() is the one place that
// reads it.
struct LayoutConversion {
  std::string tensor;  // "src" or "dst"
  std::string from;    // "abcd", "nchw"
  std::string to;      // "aBcd16b", "nhwc"

  bool operator==(const LayoutConversion&) const = default;
};

inline std::string conversion_layout(const LayoutConversion& c) {
  return c.tensor + ":" + c.from + ">" + c.to;
}

// The conversion a case's layout names; nullopt for any other layout ("", "nhwc", oneDNN's
// formats) and for text without a tensor, a source and a destination.
inline std::optional<LayoutConversion> parse_conversion(std::string_view layout) {
  const auto colon = layout.find(':');
  const auto arrow = layout.find('>');
  if (colon == std::string_view::npos || arrow == std::string_view::npos || colon == 0 || arrow < colon + 2 ||
      arrow + 1 == layout.size())
    return std::nullopt;
  return LayoutConversion{std::string(layout.substr(0, colon)),
                          std::string(layout.substr(colon + 1, arrow - colon - 1)),
                          std::string(layout.substr(arrow + 1))};
}

// The cases of one configuration, data type and math mode that a conversion case feeds: those
// with `algorithm` (oneDNN: the implementation asking for the blocked layout), or, with an empty
// algorithm, every case in `layout` (XNNPACK and CUDA: every NHWC case). Empty for a case that is
// not a conversion.
struct CaseFeeds {
  std::string algorithm;
  std::string layout;

  bool empty() const { return algorithm.empty() && layout.empty(); }
  bool operator==(const CaseFeeds&) const = default;
  auto operator<=>(const CaseFeeds&) const = default;  // a key of maps (the analyzer's conversions)
  // Whether a case of `algorithm` in `case_layout` is one of those fed.
  bool feeds(std::string_view case_algorithm, std::string_view case_layout) const {
    if (empty()) return false;
    return algorithm.empty() ? case_layout == layout : case_algorithm == algorithm && case_layout == layout;
  }
};

}  // namespace floorline
