// floorline/analyzer/bounds.hpp — the bounds of one model, one function each (docs/ANALYZER.md,
// Bounds). analyze_model (analyzer.hpp) composes them; each can be called alone on a
// hand-made layer table.
//
// Times are µs of one inference of the whole batch. `dtype` is the base data type ("f32"); its
// math mode is "fp32" for f32 and the dtype's own name otherwise. `layers` is a model's
// cost-bearing layer table as layer_costs() returns it (topological order); the functions read
// LayerCost::index, us, source, heuristic_us, roofline_us, key and kind, and nothing else.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "floorline/analyzer/analyzer.hpp"

namespace floorline::analyzer {

// The roofline time of one layer: max(roofline_flops(v) / peak FLOP/s, bytes(v) / peak bytes/s) in
// µs, with the `dtype` peaks of costs.peaks (bytes, counted in f32 by the model processor, halved
// for a 2-byte dtype). nullopt without both peaks or when the layer's shapes are unknown. A quantized
// layer (mp::quantized_config: a QDQ model's int8 layers, QuantizeLinear, DequantizeLinear) uses the
// int8 peaks where calibrated, else the `dtype` ones, and its own (int8) bytes.
std::optional<double> roofline_time(const mp::Layer& layer, const CostTable& costs, const std::string& dtype);

// --- quantization: the data type a layer is costed in: "int8" for a quantized layer, else `base_dtype`.
std::string layer_dtype(const mp::Layer& layer, const std::string& base_dtype);

// The cost-bearing layers of `model`, in topological order, with t(v): the fastest passed unfused
// case of the config in `dtype` and its math mode (source "measured", with the layout conversions
// its implementation needs in conversion_us), else the roofline time (source "roofline"), else
// no time (source "none", us 0). A quantized layer takes its int8 case (layer_dtype): a QDQ model's
// S is the int8 model's. Also the library default's time (heuristic_us) and the roofline
// time of every layer, and preds: the cost-bearing layers each reads, looking through view layers.
// An activation that is the sole reader of a Conv/ConvTranspose/Gemm/MatMul's output (an
// mp::fusion_matches chain of that one activation) costs what the producer's measured fused case
// with it adds to the producer's t(v), fused − t(producer), where that case is faster than the two
// unfused cases (where it beats the producer's own best, the producer takes it and the activation
// costs 0) (LayerCost::epilogue_case, own_us; docs/ANALYZER.md "The activation
// epilogue"): every library and runtime runs such an activation in the producer's epilogue. With
// `in_graph_order`, only the chains the replay fuses running the layers in the model's order (a
// residual Add's summand written before the head, and read after it by the Add alone; every other
// operand of the epilogue written before the head): the layers as the replay runs them, which E
// follows (estimate_E).
std::vector<LayerCost> layer_costs(const mp::ModelIR& model, const CostTable& costs, const std::string& dtype,
                                   bool in_graph_order = false);

// S = Σ t(v) over every cost-bearing layer instance (docs/ANALYZER.md: sequential bound).
double sequential_bound(const std::vector<LayerCost>& layers);

// S_vendor = Σ vendor_us over every cost-bearing layer instance: S without Floorline's own kernels.
double vendor_sequential_bound(const std::vector<LayerCost>& layers);

// H = Σ over the layers of the library default's time (oneDNN's first implementation for format
// any; cuDNN's get_v7 first result), t(v) where the default did not pass.
double heuristic_bound(const std::vector<LayerCost>& layers);

// R = Σ roofline_us over the layers; nullopt when a layer has no roofline time (no calibrated
// peaks, unknown shapes) or there is no layer: a roofline over some layers only is no bound.
std::optional<double> roofline_bound(const std::vector<LayerCost>& layers);

// The bytes a pass over `model` keeps live across its layers, as a runtime with a memory planner
// holds them: every parameter input (floorline::parameter_input: weights, biases, normalization
// statistics; read once per pass) and the largest one layer's activations (its other inputs and
// its outputs: the pooled buffers are reused from layer to layer). Layers with unknown shapes are
// left out.
int64_t pass_footprint(const mp::ModelIR& model);
// The share of its weights a pass over `model` finds in memory rather than in the last-level cache
// when it comes back to a layer: 0 where the pass's footprint fits in `cache_bytes`, else
// 1 − cache_bytes / footprint (a cache whose replacement is not LRU keeps about that share of a
// cyclic pass over more bytes than it holds; under LRU it would keep none). E passes the caches a
// pass keeps to itself, the L2 of its cores (CostTable::private_cache_bytes), not the last-level
// cache: that one is shared with whatever else runs on the socket, other tenants' VMs on the hosts
// measured (docs/ANALYZER.md, "The estimate E").
double memory_share(const mp::ModelIR& model, int64_t cache_bytes);

// The layout conversions between the chosen cases that E counts (estimate_E calls it): the graph
// walked in order, each value a layer writes kept in the layout its case writes
// (LayerCost::out_layout), as the replay's buffers are (generator/replay.hpp). A view, and an
// activation in its producer's epilogue, pass their input's layout on. An element-wise layer whose
// case reads the plain layout (mp::layout_agnostic) runs on its first input's layout where that is
// another, its other inputs converted to it. Any other layer reads in its case's layout
// (in_layout) its first input and every input of that shape, the rest plain; a layer without a
// measured case reads and writes plain. Where a value's layout and the reader's differ, the
// conversion is charged at the reader, once per buffer and layout (a view shares its input's): into a layout,
// the reader's conversion case (in_conversion_us; for an element-wise layer, the kept layout's producer's
// out_conversion_us, a tensor of the same size); out of one, its producer's (out_conversion_us,
// the reverse's time taken as the forward's); between two layouts neither of which is plain, the
// shorter of the two (the replay reorders straight from one into the other, one pass). A graph
// input has no layout (a case reads its own buffer there, as in the replay). The replay's
// layout-aware choice (replay_model's `alternatives`) may run a layer on another of its cases,
// within kLayoutSlack × its best, to save conversions; estimate_E follows it (choose_layouts). Sets
// b.E_conversions, b.E_conversions_us and each layer's e_conversion_us.
inline constexpr double kLayoutSlack = 1.5;  // generator ReplayOptions::layout_slack's default
inline constexpr int kLayoutCandidates = 6;  // generator ReplayOptions::layout_candidates's default
// The rate the replay's layout choice costs a conversion at, bytes of the tensor per µs (generator's
// kConversionBytesPerUs): E charges it for a case no conversion case names the time of (one of
// Floorline's own layout variants, layouts_from_variant; a oneDNN case whose format no measured
// conversion writes, layouts_from_formats).
inline constexpr double kConversionBytesPerUs = 1.0e4;
void estimate_conversions(ModelBounds& b, const mp::ModelIR& model);

// The walk estimate_conversions describes, compiled once on integer value ids (choose_layouts
// evaluates it thousands of times a model; a walk by value names took seconds there). us(): the
// conversions' total (µs) for b's layers as their layouts are when it is
// called; with `conversions`, it also counts them there and adds each to its reader's
// e_conversion_us (estimate_conversions). `b` and `model` must outlive it, and b.layers keep their
// places.
class ConversionWalk {
 public:
  ConversionWalk(ModelBounds& b, const mp::ModelIR& model);
  double us(int64_t* conversions = nullptr) const;

