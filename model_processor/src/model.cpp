// Loading, re-batching, shape inference with constant folding, and the layer IR.
#include "floorline/model_processor/model.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

// After onnx/defs/parser.h: <sys/mman.h> defines MAP_TYPE, a name the ONNX parser uses.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <new>

#include "const_eval.hpp"
#include "einsum.hpp"
#include "floorline/common/utf8.hpp"
#include "inference.hpp"
#include "isolate.hpp"
#include "kinds.hpp"
#include "opset18.hpp"
#include "qdq.hpp"
#include "validate.hpp"

namespace floorline::mp {
namespace {

// The newest default-domain opset ONNX 1.12 knows.
constexpr int64_t kMaxKnownOpset = 17;
// Ops whose definition changed in opset 18 (onnx/docs/Changelog.md): opset18.hpp reads the forms
// with an opset-17 equivalent; the others stay Unsupported in a model of opset 18 or newer.
const std::set<std::string> kChangedIn18 = {
    "ReduceMean", "ReduceSum", "ReduceMax",     "ReduceMin",         "ReduceProd",
    "ReduceL1",   "ReduceL2",  "ReduceLogSum",  "ReduceLogSumExp",   "ReduceSumSquare",
    "Split",      "Pad",       "Resize",        "ScatterND",         "ScatterElements",
    "LpPool",     "Col2Im",    "CenterCropPad", "GroupNormalization"};
// Ops whose definition changed after opset 17 (onnx/docs/Changelog.md, opsets 18–21): in a
// model of a newer opset ONNX 1.12 would read them with the wrong signature (those not in
// kChangedIn18 changed in opset 19 or later).
const std::set<std::string> kChangedAfter17 = {"ReduceMean",
                                               "ReduceSum",
                                               "ReduceMax",
                                               "ReduceMin",
                                               "ReduceProd",
                                               "ReduceL1",
                                               "ReduceL2",
                                               "ReduceLogSum",
                                               "ReduceLogSumExp",
                                               "ReduceSumSquare",
                                               "Split",
                                               "Pad",
                                               "Resize",
                                               "ScatterND",
                                               "ScatterElements",
                                               "LpPool",
                                               "Col2Im",
                                               "CenterCropPad",
                                               "GroupNormalization",
                                               "Cast",
                                               "CastLike",
                                               "Constant",
                                               "Shape",
                                               "Size",
                                               "Identity",
                                               "If",
                                               "Loop",
                                               "Scan",
                                               "Reshape",
                                               "Squeeze",
                                               "Unsqueeze",
                                               "Flatten",
                                               "Transpose",
                                               "DequantizeLinear",
                                               "QuantizeLinear",
                                               "Pow",
                                               "Equal",
                                               "Less",
                                               "Greater",
                                               "AveragePool",
                                               "MaxPool",
                                               "GridSample",
                                               "DFT",
                                               "ConstantOfShape",
                                               "Gelu",
                                               "AffineGrid"};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Comparisons that ONNX defines as functions (no inference function in ONNX 1.12).
bool comparison_function(const std::string& op) {
  return op == "GreaterOrEqual" || op == "LessOrEqual";
}
// NumPy broadcasting of two known shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[k] = x == 1 ? y : x;
  }
  return out;
}

// Ops whose output size depends on the input's values (ProcessOptions::max_detections).
bool data_dependent(const std::string& op) {
  return op == "NonZero" || op == "NonMaxSuppression";
}

bool default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

// Blocks of 64 KiB growing to 4 MiB: a few dozen allocations for the largest zoo graph.
google::protobuf::ArenaOptions arena_options() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = size_t{64} << 10;
  o.max_block_size = size_t{4} << 20;
  return o;
}

// The same, starting in a block that the thread keeps for the next arena of `slot` (one arena of a
// slot alive at a time): the worker's short-lived request models and working copies reuse the same
// 8 MiB from model to model instead of allocating, faulting in and freeing theirs (glibc
// consolidating its free lists at each large free) for every model.
enum class ArenaSlot { kInference, kRequest };
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

// A parsed, validated model with its large initializer payloads dropped.
struct Loaded {
  Loaded() : Loaded(arena_options()) {}
  explicit Loaded(const google::protobuf::ArenaOptions& options)
      : arena(std::make_unique<google::protobuf::Arena>(options)),
        model(google::protobuf::Arena::CreateMessage<onnx::ModelProto>(arena.get())) {}

  std::string name;
  std::filesystem::path path;
  // Where external data files may be read from (the model's folder), and how much was read.
  mutable ExternalDataScope external;
  // The model lives on its own arena, freed at once with it: a large graph freed message by
  // message (and glibc consolidating the freed chunks) cost about as much as parsing it.
  std::unique_ptr<google::protobuf::Arena> arena;
  onnx::ModelProto* model;
  int64_t opset = 0;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  std::vector<std::string> warnings;
  std::vector<std::string> unreadable_external;  // why small external tensors could not be read
  std::set<int> read_as_17;    // top-level nodes of an opset >= 18 model read as opset 17 (opset18.hpp)
  size_t structure_bytes = 0;  // of the file, without the payloads that were passed over
};

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

// An initializer whose payload the skim left out: dims and type only.
bool payload_dropped(const onnx::TensorProto& t) {
  return t.data_location() != onnx::TensorProto::EXTERNAL && !t.has_raw_data() && t.float_data_size() == 0 &&
         t.int32_data_size() == 0 && t.int64_data_size() == 0 && t.double_data_size() == 0 &&
         t.uint64_data_size() == 0 && t.string_data_size() == 0;
}

// Element count of a tensor's dims; INT64_MAX when a dim is negative or the count overflows
// (validate_graph rejects both; this only keeps a caller from acting on a wrapped count).
int64_t tensor_numel(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (auto d : t.dims())
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

Status validate_and_prepare(Loaded& L, int64_t max_elements) {
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
  return L;
}

void read_type(const onnx::TypeProto& t, ShapeInfo& info) {
  if (!t.has_tensor_type()) return;
  info.dtype = static_cast<DataType>(t.tensor_type().elem_type());
  if (!t.tensor_type().has_shape()) return;
  Shape s;
  for (const auto& d : t.tensor_type().shape().dim()) s.push_back(d.has_dim_value() ? d.dim_value() : -1);
  info.shape = s;
}

void collect_shapes(const onnx::GraphProto& g, ShapeMap& out) {
  for (const auto& t : g.initializer()) {
    ShapeInfo info;
    info.dtype = static_cast<DataType>(t.data_type());
    info.shape = Shape(t.dims().begin(), t.dims().end());
    out[t.name()] = info;
  }
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list) {
      ShapeInfo info;
      read_type(v.type(), info);
      auto& slot = out[v.name()];
      if (info.shape || slot.dtype == DataType::kUndefined) slot = info;
    }
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_shapes(a.g(), out);
      for (const auto& sub : a.graphs()) collect_shapes(sub, out);
    }
}

std::string clean_onnx_message(std::string msg) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return msg;
}

