// Shared internals of the oneDNN kernel library (src/*.cpp): views, the builder context, the step
// helpers and the builders, one per kind, that the kind table (onednn_kernel.cpp) dispatches to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "floorline/kernels/onednn.hpp"
#include "floorline/kernels/random.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels::onednn_detail {

// Restores the kernels' OpenMP thread setting when it goes out of scope.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~OmpThreadsScope() { omp_set_num_threads(saved_); }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

using dnnl::algorithm;
using dnnl::memory;
using dnnl::primitive_attr;
using dnnl::prop_kind;
using dt = memory::data_type;
using dims = memory::dims;

constexpr float kNormEps = 1e-5f;  // the ONNX default (epsilon is not part of the canonical key)
constexpr auto kInference = prop_kind::forward_inference;

// The engine and stream every primitive runs on (common.cpp).
dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// --- tensors and views ----------------------------------------------------------------------------

// kInteger: whole numbers in [lo, hi] (int8 data, zero points, int32 biases).
// kSmall: uniform in [-1/16, 1/16), recurrent layers' W and R: PyTorch initialises them in
// ±1/√H (±1/16 at H = 256); with [-1, 1) a recurrence of hundreds of units is chaotic, and f32
// rounding grows over the time steps until no output can be compared with the reference.
enum class Fill { kUniform, kPositive, kNone, kInteger, kSmall };

struct TensorDef {
  Shape shape;
  Fill fill = Fill::kUniform;
  bool f32_only = false;  // normalization statistics and scale/shift stay f32 in oneDNN
  bool is_output = false;
  // --- quantization (int8 cases) ---
  std::optional<dt> type{};  // this tensor's own type (u8, s8, s32, f32), else the case's
  int64_t lo = 0, hi = 0;    // Fill::kInteger's range
  float scale = 1.f;         // kUniform/kPositive values multiplied by it (int8 output scales)
  int reciprocal_of = -1;    // filled with 1 / (tensor reciprocal_of) (QuantizeLinear's 1/scale)
  // Fixed contents, given to the primitive when it is created (oneDNN 2.6 convolutions take output
  // scales only so): the tensor is not a primitive argument, only the reference reads it.
  std::vector<float> values{};
};

// How a primitive sees a tensor's plain buffer.
struct View {
  dims d;
  dims strides;
  int64_t offset = 0;  // elements
};

dims plain_strides(const dims& d);
View plain(const Shape& s);
View reshaped(const dims& d);
View permuted(const Shape& stored, const std::vector<int64_t>& order);
Shape rank_padded(Shape s, size_t r);

struct ArgDef {
  int arg = 0;  // DNNL_ARG_*
  int tensor = -1;
  View view;
  int prefill = -1;  // an output first filled from this tensor (the sum post-op reads dst)
  // A window: the primitive reads or writes whole_offset_bytes onwards of the tensor held whole in
  // the format `whole` (a part of a split case: an image range, or at batch 1 a range of channel
  // blocks, which is contiguous there). The tensor is converted to and from that format once, as
  // one buffer the parts share; with `whole` plain, the window is on the tensor's plain buffer.
  std::optional<memory::desc> whole{};
  int64_t whole_offset_bytes = 0;
};

struct StepDef {
  // Reorder and concat descriptors are not iterable (primitive_desc_base); the others are.
  std::optional<dnnl::primitive_desc> iterable;
  dnnl::primitive_desc_base fixed;
  std::vector<ArgDef> args;
  // oneDNN 2.x's implementation iterator keeps a pointer to the operation descriptor, not a copy:
  // next_impl() on a descriptor that has gone out of scope reads freed memory.
  std::shared_ptr<const void> op_desc;
  // Run once when the inputs are filled, before the other steps' input conversions, and never
  // timed: a rearrangement of weights that any framework does once when it loads them (the gate
  // order of a recurrent layer's weights, its two ONNX biases summed into oneDNN's one).
  bool once = false;

  const dnnl::primitive_desc_base& pd() const {
    return iterable ? static_cast<const dnnl::primitive_desc_base&>(*iterable) : fixed;
  }
  bool next_impl() { return iterable && iterable->next_impl(); }
};

