// floorline/generator/cache_state.hpp — a case timed in a colder cache state than the bench's.
//
// The bench times each case warm: called again and again, it finds its weights and outputs in the
// caches its last call left them in. That is what the bound S needs (nothing runs faster), and what
// a model never gets: in a pass over the graph a layer's weights were last read one whole pass ago,
// after every other layer's, and its output buffer was last touched several layers back. The
// replay's breakdown (bench/replay_breakdown.py) puts about half of replay − S in such cold
// operands. This stage times the best cases a second way (docs/MEASUREMENT.md, "Cache states"),
// for the composed estimate E (analyzer, docs/ANALYZER.md):
//
//   before each timed call, the caches of the threads the case runs on are flushed past a level
//   by reading a buffer (each thread its share, one load per 64-byte line), then the case's
//   activation inputs (every input but its weights: kernels::weight_operand) are read back, as the
//   step before would have left them; the call is timed alone (Kernel::timed_run).
//
// Two levels (benchdnn's --cold-cache=wei, at two depths):
//   memory  the buffer is 2 × the last-level cache: weights and outputs come from DRAM, as in a
//           model whose pass touches more bytes than the last-level cache holds;
//   llc     2 × L2 per thread: from the last-level cache, as in a model whose pass fits in it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/kernel.hpp"

namespace floorline::gen {

enum class CacheState { kMemory, kLlc };
// "memory", "llc": the cache_times.state values.
std::string_view cache_state_name(CacheState s);

// A core's L2 and the last-level cache (bytes): cpu0's caches in sysfs, else sysconf, else 1 MiB
// and 32 MiB (some VMs report 0).
struct CacheSizes {
  int64_t l2 = 0;
  int64_t llc = 0;
};
CacheSizes cache_sizes();

// The bytes one flush writes for `state` at `threads` threads: 2 × llc (memory), 2 × l2 × threads
// (llc).
int64_t flush_bytes(CacheState state, int threads, const CacheSizes& sizes);

// Flushes the caches of `threads` threads (the calling thread and threads - 1 of its own, started
// per flush, each reading its share of the buffer, one load per 64-byte line): every line the case
// touched beyond the flushed level is evicted from the cores the case runs on. Reads, not writes:
// a written buffer leaves the caches full of dirty lines, and the timed call would pay for writing
// them back (CacheState.WeightsBeyondL2..., three runs each on the AVX2 EPYC: from memory 769-952 µs
// after a written flush, 720-878 after a read one). Threads of our own, because a case's library pool is not
// ours to borrow; the OS spreads them over the idle cores the case runs on.
class CacheFlusher {
 public:
  CacheFlusher(CacheState state, int threads, const CacheSizes& sizes = cache_sizes());
  void flush();
  int64_t bytes() const { return static_cast<int64_t>(lines_) * kLine; }
  CacheState state() const { return state_; }

 private:
  static constexpr int64_t kLine = 64;
  CacheState state_;
  int threads_;
  size_t lines_;
  std::unique_ptr<unsigned char[]> buffer_;
  unsigned sink_ = 0;  // the sum of what the reads saw, so that they stay
};

// Reads one byte per 64-byte line of [data, data + bytes): brings the range into this core's
// caches (the activation inputs, after a flush). Returns their sum, so that the reads stay.
unsigned touch(const void* data, int64_t bytes);

// Evicts [data, data + bytes) from every cache level of every core (x86 CLFLUSH, one per 64-byte
// line, then a fence). False, doing nothing, where the ISA has no such instruction.
bool evict(const void* data, int64_t bytes);

struct CacheTiming {
  double median_us = 0, min_us = 0;
  int samples = 0;
  int64_t flush_bytes = 0;
  bool targeted = false;  // the weights' lines evicted alone (evict), not a flush
};

// Times `kernel`, built for `problem`, `samples` calls in `flusher`'s state, after a warm-up
// (kernels::warm_up, 10 ms). Before each call:
//  - memory, where the kernel has a port for every weight operand (kernels::weight_operand; the
//    buffer run() reads, e.g. oneDNN's reordered weights): those lines are evicted from every cache
//    (evict), nothing else: the call finds its weights in DRAM and everything else (activations,
//    its output buffer, its code, the page tables, the library's state) as the call before left it;
//  - otherwise (llc; or memory for a kernel that packs its weights where no port shows them, as
//    XNNPACK and sgemm_packed do): flusher.flush(), then the activation inputs' ports read back, so
//    that the weights and the output buffer come from beyond the flushed level (a pass's pooled
//    output buffers were last touched layers before) and the inputs from where the step before
//    left them.
// Then one timed call (Kernel::timed_run). Exceptions from the kernel propagate.
CacheTiming time_in_cache_state(kernels::Kernel& kernel, const kernels::Problem& problem,
                                CacheFlusher& flusher, int samples);

struct CacheStageOptions {
  int samples = 5;
  std::vector<CacheState> states = {CacheState::kMemory, CacheState::kLlc};
  bool force = false;  // time again the cases that already have a row
  // The cases of the thread budget (each config's fastest over the host's systems of at most the
  // system's threads, as S takes them), or, without, the system's own (--threads-exact).
  bool thread_budget = true;
  // Called before each case and at the end (done, total), for a progress line; may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct CacheStageSummary {
  int64_t cases = 0;    // best cases of the models' configurations (and fused variants)
  int64_t timed = 0;    // timed now, in every state
  int64_t present = 0;  // already had a row for every state
  int64_t failed = 0;   // could not be built or run (their reasons in `errors`, the first few)
  std::vector<std::string> errors;
  double seconds = 0;
};

// The cache stage of `floorline run`: for every configuration of `plan` (and every fused variant
// with a passed case), the best case S takes within the thread budget of `system_id` (as
// best_cases and best_fused_cases choose it, at its own thread count), timed in each of
// `options.states` on its backend (of `backends`) and stored in cache_times against the system it
// was measured on. A case whose backend is not in `backends`, or is a device's (the flush is the
// CPU's), is left out; a case that fails is counted and the stage goes on. Error only when the database
// cannot be read or written.
Result<CacheStageSummary> time_cache_states(benchdb::Database& db, const Plan& plan,
                                            const std::vector<const Backend*>& backends, int64_t system_id,
                                            DType dtype, const CacheStageOptions& options);

}  // namespace floorline::gen