Result<Inference> infer_at_batch(const Loaded& L, int64_t batch, const ProcessOptions& opts) {
  Inference inf;
  inf.batch = batch;
  const auto& graph = L.model->graph();
  const int node_count = graph.node_size();
  inf.folded.assign(node_count, false);
  std::vector<bool> evaluated(node_count, false);

  // The working copies of the model live on one arena, freed at once at the end (as Loaded::model).
  google::protobuf::Arena arena(reused_arena_options(ArenaSlot::kInference));
  // The model at this batch size. Built again only for a second whole-graph round (rare): a copy of
  // a large graph costs about as much as ONNX's inference of it.
  auto batched = [&] {
    onnx::ModelProto* copy = google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
    copy->CopyFrom(*L.model);
    onnx::ModelProto& m = *copy;
    auto* bg = m.mutable_graph();
    for (auto& in : *bg->mutable_input()) {
      if (L.initializers.count(in.name())) continue;  // IR < 4 lists initializers as inputs
      auto* tt = in.mutable_type()->mutable_tensor_type();
      if (!tt->has_shape() || tt->shape().dim_size() == 0) continue;
      auto* d0 = tt->mutable_shape()->mutable_dim(0);
      if (d0->has_dim_param() || !d0->has_dim_value() || d0->dim_value() == 1) d0->set_dim_value(batch);
    }
    for (auto& out : *bg->mutable_output())
      if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
    bg->clear_value_info();
    return copy;
  };
  for (const auto& t : graph.initializer()) inf.constant.insert(t.name());

  std::unordered_map<std::string, ConstTensor> init_values;  // lazily read initializer values
  auto value_of = [&](const std::string& name) -> const ConstTensor* {
    if (auto it = inf.values.find(name); it != inf.values.end()) return &it->second;
    if (auto it = init_values.find(name); it != init_values.end()) return &it->second;
    auto t = L.initializers.find(name);
    if (t == L.initializers.end()) return nullptr;
    const auto& proto = *t->second;
    if (tensor_numel(proto) > opts.max_folded_elements || payload_dropped(proto)) return nullptr;
    auto v = read_tensor(proto, &L.external);
    if (!v) {
      inf.missing_values.push_back(v.error().message);
      return nullptr;
    }
    return &init_values.emplace(name, std::move(*v)).first->second;
  };

  const auto* registry = onnx::OpSchemaRegistry::Instance();
  onnx::ModelProto* work = batched();
  int64_t folded_total = 0;
  for (int iteration = 0; iteration < 200; ++iteration) {
    try {
      onnx::shape_inference::InferShapes(*work, registry, onnx::ShapeInferenceOptions(false, 1, true));
    } catch (const std::bad_alloc&) {
      throw;  // the memory budget of the isolated child: reported by the parent
    } catch (const std::exception& e) {
      std::string msg = clean_onnx_message(e.what());
      if (msg.find("external tensors") != std::string::npos && !L.unreadable_external.empty())
        return make_error("shape inference needs values stored as external data: {}",
                          L.unreadable_external.front());
      return make_error("shape inference failed at batch {}: {}", batch, msg);
    }
    FL_TRY(check_inferred_dims(graph, work->graph()));
    inf.shapes.clear();
    collect_shapes(work->graph(), inf.shapes);

    // One topological sweep: fold what is constant; for the rest run the node's own ONNX inference
    // function on the types known so far, so that a Shape further down folds in this same sweep
    // instead of waiting for another whole-graph round.
    // The types ONNX's per-node functions see. An entry is made from inf.shapes when a node that is
    // typed first reads it (most tensors are never read: see `typed` below), and replaced when the
    // sweep types, folds or assumes the tensor.
    std::unordered_map<std::string, onnx::TypeProto> types;
    std::unordered_map<std::string, onnx::TypeProto*> type_ptrs;
    std::unordered_map<std::string, onnx::TensorProto> data;
    std::unordered_map<std::string, const onnx::TensorProto*> data_ptrs;
    auto type_of = [&](const std::string& name) -> const onnx::TypeProto* {
      if (auto it = type_ptrs.find(name); it != type_ptrs.end()) return it->second;
      auto s = inf.shapes.find(name);
      if (s == inf.shapes.end() || s->second.dtype == DataType::kUndefined) return nullptr;
      auto& t = types[name];
      auto* tt = t.mutable_tensor_type();
      tt->set_elem_type(static_cast<int32_t>(s->second.dtype));
      if (s->second.shape) {
        auto* shape = tt->mutable_shape();
        for (int64_t d : *s->second.shape) {
          auto* dim = shape->add_dim();
          if (d >= 0) dim->set_dim_value(d);
        }
      }
      type_ptrs[name] = &t;
      return &t;
    };
    // Whether every output of the node already has a type and fully known dims: then the node's own
    // inference function could only find them again (the whole-graph round typed it), and the sweep
    // passes it by.
    auto typed = [&](const onnx::NodeProto& n) {
      for (const auto& name : n.output()) {
        if (name.empty()) continue;
        auto it = inf.shapes.find(name);
        if (it == inf.shapes.end() || it->second.dtype == DataType::kUndefined || !it->second.shape ||
            !shape_known(*it->second.shape))
          return false;
      }
      return true;
    };
    for (const auto& t : work->graph().initializer()) data_ptrs[t.name()] = &t;
    auto set_shape = [&](const std::string& name, DataType dtype, const std::optional<Shape>& shape) {
      auto& slot = inf.shapes[name];
      slot.dtype = dtype;
      slot.shape = shape;
    };

    bool progress = false;
    // Whether this sweep typed every node it did not fold with fully known shapes, and folded every
    // node it tried to: then another whole-graph round would only repeat what the sweep found.
    bool complete = true;
    for (int idx = 0; idx < node_count; ++idx) {
      const auto& node = graph.node(idx);
      if (inf.folded[idx]) continue;
      // NonZero and NonMaxSuppression: how many elements they select depends on the data. Their
      // count is taken to be opts.max_detections (smaller where the input bounds it), so that the
      // detection heads downstream get concrete shapes; the report states the assumption.
      auto assume_data_dependent = [&](const onnx::NodeProto& n) {
        if (!data_dependent(n.op_type())) return;
        const bool nonzero = n.op_type() == "NonZero", nms = !nonzero;
        if (n.output_size() < 1 || n.input_size() < (nms ? 2 : 1)) return;
        auto in = inf.shapes.find(n.input(nonzero ? 0 : 1));
        if (in == inf.shapes.end() || !in->second.shape || !shape_known(*in->second.shape) ||
            (nms && in->second.shape->size() != 3)) {
          complete = false;
          return;
        }
        const Shape& x = *in->second.shape;
        const int64_t bound = numel(x);  // NonZero: every element; NMS: every (batch, class, box)
        const int64_t count = bound < 0 ? opts.max_detections : std::min(bound, opts.max_detections);
        const Shape out = nonzero ? Shape{static_cast<int64_t>(x.size()), count} : Shape{count, 3};
        auto& t = types[n.output(0)];
        t.Clear();
        t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(DataType::kI64));
        for (int64_t d : out) t.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
        type_ptrs[n.output(0)] = &t;
        set_shape(n.output(0), DataType::kI64, out);
      };
      // Types the node's outputs with ONNX's own inference function for this op, on the types
      // known so far.
      auto type_node = [&](const onnx::NodeProto& target) {
        if (typed(target)) return;
        for (const auto& name : target.input()) type_of(name);
        const auto* schema = registry->GetSchema(target.op_type(), static_cast<int>(L.opset), "");
        if (schema && !schema->has_type_and_shape_inference_function() &&
            comparison_function(target.op_type()) && target.input_size() == 2 && target.output_size() == 1 &&
            !target.output(0).empty()) {
          // GreaterOrEqual/LessOrEqual (opset 12 and 16) are ONNX functions with no inference
          // function of their own in ONNX 1.12: bool of the inputs' NumPy-broadcast shape. Without
          // this rule a detection head's comparison on a --max-detections count loses its shape.
          std::vector<Shape> shapes;
          for (const auto& name : target.input()) {
            auto it = inf.shapes.find(name);
            if (it == inf.shapes.end() || !it->second.shape || !shape_known(*it->second.shape)) break;
            shapes.push_back(*it->second.shape);
          }
          const auto out = shapes.size() == 2 ? broadcast_shapes(shapes[0], shapes[1]) : std::nullopt;
          if (!out) {
            complete = false;
            return;
          }
          auto& t = types[target.output(0)];
          t.Clear();
          t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(DataType::kBool));
          for (int64_t d : *out) t.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
          type_ptrs[target.output(0)] = &t;
          set_shape(target.output(0), DataType::kBool, *out);
          return;
        }
        if (!schema || !schema->has_type_and_shape_inference_function()) {
          complete = false;
          return;
        }
        onnx::NodeProto copy = target;
        try {
          onnx::shape_inference::InferenceContextImpl ctx(copy, type_ptrs, data_ptrs, {});
          schema->GetTypeAndShapeInferenceFunction()(ctx);
          for (int k = 0; k < target.output_size(); ++k) {
            if (target.output(k).empty()) continue;
            const auto* out = ctx.getOutputType(static_cast<size_t>(k));
            if (!out || !out->has_tensor_type()) {
              complete = false;
              continue;
            }
            types[target.output(k)] = *out;
            type_ptrs[target.output(k)] = &types[target.output(k)];
            ShapeInfo info;
            read_type(*out, info);
            if (info.shape) set_shape(target.output(k), info.dtype, info.shape);
            // (NonZero's and NonMaxSuppression's sizes are assumed below.)
            if ((!info.shape || !shape_known(*info.shape) || info.dtype == DataType::kUndefined) &&
                !(k == 0 && data_dependent(target.op_type())))
              complete = false;
          }
        } catch (const std::bad_alloc&) {
          throw;
        } catch (const std::exception&) {
          // The whole-graph inference below is the authority and reports errors.
          complete = false;
        }
        // ONNX 1.12 infers an Einsum's rank only: Floorline's own rule gives its dims.
        if (target.op_type() == "Einsum" && target.output_size() == 1 && !target.output(0).empty() &&
            types.count(target.output(0))) {
          std::string equation;
          for (const auto& a : target.attribute())
            if (a.name() == "equation") equation = a.s();
          std::vector<Shape> operands;
          for (const auto& name : target.input()) {
            auto it = inf.shapes.find(name);
            operands.push_back(it != inf.shapes.end() && it->second.shape ? *it->second.shape : Shape{-1});
          }
          if (auto y = einsum_output_shape(equation, operands)) {
            auto& t = types[target.output(0)];
            auto* shape = t.mutable_tensor_type()->mutable_shape();
            shape->clear_dim();
            for (int64_t d : *y) shape->add_dim()->set_dim_value(d);
            set_shape(target.output(0), static_cast<DataType>(t.tensor_type().elem_type()), *y);
          }
        }
        assume_data_dependent(target);
      };
      // A branch's Constant is folded (Unsqueeze's inference needs its axes' values), the rest typed.
      auto type_branch_node = [&](const onnx::NodeProto& sub) {
        if (sub.op_type() != "Constant" || sub.output_size() != 1) {
          type_node(sub);
          return;
        }
        auto outs = evaluate_node(sub, L.opset, {}, {}, opts.max_folded_elements);
        if (!outs || outs->size() != 1 || (*outs)[0].size() > 64) {
          type_node(sub);
          return;
        }
        const std::string& name = sub.output(0);
        const ConstTensor& v = (*outs)[0];
        set_shape(name, v.dtype, v.dims);
        data[name] = to_tensor_proto(v, name);
        data_ptrs[name] = &data[name];
        auto& t = types[name];
        t.Clear();
        t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(v.dtype));
        auto* shape = t.mutable_tensor_type()->mutable_shape();
        for (int64_t d : v.dims) shape->add_dim()->set_dim_value(d);
        type_ptrs[name] = &t;
      };
      // If: type the branches' nodes too (detection heads run NonMaxSuppression in a branch), so
      // that their layers get shapes; the If itself stays for the whole-graph inference.
      if (node.op_type() == "If") {
        for (const auto& a : node.attribute())
          if (a.has_g())
            for (const auto& sub : a.g().node())
              if (default_domain(sub.domain()) && sub.op_type() != "If" && sub.op_type() != "Loop" &&
                  sub.op_type() != "Scan")
                type_branch_node(sub);
        // A condition known at load time picks the branch, and the If's outputs take its types.
        auto cond = inf.values.find(node.input_size() > 0 ? node.input(0) : "");
        if (cond != inf.values.end() && cond->second.size() == 1) {
          const char* branch = cond->second.as_double(0) != 0 ? "then_branch" : "else_branch";
          for (const auto& a : node.attribute()) {
            if (a.name() != branch || !a.has_g()) continue;
            for (int k = 0; k < node.output_size() && k < a.g().output_size(); ++k) {
              const onnx::TypeProto* branch_type = type_of(a.g().output(k).name());
              if (!branch_type || node.output(k).empty()) continue;
              const onnx::TypeProto copy = *branch_type;
              types[node.output(k)] = copy;
              type_ptrs[node.output(k)] = &types[node.output(k)];
              ShapeInfo info;
              read_type(copy, info);
              if (info.shape) set_shape(node.output(k), info.dtype, info.shape);
            }
          }
        }
      }
      if (!default_domain(node.domain()) || is_nondeterministic_op(node.op_type()) ||
          node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan") {
        complete = false;
        continue;
      }
      const bool shape_op = node.op_type() == "Shape" || node.op_type() == "Size";
      std::vector<std::optional<Shape>> in_shapes;
      bool all_const = true;
      for (const auto& name : node.input()) {
        auto s = inf.shapes.find(name);
        in_shapes.push_back(s == inf.shapes.end() ? std::nullopt : s->second.shape);
        if (!name.empty() && !inf.constant.count(name)) all_const = false;
      }
      if (shape_op) all_const = !in_shapes.empty() && in_shapes[0] && shape_known(*in_shapes[0]);
      if (!all_const) {
        type_node(node);  // not constant
        continue;
      }

      std::vector<const ConstTensor*> ins;
      for (const auto& name : node.input())
        ins.push_back(name.empty() || shape_op ? nullptr : value_of(name));
      auto outs = evaluate_node(node, L.opset, ins, in_shapes, opts.max_folded_elements);
      inf.folded[idx] = true;
      for (const auto& name : node.output()) inf.constant.insert(name);
      // Not folded (a value not stored, an op the folder lacks, over the budget): a later round can
      // still type its outputs if this one has not. Typing them now with the op's own inference
      // function (Swin's ScatterND on constant masks) spares that whole-graph round.
      auto not_folded = [&] {
        for (const auto& name : node.output()) {
          auto it = inf.shapes.find(name);
          if (!name.empty() &&
              (it == inf.shapes.end() || !it->second.shape || !shape_known(*it->second.shape))) {
            type_node(node);
            return;
          }
        }
      };
      if (!outs || outs->size() != static_cast<size_t>(node.output_size())) {
        not_folded();
        continue;
      }
      // All folded values of one inference together stay within a budget too: a chain of
      // ConstantOfShape nodes each under the per-tensor cap must not add up without bound.
      int64_t size = 0;
      for (const auto& v : *outs) size += v.size();
      if (size > opts.max_folded_total - folded_total) {
        not_folded();
        continue;
      }
      folded_total += size;
      evaluated[idx] = true;
      progress = true;
      for (int k = 0; k < node.output_size(); ++k) {
        const std::string& name = node.output(k);
        auto& v = inf.values[name] = std::move((*outs)[k]);
        set_shape(name, v.dtype, v.dims);
        data[name] = to_tensor_proto(v, name);
        data_ptrs[name] = &data[name];
        auto& t = types[name];
        t.Clear();
        auto* tt = t.mutable_tensor_type();
        tt->set_elem_type(static_cast<int32_t>(v.dtype));
        auto* shape = tt->mutable_shape();
        for (int64_t d : v.dims) shape->add_dim()->set_dim_value(d);
        type_ptrs[name] = &t;
      }
    }
    // Nothing folded: the round's shapes are final. All typed by the sweep: so are they (a second
    // whole-graph round, the costliest step on shape-heavy graphs such as Swin's, would find the
    // same shapes).
    if (!progress || complete) break;

    // Feed the folded values back as initializers and infer again: shapes that hung on them resolve.
    work = batched();
    auto* wg = work->mutable_graph();
    wg->clear_node();
    for (int idx = 0; idx < node_count; ++idx)
      if (!evaluated[idx]) *wg->add_node() = graph.node(idx);
    for (int idx = 0; idx < node_count; ++idx)
      if (evaluated[idx])
        for (const auto& name : graph.node(idx).output())
          *wg->add_initializer() = to_tensor_proto(inf.values[name], name);
  }
  // Folded outputs that ONNX typed only through initializers keep their dims from the values.
  for (const auto& [name, v] : inf.values) {
    auto& slot = inf.shapes[name];
    slot.dtype = v.dtype;
    slot.shape = v.dims;
  }
  // ONNX 1.12 takes a literal Reshape target as given; the element counts must still agree.
  for (int idx = 0; idx < node_count; ++idx) {
    const auto& node = graph.node(idx);
    if (node.op_type() != "Reshape" || inf.folded[idx] || node.input_size() < 1) continue;
    auto in = inf.shapes.find(node.input(0)), out = inf.shapes.find(node.output(0));
    if (in == inf.shapes.end() || out == inf.shapes.end() || !in->second.shape || !out->second.shape)
      continue;
    const int64_t a = numel(*in->second.shape), b = numel(*out->second.shape);
    if (a >= 0 && b >= 0 && a != b)
      return make_error("node {} (Reshape) reshapes {} ({} elements) to {} ({} elements)",
                        node_label(node, idx), shape_string(*in->second.shape), a,
                        shape_string(*out->second.shape), b);
  }
  FL_TRY(check_conv_channels(graph, inf.shapes));
  return inf;
}

