// floorline/generator/runner.hpp — time a plan with Google Benchmark and store every result.
//
// Per case: the kernel is built (outside timing), warmed up for warmup_seconds, and the iteration
// count is chosen so that one repetition lasts about min_time; the case is then registered with
// Google Benchmark (RegisterBenchmark, manual timing, explicit iterations and repetitions) and run
// with benchdb's DatabaseReporter, which stores min/median/mean/stddev/cv over the repetitions'
// per-call times. Each case ends passed, skipped (reason), unsupported or failed (error text); one
// failure never stops the run. Results are committed in batches: an interrupted run keeps what it
// measured, and a rerun resumes (passed and unsupported cases are not measured again). SIGINT and
// SIGTERM stop the run between cases, after a final commit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/generator/calibration.hpp"
#include "floorline/generator/plan.hpp"

namespace floorline::gen {

// How the runner reports its progress on stderr.
enum class Progress {
  kNone,      // nothing (--quiet)
  kTerminal,  // one line rewritten in place (\r and an erase-line escape): a terminal
  kLines,     // a plain line (no \r, no escape codes) every progress_interval_seconds: logs, CI,
              // batch systems, NO_COLOR
};

struct RunOptions {
  double min_time = 0.01;  // seconds per repetition
  int repetitions = 5;
  double warmup_seconds = 0.005;  // per case, before timing
  int threads = 1;                // CPU threads (recorded in the system row)
  bool force = false;             // measure again even what is already measured (default: resume)
  bool dry_run = false;           // everything but timing: build and verify nothing, write nothing
  bool verify = false;            // check each case against the plain reference before timing
  std::string command;            // the command line, for the runs table
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
  int64_t already_measured = 0;  // not run: settled in an earlier run (resume), or a planned
                                 // status (skipped, unsupported) already recorded the same way
  int64_t verified = 0;          // passed verification before timing (--verify)
  double wall_seconds = 0;       // the whole run, planning excluded
  double timed_seconds = 0;      // Σ iterations × per-call time over the passed cases
  int64_t run_id = 0;
  int64_t system_id = 0;
  std::vector<Peak> peaks;        // measured in this run (calibrate)
  std::string calibration_error;  // why a calibration failed ("" when none did); the cases still ran
  bool interrupted = false;       // stopped by SIGINT/SIGTERM; what was measured is committed
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

// Records the models (configs, layers) and the plan's cases, then times the cases of each
// backend. `db` may be null for a dry run. Error, before anything is written, when a backend cannot
// run on this machine (Backend::available) or has no cold-cache mode for `cold`; and when the
// database cannot be written at all.
Result<RunSummary> run_plan(benchdb::Database* db, const std::vector<mp::ModelIR>& models, const Plan& plan,
                            const std::vector<const Backend*>& backends, const RunOptions& options);

}  // namespace floorline::gen
