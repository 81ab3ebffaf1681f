// Full-weight copies of shape-only models (materialize.hpp).
#include "floorline/model_processor/materialize.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

namespace floorline::mp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSourceKey = "floorline.materialized_from";  // "<bytes>:<mtime ns>"
constexpr const char* kDataBytesKey = "floorline.materialized_data_bytes";

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014):
// one 64-bit state, good enough for weights, identical on every platform.
class Stream {
 public:
  explicit Stream(std::string_view name) : s_(fnv1a(name)) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t s_;
};

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // below the smallest normal: 0, never a denormal
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7bff);  // largest finite
  // Round to nearest even on the 13 dropped bits.
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(h);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

struct Range {
  double lo = 0, hi = 0;
};

Range range_of(FillRole role, int64_t fan_in) {
  switch (role) {
    case FillRole::kPositive:
      return {0.5, 1.5};
    case FillRole::kSmallBias:
      return {-0.1, 0.1};
    case FillRole::kWeight:
      break;
  }
  const double a = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  return {-a, a};
}

bool can_generate(DataType t) {
  switch (t) {
    case DataType::kF32:
    case DataType::kF16:
    case DataType::kBF16:
    case DataType::kF64:
    case DataType::kU8:
    case DataType::kI8:
    case DataType::kU16:
    case DataType::kI16:
    case DataType::kI32:
    case DataType::kI64:
    case DataType::kU32:
    case DataType::kU64:
    case DataType::kBool:
      return true;
    default:
      return false;
  }
}

std::string dtype_label(int32_t onnx_type) {
  const auto name = dtype_name(static_cast<DataType>(onnx_type));
  return name.empty() || name == "?" ? fmt::format("ONNX data type {}", onnx_type)
                                     : fmt::format("{} (ONNX data type {})", name, onnx_type);
}

// Appends `count` values of the stream to `out` as raw little-endian bytes.
void append_values(Stream& s, DataType dtype, int64_t count, Range r, std::string& out) {
  const size_t size = static_cast<size_t>(dtype_size(dtype));
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(count) * size);
  char* p = out.data() + at;
  if (dtype == DataType::kF32) {  // the common case, without the per-value dispatch below
    for (int64_t k = 0; k < count; ++k, p += 4) {
      float f = static_cast<float>(r.lo + (r.hi - r.lo) * s.uniform());
      if (std::fabs(f) < std::numeric_limits<float>::min()) f = 0.0f;
      std::memcpy(p, &f, 4);
    }
    return;
  }
  for (int64_t k = 0; k < count; ++k, p += size) {
    if (dtype == DataType::kF32 || dtype == DataType::kF16 || dtype == DataType::kBF16 ||
        dtype == DataType::kF64) {
      const double v = r.lo + (r.hi - r.lo) * s.uniform();
      if (dtype == DataType::kF64) {
        std::memcpy(p, &v, 8);
        continue;
      }
      float f = static_cast<float>(v);
      if (std::fabs(f) < std::numeric_limits<float>::min()) f = 0.0f;
      if (dtype == DataType::kF32) {
        std::memcpy(p, &f, 4);
      } else {
        const uint16_t h = dtype == DataType::kF16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::memcpy(p, &h, 2);
      }
    } else {
      const uint64_t bit = s.next() >> 63;  // 0 or 1 in any integer width
      std::memset(p, 0, size);
      std::memcpy(p, &bit, 1);  // little-endian: the low byte
    }
  }
}

// Every initializer of the graph and its subgraphs, with its first consumer (op type, input index).
struct Consumer {
  std::string op_type;
  int input = -1;
};

void collect(onnx::GraphProto& g, std::vector<onnx::TensorProto*>& tensors,
             std::unordered_map<std::string, Consumer>& consumers) {
  for (auto& t : *g.mutable_initializer()) tensors.push_back(&t);
  for (auto& n : *g.mutable_node()) {
    for (int i = 0; i < n.input_size(); ++i) consumers.emplace(n.input(i), Consumer{n.op_type(), i});
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) collect(*a.mutable_g(), tensors, consumers);
      for (auto& sub : *a.mutable_graphs()) collect(sub, tensors, consumers);
    }
  }
}

