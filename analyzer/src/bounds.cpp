// The bounds of one model, one function each (bounds.hpp), and analyze_model composing them.
#include "floorline/analyzer/bounds.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/llm.hpp"
#include "floorline/model_processor/patterns.hpp"
#include "math_mode.hpp"

namespace floorline::analyzer {

namespace {

// Layer::index → position in `layers`.
std::unordered_map<int, size_t> positions(const std::vector<LayerCost>& layers) {
  std::unordered_map<int, size_t> at;
  for (size_t k = 0; k < layers.size(); ++k) at[layers[k].index] = k;
  return at;
}

// The layers P walks: cost-bearing and view layers, in topological order.
std::vector<const mp::Layer*> graph_order(const mp::ModelIR& model) {
  std::vector<const mp::Layer*> order;
  for (const auto& l : model.layers)
    if (l.cost_bearing() || l.cost == mp::CostClass::kView) order.push_back(&l);
  std::sort(order.begin(), order.end(),
            [](const mp::Layer* a, const mp::Layer* c) { return a->index < c->index; });
  return order;
}

// Each layer's preds among the cost-bearing layers: a view layer passes on what it reads.
void link_through_views(const mp::ModelIR& model, std::vector<LayerCost>& layers) {
  const auto cost_at = positions(layers);
  std::unordered_map<int, std::vector<int>> through;  // view layer → the cost-bearing layers behind it
  for (const auto& l : model.layers) {
    std::vector<int> ps;
    for (int p : l.preds) {
      if (cost_at.count(p))
        ps.push_back(p);
      else if (auto it = through.find(p); it != through.end())
        ps.insert(ps.end(), it->second.begin(), it->second.end());
    }
    std::sort(ps.begin(), ps.end());
    ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
    if (auto it = cost_at.find(l.index); it != cost_at.end())
      layers[it->second].preds = std::move(ps);
    else if (l.cost == mp::CostClass::kView)
      through[l.index] = std::move(ps);
  }
}

// The layouts a case reads its activation input in and writes its output in, and the conversion
// cases that feed it (of its own system: the same thread count), as LayerCost keeps them.
struct CaseLayouts {
  std::string in_layout, out_layout;
  double in_conversion_us = 0, out_conversion_us = 0, conversion_us = 0;
  bool operator==(const CaseLayouts& o) const {
    return in_layout == o.in_layout && out_layout == o.out_layout;
  }
};

// The layout a conversion case names for the case it feeds: the side that is not plain (oneDNN's
// conversions go from plain to the case's, "dst:abcd>aBcd8b", XNNPACK's output one back,
// "dst:nhwc>nchw"), channels-last spelled as oneDNN does (XNNPACK's "nhwc" is oneDNN's "acdb", the
// same buffer: the replay's ports call both "f32 acdb ..."); "" where both sides are plain.
std::string case_side(const LayoutConversion& lc) {
  auto plain = [](const std::string& l) {
    return l == "abcd" || l == "abc" || l == "abcde" || l == "ab" || l == "a" || l == "nchw" || l == "ncw" ||
           l == "ncdhw" || l == "nc";
  };
  const std::string& side = !plain(lc.to) ? lc.to : !plain(lc.from) ? lc.from : std::string();
  if (side == "nhwc") return "acdb";
  if (side == "nwc") return "acb";
  if (side == "ndhwc") return "acdeb";
  return side;
}

// The fastest conversion case of configuration (key, dtype, mode) on `system_id` that converts
// `tensor` ("src" or "dst") to or from `side` (case_side's spelling), in µs; nullopt for none.
std::optional<double> fastest_conversion(const CostTable& costs, const std::string& key,
                                         const std::string& dtype, const std::string& mode, int64_t system_id,
                                         const std::string& tensor, const std::string& side) {
  std::optional<double> us;
  for (auto it = costs.conversions.lower_bound({key, dtype, mode, CaseFeeds{}});
       it != costs.conversions.end() && std::get<0>(it->first) == key && std::get<1>(it->first) == dtype &&
       std::get<2>(it->first) == mode;
       ++it)
    for (const auto& x : it->second)
      if (const auto lc = parse_conversion(x.id.layout); x.system_id == system_id && lc &&
                                                         lc->tensor == tensor && case_side(*lc) == side &&
                                                         (!us || x.us < *us))
        us = x.us;
  return us;
}

const mp::TensorArg* activation_input(const mp::Layer& l);

// A case no conversion case names (one conversion case serves every implementation of the
// configuration that reads or writes its format, planned beside the first of them): its layouts from
// the formats its implementation holds src and dst in (CaseTime::formats), each non-plain one
// charged the fastest conversion case of the configuration, on the case's system, that converts that
// tensor to that format; where none was measured (the one planned did not pass), the tensor's bytes
// at kConversionBytesPerUs, the rate the replay's layout choice costs a conversion at.
CaseLayouts layouts_from_formats(const CaseTime& ct, const CostTable& costs, const std::string& key,
                                 const std::string& dtype, const std::string& mode, const mp::Layer& layer) {
  CaseLayouts out;
  if (ct.formats.empty()) return out;
  std::istringstream words(ct.formats);
  for (std::string word; words >> word;) {
    const auto colon = word.find(':');
    if (colon == std::string::npos) continue;
    const std::string tensor = word.substr(0, colon), format = word.substr(colon + 1);
    if (tensor != "src" && tensor != "dst") continue;
    const std::string side = case_side(LayoutConversion{tensor, format, format});
    if (side.empty()) continue;  // plain
    const mp::TensorArg* arg = tensor == "src"                ? activation_input(layer)
                               : layer.config.outputs.empty() ? nullptr
                                                              : &layer.config.outputs[0];
    double us = 0;
    if (const auto found = fastest_conversion(costs, key, dtype, mode, ct.system_id, tensor, side)) {
      us = *found;
    } else if (const int64_t n = arg ? mp::numel(arg->shape) : 0; n > 0) {
      us = static_cast<double>(n * mp::dtype_size(arg->dtype)) / kConversionBytesPerUs;
    } else {
      continue;  // no size to charge: taken as plain
    }
    (tensor == "src" ? out.in_layout : out.out_layout) = side;
    (tensor == "src" ? out.in_conversion_us : out.out_conversion_us) = us;
    out.conversion_us += us;
  }
  return out;
}

// The input a layer's case reads in its layout: the first, but for an element-wise binary whose
// first operand is broadcast (an SE block's scale · x: [1, C, 1, 1] first), its first operand of the
// output's shape.
const mp::TensorArg* activation_input(const mp::Layer& l) {
  const auto& in = l.config.inputs;
  if (in.empty()) return nullptr;
  const LayerKind k = l.config.kind;
  const bool binary =
      k == LayerKind::kAdd || k == LayerKind::kSub || k == LayerKind::kMul || k == LayerKind::kDiv;
  if (binary && !l.config.outputs.empty())
    for (const auto& t : in)
      if (t.shape == l.config.outputs[0].shape) return &t;
  return &in[0];
}

// A case of a layout variant that no conversion case feeds and that holds no oneDNN formats: one of
// Floorline's own kernels ("concat@blocked16c", "binary@nhwc", "pad@nhwc"; the replay converts
// around it with the fastest conversion any backend offers). Its 4-D activation input and output
// are held in the layout its algorithm names after '@' (aBcd<B>b for "blocked<B>c", acdb for "nhwc";
// channels-last without pixels is the plain order, as its ports say; a Transpose's NCHW side
// alone), each charged the
// configuration's fastest conversion case into that format where one exists (a oneDNN variant's),
// else its bytes at kConversionBytesPerUs, the rate the replay's layout choice costs it at.
CaseLayouts layouts_from_variant(const CaseTime& ct, const CostTable& costs, const std::string& key,
                                 const std::string& dtype, const std::string& mode, const mp::Layer& layer) {
  CaseLayouts out;
  const auto at = ct.id.algorithm.find('@');
  if (at == std::string::npos) return out;
  const std::string variant = ct.id.algorithm.substr(at + 1);
  std::string format;
  if (variant == "nhwc" || variant == "channels_last")
    format = "acdb";
  else if (variant == "blocked8c" || variant == "blocked16c")
    format = "aBcd" + variant.substr(7, variant.size() - 8) + "b";
  if (format.empty()) return out;
  auto side = [&](const mp::TensorArg* arg, const std::string& tensor) {
    if (!arg) return;
    const auto& shape = arg->shape;
    if (shape.size() != 4 || (format == "acdb" && shape[2] * shape[3] == 1)) return;  // plain
    double us = 0;
    if (const auto found = fastest_conversion(costs, key, dtype, mode, ct.system_id, tensor, format)) {
      us = *found;
    } else if (const int64_t n = mp::numel(shape); n > 0) {
      us = static_cast<double>(n * mp::dtype_size(arg->dtype)) / kConversionBytesPerUs;
    }
    (tensor == "src" ? out.in_layout : out.out_layout) = format;
    (tensor == "src" ? out.in_conversion_us : out.out_conversion_us) = us;
    out.conversion_us += us;
  };
  // A Transpose between NCHW and NHWC ("transpose@nhwc") holds its NCHW side alone channels-last.
  const bool transpose = layer.config.kind == LayerKind::kTranspose;
  const auto perm = transpose ? layer.config.attr_ints("perm") : std::vector<int64_t>{};
  if (!transpose || perm == std::vector<int64_t>{0, 2, 3, 1}) side(activation_input(layer), "src");
  if ((!transpose || perm == std::vector<int64_t>{0, 3, 1, 2}) && !layer.config.outputs.empty())
    side(&layer.config.outputs[0], "dst");
  return out;
}

CaseLayouts layouts_of(const CaseTime& ct, const CostTable& costs, const std::string& key,
                       const std::string& dtype, const std::string& mode, const mp::Layer& layer) {
  CaseLayouts out;
  // Conversions feed the cases of one algorithm (oneDNN) or every case in one layout (XNNPACK
  // and CUDA: "nhwc", shared by every algorithm in that layout).
  auto cv = costs.conversions.find({key, dtype, mode, CaseFeeds{ct.id.algorithm, ""}});
  if (cv == costs.conversions.end() && !ct.id.layout.empty())
    cv = costs.conversions.find({key, dtype, mode, CaseFeeds{"", ct.id.layout}});
  if (cv == costs.conversions.end())
    return ct.formats.empty() ? layouts_from_variant(ct, costs, key, dtype, mode, layer)
                              : layouts_from_formats(ct, costs, key, dtype, mode, layer);
  for (const auto& x : cv->second) {
    if (x.system_id != ct.system_id) continue;  // same thread count
    out.conversion_us += x.us;
    if (const auto lc = parse_conversion(x.id.layout); lc && lc->tensor == "src") {
      out.in_layout = case_side(*lc);
      out.in_conversion_us += x.us;
    } else if (lc && lc->tensor == "dst") {
      out.out_layout = case_side(*lc);
      out.out_conversion_us += x.us;
    }
  }
  return out;
}

void set_layouts(LayerCost& c, const CaseLayouts& l) {
  c.in_layout = l.in_layout;
  c.out_layout = l.out_layout;
  c.in_conversion_us = l.in_conversion_us;
  c.out_conversion_us = l.out_conversion_us;
}

// The epilogue (docs/ANALYZER.md, "The epilogue"): every library runs an activation, a residual
// Add (with its activation) or a MatMul's bias Add that is the sole reader of a
// Conv/ConvTranspose/Gemm/MatMul's output in that layer's epilogue (oneDNN post-ops, cuDNN's
// conv-bias-activation with its z input, XNNPACK's output clamp, cuBLASLt's epilogues), and so do
// the runtimes (ONNX Runtime's fused NCHWc Conv with Sum and Relu, PyTorch's frozen graphs). S takes
// such a chain at its measured fused case where that is faster than the unfused cases: the first
// absorbed layer's t(v) becomes what the fused case adds to the producer, fused − t(producer), the
// others cost 0, and the producer keeps its own case; where the fused case beats the producer's own
// best, the producer takes the fused case and the absorbed layers cost 0. Either way the chain costs
// the fused case, as the replay runs it. A residual Add two convolutions both feed is one chain of
// either: the larger saving is taken, each layer in one chain at most. A folded BatchNormalization
// stays F's (no fused case: the weights change).
//
// With `in_graph_order`, only the chains the replay can fuse running the layers in the model's order
// (generator/replay.cpp): a residual Add's summand written before the head and read after it by no
// layer but the Add (the fused case adds into it in place), every other operand of the epilogue
// written before the head. ResNet's first block of a stage writes its shortcut's 1x1 convolution
// after the block's second convolution: the replay fuses the Add into the 1x1 convolution, and runs
// the second on its unfused best case.
void apply_epilogues(const mp::ModelIR& model, const CostTable& costs, const std::string& base_dtype,
                     std::vector<LayerCost>& layers, bool in_graph_order) {
  const auto cost_at = positions(layers);
  std::unordered_map<int, const mp::Layer*> layer_of;
  for (const auto& l : model.layers) layer_of[l.index] = &l;
  std::unordered_map<std::string, int> produced;              // value → Layer::index of its writer
  std::unordered_map<std::string, std::vector<int>> readers;  // value → every layer reading it
  for (const auto& l : model.layers) {
    if (!l.subgraph.empty()) continue;
    if (l.cost != mp::CostClass::kHost)
      for (const auto& n : l.output_names) produced[n] = l.index;
    for (const auto& n : l.input_names) readers[n].push_back(l.index);
  }
  // Whether the replay, running the layers in order, can fuse `m` (see above).
  auto in_order = [&](const mp::FusionMatch& m) {
    const auto written_after_head = [&](const std::string& name) {
      const auto p = produced.find(name);
      return p != produced.end() && p->second > m.head;
    };
    if (mp::has_residual(m) && !m.absorbed.empty()) {
      const mp::Layer& add = *layer_of.at(m.absorbed.front());
      // The chain's value: the head's output, or an earlier absorbed layer's.
      std::set<std::string> chain = {
          layer_of.at(m.head)->output_names.empty() ? std::string() : layer_of.at(m.head)->output_names[0]};
      for (int index : m.absorbed)
        if (index != add.index && !layer_of.at(index)->output_names.empty())
          chain.insert(layer_of.at(index)->output_names[0]);
      for (const auto& name : add.input_names) {
        if (chain.count(name)) continue;
        const auto p = produced.find(name);
        if (p == produced.end() || p->second > m.head) return false;
        for (int r : readers[name])
          if (r != add.index && r > m.head) return false;
      }
    }
    for (const auto& [index, position] : m.operands) {
      const mp::Layer& reader = *layer_of.at(index);
      if (position < reader.input_names.size() && written_after_head(reader.input_names[position]))
        return false;
    }
    return true;
  };
  struct Candidate {
    int head = 0;
    std::vector<int> absorbed;  // positions in `layers`
    const CaseTime* fused = nullptr;
    double saving = 0;
  };
  std::vector<Candidate> candidates;
  for (const auto& m : mp::fusion_matches(model)) {
    if (!mp::is_epilogue_fusion(m) || (in_graph_order && !in_order(m))) continue;
    const auto h = cost_at.find(m.head);
    if (h == cost_at.end()) continue;
    Candidate c;
    c.head = static_cast<int>(h->second);
    for (int index : m.absorbed)
      if (auto a = cost_at.find(index); a != cost_at.end()) c.absorbed.push_back(static_cast<int>(a->second));
    if (c.absorbed.size() != m.absorbed.size()) continue;
    const LayerCost& head = layers[c.head];
    if (head.source != CostSource::kMeasured || std::any_of(c.absorbed.begin(), c.absorbed.end(), [&](int a) {
          return layers[a].source != CostSource::kMeasured;
        }))
      continue;
    const std::string dtype = layer_dtype(*layer_of.at(m.head), base_dtype);
    const auto fused = costs.best.find({head.key, dtype, math_mode_of(dtype), m.name});
    if (fused == costs.best.end()) continue;
    double unfused = head.us;
    for (int a : c.absorbed) unfused += layers[a].us;
    if (fused->second.us >= unfused) continue;
    c.fused = &fused->second;
    c.saving = unfused - fused->second.us;
    candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.saving > b.saving; });
  std::set<int> taken;
  for (const auto& c : candidates) {
    if (taken.count(c.head) ||
        std::any_of(c.absorbed.begin(), c.absorbed.end(), [&](int a) { return taken.count(a) > 0; }))
      continue;
    taken.insert(c.head);
    taken.insert(c.absorbed.begin(), c.absorbed.end());
    LayerCost& head = layers[c.head];
    std::vector<LayerCost*> acts;
    for (int a : c.absorbed) acts.push_back(&layers[a]);
    auto sum = [&](auto member) {
      double t = 0;
      for (const LayerCost* a : acts) t += a->*member;
      return t;
    };
    const CaseTime& f = *c.fused;
    head.fusion = f.id.fusion;
    {
      // The chain runs on the fused case: its layouts are E's for the head (estimate_E).
      const std::string dtype = layer_dtype(*layer_of.at(head.index), base_dtype);
      set_layouts(head, layouts_of(f, costs, head.key, dtype, math_mode_of(dtype), *layer_of.at(head.index)));
    }
    for (LayerCost* a : acts) {
      a->own_us = a->us;
      a->epilogue_case = f.name;
      a->epilogue_head = head.index;
      a->us = 0;
      a->case_id = f.case_id;
      a->case_system_id = f.system_id;
      a->case_us = f.us;
    }
    if (f.us >= head.us) {
      acts.front()->us = f.us - head.us;
    } else {
      head.us = f.us;
      head.case_id = f.case_id;
      head.case_system_id = f.system_id;
      head.case_us = f.us;
      head.best_case = f.name;
      head.algorithm = f.id.algorithm;
      head.threads = f.threads;
      head.passes = f.passes;
      head.placements = f.placements;
      head.noisy = f.noisy;
      head.spread = f.spread;
    }
    // H too: a framework running the library defaults fuses the epilogue as well, and H − S is
    // algorithm choice, not this fusion.
    for (LayerCost* a : acts)
      if (a->heuristic_us) a->heuristic_us = std::min(*a->heuristic_us, a->us);
    // S_vendor the same way where the fused case is a vendor's and every layer has a vendor time.
    if (!is_own_kernel(f.id) && head.vendor_source == CostSource::kMeasured &&
        std::all_of(acts.begin(), acts.end(),
                    [](const LayerCost* a) { return a->vendor_source == CostSource::kMeasured; })) {
      const double acts_vendor = sum(&LayerCost::vendor_us);
      if (f.us < head.vendor_us + acts_vendor) {
        if (f.us >= head.vendor_us) {
          for (LayerCost* a : acts) a->vendor_us = 0;
          acts.front()->vendor_us = f.us - head.vendor_us;
        } else {
          head.vendor_us = f.us;
          for (LayerCost* a : acts) a->vendor_us = 0;
        }
      }
    }
  }
}

}  // namespace

