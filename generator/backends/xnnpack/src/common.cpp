// XNNPACK kernel library: initialization, the thread pool, tensors, transposes, verification and
// the layout conversions (planned cases and replay's).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "internal.hpp"

#ifndef FLOORLINE_XNNPACK_OPENMP_POOL
#define FLOORLINE_XNNPACK_OPENMP_POOL 0
#endif
#ifndef FLOORLINE_XNNPACK_VERSION
#define FLOORLINE_XNNPACK_VERSION "unknown"
#endif

namespace floorline::kernels {
namespace xnnpack_detail {
namespace {

struct State {
  std::mutex mutex;
  int threads = 1;
  pthreadpool_t pool = nullptr;  // the pool of `threads` (none for one thread: the caller runs)
  // Every pool made, by thread count, kept to the end of the process: a kernel set up with one pool
  // may run while another count is current (replay switches counts between steps), and switching
  // back must not start new threads.
  std::map<int, pthreadpool_t> pools;
};
State& state() {
  static State s;
  return s;
}

// XNNPACK's allocator: its large aligned blocks (the packed weights of an operator) are HostBuffers,
// so that they follow the build's placement and huge pages as the operands do; everything else is
// the C library's, as XNNPACK's default allocator does.
struct Blocks {
  std::mutex mutex;
  std::unordered_map<void*, HostBuffer> large;
};
Blocks& blocks() {
  static Blocks* b = new Blocks;  // never destroyed: XNNPACK may free a block at exit
  return *b;
}
void* xnn_alloc(void*, size_t size) {
  return std::malloc(size);
}
void* xnn_realloc(void*, void* p, size_t size) {
  return std::realloc(p, size);
}
void xnn_free(void*, void* p) {
  std::free(p);
}
void* xnn_aligned_alloc(void*, size_t alignment, size_t size) {
  if (size >= kHugePageMinBytes && alignment <= 64) {
    try {
      HostBuffer b(size);
      void* p = b.data();
      std::lock_guard<std::mutex> lock(blocks().mutex);
      blocks().large.emplace(p, std::move(b));
      return p;
    } catch (const std::exception&) {
      return nullptr;
    }
  }
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void xnn_aligned_free(void*, void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(blocks().mutex);
    if (blocks().large.erase(p)) return;
  }
  std::free(p);
}
const xnn_allocator kAllocator{nullptr,  xnn_alloc,         xnn_realloc,
                               xnn_free, xnn_aligned_alloc, xnn_aligned_free};

}  // namespace

pthreadpool_t pool() {
  return state().pool;
}

uint32_t operator_flags() {
  static const bool yield = [] {
    const char* v = std::getenv("FLOORLINE_YIELD_WORKERS");
    return v && *v && std::string(v) != "0";
  }();
  return yield ? XNN_FLAG_YIELD_WORKERS : 0;
}

const char* status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "xnn_status_success";
    case xnn_status_uninitialized:
      return "xnn_status_uninitialized";
    case xnn_status_invalid_parameter:
      return "xnn_status_invalid_parameter";
    case xnn_status_invalid_state:
      return "xnn_status_invalid_state";
    case xnn_status_unsupported_parameter:
      return "xnn_status_unsupported_parameter";
    case xnn_status_unsupported_hardware:
      return "xnn_status_unsupported_hardware";
    case xnn_status_out_of_memory:
      return "xnn_status_out_of_memory";
  }
  return "xnn_status_(unknown)";
}

void check(xnn_status s, const char* call, bool unsupported_on_parameter) {
  if (s == xnn_status_success) return;
  const std::string msg = fmt::format("{}: {}", call, status_name(s));
  if (unsupported_on_parameter &&
      (s == xnn_status_invalid_parameter || s == xnn_status_unsupported_parameter ||
       s == xnn_status_unsupported_hardware))
    throw KernelError(Disposition::kUnsupported, msg);
  throw std::runtime_error(msg);
}

void fill_random(float* out, int64_t n, Fill f, uint64_t seed) {
  if (f == Fill::kPositive)
    fill_uniform(out, n, seed, 0.5f, 1.f);
  else
    fill_uniform(out, n, seed);
}

