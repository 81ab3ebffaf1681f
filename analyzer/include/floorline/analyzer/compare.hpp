// floorline/analyzer/compare.hpp — systems side by side: which machine, ISA, thread count and
// library serves which model (`floorline compare`, docs/ANALYZER.md "Comparing systems").
//
// A database keeps every system apart (benchdb::SystemRow: device, libraries, ISA cap, threads);
// `floorline db merge` puts the systems of several machines in one file. A comparison analyzes
// each model × batch on each system as `floorline analyze` does (load_costs with the thread budget,
// analyze_model, check_bound) and puts the results side by side:
//   - per model × batch, the bounds on each system (S, P, H, F, R, M, replay) and the speedup of
//     S over the baseline system's, S_baseline / S_system (above 1: the system is faster);
//   - per model, the configurations whose time changes most between the systems (Σ t(v) over the
//     model's layers of that configuration, largest spread max − min first), with their kind;
//   - per layer kind, Σ t(v) over every compared model on each system, and its speedup;
//   - the thread scaling of each host measured at several thread counts (Database::thread_budget):
//     S at one thread against S at N per model and per kind, parallel efficiency
//     (S_1 / S_N) / N, and the configurations that scale worst;
//   - which system has the lowest S for each model, and how often;
//   - each system's bound check (validity.hpp): S against the framework latencies at its thread
//     count and its replay.
// A system with no measurement of a model's layers has no column for it ("-" / null), never 0.
// Speedups compare S, the fastest of what each system's libraries offer, not one library.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/validity.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"

namespace floorline::analyzer {

struct CompareOptions {
  std::vector<int64_t> systems;     // the systems to compare; empty: every system with a measurement
  std::optional<int64_t> baseline;  // the system speedups are relative to; default the first compared
  std::string dtype = "f32";
  bool thread_budget = true;  // as `floorline analyze` (load_costs)
  size_t top_configs = 5;     // configurations listed per model
};

struct ComparedSystem {
  int64_t id = 0;
  std::string label;  // CostTable::system: "Intel Xeon (cpu, onednn 2.6.3, …, thread budget 2)"
  std::string device_kind;
  int64_t threads = 1;
};

// One model × batch on one system.
struct SystemBounds {
  bool present = false;  // the system measured at least one of the model's layers
  double S = 0, P = 0, H = 0, F = 0;
  std::optional<double> R, M, replay;
  double measured_fraction = 0;  // share of S that rests on measured cases
  bool complete = false;         // every cost-bearing layer has a time
  int64_t violations = 0;        // latencies (framework or replay) below S (check_bound)
  int64_t latencies = 0;         // framework latencies compared with S
};

// A configuration of one model: Σ t(v) over its layers of that configuration on each system.
struct ConfigChange {
  std::string key;
  std::string kind;
  std::string layer;  // the first layer of the model with this configuration (ONNX node name)
  int64_t layers = 0;
  std::vector<std::optional<double>> us;  // per compared system; none where it has no time
  double spread_us = 0;                   // max − min over the systems that have a time
};

struct ModelComparison {
  std::string model;
  int64_t batch = 1;
  std::vector<SystemBounds> systems;  // per compared system, in ComparisonResult::systems order
  std::optional<size_t> fastest;      // the system with the lowest S (of those with S complete)
  std::vector<ConfigChange> configs;  // top_configs, largest spread first
  // S_baseline / S_system; none where either is missing or incomplete.
  std::optional<double> speedup(size_t system, size_t baseline) const;
};

// Σ t(v) of one layer kind over the compared models (at every batch) on each system.
struct KindTotals {
  std::string kind;
  std::vector<double> us;  // per compared system
};

// One host measured at one thread and at N: the systems of a thread budget.
struct ThreadScaling {
  size_t one = 0, many = 0;  // indices into ComparisonResult::systems (1 thread, N threads)
  int64_t threads = 1;       // N
  struct Model {
    std::string model;
    int64_t batch = 1;
    double S_one = 0, S_many = 0;
  };
  // Parallel efficiency (t_1 / t_N) / N: 1 scales perfectly, 1/N not at all.
  double efficiency(double us_one, double us_many) const {
    return us_many > 0 ? us_one / us_many / static_cast<double>(threads) : 0;
  }
  std::vector<Model> models;
  std::vector<std::pair<std::string, std::pair<double, double>>> kinds;  // kind → (µs at 1, µs at N)
  // The configurations that scale worst: Σ t(v) at 1 and N over the compared models, the
  // efficiency below 0.75, most time lost to it (t_N − t_1 / N) first.
  struct Config {
    std::string key, kind, layer;
    double us_one = 0, us_many = 0;
    int64_t threads_chosen = 1;  // the thread count S at N took for it
  };
  std::vector<Config> worst;
};

struct ComparisonResult {
  std::string database;
  std::vector<ComparedSystem> systems;
  size_t baseline = 0;  // index into systems
  std::vector<ModelComparison> models;
  std::vector<KindTotals> kinds;  // largest baseline time first
  std::vector<ThreadScaling> scaling;
  std::vector<int64_t> fastest_count;  // per system: models × batches where its S is the lowest
};

// Analyzes `models` (each ModelIR is one batch) on each system. Errors: an unknown system id, a
// baseline that is not among the compared systems, fewer than one system with measurements.
Result<ComparisonResult> compare_systems(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                                         const CompareOptions& options = {});

// The formats, with the analyzer's conventions (report.hpp): µs (`_us`), a missing figure "-"
// (table, CSV) or null (JSON). CSV: one row per model × batch × system that measured the model.
std::string format_compare_table(const ComparisonResult& c);
std::string format_compare_json(const ComparisonResult& c);
std::string format_compare_csv(const ComparisonResult& c);
// One self-contained page (no scripts, no network): speedup per model chart, time by kind per
// system, thread scaling chart, then the tables.
std::string format_compare_html(const ComparisonResult& c);

}  // namespace floorline::analyzer
