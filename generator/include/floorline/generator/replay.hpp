// floorline/generator/replay.hpp — a model's chosen cases executed back to back, as the graph runs.
//
// The sequential bound S adds up cases timed alone, each on its own warm buffers. Replay checks
// how tight that is: it builds one kernel per cost-bearing layer (the layer's chosen case, usually
// its config's best), in topological order, and wires them as the graph is. A layer reads the
// buffer its producer wrote when the two agree on the layout (both plain, or the same blocked
// format: a oneDNN-aware framework keeps blocked layouts between layers); where they differ, a
// layout conversion (a reorder) runs before the consumer, once per value and layout (later
// readers share the converted copy), and is part of the replay's time. View
// layers (Reshape, Flatten, Squeeze...) pass their input's buffer on. Graph inputs, weights and
// the outputs of layers not replayed (no chosen case) stay the consumer's own random buffers.
// Outputs are written into buffers from a pool, as a framework's memory planner does: a buffer
// returns to the pool once the last layer that reads it has run, and the next output of the same
// size reuses it (so activations stay warm in cache as they would in a framework).
//
// Timing: warm-up passes for warmup_seconds (at least one), then `repetitions` repetitions (fewer
// for a long pass: ReplayOptions::long_pass) of enough whole passes to last min_time each; a repetition's
// time is its mean pass time (µs, steady clock; each kernel's run() waits for completion). The replay's time
// compared with S is the lowest repetition mean (min_us), the statistic S takes of each case
// (docs/MEASUREMENT.md): the two sides of replay / S are the same statistic, so the ratio compares kernels,
// not luck. The median is kept too. Then `profile_passes` passes time every step on its own (lowest of them),
// to show where replay and S differ.
//
// Re-timing after a replay (docs/MEASUREMENT.md, "Re-timing after the replay"): S adds each case's lowest
// repetition mean; a replay below S (or close to it) means some cases were measured while the
// machine was slower than it is now: a slowdown sustained over all of a case's passes, which the
// sentinel cannot see (it compares the machine with itself during the same run). Those cases are
// timed again right after the replay, with the run's method, and the lower of the two measurements
// is kept (benchdb WriterOptions::keep_lower): S can only go down, and only to a time the same
// kernel achieved alone.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/common/result.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::gen {

// The case replay builds for each layer of a config, and its own time as S takes it (µs: its lowest
// repetition mean, best_measurements.min_us).
struct ChosenCase {
  kernels::CaseSpec spec;
  double us = 0;
  int threads = 1;  // the thread count it was timed at (its system's): replay runs it at that count
};

// `spec` as S's case is built outside the bench (the replay, the cache stage): its own buffers
// (weights, a library's packed or reordered copies, a scratchpad) placed as the bench placed them,
// placement 0 on huge pages where `huge_pages` (kernels/buffer.hpp). A plan's spec carries the
// default placement, 4 KiB pages: on the 2-core EPYC VM a stream from memory ran at half its huge
// pages' speed there (docs/MEASUREMENT.md, "Huge pages").
kernels::CaseSpec placed_as_benched(kernels::CaseSpec spec, bool huge_pages);

// Config key → the config's best passed unfused case of `dtype` (in its own math mode: strict
// fp32 for f32) on `system_id`, from best_measurements, with its spec from `plan` (matched by case name;
// a best case the plan no longer has is left out).
// With `thread_budget`, the fastest over the systems of the thread budget of `system_id`
// (Database::thread_budget: the same host at fewer threads), as the analyzer's S takes it.
Result<std::map<std::string, ChosenCase>> best_cases(benchdb::Database& db, int64_t system_id,
                                                     const Plan& plan, DType dtype,
                                                     bool thread_budget = true);

// (head config key, fusion name) → the config's best passed fused case of `dtype` (fusion as in
// mp::fusion_name: "Relu", "Clip(0,6)", "Add+Relu"), as best_cases takes the unfused ones.
using FusedChoices = std::map<std::pair<std::string, std::string>, ChosenCase>;
Result<FusedChoices> best_fused_cases(benchdb::Database& db, int64_t system_id, const Plan& plan, DType dtype,
                                      bool thread_budget = true);

