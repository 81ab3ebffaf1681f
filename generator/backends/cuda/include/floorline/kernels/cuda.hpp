// floorline/kernels/cuda.hpp — the CUDA (GPU) kernels: cuDNN 9 legacy API, cuBLAS and cuBLASLt,
// and plain CUDA kernels of Floorline's own for the ops no library covers.
//
// Each ONNX layer kind maps onto library calls (docs/BACKENDS.md has the table): Conv onto
// cudnnConvolutionForward with every legacy algorithm (and cudnnConvolutionBiasActivationForward
// for the fused cases), Gemm/MatMul onto cublasGemmEx, cublasSgemv, cublasGemmStridedBatchedEx
// and cublasLtMatmul (every algorithm its heuristic returns, epilogues for bias and activations),
// normalizations, activations, pooling, softmax, LRN, op-tensor, add-tensor, transform-tensor and
// reduce onto cuDNN. Ops without a library kernel (Concat, Slice, Pad, Gather, Resize,
// LayerNormalization, element-wise ops cuDNN lacks) run a plain kernel of ours: their algorithm
// starts "floorline-kernel", which is_own_kernel (common/case_id.hpp) reads as ours, as it reads
// the CPU `floorline` backend's cases: reports credit our kernels, and S_vendor leaves them out.
//
// Planning needs no GPU: cuda_cases() decides every case from the problem alone. Support that only
// the library can decide (an algorithm that does not implement a configuration) is asked when the
// case is built, and becomes the case's unsupported status.
//
// Timing (kernel.hpp): each Kernel's timed_run() records CUDA events on Floorline's own stream
// around the library calls only, then waits; descriptors, workspace, algorithm search and inputs are
// made when the kernel is built. set_cuda_cold_cache(true) flushes the L2 cache before each call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

// --- planning (no device) -------------------------------------------------------------------------

// The legacy forward convolution algorithms, as cuDNN spells them without the
// CUDNN_CONVOLUTION_FWD_ALGO_ prefix, in cudnnConvolutionFwdAlgo_t order.
const std::vector<std::string>& cudnn_conv_algorithms();

// The CUDA kind table (generator/backends/cuda/src/cuda_plan.cpp, cuda_row()): for every kind, the
// library calls and kernels of ours it is planned on ("cudnnSoftmaxForward"), or why it is not
// mapped. A kind with no mapping plans as one "unsupported" case with that reason. No GPU needed.
KindSupport cuda_support(LayerKind kind);

// One planned case of the CUDA backend (kernels::LibraryCase, shared by the library backends).
// The base case's variant with what is chosen here. Its algorithm is "<library call>:<variant>":
// "cudnn_conv:IMPLICIT_PRECOMP_GEMM", "cudnn_conv:heuristic" (what
// cudnnGetConvolutionForwardAlgorithm_v7 ranks first), "cudnn_conv:find" (the fastest that
// cudnnFindConvolutionForwardAlgorithmEx reports), "cublaslt_matmul:3" (the heuristic's 4th
// algorithm), "floorline-kernel:concat" (ours)...; its math mode fp32 (TF32 off) | tf32 | f16 |
// bf16; its layout "" (NCHW / row-major), "nhwc", or a conversion "src:nchw>nhwc".
using CudaCase = LibraryCase;

// Every case of `base` (its problem, dtype f32 | f16 | bf16 and post-ops; algorithm, math mode and
// layout are chosen here). f32 is planned in two math modes: fp32 (Tensor Cores off) and tf32.
// A problem Floorline cannot map yields one case "none" with status "unsupported" and the reason.
std::vector<CudaCase> cuda_cases(const CaseSpec& base);

// A convolution as cuDNN's Nd descriptors see it. 1-D is run as 2-D with H = 1. cuDNN pads each
// dimension symmetrically: where ONNX pads differ at the two ends, the input is padded explicitly
// (a floorline-kernel copy, part of the timed call) and cuDNN gets no padding.
struct ConvGeometry {
  int spatial = 2;           // 2 or 3
  std::vector<int> x, w, y;  // NCHW / KCRS / NKPQ dims (x as cuDNN sees it: padded when explicit)
  std::vector<int> pads, strides, dilations;  // per spatial dim, symmetric
  int groups = 1;
  bool explicit_pad = false;
  std::vector<int64_t> pad_begin;   // explicit pad: elements added before each spatial dim
  std::vector<int64_t> x_unpadded;  // explicit pad: the layer's own input dims
};
// Error coded unsupported for what cuDNN's descriptors cannot express (rank, int overflow).
Result<ConvGeometry> conv_geometry(const Problem& p);

// Workspace policy: the most workspace a case may use when `free_bytes` of device memory are free
// once its tensors are allocated: all but 5% of it and 256 MiB (what a framework caching allocator
// leaves for other layers). An algorithm needing more is skipped ("workspace ... exceeds ...").
int64_t workspace_limit(int64_t free_bytes);

// --- running (a GPU) --------------------------------------------------------------------------------

// Builds a CUDA case (a KernelFactory). Errors coded unsupported when the library does not
// implement the configuration, skipped when the policy declines it (workspace too large, the
// heuristic returned fewer algorithms than the case's index), otherwise a failure with the CUDA,
// cuDNN or cuBLAS status name.
Result<std::unique_ptr<Kernel>> make_cuda_kernel(const CaseSpec& spec);

// Registers a CUDA case with Google Benchmark (register_case with make_cuda_kernel): what
// generated sources call.
benchmark::internal::Benchmark* register_cuda_case(const CaseSpec& spec, const Work& work);

// Ok when a GPU can run cases; otherwise "no usable GPU (cudaErrorInsufficientDriver: ...)".
Status cuda_available();

// The device and library facts of a system row (device 0). Fields a machine without a GPU cannot
// tell stay empty.
struct CudaDeviceInfo {
  std::string name, uuid, compute_capability, driver_version, runtime_version, cudnn_version, cublas_version;
  int64_t sm_count = 0, clock_mhz = 0, memory_bytes = 0, memory_clock_mhz = 0, memory_bus_bits = 0,
          l2_bytes = 0;
};
CudaDeviceInfo cuda_device_info();

// The device's sentinel (gen::Backend::sentinel): the lowest of three timings, by the context's
// events, of a write over the cold-cache buffer (twice the L2 cache, so from device memory), in
// seconds; NaN when the device cannot run it. It slows down with the GPU's clocks and with a
// neighbour on its memory, which the CPU's sentinel does not see.
double cuda_sentinel_seconds();

// Cold-cache mode: each timed call is preceded (outside its events) by a write over twice the L2
// cache, so that the call reads its operands from device memory.
void set_cuda_cold_cache(bool cold);
bool cuda_cold_cache();
// The bytes that write covers (the context's flush buffer: twice the L2, at least 2 MiB); 0 where
// the device cannot run.
int64_t cuda_cold_cache_bytes();

}  // namespace floorline::kernels
