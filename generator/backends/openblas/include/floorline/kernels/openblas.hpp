// floorline/kernels/openblas.hpp — the OpenBLAS (CPU) kernels: Debian 12's OpenBLAS 0.3.21
// (libopenblas-dev, the pthread build), through its CBLAS interface.
//
// OpenBLAS is a BLAS: it times the matrix products. Gemm and MatMul run as cblas_sgemm (a MatMul
// with 2-D weights as one GEMM over the flattened batch, and as a loop of GEMMs; batched operands
// as a loop of GEMMs with NumPy broadcasting of the batch dimensions); Conv runs as im2col +
// cblas_sgemm per group on NCHW (no layout change; the im2col copy is part of the timed call, and
// a 1×1 stride-1 unpadded convolution needs none). LSTM, GRU and RNN run as one input-projection
// cblas_sgemm over every time step, then per step the recurrent product (cblas_sgemm) and the
// gate math ("sgemm_standard"; shapes and gate order as ONNX stores them, [T, N, I] or
// layout 1's [N, T, I]; its [T·N, D·G·H] projection and the states are the case's
// workspace_bytes). f32 only. docs/BACKENDS.md has the mapping.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

// The OpenBLAS kind table (generator/backends/openblas/src/plan.cpp): for every kind, the calls it
// runs on ("im2col + cblas_sgemm"), or why it is not mapped. No device needed.
KindSupport openblas_support(LayerKind kind);

// One planned case of the OpenBLAS backend (kernels::LibraryCase, shared by the library backends).
// The base case's variant with its algorithm: "sgemm" (one GEMM; MatMul: the batch flattened
// into M), "sgemm_loop" (one GEMM per batch matrix), "im2col_sgemm", "sgemm_standard" (LSTM, GRU,
// RNN); math mode fp32, layout "".
using OpenblasCase = LibraryCase;

// Every case of `base`. A problem OpenBLAS cannot run yields one case "none" with status
// unsupported and the reason: other data types than f32, fused epilogues, 3-D convolutions,
// MatMul with a 1-D operand, a recurrent layer with sequence_lens.
std::vector<OpenblasCase> openblas_cases(const CaseSpec& base);

// Builds an OpenBLAS case (a KernelFactory): tensors allocated and filled with random values,
// the im2col buffer (its workspace_bytes) allocated. Applies the thread count set last.
Result<std::unique_ptr<Kernel>> make_openblas_kernel(const CaseSpec& spec);

// Registers an OpenBLAS case with Google Benchmark: what generated sources call.
benchmark::internal::Benchmark* register_openblas_case(const CaseSpec& spec, const Work& work);

std::string openblas_version();  // "0.3.21", from openblas_get_config()
std::string openblas_core();     // the kernel set OpenBLAS dispatched to ("Haswell", "SkylakeX")
// Threads OpenBLAS uses from now on (openblas_set_num_threads). Floorline's default is 1.
void set_openblas_threads(int threads);
int openblas_threads();

}  // namespace floorline::kernels