// ---------------------------------------------------------------------------------------------
// Isolation. ONNX 1.12's shape inference (and the checker-like code around it) trusts its input
// and can crash, loop or allocate without bound on a hostile model; it runs in a forked child per
// model, which sends back one record per batch size: a kind byte (0: the Inference, 1: an error
// about the model, 2: an error that is not about the batch size), then the payload.
enum class RecordKind : int64_t { kInference = 0, kError = 1 };

// Batch 1 (the reference every other batch is checked against) first, then the others in order.
std::vector<int64_t> inference_batches(const std::vector<int64_t>& batches) {
  std::vector<int64_t> out = {1};
  for (int64_t b : batches)
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

// A request to the inference worker: what infer_at_batch needs of the loaded model (the model as
// validated and stripped of its large payloads, so the worker re-parses only its structure) and of
// the options.
std::string encode_request(const Loaded& L, const ProcessOptions& opts, const std::vector<int64_t>& batches) {
  std::string out;
  encode_string(L.name, out);
  encode_string(L.path.string(), out);
  encode_string(L.external.dir, out);
  encode_i64(L.external.max_bytes, out);
  encode_i64(L.external.loaded_bytes, out);
  encode_i64(L.opset, out);
  encode_i64(static_cast<int64_t>(L.unreadable_external.size()), out);
  for (const auto& s : L.unreadable_external) encode_string(s, out);
  encode_i64(opts.max_folded_elements, out);
  encode_i64(opts.max_folded_total, out);
  encode_i64(opts.max_detections, out);
  encode_i64(static_cast<int64_t>(batches.size()), out);
  for (int64_t b : batches) encode_i64(b, out);
  // encode_string(model bytes), serialized in place: the length is written once they are known.
  const size_t at = out.size();
  encode_i64(0, out);
  L.model->AppendToString(&out);
  const auto size = static_cast<int64_t>(out.size() - at - 8);
  std::memcpy(out.data() + at, &size, 8);
  return out;
}

// The worker's side: decodes a request and answers with one record per batch (as above), stopping
// at the first error. A request it cannot read gets no record (the parent reports an incomplete
// result).
void serve_inference(std::string_view request, const std::function<bool(const std::string&)>& send) {
  WireReader in(request);
  Loaded L(reused_arena_options(ArenaSlot::kRequest));
  ProcessOptions opts;
  std::vector<int64_t> batches;
  auto name = in.string(), path = in.string(), dir = in.string();
  auto max_bytes = in.i64(), loaded = in.i64(), opset = in.i64(), notes = in.i64();
  if (!name || !path || !dir || !max_bytes || !loaded || !opset || !notes || *notes < 0) return;
  L.name = *name;
  L.path = *path;
  L.external.dir = *dir;
  L.external.max_bytes = *max_bytes;
  L.external.loaded_bytes = *loaded;
  L.opset = *opset;
  for (int64_t k = 0; k < *notes; ++k) {
    auto note = in.string();
    if (!note) return;
    L.unreadable_external.push_back(std::move(*note));
  }
  auto max_folded = in.i64(), max_total = in.i64(), max_detections = in.i64(), count = in.i64();
  if (!max_folded || !max_total || !max_detections || !count || *count < 0) return;
  opts.max_folded_elements = *max_folded;
  opts.max_folded_total = *max_total;
  opts.max_detections = *max_detections;
  for (int64_t k = 0; k < *count; ++k) {
    auto b = in.i64();
    if (!b) return;
    batches.push_back(*b);
  }
  auto model = in.bytes();
  if (!model || model->size() > static_cast<size_t>(INT32_MAX) ||
      !L.model->ParseFromArray(model->data(), static_cast<int>(model->size())))
    return;
  for (const auto& t : L.model->graph().initializer()) L.initializers[t.name()] = &t;
  for (int64_t b : batches) {
    std::string record;
    auto r = infer_at_batch(L, b, opts);
    encode_i64(static_cast<int64_t>(r ? RecordKind::kInference : RecordKind::kError), record);
    if (r)
      encode_inference(*r, record);
    else
      encode_string(r.error().message, record);
    if (!send(record) || !r) return;
  }
}

// The process's one inference worker, and the lock its callers take (process_model may be called
// from several threads).
std::mutex& worker_mutex() {
  static std::mutex m;
  return m;
}
IsolatedWorker& inference_worker() {
  static IsolatedWorker worker(serve_inference);
  return worker;
}
// Forks of the second workers of process_models calls so far (guarded by worker_mutex()).
int g_extra_forks = 0;

// One worker serves every model of the process (docs/SECURITY.md): the schema registry (all of
// ONNX's ops) is built before the first fork, so that no worker builds and discards it.
// (Instance() alone does not build it: the first lookup does.)
void build_schema_registry() {
  (void)onnx::OpSchemaRegistry::Schema("Identity", 1, "");
}

IsolationLimits isolation_limits(const ProcessOptions& opts) {
  return IsolationLimits{opts.inference_timeout_s, opts.inference_memory_mib};
}

// Shape inference at every batch size, stopping at the first error (the last element then holds
// it). In the worker process unless options.isolate is false.
Status submit_inference(const Loaded& L, const ProcessOptions& opts);
std::vector<Result<Inference>> collect_inference(const ProcessOptions& opts);
std::vector<Result<Inference>> decode_inference(const Result<IsolatedRun>& run, const ProcessOptions& opts);

std::vector<Result<Inference>> infer_all(const Loaded& L, const ProcessOptions& opts) {
  const auto batches = inference_batches(opts.batches);
  std::vector<Result<Inference>> out;
  if (!opts.isolate) {
    for (int64_t b : batches) {
      out.push_back(infer_at_batch(L, b, opts));
      if (!out.back()) break;
    }
    return out;
  }
  std::lock_guard<std::mutex> lock(worker_mutex());
  if (auto st = submit_inference(L, opts); !st) {
    out.push_back(st.error());
    return out;
  }
  return collect_inference(opts);
}

std::vector<Result<Inference>> collect_inference(const ProcessOptions& opts) {
  return decode_inference(inference_worker().collect(), opts);
}

// Sends the model's inference to the worker; the caller holds worker_mutex() until it collects.
Status submit_inference(const Loaded& L, const ProcessOptions& opts) {
  build_schema_registry();
  return inference_worker().submit(encode_request(L, opts, inference_batches(opts.batches)),
                                   isolation_limits(opts));
}

// The worker's answer to a request, as infer_all returns it.
std::vector<Result<Inference>> decode_inference(const Result<IsolatedRun>& run, const ProcessOptions& opts) {
  const auto batches = inference_batches(opts.batches);
  std::vector<Result<Inference>> out;
  if (!run) {
    out.push_back(run.error());
    return out;
  }
  WireReader in(run->output);
  while (!in.done() && out.size() < batches.size()) {
    const auto kind = in.i64();
    if (kind && *kind == static_cast<int64_t>(RecordKind::kInference)) {
      if (auto inf = in.inference()) {
        out.push_back(std::move(*inf));
        continue;
      }
    } else if (kind && *kind == static_cast<int64_t>(RecordKind::kError)) {
      if (auto msg = in.string()) {
        out.push_back(Error{std::move(*msg)});
        return out;
      }
    }
    break;  // a record cut short: the child died while writing it
  }
  if (out.size() == batches.size() && run->end == IsolatedRun::End::kExited) return out;
  // The child ended before sending every batch: say how, and at which batch.
  const int64_t batch = batches[std::min(out.size(), batches.size() - 1)];
  const std::string at = batch == 1 ? "" : fmt::format(" at batch {}", batch);
  Error e;
  switch (run->end) {
    case IsolatedRun::End::kTimedOut:
      e = make_error("shape inference did not finish in {} s{}", opts.inference_timeout_s, at);
      break;
    case IsolatedRun::End::kOutOfMemory:
      e = make_error("shape inference exceeded {} MiB{}", opts.inference_memory_mib, at);
      break;
    case IsolatedRun::End::kCrashed:
      e = run->signal ? make_error("ONNX shape inference crashed ({}){}", signal_name(run->signal), at)
                      : make_error("ONNX shape inference failed (the worker process ended early){}", at);
      break;
    case IsolatedRun::End::kExited:
      e = make_error("ONNX shape inference sent an incomplete result{}", at);
      break;
  }
  out.push_back(e);
  return out;
}

// After re-batching, a tensor must either not depend on the batch or carry it in exactly one dim.
Status check_rebatch(const Loaded& L, const Inference& ref, const Inference& inf) {
  const auto& graph = L.model->graph();
  for (int idx = 0; idx < graph.node_size(); ++idx) {
    if (inf.folded[idx] || ref.folded[idx]) continue;
    const auto& node = graph.node(idx);
    for (const auto& name : node.output()) {
      auto a = ref.shapes.find(name), b = inf.shapes.find(name);
      if (a == ref.shapes.end() || b == inf.shapes.end() || !a->second.shape || !b->second.shape) continue;
      const Shape &s1 = *a->second.shape, &sb = *b->second.shape;
      if (!shape_known(s1) || !shape_known(sb) || s1 == sb) continue;
      int scaled = 0, other = 0;
      if (s1.size() == sb.size())
        for (size_t k = 0; k < s1.size(); ++k) {
          if (s1[k] == sb[k]) continue;
          if (sb[k] == s1[k] * (inf.batch / ref.batch) && inf.batch % ref.batch == 0)
            ++scaled;
          else
            ++other;
        }
      if (s1.size() != sb.size() || scaled != 1 || other != 0)
        return make_error(
            "not re-batchable at batch {}: node {} ({}) output '{}' is {} at batch {} but {} at batch {} "
            "(a constant in the model pins the batch size)",
            inf.batch, node_label(node, idx), node.op_type(), name, shape_string(s1), ref.batch,
            shape_string(sb), inf.batch);
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Layer IR.

class IrBuilder {
 public:
  IrBuilder(const Loaded& L, const Inference& inf, ModelIR& ir) : L_(L), inf_(inf), ir_(ir) {}

  Status build() {
    const auto& g = L_.model->graph();
    FL_ASSIGN_OR_RETURN(auto order, topological_order(g));
    for (int idx : order) add_node(g.node(idx), idx, "", inf_.folded[idx]);
    if (overflow_) return *overflow_;
    // Quantized (QDQ) models: the int8 layers runtimes fuse (qdq.hpp).
    std::unordered_set<std::string> graph_outputs;
    for (const auto& o : g.output()) graph_outputs.insert(o.name());
    fuse_qdq(
        ir_, [this](const std::string& name) { return describe(name).value; }, graph_outputs);
    int64_t flops = 0, bytes = 0;
    for (const auto& l : ir_.layers)
      if (l.cost_bearing() &&
          (__builtin_add_overflow(flops, l.flops, &flops) || __builtin_add_overflow(bytes, l.bytes, &bytes)))
        return make_error("the model's total FLOPs or bytes do not fit in 64 bits (at node {})", l.name);
    for (const auto& [op, count] : unsupported_)
      ir_.warnings.push_back(fmt::format("{} layer(s) of op {}: {}", count, op, unsupported_why_[op]));
    if (unknown_shape_layers_ > 0) {
      std::string msg =
          fmt::format("{} cost-bearing layer(s) with unknown shapes (first: {}); their cost is not counted",
                      unknown_shape_layers_, first_unknown_);
      if (!inf_.missing_values.empty()) return make_error("{}; {}", msg, inf_.missing_values.front());
      ir_.warnings.push_back(msg);
    }
    return {};
  }

 private:
  static Result<std::vector<int>> topological_order(const onnx::GraphProto& g) {
    const int n = g.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : g.node(i).output())
        if (!o.empty()) producer[o] = i;
    std::vector<std::vector<int>> users(n);
    std::vector<int> indegree(n, 0);
    for (int i = 0; i < n; ++i) {
      std::set<int> deps;
      for (const auto& in : g.node(i).input())
        if (auto it = producer.find(in); it != producer.end() && it->second != i) deps.insert(it->second);
      for (int d : deps) {
        users[d].push_back(i);
        ++indegree[i];
      }
    }
    // Kahn's algorithm, always taking the lowest index ready: the file's order when it is valid.
    std::set<int> ready;
    for (int i = 0; i < n; ++i)
      if (indegree[i] == 0) ready.insert(i);
    std::vector<int> order;
    while (!ready.empty()) {
      const int i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (int u : users[i])
        if (--indegree[u] == 0) ready.insert(u);
    }
    if (static_cast<int>(order.size()) != n) return make_error("graph has a cycle");
    return order;
  }

  ValueDesc describe(const std::string& name) const {
    ValueDesc d;
    d.name = name;
    d.present = !name.empty();
    if (!d.present) return d;
    if (auto it = inf_.shapes.find(name); it != inf_.shapes.end()) {
      d.dtype = it->second.dtype;
      d.shape = it->second.shape;
    }
    if (auto it = inf_.values.find(name); it != inf_.values.end())
      d.value = &it->second;
    else if (auto o = owned_.find(name); o != owned_.end())
      d.value = &o->second;
    else if (auto t = L_.initializers.find(name); t != L_.initializers.end()) {
      // Small initializers (parameters such as Pad's pads) become attributes.
      if (tensor_numel(*t->second) <= 64 && t->second->data_location() != onnx::TensorProto::EXTERNAL) {
        auto v = read_tensor(*t->second, &L_.external);
        if (v) d.value = &owned_.emplace(name, std::move(*v)).first->second;
      }
    }
    return d;
  }

  void add_node(const onnx::NodeProto& node, int idx, const std::string& subgraph, bool folded) {
    const auto* registry = onnx::OpSchemaRegistry::Instance();
    NodeView v;
    v.node = &node;
    v.opset = L_.opset;
    const bool dflt = default_domain(node.domain());
    v.schema = registry->GetSchema(node.op_type(), static_cast<int>(std::min(L_.opset, kMaxKnownOpset)),
                                   dflt ? "" : node.domain());
    for (const auto& in : node.input()) v.in.push_back(describe(in));
    for (const auto& out : node.output()) v.out.push_back(describe(out));

    std::optional<LayerKind> kind = dflt && v.schema ? kind_from_op_type(node.op_type()) : std::nullopt;
    // Einsum: a matrix product becomes a MatMul of its folded shapes (einsum.hpp); any other
    // equation stays Unsupported, named.
    std::optional<EinsumMatMul> einsum;
    const bool is_einsum = dflt && v.schema && node.op_type() == "Einsum";
    if (is_einsum) {
      std::string equation, why;
      for (const auto& a : node.attribute())
        if (a.name() == "equation") equation = a.s();
      if (v.in.size() == 2 && v.in[0].shape && v.in[1].shape)
        einsum = einsum_as_matmul(equation, *v.in[0].shape, *v.in[1].shape, &why);
      else
        why = v.in.size() != 2 ? "not two operands" : "operand shapes unknown";
      if (!einsum)
        note_unsupported(
            node.op_type(),
            fmt::format("equation '{}' is not a matrix product ({}); kept as Unsupported", equation, why));
    }
    const bool changed =
        L_.opset >= 19 ? kChangedAfter17.count(node.op_type()) > 0 : kChangedIn18.count(node.op_type()) > 0;
    const bool read_as_17 = subgraph.empty() && L_.read_as_17.count(idx) > 0;
    if (kind && L_.opset > kMaxKnownOpset && changed && !read_as_17) {
      note_unsupported(node.op_type(),
                       fmt::format("redefined after opset 17; this model's opset {} is newer than "
                                   "ONNX 1.12 knows, so it is kept as Unsupported",
                                   L_.opset));
      kind.reset();
    } else if (!kind && !is_einsum) {
      note_unsupported(node.op_type(),
                       !v.schema
                           ? fmt::format("not known to ONNX 1.12 (domain '{}'); kept as Unsupported, "
                                         "costed by its roofline time",
                                         node.domain())
                           : "no Floorline layer kind yet; kept as Unsupported, costed by its roofline time");
    }
    Layer layer;
    layer.index = static_cast<int>(ir_.layers.size());
    layer.name =
        subgraph.empty() ? node_label(node, idx) : fmt::format("{}/{}", subgraph, node_label(node, idx));
    layer.op_type = node.op_type();
    layer.subgraph = subgraph;
    layer.folded = folded;
    layer.config = normalize(v, einsum ? LayerKind::kMatMul : kind.value_or(LayerKind::kUnsupported),
                             &layer.input_names);
    if (einsum && layer.config.inputs.size() == 2 && layer.config.outputs.size() == 1) {
      layer.config.inputs[0].role = "a";
      layer.config.inputs[0].shape = einsum->a;
      layer.config.inputs[1].role = "b";
      layer.config.inputs[1].shape = einsum->b;
      layer.config.outputs[0].shape = einsum->y;
      layer.config.attrs.clear();  // the equation is in the shapes: equal GEMMs share one key
    }
    layer.cost = folded ? CostClass::kHost : kind_cost_class(layer.config.kind);
    layer.key = layer.config.canonical_key();
    layer.shapes_known = true;
    for (const auto* list : {&layer.config.inputs, &layer.config.outputs})
      for (const auto& t : *list)
        if (!shape_known(t.shape)) layer.shapes_known = false;
    if (layer.cost_bearing()) {
      if (layer.shapes_known) {
        const int64_t flops = config_flops(layer.config), bytes = config_bytes(layer.config);
        if ((flops == kCostOverflow || bytes == kCostOverflow) && !overflow_)
          overflow_ = make_error("node {} ({}): its {} do not fit in 64 bits ({})", layer.name, layer.op_type,
                                 flops == kCostOverflow ? "FLOPs" : "bytes", layer.key);
        layer.flops = std::max<int64_t>(0, flops);
        layer.bytes = std::max<int64_t>(0, bytes);
      } else if (unknown_shape_layers_++ == 0) {
        first_unknown_ = fmt::format("{} ({})", layer.name, layer.op_type);
      }
    }
    std::set<int> preds;
    for (const auto& in : node.input()) {
      auto it = producer_.find(in);
      if (it != producer_.end() && ir_.layers[it->second].cost != CostClass::kHost) preds.insert(it->second);
    }
    layer.preds.assign(preds.begin(), preds.end());
    for (const auto& out : node.output()) {
      layer.output_names.push_back(out);
      if (!out.empty()) producer_[out] = layer.index;
    }
    const std::string label = layer.name;
    ir_.layers.push_back(std::move(layer));

    // Subgraphs: their layers are processed and counted, marked with the subgraph they sit in.
    for (const auto& a : node.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sg : a.graphs()) subs.push_back(&sg);
      for (const auto* sg : subs) {
        const std::string path = fmt::format("{}/{}", label, a.name());
        for (int k = 0; k < sg->node_size(); ++k) add_node(sg->node(k), k, path, false);
      }
    }
  }

  void note_unsupported(const std::string& op, std::string why) {
    ++unsupported_[op];
    unsupported_why_[op] = std::move(why);
  }

  const Loaded& L_;
  const Inference& inf_;
  ModelIR& ir_;
  std::unordered_map<std::string, int> producer_;
  mutable std::unordered_map<std::string, ConstTensor> owned_;
  std::map<std::string, int> unsupported_;
  std::map<std::string, std::string> unsupported_why_;
  int unknown_shape_layers_ = 0;
  std::string first_unknown_;
  std::optional<Error> overflow_;  // the first layer whose cost does not fit int64
};

// `m` as field `number` of the message being written: tag, length, bytes, as the enclosing message's
// own serializer writes a sub-message.
void write_message_field(google::protobuf::io::CodedOutputStream& out, int number,
                         const google::protobuf::MessageLite& m) {
  using Wire = google::protobuf::internal::WireFormatLite;
  const size_t size = m.ByteSizeLong();  // caches the sizes SerializeWithCachedSizes needs
  out.WriteTag(Wire::MakeTag(number, Wire::WIRETYPE_LENGTH_DELIMITED));
  out.WriteVarint32(static_cast<uint32_t>(size));
  m.SerializeWithCachedSizes(&out);
}

// A hash of the graph's structure: nodes (with their attributes), graph inputs/outputs, and the
// names, types and dims of initializers, but none of their values, so two exports of one
// architecture with different random weights match, and any change to the work does not.
// The value is stored in databases (models are matched by name and fingerprint): it is FNV-1a of
// the deterministic serialization of the graph with its doc_string and every initializer's payload,
// external_data and doc_string cleared. The graph is written here field by field in field-number
// order (GraphProto: node 1, name 2, initializer 5, input 11, output 12, value_info 13,
// quantization_annotation 14, sparse_initializer 15, then unknown fields), which gives those bytes
// without copying the graph.
std::string graph_fingerprint(const onnx::GraphProto& g) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    for (const auto& n : g.node()) write_message_field(cos, 1, n);
    if (g.has_name()) google::protobuf::internal::WireFormatLite::WriteString(2, g.name(), &cos);
    // An initializer as the fields it keeps without its payload: dims 1, data_type 2, segment 3,
    // name 8, data_location 14 and unknown fields.
    onnx::TensorProto bare;
    for (const auto& t : g.initializer()) {
      bare.Clear();
      *bare.mutable_dims() = t.dims();
      if (t.has_data_type()) bare.set_data_type(t.data_type());
      if (t.has_segment()) *bare.mutable_segment() = t.segment();
      if (t.has_name()) bare.set_name(t.name());
      if (t.has_data_location()) bare.set_data_location(t.data_location());
      if (!t.unknown_fields().empty()) bare.mutable_unknown_fields()->MergeFrom(t.unknown_fields());
      write_message_field(cos, 5, bare);
    }
    for (const auto& v : g.input()) write_message_field(cos, 11, v);
    for (const auto& v : g.output()) write_message_field(cos, 12, v);
    for (const auto& v : g.value_info()) write_message_field(cos, 13, v);
    for (const auto& a : g.quantization_annotation()) write_message_field(cos, 14, a);
    for (const auto& s : g.sparse_initializer()) write_message_field(cos, 15, s);
    if (!g.unknown_fields().empty())
      google::protobuf::internal::WireFormat::SerializeUnknownFields(g.unknown_fields(), &cos);
  }
  return key_hash_hex(bytes);
}