// (config key, fusion) → every passed case of `dtype` of the config with that fusion ("" unfused;
// as best_cases and best_fused_cases take them, the layout-conversion cases left out), fastest
// first: the alternatives replay may run a layer (or an activation epilogue's head) with where its
// best case's layout would cost conversions (replay_model).
using CaseAlternatives = std::map<std::pair<std::string, std::string>, std::vector<ChosenCase>>;
Result<CaseAlternatives> passed_cases(benchdb::Database& db, int64_t system_id, const Plan& plan, DType dtype,
                                      bool thread_budget = true);

struct ReplayOptions {
  int repetitions = 5;
  double min_time = 0.05;  // seconds per repetition (whole passes)
  double warmup_seconds = 0.02;
  int threads = 1;
  // The thread counts a layout conversion is built and timed at (gen::budget_thread_counts of the
  // run's budget); it runs at the fastest (ReplayStep::threads, alone_us). Empty: at its consumer
  // case's count.
  std::vector<int> conversion_threads;
  // Profile passes: at least profile_passes, more up to profile_seconds (pairs included) and at
  // most kMaxProfilePasses: a short model gets more pairs, whose median is then steadier.
  int profile_passes = 5;
  double profile_seconds = 0.3;
  static constexpr double kMaxProfilePasses = 50;
  // A pass of long_pass seconds or more (its warm-up's mean) gets long_repetitions repetitions and
  // long_profile_passes profile passes at most: such passes agree (the zoo's five models of 0.1 s or
  // more at batch 1 on the Zen 4 EPYC: the median repetition within 2% of the lowest), and the big
  // models' passes were most of the stage's time (21 passes each with the defaults, 13 so). 0: no
  // such limit.
  double long_pass = 0.1;
  int long_repetitions = 3;
  int long_profile_passes = 3;
  // Each profile pass paired with its layer steps alone (ReplayResult::paired_ratio): two more
  // calls per layer step and pass.
  bool paired = true;
  // Layout-aware choice (replay_model): a layer may run another passed case of its config, up to
  // `layout_slack` × its best case's time, where that saves more in layout conversions; at most
  // `layout_candidates` cases per layer are considered (the fastest). 1 or less: every layer runs
  // its best case.
  double layout_slack = 1.5;
  int layout_candidates = 6;
  int64_t l2_bytes = 0;  // a core's L2 cache for name_slow_steps; 0: the machine's (cache_sizes)
  // Denormals flushed to zero (FTZ and DAZ) on the calling thread and the OpenMP pool while the
  // timed passes run: a guard. The cases' weights are at their fan-in's scale
  // (kernels::fill_half_width), so their outputs stay normal, and the data check (denormal_steps)
  // says where they do not; the weights in [-1, 1) they had before drove softmax and sigmoid
  // outputs into the denormal range and convolutions into overflow.
  bool flush_denormals = true;
  bool huge_pages = true;  // the output buffers on transparent huge pages, as the bench's (RunOptions)
  // The model's replay stops (an error: the run goes on with the next model) when, after building
  // a step, the machine has less memory available than this (bytes; MemAvailable): every step's case
  // holds its weights and scratchpad, and a large model at a large batch can need more than the
  // machine has.
  int64_t min_available_bytes = int64_t{2} << 30;
  // The sentinel (measurement.hpp), read after each timed repetition as the bench reads it between
  // visits (seconds per reading; empty: none): a repetition after which it reads above
  // sentinel_slow_factor × its lowest reading (SlowdownDetector) was timed while the machine was
  // slowed and is timed again, at most `repetitions` more times in all (ReplayResult::
  // slowed_repetitions). S's cases are judged so; without it a busy host's replay / S reads high
  // for the host's sake. The workers of the step before are parked while it runs. The CPU replay's
  // is gen::Sentinel at the run's threads, a device backend's its Backend::sentinel().
  std::function<double()> sentinel;
  double sentinel_slow_factor = 1.15;
};