void fill_operand(float* out, int64_t n, Fill f, uint64_t seed, float half_width) {
  fill_random(out, n, f, seed);
  if (f == Fill::kUniform && half_width != 1.f)
    for (int64_t i = 0; i < n; ++i) out[i] *= half_width;
}

Buffer::Buffer(int64_t n) : elements(n) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float) + XNN_EXTRA_BYTES + 63) / 64 * 64;
  mem = HostBuffer(bytes);  // zeroed; throws KernelError (skipped) when it cannot be had
}

// Floorline's tiled transpose (the floorline kernel library), its tiles on XNNPACK's pool.
void transpose(const float* x, float* y, int64_t batch, int64_t rows, int64_t cols) {
  const TiledTranspose t{x, y, batch, rows, cols};
  pthreadpool_parallelize_1d(
      pool(),
      [](void* context, size_t index) {
        static_cast<const TiledTranspose*>(context)->tile(static_cast<int64_t>(index));
      },
      const_cast<TiledTranspose*>(&t), static_cast<size_t>(t.tiles()),
      operator_flags() ? PTHREADPOOL_FLAG_YIELD_WORKERS : 0);
}

std::string nhwc_port_layout(const Shape& nchw) {
  if (nchw.size() < 3 || std::all_of(nchw.begin() + 2, nchw.end(), [](int64_t d) { return d == 1; }))
    return "plain";  // no spatial extent: channels-last is the plain order
  const std::string layout = channels_last_layout(nchw);
  if (layout.empty())
    throw std::invalid_argument(fmt::format("no channels-last layout for a rank-{} tensor", nchw.size()));
  return layout;
}

namespace {

// (batch, channels, pixels) of an NCHW shape.
struct Nchw {
  int64_t n, c, hw;
};
Nchw nchw_of(const Shape& s) {
  Nchw d{s.empty() ? 1 : s[0], s.size() < 2 ? 1 : s[1], 1};
  for (size_t k = 2; k < s.size(); ++k) d.hw *= s[k];
  return d;
}

// Writes plain (NCHW) values into a tensor's storage, in its layout.
void store(const Tensor& t, const float* plain) {
  const Nchw d = nchw_of(t.shape);
  if (t.nhwc)
    transpose(plain, t.data, d.n, d.c, d.hw);
  else
    std::memcpy(t.data, plain, static_cast<size_t>(t.elements()) * sizeof(float));
}

// The tensor's values in the plain layout.
std::vector<float> load(const Tensor& t) {
  std::vector<float> plain(static_cast<size_t>(t.elements()));
  const Nchw d = nchw_of(t.shape);
  if (t.nhwc)
    transpose(t.data, plain.data(), d.n, d.hw, d.c);
  else
    std::memcpy(plain.data(), t.data, plain.size() * sizeof(float));
  return plain;
}

}  // namespace

Tensor& XnnKernel::add(std::vector<Tensor>& list, const Shape& shape, bool nhwc, Fill fill) {
  Tensor t;
  t.shape = shape;
  t.nhwc = nhwc;
  t.fill = fill;
  t.own = Buffer(elements(shape));
  t.data = t.own.get();
  // Inputs are added in the problem's order: input in.size() (a weight on ±√(3 / fan-in)).
  fill_operand(t.data, t.elements(), fill, 17 * (in.size() + 3 * out.size()) + 1,
               &list == &in ? fill_half_width(p_, in.size()) : 1.f);
  list.push_back(std::move(t));
  return list.back();
}

Tensor& XnnKernel::add_constant(const Shape& shape, Fill fill) {
  Tensor& t = add(in, shape, false, fill);
  t.packed = true;
  t.is_port = false;
  t.host = {shape, std::vector<float>(t.data, t.data + t.elements())};
  return t;
}

