// floorline/analyzer/runtime_layers.hpp — a real runtime against the bound, layer by layer (the
// per-layer M; XSP's across-stack profiling).
//
// The reference runtime's profile (benchdb framework_layer_times: each runtime node with its
// median time and the model's layers it computes, mapped by mp::read_onnxruntime_profile) is
// set against the best cases. For each runtime node, two sums over the cost-bearing layers it
// computes (view layers cost 0):
//   - best_us: Σ t(v), each layer's best unfused case (what S adds up);
//   - best_fused_us: the fastest covering of exactly those layers by measured cases, where a
//     fusable chain of F (ModelBounds::fusions: the fusion_matches F considers, with the fused case
//     F looked up) lies inside the node: its fused case replaces its layers' t(v). ≤ best_us;
//     = best_us when no measured fused case fits inside the node.
// A node faster than best_fused_us is a **bound violation**: the runtime has an implementation
// (or a fusion) that no measured case matches, which the validity rule (docs/ARCHITECTURE.md) (S ≤ every
// runtime's latency) makes a bug to chase, not a finding. A node faster than best_us but not than
// best_fused_us is a **fusion win**: the runtime fuses those layers and Floorline's measured fused
// case is as fast or faster; F already accounts for it. Both lower S's claim for that node, only
// the first says the benchmarks miss something. The nodes where the runtime loses most
// (runtime − best_us, µs) say where the runtime leaves time on the table.
// Nodes computing no layer (layout reorders) are runtime-only work; layers no node computes were
// folded or removed by the runtime at load time.
//
// Which profile: of the rows for this model, batch and dtype on this kind of device (CPU: at the
// measurements' thread count), the runtime, version and settings whose end-to-end latency
// (framework_latencies) is fastest, i.e. the M of the report; without such a latency, the first.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "floorline/analyzer/analyzer.hpp"

namespace floorline::analyzer {

struct RuntimeNodeCompare {
  int64_t order = 0;  // execution order in the runtime
  // The runtime's node name and op or kernel. Nodes that run one chain S takes at a fused case
  // (LayerCost::epilogue_head: an attention's MatMul, Softmax, MatMul) are one row: their names
  // joined by " + ", their ops by '+', their times summed.
  std::string node;
  std::string op;
  std::vector<std::string> layers;      // every model layer it computes (view layers included)
  std::vector<int> cost_layers;         // Layer::index of the cost-bearing ones among them
  std::string kinds;                    // their kinds joined by '+' ("Conv+Relu"), "" when none
  double runtime_us = 0;                // median per run
  std::optional<double> best_us;        // Σ t(v) of cost_layers; none when it has none or one is untimed
  std::vector<std::string> best_cases;  // the cases of that sum (case names, in layer order)
  std::optional<double> best_fused_us;  // the fastest covering by measured cases, fused where F has a
                                        // fused case inside the node; none exactly when best_us is none
  std::vector<std::string> best_fused_cases;  // its cases in layer order (a fused case once, at its head)
  std::vector<std::string> fusions;           // the fused chains it uses ("Conv+Relu"), in layer order
  // The activations among its layers that S counts in their producer's epilogue ("Relu"; bounds.hpp,
  // layer_costs): best_us already holds their fused case.
  std::vector<std::string> epilogues;
  std::optional<double> ratio() const {  // runtime / best (unfused)
    if (!best_us || *best_us <= 0) return std::nullopt;
    return runtime_us / *best_us;
  }
  std::optional<double> fused_ratio() const {  // runtime / best_fused
    if (!best_fused_us || *best_fused_us <= 0) return std::nullopt;
    return runtime_us / *best_fused_us;
  }
  // Faster than the best unfused cases: a violation or a fusion win.
  bool below_unfused() const { return best_us && runtime_us < *best_us; }
  // Faster than every covering by measured cases, fused ones included.
  bool violation() const { return best_fused_us && runtime_us < *best_fused_us; }
  // Faster than the unfused cases, not than the measured fused ones (F accounts for it).
  bool fusion_win() const { return below_unfused() && !violation(); }
};

struct RuntimeComparison {
  std::string runtime, runtime_version, settings;
  int64_t threads = 0;
  std::vector<RuntimeNodeCompare> nodes;  // in execution order
  double runtime_us = 0;                  // Σ over nodes
  double compared_runtime_us = 0;         // Σ over nodes with a best_us
  double compared_best_us = 0;            // Σ best_us over those nodes
  double compared_best_fused_us = 0;      // Σ best_fused_us over those nodes
  double runtime_only_us = 0;             // Σ over nodes computing no layer (reorders)
  int64_t layers_not_run = 0;             // cost-bearing layers no runtime node computes
  std::vector<size_t> violations;   // indices into nodes: violation(), largest (best_fused − runtime) first
  std::vector<size_t> fusion_wins;  // indices into nodes: fusion_win(), largest (best − runtime) first
  std::vector<size_t> losses;       // indices into nodes: runtime > best, largest (runtime − best) first
};

// The comparison for one analyzed model, or none when no profile of it was imported
// (costs.layer_times).
std::optional<RuntimeComparison> compare_runtime_layers(const ModelBounds& bounds, const CostTable& costs);

// The comparison with the profile of one runtime identity (runtime, version, settings, threads: a
// framework_latencies row's), or none when that identity has no profile of this model, batch and
// dtype. The validity check (validity.hpp) takes the layers responsible for a latency below S from it.
std::optional<RuntimeComparison> compare_runtime_profile(const ModelBounds& bounds, const CostTable& costs,
                                                         const std::string& runtime,
                                                         const std::string& runtime_version,
                                                         const std::string& settings, int64_t threads);

// Report pieces (report.cpp and html.cpp call these for each model that has a comparison).
// Table: a few lines, the top `top` violations, fusion wins and losses.
std::string runtime_layers_table(const ModelBounds& bounds, const RuntimeComparison& c, size_t top);
// JSON: the totals ("compared_best_us": Σ best_us, "compared_best_fused_us") and every node
// ({"node", "op", "layers", "kinds", "runtime_us", "best_us", "ratio", "best_cases",
// "best_fused_us", "fused_ratio", "best_fused_cases", "fusions", "violation", "fusion_win"}), with
// "violations", "fusion_wins" and "losses" as node orders. "best_us", "ratio" and "best_cases" are
// the unfused sum as before; "violation" (and the "violations" list) is runtime < best_fused_us,
// so a node flagged before this split is now either a violation or a fusion win.
nlohmann::json runtime_layers_json(const RuntimeComparison& c);
// HTML: a <section> with the totals, every violation, every fusion win and the top losses, then
// every runtime node in a <details> table.
std::string runtime_layers_html(const ModelBounds& bounds, const RuntimeComparison& c);

}  // namespace floorline::analyzer
