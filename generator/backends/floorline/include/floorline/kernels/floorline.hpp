// floorline/kernels/floorline.hpp — Floorline's own CPU kernels: the `floorline` backend.
//
// Plain C++ (OpenMP over independent slices, GCC vector extensions where it pays) on the kernel
// API's placed host buffers, for the kinds no CPU vendor library in the tree runs (oneDNN 2.6,
// XNNPACK and OpenBLAS have no scan, arg-reduction, top-k, gather-ND, non-zero, suppression,
// roi-align, grid-sample or element scatter) and beside the vendor libraries where a plain
// formulation runs faster, as runtimes' own CPU kernels do (Concat, Softmax, LogSoftmax, the
// identity Resize, a 3x3 convolution by Winograd's algorithm on the AVX2 machines where oneDNN
// has none). Cases name the backend `floorline` and the kernel as their algorithm
// ("floorline/topk/f32/fp32/<key>"), so results credit our kernels, not a vendor library's
// (common/case_id.hpp, is_own_kernel). f32 data, int64 indices; verified against the reference;
// NonZero and NonMaxSuppression fed data that selects the count their output shape holds (the
// --max-detections assumption), a count that cannot be realised coded unsupported. No vendor
// library: always built.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "floorline/common/isa.hpp"
#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

// The floorline kind table (src/kinds.cpp): for every kind, the kernel that runs it ("topk"), or
// why there is none. No device needed.
KindSupport floorline_support(LayerKind kind);

// The name of the kernel that runs `p` ("concat"), "" where there is none (a kind not in the
// table, or a Resize that is not the identity). The case's algorithm is this name.
std::string floorline_kernel_name(const Problem& p);

// The runs of contiguous input elements the copy_runs kernel copies for a Transpose or a Slice
// (src/data.cpp): 0 where `p` is not runs of 16 floats or more (a transpose that moves the last
// axis; a slice with a step along it), so that the kernel does not run it.
int64_t copy_run_count(const Problem& p);

// Builds a floorline case (a KernelFactory): the kernel floorline_kernel_name() names, on buffers
// of spec.placement. Errors coded unsupported for another data type than f32, a fused epilogue,
// shapes or attributes the kernel does not run, or a --max-detections count it cannot realise.
Result<std::unique_ptr<Kernel>> make_floorline_kernel(const CaseSpec& spec);
// Whether make_floorline_kernel(spec) builds: its error where it does not. The planner's probe:
// sgemm_packed is checked without its buffers (a vocabulary projection's weights, unpacked and
// packed, are 300 MB); the other kernels are built.
Status check_floorline_case(const CaseSpec& spec);
// Replay's layout conversion between a plain port and one in oneDNN's blocked layout aBcd8b or
// aBcd16b ("f32 aBcd8b 1x58x28x28", its dims the tensor's), whichever kernels they belong to:
// 8 × 8 transposes of channels and pixels (blocked.cpp), the padding lanes written as zeros. Into
// to.data, or a buffer of its own (its port(true, 0)) where that is null. Unsupported for any
// other pair of layouts, or where the plain side's bytes are not the tensor's.
Result<std::unique_ptr<Kernel>> make_floorline_conversion(const PortRef& from, const PortRef& to);

// Registers a floorline case with Google Benchmark (register_case with make_floorline_kernel):
// what generated sources call.
benchmark::internal::Benchmark* register_floorline_case(const CaseSpec& spec, const Work& work);

// NCHW ↔ NHWC conversions (XNNPACK's conversion cases and its tensors' layouts): `batch` row-major
// rows × cols float matrices at x, each transposed into y, in 32 × 32 tiles (8 × 64 where a row of
// x or y is a multiple of 4 KiB: transpose.cpp). The tiles are independent: a caller runs
// tile(0 .. tiles()−1) on its own threads (XNNPACK's pool, as a runtime using XNNPACK would). x and y
// do not overlap.
struct TiledTranspose {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t batch = 1, rows = 0, cols = 0;
  int64_t tiles() const;
  void tile(int64_t index) const;
};

// The version of the kernel set, in the system row's libraries as every CPU library's is: "1",
// raised when a kernel changes what it computes or how (not with every Floorline release, so that
// results of one machine stay one system across releases).
std::string floorline_version();
// The build (AVX-512F, AVX2, baseline) the softmax loops run in this process: the highest the CPU
// supports and the ISA cap (FLOORLINE_MAX_CPU_ISA) allows, picked at their first use and then
// fixed (floorline/kernels/dispatch.hpp). For tests and reports.
KernelTarget floorline_softmax_target();
// Threads the kernels use from now on (OpenMP). Floorline's default is 1.
void set_floorline_threads(int threads);
int floorline_threads();
// The Winograd convolution (winograd_f4x4_3x3, winograd_f2x2_3x3) runs its tiles in chunks whose
// transformed input and output, α² × tiles × (C + K) floats, fit in this many bytes (at least 16
// tiles a chunk); its transformed weights are read once per chunk. Default 8 MiB (the L3 share of
// the machines measured); a kernel built afterwards uses the new value. Tests lower it to cover
// several chunks on small convolutions.
void set_winograd_chunk_bytes(int64_t bytes);
int64_t winograd_chunk_bytes();
// Denormals flushed to zero on the kernels' OpenMP threads (omp_flush_denormals), or restored.
void flush_floorline_denormals(bool flush, int threads);
// Runs work(i, n) on each of the library's `threads` OpenMP threads (omp_team).
void on_floorline_threads(int threads, const std::function<void(int, int)>& work);

}  // namespace floorline::kernels
