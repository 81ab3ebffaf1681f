#include "inference.hpp"

#include <cstring>

namespace floorline::mp {

void encode_i64(int64_t v, std::string& out) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}

void encode_string(const std::string& s, std::string& out) {
  encode_i64(static_cast<int64_t>(s.size()), out);
  out += s;
}

namespace {
void encode_dims(const Shape& s, std::string& out) {
  encode_i64(static_cast<int64_t>(s.size()), out);
  for (int64_t d : s) encode_i64(d, out);
}
}  // namespace

void encode_inference(const Inference& inf, std::string& out) {
  encode_i64(inf.batch, out);
  encode_i64(static_cast<int64_t>(inf.shapes.size()), out);
  for (const auto& [name, info] : inf.shapes) {
    encode_string(name, out);
    encode_i64(static_cast<int64_t>(info.dtype), out);
    encode_i64(info.shape ? 1 : 0, out);
    if (info.shape) encode_dims(*info.shape, out);
  }
  encode_i64(static_cast<int64_t>(inf.values.size()), out);
  for (const auto& [name, v] : inf.values) {
    encode_string(name, out);
    encode_i64(static_cast<int64_t>(v.dtype), out);
    encode_dims(v.dims, out);
    encode_i64(static_cast<int64_t>(v.i.size()), out);
    for (int64_t x : v.i) encode_i64(x, out);
    encode_i64(static_cast<int64_t>(v.f.size()), out);
    for (double x : v.f) {
      int64_t bits;
      std::memcpy(&bits, &x, 8);
      encode_i64(bits, out);
    }
  }
  encode_i64(static_cast<int64_t>(inf.constant.size()), out);
  for (const auto& name : inf.constant) encode_string(name, out);
  encode_i64(static_cast<int64_t>(inf.folded.size()), out);
  for (bool f : inf.folded) out.push_back(f ? '\1' : '\0');
  encode_i64(static_cast<int64_t>(inf.missing_values.size()), out);
  for (const auto& m : inf.missing_values) encode_string(m, out);
}

std::optional<int64_t> WireReader::i64() {
  if (in_.size() < 8) return std::nullopt;
  int64_t v;
  std::memcpy(&v, in_.data(), 8);
  in_.remove_prefix(8);
  return v;
}

std::optional<std::string> WireReader::string() {
  auto s = bytes();
  if (!s) return std::nullopt;
  return std::string(*s);
}

std::optional<std::string_view> WireReader::bytes() {
  auto n = i64();
  if (!n || *n < 0 || static_cast<uint64_t>(*n) > in_.size()) return std::nullopt;
  std::string_view s = in_.substr(0, static_cast<size_t>(*n));
  in_.remove_prefix(static_cast<size_t>(*n));
  return s;
}

std::optional<Inference> WireReader::inference() {
  // Counts are checked against the bytes left (each element takes at least 8), so a bad count
  // cannot make a large allocation.
  auto count = [&]() -> std::optional<int64_t> {
    auto n = i64();
    if (!n || *n < 0 || static_cast<uint64_t>(*n) > in_.size()) return std::nullopt;
    return n;
  };
  auto dims = [&]() -> std::optional<Shape> {
    auto n = count();
    if (!n) return std::nullopt;
    Shape s;
    for (int64_t k = 0; k < *n; ++k) {
      auto d = i64();
      if (!d) return std::nullopt;
      s.push_back(*d);
    }
    return s;
  };
  Inference inf;
  auto batch = i64();
  auto n = count();
  if (!batch || !n) return std::nullopt;
  inf.batch = *batch;
  for (int64_t k = 0; k < *n; ++k) {
    auto name = string();
    auto dtype = i64();
    auto has = i64();
    if (!name || !dtype || !has) return std::nullopt;
    ShapeInfo info;
    info.dtype = static_cast<DataType>(*dtype);
    if (*has) {
      info.shape = dims();
      if (!info.shape) return std::nullopt;
    }
    inf.shapes.emplace(std::move(*name), std::move(info));
  }
  if (!(n = count())) return std::nullopt;
  for (int64_t k = 0; k < *n; ++k) {
    auto name = string();
    auto dtype = i64();
    if (!name || !dtype) return std::nullopt;
    ConstTensor v;
    v.dtype = static_cast<DataType>(*dtype);
    auto d = dims();
    auto ni = count();
    if (!d || !ni) return std::nullopt;
    v.dims = std::move(*d);
    for (int64_t j = 0; j < *ni; ++j) {
      auto x = i64();
      if (!x) return std::nullopt;
      v.i.push_back(*x);
    }
    auto nf = count();
    if (!nf) return std::nullopt;
    for (int64_t j = 0; j < *nf; ++j) {
      auto x = i64();
      if (!x) return std::nullopt;
      double f;
      std::memcpy(&f, &*x, 8);
      v.f.push_back(f);
    }
    inf.values.emplace(std::move(*name), std::move(v));
  }
  if (!(n = count())) return std::nullopt;
  for (int64_t k = 0; k < *n; ++k) {
    auto name = string();
    if (!name) return std::nullopt;
    inf.constant.insert(std::move(*name));
  }
  if (!(n = count())) return std::nullopt;
  if (static_cast<uint64_t>(*n) > in_.size()) return std::nullopt;
  for (int64_t k = 0; k < *n; ++k) inf.folded.push_back(in_[static_cast<size_t>(k)] != '\0');
  in_.remove_prefix(static_cast<size_t>(*n));
  if (!(n = count())) return std::nullopt;
  for (int64_t k = 0; k < *n; ++k) {
    auto m = string();
    if (!m) return std::nullopt;
    inf.missing_values.push_back(std::move(*m));
  }
  return inf;
}

}  // namespace floorline::mp
