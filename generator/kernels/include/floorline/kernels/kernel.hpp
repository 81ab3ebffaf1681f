// floorline/kernels/kernel.hpp — the interface every backend's kernels implement, and the one
// Google Benchmark body that times them.
//
// One implementation of each benchmark, two ways to run it: Floorline's runner (`floorline
// bench`) and the standalone folders of `floorline generate` both register cases through
// register_case() below, with the same backend kernel factory.
//
// Timing discipline (docs/MEASUREMENT.md): descriptor creation, implementation
// selection, memory allocation, random initialisation and layout conversion of the inputs all
// happen when the kernel is built, outside the timed region; each timed call is the library call
// plus a wait for completion, timed by the steady clock (CPU) or events (GPU); warm-up calls come
// first. Inputs are random (uniform in [-1, 1), positive where the op needs it), never zeros or
// ones: data-dependent power and clock behaviour would flatter the library.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "floorline/common/disposition.hpp"
#include "floorline/common/result.hpp"
#include "floorline/kernels/problem.hpp"

namespace floorline::kernels {

// Where a built case reads one input operand or writes one output (replay wires cases together).
struct Port {
  void* data = nullptr;
  int64_t bytes = 0;
  // "plain": row-major in the operand's shape; any reshape with the same element count reads the
  // same buffer. Otherwise the backend's name of a blocked layout, with its dims and data type
  // ("f32 aBcd16b 1x64x56x56"): two ports with equal strings hold their data the same way.
  std::string layout;
};

// Port::layout of an f32 operand in a named layout other than plain: "f32 <tag> <dims>", the tag
// oneDNN's format name and the dims in NCHW order ("f32 aBcd16b 1x64x56x56"); two ports with equal
// strings hold their data the same way.
inline std::string tagged_layout(const std::string& tag, const std::vector<int64_t>& dims) {
  std::string s = "f32 " + tag + " ";
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "x" : "") + std::to_string(dims[k]);
  return s;
}
// The dims of a tagged_layout(tag, dims) string; empty where `layout` is not one of `tag`.
inline std::vector<int64_t> tagged_layout_dims(const std::string& layout, const std::string& tag) {
  const std::string prefix = "f32 " + tag + " ";
  if (layout.rfind(prefix, 0) != 0) return {};
  std::vector<int64_t> dims;
  for (size_t at = prefix.size();;) {
    const size_t x = layout.find('x', at);
    const std::string d = layout.substr(at, x == std::string::npos ? std::string::npos : x - at);
    if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos) return {};
    dims.push_back(std::stoll(d));
    if (x == std::string::npos) return dims;
    at = x + 1;
  }
}

// Port::layout of an f32 4-D operand in oneDNN's channel-blocked layout aBcd<block>b (N, C/block,
// H, W, block), as oneDNN's ports name it ("f32 aBcd16b 1x64x56x56"): the one spelling that
// Floorline's blocked kernels write and oneDNN's conversions read.
inline std::string blocked_channels_layout(int block, const std::vector<int64_t>& dims) {
  return tagged_layout("aBcd" + std::to_string(block) + "b", dims);
}

// oneDNN's name of the channels-last format of a rank (3: NWC acb, 4: NHWC acdb, 5: NDHWC acdeb);
// nullptr for another rank.
inline const char* channels_last_tag(size_t rank) {
  return rank == 3 ? "acb" : rank == 4 ? "acdb" : rank == 5 ? "acdeb" : nullptr;
}
// Port::layout of an f32 operand of rank 3 to 5 in channels-last order, dims in NCHW order, as
// oneDNN's and XNNPACK's ports name it ("f32 acdb 1x64x56x56"): oneDNN's conversions read XNNPACK's
// NHWC ports by it. "" for another rank.
inline std::string channels_last_layout(const std::vector<int64_t>& dims) {
  const char* tag = channels_last_tag(dims.size());
  return tag ? tagged_layout(tag, dims) : "";
}

class Kernel;

// An exception a backend throws with a disposition (a device allocation failing: skipped; the
// library rejecting a configuration while the kernel is built: unsupported). Any other exception
// from a kernel is a failure.
struct KernelError : std::runtime_error {
  KernelError(Disposition c, const std::string& message) : std::runtime_error(message), code(c) {}
  Disposition code;
};
// The coded Error of an exception caught around a kernel (KernelError keeps its code).
Error error_of(const std::exception& e);
// What every CPU kernel library throws while building a case for a shape, attribute or data type
// it does not run: a KernelError coded unsupported (the factory's error, the case's disposition).
[[noreturn]] inline void unsupported(const std::string& why) {
  throw KernelError(Disposition::kUnsupported, why);
}