// One step of a replay, timed inside the graph (profile passes, each call timed alone).
struct ReplayStep {
  std::string label;  // "name (op)", or "conversion <from> > <to> for name (op)"
  bool conversion = false;
  double in_graph_us = 0;         // lowest over the profile passes
  double in_graph_median_us = 0;  // their median (Σ over the steps, against the pass's median time,
                                  // separates the passes' spread from the time between steps)
  double alone_us = 0;            // the case's own time as S takes it; a conversion's, timed at its build
  std::string layer;              // the layer's ONNX node name ("" for a conversion)
  std::string op;                 // its ONNX op type ("" for a conversion)
  std::string key;                // its config key, as in the chosen cases ("" for a conversion)
  int threads = 1;                // the thread count it ran at (its case's, within the thread budget)
  std::string backend;            // the backend whose kernel ran it (a conversion: the one that built it)
  // The activation this step's fused case applies in its epilogue ("Relu"; "" for an unfused
  // case): the activation's layer is then no step of its own (replay_model, `epilogues`).
  std::string fusion;
  // The case that ran ("" for a conversion): the layer's best case, or the alternative the
  // layout-aware choice took (`alternative`).
  std::string case_name;
  bool alternative = false;
  // The time S takes for the layer (µs): its best case's, or its best fused case's for an
  // activation epilogue's head; alone_us where the step ran that case. Σ over the steps is cases_us.
  double best_us = 0;
  // What the step touches (bytes): the values it reads from earlier steps (the step that wrote
  // each, an index into ReplayResult::steps), its own operands (weights and constants, a graph
  // input), what it writes, and its scratchpad.
  std::vector<std::pair<size_t, int64_t>> reads;
  int64_t own_bytes = 0, written_bytes = 0, workspace_bytes = 0;
  // The buffers it writes (an identity, and bytes): a pooled buffer other steps wrote and read
  // before (the memory planner's reuse), or a conversion's own.
  std::vector<std::pair<uint64_t, int64_t>> writes;
  // Why a layer step took longer in the graph than alone, slow or not, where name_slow_steps finds
  // a cause ("cold weights 2.4 MB; cold input 3.2 MB"): what its excess over its time alone is
  // charged to where the replay's time beyond S is broken down (bench/replay_breakdown.py); "" where
  // it found none or the step is not slower.
  std::string excess_cause;
  // The data check (ReplayResult::denormal_steps): of the f32 values this step wrote in the check's
  // pass, how many were denormal (nonzero, below FLT_MIN in magnitude) and how many infinite or NaN.
  int64_t denormals = 0, nonfinite = 0;
  // Its case alone in the same moments as the profile passes (ReplayOptions::paired): the lowest
  // over the pairs of one call, timed right after a call that warms it; 0 for a conversion and
  // where not paired.
  double alone_now_us = 0;
  // The probe of a slow step no cause was found for in what it touches (name_slow_steps): the
  // step right after the step before it in the pass (both run as a pair, the lowest of
  // kAfterPreviousPairs), µs; 0 where not probed (every other step, the first step, no pairs).
  double after_previous_us = 0;
  // A layer that ran faster in the graph than its case alone: its case was timed slow (replay.hpp,
  // re-timing).
  bool beaten() const { return !conversion && in_graph_us < alone_us; }
  bool slow() const;
  // Why the step took over kSlowStep × its time alone in the graph: its excess_cause where it is
  // slow, else "".
  std::string cause() const { return slow() ? excess_cause : std::string(); }
};

// A layer step is slow when it takes over this × its case's time alone in the graph.
inline constexpr double kSlowStep = 1.5;
// Against its case alone in the same moments where paired (the host's load is then on both
// sides), else against the case's time as S takes it.
inline bool ReplayStep::slow() const {
  const double alone = alone_now_us > 0 ? alone_now_us : alone_us;
  return !conversion && alone > 0 && in_graph_us > kSlowStep * alone;
}