Status check_options(const ProcessOptions& opts) {
  if (opts.batches.empty()) return make_error("no batch size requested");
  for (auto b : opts.batches)
    if (b < 1 || b > kMaxDim) return make_error("batch size {} is outside 1..{}", b, kMaxDim);
  if (opts.max_detections < 1 || opts.max_detections > kMaxDim)
    return make_error("--max-detections {} is outside 1..{}", opts.max_detections, kMaxDim);
  return {};
}

// The layer IR at every batch from the model and its inference. `setup_ms`: loading and inference
// time, charged to the first batch's process_ms.
Result<std::vector<ModelIR>> build_models(const Loaded& L, const ProcessOptions& opts,
                                          const std::vector<Result<Inference>>& inferred, double setup_ms) {
  const auto batches = inference_batches(opts.batches);
  // The inference of batch b, or its error (batch 1's error stands for every batch: it is the reference).
  auto inference_at = [&](int64_t b) -> Result<const Inference*> {
    const size_t k = static_cast<size_t>(std::find(batches.begin(), batches.end(), b) - batches.begin());
    if (!inferred[0]) return inferred[0].error();
    if (k >= inferred.size()) return make_error("shape inference stopped before batch {}", b);  // not reached
    if (!inferred[k]) {
      const auto& msg = inferred[k].error().message;
      // A crash, time-out or memory cap is no statement about the batch size.
      if (msg.rfind("ONNX shape inference", 0) == 0 || msg.rfind("shape inference did not", 0) == 0 ||
          msg.rfind("shape inference exceeded", 0) == 0)
        return inferred[k].error();
      return make_error("not re-batchable at batch {}: {}", b, msg);
    }
    return &inferred[k].value();
  };
  const std::string fingerprint = graph_fingerprint(L.model->graph());
  std::vector<ModelIR> out;
  for (int64_t b : opts.batches) {
    const auto tb = Clock::now();
    FL_ASSIGN_OR_RETURN(const Inference* r1, inference_at(1));
    FL_ASSIGN_OR_RETURN(const Inference* inf, inference_at(b));
    if (b != 1) FL_TRY(check_rebatch(L, *r1, *inf));
    ModelIR ir;
    ir.name = L.name;
    ir.path = L.path;
    ir.batch = b;
    ir.ir_version = L.model->ir_version();
    ir.opset = L.opset;
    ir.node_count = L.model->graph().node_size();
    ir.fingerprint = fingerprint;
    ir.warnings = L.warnings;
    IrBuilder builder(L, *inf, ir);
    FL_TRY(builder.build());
    int64_t assumed = 0;
    for (const auto& l : ir.layers)
      if (!l.folded && data_dependent(l.op_type) && l.shapes_known) ++assumed;
    if (assumed > 0)
      ir.assumption = fmt::format(
          "--max-detections {}: {} NonZero/NonMaxSuppression layer(s) assumed to select {} element(s) "
          "(fewer where their input has fewer)",
          opts.max_detections, assumed, opts.max_detections);
    ir.process_ms = ms_since(tb) + (out.empty() ? setup_ms : 0.0);
    out.push_back(std::move(ir));
  }
  return out;
}