// A tensor laid out as one port of a built case describes (replay's conversions): that case, the
// port (an output with `output`, else an input, by operand index), and the buffer holding the
// tensor; a null `data` for a conversion's destination asks the conversion to allocate it.
struct PortRef {
  const Kernel* kernel = nullptr;
  bool output = true;
  size_t index = 0;
  void* data = nullptr;
};

// A built case, ready to time.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // One call of the case: every library call it consists of, then a wait for completion. A library
  // error is thrown (std::exception); register_case() and the runner turn it into a failed case
  // (a KernelError into a case with its code).
  virtual void run() = 0;
  // One timed call, in seconds: by default the steady clock around run(). GPU kernels override it
  // with CUDA events on their stream around the library calls only (a cold-cache flush outside).
  virtual double timed_run();
  // Whether timed_run reports the device's time rather than the host's wall time around the call
  // (CUDA events: the host's time in each library call is left out). The runner then sizes a
  // repetition by wall time (runner.hpp, repetition_call_seconds).
  virtual bool device_timed() const { return false; }
  // The implementation actually built (oneDNN's impl_info_str(), a cuDNN algorithm name).
  virtual std::string implementation() const = 0;
  // Scratchpad (workspace) the implementation needs, in bytes.
  virtual int64_t workspace_bytes() const = 0;
  // Runs the case once on fresh random inputs and compares every output with the plain reference
  // computation of the layer's ONNX semantics (reference.hpp) after conversion to f32 plain layout.
  // Error: an element differs beyond its tolerance (compare_output with verify_tolerance: per element,
  // from the kind, its accumulation length, the data type and math mode), or, with code
  // Disposition::kNotVerifiable, the case is a proxy whose result is not the layer's.
  virtual Status verify() = 0;

  // Device state around the timed calls of one repetition (GPU kernels: SM clock, temperature and
  // throttle reasons, sampled before and after); device_counters() go into the measurement row's
  // `extra`, and a counter "throttled" of 1 sets its throttled flag. Defaults: nothing sampled.
  virtual void sample_device(bool after) { (void)after; }
  virtual std::map<std::string, double> device_counters() const { return {}; }

  // Replay (generator/replay.hpp): the buffer run() reads input operand k (output k with
  // `output`) from, in the operand order of the case's Problem. nullopt where the case cannot be
  // wired there (the default: the case keeps its own buffers).
  virtual std::optional<Port> port(bool output, size_t k) const {
    (void)output;
    (void)k;
    return std::nullopt;
  }
  // From now on run() reads input operand k (writes output k, with `output`) at `data`: a buffer in
  // the layout and of the size of port(output, k) that outlives this kernel's use (a producer's
  // output, a buffer from replay's pool). Error where port(output, k) is nullopt.
  virtual Status bind(bool output, size_t k, void* data) {
    (void)data;
    return make_error("{} {} of this case cannot be wired to another case", output ? "output" : "input", k);
  }
  // Replay, once the case is wired (bind, share_workspace): gives back to the system the pages of
  // the case's own buffers that run() no longer reads or writes (kernels::release_pages), and
  // returns their bytes. `former`: the case's ports as port() gave them before any bind; `now`: as
  // it gives them now. The default gives back each former port's buffer that no port now overlaps;
  // a backend that keeps other copies gives back those too (oneDNN: the plain copies beside a
  // blocked port, a scratchpad share_workspace replaced), and counts each buffer once however often
  // it is called (the replay calls again, with no ports, once the workspace is shared). Afterwards
  // verify() no longer holds.
  virtual int64_t release_unused_buffers(const std::vector<Port>& former, const std::vector<Port>& now);
  // From now on run() uses `data` (host memory, 64-byte aligned, at least workspace_bytes() bytes,
  // outliving this kernel's use) as its scratchpad instead of its own: replay gives every case of
  // a model one shared scratchpad, as oneDNN's library scratchpad mode and a framework's workspace
  // arena do, so that a case's scratchpad is as warm in the graph as it is alone. False where the
  // case keeps its own (the default, and where workspace_bytes() is 0).
  virtual bool share_workspace(void* data) {
    (void)data;
    return false;
  }
};

// Builds a case. Error codes: Disposition::kUnsupported when the library (or Floorline's mapping)
// has no implementation for the problem and data type, kSkipped when the planned implementation is
// no longer offered where it was (or the policy declines it); kFailed for anything else.
using KernelFactory = std::function<Result<std::unique_ptr<Kernel>>(const CaseSpec&)>;

// Warm-up before timing: at least one call and at least `seconds`. Returns the lowest call's time in
// seconds: the runner's estimate for choosing an iteration count, and its warm-up reading for racing
// (runner.hpp; the lowest, so that one interrupted call of a short case is no reading).
double warm_up(Kernel& kernel, double seconds);

