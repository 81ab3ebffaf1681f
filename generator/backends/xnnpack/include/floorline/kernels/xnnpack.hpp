// floorline/kernels/xnnpack.hpp — the XNNPACK (CPU) kernels: Debian 12's XNNPACK snapshot
// (libxnnpack-dev 0.0~git20220216), its operator API (xnn_create_*/xnn_setup_*/xnn_run_operator).
//
// XNNPACK is the kernel library of TensorFlow Lite, PyTorch Mobile and ONNX Runtime Web. Its
// convolutions and pooling read and write NHWC: those cases have the layout "nhwc", and two
// conversion cases (src:nchw>nhwc, dst:nhwc>nchw, Floorline's own tiled transpose, feeding
// "layout:nhwc") time what moving a tensor between Floorline's NCHW layers and XNNPACK costs; the
// analyzer charges them as it charges oneDNN's reorders. Fully connected, element-wise and softmax
// work on the plain (row-major) layout. f32 only. docs/BACKENDS.md has the mapping.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

// The XNNPACK kind table (generator/backends/xnnpack/src/plan.cpp): for every kind, the XNNPACK
// operator it runs on ("xnn_create_convolution2d_nhwc_f32"), or why it is not mapped. No device.
KindSupport xnnpack_support(LayerKind kind);

// One planned case of the XNNPACK backend (kernels::LibraryCase, shared by the library backends).
// The base case's variant with its algorithm (the operator, "convolution2d_nhwc_f32"; a
// conversion "floorline-kernel:transpose"), math mode fp32 and layout ("nhwc", "" for the plain
// layout, or a conversion "src:nchw>nhwc").
using XnnpackCase = LibraryCase;

// Every case of `base` (its problem, dtype and post-ops). XNNPACK offers one implementation per
// configuration (it picks its micro-kernels for the CPU itself); NHWC cases come with their two
// conversions, less those that are no-ops (a tensor with one channel or one pixel). A problem it
// cannot run yields one case "none" with status unsupported and the reason: other data types than
// f32, 1-D/3-D convolutions and pooling, a MatMul whose right operand has batch dimensions, fused
// epilogues other than a clamp (Relu, Clip) and MatMul's bias.
std::vector<XnnpackCase> xnnpack_cases(const CaseSpec& base);

// Builds an XNNPACK case (a KernelFactory): tensors allocated and filled with random values,
// weights packed (xnn_create_*), pointers set (xnn_setup_*). Error coded unsupported where XNNPACK
// rejects the configuration (its status name in the message).
Result<std::unique_ptr<Kernel>> make_xnnpack_kernel(const CaseSpec& spec);

// Replay: converts the tensor at from.data into the layout of to's port (plain NCHW ↔ NHWC), where
// one of the two ports is an XNNPACK case's NHWC port and the other a plain port of any backend
// with the same number of bytes. A null to.data is allocated by the kernel (its port(true, 0)).
// Error coded unsupported otherwise.
Result<std::unique_ptr<Kernel>> make_xnnpack_conversion(const PortRef& from, const PortRef& to);

// Registers an XNNPACK case with Google Benchmark (register_case with make_xnnpack_kernel): what
// generated sources call.
benchmark::internal::Benchmark* register_xnnpack_case(const CaseSpec& spec, const Work& work);

// XNNPACK has no version call: the Debian package version the library was built against, recorded
// by CMake (or "unknown"), and its thread pool: "0.0~git20220216.ae108ef-2 (openmp pool)".
std::string xnnpack_version();
// Ok when xnn_initialize() succeeded (the CPU has what XNNPACK needs), else its status.
Status xnnpack_initialize();
// Threads XNNPACK cases use from now on: a pool of `threads` workers, none for 1 (the default):
// cases built afterwards run on it.
void set_xnnpack_threads(int threads);
int xnnpack_threads();
// The threads XNNPACK's parallel loops run on: "openmp" where this library implements
// pthreadpool's interface on libgomp, the one pool oneDNN and Floorline's kernels use
// (src/openmp_pool.cpp, chosen at configure time), "pthreadpool" where XNNPACK keeps a pool of
// its own. Part of the recorded library version: the two are different systems.
const char* xnnpack_thread_pool();
// Parallel calls (more than one thread and one tile) XNNPACK has made into the OpenMP pool since the
// process began; -1 with pthreadpool's own threads. What shows that XNNPACK's calls bind here.
int64_t xnnpack_openmp_pool_calls();
// Puts the idle workers of every pool made so far to sleep at once, instead of letting them spin for
// the next call: what the bench and the replay do before another library's threads need the cores
// (gen::Backend::park_threads). With pthreadpool's own threads, a call over each pool with
// PTHREADPOOL_FLAG_YIELD_WORKERS; nothing on the OpenMP pool, whose workers sleep after
// GOMP_SPINCOUNT spins as oneDNN's do.
void park_xnnpack_threads();
// Denormals flushed to zero on the threads XNNPACK's loops run on (omp_flush_denormals) where that is
// the OpenMP pool, or restored; nothing with pthreadpool's own threads.
void flush_xnnpack_denormals(bool flush, int threads);
// Runs work(i, n) on each of the library's `threads` OpenMP threads (omp_team); work(0, 1) with
// pthreadpool's own threads.
void on_xnnpack_threads(int threads, const std::function<void(int, int)>& work);

}  // namespace floorline::kernels