struct Build {
  std::string algorithm;           // primitive algorithm, "convolution_direct"
  std::vector<TensorDef> tensors;  // inputs, outputs, then extras (post-op operands, proxy sources)
  size_t n_inputs = 0, n_outputs = 0;
  std::vector<StepDef> steps;  // step 0's implementation is the one chosen by impl_index
  bool iterate = true;         // step 0 offers alternatives via next_impl()
  std::string not_verifiable;  // why the output is not the layer's (a proxy), "" otherwise
  // A Winograd convolution: verify() relaxes its tolerance (reference.hpp).
  FastAlgorithm fast_algorithm = FastAlgorithm::kNone;
  // A split case: the steps (but `once` ones) run at the same time, step i on OpenMP thread i,
  // each a primitive created for one thread (conv.cpp, "convolution_direct_split").
  bool parallel = false;
  std::string impl_note;  // appended to the implementation's name: how a split case cuts its work
};

// Builders throw the kernel API's unsupported() (a KernelError) for problems Floorline's mapping or
// oneDNN cannot express.

struct Ctx {
  const CaseSpec& spec;
  const Problem& p;
  dt type;
  Build b;
  // The OpenMP threads a split case cuts its work over: the kernels' setting when a case is built;
  // at least 2 when implementations are enumerated (the plan is made once for every thread count).
  int threads = 1;

  int input(size_t k) const {
    if (k >= p.inputs.size()) unsupported(fmt::format("{} has no input {}", p.op, k));
    return static_cast<int>(k);
  }
  int output(size_t k) const {
    if (k >= p.outputs.size()) unsupported(fmt::format("{} has no output {}", p.op, k));
    return static_cast<int>(p.inputs.size() + k);
  }
  // The tensor of the first output with one of `roles` (Problem::output_index); -1 when there is none.
  int output_with_role(std::initializer_list<const char*> roles) const {
    const int k = p.output_index(roles);
    return k < 0 ? -1 : output(static_cast<size_t>(k));
  }
  const Shape& in_shape(size_t k) const { return p.inputs.at(static_cast<size_t>(input(k))).shape; }
  const Shape& out_shape(size_t k = 0) const {
    return p.outputs.at(static_cast<size_t>(output(k)) - p.inputs.size()).shape;
  }
  int extra(Shape s, Fill f = Fill::kUniform) {
    b.tensors.push_back({std::move(s), f, false, false});
    return static_cast<int>(b.tensors.size() - 1);
  }
  void set_fill(int t, Fill f) { b.tensors[t].fill = f; }
  void set_f32_only(int t) { b.tensors[t].f32_only = true; }
  dt type_of(int t) const { return tensor_type(b.tensors[t]); }
  dt tensor_type(const TensorDef& td) const { return td.type ? *td.type : td.f32_only ? dt::f32 : type; }
  // int8 cases (int8.cpp): tensor t holds `type`, filled with whole numbers in [lo, hi].
  void set_integer(int t, dt type, int64_t lo, int64_t hi) {
    auto& td = b.tensors[t];
    td.type = type;
    td.fill = Fill::kInteger;
    td.lo = lo;
    td.hi = hi;
  }
  memory::desc md(int t, const View& v) const { return memory::desc(v.d, type_of(t), v.strides); }
  memory::desc any(const dims& d) const { return memory::desc(d, type, memory::format_tag::any); }
  // format any in tensor t's own type (int8 cases: u8 activations, s8 weights)
  memory::desc any_t(int t, const dims& d) const {
    return memory::desc(d, type_of(t), memory::format_tag::any);
  }

  primitive_attr attr(bool with_post_ops = true) const;
};

// --- activation layouts (common.cpp) -------------------------------------------------------------

std::string layout_suffix(const std::string& variant);
std::string base_variant(const std::string& variant);
// The channel block of the blocked layout oneDNN's convolutions write on this host (16 with AVX-512,
// 8 with AVX2), 0 when they write a plain or channels-last layout. Computed once.
int64_t native_channel_block();
memory::desc activation_md(const Ctx& c, int t, const Shape& s, const std::string& variant);

// --- element-wise algorithms (eltwise.cpp) -------------------------------------------------------

struct EltwiseOp {
  algorithm alg;
  float alpha = 0, beta = 0;
};
std::vector<EltwiseOp> eltwise_chain(LayerKind kind, double alpha, double beta, std::string* proxy);
std::pair<double, double> unary_params(const Problem& p);

// --- steps and epilogues (common.cpp) -------------------------------------------------------------

void require_no_post_ops(const Ctx& c);