Result<std::vector<ModelIR>> process_loaded(Loaded& L, const ProcessOptions& opts, Clock::time_point t0) {
  FL_TRY(check_options(opts));
  auto inferred = infer_all(L, opts);
  return build_models(L, opts, inferred, ms_since(t0));
}

}  // namespace

namespace {
// An error fit for every output: one line, valid UTF-8 (a file name or a library's message may
// carry any bytes).
Error safe_error(Error e) {
  e.message = to_valid_utf8(clean_onnx_message(std::move(e.message)));
  return e;
}
}  // namespace

int inference_worker_forks() {
  std::lock_guard<std::mutex> lock(worker_mutex());
  return inference_worker().forks() + g_extra_forks;
}

int second_inference_worker_forks() {
  std::lock_guard<std::mutex> lock(worker_mutex());
  return g_extra_forks;
}

int inference_worker_count(size_t models, const ProcessOptions& opts) {
  if (models < 2) return 1;
  if (opts.inference_workers > 0) return std::min(opts.inference_workers, 2);
  // The CPUs this process may run on (taskset, a container's cpuset), else the machine's.
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  return cpus >= 4 ? 2 : 1;
}

int64_t ModelIR::total_flops() const {
  int64_t f = 0;
  for (const auto& l : layers)
    if (l.cost_bearing()) f += l.flops;
  return f;
}

