// The runner: plan → kernels → Google Benchmark → benchdb.
#include "floorline/generator/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/common/benchmark_error.hpp"
#include "floorline/generator/measurement.hpp"
#include "floorline/generator/shard.hpp"
#include "floorline/kernels/buffer.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::gen {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) {
  g_interrupted = 1;
}

// Keeps the repetitions of one case's pass (its iteration runs) for the runner to combine with
// the case's other passes.
class CollectReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& in) override {
    for (const auto& r : in) {
      if (r.run_type != Run::RT_Iteration) continue;
      if (r.error_occurred) error = r.error_message;
      runs.push_back(r);
    }
  }
  void Finalize() override {}
  std::vector<Run> runs;
  std::string error;
};

std::string duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}

// The race a case runs in (RunOptions::race_margin): its system and group (config, data type,
// math mode, fusion), the grouping of best_measurements.
std::string race_key(int64_t system_id, const std::string& key, const std::string& dtype,
                     const std::string& math_mode, const std::string& fusion) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}", system_id, key, dtype, math_mode, fusion);
}

// The race of a group's library defaults (H's cases): the group's key and a mark.
std::string defaults_key(const std::string& group) {
  return group + "\x1e" + "defaults";
}

// The racing order's prior (race_order): a case's kind, backend, algorithm and layout.
std::string prior_key(const CaseId& id) {
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", id.key.substr(0, id.key.find('|')), id.dtype,
                     id.math_mode, id.backend, id.algorithm, id.layout);
}

double lowest(const std::vector<double>& us) {
  return us.empty() ? std::numeric_limits<double>::infinity() : *std::min_element(us.begin(), us.end());
}

}  // namespace

std::string race_layout(const CaseId& id) {
  const auto at = id.algorithm.find('@');
  if (at == std::string::npos) return id.layout;
  const auto end = id.algorithm.find(':', at);
  return id.layout + "@" + id.algorithm.substr(at + 1, end == std::string::npos ? end : end - at - 1);
}

std::string conversion_work_key(const PlannedCase& c) {
  if (!c.conversion) return "";
  const kernels::Problem& p = c.spec.problem;
  // The converted tensor is one of the layer's activations: for "dst" its outputs, for "src" the
  // inputs that are no weight operand (kernels::weight_operand); all of them are in the key, so that
  // a binary's broadcast operand cannot stand for its full-size one.
  std::string shapes;
  const bool dst = c.conversion->tensor == "dst";
  const auto& tensors = dst ? p.outputs : p.inputs;
  for (size_t k = 0; k < tensors.size(); ++k)
    if (dst || !kernels::weight_operand(p, k))
      shapes += fmt::format("{}{}", shapes.empty() ? "" : ",", fmt::join(tensors[k].shape, "x"));
  if (shapes.empty()) return "";
  const CaseVariant& v = c.spec.variant;
  // The variant of the implementation fed (oneDNN's "convolution_direct" of
  // "convolution_direct:jit_1x1:avx512_core"): it decides the dims its primitive gives the tensor.
  const std::string& fed = c.spec.feeds.algorithm;
  return fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", v.backend, v.algorithm,
                     dtype_name(v.dtype), math_mode_name(v.math_mode), v.fusion, v.layout, p.op,
                     fed.substr(0, fed.find(':')), shapes);
}

bool confident_readings(const std::vector<PassSamples>& passes, double above_us, double within) {
  if (above_us <= 0) return false;
  std::vector<double> r;
  for (const auto& p : passes)
    if (!p.slowed && !p.us.empty()) r.push_back(lowest(p.us));
  if (r.size() < 2) return false;
  std::partial_sort(r.begin(), r.begin() + 2, r.end());
  return r[0] >= above_us && r[1] <= r[0] * (1 + within);
}

bool still_settling(const std::vector<double>& us, double within) {
  if (us.size() < 2) return false;
  return us.back() * (1 + within) < *std::min_element(us.begin(), us.end() - 1);
}

double repetition_call_seconds(double timed, double wall, bool device_timed) {
  return device_timed && wall > timed ? wall : timed;
}

int least_calls(double call, int min_iterations, double long_call) {
  return long_call > 0 && call >= long_call ? 1 : std::max(1, min_iterations);
}

int64_t repetition_calls(double call, double min_time, int min_iterations, double long_call) {
  const double want = std::max(min_time / std::max(call, 1e-7),
                               static_cast<double>(least_calls(call, min_iterations, long_call)));
  return static_cast<int64_t>(std::clamp(std::ceil(want), 1.0, 1e7));
}

void race_order(std::vector<const PlannedCase*>::iterator begin,
                std::vector<const PlannedCase*>::iterator end,
                const std::function<double(const PlannedCase&)>& prior) {
  auto group = [](const PlannedCase& c) {
    const CaseId id = c.spec.id();
    return race_key(0, id.key, id.dtype, id.math_mode, id.fusion);
  };
  for (auto run = begin; run != end;) {
    if ((*run)->conversion) {
      ++run;
      continue;
    }
    const std::string g = group(**run);
    auto last = std::next(run);
    while (last != end && !(*last)->conversion && group(**last) == g) ++last;
    std::vector<std::pair<double, const PlannedCase*>> ranked;
    for (auto it = run; it != last; ++it) ranked.emplace_back(prior(**it), *it);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [p, c] : ranked) *run++ = c;
  }
}

std::vector<int> budget_thread_counts(int threads, bool exact) {
  threads = std::max(1, threads);
  if (exact) return {threads};
  std::vector<int> counts;
  for (int t = 1; t < threads; t *= 2) counts.push_back(t);
  counts.push_back(threads);
  return counts;
}

std::function<double()> sentinel_clock(const Backend& backend, int threads) {
  if (auto own = backend.sentinel()) return own;
  auto cpu = std::make_shared<std::optional<Sentinel>>();
  return [cpu, threads] {
    if (!*cpu) cpu->emplace(threads);
    return (*cpu)->time();
  };
}