template <class PD>
StepDef step(PD pd, std::vector<ArgDef> args) {
  if (!pd) unsupported("oneDNN has no implementation for these shapes and data type");
  StepDef s;
  if constexpr (std::is_base_of_v<dnnl::primitive_desc, PD>)
    s.iterable = pd;
  else
    s.fixed = pd;
  s.args = std::move(args);
  return s;
}

// The tensors a fused epilogue reads, created in post-op order (the reference reads them so):
// "Add" sums a tensor of the output's shape (prefilled into dst: oneDNN's sum post-op), "BiasAdd"
// adds a vector along the last dimension (the primitive's bias argument).
struct Epilogue {
  int sum = -1;
  int bias = -1;
};
Epilogue epilogue_tensors(Ctx& c, const Shape& bias_shape);
// Creates the primitive descriptor from a copy of `desc` that the step keeps alive.
template <class PD, class D>
StepDef make_step(const D& desc, const primitive_attr& attr, std::vector<ArgDef> args) {
  auto held = std::make_shared<const D>(desc);
  StepDef s = step(PD(*held, attr, cpu_engine(), true), std::move(args));
  s.op_desc = held;
  return s;
}

int sum_prefill(Ctx& c);

// --- builders, one per kind ----------------------------------------------------------------------

void conv(Ctx& c, const std::string& variant);  // conv.cpp
void gemm(Ctx& c, const std::string& variant);  // matmul.cpp
void matmul(Ctx& c, const std::string& variant);
void batch_norm(Ctx& c, const std::string& variant);  // norm.cpp
void layer_norm(Ctx& c, const std::string& variant);
void instance_norm(Ctx& c, const std::string& variant);
void lrn(Ctx& c, const std::string& variant);
void eltwise(Ctx& c, const std::string& variant);  // eltwise.cpp
void binary(Ctx& c, const std::string& variant);
void sum(Ctx& c, const std::string& variant);
void softmax(Ctx& c, const std::string& variant);  // softmax_reduce.cpp
void reduce(Ctx& c, const std::string& variant);
void recurrent(Ctx& c, const std::string& variant);  // recurrent.cpp
void pooling(Ctx& c, const std::string& variant);    // pooling.cpp
void concat(Ctx& c, const std::string& variant);     // data_movement.cpp
void transpose(Ctx& c, const std::string& variant);
void slice(Ctx& c, const std::string& variant);
void split(Ctx& c, const std::string& variant);
void pad(Ctx& c, const std::string& variant);
void resize(Ctx& c, const std::string& variant);
void copy_kind(Ctx& c, const std::string& variant);
// --- quantization (int8.cpp) ---
bool int8_case(const Ctx& c);
void quantize(Ctx& c, const std::string& variant);  // QuantizeLinear, DequantizeLinear
// The int8 form of Conv, Gemm/MatMul (matmul), Add (binary) and pooling: operand types, output
// scales and zero points as runtime attributes; their builders call these when int8_case().
void conv_int8(Ctx& c, const std::string& variant, const dnnl::convolution_forward::desc& d,
               const dims& wdims);
primitive_attr int8_attr(Ctx& c, std::vector<ArgDef>& args, int64_t channels, int channel_mask, int64_t k);
void int8_operands(Ctx& c);

// LSTM, GRU and RNN in the standard formulation on oneDNN matmul (recurrent_matmul.cpp), planned
// beside the RNN primitive: whether a variant ("matmul_standard", "matmul_standard_batched") is
// one of it; the kernel of a case (its impl_index-th per-step product, checked against impl_name);
// and every implementation it offers for the layer (error coded unsupported where none).
bool is_recurrent_matmul(const std::string& variant);
Result<std::unique_ptr<Kernel>> make_recurrent_matmul(const CaseSpec& spec, const std::string& variant);
Result<std::vector<Implementation>> recurrent_matmul_implementations(const CaseSpec& spec);

// --- memory formats and random data (common.cpp) -------------------------------------------------

std::string format_name(const memory::desc& md);
std::optional<memory::format_tag> format_tag_of(const memory::desc& md);  // the tag format_name names
bool is_plain(const memory::desc& md);
std::string dtype_name(dt t);
std::string port_layout(const memory::desc& md);
void fill_random(float* out, int64_t n, Fill f, uint64_t seed);
void fill_integers(float* out, int64_t n, int64_t lo, int64_t hi, uint64_t seed);

}  // namespace floorline::kernels::onednn_detail
