// Loading a system's measurements and composing the bounds of one model (analyzer.hpp).
#include "floorline/analyzer/analyzer.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/common/dtype.hpp"
#include "floorline/generator/plan.hpp"

namespace floorline::analyzer {

namespace {

std::string text(const benchdb::SqlValue& v) { return benchdb::value_text(v); }
double real(const benchdb::SqlValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return 0;
}
int64_t integer(const benchdb::SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return 0;
}

// The analyzer's data types are text (AnalyzeOptions, database columns); the rules are dtype.hpp's.
DType dtype_of(const std::string& name) { return parse_dtype(name).value_or(DType::kF32); }
std::string math_mode_of(const std::string& dtype) { return std::string(math_mode_name(own_math_mode(dtype_of(dtype)))); }
// Bytes are counted in the models' f32: scaled to the element size of `dtype`.
double byte_scale_of(const std::string& dtype) {
  return static_cast<double>(element_size(dtype_of(dtype))) / static_cast<double>(element_size(DType::kF32));
}

bool fewer_multiplies(const std::string& algorithm) {
  // Winograd and FFT convolutions do fewer multiplications than the direct count: their FLOP/s
  // against that count is not a rate the hardware reached.
  std::string a = algorithm;
  std::transform(a.begin(), a.end(), a.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return a.find("winograd") != std::string::npos || a.find("fft") != std::string::npos;
}

}  // namespace

int64_t roofline_flops(const mp::Layer& l) {
  if (l.config.kind != mp::LayerKind::kConv || l.flops <= 0) return l.flops;
  const auto* x = l.config.inputs.empty() ? nullptr : &l.config.inputs[0];
  const mp::TensorArg* w = nullptr;
  for (const auto& a : l.config.inputs)
    if (a.role == "w") w = &a;
  if (!x || !w || x->shape.size() != w->shape.size() || x->shape.size() < 3 || l.config.outputs.empty()) return l.flops;
  const size_t n = x->shape.size() - 2;
  const auto pads = l.config.attr_ints("pads"), strides = l.config.attr_ints("strides"), dil = l.config.attr_ints("dil");
  const auto& y = l.config.outputs[0].shape;
  if (pads.size() != 2 * n || strides.size() != n || dil.size() != n || y.size() != x->shape.size()) return l.flops;
  // MACs per (output channel, input channel of the group): Π over spatial dims of the (output, tap)
  // pairs that read inside the input.
  int64_t taps = 1;
  for (size_t d = 0; d < n; ++d) {
    int64_t valid = 0;
    for (int64_t o = 0; o < y[2 + d]; ++o)
      for (int64_t k = 0; k < w->shape[2 + d]; ++k) {
        const int64_t at = o * strides[d] - pads[d] + k * dil[d];
        valid += at >= 0 && at < x->shape[2 + d] ? 1 : 0;
      }
    taps *= valid;
  }
  int64_t f = 2 * y[0] * y[1] * w->shape[1] * taps;
  for (const auto& a : l.config.inputs)
    if (a.role == "bias") {
      int64_t outs = 1;
      for (auto v : y) outs *= v;
      f += outs;
    }
  return std::min(f, l.flops);
}

namespace {

// Rows: key, dtype, math_mode, fusion, median_us, case_id, backend, algorithm, layout.
CaseTime case_time(const std::vector<benchdb::SqlValue>& v) {
  const CaseId id{text(v[6]), text(v[7]), text(v[1]), text(v[2]), text(v[8]), text(v[3]), text(v[0])};
  CaseTime t;
  t.us = real(v[4]);
  t.case_id = integer(v[5]);
  t.name = case_name(id);
  t.backend = id.backend;
  t.algorithm = id.algorithm;
  t.layout = id.layout;
  return t;
}

}  // namespace

Result<int64_t> choose_system(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                              std::optional<int64_t> requested) {
  if (requested) {
    FL_ASSIGN_OR_RETURN(const auto r, db.query("SELECT count(*) FROM systems WHERE id = ?1", {*requested}));
    if (integer(r.rows.at(0).at(0)) == 0) return make_error("{}: no system {} (floorline db info lists them)", db.path(), *requested);
    return *requested;
  }
  std::set<std::string> keys;
  for (const auto& m : models)
    for (const auto& l : m.layers)
      if (l.cost_bearing()) keys.insert(l.key);
  std::map<int64_t, int64_t> hits;
  FL_TRY(db.for_each("SELECT b.system_id, lc.key FROM best_measurements b JOIN layer_configs lc ON lc.id = b.config_id", {},
                     [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                       if (keys.count(text(v[1]))) ++hits[integer(v[0])];
                       return Status{};
                     }));
  if (hits.empty())
    return make_error("{}: no measurement of any layer of these models (run floorline bench on them first)", db.path());
  int64_t best = 0, most = -1;
  for (const auto& [id, n] : hits)
    if (n >= most) best = id, most = n;
  return best;
}

Result<CostTable> load_costs(benchdb::Database& db, int64_t system_id) {
  CostTable t;
  t.system_id = system_id;
  FL_ASSIGN_OR_RETURN(const auto sys, db.query("SELECT device_kind, device_name, onednn_version, cudnn_version, threads "
                                               "FROM systems WHERE id = ?1",
                                               {system_id}));
  if (sys.rows.empty()) return make_error("{}: no system {}", db.path(), system_id);
  const auto& s = sys.rows[0];
  t.device_kind = text(s[0]);
  t.device_name = text(s[1]);
  t.threads = integer(s[4]);
  t.system = t.device_kind == "gpu"
                 ? fmt::format("{} (gpu, cudnn {})", t.device_name, text(s[3]))
                 : fmt::format("{} (cpu, onednn {}, {} thread{})", t.device_name, text(s[2]), integer(s[4]),
                               integer(s[4]) == 1 ? "" : "s");
  const std::vector<benchdb::SqlValue> id = {system_id};
  FL_TRY(db.for_each(
      "SELECT lc.key, b.dtype, b.math_mode, b.fusion, b.median_us, b.case_id, c.backend, c.algorithm, c.layout "
      "FROM best_measurements b JOIN cases c ON c.id = b.case_id JOIN layer_configs lc ON lc.id = b.config_id "
      "WHERE b.system_id = ?1",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        t.best[{text(v[0]), text(v[1]), text(v[2]), text(v[3])}] = case_time(v);
        t.modes.emplace(text(v[1]), text(v[2]));
        return Status{};
      }));
  FL_TRY(db.for_each(
      "SELECT lc.key, c.dtype, c.math_mode, c.fusion, m.median_us, c.id, c.backend, c.algorithm, c.layout "
      "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
      "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.is_default = 1 AND m.status = 'passed' AND m.median_us IS NOT NULL",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        t.heuristic[{text(v[0]), text(v[1]), text(v[2]), text(v[3])}] = case_time(v);
        return Status{};
      }));
  FL_TRY(db.for_each(
      "SELECT lc.key, c.dtype, c.math_mode, c.fusion, m.median_us, c.id, c.backend, c.algorithm, c.layout, "
      "       coalesce(json_extract(c.params, '$.feeds'), '') "
      "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
      "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.status = 'passed' AND m.median_us IS NOT NULL",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        if (!benchdb::is_conversion_layout(text(v[8]))) return Status{};
        t.conversions[{text(v[0]), text(v[1]), text(v[2]), text(v[9])}].push_back(case_time(v));
        return Status{};
      }));
  FL_TRY(db.for_each("SELECT peak, dtype, value_per_s FROM system_peaks WHERE system_id = ?1", id,
                     [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                       t.calibrated_peaks[{text(v[0]), text(v[1])}] = real(v[2]);
                       t.peaks[{text(v[0]), text(v[1])}] = real(v[2]);
                       return Status{};
                     }));
  FL_TRY(benchdb::for_each_row<benchdb::FrameworkLatencyRow>(db, benchdb::framework_latencies_table(), "", {},
                               [&](benchdb::FrameworkLatencyRow& r) -> Status {
                                 const bool cpu = r.device == "cpu";
                                 if ((t.device_kind == "cpu") == cpu &&
                                     (cpu || r.device == t.device_name))
                                   t.framework.push_back(std::move(r));
                                 return Status{};
                               }));
  return t;
}