Status XnnKernel::verify() {
  try {
    std::vector<HostTensor> inputs;
    uint64_t seed = 1000;
    for (auto& t : in) {
      if (t.packed) {
        inputs.push_back(t.host);
        continue;
      }
      HostTensor h{t.shape, std::vector<float>(static_cast<size_t>(t.elements()))};
      fill_operand(h.data.data(), t.elements(), t.fill, ++seed, fill_half_width(p_, inputs.size()));
      store(t, h.data.data());
      inputs.push_back(std::move(h));
    }
    run();
    auto expected = reference(p_, inputs, extras);
    if (!expected) return expected.error();
    for (size_t k = 0; k < out.size() && k < expected->size(); ++k) {
      const auto got = load(out[k]);
      FL_TRY(compare_output(got.data(), (*expected)[k], verify_tolerance(p_)));
    }
    return {};
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

std::optional<Port> XnnKernel::port(bool output, size_t k) const {
  const auto& list = output ? out : in;
  if (k >= list.size() || !list[k].is_port) return std::nullopt;
  const Tensor& t = list[k];
  return Port{t.data, t.elements() * static_cast<int64_t>(sizeof(float)),
              t.nhwc ? nhwc_port_layout(t.shape) : "plain"};
}

Status XnnKernel::bind(bool output, size_t k, void* data) {
  auto& list = output ? out : in;
  if (k >= list.size() || !list[k].is_port)
    return make_error("{} {} of this case cannot be wired to another case", output ? "output" : "input", k);
  list[k].data = static_cast<float*>(data);
  try {
    check(setup(), "xnn_setup");
  } catch (const std::exception& e) {
    return error_of(e);
  }
  return {};
}

namespace {

// NCHW ↔ NHWC of one tensor: a planned conversion case, or replay's between an XNNPACK case and a
// plain port. Ours (XNNPACK 2022-02 has no transpose operator): the floorline kernel library's
// tiled transpose (floorline.hpp), its tiles over XNNPACK's pool.
class TransposeKernel final : public Kernel {
 public:
  TransposeKernel(const Shape& nchw, bool to_nhwc, float* src, float* dst)
      : shape_(nchw),
        to_nhwc_(to_nhwc),
        own_src_(src ? 0 : elements(nchw)),
        own_dst_(dst ? 0 : elements(nchw)) {
    src_ = src ? src : own_src_.get();
    dst_ = dst ? dst : own_dst_.get();
    if (!src) fill_random(src_, elements(nchw), Fill::kUniform, 7);
  }
  void run() override {
    const Nchw d = nchw_of(shape_);
    if (to_nhwc_)
      transpose(src_, dst_, d.n, d.c, d.hw);
    else
      transpose(src_, dst_, d.n, d.hw, d.c);
  }
  std::string implementation() const override {
    return "floorline-kernel:transpose (32x32 tiles; 8x64 where a row is a multiple of 4 KiB)";
  }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override {
    const Nchw d = nchw_of(shape_);
    fill_random(src_, elements(shape_), Fill::kUniform, 99);
    run();
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t p = 0; p < d.hw; ++p) {
          const int64_t nchw = (n * d.c + c) * d.hw + p, nhwc = (n * d.hw + p) * d.c + c;
          const float want = to_nhwc_ ? src_[nchw] : src_[nhwc], got = to_nhwc_ ? dst_[nhwc] : dst_[nchw];
          if (want != got)
            return make_error("transpose: element (n {}, c {}, pixel {}) is {} instead of {}", n, c, p, got,
                              want);
        }
    return {};
  }
  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    const bool nhwc = output == to_nhwc_;
    return Port{output ? dst_ : src_, elements(shape_) * static_cast<int64_t>(sizeof(float)),
                nhwc ? nhwc_port_layout(shape_) : "plain"};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("a transpose has one input and one output");
    (output ? dst_ : src_) = static_cast<float*>(data);
    return {};
  }

 private:
  Shape shape_;
  bool to_nhwc_;
  Buffer own_src_, own_dst_;
  float* src_ = nullptr;
  float* dst_ = nullptr;
};

// "f32 acdb 1x64x56x56" (nhwc_port_layout) → {1, 64, 56, 56}; empty for any other layout.
Shape nhwc_dims(const std::string& layout) {
  for (size_t rank = 3; rank <= 5; ++rank)
    if (auto dims = tagged_layout_dims(layout, channels_last_tag(rank)); dims.size() == rank) return dims;
  return {};
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_conversion_case(const CaseSpec& spec) {
  const auto c = parse_conversion(spec.variant.layout);
  const bool to_nhwc = c && c->from == "nchw" && c->to == "nhwc";
  if (!c || (c->tensor != "src" && c->tensor != "dst") ||
      (!to_nhwc && !(c->from == "nhwc" && c->to == "nchw")))
    return make_error(Disposition::kUnsupported,
                      "XNNPACK conversions are src: or dst: nchw>nhwc and nhwc>nchw, not {}",
                      spec.variant.layout);
  const auto& ops = c->tensor == "dst" ? spec.problem.outputs : spec.problem.inputs;
  if (ops.empty()) return make_error(Disposition::kUnsupported, "{}: no tensor to convert", spec.problem.key);
  try {
    return std::unique_ptr<Kernel>(
        std::make_unique<TransposeKernel>(ops[0].shape, to_nhwc, nullptr, nullptr));
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

}  // namespace xnnpack_detail

using namespace xnnpack_detail;

Result<std::unique_ptr<Kernel>> make_xnnpack_conversion(const PortRef& from, const PortRef& to) {
  if (!from.kernel || !to.kernel)
    return make_error(Disposition::kUnsupported, "a conversion needs both ports");
  const auto a = from.kernel->port(from.output, from.index), b = to.kernel->port(to.output, to.index);
  if (!a || !b) return make_error(Disposition::kUnsupported, "a port of the conversion is missing");
  const Shape a_dims = nhwc_dims(a->layout), b_dims = nhwc_dims(b->layout);
  if (a->bytes != b->bytes || (a_dims.empty() == b_dims.empty()) ||
      (a_dims.empty() ? a->layout : b->layout) != "plain")
    return make_error(Disposition::kUnsupported,
                      "XNNPACK converts between plain and nhwc ports, not {} and {}", a->layout, b->layout);
  const bool to_nhwc = !b_dims.empty();
  try {
    return std::unique_ptr<Kernel>(std::make_unique<TransposeKernel>(
        to_nhwc ? b_dims : a_dims, to_nhwc, static_cast<float*>(from.data), static_cast<float*>(to.data)));
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

std::string xnnpack_version() {
  return fmt::format("{} ({} pool)", FLOORLINE_XNNPACK_VERSION, xnnpack_thread_pool());
}

const char* xnnpack_thread_pool() {
#if FLOORLINE_XNNPACK_OPENMP_POOL
  return "openmp";
#else
  return "pthreadpool";
#endif
}

#if !FLOORLINE_XNNPACK_OPENMP_POOL
int64_t xnnpack_openmp_pool_calls() {
  return -1;
}
void flush_xnnpack_denormals(bool, int) {}
void on_xnnpack_threads(int, const std::function<void(int, int)>& work) {
  work(0, 1);
}
#endif

Status xnnpack_initialize() {
  static const xnn_status s = xnn_initialize(&xnnpack_detail::kAllocator);
  if (s != xnn_status_success) return make_error("xnn_initialize: {}", status_name(s));
  return {};
}

void set_xnnpack_threads(int threads) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  threads = std::max(1, threads);
  if (threads == s.threads) return;
  if (threads > 1 && !s.pools.count(threads))
    s.pools[threads] = pthreadpool_create(static_cast<size_t>(threads));
  s.pool = threads > 1 ? s.pools[threads] : nullptr;
  s.threads = threads;
}

int xnnpack_threads() {
  return state().threads;
}

void park_xnnpack_threads() {
  // On the OpenMP pool nothing: libgomp's workers sleep after GOMP_SPINCOUNT spins.
#if !FLOORLINE_XNNPACK_OPENMP_POOL
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& [threads, p] : s.pools) {
    // One item per thread, so that the workers take the call (a range of one runs on the caller)
    // and, told to yield, wait on their futex when it ends.
    pthreadpool_parallelize_1d(
        p, [](void*, size_t) {}, nullptr, static_cast<size_t>(threads), PTHREADPOOL_FLAG_YIELD_WORKERS);
  }
#endif
}

benchmark::internal::Benchmark* register_xnnpack_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_xnnpack_kernel);
}

}  // namespace floorline::kernels
