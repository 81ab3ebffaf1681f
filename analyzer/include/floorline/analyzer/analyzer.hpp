// floorline/analyzer/analyzer.hpp — lower-bound latencies of a model from its layer IR and the
// results database, per model × batch × dtype × system (docs/ANALYZER.md, Bounds).
//
// All times are microseconds of one inference of the whole batch. For each cost-bearing layer
// instance v, t(v) is the fastest current passed case of v's config on the system in the base
// data type and math mode, unfused (benchdb's best_measurements); a layout-conversion case is never
// t(v). View and Host layers cost 0. A cost-bearing layer with no passed case is costed by its
// roofline time and flagged (`source` "roofline"); with no calibrated peaks either, it has no time
// (`source` "none") and every bound that needs it says so (`complete` false): never a zero.
//
//   S  sequential          Σ t(v) over every layer instance (multiplicity counts)
//   S_vendor               S over the vendor libraries' cases only (is_own_kernel, common/case_id.hpp:
//                          not Floorline's own kernels): a layer whose only passed cases are ours is
//                          costed as S costs a layer no backend runs, by its roofline time, flagged
//   P  parallel            the longest path through the layer DAG weighted by t(v), source and sink
//                          included (the critical path, listed in `critical_path`); P ≤ S
//   H  heuristic           Σ time of the library's own first choice for v's config (oneDNN's first
//                          implementation for format any; cuDNN's get_v7 first result; with several
//                          libraries on one system, the fastest of their first choices); a layer whose
//                          default case did not pass keeps t(v) and is counted in heuristic_missing
//   F  fused               S with each fusable chain (mp::fusion_matches: Conv/Gemm/MatMul + activation,
//                          + residual Add (+ activation), + bias (+ activation)) replaced by its
//                          measured fused case where that is faster, and each Conv → BatchNormalization
//                          costed as the conv alone (folded); every layer is fused at most once
//   S_m reduced precision  S with t(v) taken from math mode m (bf16, f16, tf32) where v's config has a
//                          passed case in it; the other layers keep their base time (counted)
//   R  roofline            Σ max(FLOPs(v) / peak FLOP/s, bytes(v) / peak bytes/s), peaks calibrated
//                          on the system (system_peaks) for the base dtype
//   M  measured            the fastest imported framework latency of the model at this batch and dtype
//                          on this device (framework_latencies: a GPU's rows name it; a CPU's name
//                          its host's CPU, "cpu:MODEL", or just "cpu" for rows of unknown host, which
//                          every CPU system takes; on a CPU, at the thread count of the
//                          measurements), when there is one
//   replay                 not a bound: the model's best cases executed back to back as its graph
//                          (generator/replay.hpp), stored in the replays table for this system;
//                          replay / S says how tight S is. Never counted as M.
//
// Each bound is one function of bounds.hpp; analyze_model composes them.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "floorline/analyzer/llm.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/schema.hpp"
#include "floorline/common/case_id.hpp"
#include "floorline/common/result.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::analyzer {

// One measured case, as the analyzer uses it.
struct CaseTime {
  // Per-call time as S takes it: the lowest repetition mean (min_us; the median for rows without
  // one), docs/MEASUREMENT.md.
  double us = 0;
  int64_t case_id = 0;
  CaseId id;         // the case's identity (common/case_id.hpp)
  std::string name;  // case_name(id), derived once when the table is loaded
  // How the time was measured (measurements, schema 7; best cases only): every repetition mean
  // (µs, all passes), passes, buffer placements, passes the sentinel found slowed, the noisy flag,
  // and the spread of the passes' medians (max / min − 1).
  std::vector<double> samples;
  int64_t passes = 1, placements = 1, slowed = 0, noisy = 0;
  double spread = 0;
  // The thread count it was measured at (its system's), and that system: within a thread budget
  // (load_costs) the fastest case of a configuration may come from a system of fewer threads.
  int64_t threads = 1;
  int64_t system_id = 0;
  // The formats its implementation holds its operands in as the plan saw them (cases.params
  // "formats", oneDNN's: "src:acdb wei:Abcde16a dst:acdb"); "" where the case names none. Where no
  // conversion case names the case's layouts (one conversion case serves every implementation of
  // its configuration that reads that format, planned beside the first), E reads them here.
  std::string formats;
};