int64_t ModelIR::total_bytes() const {
  int64_t b = 0;
  for (const auto& l : layers)
    if (l.cost_bearing()) b += l.bytes;
  return b;
}

Result<std::vector<ModelIR>> process_model(const std::filesystem::path& path, const ProcessOptions& opts) {
  const auto t0 = Clock::now();
  const std::string ctx = path.string();
  try {
    auto loaded = load_file(path, opts);
    if (!loaded) return safe_error(loaded.error().with_context(ctx));
    auto result = process_loaded(*loaded, opts, t0);
    if (!result) return safe_error(result.error().with_context(ctx));
    return result;
  } catch (const std::bad_alloc&) {
    return make_error("{}: out of memory while loading the model", to_valid_utf8(ctx));
  } catch (const std::exception& e) {
    return safe_error(make_error("{}: {}", ctx, clean_onnx_message(e.what())));
  }
}

void process_models(const std::vector<std::filesystem::path>& paths, const ProcessOptions& opts,
                    const std::function<void(size_t, Result<std::vector<ModelIR>>)>& done) {
  if (!opts.isolate) {
    for (size_t i = 0; i < paths.size(); ++i) done(i, process_model(paths[i], opts));
    return;
  }
  // Each stage's failure is that model's error, as in process_model.
  auto guarded = [](const std::filesystem::path& path, auto&& stage) -> decltype(stage()) {
    const std::string ctx = path.string();
    try {
      auto r = stage();
      if (!r) return safe_error(r.error().with_context(ctx));
      return r;
    } catch (const std::bad_alloc&) {
      return make_error("{}: out of memory while loading the model", to_valid_utf8(ctx));
    } catch (const std::exception& e) {
      return safe_error(make_error("{}: {}", ctx, clean_onnx_message(e.what())));
    }
  };
  // Three streams of work: a reader thread loads and checks the models ahead, each worker process
  // infers one model's shapes, and this thread hands an idle worker the next model and builds the
  // layers of the one it collected. A model's layers can only be built after its inference, so on
  // a zoo whose time goes mostly to a few large models (swin_t, maxvit_t, ssdlite) the order
  // matters: an idle worker gets the largest model read so far (most nodes) next, and this thread
  // builds one large model while the workers infer others. Results are handed to `done` in file
  // order.
  // The reader stays at most kAheadBytes of model structure (payloads are not read) ahead.
  constexpr size_t kAheadBytes = size_t{16} << 20;
  struct Read {
    size_t index;
    Result<Loaded> loaded;
    double load_ms = 0;
    size_t bytes = 0;
    int nodes = 0;
  };
  std::mutex queue_mutex;
  std::condition_variable queue_changed;
  std::vector<Read> queue;  // read and not yet handed to the worker
  size_t queued_bytes = 0;
  bool read_all = false, stopping = false;
  // Held by the reader except while it waits for room, and by this thread while it forks a worker:
  // no other thread may be inside a library then (IsolatedWorker::needs_fork).
  std::mutex fork_mutex;
  // The schema registry is built before the reader starts (models of opset 18 and newer run ONNX's
  // inference while they are read) and before the worker is forked, which is done before the reader
  // starts (a failure to fork is reported by the first submit).
  std::lock_guard<std::mutex> lock(worker_mutex());
  build_schema_registry();
  // The process's worker, and where inference_worker_count says so a second one, this call's own
  // (forked once per call, ended with it): ONNX's inference of two models at once.
  IsolatedWorker extra(serve_inference);
  struct ExtraForks {
    IsolatedWorker& w;
    ~ExtraForks() { g_extra_forks += w.forks(); }
  } count_extra{extra};
  std::vector<IsolatedWorker*> workers = {&inference_worker()};
  if (inference_worker_count(paths.size(), opts) > 1) workers.push_back(&extra);
  for (auto* w : workers) (void)w->prepare(isolation_limits(opts));
  std::thread reader([&] {
    for (size_t i = 0; i < paths.size(); ++i) {
      {
        std::unique_lock<std::mutex> lk(queue_mutex);
        queue_changed.wait(lk, [&] { return stopping || queue.empty() || queued_bytes < kAheadBytes; });
        if (stopping) return;
      }
      std::lock_guard<std::mutex> quiet(fork_mutex);
      const auto t0 = Clock::now();
      std::optional<Result<Loaded>> r;
      try {
        r = guarded(paths[i], [&]() -> Result<Loaded> {
          FL_ASSIGN_OR_RETURN(auto L, load_file(paths[i], opts));
          FL_TRY(check_options(opts));
          return L;
        });
      } catch (...) {
        r = Result<Loaded>(
            make_error("{}: unexpected error while loading the model", to_valid_utf8(paths[i].string())));
      }
      Read read{i, std::move(*r), ms_since(t0)};
      if (read.loaded) {
        read.bytes = read.loaded.value().structure_bytes;
        read.nodes = read.loaded.value().model->graph().node_size();
      }
      {
        std::lock_guard<std::mutex> lk(queue_mutex);
        queued_bytes += read.bytes;
        queue.push_back(std::move(read));
      }
      queue_changed.notify_all();
    }
    {
      std::lock_guard<std::mutex> lk(queue_mutex);
      read_all = true;
    }
    queue_changed.notify_all();
  });
  // The reader ends with this function, also when `done` throws.
  struct Join {
    std::thread& t;
    std::mutex& m;
    std::condition_variable& cv;
    bool& stopping;
    ~Join() {
      {
        std::lock_guard<std::mutex> lk(m);
        stopping = true;
      }
      cv.notify_all();
      t.join();
    }
  } join{reader, queue_mutex, queue_changed, stopping};
  // The read model with the most nodes (the first read among equals); nullopt once every model has
  // been taken, or, unless `wait`, when none is read yet.
  auto take_largest = [&](bool wait) -> std::optional<Read> {
    std::unique_lock<std::mutex> lk(queue_mutex);
    if (wait) queue_changed.wait(lk, [&] { return !queue.empty() || read_all; });
    if (queue.empty()) return std::nullopt;
    auto it = std::max_element(queue.begin(), queue.end(),
                               [](const Read& a, const Read& b) { return a.nodes < b.nodes; });
    Read r = std::move(*it);
    queue.erase(it);
    queued_bytes -= r.bytes;
    lk.unlock();
    queue_changed.notify_all();
    return r;
  };

  std::map<size_t, Result<std::vector<ModelIR>>> finished;  // not yet handed to `done`
  size_t next_done = 0;
  auto deliver = [&] {
    for (auto it = finished.find(next_done); it != finished.end(); it = finished.find(next_done)) {
      auto result = std::move(it->second);
      finished.erase(it);
      done(next_done++, std::move(result));
    }
  };
  // A model's process_ms counts its loading, its inference from submission to collection, and
  // the building of its layers; not the time it waited to be taken.
  struct InFlight {
    size_t index;
    Loaded L;
    double load_ms;
    Clock::time_point submitted;
  };
  std::vector<std::optional<InFlight>> flights(workers.size());  // the model each worker is inferring
  // The next model for a worker with its request, encoded while the workers work: the largest
  // model read so far. Models that failed to load, or to be encoded, are finished.
  struct Prepared {
    Read read;
    std::string request;
  };
  std::optional<Prepared> prepared;
  const auto batches = inference_batches(opts.batches);
  auto prepare_next = [&](bool wait) {
    while (!prepared) {
      auto next = take_largest(wait);
      if (!next) return;
      const size_t i = next->index;
      if (!next->loaded) {
        finished.emplace(i, Result<std::vector<ModelIR>>(next->loaded.error()));
        continue;
      }
      std::string request;
      auto st = guarded(paths[i], [&]() -> Status {
        request = encode_request(next->loaded.value(), opts, batches);
        return {};
      });
      if (st)
        prepared = Prepared{std::move(*next), std::move(request)};
      else
        finished.emplace(i, Result<std::vector<ModelIR>>(st.error()));
    }
  };
  // Gives every idle worker a model, while there are models.
  auto submit_next = [&] {
    for (size_t k = 0; k < workers.size(); ++k) {
      IsolatedWorker& worker = *workers[k];
      while (!flights[k]) {
        prepare_next(true);
        if (!prepared) return;
        Prepared p = std::move(*prepared);
        prepared.reset();
        const size_t i = p.read.index;
        std::unique_lock<std::mutex> quiet;
        if (worker.needs_fork(isolation_limits(opts))) quiet = std::unique_lock<std::mutex>(fork_mutex);
        const auto at = Clock::now();
        auto st =
            guarded(paths[i], [&]() -> Status { return worker.submit(p.request, isolation_limits(opts)); });
        if (st)
          flights[k] = InFlight{i, std::move(p.read.loaded.value()), p.read.load_ms, at};
        else
          finished.emplace(i, Result<std::vector<ModelIR>>(st.error()));
      }
    }
  };
  submit_next();
  std::vector<IsolatedWorker*> busy;
  std::vector<size_t> busy_index;
  for (;;) {
    busy.clear();
    busy_index.clear();
    for (size_t k = 0; k < workers.size(); ++k)
      if (flights[k]) {
        busy.push_back(workers[k]);
        busy_index.push_back(k);
      }
    if (busy.empty()) break;
    prepare_next(false);
    const size_t k = busy_index[busy.size() == 1 ? 0 : IsolatedWorker::wait_any(busy)];
    const auto run = workers[k]->collect();
    InFlight mine = std::move(*flights[k]);
    flights[k].reset();
    const double setup_ms = mine.load_ms + ms_since(mine.submitted);
    submit_next();  // before this thread decodes the answer and builds the layers
    // No model left for it: the idle worker exits now, beside the building of the last layers,
    // instead of at the end of this call or of the process.
    if (!flights[k] && !prepared) {
      std::lock_guard<std::mutex> lk(queue_mutex);
      if (read_all && queue.empty()) workers[k]->release();
    }
    const auto inferred = decode_inference(run, opts);
    finished.emplace(mine.index, guarded(paths[mine.index],
                                         [&] { return build_models(mine.L, opts, inferred, setup_ms); }));
    deliver();
  }
  deliver();
}

Result<std::vector<ModelIR>> process_model_text(std::string_view text, std::string_view name,
                                                const ProcessOptions& opts) {
  const auto t0 = Clock::now();
  try {
    Loaded L;
    L.name = std::string(name);
    L.path = std::string(name);
    const std::string copy(text);
    auto status = onnx::OnnxParser::Parse(*L.model, copy.c_str());
    if (!status.IsOK()) return make_error("{}: ONNX text does not parse: {}", name, status.ErrorMessage());
    auto st = validate_and_prepare(L, opts.max_folded_elements);
    if (!st) return safe_error(st.error().with_context(name));
    auto result = process_loaded(L, opts, t0);
    if (!result) return safe_error(result.error().with_context(name));
    return result;
  } catch (const std::exception& e) {
    return make_error("{}: {}", name, clean_onnx_message(e.what()));
  }
}

}  // namespace floorline::mp
