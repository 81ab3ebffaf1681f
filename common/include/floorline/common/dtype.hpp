// floorline/common/dtype.hpp — the data types a case's tensors are stored in, and the math modes
// each can run in.
//
// The one place for the rules that were restated per stage: a type's name and element size, and
// which math modes a type runs in. The database, case names and generated sources keep the text
// names ("f32", "f16", "bf16"; math modes "fp32", "tf32", "f16", "bf16"); code carries the enums.
//
// Math modes: the precision of the arithmetic, which can be lower than the storage type's.
//   fp32  strict IEEE single precision (Tensor Cores off: CUBLAS_COMPUTE_32F, CUDNN_DEFAULT_MATH)
//   tf32  f32 storage, TensorFloat-32 products on NVIDIA Tensor Cores (CUBLAS_COMPUTE_32F_FAST_TF32,
//         CUDNN_TENSOR_OP_MATH); GPUs only
//   f16   f16 storage and Tensor Core math
//   bf16  bf16 storage (and, on oneDNN, bf16 math)
//   int8  quantized: 8-bit integer activations (u8 or s8, with zero points) and s8 weights, s32
//         accumulation, f32 scales (oneDNN int8 primitives; a QDQ model's fused layers).
//         Which 8-bit type each operand has is the config's (the key's `qtypes`); a float config
//         planned in int8 (`--dtype int8`) takes u8 activations and per-channel s8 weights.
// The f16 mode is spelled as its type, like bf16 (the planners, calibration and analyzer derive a
// type's own mode from its name; "fp16" is not used).
//
// C++17 (the CUDA sources include it through device_kernels.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace floorline {

enum class DType : uint8_t { kF32, kF16, kBF16, /* quantization */ kInt8 };
enum class MathMode : uint8_t { kFp32, kTf32, kF16, kBF16, /* quantization */ kInt8 };

struct DTypeInfo {
  DType type;
  std::string_view name;
  int64_t size;       // bytes per element
  MathMode own_mode;  // the math mode of the type's own precision (strict fp32 for f32)
};

inline constexpr std::array<DTypeInfo, 4> kDTypes = {{
    {DType::kF32, "f32", 4, MathMode::kFp32},
    {DType::kF16, "f16", 2, MathMode::kF16},
    {DType::kBF16, "bf16", 2, MathMode::kBF16},
    /* quantization */
    {DType::kInt8, "int8", 1, MathMode::kInt8},
}};

inline constexpr std::array<std::pair<MathMode, std::string_view>, 5> kMathModeNames = {{
    {MathMode::kFp32, "fp32"},
    {MathMode::kTf32, "tf32"},
    {MathMode::kF16, "f16"},
    {MathMode::kBF16, "bf16"},
    /* quantization */
    {MathMode::kInt8, "int8"},
}};

constexpr const DTypeInfo& dtype_info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  return kDTypes[0];
}

// "f32", "f16", "bf16", "int8".
constexpr std::string_view dtype_name(DType t) {
  return dtype_info(t).name;
}
// Bytes per element: 4 for f32, 2 for f16 and bf16, 1 for int8.
constexpr int64_t element_size(DType t) {
  return dtype_info(t).size;
}
// nullopt for any other name (the command line's allow-list is the names of kDTypes).
inline std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

// "fp32", "tf32", "f16", "bf16".
constexpr std::string_view math_mode_name(MathMode m) {
  for (const auto& entry : kMathModeNames)
    if (entry.first == m) return entry.second;
  return "fp32";
}
inline std::optional<MathMode> parse_math_mode(std::string_view name) {
  for (const auto& entry : kMathModeNames)
    if (entry.second == name) return entry.first;
  return std::nullopt;
}

// The math mode a case of type `t` runs in unless a reduced one is asked for: the type's own
// precision. CPU backends plan this mode only.
constexpr MathMode own_math_mode(DType t) {
  return dtype_info(t).own_mode;
}

// Every math mode of type `t` on a device: its own, and for f32 on an op with Tensor Core
// kernels (`tensor_cores`: NVIDIA GPUs, convolutions and GEMMs) also tf32.
inline std::vector<MathMode> math_modes(DType t, bool tensor_cores) {
  if (t == DType::kF32 && tensor_cores) return {MathMode::kFp32, MathMode::kTf32};
  return {own_math_mode(t)};
}

}  // namespace floorline
