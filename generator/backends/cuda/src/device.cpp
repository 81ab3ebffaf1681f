// The CUDA device: availability, device information, and the context (stream, library handles,
// events, L2 flush buffer, NVML) that every kernel runs on.
#include <algorithm>
#include <limits>
#include <mutex>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

namespace {

std::mutex g_context_mutex;

}  // namespace

Result<Context*> context() {
  static Context* ctx = nullptr;
  static std::string error;
  std::lock_guard<std::mutex> lock(g_context_mutex);
  if (ctx) return ctx;
  if (!error.empty()) return make_error("{}", error);
  try {
    if (auto st = cuda_available(); !st) fail(st.error().message);
    auto c = std::make_unique<Context>();
    check(cudaSetDevice(c->device), "cudaSetDevice");
    check(cudaGetDeviceProperties(&c->prop, c->device), "cudaGetDeviceProperties");
    check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudnnCreate(&c->cudnn), "cudnnCreate");
    check(cudnnSetStream(c->cudnn, c->stream), "cudnnSetStream");
    check(cublasCreate(&c->cublas), "cublasCreate");
    check(cublasSetStream(c->cublas, c->stream), "cublasSetStream");
    check(cublasLtCreate(&c->lt), "cublasLtCreate");
    check(cudaEventCreate(&c->start), "cudaEventCreate");
    check(cudaEventCreate(&c->stop), "cudaEventCreate");
    c->flush_bytes = static_cast<size_t>(std::max(c->prop.l2CacheSize, 1 << 20)) * 2;
    check(cudaMalloc(&c->flush, c->flush_bytes), "cudaMalloc (L2 flush buffer)");
    void* gate = nullptr;
    void* gate_device = nullptr;
    if (cudaHostAlloc(&gate, 2 * sizeof(int), cudaHostAllocMapped) == cudaSuccess &&
        cudaHostGetDevicePointer(&gate_device, gate, 0) == cudaSuccess) {
      c->gate = static_cast<volatile int*>(gate);
      c->gate_device = static_cast<volatile int*>(gate_device);
    } else {
      cudaGetLastError();  // no mapped memory: timed calls go ungated
    }
    c->nvml.open(c->device);
    ctx = c.release();
    return ctx;
  } catch (const CudaFailure& e) {
    error = e.what();
    return Error{error, e.code};
  }
}

}  // namespace floorline::kernels::cuda_detail

namespace floorline::kernels {

Status cuda_available() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return make_error("no usable GPU ({}: {})", cudaGetErrorName(e), cudaGetErrorString(e));
  }
  if (count < 1) return make_error("no usable GPU (cudaGetDeviceCount found none)");
  return {};
}

double cuda_sentinel_seconds() {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  auto c = cuda_detail::context();
  if (!c) return kNaN;
  cuda_detail::Context& ctx = **c;
  float best = std::numeric_limits<float>::infinity();
  for (int call = 0; call < 3; ++call) {
    if (cudaEventRecord(ctx.start, ctx.stream) != cudaSuccess ||
        cudaMemsetAsync(ctx.flush, call, ctx.flush_bytes, ctx.stream) != cudaSuccess ||
        cudaEventRecord(ctx.stop, ctx.stream) != cudaSuccess ||
        cudaEventSynchronize(ctx.stop) != cudaSuccess) {
      (void)cudaGetLastError();
      return kNaN;
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ctx.start, ctx.stop) != cudaSuccess) {
      (void)cudaGetLastError();
      return kNaN;
    }
    best = std::min(best, ms);
  }
  return static_cast<double>(best) * 1e-3;
}

CudaDeviceInfo cuda_device_info() {
  CudaDeviceInfo info;
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess)
    info.runtime_version = fmt::format("{}.{}", v / 1000, v % 1000 / 10);
  const size_t cudnn = cudnnGetVersion();
  info.cudnn_version = fmt::format("{}.{}.{}", cudnn / 10000, cudnn % 10000 / 100, cudnn % 100);
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    info.cublas_version = fmt::format("{}.{}.{}", major, minor, patch);
  if (!cuda_available()) return info;
  if (cudaDriverGetVersion(&v) == cudaSuccess)
    info.driver_version = fmt::format("{}.{}", v / 1000, v % 1000 / 10);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return info;
  info.name = prop.name;
  std::string uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    uuid += fmt::format("{:02x}", static_cast<unsigned char>(prop.uuid.bytes[i]));
    if (i == 3 || i == 5 || i == 7 || i == 9) uuid += '-';
  }
  info.uuid = uuid;
  info.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
  info.sm_count = prop.multiProcessorCount;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.memory_bus_bits = prop.memoryBusWidth;
  info.l2_bytes = prop.l2CacheSize;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) == cudaSuccess) info.clock_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess)
    info.memory_clock_mhz = khz / 1000;
  return info;
}

}  // namespace floorline::kernels