struct ReplayResult {
  std::string model;
  int64_t batch = 1;
  double median_us = 0, min_us = 0, max_us = 0, stddev_us = 0;  // over repetitions, per pass
  int repetitions = 0;
  int slowed_repetitions = 0;  // repetitions timed again because the sentinel read them slowed
  int64_t passes = 0;          // whole passes timed in all
  double cases_us = 0;         // Σ chosen-case times of the replayed layers (S over them)
  int layers_replayed = 0;
  int layers_missing = 0;      // cost-bearing layers with no chosen case (not replayed)
  int operands_shared = 0;     // inputs read straight from the producer's buffer
  int conversions = 0;         // layout conversions inserted between producer and consumer
  int operands_unwired = 0;    // activation inputs read from the consumer's own buffer
  int64_t buffers = 0;         // output buffers the memory planner allocated
  int64_t buffers_reused = 0;  // outputs written into a buffer an earlier layer had freed
  // Layers the layout-aware choice ran with another case than their best (and Σ of those cases'
  // times over the best ones', µs); the conversions it expected before and after the choice.
  int alternatives = 0;
  double alternatives_us = 0;
  int conversions_expected_before = 0, conversions_expected_after = 0;
  int workspaces_shared = 0;    // cases whose scratchpad is the replay's one shared workspace
  int64_t workspace_bytes = 0;  // the shared workspace's size (the largest case's scratchpad)
  // The layer steps' own operands (weights, constants, unwired inputs) of at least
  // kernels::kHugePageMinBytes through their ports, bytes, and those of them on mappings advised
  // huge pages (kernels::huge_page_advised_ranges): all of them where the run asks for huge pages
  // (ReplayOptions::huge_pages) and the system allows them, as the bench placed the cases alone.
  int64_t own_large_bytes = 0, own_huge_advised_bytes = 0;
  // Bytes of the steps' own buffers given back to the system once each step was wired
  // (kernels::release_pages, Kernel::release_unused_buffers): its ports' former buffers, now
  // another step's or the pool's, and what else run() no longer touches (oneDNN's plain copies).
  // Without it every step kept a second copy of each activation it reads and writes: fcn_resnet50
  // at batch 8 took 24 GB.
  int64_t released_bytes = 0;
  // Layer steps over kSlowStep × their time alone, and those name_slow_steps names no cause for.
  int slow_steps = 0, slow_unexplained = 0;
  // Profile passes (each step timed alone, after the timed repetitions): where the pass time goes.
  double layers_us = 0;        // Σ in-graph times of the layers' cases
  double conversions_us = 0;   // Σ in-graph times of the conversions
  double steps_median_us = 0;  // Σ over every step of its median profile-pass time
  // The paired measure (ReplayOptions::paired): each profile pass against its layer steps alone,
  // timed right after it. paired_ratio is the median over the pairs of (the pass, conversions
  // included) / (Σ its layer steps alone): what the graph costs beyond its cases, with the host's
  // load on both sides. steps_alone_us is Σ the layer steps' alone_us (S's times of the cases that
  // ran), alone_now_us Σ their alone_now_us: over steps_alone_us, how much slower the host ran
  // than when the cases were timed.
  double paired_ratio = 0;
  int pairs = 0;
  double steps_alone_us = 0, alone_now_us = 0;
  // The data check: one pass before the timed ones, with denormals as the hardware makes them
  // (whatever flush_denormals says), each layer's f32 outputs scanned after it runs. Layers that
  // wrote denormal values, and layers that wrote infinities or NaNs. Both 0 on data that behaves
  // as a trained model's (weights at their fan-in's scale, kernels::fill_half_width); otherwise
  // the replay's time may differ from S for the data's sake (denormal arithmetic is slow on x86,
  // flushed zeros fast), not the kernels'.
  int denormal_steps = 0, nonfinite_steps = 0;
  // The second look's lowest repetition mean (µs; take_second_look), 0 where none was taken: min_us
  // is the lower of it and the first replay's.
  double second_look_us = 0;
  std::vector<ReplayStep> steps;  // every step, in pass order
  // replay / S: the lowest repetition mean over S, the same statistic on both sides.
  double ratio() const { return cases_us > 0 ? min_us / cases_us : 0; }
  // The replay at the host's state when its cases were timed (µs): steps_alone_us × paired_ratio;
  // 0 where not paired. Beside min_us on a loaded host (a VM whose neighbours take its cores for
  // tens of milliseconds: docs/MEASUREMENT.md, "The paired replay"), it says what the graph costs
  // without what the host's load added to the pass.
  double paired_us() const { return paired_ratio > 0 ? steps_alone_us * paired_ratio : 0; }
  // How much slower the host ran during the paired profile passes than when the replayed cases
  // were timed: Σ alone_now_us / Σ alone_us over the layer steps (1 = as then); 0 where not paired.
  double host_slowdown() const {
    return steps_alone_us > 0 && alone_now_us > 0 ? alone_now_us / steps_alone_us : 0;
  }
};