// A confidence interval (µs) of a bound (confidence_intervals).
struct Interval {
  double lo = 0, hi = 0;
};

// How this system's current passed measurements were taken, for the report's trust line.
struct MethodSummary {
  int64_t cases = 0;         // current passed measurements
  int64_t slowed_cases = 0;  // with a pass the sentinel found slowed (re-measured by the default method)
  int64_t slowed_only = 0;   // ... every pass of which was (`run --quick` does not re-measure): maybe high
  int64_t noisy_cases = 0;   // whose repetitions still disagreed after re-measurement
  int64_t min_passes = 0, max_passes = 0;
  double median_spread = 0;  // of the best cases' pass medians (max / min − 1), median over them
};

// What became of the cases timed in a slowed period, for the reports' sentinel line: "each was timed
// again outside it", or how many have no pass outside one (their time may be high).
std::string slowed_text(const MethodSummary& m);

// The candidates of one group (a configuration, data type, math mode and fusion) on one system: how
// many passed and how many ended raced out (docs/MEASUREMENT.md, "Racing"), and the two lowest
// times of the passed ones (µs; infinity when there are fewer), so that a report can say how close
// the runner-up came.
struct RaceSummary {
  int64_t passed = 0, raced_out = 0;
  double lowest = std::numeric_limits<double>::infinity();
  double runner_up = std::numeric_limits<double>::infinity();
  void add(double us) {
    ++passed;
    if (us < lowest) {
      runner_up = lowest;
      lowest = us;
    } else if (us < runner_up) {
      runner_up = us;
    }
  }
};

// What the database knows about one system, loaded once and shared by every model analyzed.
struct CostTable {
  int64_t system_id = 0;
  std::string system;       // "AMD EPYC (cpu, onednn 2.6.3, 1 thread)": device, libraries, threads
  std::string device_kind;  // "cpu" or "gpu"
  std::string device_name;
  int64_t threads = 1;  // CPU threads of the system (framework latencies must match)
  // The systems whose cases `best` and `conversions` take (Database::thread_budget): this system
  // and, within its thread budget, the same host measured at fewer threads. One entry when exact.
  std::vector<benchdb::BudgetSystem> budget;
  // (key, dtype, math_mode, fusion) → fastest passed case (benchdb best_measurements).
  std::map<std::tuple<std::string, std::string, std::string, std::string>, CaseTime> best;
  // (key, dtype, math_mode, fusion) → fastest passed case of a vendor library (not is_own_kernel).
  std::map<std::tuple<std::string, std::string, std::string, std::string>, CaseTime> best_vendor;
  // (key, dtype, math_mode, fusion, system id) → its candidates on that system (the budget's systems
  // each have their own: a layer reads its best case's).
  std::map<std::tuple<std::string, std::string, std::string, std::string, int64_t>, RaceSummary> races;
  // (key, dtype, math_mode, fusion) → the library's own first choice, when it passed.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, CaseTime> heuristic;
  // (key, dtype, math_mode, the cases fed) → the layout conversion cases that feed them (cases
  // feeds_algorithm and feeds_layout): those of one algorithm ({algorithm, ""}, oneDNN), or every
  // case in one layout ({"", layout}, XNNPACK and CUDA).
  std::map<std::tuple<std::string, std::string, std::string, CaseFeeds>, std::vector<CaseTime>> conversions;
  // (key, dtype, math_mode, fusion) → every passed case of the configuration (layout conversions left
  // out), over the thread budget's systems: the cases the replay's layout-aware choice may run a
  // layer on, which E's choice (choose_layouts) follows.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<CaseTime>> passed;
  // (peak "flops"|"bytes", dtype) → value per second as calibrated (system_peaks), and as R uses
  // it: raised by raise_peaks() where a measured case went faster than the calibration.
  std::map<std::pair<std::string, std::string>, double> calibrated_peaks;
  std::map<std::pair<std::string, std::string>, double> peaks;
  std::vector<std::string> peak_notes;  // which case raised a peak, from what to what
  // dtype → bytes/s of a copy far beyond the caches (the "memory" calibration, gen::calibrate):
  // the streaming bandwidth of the language-model view's memory floor (llm.hpp); never R's.
  std::map<std::string, double> memory_bandwidth;
  std::vector<benchdb::FrameworkLatencyRow> framework;
  // (schema 6) Per-node runtime profiles mapped to layers, of this kind of device (runtime_layers.hpp).
  std::vector<benchdb::FrameworkLayerTimeRow> layer_times;
  // (model, batch, dtype) → this system's replay (benchdb replays).
  std::map<std::tuple<std::string, int64_t, std::string>, benchdb::ReplayRow> replays;
  // (system id, case id) → cache state ("memory", "llc"; "memory_dst": from memory with the output
  // buffers evicted too, schema 11) → the case's lowest call in that state (µs; benchdb cache_times,
  // schema 10), over the systems of the thread budget: what E reads.
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, double>> cache_times;
  // The caches a pass keeps to itself: the L2 of the cores the system's cases run on (bytes: half an
  // "llc" flush, 2 × L2 per thread); 0 without any.
  int64_t private_cache_bytes = 0;
  // Math modes with any best case on this system, by dtype: {"bf16": "bf16"}, {"f32": "fp32"}.
  std::map<std::string, std::string> modes;
  MethodSummary method;
};