Result<RunSummary> run_plan(benchdb::Database* dbp, const std::vector<mp::ModelIR>& models, const Plan& plan,
                            const std::vector<const Backend*>& backends, const RunOptions& options) {
  RunSummary sum;
  sum.threads = options.threads;
  sum.remeasure = options.remeasure;
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
  const int passes = std::max(1, options.passes);
  // Progress counts cases: settled ones are done, a case is done once its row is written (after its
  // block's passes, further placements and re-measurements). The ETA weighs them by their estimated
  // seconds (WorkEta); where the estimate cannot be had, it is the cases left at the visits a
  // finished case took on average (the passes until one finished), at the mean wall time per visit.
  int64_t total_cases = 0;
  for (const auto& c : plan.cases)
    if (!c.status) ++total_cases;
  std::vector<double> case_work;  // estimated seconds per plan case (WorkEta), empty without one
  WorkEta work_eta;
  if (options.progress != Progress::kNone && !options.dry_run) {
    CostOptions co;
    co.min_time = options.min_time;
    co.min_iterations = options.min_iterations;
    co.long_call = options.long_call;
    co.repetitions = options.repetitions;
    co.passes = passes;
    co.warmup_seconds = options.warmup_seconds;
    co.first_call_counts = options.first_call_counts;
    co.threads = options.threads;
    if (auto costs = estimate_case_costs(plan, backends, co, dbp); costs.ok()) {
      case_work = std::move(costs->seconds);
      for (size_t k = 0; k < plan.cases.size() && k < case_work.size(); ++k)
        if (!plan.cases[k].status) work_eta.add(case_work[k]);
    }
  }
  auto work_of = [&](const PlannedCase& c) {
    const auto k = static_cast<size_t>(&c - plan.cases.data());
    return k < case_work.size() ? case_work[k] : 0.0;
  };
  int64_t cases_done = 0, visits_now = 0, finished_now = 0, finished_visits = 0;
  // Elapsed and the ETA's wall time per visit span every backend, as the counts do.
  const auto cases_start = std::chrono::steady_clock::now();
  auto last_line = cases_start;  // Progress::kLines: when the last line was printed
  // The sentinels, read between visits; not in a dry run, which times nothing. The CPU backends'
  // cases are watched by the CPU sentinel (measurement.hpp) at the run's thread count, a device
  // backend's by its own (Backend::sentinel); each has its own detector, since each reading is
  // judged against the lowest of its own sentinel.
  struct Watch {
    std::function<double()> clock;
    SlowdownDetector detector;
  };
  std::unordered_map<std::string, Watch> watches;  // by sentinel: "cpu", or a backend's name
  Watch* watch = nullptr;                          // the sentinel of the backend being timed
  auto watch_for = [&](const Backend& backend) -> Watch* {
    if (!options.sentinel || options.dry_run) return nullptr;
    const std::string key = !options.sentinel_clock && backend.sentinel() ? backend.name() : "cpu";
    auto it = watches.find(key);
    if (it == watches.end()) {
      auto clock = options.sentinel_clock ? options.sentinel_clock : sentinel_clock(backend, options.threads);
      it =
          watches.emplace(key, Watch{std::move(clock), SlowdownDetector(options.sentinel_slow_factor)}).first;
    }
    return &it->second;
  };
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
  // Racing (RunOptions::race_margin): the lowest reading so far per system and group (race_key).
  const bool racing = options.race_margin > 0 && !options.keep_lower && !options.dry_run;
  std::unordered_map<std::string, double> race_best;
  // The racing order's prior: per prior_key, the sum and count of its cases' times over their
  // group's best (capped at 4x), from this system's earlier groups (the database's, then this run's).
  std::unordered_map<std::string, std::pair<double, int64_t>> prior_sum;
  constexpr double kPriorCap = 4;
  std::unordered_set<std::string> groups_seen;  // RunSummary::race_groups
  // A backend's idle workers spin between its cases; they are parked before the next backend's
  // cases are timed (Backend::park_threads), and at the end.
  const Backend* previous = nullptr;
  for (const Backend* backend : backends) {
    if (previous) previous->park_threads();
    previous = backend;
    backend->set_threads(options.threads);
    watch = watch_for(*backend);
    int64_t system_id = 0, run_id = 0;
    std::unordered_map<std::string, int64_t> case_ids;
    std::unordered_set<int64_t> settled;
    std::unordered_map<int64_t, std::pair<std::string, std::string>> outcomes;
    if (!options.dry_run) {
      benchdb::SystemRow sys = benchdb::capture_host_system(options.threads);
      describe_system(*backend, sys);
      if (sys.device_kind == "gpu") sys.isa.clear();  // a CPU cap changes nothing on a GPU
      FL_ASSIGN_OR_RETURN(system_id, db.upsert_system(sys));
      benchdb::RunRow run;
      run.system_id = system_id;
      run.host_name = benchdb::host_name();
      run.device_uuid = backend->device_uuid();
      run.command = options.command;
      nlohmann::json options_json{{"min_time", options.min_time},
                                  {"repetitions", options.repetitions},
                                  {"min_iterations", options.min_iterations},
                                  {"long_call", options.long_call},
                                  {"passes", passes},
                                  {"pass_block", options.pass_block},
                                  {"noisy_cv", options.noisy_cv},
                                  {"placements", options.placements},
                                  {"max_placements", options.max_placements},
                                  {"placement_tolerance", options.placement_tolerance},
                                  {"buffers", kernels::page_policy(options.huge_pages)},
                                  {"sentinel", options.sentinel},
                                  {"warmup_seconds", options.warmup_seconds},
                                  {"threads", options.threads},
                                  {"backend", names_of_kind(backend->device_kind())},
                                  {"verify", options.verify},
                                  {"cold", options.cold},
                                  {"race_margin", racing ? options.race_margin : 0.0}};
      if (options.keep_lower) options_json["keep_lower"] = true;  // a re-timing (replay.hpp)
      if (!options.remeasure) options_json["remeasure"] = false;
      if (options.reuse_frames) options_json["reuse_frames"] = true;
      options_json["first_call_counts"] = options.first_call_counts;
      if (racing) options_json["race_first_repetition"] = options.race_first_repetition;
      options_json["confident_above_us"] = options.confident_above_us;
      options_json["confident_within"] = options.confident_within;
      options_json["settle_repetitions"] = options.settle_repetitions;
      if (options.settle_repetitions > 0) {
        options_json["settle_within"] = options.settle_within;
        options_json["settle_below_us"] = options.settle_below_us;
      }
      if (!sys.isa.empty()) options_json["isa"] = sys.isa;  // the cap (FLOORLINE_MAX_CPU_ISA)
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
        std::vector<std::string> failures;
        auto peaks = calibrate_missing(db, system_id, *backend, dtypes, copts, &failures);
        if (peaks) {
          for (auto& p : *peaks) sum.peaks.push_back(std::move(p));
        } else {
          failures.push_back(peaks.error().message);
        }
        for (const auto& f : failures)
          sum.calibration_error += (sum.calibration_error.empty() ? "" : "; ") + f;
      }
      if (!options.force) {
        auto done = db.settled_cases(system_id);
        if (!done) return done.error();
        settled.swap(done.value());
        auto current = db.current_outcomes(system_id);
        if (!current) return current.error();
        outcomes.swap(current.value());
      }
      // The race starts from what the database holds: earlier runs', and earlier backends' of this
      // run (the writer flushed them when their backend ended).
      if (racing)
        FL_TRY(db.for_each(
            "SELECT l.key, b.dtype, b.math_mode, b.fusion, coalesce(b.min_us, b.median_us) FROM "
            "best_measurements b "
            "JOIN layer_configs l ON l.id = b.config_id WHERE b.system_id = ?1",
            {system_id},
            [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) -> Status {
              const auto* us = std::get_if<double>(&v[4]);
              if (!us) return {};
              const std::string g =
                  race_key(system_id, std::get<std::string>(v[0]), std::get<std::string>(v[1]),
                           std::get<std::string>(v[2]), std::get<std::string>(v[3]));
              auto [it, fresh] = race_best.emplace(g, *us);
              if (!fresh) it->second = std::min(it->second, *us);
              return {};
            }));
      // The libraries' defaults race among themselves (H takes the fastest of them): their pace
      // starts from the database's passed defaults.
      if (racing)
        FL_TRY(db.for_each(
            "SELECT l.key, c.dtype, c.math_mode, c.fusion, min(coalesce(m.min_us, m.median_us)) FROM "
            "measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs l ON l.id = c.config_id "
            "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.is_default = 1 AND m.status = 'passed' "
            "GROUP BY l.key, c.dtype, c.math_mode, c.fusion",
            {system_id},
            [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) -> Status {
              const auto* us = std::get_if<double>(&v[4]);
              if (!us) return {};
              const std::string g =
                  defaults_key(race_key(system_id, std::get<std::string>(v[0]), std::get<std::string>(v[1]),
                                        std::get<std::string>(v[2]), std::get<std::string>(v[3])));
              auto [it, fresh] = race_best.emplace(g, *us);
              if (!fresh) it->second = std::min(it->second, *us);
              return {};
            }));
    }
    prior_sum.clear();
    if (racing)
      FL_TRY(db.for_each(
          "SELECT lc.key, c.backend, c.algorithm, c.layout, c.dtype, c.math_mode, min(m.min_us / b.min_us, "
          "?2) "
          "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
          "JOIN best_measurements b ON b.config_id = c.config_id AND b.system_id = m.system_id "
          "AND b.dtype = c.dtype AND b.math_mode = c.math_mode AND b.fusion = c.fusion "
          "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.min_us > 0 AND b.min_us > 0 "
          "AND c.conversion_tensor = '' AND (m.status = 'passed' OR m.reason LIKE 'raced out:%')",
          {system_id, kPriorCap},
          [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) -> Status {
            CaseId id;
            id.key = std::get<std::string>(v[0]);
            id.backend = std::get<std::string>(v[1]);
            id.algorithm = std::get<std::string>(v[2]);
            id.layout = std::get<std::string>(v[3]);
            id.dtype = std::get<std::string>(v[4]);
            id.math_mode = std::get<std::string>(v[5]);
            auto& [total, n] = prior_sum[prior_key(id)];
            total += std::get<double>(v[6]);
            ++n;
            return {};
          }));
    sum.system_id = system_id;
    sum.run_id = run_id;
    benchdb::WriterOptions wopts;
    wopts.force = options.force;
    wopts.keep_lower = options.keep_lower;
    std::optional<benchdb::MeasurementWriter> writer;
    if (!options.dry_run) writer.emplace(db, system_id, run_id, wopts);
    // An outcome decided without timing: planned, or the coded error of a build or verification.
    auto record = [&](int64_t case_id, const Error& error) -> Status {
      benchdb::MeasurementRow m;
      m.case_id = case_id;
      benchdb::fill_status(m, error);
      sum.tally(error.code);
      return options.dry_run ? Status{} : writer->add(std::move(m));
    };
    const auto factory = backend->factory();
    // The cases of this backend to time, in plan order; the others are settled or recorded here.
    std::vector<const PlannedCase*> timed;
    for (const auto& c : plan.cases) {
      if (c.spec.variant.backend != backend->name()) continue;
      const int64_t case_id = options.dry_run ? 0 : case_ids.at(c.spec.name);
      // A case of the floorline backend that the plan now times, stored unsupported, is tried
      // again, its stored row superseded first (whatever the new one is: passed, raced out,
      // failed): our kernels grow between commits under one version (the Winograd convolution's
      // residual sum), where a vendor library's cases are fixed by its version (and some of theirs
      // are unsupported only when built, every run: oneDNN's split convolution at one thread).
      const auto stored = outcomes.find(case_id);
      if (!c.status && c.spec.variant.backend == kOwnBackend && stored != outcomes.end() &&
          stored->second.first == "unsupported" && settled.erase(case_id) > 0 && !options.dry_run)
        if (auto q = db.query("UPDATE measurements SET superseded = 1 WHERE system_id = ?1 AND case_id = ?2 "
                              "AND superseded = 0 AND status = 'unsupported'",
                              {system_id, case_id});
            !q.ok())
          return q.error();
      if (settled.count(case_id)) {
        ++sum.already_measured;
        if (!c.status) {
          ++cases_done;
          work_eta.settle(work_of(c));
        }
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
      timed.push_back(&c);
    }
    // Layout conversions of the same work (conversion_work_key): the first of each key is timed; the
    // others come after every other case of the backend and take its measurement where it passed
    // (where it did not, they are timed themselves: a conversion's build also builds the case it
    // feeds, which may be offered where the first's was not).
    std::unordered_map<const PlannedCase*, std::string> copy_key;
    size_t copies_from = 0;  // where they begin in `timed`
    {
      std::unordered_set<std::string> keys;
      std::vector<const PlannedCase*> firsts, copies;
      for (const PlannedCase* c : timed) {
        std::string k = conversion_work_key(*c);
        if (!k.empty() && !keys.insert(k).second) {
          copies.push_back(c);
          copy_key.emplace(c, std::move(k));
        } else {
          firsts.push_back(c);
        }
      }
      copies_from = firsts.size();
      firsts.insert(firsts.end(), copies.begin(), copies.end());
      timed.swap(firsts);
    }
    // By conversion_work_key: the first passed case's name and row.
    std::unordered_map<std::string, std::pair<std::string, benchdb::MeasurementRow>> conversion_rows;
    // Per case of the current block: its passes so far, its last row (counters, iterations), and
    // how it ended when it did not pass.
    struct Timing {
      std::vector<PassSamples> passes;
      benchdb::MeasurementRow row;
      bool reported = false;  // `row` holds what Google Benchmark's reporter made of a pass
      int64_t iterations = 0;
      std::optional<Error> error;
      bool done = false;  // ended (error, dry run, raced out): no further pass
      int visits = 0;
      std::string group;         // race_key ("" for a case that does not race)
      std::string layout_group;  // race_key with its layout
      // A library's default case (H's): defaults_key of its group, the race it is judged in (the
      // fastest default's pace, not the group's); "" for every other case.
      std::string defaults_group;
      std::optional<double> raced_us;  // raced out on this reading (µs)
      double raced_best = 0;           // ... against this best reading (µs)
      std::string raced_on;            // "first round", ..., and whose best it lost to
      double work_counted = 0;         // of its estimated seconds, what its visits counted done (WorkEta)
      // A conversion taking the measurement of one of its conversion_work_key: that case's name and row.
      const std::pair<std::string, benchdb::MeasurementRow>* measured_as = nullptr;
    };
    // Visits since the last sentinel reading: marked slowed together when that reading says so.
    std::vector<std::pair<Timing*, size_t>> since_reading;
    auto last_reading = clock::now();
    bool last_slowed = false;  // the latest sentinel reading found the machine slowed
    auto take_reading = [&]() {
      if (!watch) return;
      const auto began = clock::now();
      // A sentinel that cannot run (a device error: NaN) judges nothing; its period stays unmarked.
      if (const double seconds = watch->clock(); std::isfinite(seconds) && seconds > 0)
        last_slowed = watch->detector.record(seconds);
      else
        last_slowed = false;
      if (last_slowed)
        for (auto& [tp, j] : since_reading)
          if (j < tp->passes.size()) tp->passes[j].slowed = true;
      since_reading.clear();
      last_reading = clock::now();
      sum.sentinel_seconds += std::chrono::duration<double>(last_reading - began).count();
    };
    // One visit: a fresh build of the case (a new placement), warm-up, `repetitions` repetitions.
    // Racing: a new reading of a group, and the end of a case that cannot win its group.
    auto offer = [&](const Timing& t, double us) {
      if (t.group.empty() || !std::isfinite(us)) return;
      for (const std::string* g : {&t.group, &t.layout_group, &t.defaults_group}) {
        if (g->empty()) continue;
        auto [it, fresh] = race_best.emplace(*g, us);
        if (!fresh) it->second = std::min(it->second, us);
      }
    };
    auto drop = [&](Timing& t, double reading, double best, std::string on) {
      t.done = true;
      t.raced_us = reading;
      t.raced_best = best;
      t.raced_on = std::move(on);
      ++sum.raced_out;
      if (t.raced_on.rfind("warm-up", 0) == 0) ++sum.raced_on_warmup;
      const int64_t saved = std::max(0, passes - t.visits);
      sum.raced_out_visits += saved;
    };
    // Its readings (passes outside slowed periods): the lowest one to drop it on, the best it lost
    // to and whose best that is, if any: one reading at race_drop × the group's best, or every
    // reading, two at least, above race_margin × it or above race_layout_margin × the best of the
    // case's layout. A default case is judged against the fastest default of its group instead, by
    // race_drop and race_margin: H keeps the fastest default.
    struct Verdict {
      double reading, best;
      int readings;
      const char* whose;
    };
    // A case's readings (its passes outside slowed periods): how many, and the lowest (µs).
    struct Readings {
      int count = 0;
      double low = std::numeric_limits<double>::infinity();
    };
    auto readings_of = [](const Timing& t) {
      Readings r;
      for (const auto& p : t.passes)
        if (!p.slowed && !p.us.empty()) {
          r.low = std::min(r.low, lowest(p.us));
          ++r.count;
        }
      return r;
    };
    // The pace a case races against: its group's best, or its group's defaults' for a default case.
    auto group_best = [&](const Timing& t) {
      return race_best.find(t.defaults_group.empty() ? t.group : t.defaults_group);
    };
    // `early_at` > 0: the last reading is a visit's first repetition (race_first_repetition), judged
    // by wider rules: alone, at early_at × the group's best (race_repetition; race_drop for a long
    // case's first call: RunOptions::race_repetition); with others, every one above race_margin ×
    // it (not by its layout's best). 0: the last reading is a whole visit.
    auto verdict = [&](const Timing& t, double early_at = 0) -> std::optional<Verdict> {
      const bool early = early_at > 0;
      const bool is_default = !t.defaults_group.empty();
      const auto g = group_best(t);
      const auto l = is_default ? race_best.end() : race_best.find(t.layout_group);
      if (g == race_best.end()) return std::nullopt;
      const auto [readings, low] = readings_of(t);
      if (readings == 0) return std::nullopt;
      const double best = g->second;
      if (low >= (early ? early_at : options.race_drop) * best ||
          (readings >= 2 && low > options.race_margin * best))
        return Verdict{low, best, readings, is_default ? "its group's defaults'" : "its group's"};
      if (!early && l != race_best.end() && readings >= 2 && low > options.race_layout_margin * l->second)
        return Verdict{low, l->second, readings, "its layout's"};
      return std::nullopt;
    };
    // Before a visit: true when the case is raced out (and ends). The sentinel is read first where
    // one of its visits has not been judged yet, so that no reading of a slowed period counts.
    auto raced_out = [&](Timing& t) -> bool {
      if (!racing || t.group.empty() || t.done || t.passes.empty() || !verdict(t)) return false;
      if (std::any_of(since_reading.begin(), since_reading.end(),
                      [&](const auto& e) { return e.first == &t; }))
        take_reading();
      const auto v = verdict(t);
      if (!v) return false;
      drop(t, v->reading, v->best,
           fmt::format("{} round, {}", v->readings >= 2 ? "second" : "first", v->whose));
      return true;
    };
    auto visit = [&](const PlannedCase& c, int pass, Timing& t) -> Status {
      ++visits_now;
      ++t.visits;
      if (options.progress != Progress::kNone) {
        const auto now = clock::now();
        const double el = std::chrono::duration<double>(now - cases_start).count();
        // A resumed run's settled cases took no time and are not in the means.
        const double per_case = finished_now > 0
                                    ? static_cast<double>(finished_visits) / static_cast<double>(finished_now)
                                    : static_cast<double>(passes);
        const double left = std::max(0.0, static_cast<double>(total_cases - cases_done) * per_case -
                                              static_cast<double>(visits_now - 1 - finished_visits));
        const double eta = !case_work.empty() ? work_eta.eta(el)
                           : visits_now > 1   ? el / static_cast<double>(visits_now - 1) * left
                                              : -1;
        t.work_counted += work_eta.visited(work_of(c), passes, t.visits);
        if (options.progress == Progress::kTerminal) {
          std::fprintf(stderr, "\r\033[K[%lld/%lld cases] %s elapsed, ETA %s  visit %d %.50s",
                       static_cast<long long>(cases_done), static_cast<long long>(total_cases),
                       duration(el).c_str(), duration(eta).c_str(), pass + 1, c.spec.name.c_str());
          std::fflush(stderr);
        } else if (std::chrono::duration<double>(now - last_line).count() >=
                   options.progress_interval_seconds) {
          last_line = now;
          std::fprintf(stderr, "progress: %lld/%lld cases done, %s elapsed, ETA %s\n",
                       static_cast<long long>(cases_done), static_cast<long long>(total_cases),
                       duration(el).c_str(), duration(eta).c_str());
          std::fflush(stderr);
        }
      }
      if (std::chrono::duration<double>(clock::now() - last_reading).count() >= options.sentinel_interval)
        take_reading();
      // The visit's buffer placement (kernels/buffer.hpp), built by the backend inside its scope.
      kernels::CaseSpec spec = c.spec;
      spec.placement = {options.placements > 0 ? pass % options.placements : pass, options.huge_pages,
                        options.reuse_frames};
      auto phase_start = clock::now();
      auto phase_end = [&](double& total) {
        const auto now = clock::now();
        total += std::chrono::duration<double>(now - phase_start).count();
        phase_start = now;
      };
      auto built = factory(spec);
      if (!built) {
        t.error = built.error();
        t.done = true;
        return {};
      }
      std::shared_ptr<kernels::Kernel> kernel(std::move(built).value());
      if (options.verify && pass == 0) {
        if (auto v = kernel->verify(); !v) {
          if (v.error().code != Disposition::kNotVerifiable) {
            t.error = make_error("verification: {}", v.error().message);
            t.done = true;
            return {};
          }
        } else {
          ++sum.verified;
        }
      }
      phase_end(sum.build_seconds);
      if (options.dry_run) {
        t.done = true;
        return {};
      }
      double per_call = 0, wall_per_call = 0;
      int64_t warm_calls = 0;
      try {
        const kernels::WarmUp w = kernels::warm_up_calls(*kernel, options.warmup_seconds);
        per_call = w.lowest;
        wall_per_call = w.wall_per_call;
        warm_calls = w.calls;
      } catch (const std::exception& e) {
        t.error = kernels::error_of(e).with_context("warm-up");
        t.done = true;
        return {};
      }
      phase_end(sum.warmup_seconds);
      // A warm-up call far above its group's best: raced out before its repetitions (the sentinel
      // read first: not in a slowed period). Only before the case's first reading: a case with
      // readings is judged by them (verdict), never by one call of a later visit, which may be the
      // group's best reading's own case on a noisy call (a 39x warm-up call of oneDNN's default
      // once raced out the config's only winner in CI, leaving it no passed case).
      if (racing && !t.group.empty() && t.passes.empty()) {
        const bool is_default = !t.defaults_group.empty();
        if (auto it = race_best.find(is_default ? t.defaults_group : t.group);
            it != race_best.end() && per_call * 1e6 >= options.race_warmup * it->second) {
          take_reading();
          if (!last_slowed) {
            drop(t, per_call * 1e6, it->second,
                 is_default ? "warm-up call, its group's defaults'" : "warm-up call, its group's");
            return {};
          }
        }
      }
      const auto iterations = static_cast<benchmark::IterationCount>(
          repetition_calls(repetition_call_seconds(per_call, wall_per_call, kernel->device_timed()),
                           options.min_time, options.min_iterations, options.long_call));
      // A long case's warm-up call is its first repetition (RunOptions::first_call_counts): one call
      // fewer per visit; Google Benchmark times the others.
      const bool first_counts =
          options.first_call_counts && warm_calls == 1 && !kernel->device_timed() && iterations == 1;
      if (first_counts) ++sum.first_calls;
      if (first_counts && options.repetitions <= 1) {
        std::vector<double> us = {per_call * 1e6};
        t.row = benchdb::measurement_from_calls(us, 1, kernels::case_counters(c.work, *kernel, 1, per_call));
        t.iterations += 1;
        t.reported = true;
        offer(t, lowest(us));
        t.passes.push_back({std::move(us), false});
        since_reading.emplace_back(&t, t.passes.size() - 1);
        return {};
      }
      // Racing on the first repetition (docs/MEASUREMENT.md, "Racing"): where one more reading could
      // end the case (its first visit; or its readings above race_margin × its group's best), the
      // visit's first repetition is judged as that reading, by verdict's early rules, before the
      // others are timed. `so_far`: the visit's repetition means (µs). True when the case was raced
      // out on them (the sentinel read first).
      const int to_time = std::max(1, options.repetitions - (first_counts ? 1 : 0));
      bool early_slowed = false;  // the sentinel read for the first repetition found the machine slowed
      // A long case's first repetition is one call of long_call or more, as steady as a whole
      // visit of a short case: judged alone at race_drop, a short case's at race_repetition.
      const double early_at = first_counts ? options.race_drop : options.race_repetition;
      auto out_early = [&](const std::vector<double>& so_far) -> bool {
        if (!racing || t.group.empty() || so_far.empty()) return false;
        t.passes.push_back({so_far, false});
        std::optional<Verdict> v = verdict(t, early_at);
        if (v) {
          take_reading();  // a repetition of a slowed period is no reading, and its visit was slowed
          early_slowed = last_slowed;
          v = last_slowed ? std::nullopt : verdict(t, early_at);
        }
        if (!v) {
          t.passes.pop_back();
          return false;
        }
        drop(t, v->reading, v->best,
             fmt::format("{} round's first repetition, {}", v->readings >= 2 ? "second" : "first", v->whose));
        ++sum.raced_on_repetition;
        return true;
      };
      auto may_end = [&]() {
        if (!racing || !options.race_first_repetition || t.group.empty()) return false;
        const auto g = group_best(t);
        if (g == race_best.end()) return false;
        return t.passes.empty() || readings_of(t).low > options.race_margin * g->second;
      };
      if (first_counts && may_end() && out_early({per_call * 1e6})) {
        t.iterations += 1;
        return {};
      }
      CollectReporter collect;
      auto time_repetitions = [&](int n) {
        benchmark::ClearRegisteredBenchmarks();
        kernels::register_case(c.spec, c.work, factory, kernel)->Iterations(iterations)->Repetitions(n);
        benchmark::RunSpecifiedBenchmarks(&collect);
        benchmark::ClearRegisteredBenchmarks();
      };
      if (!first_counts && to_time >= 2 && may_end()) {
        time_repetitions(1);
        if (collect.error.empty() && collect.runs.size() == 1) {
          std::vector<double> first_us;
          benchdb::measurement_from_runs({&collect.runs.front()}, &first_us);
          if (!first_us.empty() && out_early(first_us)) {
            t.iterations += collect.runs.front().iterations;
            phase_end(sum.repetition_seconds);
            return {};
          }
        }
        if (collect.error.empty()) time_repetitions(to_time - 1);
      } else {
        time_repetitions(to_time);
      }
      std::vector<const benchmark::BenchmarkReporter::Run*> reps;
      std::vector<double> us;
      benchdb::MeasurementRow row;
      auto collected = [&] {
        reps.clear();
        for (const auto& r : collect.runs) reps.push_back(&r);
        us.clear();
        row = benchdb::measurement_from_runs(reps, &us);
        if (first_counts && !us.empty()) {
          us.insert(us.begin(), per_call * 1e6);
          row.iterations += 1;
        }
      };
      collected();
      // Settling (RunOptions::settle_repetitions): more repetitions on this build while a short
      // case's time still falls; not for a candidate already above race_margin × its group's best,
      // which S cannot take.
      auto contends = [&] {
        if (!racing || t.group.empty()) return true;
        const auto g = group_best(t);
        return g == race_best.end() || lowest(us) <= options.race_margin * g->second;
      };
      if (options.settle_repetitions > 0 && collect.error.empty() && !us.empty() &&
          lowest(us) < options.settle_below_us && contends()) {
        int more = 0;
        while (more < options.settle_repetitions && collect.error.empty() &&
               still_settling(us, options.settle_within)) {
          const size_t before = collect.runs.size();
          time_repetitions(1);
          if (!collect.error.empty()) {  // a failed extra repetition adds nothing: the visit keeps its own
            collect.runs.resize(before);
            collect.error.clear();
            break;
          }
          ++more;
          collected();
        }
        if (more) {
          ++sum.settled_visits;
          sum.settle_repetitions += more;
        }
      }
      phase_end(sum.repetition_seconds);
      if (us.empty()) {  // an error while timing: the row holds it
        if (t.passes.empty()) {
          t.row = std::move(row);
          t.reported = true;
        }
        t.error = error_from_benchmark_text(collect.error);
        t.done = true;
        return {};
      }
      t.iterations += row.iterations;
      t.row = std::move(row);
      t.reported = true;
      if (!early_slowed) offer(t, lowest(us));
      t.passes.push_back({std::move(us), early_slowed});
      since_reading.emplace_back(&t, t.passes.size() - 1);
      return {};
    };
    // Ends a case of the block: its row, written and counted.
    auto finish = [&](const PlannedCase& c, Timing& t) -> Status {
      const int64_t case_id = options.dry_run ? 0 : case_ids.at(c.spec.name);
      if (options.dry_run) {
        if (t.error)
          sum.tally(t.error->code);
        else {
          ++sum.passed;
          sum.passed_configs.insert(c.spec.problem.key);
        }
        return {};
      }
      if (t.measured_as) {
        benchdb::MeasurementRow m = t.measured_as->second;
        m.case_id = case_id;
        nlohmann::json extra = nlohmann::json::object();
        if (m.extra)
          if (auto j = nlohmann::json::parse(*m.extra, nullptr, false); j.is_object()) extra = std::move(j);
        extra["measured_as"] = t.measured_as->first;
        m.extra = extra.dump();
        ++sum.passed;
        ++sum.conversion_copies;
        sum.passed_configs.insert(c.spec.problem.key);
        return writer->add(std::move(m));
      }
      if (t.raced_us) {
        // Raced out: skipped, with the reading it lost on (docs/MEASUREMENT.md, "Racing").
        benchdb::MeasurementRow m;
        m.case_id = case_id;
        m.status = Disposition::kSkipped;
        m.reason = fmt::format("raced out: {} best {:.4g} us, {:.4g} us ({:.2f}x)", t.raced_on, t.raced_best,
                               *t.raced_us, *t.raced_us / t.raced_best);
        m.min_us = *t.raced_us;
        m.iterations = t.iterations;
        m.passes = std::max<int64_t>(1, static_cast<int64_t>(t.passes.size()));
        m.placements = m.passes;
        if (!t.passes.empty()) m.samples_us = samples_json(t.passes);
        sum.tally(Disposition::kSkipped);
        return writer->add(std::move(m));
      }
      if (t.error && t.passes.empty()) {
        if (!t.reported || t.row.status == Disposition::kPassed) return record(case_id, *t.error);
        // An error while timing: the row Google Benchmark's reporter mapping made of it.
        t.row.case_id = case_id;
        sum.tally(error_from_benchmark_text(t.row.reason.empty() ? t.error->message : t.row.reason).code);
        return writer->add(std::move(t.row));
      }
      if (t.passes.empty()) return {};
      // A later pass failing after earlier ones passed: the case still ends passed on what it has.
      const CaseStatistics st = case_statistics(t.passes);
      benchdb::MeasurementRow m = std::move(t.row);
      m.case_id = case_id;
      m.status = Disposition::kPassed;
      m.reason.clear();
      m.iterations = t.iterations;
      m.repetitions = static_cast<int64_t>(st.repetitions);
      m.min_us = st.min_us;
      m.median_us = st.median_us;
      m.mean_us = st.mean_us;
      m.stddev_us = st.repetitions >= 2 ? std::optional<double>(st.stddev_us) : std::nullopt;
      m.cv = st.repetitions >= 2 ? std::optional<double>(st.cv) : std::nullopt;
      m.passes = st.passes;
      m.placements = options.placements > 0 ? std::min(st.passes, options.placements) : st.passes;
      m.slowed = st.slowed;
      m.noisy = st.low_cv > options.noisy_cv ? 1 : 0;
      m.samples_us = samples_json(t.passes);
      sum.noisy += m.noisy;
      ++sum.passed;
      sum.passed_configs.insert(c.spec.problem.key);
      for (const auto& p : t.passes)
        for (double v : p.us)
          sum.timed_seconds +=
              v * 1e-6 * static_cast<double>(t.iterations) / static_cast<double>(st.repetitions);
      if (c.conversion)
        if (std::string k = conversion_work_key(c); !k.empty() && !conversion_rows.count(k))
          conversion_rows.emplace(std::move(k), std::make_pair(c.spec.name, m));
      return writer->add(std::move(m));
    };
    const size_t block_size = options.pass_block > 0 ? options.pass_block : std::max<size_t>(1, timed.size());
    for (size_t first = 0, size = 0; first < timed.size() && !g_interrupted; first += size) {
      // One block: every pass over the same cases, then the re-measurements, then the rows. The
      // conversions that may take another's measurement start a block of their own, after every
      // case they may take it from has its row.
      const size_t end = first < copies_from ? copies_from : timed.size();
      size = std::min(block_size, end - first);
      std::vector<Timing> block(size);
      // Likely winners first within each race (an order, not a cut). A candidate never seen before
      // takes the mean of what is known: neither ahead of the known winners nor behind the losers.
      if (racing) {
        double known = 0;
        int64_t kinds = 0;
        for (const auto& [k, tn] : prior_sum) {
          known += tn.first / static_cast<double>(tn.second);
          ++kinds;
        }
        const double unknown = kinds > 0 ? known / static_cast<double>(kinds) : 1.0;
        race_order(timed.begin() + static_cast<std::ptrdiff_t>(first),
                   timed.begin() + static_cast<std::ptrdiff_t>(first + block.size()),
                   [&](const PlannedCase& c) {
                     const auto it = prior_sum.find(prior_key(c.spec.id()));
                     return it == prior_sum.end() ? unknown
                                                  : it->second.first / static_cast<double>(it->second.second);
                   });
      }
      if (racing)
        for (size_t i = 0; i < block.size(); ++i) {
          const PlannedCase& c = *timed[first + i];
          // A layout conversion is no candidate of its config. A default case is H's: it sets the
          // group's pace, and races only against the other libraries' defaults of its group.
          if (c.conversion) continue;
          const CaseId id = c.spec.id();
          block[i].group = race_key(system_id, id.key, id.dtype, id.math_mode, id.fusion);
          ++sum.race_candidates;
          if (groups_seen.insert(block[i].group).second) ++sum.race_groups;
          block[i].layout_group = block[i].group + "\x1f" + race_layout(id);
          if (c.work.is_default) block[i].defaults_group = defaults_key(block[i].group);
        }
      // The conversions whose work a case timed before them measured already.
      for (size_t i = 0; i < block.size(); ++i)
        if (auto k = copy_key.find(timed[first + i]); k != copy_key.end())
          if (auto r = conversion_rows.find(k->second); r != conversion_rows.end()) {
            block[i].measured_as = &r->second;
            block[i].done = true;
          }
      take_reading();
      // Stopping on confidence: a long case's two readings agree (the sentinel read first where one
      // of them is not judged yet).
      auto confident = [&](Timing& t) {
        if (options.confident_above_us <= 0 || t.done || t.passes.size() < 2) return false;
        auto agree = [&] {
          return confident_readings(t.passes, options.confident_above_us, options.confident_within);
        };
        if (!agree()) return false;
        if (std::any_of(since_reading.begin(), since_reading.end(),
                        [&](const auto& e) { return e.first == &t; }))
          take_reading();
        if (!agree()) return false;
        t.done = true;
        ++sum.confident;
        sum.confident_visits += std::max(0, passes - t.visits);
        return true;
      };
      for (const Visit& v : interleaved_order(block.size(), passes, 0)) {
        if (g_interrupted) break;
        Timing& t = block[v.index];
        if (t.done || raced_out(t) || confident(t)) continue;
        FL_TRY(visit(*timed[first + v.index], v.pass, t));
      }
      take_reading();  // the period after the last reading
      // Further placements, round-robin over the short cases whose best placement was not reached
      // twice (RunOptions::max_placements): drifts hit them alike, as in the passes.
      auto wants_placement = [&](const Timing& t) {
        if (t.done || t.passes.empty() || static_cast<int>(t.passes.size()) >= options.max_placements)
          return false;
        const CaseStatistics st = case_statistics(t.passes);
        return st.median_us < options.placement_search_below_us && st.runner_up_us > 0 &&
               st.runner_up_us > st.median_us * (1 + options.placement_tolerance);
      };
      std::vector<bool> searched(block.size(), false);
      for (bool any = true; any && !g_interrupted;) {
        any = false;
        for (size_t i = 0; i < block.size() && !g_interrupted; ++i) {
          Timing& t = block[i];
          if (raced_out(t) || !wants_placement(t)) continue;
          any = true;
          if (!searched[i]) ++sum.placement_searched;
          searched[i] = true;
          ++sum.placement_visits;
          FL_TRY(visit(*timed[first + i], static_cast<int>(t.passes.size()), t));
        }
        if (any) take_reading();
      }
      // Once more, the cases timed in a slowed period or whose best placement's repetitions
      // disagree; a case still disagreeing after that is flagged noisy in its row. Interrupted,
      // the block's cases are written with the passes they have (their rows say how many), and
      // those not timed at all are left to a rerun.
      for (size_t i = 0; i < block.size() && !g_interrupted; ++i) {
        Timing& t = block[i];
        if (!options.remeasure || t.done || t.passes.empty() || raced_out(t)) continue;
        const CaseStatistics st = case_statistics(t.passes);
        if (st.slowed == 0 && st.low_cv <= options.noisy_cv) continue;
        ++sum.remeasured;
        FL_TRY(visit(*timed[first + i], static_cast<int>(t.passes.size()), t));
      }
      take_reading();
      for (size_t i = 0; i < block.size(); ++i) {
        // What this race teaches the next ones' order: the case's time over its group's best now.
        if (const Timing& t = block[i]; racing && !t.group.empty()) {
          const double us = t.raced_us
                                ? *t.raced_us
                                : (t.passes.empty() || t.error ? 0.0 : case_statistics(t.passes).min_us);
          if (auto g = race_best.find(t.group); us > 0 && g != race_best.end() && g->second > 0) {
            auto& [total, n] = prior_sum[prior_key(timed[first + i]->spec.id())];
            total += std::min(us / g->second, kPriorCap);
            ++n;
          }
        }
        FL_TRY(finish(*timed[first + i], block[i]));
        work_eta.finished(work_of(*timed[first + i]), block[i].work_counted);
        ++cases_done;
        ++finished_now;
        finished_visits += block[i].visits;
      }
    }
    if (writer) {
      if (auto st = writer->flush(); !st && result.ok()) result = st;
      if (auto st = db.finish_run(run_id, g_interrupted ? "interrupted" : "finished"); !st && result.ok())
        result = st;
    }
    if (!result.ok() || g_interrupted) break;
  }
  if (previous) previous->park_threads();
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  sum.interrupted = g_interrupted != 0;
  for (const auto& [key, w] : watches) {
    sum.sentinel_readings += w.detector.readings();
    sum.sentinel_slowed += w.detector.slowed_periods();
    sum.sentinel_worst = std::max(sum.sentinel_worst, w.detector.worst_ratio());
  }
  if (options.progress == Progress::kTerminal) std::fprintf(stderr, "\r\033[K");
  sum.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (!result.ok()) return result.error();
  return sum;
}

}  // namespace floorline::gen
