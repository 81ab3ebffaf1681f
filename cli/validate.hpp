// Checks of the numbers and files given on the command line, shared by every subcommand.
//
// Numbers are parsed strictly (the whole text, no overflow, finite) and checked against a range
// that the error message states, so that `--warmup 1e308`, `--min-time nan`, `--threads 100000`
// or `--batch 99999999999999999999` are usage errors (exit status 2) instead of a hang, an abort
// or a silent clamp. The ranges are documented in README.md (Exit statuses and limits).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::cli {

// Upper limits of the options that size work (README.md lists them).
inline constexpr int64_t kMaxBatch = 65536;          // --batch
inline constexpr int64_t kMaxRepetitions = 10000;    // --repetitions
inline constexpr double kMaxSecondsPerCase = 600.0;  // --min-time, --warmup (seconds)
inline constexpr int64_t kMaxImpls = 10000;          // --max-impls
inline constexpr int64_t kMaxListed = 1000000;       // --top, --replay-steps
inline constexpr int64_t kMaxQueryRows = 100000000;  // db query --max-rows

// Exit status of `run` and `analyze --fail-on-violation` when a latency is below S (the validity
// check, analyzer/validity.hpp): distinct from 1 (something failed) and 2 (usage error).
inline constexpr int kExitBoundViolation = 3;

// The most CPU threads a benchmark may ask for: 4 × the hardware threads, at most 1024 (1024 where
// the count is unknown). More only oversubscribes the machine (libgomp crashed at 100000).
int64_t max_threads();

// --isa NAME (floorline/common/isa.hpp): one of oneDNN's ISA names, at most the CPU's highest level
// (an error names it). Parsed before any subcommand runs, it sets FLOORLINE_MAX_CPU_ISA, the
// process-wide cap each CPU library takes (or is left out under) when its plugin loads.
void add_isa_option(CLI::App* cmd, const std::string& what);

// An integer from `lo` to `hi` inclusive; `what` names the unit in the message ("threads").
// Message: "100000 is not an integer from 1 to 64 (threads)".
CLI::Validator int_in(int64_t lo, int64_t hi, const std::string& what = "");
// A finite number from `lo` to `hi` inclusive (`lo_open`: greater than `lo`).
// Message: "1e308 is not a finite number from 0 to 600 (seconds)".
CLI::Validator real_in(double lo, double hi, const std::string& what = "", bool lo_open = false);

// --dim [MODEL:]NAME=V1[,V2...] (repeatable), into `dims` (mp::ProcessOptions::dims: values of
// the named symbolic input dims; several values sweep; MODEL: for the model of that file stem
// only). Checked as the command line is parsed, a usage error otherwise: [MODEL:]NAME=VALUES with a
// non-empty NAME (and MODEL where a colon is given), each value an integer from 0 to 2^31, a key
// given once. Message: "--dim past_sequence_length=x: x is not an integer from 0 to 2147483648".
void add_dim_option(CLI::App* cmd, std::map<std::string, std::vector<int64_t>>& dims);

// Refuses an output file that is one of the inputs (the same file by device and inode, so a
// hard link or another spelling of the path is caught too). `out` "-" is standard output.
// Error: "OUT: is also an input (MODEL); choose another --out".
Status check_out_not_input(const std::string& out, const std::vector<std::string>& inputs);

// The model files under `paths` (files, or folders searched recursively for *.onnx), as
// mp::find_models(); a folder holding no .onnx file is an error ("DIR: no .onnx file in this
// folder") rather than a run over nothing.
Result<std::vector<std::filesystem::path>> find_model_files(const std::vector<std::string>& paths);

// The models of `files` processed at `options` (one ModelIR per model and batch); a model that
// cannot be processed prints one "error: ..." line on stderr and counts in `failures`.
std::vector<mp::ModelIR> process_models(const std::vector<std::filesystem::path>& files,
                                        const mp::ProcessOptions& options, int& failures);

// What a read command (analyze, compare) works on: the results database opened read-only (nothing
// created or upgraded: an older file is refused with the command that migrates it) and the models
// of `paths` processed at `options` (process_models: a model that fails counts in `failures`).
// Errors: no model file under `paths`, `out` naming an input (check_out_not_input), the database.
struct ReadInputs {
  benchdb::Database db;
  std::vector<mp::ModelIR> models;
  int failures = 0;
};
Result<ReadInputs> open_read_inputs(const std::vector<std::string>& paths, const std::string& db,
                                    const std::string& out, const mp::ProcessOptions& options);

// The embedded zoo, the default MODELS of `run` and `compare`: ./models/zoo when run from a
// checkout, else the source tree's; none when neither is a folder.
std::optional<std::string> embedded_zoo();

// Opens a results database for a write command (created when missing, an older schema upgraded)
// and marks the runs whose process died (benchdb::Database::mark_dead_runs), saying so on stderr
// as "floorline COMMAND: FILE: run N (pid P, started AT) died without finishing: marked died".
Result<benchdb::Database> open_for_writing(const std::string& command, const std::string& path);

// Writes `text` to `out` ("-" for standard output) and checks every step: the open, the write and
// the close (a full disk or /dev/full fails at the flush). Error: "cannot write OUT: REASON".
Status write_checked(const std::string& out, const std::string& text);

}  // namespace floorline::cli