std::optional<double> roofline_time(const mp::Layer& l, const CostTable& costs,
                                    const std::string& base_dtype) {
  // A quantized layer (QDQ) is int8 work: the int8 peaks where calibrated, else the base ones; its
  // bytes are its own tensors' already.
  const bool quantized = mp::quantized_config(l.config);
  std::string dtype = layer_dtype(l, base_dtype);
  if (quantized && !costs.peaks.count({"flops", dtype})) dtype = base_dtype;
  const auto flops_peak = costs.peaks.find({"flops", dtype});
  const auto bytes_peak = costs.peaks.find({"bytes", dtype});
  const std::optional<double> scale = quantized ? 1.0 : byte_scale_of(dtype);
  if (flops_peak == costs.peaks.end() || bytes_peak == costs.peaks.end() || !l.shapes_known || !scale)
    return std::nullopt;
  // Layers with more bytes than a dtype of half the width (bytes are counted in the model's f32).
  const double byte_scale = *scale;
  return std::max(static_cast<double>(roofline_flops(l)) / flops_peak->second,
                  static_cast<double>(l.bytes) * byte_scale / bytes_peak->second) *
         1e6;
}

std::string layer_dtype(const mp::Layer& l, const std::string& base_dtype) {
  return mp::quantized_config(l.config) ? std::string(dtype_name(DType::kInt8)) : base_dtype;
}

