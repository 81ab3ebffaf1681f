// Floorline's own CUDA kernels (device_kernels.hpp): plain grid-stride loops, arithmetic in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device_kernels.hpp"

namespace floorline::kernels::device {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

template <class T>
__device__ __forceinline__ float load(const T* p, int64_t i) {
  return static_cast<float>(p[i]);
}
template <>
__device__ __forceinline__ float load(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
template <>
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <class T>
__device__ __forceinline__ void store(T* p, int64_t i, float v) {
  p[i] = static_cast<T>(v);
}
template <>
__device__ __forceinline__ void store(__half* p, int64_t i, float v) {
  p[i] = __float2half(v);
}
template <>
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16(v);
}
// int8 data (the int8 cases' operands): whole numbers, rounded down and saturated.
template <>
__device__ __forceinline__ void store(int8_t* p, int64_t i, float v) {
  p[i] = static_cast<int8_t>(fminf(fmaxf(floorf(v), -128.f), 127.f));
}

#define FL_GRID_LOOP(i, n)                                                               \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Calls f.template operator()<T>() with T the element type of `t`.
template <class F>
cudaError_t dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      f(static_cast<float*>(nullptr));
      break;
    case DType::kF16:
      f(static_cast<__half*>(nullptr));
      break;
    case DType::kBF16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case DType::kInt8:  // int8 cases fill their 8-bit operands (fill_uniform), no kernel of ours runs on them
      return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

// splitmix64: a well-mixed 64-bit hash of (index, seed).
__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* data, int64_t n, float lo, float span, uint64_t seed) {
  FL_GRID_LOOP(i, n) {
    const float u = static_cast<float>(mix(static_cast<uint64_t>(i) ^ (seed * 0xD1B54A32D192ED03ull)) >> 40) *
                    (1.f / 16777216.f);
    store(data, i, lo + span * u);
  }
}

__global__ void fill_indices_kernel(int64_t* data, int64_t n, int64_t bound, uint64_t seed) {
  FL_GRID_LOOP(i, n)
  data[i] = static_cast<int64_t>(mix(static_cast<uint64_t>(i) ^ (seed * 0xD1B54A32D192ED03ull)) %
                                 static_cast<uint64_t>(bound));
}

// Index arithmetic in I: int32_t where every offset fits (fits_int32) and n ≤ kMax32 (so that the
// grid-stride step cannot overflow), else int64_t. The dims come coalesced (coalesced()): the
// outermost index needs no division, as i < n bounds it.
constexpr int64_t kMax32 = int64_t{1} << 30;

#define FL_GRID_LOOP_I(I, i, n)                                                              \
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x))

// The offsets of element i in two operands over `rank` coalesced dims, added to a and b: a
// division per dim but the outermost, which i < n bounds.
template <class I>
__device__ __forceinline__ void add_offsets(I i, int rank, const int64_t* dims, const int64_t* a_strides,
                                            const int64_t* b_strides, I& a, I& b) {
  for (int k = rank - 1; k > 0; --k) {
    const I dim = static_cast<I>(dims[k]);
    const I q = i / dim, idx = i - q * dim;
    i = q;
    a += idx * static_cast<I>(a_strides[k]);
    b += idx * static_cast<I>(b_strides[k]);
  }
  a += i * static_cast<I>(a_strides[0]);
  b += i * static_cast<I>(b_strides[0]);
}

template <class T, class I>
__global__ void strided_copy_kernel(const T* src, T* dst, StridedCopy c, I n) {
  FL_GRID_LOOP_I(I, i, n) {
    I s = static_cast<I>(c.src_offset), d = static_cast<I>(c.dst_offset);
    add_offsets(i, c.rank, c.dims, c.src_strides, c.dst_strides, s, d);
    dst[d] = src[s];
  }
}

