// CUDA kernels: one builder per layer kind maps a Problem onto cuDNN (legacy API), cuBLAS,
// cuBLASLt or Floorline's own kernels (device_kernels.cu); one generic Kernel owns the device
// tensors, runs the steps on Floorline's stream and verifies them against the reference.
//
// Every tensor of a problem has one device buffer, in the case's layout (NCHW or NHWC for
// activations) and data type. Inputs are filled once from host random values (uniform in [-1, 1),
// positive where the op needs it) when the kernel is built; descriptors, workspace and algorithm
// search also happen then. A step is one library call (or one launch of ours) enqueued on the
// stream; timed_run() records events around the steps only.
//
// This file holds the error checks, device tensors, descriptors, the kernel, the dispatch by
// algorithm family and the public entry points; kernel_internal.hpp lists the other files.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <map>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

// --- errors -----------------------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& message) {
  throw CudaFailure(Disposition::kFailed, message);
}
[[noreturn]] void fail(Disposition code, const std::string& message) {
  throw CudaFailure(code, message);
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a sticky launch error where it is not fatal
  const std::string msg = fmt::format("{}: {} ({})", what, cudaGetErrorName(e), cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) fail(Disposition::kSkipped, "out of device memory: " + msg);
  fail(msg);
}

// cuDNN 9 groups statuses by thousands: 2xxx bad parameter, 3xxx not supported.
void check(cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  const int category = static_cast<int>(s) / 1000;
  const std::string msg = fmt::format("{}: {}", what, cudnnGetErrorString(s));
  if (category == 3 || category == 2) fail(Disposition::kUnsupported, msg);
  fail(msg);
}
// At run time every cuDNN error is a failure.
void check_run(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) fail(fmt::format("{}: {}", what, cudnnGetErrorString(s)));
}

namespace {

const char* cublas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

}  // namespace
void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = fmt::format("{}: {}", what, cublas_name(s));
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
    fail(Disposition::kUnsupported, msg);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) fail(Disposition::kSkipped, "out of device memory: " + msg);
  fail(msg);
}

// --- tensors --------------------------------------------------------------------------------------

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::kF16:
      return CUDNN_DATA_HALF;
    case DType::kBF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kInt8:
      return CUDNN_DATA_INT8;
    default:
      return CUDNN_DATA_FLOAT;
  }
}
cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kInt8:
      return CUDA_R_8I;
    default:
      return CUDA_R_32F;
  }
}

namespace {

// The physical position of logical (NCHW) element i in a channels-last buffer.
int64_t channels_last_offset(const Shape& s, int64_t i) {
  const int64_t C = s[1], S = elements(s) / (s[0] * C);
  const int64_t n = i / (C * S), c = i / S % C, sp = i % S;
  return (n * S + sp) * C + c;
}

// The tensor's device buffer → host f32 in logical order: the values as the device holds them (f16
// and bf16 inputs rounded), which is what the reference must read.
std::vector<float> download(const Tensor& t) {
  const int64_t n = t.count();
  std::vector<unsigned char> bytes(t.bytes());
  check(cudaMemcpy(bytes.data(), t.buf.data, bytes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t.is_index) {
      out[i] = static_cast<float>(reinterpret_cast<const int64_t*>(bytes.data())[i]);
      continue;
    }
    const int64_t at = t.channels_last ? channels_last_offset(t.shape, i) : i;
    switch (t.type) {
      case DType::kF32:
        out[i] = reinterpret_cast<const float*>(bytes.data())[at];
        break;
      case DType::kF16:
        out[i] = __half2float(reinterpret_cast<const __half*>(bytes.data())[at]);
        break;
      case DType::kBF16:
        out[i] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(bytes.data())[at]);
        break;
      case DType::kInt8:
        out[i] = static_cast<float>(reinterpret_cast<const int8_t*>(bytes.data())[at]);
        break;
    }
  }
  return out;
}

}  // namespace

// --- cuDNN descriptors (RAII) ------------------------------------------------------------------------