// The systems holding best cases of these models' configurations: per system id, how many (of
// best_measurements' groups) and its thread count.
struct MeasuringSystem {
  int64_t best_cases = 0;
  int64_t threads = 1;
};
Result<std::map<int64_t, MeasuringSystem>> systems_measuring(benchdb::Database& db,
                                                             const std::vector<mp::ModelIR>& models);

// The system to analyze: `requested` when given (error if absent); otherwise, of the systems with
// measurements of these models' configs, the one with the most best cases (ties: the newest).
// Error when the database has no measurement of any of them.
// With `threads`, only the systems measured at that thread count are candidates (error when none
// has a measurement of these models).
Result<int64_t> choose_system(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                              std::optional<int64_t> requested,
                              std::optional<int64_t> threads = std::nullopt);

// The costs of `system_id`. Thread budget (docs/ANALYZER.md "Thread budget"): a system of T threads
// means T threads available, and a runtime may run a small layer on fewer; so with `thread_budget`
// each configuration's best case (and the layout conversions it needs) is the fastest over the
// systems of the same host (benchdb::host_fingerprint) measured at T threads or fewer, and
// CaseTime::threads says which count won. Everything else (the library defaults of H, the peaks,
// replays, framework latencies, the method summary) is the system's own. Without `thread_budget`,
// the system's own cases only (`--threads-exact`).
Result<CostTable> load_costs(benchdb::Database& db, int64_t system_id, bool thread_budget = true);

// The FLOPs the roofline counts: a Conv's multiply-adds that read inside the input (taps on padding
// are not work a library must do: DeepLabV3's dilated ASPP convs have 4x fewer); every other layer's
// FLOPs as the model processor counts them.
int64_t roofline_flops(const mp::Layer& layer);

// A roofline peak must be at least every rate that was reached: raises the `dtype` peaks to the
// fastest rate (roofline_flops / t, bytes / t) of any measured best case among these models' layers,
// Winograd and FFT convolutions excepted (they do fewer multiplications than the count), and notes
// it in peak_notes.
void raise_peaks(CostTable& costs, const std::vector<mp::ModelIR>& models, const std::string& dtype);

