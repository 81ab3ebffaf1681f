// `floorline plan`, `floorline generate` and `floorline bench`: the generator and runner.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "floorline/common/result.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/generator/shard.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::cli {

// What to plan: the options `plan`, `generate`, `bench` and `run` share.
struct CommonOptions {
  std::vector<std::string> models;
  std::string backend = "auto";
  std::vector<int64_t> batches = {1};
  int64_t max_detections = 100;                      // ProcessOptions::max_detections
  std::map<std::string, std::vector<int64_t>> dims;  // ProcessOptions::dims (--dim)
  std::vector<std::string> dtypes = {"f32"};
  int max_impls = 0;  // 0: every implementation (raced)
  bool all_impls = false;
  bool include_ref = false;
  bool no_fusion = false;
  bool no_conversions = false;
  std::vector<std::string> cases;  // only these case names
  std::string shard;               // "I/N" (0-based I): only this shard's cases (generator/shard.hpp)
  std::string shard_costs;         // an earlier database whose measurements and peaks set the costs
};

// The processed models, the backends and the plan.
struct Loaded {
  std::vector<mp::ModelIR> models;
  std::vector<const gen::Backend*> backends;
  gen::Plan plan;
  int failures = 0;         // models that could not be processed (each reported on stderr)
  double plan_seconds = 0;  // processing and planning, wall time
};

// The plan's options (--backend, --batch, --dtype, --max-impls, --all-impls, --include-ref,
// --no-fusion, --no-conversions, --case), for a command that plans as `bench` does.
void add_plan_options(CLI::App* cmd, CommonOptions& o);

// Processes every model at every batch size and plans their cases. A model that fails is
// reported on stderr and skipped (one bad model never stops a zoo). Error: no model file found,
// an unknown backend or data type, a --case name not in the plan.
Result<Loaded> plan_models(const CommonOptions& o);

// The partition of the plan's cases into `count` shards by estimated seconds (generator/shard.hpp:
// the costs at gen::kPartitionCosts, read from `costs_file` when it is not empty, opened
// read-only), and, when `actual` is given, each shard's estimated seconds at those bench settings.
// Error: the file cannot be opened or read.
struct ShardLayout {
  gen::Partition partition;
  gen::CaseCosts costs;
  std::vector<double> estimated;  // per shard, at *actual
};
Result<ShardLayout> shard_layout(const Loaded& l, int count, const std::string& costs_file,
                                 const gen::CostOptions* actual = nullptr);

// With o.shard set: keeps only that shard's cases in l.plan, and says on stderr how many cases the
// shard has and its estimated seconds. Error: a malformed --shard, an unreadable --shard-costs.
Status select_shard(Loaded& l, const CommonOptions& o, const gen::CostOptions& options, const char* cmd);

// Records the shard (and its cost file) with the run, for `floorline db coverage`.
void set_shard(gen::RunOptions& ro, const CommonOptions& o);

// The outcome of a bench run on stderr: cases by status, wall and timed seconds, calibrated peaks.
void print_bench_summary(const gen::RunSummary& r, double plan_seconds, bool dry_run, bool verify);

// How `bench` and `run` show their progress on stderr: nothing with --quiet; a line rewritten in
// place on a terminal; otherwise (a log file, a pipe, CI, or NO_COLOR set) a plain line every 30 s,
// or every FLOORLINE_PROGRESS_INTERVAL seconds where that variable holds a positive number.
void set_progress(gen::RunOptions& ro, bool quiet);

// The measurement method's options shared by `bench` and `run` (generator/runner.hpp): unset ones
// keep RunOptions' defaults (or `run --quick`'s).
struct MethodCli {
  std::optional<int> passes;
  std::optional<int> min_iterations;
  std::optional<double> long_call;
  std::optional<size_t> pass_block;
  std::optional<int> placements;
  std::optional<int> max_placements;
  std::optional<int> settle;
  bool sentinel = true;
  bool huge_pages = true;
  bool race = true;
};
void add_method_options(CLI::App* app, MethodCli& m);
// Applies `m` to ro and to the partition's cost model.
void set_method(gen::RunOptions& ro, gen::CostOptions& costs, const MethodCli& m);

// Times the plan at every thread count of the budget (gen::budget_thread_counts(ro.threads, exact)),
// one gen::run_plan per count into its own system, each summary printed (print_bench_summary) under
// a line naming the count when there are several. Returns the summaries in count order (the last at
// ro.threads); stops after an interrupted count. Error: the first run_plan error.
Result<std::vector<gen::RunSummary>> bench_thread_budget(benchdb::Database* db, const Loaded& l,
                                                         const gen::RunOptions& ro, bool exact, bool dry_run,
                                                         bool verify);

// The cache stage (generator/cache_state.hpp): the cases S takes on `system_id` (within its thread
// budget unless `exact`) timed with cold caches into `db`, and a line on stderr saying how many and
// how long, with the first failures. The cases' own buffers on huge pages when `huge_pages`, as the
// bench placed them (--huge-pages). Error: the database cannot be read or written.
Status run_cache_stage(benchdb::Database& db, const Loaded& l, int64_t system_id, bool exact,
                       bool huge_pages);

// `command_line` is recorded with each run (runs.command).
void add_bench_commands(CLI::App& app, int& exit_code, const std::string& command_line);

}  // namespace floorline::cli