void raise_peaks(CostTable& costs, const std::vector<mp::ModelIR>& models, const std::string& dtype) {
  const std::string mode = math_mode_of(dtype);
  const double byte_scale = byte_scale_of(dtype);
  struct Top { double rate = 0; std::string by; };
  Top flops, bytes;
  for (const auto& m : models)
    for (const auto& l : m.layers) {
      if (!l.cost_bearing() || !l.shapes_known) continue;
      auto it = costs.best.find({l.key, dtype, mode, ""});
      if (it == costs.best.end() || it->second.us <= 0) continue;
      const double f = static_cast<double>(roofline_flops(l)) / it->second.us * 1e6;
      const double b = static_cast<double>(l.bytes) * byte_scale / it->second.us * 1e6;
      if (!fewer_multiplies(it->second.algorithm) && f > flops.rate) flops = {f, it->second.name};
      if (b > bytes.rate) bytes = {b, it->second.name};
    }
  for (const auto& [peak, top] : {std::pair{std::string("flops"), flops}, std::pair{std::string("bytes"), bytes}}) {
    auto it = costs.peaks.find({peak, dtype});
    if (it == costs.peaks.end() || top.rate <= it->second) continue;
    costs.peak_notes.push_back(fmt::format("{} peak raised from the calibrated {:.1f} G/s to {:.1f} G/s, reached by {}", peak,
                                           it->second / 1e9, top.rate / 1e9, top.by));
    it->second = top.rate;
  }
}