// The costs these models are analyzed with on a system, as `analyze` and `compare` take them:
// load_costs, then raise_peaks for `dtype` and, for a quantized model's int8 layers (bounds.hpp), for
// int8.
Result<CostTable> load_model_costs(benchdb::Database& db, int64_t system_id,
                                   const std::vector<mp::ModelIR>& models, const std::string& dtype,
                                   bool thread_budget = true);

// Where a layer's t(v) comes from.
enum class CostSource {
  kMeasured,  // the fastest passed case of its config
  kRoofline,  // no passed case: its roofline time
  kNone,      // no time at all (no passed case, no calibrated peaks)
};
// "measured", "roofline", "none": the text the reports (JSON, CSV, HTML) give it.
inline std::string_view cost_source_name(CostSource s) {
  switch (s) {
    case CostSource::kMeasured:
      return "measured";
    case CostSource::kRoofline:
      return "roofline";
    case CostSource::kNone:
      return "none";
  }
  return "none";
}

struct LayerCost {
  int index = 0;     // Layer::index
  std::string name;  // ONNX node name
  std::string kind;  // LayerKind name
  std::string key;   // canonical key
  int64_t flops = 0;
  int64_t roofline_flops = 0;  // roofline_flops(layer): what R and the roofline chart count
  int64_t bytes = 0;
  CostSource source = CostSource::kNone;
  double us = 0;          // t(v); 0 when source is kNone
  std::string best_case;  // case name of t(v) ("" unless measured)
  std::string algorithm;
  int64_t threads = 0;  // the thread count t(v) was measured at (0 unless measured)
  // The best case's measurement (measured layers): passes, placements, spread of the passes'
  // medians (max / min − 1), and 1 when its repetitions stayed noisy.
  int64_t passes = 0, placements = 0, noisy = 0;
  double spread = 0;
  std::optional<double> heuristic_us;  // the library's first choice, when it passed
  std::optional<double> roofline_us;   // max(FLOPs / peak FLOP/s, bytes / peak bytes/s)
  double conversion_us = 0;            // layout conversions t(v)'s implementation needs (Σ of their cases)
  // Its candidates on the best case's system (measured layers; RaceSummary): the cases that passed
  // and those raced out, and the runner-up's time (the second-fastest passed case), when there is one.
  int64_t candidates = 0, raced_out = 0;
  std::optional<double> runner_up_us;
  // t(v) over the vendor libraries' cases only (S_vendor): t(v) where the best case is a vendor's,
  // else the fastest vendor case ("measured"), else as a layer with no case: "roofline" or "none".
  CostSource vendor_source = CostSource::kNone;
  double vendor_us = 0;
  bool on_critical_path = false;
  std::vector<int> preds;  // the cost-bearing layers it reads from (through view layers)
  // An activation S counts in its producer's epilogue (docs/ANALYZER.md, "The activation
  // epilogue"): the producer's measured fused case with this activation (`epilogue_case`) is
  // faster than the two layers' unfused cases, and t(v) is what that case adds to the producer's
  // own time, fused − t(producer), or 0 where the producer's t(v) is the fused case itself (it beat
  // the producer's own best); `own_us` keeps the activation's own best case time.
  // "" and 0 for every other layer. `epilogue_head` is the producer's Layer::index (-1 for every
  // other layer): a runtime that runs the chain as several nodes is compared on their sum
  // (runtime_layers.hpp).
  std::string epilogue_case;
  double own_us = 0;
  int epilogue_head = -1;
  // The producer of such a chain: the fusion its fused case applies ("Clip(0,6)"); "" elsewhere.
  std::string fusion;
  // The case t(v) is taken from (the best case; for an activation in an epilogue, the fused case),
  // its system and time alone (µs); 0 unless measured.
  int64_t case_id = 0, case_system_id = 0;
  double case_us = 0;
  // e(v), the layer's share of E (estimate_E): t(v) × max(1, the case's single calls in the model's
  // cache state over its time alone); none where that case has no cache time.
  std::optional<double> e_us;
  // The layouts its best case reads its activation input in and writes its output in: "" for the
  // plain layout, else the layout that a conversion case feeding it converts to ("aBcd8b" for a
  // oneDNN blocked convolution, "nhwc" for an XNNPACK case); and those conversion cases' times
  // (µs, Σ where several). estimate_E charges them where a neighbour's layout differs.
  std::string in_layout, out_layout;
  double in_conversion_us = 0, out_conversion_us = 0;
  // The layout conversions estimate_E charges at this layer's inputs (µs; part of E, not of e_us).
  double e_conversion_us = 0;
  // The case E runs the layer (or its fused chain) on where its layout choice (choose_layouts) took
  // another than t(v)'s, and that case's time alone (µs); "" and 0 elsewhere. Its cases.id, the
  // system it was measured on and that system's thread count (CaseTime): its cache states' readings
  // are looked up by them (estimate_E), and the cache stage times them (layout_choice_cases).
  std::string e_case;
  double e_case_us = 0;
  int64_t e_case_id = 0, e_case_system_id = 0, e_case_threads = 0;
};

