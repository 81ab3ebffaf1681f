// floorline/kernels/onednn.hpp — the oneDNN (CPU) kernels: Debian's oneDNN 2.6, 2.x API.
//
// Each ONNX layer kind maps onto oneDNN primitives (docs/BACKENDS.md has the table): Conv onto
// convolution (direct and winograd), ConvTranspose onto deconvolution, Gemm onto matmul and
// inner product, MatMul onto matmul, normalizations, eltwise (with chains for HardSigmoid and
// Selu), binary with broadcasting, pooling, softmax, LRN, reduction, concat, resampling; Transpose,
// Slice, Split and Pad onto reorders; data movement with no primitive (Gather, Expand, Tile...)
// onto a copy of the output's size, labelled a proxy. Post-ops fuse eltwise, sum and bias.
// Kinds no CPU vendor library in the tree has (CumSum, ArgMax/ArgMin, TopK, GatherND, NonZero,
// NonMaxSuppression, RoiAlign, GridSample, ScatterElements) are not mapped here: Floorline's own
// kernels run them, in the floorline backend (floorline/kernels/floorline.hpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

// The oneDNN kind table (generator/backends/onednn/src/onednn_kernel.cpp, kind_mapping()): for
// every kind, the primitive algorithms Floorline asks for ("convolution_direct, convolution_winograd"),
// or why it maps none. A kind with no mapping plans as "unsupported" with that reason. No device needed.
KindSupport onednn_support(LayerKind kind);

// Builds a oneDNN case (a KernelFactory). Tensors are allocated and filled here.
Result<std::unique_ptr<Kernel>> make_onednn_kernel(const CaseSpec& spec);

// Replay: a kernel that converts the tensor at from.data, in the layout of from's port, into the
// layout of to's port at to.data (both ports of oneDNN cases): one reorder, or two through a plain
// buffer when both are blocked with different dims. A null to.data is allocated by the kernel and
// is its port(true, 0). The buffers must outlive it. Error coded unsupported for a port missing,
// or element counts or data types that differ.
Result<std::unique_ptr<Kernel>> make_onednn_conversion(const PortRef& from, const PortRef& to);

// One implementation oneDNN offers for a case (next_impl() order).
struct Implementation {
  std::string algorithm;    // "convolution_direct:brg:avx512_core": "<variant>:<impl_name>"
  std::string variant;      // the primitive algorithm, Floorline's formulation: "convolution_direct"
  std::string impl_name;    // "brg:avx512_core"
  int impl_index = 0;       // position in next_impl() order for its primitive algorithm
  bool is_default = false;  // oneDNN's own first choice (convolution_auto's, for Conv)
  bool reference = false;   // a plain-loop implementation (is_reference_implementation)
  std::string layout;       // formats it chose, "src:aBcd16b wei:ABcd16b16a dst:aBcd16b"
  // Activation conversions it needs from and to the plain layout ({src, abcd, aBcd16b}); weights
  // are packed once by any framework and are not listed.
  std::vector<LayoutConversion> conversions;
};

// Whether oneDNN's implementation `impl_name` (impl_info_str()) is a plain-loop reference one:
// "ref:any", "bnorm_ref:any", "ref_gemm:any". Not the RNN primitive's "ref" (`rnn_primitive`):
// oneDNN's ref_rnn runs the cell loop around its jit GEMMs, the weights packed once, and is its
// RNN implementation wherever brgemm is not (every AVX2 host; every GRU). lstm_lm's LSTM at batch
// 8 on the 2-core AMD EPYC (AVX2), 1 thread: 4.36 ms, against 6.32 for OpenBLAS's sgemm_standard.
bool is_reference_implementation(const std::string& impl_name, bool rnn_primitive = false);

// Every implementation oneDNN offers for `spec` (its algorithm and impl fields are ignored), for
// each primitive algorithm Floorline asks for: Conv convolution_direct and convolution_winograd,
// Gemm matmul and inner_product, GlobalAveragePool pooling_v2 and reduction, and so on.
// Error coded unsupported when there is none.
Result<std::vector<Implementation>> onednn_implementations(const CaseSpec& spec);

// Registers a oneDNN case with Google Benchmark (register_case with make_onednn_kernel): what
// generated sources call.
benchmark::internal::Benchmark* register_onednn_case(const CaseSpec& spec, const Work& work);

std::string onednn_version();  // "2.6.3"
std::string onednn_isa();      // the ISA oneDNN dispatches to ("avx512_core_bf16")
// Threads oneDNN uses from now on (OpenMP). Floorline's default is 1.
void set_onednn_threads(int threads);
int onednn_threads();
// Denormals flushed to zero on oneDNN's OpenMP threads (omp_flush_denormals), or restored.
void flush_onednn_denormals(bool flush, int threads);
// Runs work(i, n) on each of the library's `threads` OpenMP threads (omp_team).
void on_onednn_threads(int threads, const std::function<void(int, int)>& work);

}  // namespace floorline::kernels