ModelBounds analyze_model(const mp::ModelIR& model, const CostTable& costs, const AnalyzeOptions& options) {
  ModelBounds b;
  b.model = model.name;
  b.batch = model.batch;
  b.dtype = options.dtype;
  b.math_mode = math_mode_of(options.dtype);
  b.system_id = costs.system_id;
  const auto flops_peak = costs.peaks.find({"flops", b.dtype});
  const auto bytes_peak = costs.peaks.find({"bytes", b.dtype});
  const bool have_peaks = flops_peak != costs.peaks.end() && bytes_peak != costs.peaks.end();
  if (!have_peaks)
    b.peaks_note = fmt::format("no calibrated {} peaks for system {} (floorline bench calibrates them)", b.dtype, costs.system_id);
  // Layers with more bytes than a dtype of half the width (bytes are counted in the model's f32).
  const double byte_scale = byte_scale_of(b.dtype);

  std::unordered_map<int, size_t> cost_at;  // Layer::index → position in b.layers
  std::unordered_map<int, double> weight;   // Layer::index → t(v) (0 for view layers)
  for (const auto& l : model.layers) {
    if (l.cost == mp::CostClass::kView) ++b.view_layers;
    if (l.cost == mp::CostClass::kHost) ++b.host_layers;
    if (!l.cost_bearing()) continue;
    LayerCost c;
    c.index = l.index;
    c.name = l.name;
    c.kind = l.config.kind == mp::LayerKind::kUnsupported ? l.op_type : std::string(mp::kind_name(l.config.kind));
    c.key = l.key;
    c.flops = l.flops;
    c.roofline_flops = roofline_flops(l);
    c.bytes = l.bytes;
    if (have_peaks && l.shapes_known)
      c.roofline_us = std::max(static_cast<double>(c.roofline_flops) / flops_peak->second,
                               static_cast<double>(l.bytes) * byte_scale / bytes_peak->second) * 1e6;
    if (auto it = costs.best.find({l.key, b.dtype, b.math_mode, ""}); it != costs.best.end()) {
      c.source = "measured";
      c.us = it->second.us;
      c.best_case = it->second.name;
      c.algorithm = it->second.algorithm;
      // Conversions name the case they feed (oneDNN: its algorithm) or the layout they feed
      // (cuda: "layout:nhwc", shared by every algorithm in that layout).
      auto cv = costs.conversions.find({l.key, b.dtype, b.math_mode, c.algorithm});
      if (cv == costs.conversions.end() && !it->second.layout.empty())
        cv = costs.conversions.find({l.key, b.dtype, b.math_mode, "layout:" + it->second.layout});
      if (cv != costs.conversions.end())
        for (const auto& x : cv->second) c.conversion_us += x.us;
      ++b.measured_layers;
    } else if (c.roofline_us) {
      c.source = "roofline";
      c.us = *c.roofline_us;
      ++b.roofline_layers;
    } else {
      c.source = "none";
      ++b.untimed_layers;
      b.complete = false;
    }
    if (auto it = costs.heuristic.find({l.key, b.dtype, b.math_mode, ""}); it != costs.heuristic.end())
      c.heuristic_us = it->second.us;
    else
      ++b.heuristic_missing;
    cost_at[l.index] = b.layers.size();
    weight[l.index] = c.us;
    b.layers.push_back(std::move(c));
  }

  {
    std::unordered_map<int, std::vector<int>> through;  // view layer → the cost-bearing layers behind it
    for (const auto& l : model.layers) {
      std::vector<int> ps;
      for (int p : l.preds) {
        if (cost_at.count(p)) ps.push_back(p);
        else if (auto it = through.find(p); it != through.end()) ps.insert(ps.end(), it->second.begin(), it->second.end());
      }
      std::sort(ps.begin(), ps.end());
      ps.erase(std::unique(ps.begin(), ps.end()), ps.end());
      if (auto it = cost_at.find(l.index); it != cost_at.end()) b.layers[it->second].preds = std::move(ps);
      else if (l.cost == mp::CostClass::kView) through[l.index] = std::move(ps);
    }
  }

  double measured_us = 0;
  for (const auto& c : b.layers) {
    b.S += c.us;
    b.H += c.heuristic_us.value_or(c.us);
    b.conversions_us += c.conversion_us;
    if (c.source == "measured") measured_us += c.us;
    if (c.roofline_us) b.R = b.R.value_or(0) + *c.roofline_us;
  }
  if (!have_peaks || (b.R && std::any_of(b.layers.begin(), b.layers.end(), [](const LayerCost& c) { return !c.roofline_us; })))
    b.R.reset();  // a roofline bound over some layers only would not be a bound
  b.measured_fraction = b.S > 0 ? measured_us / b.S : (b.untimed_layers ? 0 : 1);

  // P: longest path, every layer (view layers weigh 0) in topological order.
  {
    std::unordered_map<int, double> dist;
    std::unordered_map<int, int> from;
    int sink = -1;
    double longest = -1;
    std::vector<const mp::Layer*> order;
    for (const auto& l : model.layers)
      if (l.cost_bearing() || l.cost == mp::CostClass::kView) order.push_back(&l);
    std::sort(order.begin(), order.end(), [](const mp::Layer* a, const mp::Layer* c) { return a->index < c->index; });
    for (const auto* l : order) {
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
    b.P = std::max(0.0, longest);
    for (int v = sink; v >= 0; v = from[v]) b.critical_path.push_back(v);
    std::reverse(b.critical_path.begin(), b.critical_path.end());
    for (int v : b.critical_path)
      if (auto it = cost_at.find(v); it != cost_at.end()) b.layers[it->second].on_critical_path = true;
    // Off the critical path: each layer belongs to the branch leaving the path where its first
    // input's chain meets the path (the fork), or to a source branch (-1).
    const std::set<int> on_path(b.critical_path.begin(), b.critical_path.end());
    std::unordered_map<int, int> anchor;
    std::map<int, Branch> branches;
    for (const auto* l : order) {
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
    for (auto& [a, br] : branches) {
      br.fork_name = a >= 0 ? named.at(a)->name : "(graph inputs)";
      if (br.us > 0) b.branches.push_back(br);
    }
    std::sort(b.branches.begin(), b.branches.end(), [](const Branch& x, const Branch& y) { return x.us > y.us; });
  }

  // F: fusable chains, the largest saving first; a layer is fused at most once.
  {
    std::unordered_map<int, const mp::Layer*> by_index;
    for (const auto& l : model.layers) by_index[l.index] = &l;
    for (const auto& m : gen::fusion_matches(model)) {
      FusionUse f;
      f.layers.push_back(m.head);
      for (int a : m.absorbed) f.layers.push_back(a);
      bool all_costed = true;
      for (int v : f.layers) {
        auto it = cost_at.find(v);
        if (it == cost_at.end() || b.layers[it->second].source == "none") all_costed = false;
        else f.unfused_us += b.layers[it->second].us;
      }
      if (!all_costed) continue;
      const LayerCost& head = b.layers[cost_at.at(m.head)];
      f.pattern = head.kind + "+" + m.name;
      if (m.folded) {
        if (head.source == "measured") {
          f.fused_us = head.us;
          f.fused_case = head.best_case;
        }
      } else if (auto it = costs.best.find({head.key, b.dtype, b.math_mode, m.name}); it != costs.best.end()) {
        f.fused_us = it->second.us;
        f.fused_case = it->second.name;
      }
      b.fusions.push_back(std::move(f));
    }
    std::vector<size_t> order(b.fusions.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto saving = [&](const FusionUse& f) { return f.fused_us ? f.unfused_us - *f.fused_us : 0.0; };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return saving(b.fusions[x]) > saving(b.fusions[y]); });
    std::set<int> fused;
    b.F = b.S;
    for (size_t i : order) {
      FusionUse& f = b.fusions[i];
      if (!f.fused_us || saving(f) <= 0) continue;
      if (std::any_of(f.layers.begin(), f.layers.end(), [&](int v) { return fused.count(v) > 0; })) continue;
      f.applied = true;
      fused.insert(f.layers.begin(), f.layers.end());
      b.F -= saving(f);
    }
  }

  // Reduced precision: every other math mode the system has cases in.
  for (const auto& [dtype, mode] : costs.modes) {
    if (dtype == b.dtype && mode == b.math_mode) continue;
    ReducedBound r;
    r.dtype = dtype;
    r.math_mode = mode;
    for (const auto& c : b.layers) {
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
    b.reduced.push_back(std::move(r));
  }

  // M: imported framework latencies of this model, batch and dtype.
  for (const auto& f : costs.framework) {
    if (f.model_name != b.model || f.batch != b.batch || f.dtype != b.dtype) continue;
    if (f.runtime == benchdb::kReplayRuntime) {  // Floorline's own replay: of this system only, never M
      if (f.settings == benchdb::replay_settings(costs.system_id)) {
        b.replay = f.median_us;
        b.replay_note = f.source;
        // generator::replay_row's make-up (an older or hand-made row may have plain text).
        const auto j = nlohmann::json::parse(f.source, nullptr, false);
        if (j.is_object() && j.contains("conversions_us") && j.contains("conversions") && j.contains("layers")) {
          b.replay_conversions_us = j["conversions_us"].get<double>();
          b.replay_conversions = j["conversions"].get<int64_t>();
          b.replay_note = fmt::format("{} layers, {} layout conversions ({:.1f} µs), {} of {} output buffers reused",
                                      j["layers"].get<int64_t>(), b.replay_conversions, *b.replay_conversions_us,
                                      j.value("buffers_reused", int64_t{0}),
                                      j.value("buffers", int64_t{0}) + j.value("buffers_reused", int64_t{0}));
        }
      }
      continue;
    }
    if (costs.device_kind == "cpu" && f.threads > 0 && f.threads != costs.threads) continue;  // not comparable
    b.framework.push_back({f.runtime, f.settings, f.runtime_version, f.threads, f.median_us});
    if (!b.M || f.median_us < *b.M) b.M = f.median_us;
  }
  return b;
}

}  // namespace floorline::analyzer
