// floorline/generator/cache_state.hpp — a case timed in a colder cache state than the bench's.
//
// The bench times each case warm: called again and again, it finds its weights and outputs in the
// caches its last call left them in. That is what the bound S needs (nothing runs faster), and what
// a model never gets: in a pass over the graph a layer's weights were last read one whole pass ago,
// after every other layer's, and its output buffer was last touched several layers back. The
// replay's breakdown (bench/replay_breakdown.py) puts about half of replay − S in such cold
// operands. This stage times the best cases a second way (docs/MEASUREMENT.md, "Cache states"),
// for the composed estimate E (analyzer, docs/ANALYZER.md): single calls with the case's weights
// evicted to memory, with the caches flushed past L2 (the weights from the last-level cache), and
// with nothing evicted (what a single call costs warm; E reads the cold two), as benchdnn's
// --cold-cache=wei does (time_in_cache_states says how).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/kernel.hpp"

namespace floorline::gen {

// kWarm: single calls back to back, nothing evicted (a diagnostic: what single calls cost warm).
enum class CacheState { kWarm, kMemory, kLlc };
// "warm", "memory", "llc": the cache_times.state values.
std::string_view cache_state_name(CacheState s);

// A core's L2 and the last-level cache (bytes): cpu0's caches in sysfs, else sysconf, else 1 MiB
// and 32 MiB (some VMs report 0).
struct CacheSizes {
  int64_t l2 = 0;
  int64_t llc = 0;
};
CacheSizes cache_sizes();

// The bytes one flush reads for `state` at `threads` threads: 2 × llc (memory), 2 × l2 × threads
// (llc), 0 (warm).
int64_t flush_bytes(CacheState state, int threads, const CacheSizes& sizes);

// Flushes the caches of `threads` threads (the calling thread and threads - 1 of its own, started
// per flush, each reading its share of the buffer, one load per 64-byte line): every line the case
// touched beyond the flushed level is evicted from the cores the case runs on. Reads, not writes:
// a written buffer leaves the caches full of dirty lines, and the timed call would pay for writing
// them back (CacheState.WeightsBeyondL2..., three runs each on the AVX2 EPYC: from memory 769-952 µs
// after a written flush, 720-878 after a read one). flush() uses threads of its own, which the OS
// spreads over the idle cores the case runs on; the cache stage flushes by parts on the case's own
// pool instead (flush_part, time_in_cache_states' `team`).
class CacheFlusher {
 public:
  CacheFlusher(CacheState state, int threads, const CacheSizes& sizes = cache_sizes());
  ~CacheFlusher();
  CacheFlusher(const CacheFlusher&) = delete;
  CacheFlusher& operator=(const CacheFlusher&) = delete;
  void flush();
  // Writes one byte per 64-byte line of a buffer of dirty_fill_bytes (from this thread, on
  // transparent huge pages where the system allows them, so that the write leaves the TLB as the
  // case's own pages left it): the caches are left full of dirty lines, and every line the next
  // call brings in evicts one that must be written back to memory first, as in a pass whose layers
  // write their activations (the memory state's dirty reading, CacheTiming::dirty_min_us).
  void dirty();
  // The same by parts, for the case's own threads (time_in_cache_states' `team`): the value to
  // write (a new one per fill; made by the caller, before the parts: it allocates the buffer at its
  // first call, so that the parts only write), then thread i of n's share of
  // the fill, and of the flush's reads (returned: their sum). A pass's threads each write their part
  // of every activation into their own core's caches.
  unsigned char next_generation();
  void dirty_part(int i, int n, unsigned char value);
  unsigned flush_part(int i, int n) const;
  int64_t bytes() const { return static_cast<int64_t>(lines_) * kLine; }
  CacheState state() const { return state_; }
  int threads() const { return threads_; }  // the case's thread count

