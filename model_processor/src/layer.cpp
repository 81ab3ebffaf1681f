#include "floorline/model_processor/layer.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace floorline::mp {

std::string attr_value_string(const AttrValue& v) {
  struct Visitor {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return fmt::format("{}", d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& l) const { return ints_string(l); }
    std::string operator()(const std::vector<double>& l) const {
      return fmt::format("{}", fmt::join(l, ","));
    }
  };
  return std::visit(Visitor{}, v);
}

std::string LayerConfig::canonical_key() const {
  std::string key(kind == LayerKind::kUnsupported ? fmt::format("Unsupported|op={}", op_type)
                                                  : std::string(kind_name(kind)));
  auto operand = [&](const TensorArg& t) {
    key += '|';
    key += t.role;
    if (t.flag_only) return;
    key += '=';
    key += shape_string(t.shape);
    if (t.dtype != dtype) {
      key += ':';
      key += dtype_name(t.dtype);
    }
  };
  for (const auto& t : inputs) operand(t);
  for (const auto& a : attrs) key += fmt::format("|{}={}", a.name, attr_value_string(a.value));
  if (key_includes_outputs)
    for (const auto& t : outputs) operand(t);
  key += '|';
  key += dtype_name(dtype);
  return key;
}

const Attr* LayerConfig::find_attr(std::string_view name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t LayerConfig::attr_int(std::string_view name, int64_t fallback) const {
  const Attr* a = find_attr(name);
  if (!a) return fallback;
  if (const auto* i = std::get_if<int64_t>(&a->value)) return *i;
  if (const auto* l = std::get_if<std::vector<int64_t>>(&a->value); l && l->size() == 1) return (*l)[0];
  return fallback;
}

std::vector<int64_t> LayerConfig::attr_ints(std::string_view name) const {
  const Attr* a = find_attr(name);
  if (!a) return {};
  if (const auto* l = std::get_if<std::vector<int64_t>>(&a->value)) return *l;
  if (const auto* i = std::get_if<int64_t>(&a->value)) return {*i};
  return {};
}

bool layout_agnostic(const Layer& layer) {
  using K = LayerKind;
  static const std::set<LayerKind> kKinds = {
      K::kRelu, K::kClip, K::kSigmoid,  K::kTanh,   K::kHardSwish, K::kHardSigmoid, K::kLeakyRelu,
      K::kElu,  K::kSelu, K::kErf,      K::kGelu,   K::kExp,       K::kLog,         K::kSqrt,
      K::kNeg,  K::kAbs,  K::kAdd,      K::kSub,    K::kMul,       K::kDiv,         K::kMax,
      K::kMin,  K::kSum,  K::kIdentity, K::kDropout};
  const auto& c = layer.config;
  if (!kKinds.count(c.kind) || c.outputs.size() != 1 || c.inputs.empty()) return false;
  return std::all_of(c.inputs.begin(), c.inputs.end(),
                     [&](const TensorArg& t) { return t.shape == c.outputs[0].shape; });
}

bool quantized_config(const LayerConfig& c) {
  return c.kind == LayerKind::kQuantizeLinear || c.kind == LayerKind::kDequantizeLinear ||
         c.find_attr("qtypes") != nullptr;
}

uint64_t key_hash(std::string_view key) {
  // FNV-1a, 64-bit (offset basis 14695981039346656037, prime 1099511628211).
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

std::string key_hash_hex(std::string_view key) {
  return fmt::format("{:016x}", key_hash(key));
}

}  // namespace floorline::mp
