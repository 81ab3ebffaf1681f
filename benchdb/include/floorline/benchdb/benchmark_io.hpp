// floorline/benchdb/benchmark_io.hpp — Google Benchmark results into the database.
//
// Two ways in, one mapping:
//   - DatabaseReporter, a benchmark::BenchmarkReporter: any benchmark run through the runner lands
//     in the database as it finishes (register it as the file reporter, or wrap the display one);
//   - import_benchmark_json(): a `--benchmark_format=json` / `--benchmark_out` file produced
//     elsewhere (e.g. by a `floorline generate` folder on another machine).
// A benchmark's name is its case name (case_name() in schema.hpp); the "/min_time:…/repeats:…"
// suffixes Google Benchmark adds are ignored. Its repetitions' per-call real
// times (manual time where the backend times itself) become min/median/mean/stddev/cv in µs.
// A benchmark's error message is read back into a coded error by error_from_benchmark_text()
// (common/benchmark_error.hpp): "skipped: " or "unsupported: " gives that status with the rest as
// the reason; any other error is "failed". Counters named workspace_bytes and is_default are stored
// in their columns; the other counters go into `extra` as JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"

namespace floorline::benchdb {

// Statistics over per-call times in µs (one sample per repetition). stddev and cv need two samples.
void fill_statistics(MeasurementRow& m, std::vector<double> per_call_us);
// Status "passed" and the statistics of its per-call times (fill_statistics).
void fill_passed(MeasurementRow& m, std::vector<double> per_call_us);
// Status (disposition_name of the error's code) and reason (its message) of a case that ended with
// `error`. A code the status column has no value for (not verifiable) is stored as failed, the
// reason keeping "not verifiable: ".
void fill_status(MeasurementRow& m, const Error& error);
// Status and reason from a Google Benchmark error message (error_from_benchmark_text, see above).
void fill_status_from_error(MeasurementRow& m, const std::string& error_message);

// The row of one benchmark from its Google Benchmark iteration runs (its repetitions): status
// (an error in any repetition makes the row that error), iterations, statistics and counters, as
// described above; case_id, system and run are left to the caller. `per_call_us`, when given,
// receives each passed repetition's per-call time in µs, in order (nothing for an error).
MeasurementRow measurement_from_runs(const std::vector<const benchmark::BenchmarkReporter::Run*>& reps,
                                     std::vector<double>* per_call_us = nullptr);

// The row of calls timed outside Google Benchmark (RunOptions::first_call_counts): status passed,
// `iterations` calls, one repetition per per-call time in `per_call_us` (µs), and the counters as
// the benchmark body sets them (kernels::case_counters).
MeasurementRow measurement_from_calls(std::vector<double> per_call_us, int64_t iterations,
                                      const std::map<std::string, double>& counters);

class DatabaseReporter : public benchmark::BenchmarkReporter {
 public:
  // `resolve` maps a benchmark name to a case id, or 0 for a benchmark that is not a case (it is
  // counted in unmatched() and not stored).
  DatabaseReporter(MeasurementWriter& writer, std::function<int64_t(const std::string&)> resolve);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

  int64_t stored() const { return stored_; }
  int64_t unmatched() const { return unmatched_; }
  // The first write error, if any (the reporter interface has no way to return one).
  const std::string& error() const { return error_; }

 private:
  MeasurementWriter& writer_;
  std::function<int64_t(const std::string&)> resolve_;
  int64_t stored_ = 0;
  int64_t unmatched_ = 0;
  std::string error_;
};

struct ImportSummary {
  int64_t system_id = 0;
  int64_t run_id = 0;
  int64_t benchmarks = 0;        // distinct benchmark names in the file
  int64_t stored = 0;            // measurements written
  int64_t already_measured = 0;  // not written: the case already has a final result (resume)
  int64_t skipped_names = 0;     // names that are not case names
  int64_t new_configs = 0;       // configs created from keys the database did not have
};

// Imports a Google Benchmark JSON file. The system comes from the file's context: a
// "floorline_system" entry (JSON object of systems columns, "libraries" a JSON object, written by
// generated benchmarks via benchmark::AddCustomContext; the per-library columns of folders
// generated before schema 4, such as "onednn_version", are read into libraries) when present, else what
// Google Benchmark itself records (host, CPU count and MHz) with device_name "unknown CPU". Errors name the
// file.
Result<ImportSummary> import_benchmark_json(Database& db, const std::string& path,
                                            const WriterOptions& options = {});

}  // namespace floorline::benchdb