std::vector<LayerCost> layer_costs(const mp::ModelIR& model, const CostTable& costs,
                                   const std::string& base_dtype, bool in_graph_order) {
  std::vector<LayerCost> out;
  for (const auto& l : model.layers) {
    if (!l.cost_bearing()) continue;
    const std::string dtype = layer_dtype(l, base_dtype);
    const std::string mode = math_mode_of(dtype);
    LayerCost c;
    c.index = l.index;
    c.name = l.name;
    c.kind =
        l.config.kind == mp::LayerKind::kUnsupported ? l.op_type : std::string(mp::kind_name(l.config.kind));
    c.key = l.key;
    c.flops = l.flops;
    c.roofline_flops = roofline_flops(l);
    c.bytes = l.bytes;
    c.roofline_us = roofline_time(l, costs, base_dtype);
    if (auto it = costs.best.find({l.key, dtype, mode, ""}); it != costs.best.end()) {
      c.source = CostSource::kMeasured;
      c.us = it->second.us;
      c.case_id = it->second.case_id;
      c.case_system_id = it->second.system_id;
      c.case_us = it->second.us;
      c.best_case = it->second.name;
      c.algorithm = it->second.id.algorithm;
      c.threads = it->second.threads;
      c.passes = it->second.passes;
      c.placements = it->second.placements;
      c.noisy = it->second.noisy;
      c.spread = it->second.spread;
      if (auto race = costs.races.find({l.key, dtype, mode, "", it->second.system_id});
          race != costs.races.end()) {
        c.candidates = race->second.passed + race->second.raced_out;
        c.raced_out = race->second.raced_out;
        if (std::isfinite(race->second.runner_up)) c.runner_up_us = race->second.runner_up;
      }
      // Which ports it converts: the layouts the case reads and writes (estimate_E).
      const CaseLayouts layouts = layouts_of(it->second, costs, l.key, dtype, mode, l);
      c.conversion_us = layouts.conversion_us;
      set_layouts(c, layouts);
    } else if (c.roofline_us) {
      c.source = CostSource::kRoofline;
      c.us = *c.roofline_us;
    } else {
      c.source = CostSource::kNone;
    }
    // S_vendor's time: the vendor libraries' fastest case, else what S takes for a layer no backend runs.
    const auto best = costs.best.find({l.key, dtype, mode, ""});
    const auto vendor = costs.best_vendor.find({l.key, dtype, mode, ""});
    if (c.source == CostSource::kMeasured && !is_own_kernel(best->second.id)) {
      c.vendor_source = CostSource::kMeasured;
      c.vendor_us = c.us;
    } else if (vendor != costs.best_vendor.end()) {
      c.vendor_source = CostSource::kMeasured;
      c.vendor_us = vendor->second.us;
    } else if (c.roofline_us) {
      c.vendor_source = CostSource::kRoofline;
      c.vendor_us = *c.roofline_us;
    } else {
      c.vendor_source = CostSource::kNone;
    }
    if (auto it = costs.heuristic.find({l.key, dtype, mode, ""}); it != costs.heuristic.end())
      c.heuristic_us = it->second.us;
    out.push_back(std::move(c));
  }
  link_through_views(model, out);
  apply_epilogues(model, costs, base_dtype, out, in_graph_order);
  return out;
}

double sequential_bound(const std::vector<LayerCost>& layers) {
  double s = 0;
  for (const auto& c : layers) s += c.us;
  return s;
}

double vendor_sequential_bound(const std::vector<LayerCost>& layers) {
  double s = 0;
  for (const auto& c : layers) s += c.vendor_us;
  return s;
}

double heuristic_bound(const std::vector<LayerCost>& layers) {
  double h = 0;
  for (const auto& c : layers) h += c.heuristic_us.value_or(c.us);
  return h;
}

std::optional<double> roofline_bound(const std::vector<LayerCost>& layers) {
  if (layers.empty()) return std::nullopt;
  double r = 0;
  for (const auto& c : layers) {
    if (!c.roofline_us) return std::nullopt;
    r += *c.roofline_us;
  }
  return r;
}