// How a tensor is filled, from the op that reads it.
std::pair<FillRole, int64_t> role_of(const onnx::TensorProto& t, const Consumer* c) {
  const auto& d = t.dims();
  const int rank = d.size();
  if (c) {
    const std::string& op = c->op_type;
    if ((op == "BatchNormalization" && (c->input == 1 || c->input == 4)) ||
        ((op == "LayerNormalization" || op == "InstanceNormalization" || op == "GroupNormalization") &&
         c->input == 1))
      return {FillRole::kPositive, 1};
  }
  if (rank <= 1) return {FillRole::kSmallBias, 1};
  int64_t fan_in = 1;
  for (int k = 1; k < rank; ++k) fan_in *= std::max<int64_t>(d[k], 1);
  if (c && c->input == 1 && c->op_type == "MatMul") fan_in = d[rank - 2];
  if (c && c->input == 1 && c->op_type == "Gemm" && rank == 2) fan_in = std::min(d[0], d[1]);
  return {FillRole::kWeight, fan_in};
}

struct External {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};

External external_of(const onnx::TensorProto& t) {
  External e;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location")
        e.location = kv.value();
      else if (kv.key() == "offset")
        e.offset = std::stoll(kv.value());
      else if (kv.key() == "length")
        e.length = std::stoll(kv.value());
    } catch (const std::exception&) {
      e.offset = -1;  // reported as a bad entry by the caller
    }
  }
  return e;
}

// The data file of an external tensor, which must lie inside the model's folder.
Result<fs::path> data_file(const fs::path& folder, const onnx::TensorProto& t, const External& e) {
  const fs::path loc(e.location);
  if (e.location.empty()) return make_error("tensor '{}': external data without a location", t.name());
  if (e.offset < 0) return make_error("tensor '{}': bad external data offset or length", t.name());
  if (loc.is_absolute())
    return make_error(
        "tensor '{}': external data location '{}' is absolute; only files inside the model's "
        "folder are read",
        t.name(), e.location);
  for (const auto& part : loc.lexically_normal())
    if (part == "..")
      return make_error("tensor '{}': external data location '{}' leaves the model's folder", t.name(),
                        e.location);
  fs::path p = folder / loc;
  std::error_code ec;
  if (fs::exists(p, ec)) {
    // A symbolic link may still point elsewhere: compare the resolved paths.
    const fs::path real = fs::weakly_canonical(p, ec);
    const fs::path root = fs::weakly_canonical(folder.empty() ? fs::path(".") : folder, ec);
    const auto rel = real.lexically_relative(root);
    if (rel.empty() || *rel.begin() == "..")
      return make_error("tensor '{}': external data file '{}' resolves outside the model's folder", t.name(),
                        e.location);
  }
  return p;
}

Result<onnx::ModelProto> read_model(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot read the file", path.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes))
    return make_error("{}: not an ONNX model (protobuf parse failed)", path.string());
  if (m.ir_version() <= 0 || !m.has_graph())
    return make_error("{}: not an ONNX model (ir_version {} and {} graph)", path.string(), m.ir_version(),
                      m.has_graph() ? "a" : "no");
  return m;
}

std::string source_stamp(const fs::path& model) {
  std::error_code ec;
  const auto size = fs::file_size(model, ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(model, ec);
  if (ec) return "";
  return fmt::format("{}:{}", size,
                     std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count());
}

int64_t padded(int64_t offset) {
  return (offset + kMaterializeAlignment - 1) / kMaterializeAlignment * kMaterializeAlignment;
}

}  // namespace

Result<std::string> fill_values(std::string_view name, DataType dtype, int64_t numel, FillRole role,
                                int64_t fan_in) {
  if (!can_generate(dtype))
    return make_error("cannot generate values of {}", dtype_label(static_cast<int32_t>(dtype)));
  Stream s(name);
  std::string out;
  append_values(s, dtype, numel, range_of(role, fan_in), out);
  return out;
}