// A fusable chain and what fusing it would save (measured, or folded for Conv+BatchNormalization).
struct FusionUse {
  std::string pattern;             // "Conv+Add+Relu", "Conv+BatchNormalization(folded)"
  std::vector<int> layers;         // head first, then the absorbed layers (Layer::index)
  double unfused_us = 0;           // Σ t over those layers
  std::optional<double> fused_us;  // the fused case (the conv alone when folded); none if not measured
  std::string fused_case;          // its case name
  bool applied = false;            // counted in F (fused case measured and faster, layers not yet fused)
};

struct ReducedBound {
  std::string dtype;  // "bf16"
  std::string math_mode;
  double us = 0;
  int64_t layers_reduced = 0;                                // layers with a passed case in this math mode
  int64_t layers_kept = 0;                                   // layers that keep their base time
  std::map<std::string, std::pair<double, double>> by_kind;  // kind → (base µs, this mode's µs)
};

struct FrameworkTime {
  std::string runtime;   // "pytorch"
  std::string settings;  // "eager"
  std::string runtime_version;
  int64_t threads = 0;
  double us = 0;
};

// Layers off the critical path, grouped by where their branch leaves it: what could run
// concurrently with the critical path.
struct Branch {
  int fork = -1;  // Layer::index of the critical-path layer the branch starts from; -1: graph inputs
  std::string fork_name;
  double us = 0;  // Σ t over the branch's layers
  int64_t layers = 0;
};

// One layer of the replay: its time inside the replayed graph against its case's time alone.
struct ReplayLayerTime {
  std::string layer;     // ONNX node name
  std::string op;        // ONNX op type
  double replay_us = 0;  // lowest of the replay's profile passes, the call timed inside the graph (µs)
  double case_us = 0;    // its chosen case's time alone: the layer's share of S (µs)
};