CriticalPath critical_path(const mp::ModelIR& model, const std::vector<LayerCost>& layers) {
  std::unordered_map<int, double> weight;  // Layer::index → t(v); view layers are absent (0)
  for (const auto& c : layers) weight[c.index] = c.us;
  std::unordered_map<int, double> dist;  // longest path ending at the layer, the layer included
  std::unordered_map<int, int> from;
  int sink = -1;
  double longest = -1;
  for (const auto* l : graph_order(model)) {
    double in = 0;
    int arg = -1;
    for (int p : l->preds) {
      const auto it = dist.find(p);
      if (it != dist.end() && (arg < 0 || it->second > in)) in = it->second, arg = p;
    }
    const auto w = weight.find(l->index);
    dist[l->index] = in + (w == weight.end() ? 0.0 : w->second);
    from[l->index] = arg;
    if (dist[l->index] > longest) longest = dist[l->index], sink = l->index;
  }
  CriticalPath path;
  path.us = std::max(0.0, longest);
  for (int v = sink; v >= 0; v = from[v]) path.layers.push_back(v);
  std::reverse(path.layers.begin(), path.layers.end());
  return path;
}

std::vector<Branch> branches_off(const mp::ModelIR& model, const std::vector<LayerCost>& layers,
                                 const std::vector<int>& critical_path) {
  std::unordered_map<int, double> weight;
  for (const auto& c : layers) weight[c.index] = c.us;
  const std::set<int> on_path(critical_path.begin(), critical_path.end());
  std::unordered_map<int, int> anchor;  // off-path layer → the fork its first input chain leads to
  std::map<int, Branch> branches;
  for (const auto* l : graph_order(model)) {
    if (on_path.count(l->index)) continue;
    int a = -1;
    if (!l->preds.empty()) {
      const int p = l->preds.front();
      a = on_path.count(p) ? p : (anchor.count(p) ? anchor[p] : -1);
    }
    anchor[l->index] = a;
    const auto w = weight.find(l->index);
    if (w == weight.end()) continue;
    Branch& br = branches[a];
    br.fork = a;
    br.us += w->second;
    ++br.layers;
  }
  std::unordered_map<int, const mp::Layer*> named;
  for (const auto& l : model.layers) named[l.index] = &l;
  std::vector<Branch> out;
  for (auto& [a, br] : branches) {
    br.fork_name = a >= 0 ? named.at(a)->name : "(graph inputs)";
    if (br.us > 0) out.push_back(br);
  }
  std::sort(out.begin(), out.end(), [](const Branch& x, const Branch& y) { return x.us > y.us; });
  return out;
}

FusedBound fused_bound(const mp::ModelIR& model, const std::vector<LayerCost>& layers, const CostTable& costs,
                       const std::string& dtype) {
  const std::string mode = math_mode_of(dtype);
  const auto cost_at = positions(layers);
  FusedBound f;
  for (const auto& m : mp::fusion_matches(model)) {
    FusionUse use;
    use.layers.push_back(m.head);
    for (int a : m.absorbed) use.layers.push_back(a);
    bool all_costed = true;
    for (int v : use.layers) {
      auto it = cost_at.find(v);
      if (it == cost_at.end() || layers[it->second].source == CostSource::kNone)
        all_costed = false;
      else
        use.unfused_us += layers[it->second].us;
    }
    if (!all_costed) continue;
    const LayerCost& head = layers[cost_at.at(m.head)];
    use.pattern = head.kind + "+" + m.name;
    if (m.folded) {
      if (head.source == CostSource::kMeasured) {
        use.fused_us = head.us;
        use.fused_case = head.best_case;
      }
    } else if (auto it = costs.best.find({head.key, dtype, mode, m.name}); it != costs.best.end()) {
      use.fused_us = it->second.us;
      use.fused_case = it->second.name;
    }
    f.fusions.push_back(std::move(use));
  }
  std::vector<size_t> order(f.fusions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto saving = [&](const FusionUse& u) { return u.fused_us ? u.unfused_us - *u.fused_us : 0.0; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return saving(f.fusions[x]) > saving(f.fusions[y]); });
  std::set<int> fused;
  f.us = sequential_bound(layers);
  for (size_t i : order) {
    FusionUse& u = f.fusions[i];
    if (!u.fused_us || saving(u) <= 0) continue;
    if (std::any_of(u.layers.begin(), u.layers.end(), [&](int v) { return fused.count(v) > 0; })) continue;
    u.applied = true;
    fused.insert(u.layers.begin(), u.layers.end());
    f.us -= saving(u);
  }
  return f;
}

