// Constant tensors read from and written as TensorProtos, external data included (tensor_io.hpp).
#include "tensor_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "floorline/common/utf8.hpp"

namespace floorline::mp {
namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp - 15 + 127) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <class T>
void append_raw(const std::string& raw, ConstTensor& c) {
  const size_t n = raw.size() / sizeof(T);
  for (size_t k = 0; k < n; ++k) {
    T v;
    std::memcpy(&v, raw.data() + k * sizeof(T), sizeof(T));
    if (c.is_integer())
      c.i.push_back(static_cast<int64_t>(v));
    else
      c.f.push_back(static_cast<double>(v));
  }
}

Status decode_raw(const std::string& raw, ConstTensor& c) {
  switch (c.dtype) {
    case DataType::kF32:
      append_raw<float>(raw, c);
      break;
    case DataType::kF64:
      append_raw<double>(raw, c);
      break;
    case DataType::kI64:
      append_raw<int64_t>(raw, c);
      break;
    case DataType::kI32:
      append_raw<int32_t>(raw, c);
      break;
    case DataType::kI16:
      append_raw<int16_t>(raw, c);
      break;
    case DataType::kI8:
      append_raw<int8_t>(raw, c);
      break;
    case DataType::kU8:
    case DataType::kBool:
      append_raw<uint8_t>(raw, c);
      break;
    case DataType::kU16:
      append_raw<uint16_t>(raw, c);
      break;
    case DataType::kU32:
      append_raw<uint32_t>(raw, c);
      break;
    case DataType::kU64:
      append_raw<uint64_t>(raw, c);
      break;
    case DataType::kF16:
      for (size_t k = 0; k + 1 < raw.size(); k += 2) {
        uint16_t h;
        std::memcpy(&h, raw.data() + k, 2);
        c.f.push_back(half_to_float(h));
      }
      break;
    default:
      return make_error("element type {} cannot be read", dtype_name(c.dtype));
  }
  return {};
}

// Parses a non-negative decimal integer of external_data (offset, length); nullopt otherwise.
std::optional<int64_t> parse_size(const std::string& text) {
  int64_t v = -1;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v < 0) return std::nullopt;
  return v;
}

