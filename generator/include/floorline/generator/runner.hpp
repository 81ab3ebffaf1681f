// floorline/generator/runner.hpp — time a plan with Google Benchmark and store every result.
//
// The measurement method (measurement.hpp, docs/MEASUREMENT.md): the cases of a
// backend are timed in blocks of pass_block cases; in each block, `passes` round-robin passes
// visit every case in turn. A visit builds the kernel afresh (outside timing) in its buffer
// placement (kernels/buffer.hpp: buffer offsets by placement, large buffers on huge pages), warms it up for
// warmup_seconds, chooses the iteration count so that one repetition lasts at least min_time and holds at
// least min_iterations calls, or one call of long_call seconds or more (repetition_calls; min_time of the
// case's own timed time; of wall-clock time for a Kernel::device_timed case, whose CUDA events leave out the
// host's tens of µs per call and would otherwise take ten times min_time of wall per repetition), and times
// `repetitions` repetitions through Google Benchmark (RegisterBenchmark, manual timing: the same body as the
// generated sources). Between visits (every sentinel_interval seconds) the sentinel kernel is timed; the
// visits of a period it finds slowed are marked. After the block's passes, the short cases whose placements
// disagree get further placements, round-robin, until their best is reached twice or max_placements; then a
// case with a slowed pass, or whose best placement's repetitions disagree (cv above noisy_cv), is timed once
// more; still disagreeing, its row is flagged noisy. Then each case's row is written: min over every
// repetition, median/mean/stddev/cv of the best placement, passes, placements, slowed passes, and every
// repetition mean (samples_us). Each case ends passed, skipped (reason), unsupported or failed (error text);
// one failure never stops the run. Results are committed in batches: an interrupted run keeps what it
// measured, and a rerun resumes (passed and unsupported cases are not measured again). SIGINT and SIGTERM
// stop the run between visits, after a final commit: the cases of the unfinished block are written with the
// passes they had (their `passes` says how many; no re-measurement), and those not timed yet are left to the
// rerun.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/generator/calibration.hpp"
#include "floorline/generator/measurement.hpp"
#include "floorline/generator/plan.hpp"

namespace floorline::gen {

// How the runner reports its progress on stderr.
enum class Progress {
  kNone,      // nothing (--quiet)
  kTerminal,  // one line rewritten in place (\r and an erase-line escape): a terminal
  kLines,     // a plain line (no \r, no escape codes) every progress_interval_seconds: logs, CI,
              // batch systems, NO_COLOR
};

// The progress line's ETA, by estimated work rather than by case count: a sweep's cases at batch 32
// take a hundred times those at batch 1, and counted alike the ETA read 26 minutes with hours left
// (`run --batch 1,8,32` on the zoo, 2026-12-07). Each case to time weighs its estimated seconds
// (shard.hpp's cost model on the run's own database: an earlier measurement of the case, else its
// roofline time scaled as that system's measured cases are); a visit counts 1/passes of its case
// done, up to its passes, and a case whose row is written counts whole (a raced-out case's unvisited
// passes included). The ETA is the wall time so far over the work done so far, times the work left.
class WorkEta {
 public:
  void add(double seconds) { total_ += seconds; }     // a case to time
  void settle(double seconds) { total_ -= seconds; }  // ... found measured already: nothing to do
  // Visit `visit` (1, 2, ...) of a case of `seconds` timed in `passes` passes: what it counted done.
  double visited(double seconds, int passes, int visit) {
    const double part = visit <= passes && passes > 0 ? seconds / passes : 0.0;
    done_ += part;
    return part;
  }
  // The case's row is written; `counted` is what its visits counted done.
  void finished(double seconds, double counted) { done_ += seconds - counted; }
  // Seconds left after `elapsed` seconds of wall time; negative while nothing is done.
  double eta(double elapsed) const {
    return done_ > 0 ? elapsed * std::max(0.0, total_ - done_) / done_ : -1;
  }