std::vector<int> int_dims(const Shape& s) {
  std::vector<int> d;
  for (auto v : s) {
    if (v > INT_MAX) fail(Disposition::kUnsupported, fmt::format("dimension {} exceeds cuDNN's int", v));
    d.push_back(static_cast<int>(v));
  }
  return d;
}
// An activation's dims as a 4-D (or 5-D) NCHW descriptor: trailing 1s keep N and C in place
// (BatchNorm1d's N×C×L is N×C×L×1).
std::vector<int> nchw_dims(const Shape& s) {
  std::vector<int> d = int_dims(s);
  while (d.size() < 4) d.push_back(1);
  return d;
}
std::vector<int> packed_strides(const std::vector<int>& d) {
  std::vector<int> st(d.size(), 1);
  for (int k = static_cast<int>(d.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  return st;
}
// A tensor descriptor in NCHW (or NHWC) format for dims in NCHW order.
void set_tensor(TensorDesc& desc, DType t, const std::vector<int>& dims, bool nhwc) {
  check(cudnnSetTensorNdDescriptorEx(desc, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(t),
                                     static_cast<int>(dims.size()), dims.data()),
        "cudnnSetTensorNdDescriptorEx");
}
void set_strided(TensorDesc& desc, DType t, const std::vector<int>& dims, const std::vector<int>& strides) {
  check(cudnnSetTensorNdDescriptor(desc, cudnn_type(t), static_cast<int>(dims.size()), dims.data(),
                                   strides.data()),
        "cudnnSetTensorNdDescriptor");
}
// A flat tensor of n elements, as cuDNN's element-wise calls see any shape.
void set_flat(TensorDesc& desc, DType t, int64_t n) {
  if (n > INT_MAX) fail(Disposition::kUnsupported, "more than 2^31 elements for a cuDNN element-wise call");
  set_strided(desc, t, {1, 1, 1, static_cast<int>(n)},
              {static_cast<int>(n), static_cast<int>(n), static_cast<int>(n), 1});
}

// --- the kernel ---------------------------------------------------------------------------------------

namespace {

bool g_cold = false;
// How long the timed call's gate waits for the host to enqueue a case's calls (ns): far longer than
// any case's enqueueing (tens of launches at tens of µs each), short enough not to stall a run.
constexpr uint64_t kGateMaxNs = 200'000'000;

class CudaKernel final : public Kernel {
 public:
  CudaKernel(Problem problem, Build b, Context& ctx, uint64_t seed)
      : problem_(b.reference_problem ? *b.reference_problem : std::move(problem)),
        b_(std::move(b)),
        ctx_(ctx),
        seed_(seed) {}

  // Fresh random inputs (on the device), then the prefills.
  void initialise(uint64_t seed) {
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      Tensor& x = b_.tensors[t];
      if (x.is_output || x.fill == Fill::kNone) continue;
      if (x.is_index) {
        check(device::fill_indices(static_cast<int64_t*>(x.buf.data), x.count(), x.index_bound, seed + t,
                                   ctx_.stream),
              "fill");
        continue;
      }
      const bool positive = x.fill == Fill::kPositive, small = x.fill == Fill::kSmall,
                 range = x.fill == Fill::kRange;
      check(device::fill_uniform(x.type, x.buf.data, x.count(),
                                 range      ? x.lo
                                 : positive ? 0.5f
                                 : small    ? -0.0625f
                                            : -1.f,
                                 range      ? x.span
                                 : positive ? 1.f
                                 : small    ? 0.125f
                                            : 2.f,
                                 seed + t, ctx_.stream),
            "fill");
    }
    apply_prefills();
  }

  void run() override {
    enqueue();
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize");
  }

  // The events time the GPU's work alone: a gate kernel (device::hold) holds the stream while the
  // host enqueues the flush, the start event, the case's calls and the stop event, then the host
  // opens it. Without it, the host's time in a library call (cuDNN's legacy API builds an execution
  // plan per call: tens of µs) would pass with the GPU idle between the events and be counted, as
  // it would not be in a graph replayed by a framework (CUDA Graphs) or in a busy stream. A call
  // that waits on the stream itself (a synchronous copy) would keep the gate shut until it gives up
  // (kGateMaxNs): that case is timed ungated from then on.
  double timed_run() override {
    const bool gated = ctx_.gate && !ungated_;
    if (gated) {
      ctx_.gate[0] = 0;
      ctx_.gate[1] = 0;
      check(device::hold(ctx_.gate_device, kGateMaxNs, ctx_.stream), "gate kernel");
    }
    if (g_cold)
      check(cudaMemsetAsync(ctx_.flush, static_cast<int>(++flushes_ & 0xff), ctx_.flush_bytes, ctx_.stream),
            "L2 flush");
    check(cudaEventRecord(ctx_.start, ctx_.stream), "cudaEventRecord");
    enqueue();
    check(cudaEventRecord(ctx_.stop, ctx_.stream), "cudaEventRecord");
    if (gated) {
      __atomic_store_n(const_cast<int*>(ctx_.gate), 1, __ATOMIC_SEQ_CST);
      check(cudaEventSynchronize(ctx_.stop), "cudaEventSynchronize");
      if (ctx_.gate[1] != 0) ungated_ = true;
    } else {
      check(cudaEventSynchronize(ctx_.stop), "cudaEventSynchronize");
    }
    float ms = 0;
    check(cudaEventElapsedTime(&ms, ctx_.start, ctx_.stop), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

  // CUDA events time the GPU's work alone (and the gate keeps the host's enqueue out of them).
  bool device_timed() const override { return true; }
  std::string implementation() const override { return b_.implementation; }
  int64_t workspace_bytes() const override { return b_.workspace; }

  Status verify() override {
    if (!b_.not_verifiable.empty()) return make_error(Disposition::kNotVerifiable, "{}", b_.not_verifiable);
    try {
      initialise(seed_ + 7);
      run();
      std::vector<HostTensor> ins, extras;
      for (size_t t = 0; t < b_.tensors.size(); ++t) {
        const Tensor& x = b_.tensors[t];
        if (x.is_output) continue;
        (t < b_.n_inputs ? ins : extras).push_back(HostTensor{x.shape, download(x)});
      }
      FL_ASSIGN_OR_RETURN(auto ref, cached_reference(ins, extras));
      const Tolerance tolerance = verify_tolerance(problem_, b_.storage, b_.math, b_.fast_algorithm);
      for (size_t k = 0; k < b_.n_outputs && k < ref.size(); ++k) {
        const auto got = download(b_.tensors[b_.n_inputs + k]);
        if (auto st = compare_output(got.data(), ref[k], tolerance); !st)
          return st.error().with_context(fmt::format("output {}", k));
      }
      return {};
    } catch (const std::exception& e) {
      return make_error("{}", e.what());
    }
  }

  void sample_device(bool after) override {
    if (!ctx_.nvml.ok) return;
    auto& n = ctx_.nvml;
    unsigned clock = 0, temp = 0, power = 0;
    unsigned long long reasons = 0;
    const std::string when = after ? "after" : "before";
    if (n.clock && n.clock(n.device, 1 /* NVML_CLOCK_SM */, &clock) == 0)
      counters_["sm_clock_mhz_" + when] = clock;
    if (n.temperature && n.temperature(n.device, 0 /* NVML_TEMPERATURE_GPU */, &temp) == 0)
      counters_["temperature_c_" + when] = temp;
    if (n.power && n.power(n.device, &power) == 0) counters_["power_w_" + when] = power / 1000.0;
    if (n.reasons && n.reasons(n.device, &reasons) == 0) {
      counters_["throttle_reasons_" + when] = static_cast<double>(reasons);
      if (reasons & kThrottleMask) counters_["throttled"] = 1;
    }
  }
  std::map<std::string, double> device_counters() const override { return counters_; }

 private:
  void enqueue() {
    for (auto& s : b_.steps) s(ctx_);
  }
  // The reference outputs, shared by the cases of one problem whose inputs are the same (every
  // algorithm and math mode of a config in one data type and layout: the seed is the config's).
  Result<std::vector<HostTensor>> cached_reference(const std::vector<HostTensor>& ins,
                                                   const std::vector<HostTensor>& extras) {
    std::string key = fmt::format("{}|{}|{}", problem_.key, seed_, problem_.post_ops.size());
    for (const auto& po : problem_.post_ops) key += "|" + po.op;
    for (const auto& t : b_.tensors)
      key += fmt::format("|{}{}{}{}", static_cast<int>(t.type), static_cast<int>(t.fill), t.channels_last,
                         t.is_index);
    static std::map<std::string, std::vector<HostTensor>> cache;
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    FL_ASSIGN_OR_RETURN(auto ref, reference(problem_, ins, extras));
    if (cache.size() >= 8) cache.clear();
    cache[key] = ref;
    return ref;
  }
  void apply_prefills() {
    for (auto& s : b_.prefills) s(ctx_);
    check(cudaStreamSynchronize(ctx_.stream), "cudaStreamSynchronize");
  }

  Problem problem_;
  Build b_;
  Context& ctx_;
  uint64_t seed_;
  uint64_t flushes_ = 0;
  bool ungated_ = false;  // the gate gave up once: a call of this case waits on the stream
  std::map<std::string, double> counters_;
};

}  // namespace

// --- building ---------------------------------------------------------------------------------------

int64_t free_device_memory() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<int64_t>(free);
}
void check_workspace(int64_t bytes) {
  const int64_t limit = workspace_limit(free_device_memory());
  if (bytes > limit)
    fail(Disposition::kSkipped,
         fmt::format(
             "workspace {:.1f} MiB exceeds the limit of {:.1f} MiB (free device memory less a reserve)",
             static_cast<double>(bytes) / (1 << 20), static_cast<double>(limit) / (1 << 20)));
}

namespace {

void build(Ctx& c) {
  const std::string& a = c.spec.variant.algorithm;
  const std::string family = c.family();
  const std::string& op = c.p.op;
  if (family == "cudnn_transform" && parse_conversion(c.spec.variant.layout)) return layout_conversion(c);
  // int8: cuDNN's int8 convolutions and cuBLASLt's int8 GEMMs only (cuda_plan.cpp).
  if (c.spec.variant.dtype == DType::kInt8) {
    if (family == "cudnn_conv" || family == "cudnn_conv_bias_act") return conv_int8(c);
    if (family == "cublaslt_matmul") return gemm_int8(c);
    fail(Disposition::kUnsupported, fmt::format("the CUDA backend has no int8 form of {} for {}", a, op));
  }
  if (family == "cudnn_conv" || family == "cudnn_conv_bias_act") return conv(c);
  if (family == "cublas_gemm" || family == "cublas_gemm_strided_batched" || family == "cublas_gemv" ||
      family == "cublaslt_matmul")
    return gemm(c);
  if (family == "cudnn_batchnorm_inference") return batch_norm(c);
  if (family == "cudnn_activation") return activation(c);
  if (family == "cudnn_softmax") return softmax(c);
  if (family == "cudnn_pooling") return cudnn_pooling(c);
  if (family == "cudnn_lrn") return lrn(c);
  if (family == "cudnn_op_tensor") return op_tensor(c);
  if (family == "cudnn_add_tensor") return add_tensor(c);
  if (family == "cudnn_transform") return transform(c);
  if (family == "cudnn_reduce") return reduce(c);
  if (family == "cudnn_rnn") return rnn(c);
  if (a == "floorline-kernel:copy") return own_copy(c);
  if (a == "floorline-kernel:eltwise") return own_eltwise(c);
  if (a == "floorline-kernel:binary") return own_binary(c);
  if (a == "floorline-kernel:pooling") return own_pooling(c);
  if (a == "floorline-kernel:layer_norm") return own_layer_norm(c);
  if (a == "floorline-kernel:gather") return own_gather(c);
  if (a == "floorline-kernel:resize") return own_resize(c);
  fail(Disposition::kUnsupported, fmt::format("the CUDA backend has no algorithm {} for {}", a, op));
}

}  // namespace

}  // namespace floorline::kernels::cuda_detail

namespace floorline::kernels {

using namespace cuda_detail;

void set_cuda_cold_cache(bool cold) {
  g_cold = cold;
}
bool cuda_cold_cache() {
  return g_cold;
}

int64_t cuda_cold_cache_bytes() {
  const auto ctx = cuda_detail::context();
  return ctx.ok() ? static_cast<int64_t>((*ctx)->flush_bytes) : 0;
}

Result<std::unique_ptr<Kernel>> make_cuda_kernel(const CaseSpec& spec) {
  FL_ASSIGN_OR_RETURN(Context * dev, context());
  try {
    Ctx c{spec, spec.problem, *dev, spec.variant.dtype, spec.variant.layout == "nhwc", {}};
    for (size_t k = 0; k < spec.problem.inputs.size(); ++k) {
      Tensor t;
      t.shape = spec.problem.inputs[k].shape;
      t.type = c.type;
      // A weight on ±√(3 / fan-in) (the kernel API's fill_half_width, problem.hpp).
      if (const float a = fill_half_width(spec.problem, k); a != 1.f) {
        t.fill = Fill::kRange;
        t.lo = -a;
        t.span = 2 * a;
      }
      c.b.tensors.push_back(std::move(t));
    }
    for (const auto& out : spec.problem.outputs) {
      Tensor t;
      t.shape = out.shape;
      t.type = c.type;
      t.is_output = true;
      t.fill = Fill::kNone;
      c.b.tensors.push_back(std::move(t));
    }
    c.b.n_inputs = spec.problem.inputs.size();
    c.b.n_outputs = spec.problem.outputs.size();
    c.b.storage = spec.variant.dtype;
    c.b.math = spec.variant.math_mode;
    build(c);
    for (size_t t = 0; t < c.b.tensors.size(); ++t) c.ptr(static_cast<int>(t));
    // One seed per config, data type and layout: every algorithm of a config reads the same inputs.
    auto kernel = std::make_unique<CudaKernel>(
        spec.problem, std::move(c.b), *dev,
        std::hash<std::string>{}(spec.problem.key + std::string(floorline::dtype_name(spec.variant.dtype)) +
                                 spec.variant.layout) >>
            8);
    kernel->initialise(1);
    return std::unique_ptr<Kernel>(std::move(kernel));
  } catch (const CudaFailure& e) {
    return Error{e.what(), e.code};
  } catch (const std::exception& e) {
    return make_error("{}", e.what());
  }
}

benchmark::internal::Benchmark* register_cuda_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_cuda_kernel);
}

}  // namespace floorline::kernels