// The replay's second look. S's cases are each the lowest of passes taken minutes apart: a moment
// of the host's load costs a case one pass, not its time. A replay is timed in one burst of
// seconds, which such a moment can cover whole. The paired figure (paired_us: the graph at the
// host's state when S was timed, from pairs taken after the timed repetitions) says what the
// replay would have read without it: a replay over kSecondLook × its paired figure was timed while
// the host was slower than when S was (the same kernels, the same data: only the host differs), so
// `floorline run` replays it once more after every other model's replay and keeps the lower of the
// two. The replay, like its cases, gets two moments of the host. Measured on the 2-core EPYC VM
// (the sweeps at 6f62c83 and before, 18 models at batch 1 and 8): the six replays above 1.5 × S
// read 1.14-2.19 × their paired figures (gru_kws at batch 8 on 2 threads: 2.26 × S, paired 1.03),
// the others 0.90-1.39 (docs/MEASUREMENT.md, "The second look"). Never for a replay without pairs
// (`--quick`).
inline constexpr double kSecondLook = 1.1;
inline bool wants_second_look(const ReplayResult& r) {
  return r.pairs > 0 && r.paired_us() > 0 && r.min_us > kSecondLook * r.paired_us();
}
// The second look's replay options: `first`'s timed repetitions, without the pairs and with one
// profile pass (the first replay's profile stands; the second look is only its time).
ReplayOptions second_look_options(const ReplayOptions& first);
// Folds a second look into the first replay: `first`'s time (min_us, median_us, max_us, stddev_us,
// repetitions) becomes the second's where that is lower, its profile (steps, pairs) stays;
// second_look_us is set either way, and passes and slowed_repetitions add up. A second look with
// other case times (a re-timing in between) rebases nothing: the caller's rebase does. Returns
// whether the second was lower.
bool take_second_look(ReplayResult& first, const ReplayResult& second);

// Replays one model (one batch) on `backend`: each layer's case is built by the backend that
// planned it (`backend` itself, or the registry's backend of that name: a model's best cases may
// come from several CPU libraries), at the thread count its case was timed at (ChosenCase::threads;
// options.threads where 0). Values move between cases of two libraries where one of them converts (XNNPACK:
// between its NHWC ports and plain ones); an operand no backend converts is read from the consumer's own
// buffer (operands_unwired). Every case that can (Kernel::share_workspace) runs on one shared
// scratchpad of the largest case's size, as a framework's workspace arena: a case's scratchpad is
// then as warm in the graph as alone (measured: densenet121's Winograd 3x3 convolutions, 2.5-9 MB of
// scratchpad each, ran 2x their time alone on scratchpads of their own). Error when no layer has a
// chosen case, when a kernel cannot be built, or when a pass throws (the library's message, naming
// the layer).
// With `epilogues`, an activation that is the sole reader of a Conv/ConvTranspose/Gemm/MatMul's output
// (an mp::fusion_matches chain of one activation) runs in that layer's fused case where the fused
// case is faster than the two chosen cases, as the analyzer's S counts it (docs/ANALYZER.md, "The
// activation epilogue"): one step, its alone_us the fused case's time, and the activation's output
// is the fused case's.
//
// With `alternatives` (passed_cases), the cases are chosen for the graph as a runtime that knows
// each implementation's layouts would (oneDNN's "any" format, ORT's layout transformer): every layer
// starts with its best case; then, layer by layer in a few sweeps, each takes the candidate (its
// best and the next fastest within options.layout_slack) that makes the whole pass cheapest by an
// estimate: Σ the cases' times alone plus each conversion they need at kConversionBytesPerUs
// (element-wise layers keeping their input's layout as below). S is unchanged (each layer's best);
// the steps say which layers ran another case (ReplayStep::alternative).
Result<ReplayResult> replay_model(const mp::ModelIR& model, const std::map<std::string, ChosenCase>& chosen,
                                  const Backend& backend, const ReplayOptions& options,
                                  const FusedChoices& epilogues = {},
                                  const CaseAlternatives& alternatives = {});

// Denormal values (nonzero, magnitude below FLT_MIN) and non-finite ones (infinities, NaN) among
// x[0..n).
struct DataCount {
  int64_t denormals = 0, nonfinite = 0;
  DataCount& operator+=(const DataCount& o) {
    denormals += o.denormals;
    nonfinite += o.nonfinite;
    return *this;
  }
};
DataCount count_abnormal(const float* x, int64_t n);

