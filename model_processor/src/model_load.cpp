// Loading a model: the wire-format skim that never reads a large weight's payload, and the checks
// and preparation of the parsed model (model_stages.hpp).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "composite.hpp"
#include "floorline/common/utf8.hpp"
#include "model_stages.hpp"
#include "opset18.hpp"
#include "validate.hpp"

namespace floorline::mp {

google::protobuf::ArenaOptions arena_options() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = size_t{64} << 10;
  o.max_block_size = size_t{4} << 20;
  return o;
}

google::protobuf::ArenaOptions reused_arena_options(ArenaSlot slot) {
  constexpr size_t kSize = size_t{8} << 20;
  thread_local std::unique_ptr<char[]> blocks[2];  // not zeroed: pages are touched as they are used
  auto& block = blocks[static_cast<int>(slot)];
  if (!block) block.reset(new char[kSize]);
  auto o = arena_options();
  o.initial_block = block.get();
  o.initial_block_size = kSize;
  return o;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Wire-format skim. Floorline needs every tensor's dims and type but never the payload of a large
// weight; protobuf would copy all of it into strings. The skim copies the serialized model field by
// field, leaving out the payload fields (raw_data and the packed typed-data fields) larger than
// `threshold` bytes of each initializer (ModelProto.graph = 7, GraphProto.initializer = 5). The file
// is read with pread(2) through one reused buffer and a left-out payload is passed over by moving
// the offset, so its bytes are never read (not even mapped): memory and time follow the size of
// the model's structure, not of its weights.
// Field numbers: onnx/onnx.proto3 (TensorProto: float_data 4, int32_data 5, int64_data 7,
// raw_data 9, double_data 10, uint64_data 11).

// A file read forward through a buffer that every load on the thread reuses.
class FileReader {
 public:
  static Result<FileReader> open(const std::filesystem::path& path) {
    FileReader f;
    // O_NONBLOCK: opening a FIFO named as a model must not wait for a writer.
    f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f.fd_ < 0) return make_error("cannot open: {}", std::strerror(errno));
    struct stat st {};
    if (fstat(f.fd_, &st) != 0) return make_error("cannot stat: {}", std::strerror(errno));
    if (S_ISDIR(st.st_mode)) return make_error("is a directory");
    if (!S_ISREG(st.st_mode)) return make_error("not a regular file (a device, FIFO or socket)");
    f.size_ = static_cast<uint64_t>(st.st_size);
    return f;
  }
  FileReader() = default;
  FileReader(FileReader&& o) noexcept { *this = std::move(o); }
  FileReader& operator=(FileReader&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(size_, o.size_);
    std::swap(pos_, o.pos_);
    std::swap(begin_, o.begin_);
    std::swap(end_, o.end_);
    std::swap(chunk_, o.chunk_);
    return *this;
  }
  ~FileReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  uint64_t size() const { return size_; }
  uint64_t pos() const { return pos_; }

  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!byte(b)) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Appends the next n bytes to `out`.
  bool append(uint64_t n, std::string& out) {
    if (n > size_ - pos_) return false;
    while (n > 0) {
      if (pos_ >= end_ && !fill()) return false;
      const uint64_t k = std::min(n, end_ - pos_);
      out.append(reinterpret_cast<const char*>(buffer().data() + (pos_ - begin_)), static_cast<size_t>(k));
      pos_ += k;
      n -= k;
    }
    return true;
  }
  // Passes over the next n bytes without reading them (beyond what the buffer already holds).
  bool skip(uint64_t n) {
    if (n > size_ - pos_) return false;
    pos_ += n;
    return true;
  }

 private:
  // 256 KiB: a few hundred reads for a model's structure, and well inside L2 for the copies.
  static std::vector<uint8_t>& buffer() {
    thread_local std::vector<uint8_t> buf(size_t{256} << 10);
    return buf;
  }
  bool byte(uint8_t& b) {
    if (pos_ >= end_ && !fill()) return false;
    b = buffer()[static_cast<size_t>(pos_ - begin_)];
    ++pos_;
    return true;
  }
  bool fill() {
    if (pos_ >= size_) return false;
    auto& buf = buffer();
    // After a skipped payload the next one is usually a few hundred bytes away: read a page, and
    // double the read while the structure goes on, so that skipping costs no copy of what follows.
    chunk_ = pos_ == end_ ? std::min(buf.size(), chunk_ * 2) : size_t{4096};
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk_, size_ - pos_));
    ssize_t got;
    do {
      got = ::pread(fd_, buf.data(), want, static_cast<off_t>(pos_));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) return false;  // an error, or the file shrank under us
    begin_ = pos_;
    end_ = pos_ + static_cast<uint64_t>(got);
    return true;
  }
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;              // file offset of the next byte
  uint64_t begin_ = 0, end_ = 0;  // the file range the buffer holds
  size_t chunk_ = 4096;           // bytes the next read asks for
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The message nesting the skim walks down: ModelProto → GraphProto (field 7) → TensorProto
// (initializer, field 5).
enum class Level { kModel, kGraph, kTensor };