Result<int64_t> count_missing_tensors(const fs::path& model) {
  FL_ASSIGN_OR_RETURN(onnx::ModelProto m, read_model(model));
  std::vector<onnx::TensorProto*> tensors;
  std::unordered_map<std::string, Consumer> consumers;
  collect(*m.mutable_graph(), tensors, consumers);
  int64_t missing = 0;
  for (const auto* t : tensors) {
    if (t->data_location() != onnx::TensorProto::EXTERNAL) continue;
    auto file = data_file(model.parent_path(), *t, external_of(*t));
    if (!file) return file.error().with_context(model.string());
    std::error_code ec;
    if (!fs::exists(*file, ec)) ++missing;
  }
  return missing;
}

Result<MaterializedModel> materialize_model(const fs::path& model, const fs::path& out_dir) {
  const std::string where = model.string();
  FL_ASSIGN_OR_RETURN(onnx::ModelProto m, read_model(model));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return make_error("{}: cannot create {}: {}", where, out_dir.string(), ec.message());
  const fs::path folder = model.parent_path();
  if (fs::equivalent(fs::weakly_canonical(folder.empty() ? "." : folder, ec),
                     fs::weakly_canonical(out_dir, ec), ec))
    return make_error("{}: --out {} is the model's own folder; the copy would replace the model", where,
                      out_dir.string());

  std::vector<onnx::TensorProto*> tensors;
  std::unordered_map<std::string, Consumer> consumers;
  collect(*m.mutable_graph(), tensors, consumers);

  // Check everything before writing anything.
  struct Plan {
    onnx::TensorProto* t;
    std::optional<fs::path> source;  // present data file, else generated
    External ext;
    int64_t bytes = 0;
  };
  std::vector<Plan> plans;
  int64_t missing = 0;
  for (auto* t : tensors) {
    if (t->data_location() != onnx::TensorProto::EXTERNAL) continue;
    const auto ctx = [&](const Error& e) { return e.with_context(where); };
    int64_t numel = 1;
    for (int64_t d : t->dims()) {
      if (d < 0)
        return make_error("{}: tensor '{}': dims [{}] are unknown (a negative dim)", where, t->name(),
                          fmt::join(t->dims(), ","));
      if (__builtin_mul_overflow(numel, d, &numel))
        return make_error("{}: tensor '{}': dims [{}] overflow 64 bits", where, t->name(),
                          fmt::join(t->dims(), ","));
    }
    const auto dtype = static_cast<DataType>(t->data_type());
    int64_t bytes = 0;
    if (__builtin_mul_overflow(numel, std::max<int64_t>(dtype_size(dtype), 1), &bytes) ||
        bytes > std::numeric_limits<int64_t>::max() - 2 * kMaterializeAlignment)
      return make_error("{}: tensor '{}': dims [{}] overflow 64 bits as bytes", where, t->name(),
                        fmt::join(t->dims(), ","));
    Plan p{t, std::nullopt, external_of(*t), bytes};
    auto file = data_file(folder, *t, p.ext);
    if (!file) return ctx(file.error());
    if (fs::exists(*file, ec)) {
      if (p.ext.length < 0) p.ext.length = bytes;
      const auto size = static_cast<int64_t>(fs::file_size(*file, ec));
      if (ec || size < p.ext.offset + p.ext.length)
        return make_error("{}: tensor '{}': external data file '{}' is shorter than offset {} + length {}",
                          where, t->name(), p.ext.location, p.ext.offset, p.ext.length);
      p.source = *file;
      p.bytes = p.ext.length;
    } else {
      if (!can_generate(dtype))
        return make_error("{}: tensor '{}': cannot generate values of {}", where, t->name(),
                          dtype_label(t->data_type()));
      ++missing;
    }
    plans.push_back(std::move(p));
  }
  if (missing == 0)
    return make_error(
        "{}: nothing to materialize: no tensor's external data is missing (the model is complete "
        "as it is)",
        where);

  MaterializedModel out;
  const std::string stem = model.stem().string();
  out.model = out_dir / (stem + ".onnx");
  out.data = out_dir / (stem + ".onnx.data");
  const fs::path data_tmp = out_dir / (stem + ".onnx.data.partial");
  const fs::path model_tmp = out_dir / (stem + ".onnx.partial");
  {
    std::ofstream data(data_tmp, std::ios::binary | std::ios::trunc);
    if (!data) return make_error("{}: cannot write {}", where, data_tmp.string());
    int64_t offset = 0;
    std::string chunk;
    constexpr int64_t kChunk = int64_t{4} << 20;  // bytes generated or copied at a time
    for (auto& p : plans) {
      const int64_t start = padded(offset);
      if (start > offset) {
        const std::string pad(static_cast<size_t>(start - offset), '\0');
        data.write(pad.data(), static_cast<std::streamsize>(pad.size()));
      }
      if (p.source) {
        std::ifstream in(*p.source, std::ios::binary);
        in.seekg(p.ext.offset);
        for (int64_t done = 0; done < p.bytes && in;) {
          const int64_t n = std::min(kChunk, p.bytes - done);
          chunk.resize(static_cast<size_t>(n));
          in.read(chunk.data(), n);
          data.write(chunk.data(), n);
          done += n;
        }
        if (!in)
          return make_error("{}: tensor '{}': cannot read {} bytes of '{}'", where, p.t->name(), p.bytes,
                            p.ext.location);
        ++out.copied;
      } else {
        const auto dtype = static_cast<DataType>(p.t->data_type());
        const auto it = consumers.find(p.t->name());
        const auto [role, fan_in] = role_of(*p.t, it == consumers.end() ? nullptr : &it->second);
        const Range r = range_of(role, fan_in);
        Stream s(p.t->name());
        const int64_t size = dtype_size(dtype);
        const int64_t numel = p.bytes / size;
        for (int64_t done = 0; done < numel;) {
          const int64_t n = std::min(kChunk / size, numel - done);
          chunk.clear();
          append_values(s, dtype, n, r, chunk);
          data.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
          done += n;
        }
        ++out.generated;
      }
      auto* ext = p.t->mutable_external_data();
      ext->Clear();
      auto add = [&](const char* k, const std::string& v) {
        auto* e = ext->Add();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", out.data.filename().string());
      add("offset", std::to_string(start));
      add("length", std::to_string(p.bytes));
      offset = start + p.bytes;
    }
    data.flush();
    if (!data) return make_error("{}: cannot write {} (disk full?)", where, data_tmp.string());
    out.data_bytes = offset;
  }
  // The stamp that materialized_up_to_date() compares, replacing one a copy of a copy carried.
  auto* props = m.mutable_metadata_props();
  for (int k = props->size() - 1; k >= 0; --k)
    if (props->Get(k).key() == kSourceKey || props->Get(k).key() == kDataBytesKey)
      props->DeleteSubrange(k, 1);
  auto stamp = [&](const char* k, const std::string& v) {
    auto* e = props->Add();
    e->set_key(k);
    e->set_value(v);
  };
  stamp(kSourceKey, source_stamp(model));
  stamp(kDataBytesKey, std::to_string(out.data_bytes));
  {
    std::ofstream f(model_tmp, std::ios::binary | std::ios::trunc);
    if (!f || !m.SerializeToOstream(&f)) return make_error("{}: cannot write {}", where, model_tmp.string());
  }
  fs::rename(data_tmp, out.data, ec);
  if (!ec) fs::rename(model_tmp, out.model, ec);
  if (ec) return make_error("{}: cannot rename into {}: {}", where, out_dir.string(), ec.message());
  return out;
}

bool materialized_up_to_date(const fs::path& model, const fs::path& out_dir) {
  const std::string stem = model.stem().string();
  const fs::path copy = out_dir / (stem + ".onnx");
  const fs::path data = out_dir / (stem + ".onnx.data");
  std::error_code ec;
  if (!fs::exists(copy, ec) || !fs::exists(data, ec)) return false;
  auto m = read_model(copy);
  if (!m) return false;
  std::string from, bytes;
  for (const auto& p : m->metadata_props()) {
    if (p.key() == kSourceKey) from = p.value();
    if (p.key() == kDataBytesKey) bytes = p.value();
  }
  const auto size = fs::file_size(data, ec);
  return !ec && !from.empty() && from == source_stamp(model) && bytes == std::to_string(size);
}

}  // namespace floorline::mp
