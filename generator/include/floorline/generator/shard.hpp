// floorline/generator/shard.hpp — split a plan's cases into N shards that finish at about the same
// time, for `bench --shard I/N` and `run --shard I/N` on a cluster (scripts/slurm/).
//
// The partition must be the same on every machine that plans the same cases, and the same on a
// requeued task as on its first attempt: it depends only on the plan (case names, work, planned
// statuses) and, when given, an earlier database read as it is (`--shard-costs FILE`); the costs
// are taken at fixed bench settings (kPartitionCosts), so that shards run with other repetitions,
// minimum times or threads still split the plan the same way. It never reads the shard's own output database,
// whose contents change as the shard runs (a requeued task would otherwise move cases between
// shards). Costs are rounded to whole nanoseconds before they are compared, so that no
// floating-point difference between machines can change the order.
//
// The assignment is longest-processing-time first (Graham 1969): cases by estimated seconds,
// largest first, ties by case name; each goes to the shard with the least estimated seconds so far,
// ties to the lowest index. Its largest shard is within 4/3 of the best possible partition's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"

namespace floorline::gen {

// Shard `index` of `count`; the index is 0-based (0 ≤ index < count), as Slurm's array task ids of
// `--array=0-(N-1)`.
struct ShardSpec {
  int index = 0;
  int count = 1;
};

// Parses "I/N". Error (naming the text): not two integers, N < 1, or I outside 0..N-1.
Result<ShardSpec> parse_shard(std::string_view text);

// "I/N".
std::string shard_label(const ShardSpec& s);

// The bench settings a case's time depends on (runner.hpp's RunOptions of the same name).
struct CostOptions {
  double min_time = 0.001;  // seconds per repetition
  int min_iterations = 2;   // calls per repetition, at least
  double long_call = 0.03;  // a call this long is a repetition on its own (runner.hpp)
  int repetitions = 3;      // per pass
  int passes = 3;
  double warmup_seconds = 0.0005;  // per pass
  bool first_call_counts = true;   // a long case's warm-up call is its first repetition (runner.hpp)
  int threads = 1;
};

// The bench settings the partition's costs are taken at: bench's defaults.
inline constexpr CostOptions kPartitionCosts{};

// The estimated seconds of each planned case in a bench run (plan order), and where they came from.
// A timed case costs
//   passes × (kCaseOverhead + max(warmup_seconds, t) + r × max(min_time, n × t))
// with n = least_calls(t, min_iterations, long_call) (runner.hpp: 1 for a call of long_call or more)
// and r = repetitions, or repetitions − 1 where the warm-up's one call is the first repetition
// (n = 1 and t at least warmup_seconds and min_time: RunOptions::first_call_counts)
// where t is the per-call time: the case's median in the earlier database when it has a passed one,
// else its roofline time max(FLOPs / FLOP/s, bytes / bytes/s). The rates are the earlier database's
// calibrated peaks (of its system with the most passed cases of the backend), scaled down by the
// median ratio of measured to roofline time of its measured cases; without an earlier database,
// nominal rates (kNominal*, per thread on a CPU). A case the plan decided (skipped, unsupported)
// costs kRecordOverhead: it is recorded, not timed.
struct CaseCosts {
  std::vector<double> seconds;  // per plan case, in plan order
  int64_t measured = 0;         // cases whose t is an earlier measurement
  int64_t roofline = 0;         // timed cases whose t is a roofline estimate
  std::string source;           // "nominal rates" or "FILE (system N: ...)"
};

// What a timed case costs besides its timed calls: building the kernel, filling its inputs, Google
// Benchmark's bookkeeping, storing the row (seconds; about 8 ms per case at batch 1 on a 2-core
// AVX-512 host). A case the plan decided costs kRecordOverhead: its row is stored, nothing runs.
inline constexpr double kCaseOverhead = 0.008;
inline constexpr double kRecordOverhead = 0.0001;
// Rates when no earlier database is given: sustained rates of small layers, not peaks (a CPU thread
// with AVX2/AVX-512, a current data-centre GPU). Only their ratios matter for the balance.
inline constexpr double kNominalCpuFlopsPerThread = 20e9;
inline constexpr double kNominalCpuBytesPerThread = 10e9;
inline constexpr double kNominalGpuFlops = 20e12;
inline constexpr double kNominalGpuBytes = 1e12;

// `earlier` may be null. Error: the earlier database cannot be read.
Result<CaseCosts> estimate_case_costs(const Plan& plan, const std::vector<const Backend*>& backends,
                                      const CostOptions& options, benchdb::Database* earlier);

// The partition: shard_of[k] is the 0-based shard of case k (in the order given); seconds[s] and
// cases[s] the estimated seconds and the case count of shard s.
struct Partition {
  std::vector<int> shard_of;
  std::vector<double> seconds;
  std::vector<int64_t> cases;
};

// `names` must be distinct (a plan's case names are); `seconds` has one entry per name. The result
// depends only on the (name, seconds) pairs, not on their order. count ≥ 1.
Partition partition_cases(const std::vector<std::string>& names, const std::vector<double>& seconds,
                          int count);

// The plan's cases of plan.cases' indexes k with shard_of[k] == index (configs and backends kept).
Plan shard_plan(const Plan& plan, const Partition& partition, int index);

}  // namespace floorline::gen
