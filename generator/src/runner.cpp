// The runner: plan → kernels → Google Benchmark → benchdb.
#include "floorline/generator/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/common/benchmark_error.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::gen {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) {
  g_interrupted = 1;
}

// Forwards to the database reporter and keeps the runner's own tallies.
class TallyReporter final : public benchmark::BenchmarkReporter {
 public:
  explicit TallyReporter(benchdb::DatabaseReporter& db) : db_(db) {}
  bool ReportContext(const Context& c) override { return db_.ReportContext(c); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      if (r.error_occurred)
        error = r.error_message;
      else
        timed_seconds += r.real_accumulated_time;  // manual time: Σ per-call times
    }
    db_.ReportRuns(runs);
  }
  void Finalize() override {}
  std::string error;
  double timed_seconds = 0;

 private:
  benchdb::DatabaseReporter& db_;
};

std::string duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}

}  // namespace

Result<RunSummary> run_plan(benchdb::Database* dbp, const std::vector<mp::ModelIR>& models, const Plan& plan,
                            const std::vector<const Backend*>& backends, const RunOptions& options) {
  RunSummary sum;
  if (!dbp && !options.dry_run) return make_error("no database to write to");
  benchdb::Database& db = *dbp;  // only used when not a dry run
  // Every backend must be able to run here (a dry run builds kernels too), before anything is written.
  for (const Backend* backend : backends) {
    if (auto st = backend->available(); !st) return make_error("{}: {}", backend->name(), st.error().message);
    FL_TRY(backend->set_cold_cache(options.cold));
  }
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::unordered_map<std::string, int64_t> config_ids;
  if (!options.dry_run) {
    FL_TRY(db.record_models(models));
    FL_TRY(db.for_each("SELECT id, key FROM layer_configs", {},
                       [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                         config_ids[std::get<std::string>(v[1])] = std::get<int64_t>(v[0]);
                         return Status{};
                       }));
  }
  g_interrupted = 0;
  // Ctrl-C and kill (SIGTERM) stop the run between cases; what was measured is committed.
  auto previous_int = std::signal(SIGINT, on_interrupt);
  auto previous_term = std::signal(SIGTERM, on_interrupt);
  int64_t total_timed = 0;
  for (const auto& c : plan.cases)
    if (!c.status) ++total_timed;
  int64_t done_timed = 0, timed_now = 0;
  Status result;
  // Backends of one device kind share a system (describe_system): one run per system, so that a
  // command timing oneDNN, XNNPACK and OpenBLAS is one run of one system.
  std::unordered_map<int64_t, int64_t> run_of_system;
  auto names_of_kind = [&](const std::string& kind) {
    std::string names;
    for (const Backend* b : backends)
      if (b->device_kind() == kind) names += (names.empty() ? "" : ",") + b->name();
    return names;
  };
  for (const Backend* backend : backends) {
    backend->set_threads(options.threads);
    int64_t system_id = 0, run_id = 0;
    std::unordered_map<std::string, int64_t> case_ids;
    std::unordered_set<int64_t> settled;
    std::unordered_map<int64_t, std::pair<std::string, std::string>> outcomes;
    if (!options.dry_run) {
      benchdb::SystemRow sys = benchdb::capture_host_system(options.threads);
      describe_system(*backend, sys);
      FL_ASSIGN_OR_RETURN(system_id, db.upsert_system(sys));
      benchdb::RunRow run;
      run.system_id = system_id;
      run.host_name = benchdb::host_name();
      run.device_uuid = backend->device_uuid();
      run.command = options.command;
      nlohmann::json options_json{{"min_time", options.min_time},
                                  {"repetitions", options.repetitions},
                                  {"warmup_seconds", options.warmup_seconds},
                                  {"threads", options.threads},
                                  {"backend", names_of_kind(backend->device_kind())},
                                  {"verify", options.verify},
                                  {"cold", options.cold}};
      if (!options.shard.empty()) options_json["shard"] = options.shard;
      if (!options.shard_costs.empty()) options_json["shard_costs"] = options.shard_costs;
      run.options = options_json.dump();
      if (auto it = run_of_system.find(system_id); it != run_of_system.end()) {
        run_id = it->second;
      } else {
        FL_ASSIGN_OR_RETURN(run_id, db.begin_run(run));
        run_of_system[system_id] = run_id;
      }
      FL_TRY(db.transaction([&]() -> Status {
        for (const auto& c : plan.cases) {
          if (c.spec.variant.backend != backend->name()) continue;
          auto it = config_ids.find(c.spec.problem.key);
          if (it == config_ids.end())
            return make_error("config {} is not in the database", c.spec.problem.key);
          benchdb::CaseRow row = case_row(c);
          row.config_id = it->second;
          FL_ASSIGN_OR_RETURN(const int64_t id, db.upsert_case(row));
          case_ids[c.spec.name] = id;
        }
        return Status{};
      }));
      if (options.calibrate) {
        std::vector<DType> dtypes;
        for (const auto& c : plan.cases)
          if (c.spec.variant.backend == backend->name() &&
              std::find(dtypes.begin(), dtypes.end(), c.spec.variant.dtype) == dtypes.end())
            dtypes.push_back(c.spec.variant.dtype);
        CalibrationOptions copts;
        copts.threads = options.threads;
        auto peaks = calibrate_missing(db, system_id, *backend, dtypes, copts);
        if (peaks) {
          for (auto& p : *peaks) sum.peaks.push_back(std::move(p));
        } else {
          sum.calibration_error = peaks.error().message;
        }
      }
      if (!options.force) {
        auto done = db.settled_cases(system_id);
        if (!done) return done.error();
        settled.swap(done.value());
        auto current = db.current_outcomes(system_id);
        if (!current) return current.error();
        outcomes.swap(current.value());
      }
    }
    sum.system_id = system_id;
    sum.run_id = run_id;
    benchdb::WriterOptions wopts;
    wopts.force = options.force;
    std::optional<benchdb::MeasurementWriter> writer;
    if (!options.dry_run) writer.emplace(db, system_id, run_id, wopts);
    std::optional<benchdb::DatabaseReporter> db_reporter;
    if (writer)
      db_reporter.emplace(*writer, [&](const std::string& name) {
        auto it = case_ids.find(name);
        return it == case_ids.end() ? int64_t{0} : it->second;
      });
    // An outcome decided without timing: planned, or the coded error of a build or verification.
    auto record = [&](int64_t case_id, const Error& error) -> Status {
      benchdb::MeasurementRow m;
      m.case_id = case_id;
      benchdb::fill_status(m, error);
      sum.tally(error.code);
      return options.dry_run ? Status{} : writer->add(std::move(m));
    };
    const auto factory = backend->factory();
    const auto cases_start = clock::now();
    auto last_line = cases_start;  // Progress::kLines: when the last line was printed
    for (const auto& c : plan.cases) {
      if (g_interrupted) break;
      if (c.spec.variant.backend != backend->name()) continue;
      const int64_t case_id = options.dry_run ? 0 : case_ids.at(c.spec.name);
      if (settled.count(case_id)) {
        ++sum.already_measured;
        if (!c.status) ++done_timed;
        continue;
      }
      if (c.status) {
        if (auto it = outcomes.find(case_id); it != outcomes.end() &&
                                              it->second.first == disposition_name(*c.status) &&
                                              it->second.second == c.reason) {
          ++sum.already_measured;  // decided by the plan, and already recorded so
          continue;
        }
        FL_TRY(record(case_id, Error{c.reason, *c.status}));
        continue;
      }
      ++done_timed;
      ++timed_now;
      if (options.progress != Progress::kNone) {
        // ETA: the cases left at the mean wall time per case timed so far in this run (a resumed
        // run's settled cases took no time and are not in the mean).
        const auto now = clock::now();
        const double el = std::chrono::duration<double>(now - cases_start).count();
        const double eta = timed_now > 1 ? el / static_cast<double>(timed_now - 1) *
                                               static_cast<double>(total_timed - done_timed + 1)
                                         : -1;
        if (options.progress == Progress::kTerminal) {
          std::fprintf(stderr, "\r\033[K[%lld/%lld] %s elapsed, ETA %s  %.60s",
                       static_cast<long long>(done_timed), static_cast<long long>(total_timed),
                       duration(el).c_str(), duration(eta).c_str(), c.spec.name.c_str());
          std::fflush(stderr);
        } else if (std::chrono::duration<double>(now - last_line).count() >=
                   options.progress_interval_seconds) {
          // The cases finished so far (this one has not run yet), for a log read later.
          last_line = now;
          std::fprintf(stderr, "progress: %lld/%lld cases done, %s elapsed, ETA %s\n",
                       static_cast<long long>(done_timed - 1), static_cast<long long>(total_timed),
                       duration(el).c_str(), duration(eta).c_str());
          std::fflush(stderr);
        }
      }
      auto built = factory(c.spec);
      if (!built) {
        FL_TRY(record(case_id, built.error()));
        continue;
      }
      std::shared_ptr<kernels::Kernel> kernel(std::move(built).value());
      if (options.verify) {
        if (auto v = kernel->verify(); !v) {
          if (v.error().code != Disposition::kNotVerifiable) {
            FL_TRY(record(case_id, make_error("verification: {}", v.error().message)));
            continue;
          }
        } else {
          ++sum.verified;
        }
      }
      if (options.dry_run) {
        ++sum.passed;
        continue;
      }
      double per_call = 0;
      try {
        per_call = kernels::warm_up(*kernel, options.warmup_seconds);
      } catch (const std::exception& e) {
        FL_TRY(record(case_id, kernels::error_of(e).with_context("warm-up")));
        continue;
      }
      const double want = options.min_time / std::max(per_call, 1e-7);
      const auto iterations = static_cast<benchmark::IterationCount>(std::clamp(std::ceil(want), 1.0, 1e7));
      benchmark::ClearRegisteredBenchmarks();
      kernels::register_case(c.spec, c.work, factory, kernel)
          ->Iterations(iterations)
          ->Repetitions(std::max(1, options.repetitions));
      TallyReporter tally(*db_reporter);
      benchmark::RunSpecifiedBenchmarks(&tally);
      benchmark::ClearRegisteredBenchmarks();
      if (!tally.error.empty()) {  // the reporter stored the row; count it the same way
        sum.tally(error_from_benchmark_text(tally.error).code);
      } else {
        ++sum.passed;
        sum.timed_seconds += tally.timed_seconds;
      }
      if (!db_reporter->error().empty()) {
        result = make_error("{}", db_reporter->error());
        break;
      }
    }
    if (writer) {
      if (auto st = writer->flush(); !st && result.ok()) result = st;
      if (auto st = db.finish_run(run_id, g_interrupted ? "interrupted" : "finished"); !st && result.ok())
        result = st;
    }
    if (!result.ok() || g_interrupted) break;
  }
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  sum.interrupted = g_interrupted != 0;
  if (options.progress == Progress::kTerminal) std::fprintf(stderr, "\r\033[K");
  sum.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (!result.ok()) return result.error();
  return sum;
}

}  // namespace floorline::gen