// The rate the layout-aware choice costs a conversion at: bytes of the converted tensor per µs.
// Measured: conversions of 0.4-1.6 MB tensors inside the replays of densenet121 and efficientnet_b0
// (2-core Xeon, 2026-11-27) ran at 8.8-11 GB/s, as they read a tensor that has left the cache.
inline constexpr double kConversionBytesPerUs = 1.0e4;

// The layout-aware choice replay_model makes with `alternatives`, exposed for its tests.
namespace layout_choice {

// A port as the choice sees it: the layout and size of the buffer a case reads or writes
// (kernels::Port without its data).
struct PortSig {
  std::string layout;
  int64_t bytes = 0;
};
// A case's ports: per input operand, and per output (in the order of the layer's non-empty output
// names); nullopt where the case cannot be wired there.
struct CaseSig {
  std::vector<std::optional<PortSig>> in, out;
};

// One cost-bearing layer: its candidates (the first its best case, or its fused case) with their
// ports, and the one taken (an index into both).
struct LayerChoice {
  std::vector<const ChosenCase*> cases;
  std::vector<const CaseSig*> sigs;
  size_t taken = 0;
};

// The layers in pass order: a cost-bearing one with its choice (an index into the choices), or
// one whose output is its first input's buffer (a view, an activation its producer's fused case
// applies): choice -1.
struct WalkItem {
  const mp::Layer* layer = nullptr;
  int choice = -1;
};

// The estimated time of one pass with the choices taken (µs): Σ the cases' times alone and the
// conversions replay_model inserts between them, each at its tensor's bytes / kConversionBytesPerUs
// (a value converted once per layout; an element-wise layer keeping its first blocked input's
// layout, its other inputs converted to it); `conversions` counts them. A graph input has no layout
// (a case reads its own buffer there).
double estimate_pass(const std::vector<WalkItem>& walk, const std::vector<LayerChoice>& choices,
                     int& conversions);

// Coordinate descent on estimate_pass: layer by layer, in sweeps until none changes (at most 4),
// each choice takes the candidate that lowers the estimate most, the others held; from the choices
// as given (every layer's best case), and again from each layout family (aBcd8b, aBcd16b, NHWC)
// with every layer that has a case in it taking it (a chain of data-movement layers is cheaper all
// blocked or all plain, and one layer's change alone never is), the lowest estimate kept. Returns
// the estimate's conversions before and after.
std::pair<int, int> choose_for_layouts(const std::vector<WalkItem>& walk, std::vector<LayerChoice>& choices);

}  // namespace layout_choice

// Names the causes of the slow steps of a replay (ReplayStep::slow), from what each step touches
// and a core's L2 cache (`l2_bytes`; a step on T threads has T cores' L2), the rest of the memory
// hierarchy taken as slower than L2 (a case alone, repeated, finds its operands in L2 wherever they
// fit). A step's causes, any of:
//   "cold weights N MB": its own operands (at least 64 KiB) were evicted since the pass before: the
//       bytes the other steps of a pass touch (Σ of their reads, own operands and writes; the
//       shared scratchpad once) and its own exceed its L2;
//   "cold input N MB": a value it reads (at least 64 KiB) was written by a step so far back that the
//       bytes touched in between and the value's exceed its L2;
//   "cold output N MB": a buffer it writes (at least 64 KiB) was last touched (written or read, in
//       this pass or, for a buffer only it uses, in the pass before) so far back: its lines come
//       from beyond L2 before they are written, where alone they stay in L2;
//   "thread switch A>B": the step before ran at another thread count (the workers' wake-up, or the
//       cores an idle team still spins on, are in the step);
//   "short step": its case alone takes under 5 µs (the per-call costs of a library and the per-step
//       clock weigh as much as the work).
// A slow step with none of these, where the replay probed it (ReplayStep::after_previous_us), gets
// what the probe measured:
//   "after <step>: N us": run right after the step before it, it is slow too (over kSlowStep × its
//       time alone): what that step leaves (its output in the caches of the cores that wrote it,
//       its workers, the lines it dirtied) is in this step's time;
//   "the pass before it: N us after <step>": right after the step before it, it is not slow: the
//       state the pass leaves (operands evicted by earlier steps, the L3 shared between the
//       cores) is.
// Sets excess_cause on every layer step slower in the graph than alone (and so cause() on every
// slow one), and slow_steps and slow_unexplained (the slow steps with none).
void name_slow_steps(ReplayResult& r, int64_t l2_bytes);

