#include "floorline/kernels/problem.hpp"

#include <fmt/format.h>

namespace floorline::kernels {

const Operand* Problem::input(const std::string& role) const {
  for (const auto& o : inputs)
    if (o.role == role) return &o;
  return nullptr;
}
int64_t Problem::int_attr(const std::string& name, int64_t fallback) const {
  auto it = ints.find(name);
  return it == ints.end() || it->second.empty() ? fallback : it->second[0];
}
std::vector<int64_t> Problem::ints_attr(const std::string& name) const {
  auto it = ints.find(name);
  return it == ints.end() ? std::vector<int64_t>{} : it->second;
}
double Problem::float_attr(const std::string& name, double fallback) const {
  if (auto it = floats.find(name); it != floats.end() && !it->second.empty()) return it->second[0];
  if (auto it = ints.find(name); it != ints.end() && !it->second.empty())
    return static_cast<double>(it->second[0]);
  return fallback;
}
std::string Problem::string_attr(const std::string& name, const std::string& fallback) const {
  auto it = strings.find(name);
  return it == strings.end() ? fallback : it->second;
}

namespace {
[[noreturn]] void missing(const Problem& p, const std::string& name) {
  throw MissingAttribute(fmt::format("{}: attribute '{}' is missing (the IR always fills it)",
                                     p.key.empty() ? p.op : p.key, name));
}
}  // namespace

int64_t Problem::int_attr(const std::string& name) const {
  auto it = ints.find(name);
  if (it == ints.end() || it->second.empty()) missing(*this, name);
  return it->second[0];
}
double Problem::float_attr(const std::string& name) const {
  if (auto it = floats.find(name); it != floats.end() && !it->second.empty()) return it->second[0];
  if (auto it = ints.find(name); it != ints.end() && !it->second.empty())
    return static_cast<double>(it->second[0]);
  missing(*this, name);
}
std::string Problem::string_attr(const std::string& name) const {
  auto it = strings.find(name);
  if (it == strings.end()) missing(*this, name);
  return it->second;
}

}  // namespace floorline::kernels
