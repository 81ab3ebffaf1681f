// floorline/generator/backend.hpp — the one interface every backend implements, and the registry.
//
// A backend turns a Problem into benchmark cases (every algorithm/implementation its library
// offers, enumerated without timing) and builds kernels for them. `supports`-style questions are
// answered without the device: planning works on any machine; only timing needs the hardware.
// Backends are listed in one place, generator/src/registry.cpp; each is a plugin (a shared library,
// floorline/generator/plugin.hpp) loaded at the first use of that backend, so that a command which
// needs no backend loads no vendor library.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "floorline/benchdb/schema.hpp"
#include "floorline/common/result.hpp"
#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::gen {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "onednn"
  virtual std::string device_kind() const = 0;  // "cpu" or "gpu"
  // Ok when the backend can time cases on this machine; otherwise why not ("no GPU: ...").
  virtual Status available() const = 0;
  // Fills the backend's part of the system row: library versions, ISA, device facts, threads.
  virtual void describe(benchdb::SystemRow& row) const = 0;
  // What the backend does with a layer kind, from its one kind table (kernels::onednn_support,
  // kernels::cuda_support): a mapping, or why there is none. No device needed. The planner gives a
  // kind with no mapping one "unsupported" case with that reason and does not call cases_for().
  virtual kernels::KindSupport support(LayerKind kind) const = 0;
  // Every candidate case of one problem in one data type (spec.variant.dtype set by the caller), in
  // the backend's order of preference, with its layout conversions: what the library offers. What
  // is timed is the planner's policy (gen::plan_cases), the same for every backend. A problem the
  // backend cannot run yields one candidate with status "unsupported".
  virtual std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const = 0;
  // Builds kernels for cases of this backend.
  virtual kernels::KernelFactory factory() const = 0;
  // Replay: a kernel converting the tensor at from.data, laid out as from's port, into the layout of
  // to's port, at to.data (allocated by the kernel, and its port(true, 0), when null). Both ports
  // belong to kernels built by this backend's factory. Default: an unsupported error.
  virtual Result<std::unique_ptr<kernels::Kernel>> conversion(const kernels::PortRef& from,
                                                              const kernels::PortRef& to) const {
    (void)from, (void)to;
    return make_error(Disposition::kUnsupported, "the {} backend has no layout conversions for replay",
                      name());
  }
  // Threads the backend's kernels use from now on (CPU backends); ignored by GPU backends.
  virtual void set_threads(int threads) const = 0;
  // Hands the cores over: the backend's idle worker threads, which spin between its own calls (so
  // that a case timed at several threads pays no wake-up per call, as in a runtime's one pool), go
  // to sleep now, before another backend's kernels (or another thread count) run. The bench calls
  // it when it is done with a backend, the replay where the next step is another backend's or at
  // another count (docs/MEASUREMENT.md, "Threads of several libraries"). Default: nothing to do (a
  // library whose workers stop spinning on their own within a bounded time: OpenMP with
  // GOMP_SPINCOUNT, OpenBLAS with OPENBLAS_THREAD_TIMEOUT, both set by the registry).
  virtual void park_threads() const {}
  // Runs work(i, n) on each of the n = `threads` threads of the backend's pool (i = 0 the calling
  // thread; work must not start parallel regions or call kernels) and returns when all have; the
  // workers then spin for the next call, as between the steps of a pass. The cache stage prepares a
  // case's calls so (time_in_cache_states): each core's part of the activations in its own caches,
  // and the workers busy rather than asleep after a preparation longer than their spin (OpenMP's
  // sleep after GOMP_SPINCOUNT, about 0.1 ms). Default: work(0, 1) on the calling thread (one
  // thread, a GPU, or a library whose threads cannot be borrowed: OpenBLAS's own).
  virtual void on_threads(int threads, const std::function<void(int, int)>& work) const {
    (void)threads;
    work(0, 1);
  }
  // With `flush`, denormal results are flushed to zero and denormal operands read as zero (x86 FTZ
  // and DAZ) on the threads the backend's library computes on, `threads` of them, the calling thread
  // included; without, each thread's mode is restored. Replay sets it around its passes (calls in
  // pairs, restored in reverse order). Default: nothing (a library without such threads, a GPU).
  virtual void flush_denormals(bool flush, int threads) const {
    (void)flush;
    (void)threads;
  }
  // Cold-cache timing from now on (`--cold`: the device's last-level cache is flushed before each
  // timed call). Default: error, the backend has no such mode.
  virtual Status set_cold_cache(bool cold) const {
    if (!cold) return {};
    return make_error("the {} backend has no cold-cache mode (--cold)", name());
  }
  // The bytes the cold-cache mode writes before each call (twice the device's last-level cache); 0
  // for a backend without the mode.
  virtual int64_t cold_cache_bytes() const { return 0; }
  // The sentinel of a backend that times its cases on a device of its own (docs/MEASUREMENT.md,
  // "The sentinel"): a clock that runs fixed work on that device and returns its time (s), read
  // between visits as the CPU sentinel is, so that a period in which the device slowed down (clocks,
  // a neighbour on it) is timed again. Empty (the default): the cases are the CPU's, and the bench
  // reads the CPU sentinel (measurement.hpp) at the run's thread count. A GPU backend must not leave
  // it empty: its cases' times are the device's, which a CPU sentinel neither sees nor explains.
  virtual std::function<double()> sentinel() const { return {}; }
  // The identity of the device measured (runs.device_uuid): the GPU's UUID; "" for CPUs.
  virtual std::string device_uuid() const { return ""; }
  // For generated sources: the header that declares the registration function, that function's
  // name (signature of register_onednn_case), and the CMake target to link.
  virtual std::string generated_header() const = 0;
  virtual std::string generated_register_function() const = 0;
  virtual std::string generated_cmake_target() const = 0;
};

