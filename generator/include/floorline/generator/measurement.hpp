// floorline/generator/measurement.hpp — the measurement method's parts that are not timing itself:
// the order cases are timed in, the statistics of a case's repetitions, and the sentinel that
// tells a slowed machine from a slow kernel (docs/MEASUREMENT.md).
//
// On a shared machine a case's time depends on where its buffers land (physically indexed caches)
// and on what the neighbours do at that moment, not only on sampling noise. So the runner times a
// case in several interleaved passes (a round robin over a block of cases, so that a drift hits
// every case of the block alike), each pass on a fresh build of the kernel in a new buffer
// placement (kernels/buffer.hpp: its buffers at other offsets, large ones on huge pages), and keeps
// the best placement; a small fixed kernel, the sentinel, is timed between
// cases to notice periods when the whole machine is slower, and the cases timed in such a period
// are timed again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace floorline::gen {

// One visit of the runner: case `index` (into the block's list of cases), pass `pass` (0-based).
struct Visit {
  size_t index = 0;
  int pass = 0;
  bool operator==(const Visit&) const = default;
};

// The order of the visits of `cases` cases in `passes` passes, interleaved by blocks of `block`
// cases (0 = one block of all): for each block, pass 0 over its cases in order, then pass 1 over
// the same cases, and so on. Blocks bound what an interrupted run loses (a case is written once its
// block's passes are done) while keeping drifts shorter than a block common to its cases.
std::vector<Visit> interleaved_order(size_t cases, int passes, size_t block);

// The repetitions of one pass of one case: each repetition's per-call mean, µs.
struct PassSamples {
  std::vector<double> us;
  bool slowed = false;  // the sentinel found the machine slowed while this pass was timed
};

// What a case's measurement row stores, from its passes.
struct CaseStatistics {
  size_t repetitions = 0;  // over every pass
  double min_us = 0;       // lowest repetition mean of any pass: the time S takes
  // Of the best placement: the pass with the lowest median among the passes not slowed (every pass
  // when all were): its median, mean, stddev and cv over its repetitions.
  double median_us = 0, mean_us = 0, stddev_us = 0, cv = 0;
  int passes = 0;
  int slowed = 0;     // passes the sentinel found slowed
  double spread = 0;  // max / min − 1 of the medians of the passes not slowed (placements and drift)
  // The second-lowest median of the passes not slowed (0 with one such pass): whether the best
  // placement's time was reached twice (the runner's further placements stop when it is close).
  double runner_up_us = 0;
  // cv of the lowest half (rounded up, at least two) of the repetition means of the passes not
  // slowed: whether the repetitions the per-case time rests on agree. On a shared machine a
  // neighbour taking the core makes repetitions bimodal (here: 2.3x apart) and the plain cv high
  // for every case; what matters for the bound is that its lowest time repeats.
  double low_cv = 0;
};

// Statistics of one case (docs/MEASUREMENT.md, "What a measurement row stores"). `passes` must hold at least
// one pass with at least one repetition; passes with none are ignored.
CaseStatistics case_statistics(const std::vector<PassSamples>& passes);

// The repetition means as stored in measurements.samples_us: one JSON array per pass, in timing
// order, µs rounded to 4 significant digits ("[[151.2,150.9],[163.0,162.4]]").
std::string samples_json(const std::vector<PassSamples>& passes);

// Tells a slowed machine from a slow kernel: fed the sentinel's time (seconds) after each period,
// it says whether that period was slowed: the time is above `slow_factor` × the lowest sentinel
// time seen so far. The first reading is the baseline; a period can only be judged once a
// baseline exists.
class SlowdownDetector {
 public:
  explicit SlowdownDetector(double slow_factor) : factor_(slow_factor) {}
  bool record(double seconds);
  double baseline() const { return baseline_; }
  int readings() const { return readings_; }
  int slowed_periods() const { return slowed_; }
  double worst_ratio() const { return worst_; }  // highest time / baseline seen, 1 when none above

 private:
  double factor_;
  double baseline_ = 0;
  int readings_ = 0;
  int slowed_ = 0;
  double worst_ = 1;
};

// The sentinel kernel: fixed work of Floorline's own, independent of every backend, that touches
// both the core and the memory hierarchy (a 4 MiB buffer per thread, beyond the private caches, read
// with a dependent multiply-add chain): it slows down when a neighbour takes a core or the memory
// bandwidth, as the cases do. At `threads` > 1 (the cases of a thread budget's count T are timed on T
// cores) each of `threads` threads runs the work on its own buffer, the calling thread one of them,
// so that a neighbour on any of the T cores shows: one thread's reading misses a neighbour on the
// core it does not run on, and that neighbour slows every T-thread case. time() is, per thread, the
// lowest of three calls (so that one interrupt does not make a period look slowed), and the highest
// of those over the threads (s). threads < 1 counts as 1.
class Sentinel {
 public:
  explicit Sentinel(int threads = 1);
  double time();
  int threads() const { return static_cast<int>(data_.size()); }

 private:
  double time_one(size_t t);
  std::vector<std::unique_ptr<float[]>> data_;  // one buffer per thread
  size_t n_ = 0;
  std::vector<float> sink_;
};

}  // namespace floorline::gen