__device__ float apply_unary(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
    case UnaryOp::kRelu:
      return x > 0 ? x : 0;
    case UnaryOp::kLeakyRelu:
      return x < 0 ? alpha * x : x;
    case UnaryOp::kElu:
      return x < 0 ? alpha * (expf(x) - 1) : x;
    case UnaryOp::kSelu:
      return 1.0507009873554805f * (x < 0 ? 1.6732632423543772f * (expf(x) - 1) : x);
    case UnaryOp::kClip:
      return fminf(fmaxf(x, alpha), beta);
    case UnaryOp::kSigmoid:
      return 1 / (1 + expf(-x));
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kHardSigmoid:
      return fminf(fmaxf(alpha * x + beta, 0.f), 1.f);
    case UnaryOp::kHardSwish:
      return x * fminf(fmaxf(x / 6 + 0.5f, 0.f), 1.f);
    case UnaryOp::kSoftplus:
      return log1pf(expf(x));
    case UnaryOp::kErf:
      return erff(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kReciprocal:
      return 1 / x;
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return fabsf(x);
    case UnaryOp::kPow:
      return powf(x, beta);
    case UnaryOp::kGelu:  // ONNX Gelu (opset 20): 0.5·x·(1 + erf(x/√2)), or the tanh approximation
      return alpha != 0 ? 0.5f * x * (1 + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))
                        : 0.5f * x * (1 + erff(x * 0.7071067811865476f));
    case UnaryOp::kIdentity:
      return x;
  }
  return x;
}

template <class T>
__global__ void unary_kernel(UnaryOp op, float alpha, float beta, const T* x, T* y, int64_t n) {
  FL_GRID_LOOP(i, n) store(y, i, apply_unary(op, load(x, i), alpha, beta));
}

__device__ float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMax:
      return fmaxf(a, b);
    case BinaryOp::kMin:
      return fminf(a, b);
    case BinaryOp::kPow:
      return powf(a, b);
    case BinaryOp::kPRelu:
      return a < 0 ? a * b : a;
  }
  return a;
}

template <class T, class I>
__global__ void binary_kernel(BinaryOp op, const T* a, const T* b, T* y, Broadcast s, I n) {
  FL_GRID_LOOP_I(I, i, n) {
    I ia = 0, ib = 0;
    add_offsets(i, s.rank, s.dims, s.a_strides, s.b_strides, ia, ib);
    store(y, i, apply_binary(op, load(a, ia), load(b, ib)));
  }
}

// Output element i of an NC × out[0] × out[1] × out[2] tensor: its spatial index o, and its plane n·C + c.
__device__ __forceinline__ int64_t spatial_index(int64_t i, const int64_t out[3], int64_t o[3]) {
  for (int d = 2; d >= 0; --d) {
    o[d] = i % out[d];
    i /= out[d];
  }
  return i;
}

template <class T>
__global__ void pooling_kernel(const T* x, T* y, Pooling p, int64_t n) {
  FL_GRID_LOOP(i, n) {
    int64_t o[3];
    const int64_t plane = spatial_index(i, p.out, o);
    float acc = p.max ? -INFINITY : 0.f;
    int64_t count = 0, padded_count = 0;
    for (int64_t a = 0; a < p.kernel[0]; ++a)
      for (int64_t b = 0; b < p.kernel[1]; ++b)
        for (int64_t c = 0; c < p.kernel[2]; ++c) {
          const int64_t at[3] = {o[0] * p.stride[0] - p.pad[0] + a * p.dil[0],
                                 o[1] * p.stride[1] - p.pad[1] + b * p.dil[1],
                                 o[2] * p.stride[2] - p.pad[2] + c * p.dil[2]};
          // Positions inside the padded input count for an average that includes the padding.
          bool inside = true, in_padded = true;
          for (int d = 0; d < 3; ++d) {
            inside = inside && at[d] >= 0 && at[d] < p.in[d];
            in_padded = in_padded && at[d] < p.in[d] + p.pad_end[d];
          }
          if (in_padded) ++padded_count;
          if (!inside) continue;
          const float v = load(x, ((plane * p.in[0] + at[0]) * p.in[1] + at[1]) * p.in[2] + at[2]);
          acc = p.max ? fmaxf(acc, v) : acc + v;
          ++count;
        }
    if (p.include_pad) count = padded_count;
    store(y, i, p.max ? acc : (count > 0 ? acc / static_cast<float>(count) : 0.f));
  }
}

