// Shared internals of the CUDA kernels (cuda_kernel.cpp and the builder files): error checks, the
// device context, device tensors, cuDNN descriptors, the builder context and the builders that
// build() (cuda_kernel.cpp) dispatches to. (cuda_internal.hpp holds what the plan shares too.)
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cuda_internal.hpp"
#include "floorline/kernels/cuda.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels::cuda_detail {

using device::DType;

// --- errors -----------------------------------------------------------------------------------------

// A library error; build errors carry the case's disposition (unsupported, skipped), others fail.
using CudaFailure = KernelError;
[[noreturn]] void fail(const std::string& message);
[[noreturn]] void fail(Disposition code, const std::string& message);
void check(cudaError_t e, const char* what);
void check(cudnnStatus_t s, const char* what);
void check_run(cudnnStatus_t s, const char* what);
void check(cublasStatus_t s, const char* what);

// --- the device context -------------------------------------------------------------------------------

// NVML, opened at run time (linking it would stop the binary starting where there is no driver).
struct Nvml {
  using Device = void*;
  int (*init)() = nullptr;
  int (*by_pci)(const char*, Device*) = nullptr;
  int (*clock)(Device, int, unsigned*) = nullptr;
  int (*temperature)(Device, int, unsigned*) = nullptr;
  int (*reasons)(Device, unsigned long long*) = nullptr;
  int (*power)(Device, unsigned*) = nullptr;
  Device device = nullptr;
  bool ok = false;

  void open(int cuda_device) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    };
    sym(init, "nvmlInit_v2");
    sym(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(clock, "nvmlDeviceGetClockInfo");
    sym(temperature, "nvmlDeviceGetTemperature");
    sym(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) sym(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    sym(power, "nvmlDeviceGetPowerUsage");
    char bus[32] = {};
    if (!init || !by_pci || init() != 0 || cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess)
      return;
    ok = by_pci(bus, &device) == 0;
  }
};

// Throttle (clock event) reasons that mean the device ran slower than it could: software power
// cap, hardware slowdown, software and hardware thermal slowdown, power brake (nvml.h's bits).
constexpr unsigned long long kThrottleMask = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

struct Context {
  int device = 0;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* flush = nullptr;  // cold-cache mode: written over before each call
  size_t flush_bytes = 0;
  // The timed call's gate (device::hold): two ints of mapped host memory, [0] release, [1] set by
  // the device when the gate gave up waiting. Null where mapped memory is not available.
  volatile int* gate = nullptr;         // host address
  volatile int* gate_device = nullptr;  // the same memory, as the device sees it
  Nvml nvml;
};

// The one device context, created on first use (device.cpp).
Result<Context*> context();

// --- tensors --------------------------------------------------------------------------------------

// kSmall: uniform in [-1/16, 1/16) (recurrent weights; see the oneDNN backend's Fill::kSmall).
// kRange: uniform in [Tensor::lo, Tensor::lo + Tensor::span) (int8 data: whole numbers, rounded
// down and saturated to [-128, 127]; int8 cases' f32 biases; weights on ±√(3 / fan-in), the kernel
// API's fill_half_width).
enum class Fill { kUniform, kPositive, kNone, kSmall, kRange };

cudnnDataType_t cudnn_type(DType t);
cudaDataType_t cuda_type(DType t);