// Every backend the registry knows, in its order, each loaded (this loads every plugin). A backend
// whose plugin could not be loaded is still listed: a stand-in with the registry's name and device
// kind whose available() says why ("not installed: ...", "cannot load ...") and plans nothing.
std::vector<const Backend*> backends();
// The backend named `name`, loading only its plugin (a stand-in as above when that fails), or
// nullptr for a name the registry does not know.
const Backend* find_backend(const std::string& name);
// Resolves a --backend value: "auto" is every available backend; otherwise a comma-separated list
// of names. Error for an unknown name (listing the known ones) or a backend whose plugin cannot be
// loaded (saying why); a loaded backend that cannot run here is returned (planning needs no device).
Result<std::vector<const Backend*>> select_backends(const std::string& spec);

// Fills the system row of a run timed with `backend`: its describe() and that of every other
// backend of its device kind whose plugin loads and that can run here (threads set to row.threads
// first). A system is the machine with the libraries installed on it, whichever of them one run
// times: runs of oneDNN, XNNPACK and OpenBLAS on one machine share a system, and the analyzer's S
// (the minimum over every case of a system) is the minimum over the libraries.
void describe_system(const Backend& backend, benchdb::SystemRow& row);

// Where the backend's plugin was loaded from (an absolute path), or why it could not be: "not
// installed: libfloorline-backend-cuda.so is in none of ...", "cannot load ...: libcudnn.so.9: ...".
// Searched, in order: the directories of FLOORLINE_PLUGIN_DIR (':'-separated), the directory of the
// running executable, and <that directory>/../lib/floorline.
Result<std::string> plugin_path(const Backend& backend);

// The backends of a whole run (`floorline run --backend auto`): the first GPU backend that can run
// here, else every CPU backend that can (oneDNN, XNNPACK, OpenBLAS: S is the minimum over them).
// `backend` is the first of them (the registry's order), `all` every one. `why` says which and
// why, e.g. "onednn, xnnpack, openblas: cuda: no usable GPU (cudaErrorNoDevice: ...)". Error when
// none can run (each backend's reason).
struct BackendChoice {
  const Backend* backend = nullptr;
  std::string why;
  std::vector<const Backend*> all;
};
Result<BackendChoice> choose_backend();

}  // namespace floorline::gen
