// The reference runtime (ONNX Runtime, reference/onnxruntime/measure.js) as a stage of the main
// job, and the import of its per-node profiles.
//
// `floorline run` materializes the models that lack weights (model_processor/materialize.hpp) into
// OUT/materialized, runs measure.js on them at the run's batch sizes and thread count, and imports
// its latencies (framework_latencies: the report's M) and its profiles mapped to layers
// (framework_layer_times: the per-layer comparison). Where the reference is not installed it says
// how to install it in one line and the run goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"

namespace floorline::cli {

// Seconds since t0 on the steady clock (the stage lines' durations).
double seconds_since(std::chrono::steady_clock::time_point t0);

// The folder of the reference runtime: $FLOORLINE_REFERENCE_DIR when set, else
// reference/onnxruntime under the current folder, else under the source tree.
std::filesystem::path reference_dir();

// Why the reference cannot run here ("" when it can): measure.js, node, or onnxruntime-node missing.
std::string reference_missing(const std::filesystem::path& dir);

// The onnxruntime-node version installed in `dir` ("" when absent).
std::string reference_version(const std::filesystem::path& dir);

struct ProfileImportSummary {
  int64_t profiles = 0;        // profiles in the file
  int64_t rows = 0;            // per-node rows written
  int64_t mapped_layers = 0;   // model nodes a runtime node computes
  int64_t not_run_layers = 0;  // model nodes folded or removed at load time
};

// Imports the "profiles" of a measure.js output file: each entry names the profile, the model that
// ran and the optimized graph (paths relative to the file's folder are resolved against it), and the
// framework_latencies identity (model_name, runtime (default "onnxruntime"), runtime_version,
// device (default "cpu"), batch, dtype (default "f32"), settings, threads). Each profile is mapped
// to the model's layers (mp::read_onnxruntime_profile) and replaces the stored rows of its identity;
// one transaction. Errors (one line, naming the file and the entry): unreadable file, a profile or
// model that cannot be read.
Result<ProfileImportSummary> import_framework_profiles(benchdb::Database& db, const std::string& path);

struct ReferenceStageOptions {
  std::vector<std::filesystem::path> models;  // the run's model files
  std::vector<int64_t> batches = {1};
  // Named dims (--dim, mp::ProcessOptions::dims), passed to measure.js, which runs each model in
  // each of its scenarios and names them as Floorline does (mp::scenario_name). `scenarios`: the
  // scenario names of each model file (from the run's processed models): a model is measured again
  // unless every one of them is in the database already (a model absent here: its file stem).
  std::map<std::string, std::vector<int64_t>> dims;
  std::map<std::filesystem::path, std::set<std::string>> scenarios;
  int threads = 1;
  bool quick = false;         // fewer runs, graph optimizations on only
  std::filesystem::path out;  // the run's --out: materialized/ and reference/ go there
};

struct ReferenceStageResult {
  bool ran = false;  // false: not installed (message printed) or nothing to do
  int failures = 0;  // models that could not be materialized, measured or imported
  int64_t latencies = 0, profiles = 0, kept = 0;
  double seconds = 0;
};

// Runs the stage, printing one line per step on stderr; results go into `db`. Never fails the run:
// problems are printed and counted.
ReferenceStageResult run_reference_stage(benchdb::Database& db, const ReferenceStageOptions& options);

}  // namespace floorline::cli