struct ModelBounds {
  std::string model;
  int64_t batch = 1;
  std::string dtype = "f32";
  std::string math_mode = "fp32";
  int64_t system_id = 0;
  std::vector<LayerCost> layers;  // cost-bearing layers, in topological order
  int64_t view_layers = 0, host_layers = 0;
  double S = 0, P = 0, H = 0, F = 0;
  // S over vendor libraries only; vendor_roofline_layers: measured layers it costs by roofline
  // because only Floorline's own kernels ran them (vendor_untimed_layers: with no roofline either,
  // S_vendor is then incomplete).
  double S_vendor = 0;
  int64_t vendor_roofline_layers = 0, vendor_untimed_layers = 0;
  // 95% bootstrap intervals of S, P and F over the best cases' repetitions (confidence_intervals);
  // none when no best case has samples.
  std::optional<Interval> S_ci, P_ci, F_ci;
  std::optional<double> R;       // none without calibrated peaks
  std::optional<double> M;       // fastest framework latency, when imported
  std::optional<double> replay;  // replay of the best cases on this system (µs), when run
  // The replay at the host's state when S's cases were timed (µs; Replay::paired_us): what the
  // graph costs over its cases, without what a loaded host added to the pass. Not a bound either.
  std::optional<double> replay_paired;
  // E, the composed estimate (estimate_E, docs/ANALYZER.md "The estimate E"): Σ e(v), with t(v) for
  // a layer without e(v). Never a bound. None where no layer has a cache time. E_memory_share: the
  // share of the weights it takes from memory rather than the last-level cache (memory_share);
  // E_layers: the layers with an e(v).
  std::optional<double> E;
  double E_memory_share = 0;
  // What E's layers take beyond their weights' term for the activations a pass reads and writes
  // beyond the private cache (µs; estimate_E, activation_traffic).
  double E_activations_us = 0;
  int64_t E_layers = 0;
  // The layout conversions E counts between the chosen cases (estimate_E): how many, and their time.
  int64_t E_conversions = 0;
  double E_conversions_us = 0;
  // The layers E runs on another case than t(v)'s for its layouts (choose_layouts).
  int64_t E_alternatives = 0;
  std::string replay_note;                      // how the replay was wired (layers, conversions, missing)
  std::optional<double> replay_conversions_us;  // time the replay spent in layout conversions
  int64_t replay_conversions = 0;
  std::vector<ReplayLayerTime> replay_layers;  // per-layer replay times, when the replay recorded them
  std::vector<FrameworkTime> framework;        // every imported framework latency
  std::vector<ReducedBound> reduced;
  std::vector<int> critical_path;  // Layer::index, source to sink (cost-bearing and view)
  std::vector<Branch> branches;    // off-critical-path work by fork, largest first
  std::vector<FusionUse> fusions;
  double conversions_us = 0;  // Σ conversion_us
  int64_t measured_layers = 0, roofline_layers = 0, untimed_layers = 0, heuristic_missing = 0;
  double measured_fraction = 0;        // share of S that rests on measured cases (1 when S is 0)
  bool complete = true;                // every cost-bearing layer has a time (measured or roofline)
  std::string peaks_note;              // why R or the roofline fallback is missing ("" when present)
  std::string assumption;              // mp::ModelIR::assumption: what the shapes rest on ("" when nothing)
  mp::DimValues dims;                  // mp::ModelIR::dims: the scenario's named dims
  std::optional<DecoderStep> decoder;  // a decoder's step (llm.hpp): TTFT/TPOT, tokens/s, KV cache
};

struct AnalyzeOptions {
  std::string dtype = "f32";
  bool thread_budget = true;  // load_costs: each layer's fastest over the thread counts up to the system's
  std::optional<int64_t> threads;  // choose_system: among the systems of this thread count only
};

// Every bound of `model` (one batch) on costs' system in options.dtype: layer_costs, then S, H, R,
// P with its branches, F, the reduced-precision bounds, M and the replay (bounds.hpp).
ModelBounds analyze_model(const mp::ModelIR& model, const CostTable& costs,
                          const AnalyzeOptions& options = {});

// Sets S_ci, P_ci and F_ci of each of `bounds` (analyze_model of models[i] on `costs`): `replicates`
// times, every best case's time is redrawn as the lowest of as many repetition means drawn with
// replacement from its samples, and the models are analyzed again (fixed seed: the same database
// gives the same report). The per-case time is a minimum, which resampling can only raise, so the
// interval is one-sided: lo is the bound itself, hi the 97.5th percentile of the replicates, how far
// a less lucky measurement of the same kernels would have lifted it (95% one-sided).
void confidence_intervals(const std::vector<mp::ModelIR>& models, const CostTable& costs,
                          const AnalyzeOptions& options, std::vector<ModelBounds*> bounds,
                          int replicates = 100);

}  // namespace floorline::analyzer