// Copies the message that ends at file offset `end` into `out`, descending into the graph and its
// initializers and leaving out their large payloads. false on bad wire data.
bool skim_message(FileReader& in, uint64_t end, Level level, size_t threshold, std::string& out) {
  while (in.pos() < end) {
    uint64_t tag, v;
    if (!in.varint(tag)) return false;
    const auto number = static_cast<uint32_t>(tag >> 3);
    switch (tag & 7) {
      case 0:
        if (!in.varint(v)) return false;
        put_varint(out, tag);
        put_varint(out, v);
        break;
      case 1:
      case 5:
        put_varint(out, tag);
        if (!in.append((tag & 7) == 1 ? 8 : 4, out)) return false;
        break;
      case 2: {
        uint64_t len;
        if (!in.varint(len) || in.pos() > end || len > end - in.pos()) return false;
        const bool descend =
            (level == Level::kModel && number == 7) || (level == Level::kGraph && number == 5);
        const bool payload = level == Level::kTensor && (number == 4 || number == 5 || number == 7 ||
                                                         number == 9 || number == 10 || number == 11);
        if (descend) {
          std::string sub;
          if (!skim_message(in, in.pos() + len, level == Level::kModel ? Level::kGraph : Level::kTensor,
                            threshold, sub))
            return false;
          put_varint(out, tag);
          put_varint(out, sub.size());
          out += sub;
        } else if (payload && len > threshold) {
          if (!in.skip(len)) return false;
        } else {
          put_varint(out, tag);
          put_varint(out, len);
          if (!in.append(len, out)) return false;
        }
        break;
      }
      default:
        return false;  // groups are not used by ONNX
    }
  }
  return in.pos() == end;
}

std::optional<std::string> skim_model(FileReader& in, size_t threshold) {
  std::string out;
  if (!skim_message(in, in.size(), Level::kModel, threshold, out)) return std::nullopt;
  return out;
}

}  // namespace

bool payload_dropped(const onnx::TensorProto& t) {
  return t.data_location() != onnx::TensorProto::EXTERNAL && !t.has_raw_data() && t.float_data_size() == 0 &&
         t.int32_data_size() == 0 && t.int64_data_size() == 0 && t.double_data_size() == 0 &&
         t.uint64_data_size() == 0 && t.string_data_size() == 0;
}