std::vector<ReducedBound> reduced_precision_bounds(const std::vector<LayerCost>& layers,
                                                   const CostTable& costs, const std::string& base_dtype) {
  const std::string base_mode = math_mode_of(base_dtype);
  std::vector<ReducedBound> out;
  for (const auto& [dtype, mode] : costs.modes) {
    if (dtype == base_dtype && mode == base_mode) continue;
    ReducedBound r;
    r.dtype = dtype;
    r.math_mode = mode;
    for (const auto& c : layers) {
      auto& kind = r.by_kind[c.kind];
      kind.first += c.us;
      if (auto it = costs.best.find({c.key, dtype, mode, ""}); it != costs.best.end()) {
        r.us += it->second.us;
        kind.second += it->second.us;
        ++r.layers_reduced;
      } else {
        r.us += c.us;
        kind.second += c.us;
        ++r.layers_kept;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

MeasuredLatency measured_latency(const CostTable& costs, const std::string& model, int64_t batch,
                                 const std::string& dtype) {
  MeasuredLatency m;
  for (const auto& f : costs.framework) {
    if (f.model_name != model || f.batch != batch || f.dtype != dtype) continue;
    if (costs.device_kind == "cpu" && f.threads > 0 && f.threads != costs.threads)
      continue;  // not comparable
    m.framework.push_back({f.runtime, f.settings, f.runtime_version, f.threads, f.median_us});
    if (!m.us || f.median_us < *m.us) m.us = f.median_us;
  }
  return m;
}

Replay replay_of(const CostTable& costs, const std::string& model, int64_t batch, const std::string& dtype) {
  Replay r;
  const auto it = costs.replays.find({model, batch, dtype});
  if (it == costs.replays.end()) return r;
  const benchdb::ReplayRow& row = it->second;
  // The lowest repetition mean, the statistic S takes of each case (docs/MEASUREMENT.md).
  r.us = row.min_us.value_or(row.median_us);
  // generator::replay_row's make-up (a row moved from schema 3 may hold plain text).
  const auto j = nlohmann::json::parse(row.makeup, nullptr, false);
  r.note = j.is_string() ? j.get<std::string>() : row.makeup;
  if (j.is_object() && j.contains("conversions_us") && j.contains("conversions") && j.contains("layers")) {
    r.conversions_us = j["conversions_us"].get<double>();
    r.conversions = j["conversions"].get<int64_t>();
    r.note = fmt::format("{} layers, {} layout conversions ({:.1f} µs), {} of {} output buffers reused",
                         j["layers"].get<int64_t>(), r.conversions, *r.conversions_us,
                         j.value("buffers_reused", int64_t{0}),
                         j.value("buffers", int64_t{0}) + j.value("buffers_reused", int64_t{0}));
    if (const double paired = j.value("paired_us", 0.0); paired > 0) r.paired_us = paired;
    // The replay's data check (generator/replay.hpp, ReplayResult::denormal_steps).
    const int64_t denormal = j.value("denormal_steps", int64_t{0}),
                  nonfinite = j.value("nonfinite_steps", int64_t{0});
    if (denormal > 0 || nonfinite > 0)
      r.note +=
          fmt::format("; its data: {} layer(s) wrote denormals, {} infinities or NaN", denormal, nonfinite);
  }
  if (j.is_object() && j.contains("layer_times") && j["layer_times"].is_array())
    for (const auto& l : j["layer_times"])
      if (l.is_object())
        r.layer_times.push_back(
            {l.value("layer", ""), l.value("op", ""), l.value("replay_us", 0.0), l.value("case_us", 0.0)});
  return r;
}

namespace {

// The layer counts of `b` (its layers already costed): by cost class, by the source of t(v), the
// layers whose library default did not pass; and the layout conversions' total.
void count_layers(const mp::ModelIR& model, ModelBounds& b) {
  for (const auto& l : model.layers) {
    if (l.cost == mp::CostClass::kView) ++b.view_layers;
    if (l.cost == mp::CostClass::kHost) ++b.host_layers;
  }
  for (const auto& c : b.layers) {
    if (c.source == CostSource::kMeasured) {
      ++b.measured_layers;
    } else if (c.source == CostSource::kRoofline) {
      ++b.roofline_layers;
    } else {
      ++b.untimed_layers;
      b.complete = false;
    }
    if (!c.heuristic_us) ++b.heuristic_missing;
    b.conversions_us += c.conversion_us;
  }
}

// The share of S that rests on measured cases; 1 when S is 0 with every layer timed, 0 when S is 0
// because nothing has a time.
double measured_fraction(const std::vector<LayerCost>& layers, double sequential_us) {
  double measured_us = 0;
  bool untimed = false;
  for (const auto& c : layers) {
    if (c.source == CostSource::kMeasured) measured_us += c.us;
    if (c.source == CostSource::kNone) untimed = true;
  }
  return sequential_us > 0 ? measured_us / sequential_us : (untimed ? 0 : 1);
}

}  // namespace

int64_t pass_footprint(const mp::ModelIR& model) {
  int64_t parameters = 0, activations = 0;
  for (const auto& l : model.layers) {
    if (!l.cost_bearing() || !l.shapes_known) continue;
    int64_t live = 0;
    auto add = [&](const mp::TensorArg& t, bool parameter) {
      const int64_t n = mp::numel(t.shape);
      const int64_t bytes = n > 0 ? n * mp::dtype_size(t.dtype) : 0;
      (parameter ? parameters : live) += bytes;
    };
    for (size_t k = 0; k < l.config.inputs.size(); ++k)
      add(l.config.inputs[k],
          k > 0 && parameter_input(l.config.kind, l.config.inputs[k].role, l.config.inputs[k].shape.size()));
    for (const auto& t : l.config.outputs) add(t, false);
    activations = std::max(activations, live);
  }
  return parameters + activations;
}

double memory_share(const mp::ModelIR& model, int64_t cache_bytes) {
  const int64_t f = pass_footprint(model);
  if (f <= 0 || f <= cache_bytes) return 0;
  return std::clamp(1.0 - static_cast<double>(cache_bytes) / static_cast<double>(f), 0.0, 1.0);
}

void estimate_conversions(ModelBounds& b, const mp::ModelIR& model) {
  for (auto& c : b.layers) c.e_conversion_us = 0;
  int64_t conversions = 0;
  b.E_conversions_us = ConversionWalk(b, model).us(&conversions);
  b.E_conversions = conversions;
}

std::unordered_map<int, ActivationTraffic> activation_traffic(const mp::ModelIR& model,
                                                              const std::vector<LayerCost>& layers,
                                                              int64_t cache_bytes) {
  std::unordered_map<int, const LayerCost*> cost_of;
  for (const auto& c : layers) cost_of[c.index] = &c;
  auto tensor_bytes = [](const mp::TensorArg& t) {
    const int64_t n = mp::numel(t.shape);
    return n > 0 ? n * mp::dtype_size(t.dtype) : int64_t{0};
  };
  auto absorbed = [&](const mp::Layer& l) {
    const auto c = cost_of.find(l.index);
    return c != cost_of.end() && c->second->epilogue_head >= 0;
  };
  // A layer that runs on its own: cost-bearing, not an activation in its producer's epilogue (its
  // input is the producer's output on the way out, not a buffer read again).
  auto own_step = [&](const mp::Layer& l) { return l.cost_bearing() && l.shapes_known && !absorbed(l); };
  // The bytes each layer touches (its inputs and outputs, weights included), as prefix sums in
  // graph order: what lies between two touches of a buffer.
  const size_t n = model.layers.size();
  std::vector<int64_t> before(n + 1, 0);
  // Value → Layer::index of the last layer reading it, as the replay frees buffers.
  std::unordered_map<std::string, int> last_reader;
  for (size_t i = 0; i < n; ++i) {
    const auto& l = model.layers[i];
    int64_t touched = 0;
    if (own_step(l)) {
      for (const auto& t : l.config.inputs) touched += tensor_bytes(t);
      for (const auto& t : l.config.outputs) touched += tensor_bytes(t);
    }
    before[i + 1] = before[i] + touched;
    if (l.subgraph.empty())
      for (const auto& name : l.input_names) last_reader[name] = l.index;
  }
  const auto pass = static_cast<double>(before[n]);
  const auto cache = static_cast<double>(std::max<int64_t>(1, cache_bytes));
  auto beyond = [&](double distance) { return distance > cache ? 1.0 - cache / distance : 0.0; };
  auto last_use = [&](const std::string& name) {
    const auto it = last_reader.find(name);
    return it == last_reader.end() ? -1 : it->second;
  };

  // The replay's memory planner, followed (generator/replay.cpp, BufferPool): an output takes a
  // buffer of its exact size that an earlier value held until its last reader ran (the one freed
  // last), a new one otherwise; a residual Add in its producer's epilogue writes into its summand's
  // buffer. Each buffer remembers where in the pass it was last touched; a new buffer was last
  // touched where the pass before left it (the same buffers every pass).
  struct Buffer {
    int64_t bytes = 0;
    int last_use = -1;
    double touched_at = -1;  // position in `before` of its last touch so far this pass (-1: none)
  };
  std::vector<Buffer> buffers;
  std::unordered_map<std::string, size_t> buffer_of;              // value → buffer
  std::unordered_map<int64_t, std::vector<size_t>> free_buffers;  // by bytes, the last freed at back
  std::set<size_t> freed;
  auto release = [&](const mp::Layer& l) {
    for (const auto* names : {&l.input_names, &l.output_names})
      for (const auto& name : *names) {
        const auto b = buffer_of.find(name);
        if (b == buffer_of.end() || freed.count(b->second) || buffers[b->second].last_use > l.index) continue;
        freed.insert(b->second);
        free_buffers[buffers[b->second].bytes].push_back(b->second);
      }
  };
  // A fused chain's residual Add (an absorbed Add): its head → the summand, the Add's input that
  // is not the chain's value (the head's output and the absorbed layers' after it).
  std::unordered_map<int, std::string> summand_of;
  {
    std::unordered_map<int, std::set<std::string>> chain_values;
    for (const auto& l : model.layers) {
      if (!l.subgraph.empty()) continue;
      const auto c = cost_of.find(l.index);
      if (c != cost_of.end() && c->second->epilogue_head < 0 && !l.output_names.empty())
        chain_values[l.index].insert(l.output_names[0]);
      if (!absorbed(l) || l.output_names.empty()) continue;
      auto& values = chain_values[c->second->epilogue_head];
      if (l.config.kind == mp::LayerKind::kAdd)
        for (const auto& name : l.input_names)
          if (!values.count(name)) summand_of[c->second->epilogue_head] = name;
      values.insert(l.output_names[0]);
    }
  }
  std::set<std::string> chain;  // the values of the fused chain now running (its head's output on)
  std::unordered_map<int, ActivationTraffic> traffic;
  // Outputs written into a buffer first touched this pass by that write: their distance reaches
  // back into the pass before, known once the pass's last touches are.
  struct Pending {
    int index;
    size_t buffer;
    double at, bytes;
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < n; ++i) {
    const auto& l = model.layers[i];
    if (!l.subgraph.empty()) continue;
    if (!own_step(l)) {
      // A view, and an activation in its producer's epilogue, pass their input's buffer on; a
      // residual Add there is its summand's buffer, written in place where the sizes match.
      const bool passes_on = l.cost == mp::CostClass::kView || absorbed(l);
      if (passes_on && !l.input_names.empty() && !l.output_names.empty()) {
        // The chain's value where it is one of the inputs (a residual Add's other is its summand).
        size_t from = 0;
        for (size_t k = 0; k < l.input_names.size(); ++k)
          if (chain.count(l.input_names[k])) from = k;
        if (const auto b = buffer_of.find(l.input_names[from]); b != buffer_of.end()) {
          buffer_of[l.output_names[0]] = b->second;
          buffers[b->second].last_use = std::max(buffers[b->second].last_use, last_use(l.output_names[0]));
        }
        if (absorbed(l)) chain.insert(l.output_names[0]);
      }
      release(l);
      continue;
    }
    ActivationTraffic& t = traffic[l.index];
    const auto at = static_cast<double>(before[i]);
    for (size_t k = 0; k < l.input_names.size() && k < l.config.inputs.size(); ++k) {
      const auto& in = l.config.inputs[k];
      if (k > 0 && parameter_input(l.config.kind, in.role, in.shape.size())) continue;
      const auto b = buffer_of.find(l.input_names[k]);
      if (b == buffer_of.end()) continue;  // a graph input: read where the case alone reads it
      const auto size = static_cast<double>(tensor_bytes(in));
      Buffer& buf = buffers[b->second];
      if (buf.touched_at >= 0) t.cold_input_bytes += size * beyond(at - buf.touched_at + size);
    }
    for (size_t k = 0; k < l.output_names.size() && k < l.config.outputs.size(); ++k) {
      if (l.output_names[k].empty()) continue;
      const int64_t bytes = tensor_bytes(l.config.outputs[k]);
      t.output_bytes += static_cast<double>(bytes);
      size_t b;
      auto& list = free_buffers[bytes];
      const auto summand = k == 0 ? summand_of.find(l.index) : summand_of.end();
      const auto in_place = summand != summand_of.end() ? buffer_of.find(summand->second) : buffer_of.end();
      if (in_place != buffer_of.end() && buffers[in_place->second].bytes == bytes) {
        b = in_place->second;  // the fused case adds into its summand's buffer
      } else if (!list.empty()) {
        b = list.back();
        list.pop_back();
        freed.erase(b);
      } else {
        b = buffers.size();
        buffers.push_back({bytes, -1, -1});
      }
      Buffer& buf = buffers[b];
      buf.last_use = std::max({buf.last_use, last_use(l.output_names[k]), l.index});
      if (buf.touched_at >= 0)
        t.cold_output_bytes +=
            static_cast<double>(bytes) * beyond(at - buf.touched_at + static_cast<double>(bytes));
      else
        pending.push_back({l.index, b, at, static_cast<double>(bytes)});
      buffer_of[l.output_names[k]] = b;
      if (k == 0) chain = {l.output_names[0]};
    }
    // Everything this layer read or wrote was touched at its end.
    const auto after = static_cast<double>(before[i + 1]);
    for (const auto* names : {&l.input_names, &l.output_names})
      for (const auto& name : *names)
        if (const auto b = buffer_of.find(name); b != buffer_of.end()) buffers[b->second].touched_at = after;
    release(l);
  }
  for (const auto& p : pending) {
    const double last = buffers[p.buffer].touched_at;  // its last touch in the pass before
    traffic[p.index].cold_output_bytes += p.bytes * beyond(pass - last + p.at + p.bytes);
  }
  for (auto it = traffic.begin(); it != traffic.end();)
    it = it->second.output_bytes > 0 || it->second.cold_input_bytes > 0 ? std::next(it) : traffic.erase(it);
  return traffic;
}

ConversionWalk::ConversionWalk(ModelBounds& b, const mp::ModelIR& model) {
  std::unordered_map<int, LayerCost*> cost_of;
  for (auto& c : b.layers) cost_of[c.index] = &c;
  std::unordered_map<std::string, int> id;
  auto id_of = [&](const std::string& name) {
    if (name.empty()) return -1;
    return id.try_emplace(name, static_cast<int>(id.size())).first->second;
  };
  for (const auto& l : model.layers) {
    if (!l.subgraph.empty()) continue;
    const auto it = cost_of.find(l.index);
    LayerCost* c = it == cost_of.end() ? nullptr : it->second;
    const bool absorbed = c && !c->epilogue_case.empty();
    Step s;
    if (l.cost == mp::CostClass::kView || absorbed) {
      if (l.input_names.empty() || l.output_names.empty()) continue;
      s.in = {id_of(l.input_names[0])};
      s.out = {id_of(l.output_names[0])};
      steps_.push_back(std::move(s));
      continue;
    }
    if (!c) continue;  // its outputs have no layout: nothing converts them
    s.cost = c;
    s.agnostic = mp::layout_agnostic(l) && l.output_names.size() == 1;
    // Every input (an element-wise layer's kept layout reaches all); the layout a case reads in
    // applies to those of the config's inputs (src_shaped's entries) alone.
    for (size_t k = 0; k < l.input_names.size(); ++k) {
      s.in.push_back(id_of(l.input_names[k]));
      if (k < l.config.inputs.size())
        s.src_shaped.push_back(l.config.kind == LayerKind::kConcat ||  // every input in its layout
                               l.config.inputs[k].shape == activation_input(l)->shape);
    }
    for (const auto& n : l.output_names) s.out.push_back(id_of(n));
    steps_.push_back(std::move(s));
  }
  values_ = static_cast<int>(id.size());
}

double ConversionWalk::us(int64_t* conversions) const {
  struct Value {
    const std::string* layout = nullptr;  // nullptr: no value (a graph input, a layer without a cost)
    const LayerCost* producer = nullptr;
    int buffer = -1;
  };
  static const std::string kPlain;
  std::vector<Value> value(static_cast<size_t>(values_));
  // Per buffer, a bit per layout it was converted into (the layouts in the order first seen; a
  // model has a handful).
  std::vector<uint32_t> converted(static_cast<size_t>(values_), 0);
  std::vector<const std::string*> layouts;
  double total = 0;
  LayerCost* reader = nullptr;  // the step charged
  auto charge = [&](const Value& v, const std::string& to, double us) {
    uint32_t bit = 0;
    for (size_t i = 0; i < layouts.size() && !bit; ++i)
      if (*layouts[i] == to) bit = 1u << i;
    if (!bit && layouts.size() < 32) {
      layouts.push_back(&to);
      bit = 1u << (layouts.size() - 1);
    }
    auto& done = converted[static_cast<size_t>(v.buffer)];
    if (done & bit) return;
    done |= bit;
    total += us;
    if (conversions) {
      ++*conversions;
      reader->e_conversion_us += us;
    }
  };
  // Out of a layout, its producer's conversion case (the reverse's time taken as the forward's); into
  // one, the reader's. Between two layouts neither of which is plain the replay reorders straight
  // from one into the other, one pass over the tensor, where E knows their conversions from plain
  // alone: the shorter of the two (mobilenet_v2 at batch 8: aBcd16b > acdb of 8x96x112x112 took
  // 2,508 µs in the replay; plain > aBcd16b 2,594 and plain > acdb 7,138 as the bench timed them).
  auto cost = [](const Value& v, const std::string& to, double into_us) {
    const double out_us = !v.layout->empty() && v.producer ? v.producer->out_conversion_us : 0;
    const double in_us = !to.empty() ? into_us : 0;
    return out_us > 0 && in_us > 0 ? std::min(out_us, in_us) : out_us + in_us;
  };
  auto at = [&](int i) -> Value* {
    return i < 0 || !value[static_cast<size_t>(i)].layout ? nullptr : &value[static_cast<size_t>(i)];
  };
  for (const Step& s : steps_) {
    if (!s.cost) {
      if (const Value* in = at(s.in[0]); in && s.out[0] >= 0) value[static_cast<size_t>(s.out[0])] = *in;
      continue;
    }
    const LayerCost& c = *s.cost;
    reader = s.cost;
    const bool measured = c.source == CostSource::kMeasured;
    if (measured && c.in_layout.empty() && s.agnostic) {
      const Value* kept = nullptr;
      for (const int i : s.in)
        if (const Value* in = at(i); in && !in->layout->empty()) {
          kept = in;
          break;
        }
      if (kept) {
        const Value t = *kept;
        for (const int i : s.in)
          if (const Value* in = at(i); in && *in->layout != *t.layout)
            charge(*in, *t.layout, cost(*in, *t.layout, t.producer ? t.producer->out_conversion_us : 0));
        if (s.out[0] >= 0) value[static_cast<size_t>(s.out[0])] = {t.layout, t.producer, s.out[0]};
        continue;
      }
    }
    for (size_t k = 0; k < s.in.size() && k < s.src_shaped.size(); ++k) {
      const Value* in = at(s.in[k]);
      if (!in) continue;
      const std::string& to = measured && s.src_shaped[k] ? c.in_layout : kPlain;
      if (*in->layout != to) charge(*in, to, cost(*in, to, c.in_conversion_us));
    }
    for (size_t o = 0; o < s.out.size(); ++o)
      if (s.out[o] >= 0)
        value[static_cast<size_t>(s.out[o])] = {o == 0 && measured ? &c.out_layout : &kPlain, &c, s.out[o]};
  }
  return total;
}

int64_t choose_layouts(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs) {
  for (auto& c : b.layers) {
    c.e_case.clear();
    c.e_case_us = 0;
    c.e_case_id = c.e_case_system_id = c.e_case_threads = 0;
  }
  if (costs.passed.empty()) return 0;
  std::unordered_map<int, const mp::Layer*> layer_at;
  for (const auto& l : model.layers) layer_at[l.index] = &l;
  // The time a layer's chain takes with its case (the head's t(v) and its epilogue's shares).
  std::unordered_map<int, double> chain_us;
  for (const auto& c : b.layers) {
    chain_us[c.index] += c.us;
    if (c.epilogue_head >= 0) chain_us[c.epilogue_head] += c.us;
  }
  struct Choice {
    LayerCost* layer = nullptr;
    double base_us = 0;  // its chain's time with t(v)'s case
    std::vector<const CaseTime*> cases;
    std::vector<CaseLayouts> layouts;
    size_t taken = 0;
  };
  std::vector<Choice> choices;
  for (auto& c : b.layers) {
    if (c.source != CostSource::kMeasured || !c.epilogue_case.empty() || c.us <= 0) continue;
    const auto l = layer_at.find(c.index);
    if (l == layer_at.end()) continue;
    const std::string dtype = layer_dtype(*l->second, b.dtype), mode = math_mode_of(dtype);
    const auto passed = costs.passed.find({c.key, dtype, mode, c.fusion});
    // The case the layer (a fused chain: its fused case) runs on as S takes it.
    const auto own = costs.best.find({c.key, dtype, mode, c.fusion});
    if (passed == costs.passed.end() || own == costs.best.end()) continue;
    Choice ch;
    ch.layer = &c;
    ch.base_us = chain_us[c.index];
    ch.cases.push_back(nullptr);  // that case, at the chain's time
    ch.layouts.push_back(layouts_of(own->second, costs, c.key, dtype, mode, *l->second));
    std::vector<const CaseTime*> sorted;
    for (const auto& ct : passed->second) sorted.push_back(&ct);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const CaseTime* x, const CaseTime* y) { return x->us < y->us; });
    for (const CaseTime* ct : sorted) {
      if (static_cast<int>(ch.cases.size()) >= kLayoutCandidates) break;
      if (ct->us > kLayoutSlack * ch.base_us) break;
      if (ct->case_id == own->second.case_id && ct->system_id == own->second.system_id) continue;
      CaseLayouts lay = layouts_of(*ct, costs, c.key, dtype, mode, *l->second);
      // One with the layouts of a faster one can only cost more.
      if (std::find(ch.layouts.begin(), ch.layouts.end(), lay) != ch.layouts.end()) continue;
      ch.cases.push_back(ct);
      ch.layouts.push_back(std::move(lay));
    }
    if (ch.cases.size() > 1) choices.push_back(std::move(ch));
  }
  if (choices.empty()) return 0;
  // The pass's cost by the choices: the cases' times alone and the conversions between them (the
  // layers' layouts are their taken case's: take() sets them).
  auto case_us = [](const Choice& ch) { return ch.taken == 0 ? ch.base_us : ch.cases[ch.taken]->us; };
  auto take = [](Choice& ch, size_t j) {
    ch.taken = j;
    set_layouts(*ch.layer, ch.layouts[j]);
  };
  const ConversionWalk walk(b, model);
  auto pass_us = [&] {
    double us = 0;
    for (const auto& ch : choices) us += case_us(ch);
    return us + walk.us();
  };
  // Coordinate descent, as the replay's choice (generator/replay.hpp, choose_for_layouts): layer by
  // layer, in sweeps until none changes (at most 4), each takes the candidate that lowers the
  // estimate most; from t(v)'s cases, and again from each layout family the replay starts from
  // (aBcd8b, aBcd16b, NHWC) with every layer that has a case in it taking it; the lowest kept.
  auto descend = [&]() {
    double best = pass_us();
    for (int sweep = 0; sweep < 4; ++sweep) {
      bool changed = false;
      for (auto& ch : choices) {
        const size_t was = ch.taken;
        size_t pick = was;
        for (size_t j = 0; j < ch.cases.size(); ++j) {
          if (j == was) continue;
          take(ch, j);
          const double t = pass_us();
          if (t < best - 1e-6) {
            best = t;
            pick = j;
          }
        }
        take(ch, pick);
        changed = changed || pick != was;
      }
      if (!changed) break;
    }
    return best;
  };
  std::vector<size_t> kept(choices.size(), 0);
  double best = descend();
  for (size_t i = 0; i < choices.size(); ++i) kept[i] = choices[i].taken;
  for (const std::string family : {"aBcd8b", "aBcd16b", "acdb"}) {
    bool any = false;
    for (auto& ch : choices) {
      size_t pick = 0;
      for (size_t j = 0; j < ch.layouts.size(); ++j)
        if (ch.layouts[j].in_layout == family || ch.layouts[j].out_layout == family) {
          pick = j;
          break;
        }
      any = any || pick != 0;
      take(ch, pick);
    }
    if (!any) continue;
    const double t = descend();
    if (t < best - 1e-6) {
      best = t;
      for (size_t i = 0; i < choices.size(); ++i) kept[i] = choices[i].taken;
    }
  }
  int64_t moved = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    Choice& ch = choices[i];
    take(ch, kept[i]);
    if (ch.taken == 0) continue;
    const CaseTime& taken = *ch.cases[ch.taken];
    ch.layer->e_case = taken.name;
    ch.layer->e_case_us = taken.us;
    ch.layer->e_case_id = taken.case_id;
    ch.layer->e_case_system_id = taken.system_id;
    ch.layer->e_case_threads = taken.threads;
    ++moved;
  }
  return moved;
}

std::vector<std::pair<std::string, int>> layout_choice_cases(const mp::ModelIR& model, const CostTable& costs,
                                                             const std::string& dtype) {
  ModelBounds b;
  b.dtype = dtype;
  b.layers = layer_costs(model, costs, dtype, /*in_graph_order=*/true);
  std::vector<std::pair<std::string, int>> out;
  if (choose_layouts(b, model, costs) == 0) return out;
  for (const auto& c : b.layers)
    if (!c.e_case.empty()) out.emplace_back(c.e_case, static_cast<int>(c.e_case_threads));
  return out;
}

namespace {
void estimate_E_on(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs);
}  // namespace

void estimate_E(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs) {
  // E runs the layers as the replay does: its epilogues are the chains it fuses in the model's
  // order (layer_costs, in_graph_order), which may leave a head S fuses on its unfused case. S's
  // layers stay b's; E's per-layer figures are copied onto them.
  std::vector<LayerCost> as_run = layer_costs(model, costs, b.dtype, /*in_graph_order=*/true);
  const bool same =
      as_run.size() == b.layers.size() &&
      std::equal(as_run.begin(), as_run.end(), b.layers.begin(), [](const LayerCost& x, const LayerCost& y) {
        return x.index == y.index && x.epilogue_head == y.epilogue_head &&
               x.epilogue_case == y.epilogue_case && x.case_id == y.case_id;
      });
  if (same) {
    estimate_E_on(b, model, costs);
    return;
  }
  std::vector<LayerCost> s_layers = std::move(b.layers);
  b.layers = std::move(as_run);
  estimate_E_on(b, model, costs);
  std::unordered_map<int, const LayerCost*> e_of;
  for (const auto& c : b.layers) e_of[c.index] = &c;
  for (auto& c : s_layers) {
    const auto it = e_of.find(c.index);
    if (it == e_of.end()) continue;
    const LayerCost& e = *it->second;
    c.e_us = e.e_us;
    c.e_case = e.e_case;
    c.e_case_us = e.e_case_us;
    c.e_case_id = e.e_case_id;
    c.e_case_system_id = e.e_case_system_id;
    c.e_case_threads = e.e_case_threads;
    c.e_conversion_us = e.e_conversion_us;
    c.in_layout = e.in_layout;
    c.out_layout = e.out_layout;
    c.in_conversion_us = e.in_conversion_us;
    c.out_conversion_us = e.out_conversion_us;
  }
  b.layers = std::move(s_layers);
}

namespace {
void estimate_E_on(ModelBounds& b, const mp::ModelIR& model, const CostTable& costs) {
  b.E.reset();
  b.E_layers = 0;
  b.E_alternatives = 0;
  for (auto& c : b.layers) {
    c.e_case.clear();
    c.e_case_us = 0;
  }
  b.E_conversions = 0;
  b.E_conversions_us = 0;
  if (costs.cache_times.empty()) return;
  const double m = memory_share(model, costs.private_cache_bytes);
  b.E_memory_share = m;
  const auto traffic = activation_traffic(model, b.layers, costs.private_cache_bytes);
  // The cold mix of a case's single calls as a pass makes them (µs): (1 − m) × its lowest call
  // with its weights from the last-level cache + m × from memory among dirty lines, + the layer's output
  // share × what the call from memory with its outputs evicted too costs over the one without; nullopt
  // without the readings it needs.
  auto cold_mix = [&](int64_t system_id, int64_t case_id, int index) -> std::optional<double> {
    const auto it = costs.cache_times.find({system_id, case_id});
    if (it == costs.cache_times.end()) return std::nullopt;
    const auto llc = it->second.find("llc");
    const auto mem = it->second.find("memory");
    const bool need_llc = m < 1.0;
    const bool need_mem = m > 0.0;
    if ((need_llc && llc == it->second.end()) || (need_mem && mem == it->second.end())) return std::nullopt;
    // From memory, among dirty lines ("memory_dirty"): a pass writes its activations, and the
    // lines its layers bring in evict written ones (docs/ANALYZER.md, "The estimate E"); the
    // memory reading with the caches clean where that one is missing (a database of schema 11).
    const auto dirty = it->second.find("memory_dirty");
    const double from_memory = !need_mem ? 0 : dirty != it->second.end() ? dirty->second : mem->second;
    double cold = (need_llc ? (1 - m) * llc->second : 0) + m * from_memory;
    // The output buffers: the share a pass finds beyond the private cache costs what the memory
    // reading with the dst evicted too costs over the one without.
    const auto dst = it->second.find("memory_dst");
    const auto t = traffic.find(index);
    if (dst != it->second.end() && mem != it->second.end() && t != traffic.end())
      cold += t->second.output_share() * std::max(0.0, dst->second - mem->second);
    return cold;
  };
  double e = 0;
  for (auto& c : b.layers) {
    c.e_us.reset();
    if (c.source == CostSource::kMeasured && c.case_us > 0)
      // The cold single calls themselves, as a pass makes them. Until 2026-12-07 their ratio to the
      // warm single calls: in a quiet stage those are within a few percent of t(v), and where they
      // were not, the ratio divided a disturbed warm reading into the cold mix (resnet34's Winograd
      // convolution 256x14x14: t(v) 388 µs, warm 983 in the sweep's stage, 372 again). Never below
      // t(v), the bound: a cold mix under it is the host's noise.
      if (const auto cold = cold_mix(c.case_system_id, c.case_id, c.index))
        c.e_us = c.us * std::max(1.0, *cold / c.case_us);
    b.E_layers += c.e_us ? 1 : 0;
    e += c.e_us.value_or(c.us);
  }
  if (b.E_layers == 0) return;
  // The replay's layout-aware choice, followed (before the floor below, which then applies to the
  // case it takes): a layer it moves to another case takes that case's cold mix where the cache
  // stage timed it (layout_choice_cases), else that case's time alone as its own case's readings
  // scale it.
  b.E_alternatives = choose_layouts(b, model, costs);
  for (auto& c : b.layers) {
    if (c.e_case.empty()) continue;
    double chain = c.us, chain_e = c.e_us.value_or(c.us);
    for (const auto& a : b.layers)
      if (a.epilogue_head == c.index) {
        chain += a.us;
        chain_e += a.e_us.value_or(a.us);
      }
    const auto own = cold_mix(c.e_case_system_id, c.e_case_id, c.index);
    const double delta = own ? std::max(c.e_case_us, *own) - chain_e
                             : (c.e_case_us - chain) * (chain > 0 ? chain_e / chain : 1.0);
    b.E_layers += c.e_us ? 0 : 1;
    c.e_us = c.e_us.value_or(c.us) + delta;
    e += delta;
  }
  // Cold activations: a layer takes at least as long as its compulsory bytes take with those a
  // pass finds beyond the private cache streamed from memory.
  b.E_activations_us = 0;
  const double bw_memory = costs.memory_bandwidth.count(b.dtype) ? costs.memory_bandwidth.at(b.dtype) : 0;
  const auto cache_peak = costs.calibrated_peaks.find({"bytes", b.dtype});
  const double bw_cache = cache_peak != costs.calibrated_peaks.end() ? cache_peak->second : 0;
  if (bw_memory > 0) {
    for (auto& c : b.layers) {
      const auto it = traffic.find(c.index);
      const double cold =
          it == traffic.end() ? 0 : it->second.cold_input_bytes + it->second.cold_output_bytes;
      if (!c.e_us || cold <= 0 || c.bytes <= 0) continue;
      const double from_memory = std::min(cold, static_cast<double>(c.bytes));
      const double floor_us =
          1e6 * (from_memory / bw_memory +
                 (bw_cache > 0 ? (static_cast<double>(c.bytes) - from_memory) / bw_cache : 0));
      if (floor_us <= *c.e_us) continue;
      b.E_activations_us += floor_us - *c.e_us;
      e += floor_us - *c.e_us;
      c.e_us = floor_us;
    }
  }
  estimate_conversions(b, model);
  b.E = e + b.E_conversions_us;
}

}  // namespace

ModelBounds analyze_model(const mp::ModelIR& model, const CostTable& costs, const AnalyzeOptions& options) {
  ModelBounds b;
  b.model = model.name;
  b.batch = model.batch;
  b.assumption = model.assumption;
  b.dtype = options.dtype;
  b.math_mode = math_mode_of(options.dtype);
  b.system_id = costs.system_id;
  if (!costs.peaks.count({"flops", b.dtype}) || !costs.peaks.count({"bytes", b.dtype}))
    b.peaks_note = fmt::format("no calibrated {} peaks for system {} (floorline bench calibrates them)",
                               b.dtype, costs.system_id);
  b.layers = layer_costs(model, costs, b.dtype);
  count_layers(model, b);
  b.S = sequential_bound(b.layers);
  b.S_vendor = vendor_sequential_bound(b.layers);
  for (const auto& c : b.layers) {
    b.vendor_roofline_layers += c.source == CostSource::kMeasured && c.vendor_source == CostSource::kRoofline;
    b.vendor_untimed_layers += c.source == CostSource::kMeasured && c.vendor_source == CostSource::kNone;
  }
  b.measured_fraction = measured_fraction(b.layers, b.S);
  b.H = heuristic_bound(b.layers);
  b.R = roofline_bound(b.layers);

  CriticalPath path = critical_path(model, b.layers);
  b.P = path.us;
  b.critical_path = std::move(path.layers);
  const std::set<int> on_path(b.critical_path.begin(), b.critical_path.end());
  for (auto& c : b.layers) c.on_critical_path = on_path.count(c.index) > 0;
  b.branches = branches_off(model, b.layers, b.critical_path);

  FusedBound fused = fused_bound(model, b.layers, costs, b.dtype);
  b.F = fused.us;
  b.fusions = std::move(fused.fusions);

  b.reduced = reduced_precision_bounds(b.layers, costs, b.dtype);

  MeasuredLatency measured = measured_latency(costs, b.model, b.batch, b.dtype);
  b.M = measured.us;
  b.framework = std::move(measured.framework);

  Replay replay = replay_of(costs, b.model, b.batch, b.dtype);
  b.replay = replay.us;
  b.replay_paired = replay.paired_us;
  b.replay_note = std::move(replay.note);
  b.replay_conversions_us = replay.conversions_us;
  b.replay_conversions = replay.conversions;
  b.replay_layers = std::move(replay.layer_times);
  estimate_E(b, model, costs);

  b.dims = model.dims;
  std::optional<double> bandwidth;
  for (const std::string& dt : {b.dtype, std::string("f32")})
    if (auto it = costs.memory_bandwidth.find(dt); !bandwidth && it != costs.memory_bandwidth.end())
      bandwidth = it->second;
  b.decoder = decoder_step(model, b.S, bandwidth);
  return b;
}

}  // namespace floorline::analyzer