// Pairs of (the step before, the step) per probed step (ReplayStep::after_previous_us).
inline constexpr int kAfterPreviousPairs = 5;

// The row that stores a replay (benchdb replays table): the system whose cases were replayed, the
// run that did it (when there is one), the timing, and in `makeup` a JSON object of the replay's
// make-up: layers, layers_us, cases_us, conversions, conversions_us, steps_median_us,
// operands_shared, layers_missing, operands_unwired, buffers, buffers_reused, and layer_times: per
// replayed layer {layer, op, fusion, replay_us (its lowest profile-pass time in the graph),
// replay_median_us (their median), case_us (its case's time, its share of S), threads, alternative,
// cause, excess_cause}, in pass order.
benchdb::ReplayRow replay_row(const ReplayResult& r, int64_t system_id, std::optional<int64_t> run_id,
                              const std::string& dtype);

// The cases to time again after replay `r`: none when r.ratio() is at least `below` (or r has no
// S); else the chosen cases of the layers that ran faster in the graph than alone (in_graph_us below
// alone_us), or, when no single layer did and the replay is below S itself (ratio under 1), the
// chosen case of every replayed layer; with `every`, that whenever the ratio is under `below`. An
// epilogue's step names its fused case (S's time for the chain). Case names, each once, in pass
// order.
std::vector<std::string> cases_to_retime(const ReplayResult& r,
                                         const std::map<std::string, ChosenCase>& chosen, double below,
                                         bool every = false);

// Sets each layer step's alone_us, and cases_us, from `chosen` (after a re-timing), an epilogue's
// step from `fused` (its (key, fusion) entry). A step whose key neither has keeps its time.
void rebase(ReplayResult& r, const std::map<std::string, ChosenCase>& chosen, const FusedChoices& fused = {});

struct RetimeResult {
  int rounds = 0;                                  // re-timings (retime_after_replay: up to max_rounds)
  int cases = 0;                                   // cases timed again (over all rounds)
  int lowered = 0;                                 // replayed configs whose chosen time went down
  double cases_us_before = 0, cases_us_after = 0;  // S over the replayed layers (µs)
  double seconds = 0;                              // wall time of the re-timing
  RunSummary run;                                  // the re-timing's own run
};

// Times the cases named `names` (of `plan`, `model`'s) again on their backends (of `backends`) with
// `options` (forced, keeping the lower measurement; no calibration, no progress line), then reloads
// `chosen` (best_cases of `dtype` on `system_id`) and rebases `r` on it. Error when a name is not a
// case of `plan` or its backend is not in `backends`, or when the run fails as a whole; a case
// that fails keeps its earlier measurement.
Result<RetimeResult> retime_cases(benchdb::Database& db, const mp::ModelIR& model, const Plan& plan,
                                  const std::vector<std::string>& names,
                                  const std::vector<const Backend*>& backends, RunOptions options,
                                  int64_t system_id, DType dtype, std::map<std::string, ChosenCase>& chosen,
                                  ReplayResult& r);

// What `floorline run` does after a model's replay: when cases_to_retime(r, chosen, below) names
// any, they are timed again (retime_cases); while the replay is still below S (ratio under 1) and
// some layer still runs faster in the graph than alone, again, up to `max_rounds` re-timings in all
// (each keeps the lower time, as a further placement does). Where the replay is still below S after
// them, one more round times every replayed layer's case: the layers that beat their cases are not
// always those timed slow (resnet18 at batch 8 on 2 threads on the loaded EPYC VM stayed at 0.97 × S
// after three rounds of the 15 cases that did; the host ran slower while its cases were timed than
// in the replay's quietest repetition). rounds = 0 when nothing was re-timed.
Result<RetimeResult> retime_after_replay(benchdb::Database& db, const mp::ModelIR& model, const Plan& plan,
                                         const std::vector<const Backend*>& backends,
                                         const RunOptions& options, int64_t system_id, DType dtype,
                                         std::map<std::string, ChosenCase>& chosen, ReplayResult& r,
                                         double below, int max_rounds = 3);

}  // namespace floorline::gen