template <class T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y, int64_t inner, float eps) {
  __shared__ float partial[2][kThreads];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * inner;
  T* yr = y + row * inner;
  float sum = 0, sq = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    const float v = load(xr, i);
    sum += v;
    sq += v * v;
  }
  partial[0][threadIdx.x] = sum;
  partial[1][threadIdx.x] = sq;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) {
      partial[0][threadIdx.x] += partial[0][threadIdx.x + step];
      partial[1][threadIdx.x] += partial[1][threadIdx.x + step];
    }
    __syncthreads();
  }
  const float mean = partial[0][0] / static_cast<float>(inner);
  const float var = fmaxf(partial[1][0] / static_cast<float>(inner) - mean * mean, 0.f);
  const float inv = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
    float v = (load(xr, i) - mean) * inv * load(scale, i);
    if (bias) v += load(bias, i);
    store(yr, i, v);
  }
}

template <class T>
__global__ void gather_kernel(const T* x, const int64_t* indices, T* y, int64_t axis_dim, int64_t n_indices,
                              int64_t inner, int64_t n) {
  FL_GRID_LOOP(i, n) {
    const int64_t in = i % inner, j = i / inner % n_indices, o = i / inner / n_indices;
    int64_t idx = indices[j];
    if (idx < 0) idx += axis_dim;
    y[i] = x[(o * axis_dim + idx) * inner + in];
  }
}

template <class T>
__global__ void resize_kernel(const T* x, T* y, int64_t nc, Pooling s, bool linear, int64_t n) {
  FL_GRID_LOOP(i, n) {
    int64_t o[3];
    const int64_t plane = spatial_index(i, s.out, o);
    float src[3];
    for (int d = 0; d < 3; ++d)
      src[d] =
          (static_cast<float>(o[d]) + 0.5f) * static_cast<float>(s.in[d]) / static_cast<float>(s.out[d]) -
          0.5f;
    if (!linear) {
      int64_t at[3];
      for (int d = 0; d < 3; ++d)
        at[d] = min(max(static_cast<int64_t>(roundf(src[d])), int64_t{0}), s.in[d] - 1);
      y[i] = x[((plane * s.in[0] + at[0]) * s.in[1] + at[1]) * s.in[2] + at[2]];
      continue;
    }
    int64_t lo[3], hi[3];
    float w[3];
    for (int d = 0; d < 3; ++d) {
      const float c = fmaxf(src[d], 0.f);
      lo[d] = min(static_cast<int64_t>(floorf(c)), s.in[d] - 1);
      hi[d] = min(lo[d] + 1, s.in[d] - 1);
      w[d] = c - static_cast<float>(lo[d]);
    }
    float acc = 0;
    for (int corner = 0; corner < 8; ++corner) {
      float wc = 1;
      int64_t at[3];
      for (int d = 0; d < 3; ++d) {
        const bool up = (corner >> d) & 1;
        at[d] = up ? hi[d] : lo[d];
        wc *= up ? w[d] : 1.f - w[d];
      }
      acc += wc * load(x, ((plane * s.in[0] + at[0]) * s.in[1] + at[1]) * s.in[2] + at[2]);
    }
    store(y, i, acc);
  }
  (void)nc;
}

int64_t product(const int64_t* d, int rank) {
  int64_t n = 1;
  for (int k = 0; k < rank; ++k) n *= d[k];
  return n;
}

__global__ void hold_kernel(volatile int* release, unsigned long long max_ns) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (release[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > max_ns) {
      release[1] = 1;
      return;
    }
  }
}

}  // namespace

cudaError_t hold(volatile int* release, uint64_t max_ns, cudaStream_t stream) {
  hold_kernel<<<1, 1, 0, stream>>>(release, static_cast<unsigned long long>(max_ns));
  return cudaGetLastError();
}

