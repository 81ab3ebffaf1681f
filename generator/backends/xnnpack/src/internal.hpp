// The XNNPACK kernel library's internals: its state (initialization, thread pool), tensors, the
// layout transposes and the kernel class the operator builders fill.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pthreadpool.h>
#include <xnnpack.h>

#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/floorline.hpp"
#include "floorline/kernels/random.hpp"
#include "floorline/kernels/reference.hpp"
#include "floorline/kernels/xnnpack.hpp"

namespace floorline::kernels::xnnpack_detail {

// The pool cases run on (null: the calling thread alone).
pthreadpool_t pool();
const char* status_name(xnn_status s);
// Throws a KernelError coded unsupported (a create call XNNPACK rejects) or a runtime_error.
void check(xnn_status s, const char* call, bool unsupported_on_parameter = false);

enum class Fill { kUniform, kPositive };
// [-1, 1) or [0.5, 1.5), different per seed (the kernel API's fill_uniform, random.hpp).
void fill_random(float* out, int64_t n, Fill f, uint64_t seed);
// fill_random, a kUniform fill then scaled to ±half_width (an operand's fill_half_width, problem.hpp:
// a weight's √(3 / fan-in)).
void fill_operand(float* out, int64_t n, Fill f, uint64_t seed, float half_width);

// 64-byte aligned floats with XNN_EXTRA_BYTES readable past the end (XNNPACK's micro-kernels may
// read, never use, up to that many bytes beyond an input), zeroed; placed by the factory's
// PlacementScope (buffer.hpp).
struct Buffer {
  HostBuffer mem;
  int64_t elements = 0;
  explicit Buffer(int64_t n = 0);
  float* get() const { return static_cast<float*>(mem.data()); }
};

// y[c][r] = x[r][c] for `batch` matrices of rows × cols (NCHW → NHWC: rows C, cols H·W; NHWC →
// NCHW: rows H·W, cols C), in tiles (transpose.cpp), parallel over the pool.
void transpose(const float* x, float* y, int64_t batch, int64_t rows, int64_t cols);

// The flags every operator is created with: none by default, so that the pool's workers spin for
// the next call when one ends (pthreadpool's default), as a runtime's one pool does between layers:
// a case timed at several threads pays no wake-up per call. Before another library's threads need
// the cores, the bench and the replay park the workers (park_xnnpack_threads; docs/MEASUREMENT.md,
// "Threads of several libraries"). FLOORLINE_YIELD_WORKERS=1 in the environment makes every call
// end with the workers asleep (XNN_FLAG_YIELD_WORKERS), to measure what the wake-ups cost. On the
// OpenMP pool (openmp_pool.cpp) the flag is ignored: libgomp's spin policy is the pool's one policy.
uint32_t operator_flags();

// The layout of a port holding an NCHW tensor as NHWC, named as oneDNN names its channels-last
// formats, the dims in ONNX order: "f32 acdb 1x64x56x56" (acb, acdeb at rank 3, 5). A oneDNN case's
// channels-last port and an XNNPACK case's are then one layout, and replay passes the buffer on
// without a conversion. "plain" where every spatial dimension is 1: NHWC is then the NCHW order.
std::string nhwc_port_layout(const Shape& nchw);

// One operand of a case, in the Problem's operand order.
struct Tensor {
  Shape shape;          // ONNX dims (NCHW for images)
  bool nhwc = false;    // stored channels-last (XNNPACK's convolution and pooling layout)
  bool packed = false;  // a constant packed into the operator when it was created: no port
  bool is_port = true;  // replay may wire it (activations)
  Fill fill = Fill::kUniform;
  Buffer own;
  float* data = nullptr;  // own storage, or the buffer bound by replay
  HostTensor host;        // packed constants: the values in the ONNX layout, for verify()
  int64_t elements() const { return kernels::elements(shape); }
};

using OperatorPtr = std::unique_ptr<xnn_operator, xnn_status (*)(xnn_operator_t)>;

class XnnKernel final : public Kernel {
 public:
  explicit XnnKernel(Problem p) : p_(std::move(p)) {}
  void run() override { check(xnn_run_operator(op_.get(), pool_), "xnn_run_operator"); }
  std::string implementation() const override { return impl_; }
  int64_t workspace_bytes() const override { return 0; }  // XNNPACK allocates none per call
  Status verify() override;
  std::optional<Port> port(bool output, size_t k) const override;
  Status bind(bool output, size_t k, void* data) override;

  // Filled by the builders.
  Problem p_;
  std::vector<Tensor> in, out;
  std::vector<HostTensor> extras;  // what the fused epilogue reads, for the reference (MatMul bias)
  OperatorPtr op_{nullptr, xnn_delete_operator};
  // The pool of the thread count current when the case was built: it is set up and runs on it
  // whatever count is current later (replay runs each case at the count it was timed at).
  pthreadpool_t pool_ = pool();
  std::function<xnn_status()> setup;  // xnn_setup_* with the current pointers
  std::string impl_;

  // Adds an operand with its own storage, filled at random.
  Tensor& add(std::vector<Tensor>& list, const Shape& shape, bool nhwc, Fill fill = Fill::kUniform);
  // A constant operand packed at creation: random values in the ONNX layout, kept for verify().
  Tensor& add_constant(const Shape& shape, Fill fill = Fill::kUniform);
};

// The builders (ops.cpp): each fills a kernel for its kind family or throws KernelError.
void build_convolution(XnnKernel& k);
void build_fully_connected(XnnKernel& k);
void build_pooling(XnnKernel& k);
void build_unary(XnnKernel& k);
void build_binary(XnnKernel& k);

// A planned conversion case (layout "src:nchw>nhwc" or "dst:nhwc>nchw"): Floorline's transpose.
Result<std::unique_ptr<Kernel>> make_conversion_case(const CaseSpec& spec);

// The output clamp of a fused epilogue (Relu, Clip): [-inf, inf] without one. Throws unsupported
// for any other post-op; a MatMul's "BiasAdd" (first) is allowed where `bias_add` is set.
struct Clamp {
  float min, max;
  bool bias_add = false;
};
Clamp epilogue_clamp(const Problem& p, bool allow_bias_add);

}  // namespace floorline::kernels::xnnpack_detail