struct DeviceBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n) check(cudaMalloc(&data, n), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data(o.data), bytes(o.bytes) { o.data = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(data, o.data);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() {
    if (data) cudaFree(data);
  }
};

struct Tensor {
  Shape shape;  // ONNX (NCHW) order
  DType type = DType::kF32;
  bool channels_last = false;  // stored N, spatial..., C
  Fill fill = Fill::kUniform;
  bool is_output = false;
  bool is_index = false;  // int64 indices (Gather), random in [0, index_bound)
  int64_t index_bound = 1;
  float lo = -1.f, span = 2.f;  // Fill::kRange
  DeviceBuffer buf;
  int64_t count() const { return elements(shape); }
  size_t bytes() const {
    return static_cast<size_t>(count()) * (is_index ? 8 : static_cast<size_t>(device::size_of(type)));
  }
};

// --- cuDNN descriptors (RAII) ------------------------------------------------------------------------

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
struct Desc {
  T d = nullptr;
  Desc() { check(Create(&d), "cudnnCreate descriptor"); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d) Destroy(d);
  }
  operator T() const { return d; }
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using ActDesc =
    Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using LrnDesc = Desc<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;
using OpDesc = Desc<cudnnOpTensorDescriptor_t, cudnnCreateOpTensorDescriptor, cudnnDestroyOpTensorDescriptor>;
using ReduceDesc = Desc<cudnnReduceTensorDescriptor_t, cudnnCreateReduceTensorDescriptor,
                        cudnnDestroyReduceTensorDescriptor>;

std::vector<int> int_dims(const Shape& s);
std::vector<int> nchw_dims(const Shape& s);
std::vector<int> packed_strides(const std::vector<int>& d);
void set_tensor(TensorDesc& desc, DType t, const std::vector<int>& dims, bool nhwc);
void set_strided(TensorDesc& desc, DType t, const std::vector<int>& dims, const std::vector<int>& strides);
void set_flat(TensorDesc& desc, DType t, int64_t n);

// --- the kernel ---------------------------------------------------------------------------------------

using Step = std::function<void(Context&)>;

struct Build {
  std::vector<Tensor> tensors;  // inputs, outputs, then extras
  size_t n_inputs = 0, n_outputs = 0;
  std::vector<Step> steps;
  // Run (and waited for) before timing and before verification's call: an output that the timed
  // call updates in place starts from its initial value (cudnnAddTensor's y = x, cublasGemmEx's
  // y = broadcast C).
  std::vector<Step> prefills;
  std::vector<std::shared_ptr<void>> keep;  // descriptors and buffers the steps use
  std::string implementation;
  int64_t workspace = 0;
  std::string not_verifiable;
  // What verify() derives the per-element tolerance from (verify_tolerance, reference.hpp): the
  // storage type, the math mode, and a Winograd or FFT algorithm where cuDNN runs one.
  DType storage = DType::kF32;
  MathMode math = MathMode::kFp32;
  FastAlgorithm fast_algorithm = FastAlgorithm::kNone;
  // What the reference computes when it is not the case's problem: an int8 case's symmetric form
  // (int8.cpp), with the tensors' shapes as the kernel holds them.
  std::optional<Problem> reference_problem;
};

// --- building ---------------------------------------------------------------------------------------

struct Ctx {
  const CaseSpec& spec;
  const Problem& p;
  Context& dev;
  DType type;
  bool nhwc;
  Build b;

  const Shape& in_shape(size_t k) const {
    if (k >= p.inputs.size()) fail(Disposition::kUnsupported, fmt::format("{} has no input {}", p.op, k));
    return p.inputs[k].shape;
  }
  const Shape& out_shape(size_t k = 0) const { return p.outputs.at(k).shape; }
  int input(size_t k) const {
    in_shape(k);
    return static_cast<int>(k);
  }
  int output(size_t k = 0) const { return static_cast<int>(p.inputs.size() + k); }
  // The tensor of the first output with one of `roles` (Problem::output_index); -1 when there is none.
  int output_with_role(std::initializer_list<const char*> roles) const {
    const int k = p.output_index(roles);
    return k < 0 ? -1 : output(static_cast<size_t>(k));
  }
  // The tensor's device buffer, allocated on first use (set its type and layout before).
  void* ptr(int t) {
    Tensor& x = b.tensors.at(static_cast<size_t>(t));
    if (!x.buf.data) x.buf = DeviceBuffer(x.bytes());
    return x.buf.data;
  }
  int extra(Shape s, Fill f = Fill::kUniform) {
    Tensor x;
    x.shape = std::move(s);
    x.type = type;
    x.fill = f;
    b.tensors.push_back(std::move(x));
    return static_cast<int>(b.tensors.size() - 1);
  }
  // A device buffer the steps use (workspace, padded input), kept alive with the kernel.
  void* scratch(size_t bytes) {
    if (bytes == 0) return nullptr;
    auto buf = std::make_shared<DeviceBuffer>(bytes);
    b.keep.push_back(buf);
    return buf->data;
  }
  template <class D>
  D& desc() {
    auto d = std::make_shared<D>();
    b.keep.push_back(d);
    return *d;
  }
  // The case's library prefix, its family: "cudnn_conv" of "cudnn_conv:IMPLICIT_GEMM:padded" (the
  // algorithm names cuda_plan.cpp writes: family, then ':' and the variant where there is one).
  std::string family() const { return split_algorithm(spec.variant.algorithm).family; }
  // The case's variant after the library prefix: "IMPLICIT_GEMM" of "cudnn_conv:IMPLICIT_GEMM:padded".
  std::string variant() const {
    std::string v = split_algorithm(spec.variant.algorithm).rest;
    if (const auto pad = v.find(":padded"); pad != std::string::npos) v.erase(pad);
    return v;
  }
  bool tensor_ops() const { return spec.variant.math_mode != MathMode::kFp32; }
};

const float kOne = 1.f, kZero = 0.f, kMinusOne = -1.f;

int64_t free_device_memory();
void check_workspace(int64_t bytes);

// --- builders, one per library call family -------------------------------------------------------------

void conv(Ctx& c);  // conv.cpp
struct ConvAlgorithm {
  cudnnConvolutionFwdAlgo_t algo{};
  std::string how;  // " (cudnnGetConvolutionForwardAlgorithm_v7's first)", ... or "" when named
};
// The case's algorithm (its variant): named, the heuristic's first, or Find's fastest (Find runs the
// convolution on these buffers).
ConvAlgorithm choose_conv_algorithm(Ctx& c, const TensorDesc& xd, const void* x, const FilterDesc& wd,
                                    void* w, const ConvDesc& cd, const TensorDesc& yd, void* y);
std::string conv_algo_name(cudnnConvolutionFwdAlgo_t a);
void gemm(Ctx& c);  // gemm.cpp

template <class T, cublasStatus_t (*Destroy)(T)>
struct LtObject {
  T h = nullptr;
  LtObject() = default;
  LtObject(const LtObject&) = delete;
  LtObject& operator=(const LtObject&) = delete;
  ~LtObject() {
    if (h) Destroy(h);
  }
};
// One cublasLtMatmul, D = alpha·op(A)·op(B) + beta·C, in cuBLASLt's (column-major) terms; the
// descriptors and layouts are kept alive by the kernel (Build::keep).
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  const void* a_ptr = nullptr;
  const void* b_ptr = nullptr;
  const void* c_ptr = nullptr;
  void* d_ptr = nullptr;
  float alpha = 1, beta = 0;           // host scalars (scale type CUDA_R_32F)
  const void* alpha_device = nullptr;  // instead of alpha: a device vector, one per row of D
};
// Asks cublasLtMatmulAlgoGetHeuristic for up to kLtAlgorithms algorithms, takes the one the case's
// variant numbers (cublaslt_matmul:<index>), and adds the call as the kernel's step; sets the
// implementation and the workspace. Unsupported when the heuristic returns none, skipped when it
// returns fewer than the index.
void lt_matmul_step(Ctx& c, const LtCall& call);
// int8 (int8.cpp): cuDNN int8 convolutions (NHWC) and cuBLASLt int8 GEMMs (IMMA, TN).
void conv_int8(Ctx& c);
void gemm_int8(Ctx& c);
void batch_norm(Ctx& c);  // cudnn_ops.cpp
void activation(Ctx& c);
void softmax(Ctx& c);
device::Pooling pooling_geometry(const Ctx& c);
void cudnn_pooling(Ctx& c);
void lrn(Ctx& c);
void op_tensor(Ctx& c);  // cudnn_tensor_ops.cpp
void add_tensor(Ctx& c);
void transform(Ctx& c);
void reduce(Ctx& c);
void layout_conversion(Ctx& c);
void own_copy(Ctx& c);  // floorline_kernels.cpp
void own_eltwise(Ctx& c);
void own_binary(Ctx& c);
void own_pooling(Ctx& c);
void own_layer_norm(Ctx& c);
void own_gather(Ctx& c);
void own_resize(Ctx& c);
void rnn(Ctx& c);  // cudnn_rnn.cpp

}  // namespace floorline::kernels::cuda_detail