 private:
  struct Step {
    LayerCost* cost = nullptr;     // nullptr: a view or an activation in an epilogue (`in` → `out`)
    bool agnostic = false;         // element-wise on the plain layout (mp::layout_agnostic), one output
    std::vector<int> in, out;      // value ids; -1 where a name is empty
    std::vector<char> src_shaped;  // per input: the first input's shape
  };
  std::vector<Step> steps_;
  int values_ = 0;
};

// The replay's layout-aware choice (generator/replay.hpp, layout_choice::choose_for_layouts),
// followed from the database: per layer (or fused chain), its t(v) case and the next fastest passed
// cases within kLayoutSlack × its time whose layouts (CaseLayouts: those the conversion cases
// feeding it name) differ from every faster one's, at most kLayoutCandidates
// (CostTable::passed); the choice minimizing Σ the cases' times alone + the conversions
// estimate_conversions charges between them, by coordinate descent from
// t(v)'s cases and from each layout family. Leaves each layer's layouts at its chosen case's and
// sets e_case and e_case_us where that is not t(v)'s; returns how many layers moved.
int64_t choose_layouts(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs);

// The cases E's layout choice runs `model`'s layers on in place of t(v)'s (choose_layouts on the
// layers as the replay runs them, layer_costs in graph order), as (case name, thread count) pairs:
// what the cache stage times besides S's cases (generator CacheStageOptions::also), so that E
// reads a moved layer's own cold readings. Needs no cache times; empty where nothing moves.
std::vector<std::pair<std::string, int>> layout_choice_cases(const mp::ModelIR& model, const CostTable& costs,
                                                             const std::string& dtype);

// A layer's activation traffic in a pass over its model beyond a cache of `cache_bytes` (the
// private cache, CostTable::private_cache_bytes), bytes.
struct ActivationTraffic {
  double cold_input_bytes = 0;   // its inputs other layers wrote, in the share found beyond the cache
  double output_bytes = 0;       // its outputs' bytes
  double cold_output_bytes = 0;  // of those, the share written into buffers beyond the cache
  double output_share() const { return output_bytes > 0 ? cold_output_bytes / output_bytes : 0; }
};

// Per cost-bearing layer (Layer::index; layers with neither left out), as the replay lays a pass
// out (generator/replay.cpp): values live in buffers of the replay's memory planner (an output
// takes the buffer of its exact size an earlier value held until its last reader ran, the one
// freed last, else a new one; a view and an activation in its producer's epilogue,
// LayerCost::epilogue_head, pass their input's buffer on, a residual Add there its summand's), and
// a buffer touched d bytes back (every layer between touching its inputs, weights and outputs, plus
// its own bytes; a new buffer's last touch is in the pass before, as every pass reuses the same)
// is found beyond the cache in the share 1 − C / d, 0 where d ≤ C (a cyclic pass over more than a
// cache holds keeps about C / d of it, as memory_share). An input counts from its buffer's last
// touch (its producer's write or an earlier reader's read), an output from the last touch of the
// buffer it lands in. Weights and graph inputs are not counted (memory_share takes the weights; a
// case reads a graph input where it read it alone). The replay names the same causes in the graph
// ("cold input", "cold output": generator/replay.cpp, name_slow_steps).
std::unordered_map<int, ActivationTraffic> activation_traffic(const mp::ModelIR& model,
                                                              const std::vector<LayerCost>& layers,
                                                              int64_t cache_bytes);

// E, the composed estimate of a pass over the model's graph (docs/ANALYZER.md, "The estimate E"):
// per layer, e(v) = t(v) × max(1, c / t_case), with c = (1 − m) × the lowest single call of the
// case t(v) is taken from with its weights from the last-level cache + m × from memory (the
// reading among dirty lines, "memory_dirty", where the stage took it; else the clean one)
// (costs.cache_times), m = memory_share(model, costs.private_cache_bytes), + o × what the call from
// memory with the output buffers evicted too costs over the one without ("memory_dst" − "memory",
// at least 0; none without that reading), o = activation_traffic's output share of the layer,
// and t_case that case's
// time alone (LayerCost::case_us; t(v) itself but for an activation in its producer's epilogue):
// the single calls a pass makes, never below the bound's t(v). A layer without the times it needs
// counts t(v). A layer the layout choice (choose_layouts) moves to another case takes that case's
// own readings as above where the cache stage timed it (layout_choice_cases), else its time alone ×
// its own e(v) / t(v) (E_alternatives counts them). To Σ e(v) it adds the layout
// conversions the chosen cases need
// between layers (each layer's in_layout and out_layout and their conversion cases' times: a walk
// of the graph keeping each value's layout as the replay does; E_conversions, E_conversions_us and
// each layer's e_conversion_us). A layer's e(v) is at least what its compulsory bytes take with
// its cold activation bytes (activation_traffic's cold input and output bytes, at most its compulsory bytes)
// streamed from memory at the calibrated memory bandwidth (CostTable::memory_bandwidth) and the rest at the
// calibrated cache-resident copy rate (the "bytes" peak): e(v) = max(e_w(v), cold / BW_memory +
// (bytes − cold) / BW_cache), e_w(v) the weights' term above (a layer whose arithmetic hides its
// reads keeps e_w); b.E_activations_us sums what that added (none without a calibrated memory
// bandwidth). Sets b.E (none when no layer has an e(v) or costs has no cache
// times), b.E_memory_share, b.E_activations_us, b.E_layers and each layer's e_us. Reads b.layers'
// source, us, bytes, case_id, case_system_id, case_us, epilogue_case, epilogue_head and layouts.
void estimate_E(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs);

// P and the layers that form it.
struct CriticalPath {
  double us = 0;            // P; 0 for a model with no cost-bearing or view layer
  std::vector<int> layers;  // Layer::index, source to sink (cost-bearing and view layers)
};
// P = the longest path through the layer DAG of `model` (cost-bearing and view layers, edges
// Layer::preds), each layer weighted by its t(v) in `layers` (view layers weigh 0), source and sink
// included (Benanza's code left the sink out). P ≤ S. On ties the first of a layer's preds and the
// earliest sink win.
CriticalPath critical_path(const mp::ModelIR& model, const std::vector<LayerCost>& layers);

// The work off the critical path, grouped by the critical-path layer where each layer's first
// input chain meets the path (-1: it starts from the graph inputs); branches of no time left out,
// largest first. Σ of their us = S − Σ t over the path.
std::vector<Branch> branches_off(const mp::ModelIR& model, const std::vector<LayerCost>& layers,
                                 const std::vector<int>& critical_path);

struct FusedBound {
  double us = 0;                   // F
  std::vector<FusionUse> fusions;  // every fusable chain whose layers all have a time, in layer order
};
// F = S with fusable chains (mp::fusion_matches) replaced by their measured fused case from
// costs.best (fusion = the match's name, `dtype`, its math mode) where that is faster than the
// chain's Σ t(v); Conv → BatchNormalization costs the conv alone when the conv is measured (the BN
// folds into its weights). Largest saving first; a layer is fused at most once.
FusedBound fused_bound(const mp::ModelIR& model, const std::vector<LayerCost>& layers, const CostTable& costs,
                       const std::string& dtype);

// S_m for every (dtype, math mode) of costs.modes other than the base: S with t(v) from that
// mode's best unfused case where the config has one; the other layers keep their base time.
std::vector<ReducedBound> reduced_precision_bounds(const std::vector<LayerCost>& layers,
                                                   const CostTable& costs, const std::string& dtype);

struct MeasuredLatency {
  std::optional<double> us;              // M: the fastest of `framework`; none when nothing was imported
  std::vector<FrameworkTime> framework;  // in costs.framework's order
};
// M: the imported framework latencies (costs.framework: already of this kind of device) of this
// model, batch and dtype (the replay has its own table and is never M); on a CPU only those at
// the measurements' thread count (or with no thread count recorded).
MeasuredLatency measured_latency(const CostTable& costs, const std::string& model, int64_t batch,
                                 const std::string& dtype);

struct Replay {
  std::optional<double> us;              // lowest repetition mean per pass (the median for rows without a
                                         // minimum); none when not run on this system
  std::string note;                      // how it was wired (or the row's source text as is)
  std::optional<double> conversions_us;  // time spent in layout conversions, when recorded
  int64_t conversions = 0;
  // The replay at the host's state when its cases were timed (generator ReplayResult::paired_us:
  // its cases' times × the pass over its layers alone in the same moments), when recorded.
  std::optional<double> paired_us;
  std::vector<ReplayLayerTime> layer_times;  // per replayed layer, when recorded (make-up layer_times)
};
// Not a bound: Floorline's replay of this model, batch and dtype on costs' system (costs.replays,
// from the replays table). Its make-up is generator::replay_row's JSON, or plain text.
Replay replay_of(const CostTable& costs, const std::string& model, int64_t batch, const std::string& dtype);

}  // namespace floorline::analyzer