int64_t tensor_numel(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (auto d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

Status validate_and_prepare(Loaded& L, int64_t max_elements) {
  register_contrib_schemas();
  auto& m = *L.model;
  if (m.ir_version() <= 0)
    return make_error("not an ONNX model: ir_version is {} (empty or non-ONNX data parses as an empty model)",
                      m.ir_version());
  if (!m.has_graph()) return make_error("not an ONNX model: it has no graph");
  std::optional<int64_t> declared;
  for (const auto& o : m.opset_import())
    if (default_domain(o.domain())) declared = o.version();
  if (m.opset_import_size() == 0) return make_error("model declares no opset_import");
  if (declared && *declared < 1)
    return make_error("model declares opset {} for the default ONNX domain; opsets start at 1", *declared);
  bool default_ops = false;
  for (const auto& n : m.graph().node()) default_ops = default_ops || default_domain(n.domain());
  if (!declared && default_ops)
    return make_error("model uses ops of the default ONNX domain but declares no opset for it");
  L.opset = declared.value_or(1);  // 1 when only custom domains are used
  // Names reach every output format: invalid UTF-8 is replaced here, once.
  sanitize_names(m);
  FL_TRY(validate_graph(m.graph()));
  if (L.opset < 7)
    L.warnings.push_back(
        fmt::format("opset {} is older than 7, the oldest Floorline supports; shapes may be wrong", L.opset));
  if (L.opset > kMaxKnownOpset) {
    L.warnings.push_back(
        fmt::format("opset {} is newer than ONNX 1.12 knows ({}); ops are read with their "
                    "opset-{} definitions",
                    L.opset, kMaxKnownOpset, kMaxKnownOpset));
    for (auto& o : *m.mutable_opset_import())
      if (default_domain(o.domain())) o.set_version(kMaxKnownOpset);
    L.read_as_17 = rewrite_opset18(m, &L.external, L.warnings);
  }
  // A merged decoder's composite ops are expanded per scenario, after its If is inlined
  // (pick_merged_branch, model.cpp): one pass over the final graph keeps read_as_17's indices whole.
  if (merged_decoder_if(m.graph()) < 0) expand_composite_ops(m, L.opset, L.read_as_17, L.warnings);
  // Weights are not needed: keep dims and type, drop the payload of every large tensor so that
  // each per-batch copy of the graph is cheap. Small tensors (shape constants) keep their values;
  // small external tensors are read in (only their bytes) where the data file is present.
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    const int64_t n = tensor_numel(t);
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      if (n > 4096) continue;
      auto value = read_tensor(t, &L.external);
      if (!value) {  // missing data file: only an error if a value is needed later
        L.unreadable_external.push_back(value.error().message);
        continue;
      }
      onnx::TensorProto inline_copy = to_tensor_proto(*value, t.name());
      inline_copy.set_data_type(t.data_type());
      if (t.data_type() == static_cast<int>(DataType::kF16) ||
          t.data_type() == static_cast<int>(DataType::kBF16))
        continue;  // cannot re-encode without loss; leave it external
      t = std::move(inline_copy);
      continue;
    }
    if (n > max_elements) {
      t.clear_raw_data();
      t.clear_float_data();
      t.clear_double_data();
      t.clear_int32_data();
      t.clear_int64_data();
      t.clear_uint64_data();
    }
  }
  for (const auto& t : m.graph().initializer()) L.initializers[t.name()] = &t;
  return {};
}

Result<Loaded> load_file(const std::filesystem::path& path, const ProcessOptions& opts) {
  Loaded L;
  L.external.max_bytes = opts.max_external_bytes;
  L.path = path;
  L.name = to_valid_utf8(path.stem().string());
  L.external.dir = path.has_parent_path() ? path.parent_path().string() : ".";
  FL_ASSIGN_OR_RETURN(auto file, FileReader::open(path));
  if (file.size() == 0) return make_error("empty file");
  // Payloads above 32 KiB (4096 elements of 8 bytes) are never read: shape constants are far
  // smaller, and an external tensor's value is read up to the same 4096 elements
  // (validate_and_prepare). On the full-weight zoo this leaves 6 MB of payloads to copy, not 19.
  const auto skimmed = skim_model(file, size_t{32} << 10);
  if (!skimmed)
    return make_error("not an ONNX model: protobuf parsing failed (truncated or not a ModelProto)");
  if (skimmed->size() > static_cast<size_t>(INT32_MAX))
    return make_error("model structure is {} bytes; protobuf messages are limited to 2 GiB", skimmed->size());
  if (!L.model->ParseFromString(*skimmed))
    return make_error("not an ONNX model: protobuf parsing failed (truncated or not a ModelProto)");
  L.structure_bytes = skimmed->size();
  FL_TRY(validate_and_prepare(L, opts.max_folded_elements));
  FL_ASSIGN_OR_RETURN(L.scenarios, dim_scenarios(L, opts.dims));
  L.dims = L.scenarios.front();
  return L;
}

}  // namespace floorline::mp