cudaError_t fill_uniform(DType t, void* data, int64_t n, float lo, float span, uint64_t seed,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (t == DType::kInt8) {
    fill_uniform_kernel<int8_t>
        <<<blocks_for(n), kThreads, 0, stream>>>(static_cast<int8_t*>(data), n, lo, span, seed);
    return cudaGetLastError();
  }
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_uniform_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, lo, span, seed);
  });
}

cudaError_t fill_indices(int64_t* data, int64_t n, int64_t bound, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_indices_kernel<<<blocks_for(n), kThreads, 0, stream>>>(data, n, bound < 1 ? 1 : bound, seed);
  return cudaGetLastError();
}

cudaError_t strided_copy(DType t, const void* src, void* dst, const StridedCopy& copy, cudaStream_t stream) {
  const StridedCopy c = coalesced(copy);
  const int64_t n = product(c.dims, c.rank);
  if (n == 0) return cudaSuccess;
  const bool narrow = n <= kMax32 && fits_int32(c.rank, c.dims, c.src_strides, c.src_offset) &&
                      fits_int32(c.rank, c.dims, c.dst_strides, c.dst_offset);
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* sp = static_cast<const T*>(src);
    auto* dp = static_cast<T*>(dst);
    if (narrow)
      strided_copy_kernel<T, int32_t>
          <<<blocks_for(n), kThreads, 0, stream>>>(sp, dp, c, static_cast<int32_t>(n));
    else
      strided_copy_kernel<T, int64_t><<<blocks_for(n), kThreads, 0, stream>>>(sp, dp, c, n);
  });
}

cudaError_t unary(DType t, UnaryOp op, float alpha, float beta, const void* x, void* y, int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    unary_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(op, alpha, beta, static_cast<const T*>(x),
                                                            static_cast<T*>(y), n);
  });
}

cudaError_t binary(DType t, BinaryOp op, const void* a, const void* b, void* y, const Broadcast& shape,
                   cudaStream_t stream) {
  const Broadcast s = coalesced(shape);
  const int64_t n = product(s.dims, s.rank);
  if (n == 0) return cudaSuccess;
  const bool narrow =
      n <= kMax32 && fits_int32(s.rank, s.dims, s.a_strides, 0) && fits_int32(s.rank, s.dims, s.b_strides, 0);
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto* ap = static_cast<const T*>(a);
    const auto* bp = static_cast<const T*>(b);
    auto* yp = static_cast<T*>(y);
    if (narrow)
      binary_kernel<T, int32_t>
          <<<blocks_for(n), kThreads, 0, stream>>>(op, ap, bp, yp, s, static_cast<int32_t>(n));
    else
      binary_kernel<T, int64_t><<<blocks_for(n), kThreads, 0, stream>>>(op, ap, bp, yp, s, n);
  });
}

cudaError_t pooling(DType t, const void* x, void* y, const Pooling& p, cudaStream_t stream) {
  const int64_t n = p.nc * product(p.out, 3);
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    pooling_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), p, n);
  });
}

cudaError_t layer_norm(DType t, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                       int64_t inner, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows > 2147483647) return cudaErrorInvalidConfiguration;
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    layer_norm_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
        static_cast<T*>(y), inner, eps);
  });
}

cudaError_t gather(DType t, const void* x, const int64_t* indices, void* y, int64_t outer, int64_t axis_dim,
                   int64_t n_indices, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * n_indices * inner;
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    gather_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), indices, static_cast<T*>(y), axis_dim, n_indices, inner, n);
  });
}

cudaError_t resize(DType t, const void* x, void* y, int64_t nc, const int64_t in[3], const int64_t out[3],
                   bool linear, cudaStream_t stream) {
  Pooling s;
  for (int d = 0; d < 3; ++d) {
    s.in[d] = in[d];
    s.out[d] = out[d];
  }
  const int64_t n = nc * product(out, 3);
  if (n == 0) return cudaSuccess;
  return dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    resize_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), nc,
                                                             s, linear, n);
  });
}

}  // namespace floorline::kernels::device