 private:
  void allocate_dirty();
  static constexpr int64_t kLine = 64;
  CacheState state_;
  int threads_;
  size_t lines_;
  std::unique_ptr<unsigned char[]> buffer_;
  unsigned char* dirty_ = nullptr;  // dirty(): allocated at its first call
  size_t dirty_lines_ = 0;
  unsigned char generation_ = 0;  // what dirty() writes: a new value each time
  unsigned sink_ = 0;             // the sum of what the reads saw, so that they stay
};

// The bytes CacheFlusher::dirty() writes: 2 × the last-level cache, at most 64 MiB (a core's share
// of a server's L3 is its chiplet's, 32 MiB on the EPYCs measured, while a VM may report the
// host's whole L3: 508 MiB on one of them).
int64_t dirty_fill_bytes(const CacheSizes& sizes = cache_sizes());

// Thread i of n's share of `lines` lines, [first, end): contiguous, disjoint, together all of them,
// the first lines % n shares one line longer than the rest.
std::pair<size_t, size_t> thread_share(size_t lines, int i, int n);

// Reads one byte per 64-byte line of [data, data + bytes): brings the range into this core's
// caches (the activation inputs, after a flush). Returns their sum, so that the reads stay.
unsigned touch(const void* data, int64_t bytes);

// Evicts [data, data + bytes) from every cache level of every core (x86 CLFLUSH, one per 64-byte
// line, then a fence). False, doing nothing, where the ISA has no such instruction.
bool evict(const void* data, int64_t bytes);

struct CacheTiming {
  CacheState state = CacheState::kWarm;
  double median_us = 0, min_us = 0;
  int samples = 0;
  int64_t flush_bytes = 0;
  bool targeted = false;  // memory: the weights' lines evicted alone (evict), not a flush
  int retaken = 0;        // calls taken again: switched out during them (time_in_cache_states)
  // memory only: the lowest of as many calls again with the output buffers (dst) evicted as well
  // (µs); where the weights were not evicted alone, or the kernel shows no output port, min_us.
  std::optional<double> dst_min_us;
  // memory only: the lowest of kDirtySamples more calls, each made with the caches full of dirty
  // lines (CacheFlusher::dirty) before the weights are evicted (µs); none on a device.
  std::optional<double> dirty_min_us;
};

// The process's involuntary context switches so far (getrusage RUSAGE_SELF, ru_nivcsw: every thread
// of it, whatever took the CPU: another process, a kernel thread, a thread of its own).
long involuntary_switches();

// The calling thread's time spent runnable but waiting for a CPU so far (µs; /proc/thread-self/
// schedstat, its second field); -1 where the kernel does not report it.
double run_delay_us();

// Calls taken again per sample at most (time_in_cache_states).
inline constexpr int kMaxRetakes = 3;
// The memory state's calls among dirty lines (time_in_cache_states): at most this many of its
// samples, as the 64 MiB written before each is most of what they cost (on the zoo at batch 1 on
// the Zen 4 VM, five of them added 72 s to a 135 s stage).
inline constexpr int kDirtySamples = 3;

// Runs work(i, n) on each of the n threads a case runs on, i = 0 the calling thread, and returns
// when all have (time_in_cache_states' `team`; Backend::on_threads).
using Team = std::function<void(const std::function<void(int, int)>& work)>;

// Times `kernel`, built for `problem`, in each of `flushers`' states in turn, `samples` calls each
// (`long_samples` where the warm-up's lowest call took long_call seconds or more: a long call's
// calls agree, and a cache state changes it by a small share), after a warm-up (kernels::warm_up, 10 ms): all
// within a few milliseconds, so that the state of the machine is the same for all (not interleaved call by
// call: a call from memory leaves the weights where a following call from the last-level cache does not find
// them; the linear layer of CacheState.WeightsBeyondL2... took 319-337 µs from the LLC so, 150-172 in turn).
// Before each call:
//  - warm: nothing;
//  - memory, where the kernel has a port for every weight operand (kernels::weight_operand; the
//    buffer run() reads, e.g. oneDNN's reordered weights): those lines are evicted from every cache
//    (evict), nothing else: the call finds its weights in DRAM and everything else (activations,
//    its output buffer, its code, the page tables, the library's state) as the call before left it;
//  - otherwise (llc; or memory for a kernel that packs its weights where no port shows them, as
//    XNNPACK and sgemm_packed do): the flush, then the activation inputs' ports read back, so
//    that the weights and the output buffer come from beyond the flushed level (a pass's pooled
//    output buffers were last touched layers before) and the inputs from where the step before
//    left them.
// Then one timed call (Kernel::timed_run). In the memory state the first kDirtySamples calls are each
// preceded by one with the caches made full of dirty lines first (CacheFlusher::dirty; then the
// activation inputs and the output buffers read back, where the call before left them in the memory
// reading, and the weights evicted; for a kernel without a port for every weight, the flush, the
// fill, the inputs read back; CacheTiming::dirty_min_us): a pass
// writes its activations, and a line brought into a cache full of written ones costs a write-back
// (mobilenet_v2's layers in the replay ran 20-80 µs over the clean reading; E takes the dirty
// reading as the weights' time from memory, docs/ANALYZER.md). With the weights evicted alone, each
// call is followed by one more with the weights and the output buffers (Kernel::port(true, k))
// evicted (CacheTiming::dst_min_us): the dst from memory too, as a pass's pooled output buffer, last
// touched layers back, is (the replay's "cold output": mobilenet_v2's 1x1 expansion 16 -> 96 at
// 112x112 writes 4.8 MB, 176 µs alone and 308 in the graph). A call during which the process was switched out
// (involuntary_switches grew) may not be a reading of the case: at one thread, where the calling
// thread's wait for a CPU (run_delay_us) grew by 1% of the call or more, and at more threads
// always (a worker's wait is not ours to read), the preparation and the call are done again, up to
// kMaxRetakes times a sample, and the sample is the lowest of its calls (an interrupted call only
// runs high; CacheTiming::retaken counts the calls taken again). On the 2-core EPYC VM, batch-8
// readings taken while another process ran were whole 4 ms scheduler ticks above their neighbours
// (bert_base_encoder's MatMul 8x128x768 · 768x3072, medians of five: 23.7 ms warm, 39.7 from
// memory; its fused variant in a quiet minute 19.7 and 20.2), and E counted them as cold weights.
// `team`, where given, runs each phase of each preparation on the case's own threads, each its share
// of the fill, the flush's reads, the inputs and outputs read back and the lines evicted
// (Backend::on_threads: the library's pool), the last phase right before the timed call. A pass at
// n threads leaves each thread's part of an activation in its own core's caches, and its workers
// spinning for the next step; one thread preparing alone left the other cores' parts in its own
// caches and the workers asleep, their cores idle (on a VM, lent to other tenants) after a
// preparation longer than their spin (GOMP_SPINCOUNT, about 0.1 ms), which neither the bench's loop
// nor a pass does: at batch 8 on 2 threads on the 2-core EPYC, oneDNN's Relu on 8x120x28x28 read
// 40.1 µs warm, 43.9 from memory and 218.6 among dirty lines, and E was 1.5-2.5 x S on the mobile
// nets, 24-45% over their replays; prepared on the team, 38.3, 39.7 and 43.5, E 1.08-1.40 x S and
// within 5% of the paired replay for 8 of the 10 models (docs/MEASUREMENT.md, "Cache states").
// One timing per flusher, in their order. Exceptions from the kernel propagate.
std::vector<CacheTiming> time_in_cache_states(kernels::Kernel& kernel, const kernels::Problem& problem,
                                              const std::vector<CacheFlusher*>& flushers, int samples,
                                              double long_call = 0.03, int long_samples = 2,
                                              const Team& team = {});

// The same for a case of a device backend (a GPU), whose caches the CPU's flush does not reach:
// `samples` calls per state (long_samples as above) after the same warm-up, with the backend's
// cold-cache mode (Backend::set_cold_cache, nvbench's L2 flush: a write over twice the device's L2
// before each call, outside the call's events) on for `memory` and off for the others. The device's
// L2 is its last-level cache, so `llc` (the weights where a pass over a model that fits in it leaves
// them) is timed as `warm`, single calls with nothing evicted; `memory`'s flush evicts the outputs
// too, so its dst reading is its own. flush_bytes: Backend::cold_cache_bytes for `memory`, 0 else.
// The cold-cache mode is off when it returns (and where the kernel throws, which propagates).
std::vector<CacheTiming> time_on_device(kernels::Kernel& kernel, const Backend& backend,
                                        const std::vector<CacheState>& states, int samples,
                                        double long_call = 0.03, int long_samples = 2);

// The lowest warm single call of `timings` (µs), 0 without a warm state.
double warm_min(const std::vector<CacheTiming>& timings);

// Whether a case's readings were taken in a disturbed moment: its lowest warm single call above
// kSecondLookAbove × its time in the bench (`case_us`, the lowest repetition mean S takes), for a
// case of kSecondLookFromUs or more. Quiet, the warm single calls are within a few percent of the
// bench's time (the zoo at batch 1: median 1.02 ×, 95% under 1.14 ×); the sweep's batch-1 stage of
// 2026-12-07 read resnet34's Winograd convolution at 983 µs warm against its 388 (372 when timed
// again), and E took the cold readings of that moment. The stage then times the case's states
// once more and keeps the set whose warm call is lower (CacheStageSummary::second_looks).
inline constexpr double kSecondLookAbove = 1.25;
inline constexpr double kSecondLookFromUs = 20;
bool disturbed(const std::vector<CacheTiming>& timings, double case_us);

struct CacheStageOptions {
  int samples = 5;
  // A case whose call takes long_call seconds or more gets long_samples calls per state: on the zoo
  // such cases were most of the stage's time (16 calls of each with five samples; 7 with two).
  double long_call = 0.03;
  int long_samples = 2;
  std::vector<CacheState> states = {CacheState::kWarm, CacheState::kLlc, CacheState::kMemory};
  bool force = false;  // time again the cases that already have a row
  // The cases of the thread budget (each config's fastest over the host's systems of at most the
  // system's threads, as S takes them), or, without, the system's own (--threads-exact).
  bool thread_budget = true;
  // The cases' own buffers on transparent huge pages, as the bench and the replay place them
  // (kernels/buffer.hpp; RunOptions::huge_pages): a case read from memory on 4 KiB pages streams
  // at about half the speed in a virtual machine whose host backs it so.
  bool huge_pages = true;
  // Cases to time besides S's, as (case name, thread count): those E's layout choice runs layers on
  // (analyzer layout_choice_cases), so that E reads their own cold readings. A name no passed case
  // of the thread budget has is left out.
  std::set<std::pair<std::string, int>> also;
};

struct CacheStageSummary {
  int64_t cases = 0;         // best cases of the models' configurations (and fused variants), and `also`'s
  int64_t timed = 0;         // timed now, in every state
  int64_t present = 0;       // already had a row for every state
  int64_t failed = 0;        // could not be built or run (their reasons in `errors`, the first few)
  int64_t retaken = 0;       // calls taken again after a preemption (CacheTiming::retaken), over every case
  int64_t second_looks = 0;  // cases timed twice: the first set disturbed (disturbed)
  int64_t second_lower = 0;  // ... whose second set's warm call was the lower, kept
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