// The same warm-up, with what a call costs the host as well: `lowest` as warm_up returns it (the
// time timed_run reports), and `wall_per_call`, the wall-clock time per call after the first (the
// first's, where there was one call only), in seconds. They differ where the kernel is
// device_timed (CUDA events exclude the host's enqueue: on an H200, calls of 8 µs on the GPU took
// 86 µs of wall each).
struct WarmUp {
  double lowest = 0;
  double wall_per_call = 0;
  int64_t calls = 0;
};
WarmUp warm_up_calls(Kernel& kernel, double seconds);

// The work of one call, for the throughput counters.
struct Work {
  int64_t flops = 0;        // FLOPs per call (model_processor's formula); <= 0 if unknown
  int64_t bytes = 0;        // compulsory bytes per call
  bool is_default = false;  // the case is the library's own first choice
};

// One candidate case a backend offers for a base case (Backend::candidates, cuda_cases(),
// xnnpack_cases(), openblas_cases()), in the backend's order of preference: the base's variant with
// what the library chose, and the typed facts the planner's policy reads (gen::plan_cases: the
// --max-impls cap, the reference policy, first-of-variant). A backend offers; it never decides
// what is timed, except a candidate it already knows it cannot run (status set).
struct LibraryCase {
  // The base case's variant with the library's algorithm, math mode and layout ("" for the plain
  // layout, "nhwc", or for a conversion conversion_layout(*conversion)); each backend's header
  // says what its algorithms are called.
  CaseVariant variant;
  // The variant group: the formulation or algorithm family ("convolution_direct", "cudnn_conv",
  // "cublaslt_matmul"). The first candidate of each group (in each layout) is timed whatever the
  // --max-impls cap: a formulation left untimed can leave S above what a runtime achieves.
  std::string group;
  bool reference = false;   // a plain-loop implementation (oneDNN's "ref:"), timed only where asked or alone
  std::string library;      // whose code runs: "onednn", "cudnn", "xnnpack", "floorline" (ours), ...
  bool is_default = false;  // what a framework gets by default from this library
  // A form that runs at more than one thread only (a _split variant: the work cut into one-thread
  // calls side by side; at one thread it is unsupported, being the plain case). The plan serves
  // every thread count, so it is planned, but not counted against --max-impls.
  bool multi_thread_only = false;
  // For backends that enumerate implementations (CaseSpec::impl_index, impl_name).
  int impl_index = 0;
  std::string impl_name;
  std::string formats;  // the memory formats the implementation chose (oneDNN), for the case's params
  // A layout conversion: the tensor and layouts converted, and the cases it feeds. The planner
  // plans it only next to a timed case it feeds, and not at all without --conversions.
  std::optional<LayoutConversion> conversion;
  CaseFeeds feeds;
  std::optional<Disposition> status;  // nullopt: a candidate; unsupported or skipped when the backend knows
  std::string reason;                 // why, when status is set
};

// A conversion candidate of `base`: `algorithm` converting `conversion`, feeding `feeds`, in the
// base's data type and `math_mode`.
LibraryCase conversion_case(const CaseSpec& base, std::string algorithm, MathMode math_mode,
                            LayoutConversion conversion, CaseFeeds feeds, std::string library);

// The one case of `base` that a library's plan cannot run: algorithm "none" in `math_mode`, status
// unsupported, and why.
LibraryCase unsupported_case(const CaseSpec& base, MathMode math_mode, std::string reason);

// The counters of `calls` calls of `kernel` that took `seconds` in all, as register_case's body sets
// them: flops, gflops, bytes, gbytes_per_s (where the work is known), workspace_bytes, is_default,
// and the kernel's device_counters().
std::map<std::string, double> case_counters(const Work& work, const Kernel& kernel, double calls,
                                            double seconds);

// Registers the case with Google Benchmark under spec.name, with manual timing. The body: builds
// the kernel with `factory` on first use unless `prebuilt` is given (a build error, or an exception
// while timing, becomes SkipWithError(benchmark_error_text(error)), so reporters see its code), warms
// it up once (0.002 s; a prebuilt kernel is taken as warm), then times each call with
// Kernel::timed_run(), sampling the device before and after. Counters: flops, bytes, gflops,
// gbytes_per_s, workspace_bytes, is_default, and the kernel's device_counters(). The caller sets
// iterations, repetitions or minimum time on the returned benchmark.
benchmark::internal::Benchmark* register_case(const CaseSpec& spec, const Work& work, KernelFactory factory,
                                              std::shared_ptr<Kernel> prebuilt = nullptr);

}  // namespace floorline::kernels
