#include "floorline/model_processor/tensor.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace floorline::mp {
namespace {
struct TypeName {
  DataType type;
  std::string_view name;
  int64_t size;
};
constexpr TypeName kTypes[] = {
    {DataType::kF32, "f32", 4}, {DataType::kU8, "u8", 1},         {DataType::kI8, "i8", 1},
    {DataType::kU16, "u16", 2}, {DataType::kI16, "i16", 2},       {DataType::kI32, "i32", 4},
    {DataType::kI64, "i64", 8}, {DataType::kString, "string", 0}, {DataType::kBool, "bool", 1},
    {DataType::kF16, "f16", 2}, {DataType::kF64, "f64", 8},       {DataType::kU32, "u32", 4},
    {DataType::kU64, "u64", 8}, {DataType::kBF16, "bf16", 2},
};
}  // namespace

std::string_view dtype_name(DataType t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.name;
  return "undefined";
}

std::optional<DataType> dtype_from_name(std::string_view name) {
  for (const auto& e : kTypes)
    if (e.name == name) return e.type;
  return std::nullopt;
}

int64_t dtype_size(DataType t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.size;
  return 0;
}

bool shape_known(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d >= 0; });
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d < 0) return -1;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  return overflow ? kNumelOverflow : n;
}

std::string shape_string(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (k) out += 'x';
    out += s[k] < 0 ? std::string("?") : std::to_string(s[k]);
  }
  return out;
}

std::string ints_string(const std::vector<int64_t>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

}  // namespace floorline::mp