// The bytes of an external-data tensor, read only from a regular file inside the model's folder
// (ONNX external data spec: `location` is relative to the model's directory). Refused before the
// file is opened: absolute paths, `..` components, links resolving outside the folder; after
// opening (O_NOFOLLOW | O_NONBLOCK, so a FIFO cannot block): anything but a regular file, a range
// past the file's end, more than the scope's budget. Nothing read from a refused file reaches a
// message: the errors quote the model's own strings only.
Result<std::string> read_external(const onnx::TensorProto& t, int64_t n, DataType dtype,
                                  ExternalDataScope& scope) {
  const auto ctx = fmt::format("tensor '{}'", t.name());
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      const auto v = parse_size(kv.value());
      if (!v)
        return make_error("{}: external data {} '{}' is not a non-negative integer", ctx, kv.key(),
                          to_valid_utf8(kv.value()));
      (kv.key() == "offset" ? offset : length) = *v;
    }
  }
  location = to_valid_utf8(location);
  namespace fs = std::filesystem;
  const fs::path rel(location);
  if (location.empty() || location.find('\0') != std::string::npos)
    return make_error("{}: external data has no valid location", ctx);
  if (rel.is_absolute())
    return make_error(
        "{}: external data location '{}' is an absolute path; only files inside the model's folder "
        "are read",
        ctx, location);
  for (const auto& part : rel)
    if (part == "..")
      return make_error(
          "{}: external data location '{}' leaves the model's folder; only files inside it are read", ctx,
          location);
  if (scope.dir.empty())
    return make_error("{}: external data is not accepted for a model without a folder", ctx);
  char* dir_real = ::realpath(scope.dir.c_str(), nullptr);
  if (!dir_real) return make_error("{}: cannot resolve the model's folder: {}", ctx, std::strerror(errno));
  const std::string folder = std::string(dir_real) + "/";
  std::free(dir_real);
  const std::string joined = (fs::path(scope.dir) / rel).string();
  char* file_real = ::realpath(joined.c_str(), nullptr);
  if (!file_real) {
    if (errno == ENOENT || errno == ENOTDIR)
      return make_error("{}: values are stored in external data file '{}', which is missing", ctx, location);
    return make_error("{}: external data file '{}' cannot be resolved: {}", ctx, location,
                      std::strerror(errno));
  }
  const std::string real(file_real);
  std::free(file_real);
  if (real.compare(0, folder.size(), folder) != 0)
    return make_error(
        "{}: external data location '{}' resolves outside the model's folder (a symbolic link); "
        "only files inside it are read",
        ctx, location);
  const int fd = ::open(real.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return make_error("{}: cannot open external data file '{}': {}", ctx, location, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return make_error("{}: external data location '{}' is not a regular file", ctx, location);
  const int64_t expected =
      dtype_size(dtype) > 0 && n <= INT64_MAX / dtype_size(dtype) ? n * dtype_size(dtype) : -1;
  if (length < 0) length = expected;
  if (length < 0)
    return make_error("{}: external data of element type {} cannot be read", ctx, dtype_name(dtype));
  int64_t end = 0;
  if (__builtin_add_overflow(offset, length, &end) || end > static_cast<int64_t>(st.st_size))
    return make_error("{}: external data file '{}' is shorter than offset {} + length {}", ctx, location,
                      offset, length);
  if (length != expected)
    return make_error("{}: external data length {} does not match its {} elements of {}", ctx, length, n,
                      dtype_name(dtype));
  if (length > scope.max_bytes - scope.loaded_bytes)
    return make_error("{}: external data of {} bytes exceeds what one model may load ({} MiB)", ctx, length,
                      scope.max_bytes >> 20);
  scope.loaded_bytes += length;
  std::string raw(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < raw.size()) {
    const ssize_t got = ::pread(fd, raw.data() + done, raw.size() - done, static_cast<off_t>(offset) + done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return make_error("{}: external data file '{}' is shorter than offset {} + length {}", ctx, location,
                        offset, length);
    done += static_cast<size_t>(got);
  }
  return raw;
}

}  // namespace

bool is_integer_type(DataType t) {
  switch (t) {
    case DataType::kU8:
    case DataType::kI8:
    case DataType::kU16:
    case DataType::kI16:
    case DataType::kI32:
    case DataType::kI64:
    case DataType::kBool:
    case DataType::kU32:
    case DataType::kU64:
      return true;
    default:
      return false;
  }
}

bool ConstTensor::is_integer() const {
  return is_integer_type(dtype);
}

int64_t saturate_to_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

int64_t ConstTensor::as_int(int64_t k) const {
  return is_integer() ? i[k] : saturate_to_int64(f[k]);
}

std::vector<int64_t> ConstTensor::ints() const {
  std::vector<int64_t> v(size());
  for (int64_t k = 0; k < size(); ++k) v[k] = as_int(k);
  return v;
}

Result<ConstTensor> read_tensor(const onnx::TensorProto& t, ExternalDataScope* scope) {
  ConstTensor c;
  c.dtype = static_cast<DataType>(t.data_type());
  c.dims.assign(t.dims().begin(), t.dims().end());
  const int64_t n = numel(c.dims);  // negative: a dim is negative or the count overflows
  const auto ctx = fmt::format("tensor '{}'", t.name());
  if (n < 0) return make_error("{}: dims {} are negative or overflow int64", ctx, shape_string(c.dims));
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!scope) return make_error("{}: external data is not accepted here (only for initializers)", ctx);
    FL_ASSIGN_OR_RETURN(std::string raw, read_external(t, n, c.dtype, *scope));
    auto st = decode_raw(raw, c);
    if (!st) return st.error().with_context(ctx);
  } else if (t.has_raw_data()) {
    auto st = decode_raw(t.raw_data(), c);
    if (!st) return st.error().with_context(ctx);
  } else {
    for (auto v : t.float_data()) c.f.push_back(v);
    for (auto v : t.double_data()) c.f.push_back(v);
    for (auto v : t.int64_data()) c.i.push_back(v);
    for (auto v : t.uint64_data()) c.i.push_back(static_cast<int64_t>(v));
    if (c.dtype == DataType::kF16 || c.dtype == DataType::kBF16) {
      for (auto v : t.int32_data()) {
        uint32_t bits = static_cast<uint32_t>(v) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        c.f.push_back(c.dtype == DataType::kF16 ? half_to_float(static_cast<uint16_t>(v)) : f);
      }
    } else {
      for (auto v : t.int32_data()) c.i.push_back(v);
    }
  }
  if (c.size() != n)
    return make_error("{}: holds {} values for shape {}", ctx, c.size(), shape_string(c.dims));
  if (c.dtype == DataType::kBF16 || c.dtype == DataType::kF16) c.dtype = DataType::kF32;
  return c;
}

onnx::TensorProto to_tensor_proto(const ConstTensor& c, const std::string& name) {
  onnx::TensorProto t;
  t.set_name(name);
  for (auto d : c.dims) t.add_dims(d);
  const DataType stored = c.is_integer() ? DataType::kI64 : DataType::kF64;
  // Keep the declared element type: shape inference checks it against consumers.
  t.set_data_type(static_cast<int32_t>(c.dtype));
  switch (c.dtype) {
    case DataType::kF32:
      for (double v : c.f) t.add_float_data(static_cast<float>(v));
      break;
    case DataType::kF64:
      for (double v : c.f) t.add_double_data(v);
      break;
    case DataType::kI64:
      for (int64_t v : c.i) t.add_int64_data(v);
      break;
    case DataType::kU64:
    case DataType::kU32:
      for (int64_t v : c.i) t.add_uint64_data(static_cast<uint64_t>(v));
      break;
    default:
      if (c.is_integer()) {
        for (int64_t v : c.i) t.add_int32_data(static_cast<int32_t>(v));
      } else {
        t.set_data_type(static_cast<int32_t>(stored));
        for (double v : c.f) t.add_double_data(v);
      }
  }
  return t;
}

}  // namespace floorline::mp