 private:
  double total_ = 0, done_ = 0;
};

struct RunOptions {
  double min_time = 0.001;  // seconds per repetition, at least (of wall time for a device-timed case)
  int min_iterations = 2;   // calls per repetition, at least (long cases)
  // A call of long_call seconds or more is a repetition on its own (repetition_calls): min_iterations
  // holds below it. Such a call is thirty repetitions' min_time: it averages over longer than
  // the repetitions of a short case do, and its second call bought no precision for S's lowest
  // repetition mean, only time (docs/MEASUREMENT.md, "Repetitions"). 0: never.
  double long_call = 0.03;
  int repetitions = 3;  // per pass
  int passes = 3;       // interleaved passes, each on a fresh build of the kernel
  // Buffer placements (kernels/buffer.hpp): visit j of a case (its passes, then a re-measurement)
  // builds the kernel in placement j mod `placements`; 0 = placement j, a new one for every visit.
  int placements = 0;
  // Large host buffers on transparent huge pages where the system allows it (buffer.hpp); recorded
  // in runs.options as "buffers" (kernels::page_policy).
  bool huge_pages = true;
  // Large buffers take released mappings back (kernels::BufferPlacement::reuse_frames): faster
  // builds, the frames of the last builds. For one visit per case (`run --quick`).
  bool reuse_frames = false;
  // A host-timed case whose warm-up was one call, and whose repetition is one call (repetition_calls:
  // a call of long_call or more; or of min_time with min_iterations 1, `run --quick`), takes that call
  // as its first repetition: Google Benchmark times repetitions − 1 more (none with one repetition).
  // One call fewer per visit, a quarter of a long case's calls by default. On the zoo's first look
  // (Zen 4 EPYC) the first call of such a case read a median of 1.005 × the call timed after it
  // (5th–95th percentile 0.95–1.11, the first faster in 40%); in the full method's passes of 30 ms
  // calls, 1.009 × the lower of the two after it. S takes the lowest repetition, and the noise test
  // the lowest half (docs/MEASUREMENT.md, "The warm-up call is the first repetition").
  bool first_call_counts = true;
  // More placements for the short cases whose placements disagree: after the block's passes, a case
  // whose call takes under placement_search_below_us and whose second-best placement's median is
  // more than placement_tolerance above its best gets another placement (another visit, on other
  // physical frames: buffer.hpp) in round-robin rounds over such cases, until its best is reached
  // twice or it has had max_placements visits. A memory-bound case's time depends on where its
  // buffers land; its lowest time over one or three placements does not repeat between processes.
  int max_placements = 8;
  double placement_tolerance = 0.03;
  double placement_search_below_us = 1000;
  size_t pass_block = 64;  // cases per block of interleaved passes (0: all the backend's cases)
  // Above this low_cv (measurement.hpp: cv of the lowest half of the repetitions) a case is timed
  // once more, and flagged noisy when it still is.
  double noisy_cv = 0.05;
  // Time once more the cases with a slowed pass or disagreeing repetitions (false: `run --quick`,
  // a first look; their rows keep `slowed` and `noisy` as they are).
  bool remeasure = true;
  bool sentinel = true;                // time the sentinel between visits and re-measure slowed periods
  double sentinel_interval = 0.2;      // seconds between sentinel readings, at least
  double sentinel_slow_factor = 1.15;  // a reading above this × the lowest one marks a slowed period
  // Per visit, before timing (one call at least): the repetitions' lowest mean is what S takes, and
  // it did not move with 2 ms of warm-up instead (docs/MEASUREMENT.md, "Repetitions").
  double warmup_seconds = 0.0005;
  // Racing (docs/MEASUREMENT.md, "Racing"): the candidates of one group (config, data type, math
  // mode, fusion) are raced against the lowest reading of the group so far on this system (this
  // run's passes and the database's best), and against the lowest of their own layout in the group
  // (race_layout).
  // Layout conversions never race; a library's default case (H's) races only against its group's
  // other defaults (H takes the fastest of them), by race_drop, race_margin and race_warmup. A case
  // is raced out (ends skipped, reason "raced out: ...", its reading stored as min_us), and gets no
  // further visit:
  //  - after a reading (a visit's lowest repetition mean, in a period the sentinel did not find
  //    slowed) at or above race_drop × the group's best; with race_first_repetition, a visit's
  //    first repetition is judged before the others are timed (a long case's warm-up call where it
  //    is the first repetition: first_call_counts): on the case's first visit, at or above
  //    race_repetition × the group's best (race_drop for that long case's call: one call of
  //    long_call or more read at most 1.66 × its case's lowest in 1,223 visits of the zoo); on a
  //    later one, where its readings are all above race_margin × it, by that rule;
  //  - after two readings or more (the second on a fresh placement), every one above race_margin ×
  //    the group's best, or above race_layout_margin × the best of its layout;
  //  - on its warm-up (kernels::warm_up's lowest call) before its first repetitions (a case with
  //    readings is judged by them alone), at or above race_warmup × the group's best.
  // The sentinel is read before any drop, so that a visit of a slowed period is never a reading.
  // race_margin is the replay's layout slack (ReplayOptions::layout_slack): a candidate within it
  // may be run by the replay to save conversions, unless a case of the same layout (the same ports)
  // is faster. 0 turns racing off.
  double race_margin = 1.5;
  double race_layout_margin = 1.25;
  double race_drop = 2.0;
  double race_warmup = 3.0;
  // Judge a visit's first repetition as a reading where one more reading could end the case
  // (above); false: only whole visits are readings.
  bool race_first_repetition = true;
  double race_repetition = 3.0;
  // Stopping on confidence (docs/MEASUREMENT.md, "Stopping on confidence"): a case whose readings
  // are confident_above_us or longer ends after two visits whose readings (outside slowed periods)
  // agree within confident_within (max / min − 1), its further passes untimed. 0: never.
  double confident_above_us = 3000;
  double confident_within = 0.01;
  // Settling (docs/MEASUREMENT.md, "Settling"): a visit of a case whose repetitions last under
  // settle_below_us (µs) gets one more repetition, on the same build, while its last repetition is
  // its lowest by more than settle_within (still_settling), settle_repetitions more at most; with
  // racing, only where its lowest is within race_margin × its group's best (a candidate above it
  // cannot be S's), layout conversions always. A working set
  // about the size of the last-level cache reaches its steady time over several calls (a MaxPool on 12.8 MB:
  // 546, 503, 452, 516, 327, 235, 169, 162 µs), and three repetitions left its lowest 30% above it. 0: never.
  int settle_repetitions = 8;
  double settle_within = 0.02;
  double settle_below_us = 3000;
  // Tests inject a slowed machine here: called instead of timing the sentinel, it returns the
  // sentinel's time in seconds. Unset: the real sentinel (measurement.hpp).
  std::function<double()> sentinel_clock;
  int threads = 1;     // CPU threads (recorded in the system row)
  bool force = false;  // measure again even what is already measured (default: resume)
  // With force: a passed case's new measurement replaces the current one only when its min_us is
  // lower (benchdb WriterOptions::keep_lower; the re-timing after a replay, replay.hpp).
  bool keep_lower = false;
  bool dry_run = false;  // everything but timing: build and verify nothing, write nothing
  bool verify = false;   // check each case against the plain reference before timing
  std::string command;   // the command line, for the runs table
  Progress progress = Progress::kNone;
  // kLines: seconds between two lines (the first comes after one interval): cases done of the
  // total, elapsed and ETA.
  double progress_interval_seconds = 30;
  // Measure the roofline peaks (calibration.hpp) of each backend and data type the database lacks
  // for this system, before the cases.
  bool calibrate = true;
  bool cold = false;  // flush the device cache before each timed call (Backend::set_cold_cache)
  // The shard this run measures ("I/N", shard.hpp), recorded in runs.options as "shard" so that
  // `floorline db coverage` can tell a shard that never ran from one that stopped early; "" = none.
  std::string shard;
  std::string shard_costs;  // the earlier database the partition's costs came from ("" = none)
};

struct RunSummary {
  int64_t passed = 0, skipped = 0, unsupported = 0, failed = 0;
  int64_t raced_out = 0;            // of the skipped: dropped by racing (RunOptions::race_margin)
  int64_t raced_out_visits = 0;     // the visits racing saved (passes the raced-out cases did not get)
  int64_t raced_on_warmup = 0;      // of the raced out: on a warm-up call (not a repetition's reading)
  int64_t raced_on_repetition = 0;  // of the raced out: on a visit's first repetition (the others untimed)
  int64_t race_groups = 0;          // races (config, data type, math mode, fusion) with cases to time
  int64_t race_candidates = 0;      // the cases to time in them (layout conversions are in none)
  // The configs (Problem::key, a layer's key) of the cases that passed in this run: a model none of
  // whose layers has one keeps its earlier replay (floorline run).
  std::set<std::string> passed_configs;
  int64_t already_measured = 0;  // not run: settled in an earlier run (resume), or a planned
                                 // status (skipped, unsupported) already recorded the same way
  int64_t verified = 0;          // passed verification before timing (--verify)
  int64_t first_calls = 0;       // visits whose first call was a repetition (RunOptions::first_call_counts)
  double wall_seconds = 0;       // the whole run, planning excluded
  double timed_seconds = 0;      // Σ iterations × per-call time over the passed cases
  // Where the wall time went, by phase of a visit (wall seconds, summed over visits): building the
  // case (the backend's kernel, its buffers and their fill, --verify), its warm-up calls, its
  // repetitions (Google Benchmark's runs, timed calls of cases later raced out included), and the
  // sentinel's readings. The rest of wall_seconds is the run's own bookkeeping (database, plan).
  double build_seconds = 0;
  double warmup_seconds = 0;
  double repetition_seconds = 0;
  double sentinel_seconds = 0;
  int64_t run_id = 0;
  int64_t system_id = 0;
  int threads = 1;                 // the thread count of the run (RunOptions::threads)
  std::vector<Peak> peaks;         // measured in this run (calibrate)
  std::string calibration_error;   // why a calibration failed ("" when none did); the cases still ran
  bool interrupted = false;        // stopped by SIGINT/SIGTERM; what was measured is committed
  int64_t remeasured = 0;          // cases timed once more (slowed period or noisy repetitions)
  bool remeasure = true;           // RunOptions::remeasure: whether cases were timed once more at all
  int64_t placement_searched = 0;  // cases given placements beyond the passes (max_placements)
  int64_t placement_visits = 0;    // the visits those took
  int64_t confident = 0;           // cases ended on two agreeing readings (confident_above_us)
  int64_t confident_visits = 0;    // the passes they did not get
  int64_t settled_visits = 0;      // visits given more repetitions while still settling
  int64_t settle_repetitions = 0;  // the repetitions those took
  // Layout conversion cases that took the measurement of a case of the same conversion_work_key
  // timed in this run (passed rows; counted in `passed` too).
  int64_t conversion_copies = 0;
  int64_t noisy = 0;  // passed cases whose repetitions still disagreed (flagged)
  int sentinel_readings = 0;
  int sentinel_slowed = 0;    // periods the sentinel found slowed
  double sentinel_worst = 1;  // highest sentinel time over its lowest
  // Counts one case that ended so (not verifiable counts as failed: it ends no case).
  void tally(Disposition d) {
    switch (d) {
      case Disposition::kPassed:
        ++passed;
        return;
      case Disposition::kSkipped:
        ++skipped;
        return;
      case Disposition::kUnsupported:
        ++unsupported;
        return;
      case Disposition::kNotVerifiable:
      case Disposition::kFailed:
        ++failed;
        return;
    }
  }
  double efficiency() const { return wall_seconds > 0 ? timed_seconds / wall_seconds : 0; }
};

// The thread counts a budget of `threads` is timed at (docs/ANALYZER.md "Thread budget"): "T threads"
// means T threads available, and a runtime may run a small layer on fewer, so each configuration is
// timed at 1, every power of two below T, and T; S at T takes each layer's fastest of them. With
// `exact`, T alone. Ascending; T >= 1.
std::vector<int> budget_thread_counts(int threads, bool exact = false);

// The layout a case holds its activations in, as racing groups them (RunOptions::race_layout_margin):
// its CaseId layout ("nhwc" of XNNPACK's cases) and the layout its algorithm names after '@'
// ("concat@nhwc" → "@nhwc", "binary@blocked8c" → "@blocked8c",
// "convolution_direct@channels_last:jit:avx512_core" → "@channels_last"). Floorline's and oneDNN's
// layout variants carry theirs in the algorithm: without it, concat@nhwc raced against its config's
// plain concat as one layout and was dropped at 1.25x, and the replay lost the NHWC chain of
// ShuffleNet's units (docs/MEASUREMENT.md, "Racing").
std::string race_layout(const CaseId& id);

// The racing order (docs/MEASUREMENT.md, "Racing"): within each run of consecutive cases of one race
// (configuration, data type, math mode, fusion), the likely winners first, by `prior` (lower first:
// the runner's is a case's mean time over its group's best in the groups raced before, by kind,
// data type, math mode, backend, algorithm and layout; for one never seen, the mean of those known);
// ties and everything else keep their order, and layout conversions
// their places. An order, never a cut: every case is still timed or raced. The first candidates visited
// set the pace the others are raced against from their first warm-up call.
void race_order(std::vector<const PlannedCase*>::iterator begin,
                std::vector<const PlannedCase*>::iterator end,
                const std::function<double(const PlannedCase&)>& prior);

// What a layout conversion case does, as a key: two conversion cases with the same key convert a
// tensor of the same dims, data type and layer kind from one layout to the other with the same
// implementation (backend, algorithm), so they time the same work, whatever configuration they
// belong to and whichever implementation of it they feed (oneDNN's reorder is made from the
// tensor's dims and the two formats alone). The key is the backend, algorithm, data type, math
// mode, fusion, the conversion ("src:abcd>aBcd16b"), the layer's op, the variant of the
// implementation fed, and the dims of the tensors it may convert (the inputs but the weight
// operands, or the outputs for "dst"). "" for a case that is no conversion. The
// runner times one case of each key and gives the others its measurement (docs/MEASUREMENT.md,
// "Layout conversions").
std::string conversion_work_key(const PlannedCase& c);

// Stopping on confidence (RunOptions::confident_above_us, docs/MEASUREMENT.md): whether a case's
// readings (each pass's lowest repetition mean, µs; passes the sentinel found slowed left out)
// include two, the lowest at `above_us` or more and the next within `within` of it (max / min − 1).
// False for `above_us` 0 or less.
bool confident_readings(const std::vector<PassSamples>& passes, double above_us, double within);

// Settling (RunOptions::settle_repetitions): whether a visit whose repetition means are `us` (µs,
// in the order timed) is still getting faster: its last is below the lowest of the others by more
// than `within` (relative). False for fewer than two.
bool still_settling(const std::vector<double>& us, double within);

// The seconds a call counts for when a repetition's iteration count is chosen (min_time over it):
// its timed time `timed` (the warm-up's lowest), or, for a device-timed kernel
// (Kernel::device_timed), its wall time `wall` (the warm-up's wall per call) where that is longer.
// Seconds; `wall` 0 when unknown. A CPU case's count is the same as before.
double repetition_call_seconds(double timed, double wall, bool device_timed);

// The calls a repetition holds at least, whatever min_time asks, for a call of `call` seconds
// (repetition_call_seconds): min_iterations (1 at least), but 1 where the call lasts long_call
// seconds or more (long_call 0: never 1 for that reason).
int least_calls(double call, int min_iterations, double long_call);

// The calls in one repetition: enough to last min_time, least_calls at least; 1 to 1e7.
int64_t repetition_calls(double call, double min_time, int min_iterations, double long_call);

// The sentinel that judges `backend`'s cases (docs/MEASUREMENT.md, "Sentinel"): its own
// (Backend::sentinel) where it has one, else the CPU sentinel at `threads` (measurement.hpp), made
// at its first reading (its buffers: 4 MiB per thread). Seconds per reading. The bench reads it
// between visits, the replay after each repetition (ReplayOptions::sentinel).
std::function<double()> sentinel_clock(const Backend& backend, int threads);

// Records the models (configs, layers) and the plan's cases, then times the cases of each
// backend. `db` may be null for a dry run. Error, before anything is written, when a backend cannot
// run on this machine (Backend::available) or has no cold-cache mode for `cold`; and when the
// database cannot be written at all.
Result<RunSummary> run_plan(benchdb::Database* db, const std::vector<mp::ModelIR>& models, const Plan& plan,
                            const std::vector<const Backend*>& backends, const RunOptions& options);

}  // namespace floorline::gen
