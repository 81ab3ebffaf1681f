// Floorline's own CUDA kernels (device_kernels.cu): plain, one thread per output element, for the
// ops no vendor library covers. Cases that run them are labelled "floorline-kernel". Each launcher
// enqueues on `stream` and returns the launch's error. Element types: f32, f16, bf16; arithmetic in
// f32. Shapes in elements; row-major unless strides say otherwise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device_index.hpp"
#include "floorline/common/dtype.hpp"

namespace floorline::kernels::device {

// The case's data type itself (common/dtype.hpp is C++17 for this include).
using DType = ::floorline::DType;
inline int64_t size_of(DType t) {
  return ::floorline::element_size(t);
}

// The timed call's gate (as nvbench's blocking kernel): one thread that spins until the host sets
// release[0] to non-zero (release: host memory mapped into the device), or until `max_ns` of the
// GPU's global timer have passed, when it sets release[1] = 1 and returns. Enqueued before the
// start event, it holds the stream while the host enqueues the case's calls, so that the events
// time the GPU's work alone and not the host's launch overhead.
cudaError_t hold(volatile int* release, uint64_t max_ns, cudaStream_t stream);

// Random inputs, generated on the device (a hash of the element index and the seed): uniform in
// [lo, lo + span) (int8: rounded down to whole numbers and saturated); indices uniform in [0, bound).
cudaError_t fill_uniform(DType t, void* data, int64_t n, float lo, float span, uint64_t seed,
                         cudaStream_t stream);
cudaError_t fill_indices(int64_t* data, int64_t n, int64_t bound, uint64_t seed, cudaStream_t stream);

// The strided copy (StridedCopy, device_index.hpp), its dims coalesced first.
cudaError_t strided_copy(DType t, const void* src, void* dst, const StridedCopy& c, cudaStream_t stream);

// The ONNX unary ops, with PostOp's alpha/beta (Clip: min/max; Pow: beta is the exponent).
enum class UnaryOp {
  kRelu,
  kLeakyRelu,
  kElu,
  kSelu,
  kClip,
  kSigmoid,
  kTanh,
  kHardSigmoid,
  kHardSwish,
  kSoftplus,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kNeg,
  kAbs,
  kPow,
  kGelu,  // alpha 0: x·Φ(x) with erf (approximate = "none"); alpha 1: the tanh form (approximate = "tanh")
  kIdentity
};
cudaError_t unary(DType t, UnaryOp op, float alpha, float beta, const void* x, void* y, int64_t n,
                  cudaStream_t stream);

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow, kPRelu };
// y[i] = op(a[...], b[...]) over a Broadcast (device_index.hpp), its dims coalesced first.
cudaError_t binary(DType t, BinaryOp op, const void* a, const void* b, void* y, const Broadcast& shape,
                   cudaStream_t stream);

// Direct pooling over NC(D)HW with per-dim kernel, stride, dilation, begin and end pads (3 dims;
// unused leading dims are 1); an average counts the padding (within the padded extent) or not.
struct Pooling {
  int64_t nc = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {},
          pad_end[3] = {}, dil[3] = {1, 1, 1};
  bool max = true, include_pad = false;
};
cudaError_t pooling(DType t, const void* x, void* y, const Pooling& p, cudaStream_t stream);

// y = (x − mean) / sqrt(var + eps) · scale + bias over rows of `inner` elements (one block per row);
// bias may be null.
cudaError_t layer_norm(DType t, const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                       int64_t inner, float eps, cudaStream_t stream);

// y[o, j, i] = x[o, indices[j], i] for o < outer, j < n_indices, i < inner.
cudaError_t gather(DType t, const void* x, const int64_t* indices, void* y, int64_t outer, int64_t axis_dim,
                   int64_t n_indices, int64_t inner, cudaStream_t stream);

// Resize over up to 3 spatial dims, half-pixel source coordinates: nearest (rounded) or linear.
cudaError_t resize(DType t, const void* x, void* y, int64_t nc, const int64_t in[3], const int64_t out[3],
                   bool linear, cudaStream_t stream);

}  // namespace floorline::kernels::device
