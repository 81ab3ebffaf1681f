// Table, JSON, CSV and DOT outputs of the analyzer (report.hpp). HTML is in html.cpp.
#include "floorline/analyzer/report.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/throughput.hpp"
#include "floorline/common/output.hpp"
#include "math_mode.hpp"
#include "report_parts.hpp"

namespace floorline::analyzer {

namespace {

using output::Cell;
using output::Field;
using output::float_cell;
using output::int_cell;
using output::text_cell;

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

std::optional<double> ci_hi(const std::optional<Interval>& i) {
  if (!i) return std::nullopt;
  return i->hi;
}

// The reduced math modes present in the report, in a stable order.
std::vector<std::string> reduced_modes(const Report& r) {
  std::set<std::string> modes;
  for (const auto& m : r.models)
    for (const auto& x : m.bounds.reduced) modes.insert(x.math_mode);
  return {modes.begin(), modes.end()};
}

std::optional<double> reduced_us(const ModelBounds& b, const std::string& mode) {
  for (const auto& x : b.reduced)
    if (x.math_mode == mode) return x.us;
  return std::nullopt;
}

std::vector<Field<ModelReport>> model_fields(const Report& r) {
  using M = ModelReport;
  std::vector<Field<M>> f = {
      {"model", [](const M& m) { return text_cell(m.bounds.model); }},
      {"batch", [](const M& m) { return int_cell(m.bounds.batch); }},
      {"dtype", [](const M& m) { return text_cell(m.bounds.dtype); }},
      {"S_us", [](const M& m) { return float_cell(m.bounds.S, 1); }},
      // S over the vendor libraries' cases only (Floorline's own kernels left out).
      {"S_vendor_us", [](const M& m) { return float_cell(m.bounds.S_vendor, 1); }},
      {"P_us", [](const M& m) { return float_cell(m.bounds.P, 1); }},
      {"H_us", [](const M& m) { return float_cell(m.bounds.H, 1); }},
      {"F_us", [](const M& m) { return float_cell(m.bounds.F, 1); }},
      {"R_us", [](const M& m) { return float_cell(m.bounds.R, 1); }},
      {"M_us", [](const M& m) { return float_cell(m.bounds.M, 1); }},
      {"replay_us", [](const M& m) { return float_cell(m.bounds.replay, 1); }},
      // The replay at the host's state when S's cases were timed (the paired measure).
      {"replay_paired_us", [](const M& m) { return float_cell(m.bounds.replay_paired, 1); }},
      // E, the composed estimate (never a bound), and the share of the weights it takes from memory.
      {"E_us", [](const M& m) { return float_cell(m.bounds.E, 1); }},
      {"E_memory_share",
       [](const M& m) {
         return m.bounds.E ? float_cell(m.bounds.E_memory_share, 2) : output::missing_cell();
       }},
      // The layout conversions E counts between the chosen cases.
      {"E_conversions_us",
       [](const M& m) {
         return m.bounds.E ? float_cell(m.bounds.E_conversions_us, 1) : output::missing_cell();
       }},
      // What E adds for the activations a pass reads and writes beyond the private cache.
      {"E_activations_us",
       [](const M& m) {
         return m.bounds.E ? float_cell(m.bounds.E_activations_us, 1) : output::missing_cell();
       }},
      // The layers E runs on another case than t(v)'s for its layouts (choose_layouts).
      {"E_alternatives",
       [](const M& m) { return m.bounds.E ? int_cell(m.bounds.E_alternatives) : output::missing_cell(); }},
      // The high ends of the bootstrap intervals (confidence_intervals; the low end is the bound).
      {"S_ci_hi_us", [](const M& m) { return float_cell(ci_hi(m.bounds.S_ci), 1); }},
      {"P_ci_hi_us", [](const M& m) { return float_cell(ci_hi(m.bounds.P_ci), 1); }},
      {"F_ci_hi_us", [](const M& m) { return float_cell(ci_hi(m.bounds.F_ci), 1); }},
  };
  for (const auto& mode : reduced_modes(r))
    f.push_back(
        {"S_" + mode + "_us", [mode](const M& m) { return float_cell(reduced_us(m.bounds, mode), 1); }});
  const std::vector<Field<M>> tail = {
      {"S_over_P", [](const M& m) { return float_cell(ratio(m.bounds.S, m.bounds.P), 2); }},
      {"H_over_S", [](const M& m) { return float_cell(ratio(m.bounds.H, m.bounds.S), 2); }},
      {"S_over_F", [](const M& m) { return float_cell(ratio(m.bounds.S, m.bounds.F), 2); }},
      {"S_over_R", [](const M& m) { return float_cell(ratio(m.bounds.S, m.bounds.R), 2); }},
      {"M_over_S", [](const M& m) { return float_cell(ratio(m.bounds.M, m.bounds.S), 2); }},
      {"replay_over_S", [](const M& m) { return float_cell(ratio(m.bounds.replay, m.bounds.S), 2); }},
      {"E_over_S", [](const M& m) { return float_cell(ratio(m.bounds.E, m.bounds.S), 2); }},
      {"replay_over_E", [](const M& m) { return float_cell(ratio(m.bounds.replay, m.bounds.E), 3); }},
      {"replay_paired_over_S",
       [](const M& m) { return float_cell(ratio(m.bounds.replay_paired, m.bounds.S), 2); }},
      {"replay_paired_over_E",
       [](const M& m) { return float_cell(ratio(m.bounds.replay_paired, m.bounds.E), 3); }},
      {"measured_share", [](const M& m) { return float_cell(m.bounds.measured_fraction, 3); }},
      {"layers", [](const M& m) { return int_cell(static_cast<int64_t>(m.bounds.layers.size())); }},
      {"roofline_layers", [](const M& m) { return int_cell(m.bounds.roofline_layers); }},
      {"untimed_layers", [](const M& m) { return int_cell(m.bounds.untimed_layers); }},
      {"vendor_roofline_layers", [](const M& m) { return int_cell(m.bounds.vendor_roofline_layers); }},
      {"critical_path_layers",
       [](const M& m) {
         int64_t n = 0;
         for (const auto& l : m.bounds.layers) n += l.on_critical_path ? 1 : 0;
         return int_cell(n);
       }},
      {"conversions_us", [](const M& m) { return float_cell(m.bounds.conversions_us, 1); }},
  };
  f.insert(f.end(), tail.begin(), tail.end());
  return f;
}

struct LayerRow {
  const ModelBounds* model;
  const LayerCost* layer;
};

std::vector<Field<LayerRow>> layer_fields() {
  using L = LayerRow;
  auto opt = [](const std::optional<double>& v) { return float_cell(v, 2); };
  return {
      {"model", [](const L& r) { return text_cell(r.model->model); }},
      {"batch", [](const L& r) { return int_cell(r.model->batch); }},
      {"index", [](const L& r) { return int_cell(r.layer->index); }},
      {"name", [](const L& r) { return text_cell(r.layer->name); }},
      {"kind", [](const L& r) { return text_cell(r.layer->kind); }},
      {"source", [](const L& r) { return text_cell(std::string(cost_source_name(r.layer->source))); }},
      {"time_us",
       [](const L& r) {
         return r.layer->source == CostSource::kNone ? output::missing_cell() : float_cell(r.layer->us, 2);
       }},
      {"share_of_S",
       [](const L& r) { return float_cell(r.model->S > 0 ? r.layer->us / r.model->S : 0.0, 4); }},
      {"heuristic_us", [opt](const L& r) { return opt(r.layer->heuristic_us); }},
      {"roofline_us", [opt](const L& r) { return opt(r.layer->roofline_us); }},
      {"conversion_us", [](const L& r) { return float_cell(r.layer->conversion_us, 2); }},
      // Its share of E: t(v) in the cache state the graph leaves it in.
      {"e_us", [opt](const L& r) { return opt(r.layer->e_us); }},
      // The layout conversions E charges at the layer's inputs (part of E, not of e_us).
      {"e_conversion_us", [](const L& r) { return float_cell(r.layer->e_conversion_us, 2); }},
      // The case E runs the layer on where its layout choice took another than t(v)'s ("" else).
      {"e_case", [](const L& r) { return text_cell(r.layer->e_case); }},
      // The layouts E takes its case to read its activation input in and write its output in
      // ("" plain; "aBcd8b", "acdb": oneDNN's spelling).
      {"in_layout", [](const L& r) { return text_cell(r.layer->in_layout); }},
      {"out_layout", [](const L& r) { return text_cell(r.layer->out_layout); }},
      // Its candidates (passed and raced out) and the runner-up, the second-fastest passed case.
      {"candidates", [](const L& r) { return int_cell(r.layer->candidates); }},
      {"raced_out", [](const L& r) { return int_cell(r.layer->raced_out); }},
      {"runner_up_us", [opt](const L& r) { return opt(r.layer->runner_up_us); }},
      // An activation S counts in its producer's epilogue: the fused case, and the activation's own time.
      {"epilogue_case", [](const L& r) { return text_cell(r.layer->epilogue_case); }},
      {"own_us",
       [](const L& r) {
         return r.layer->epilogue_case.empty() ? output::missing_cell() : float_cell(r.layer->own_us, 2);
       }},
      // The layer's time in S_vendor (vendor libraries only) and where it comes from.
      {"vendor_source",
       [](const L& r) { return text_cell(std::string(cost_source_name(r.layer->vendor_source))); }},
      {"vendor_us",
       [](const L& r) {
         return r.layer->vendor_source == CostSource::kNone ? output::missing_cell()
                                                            : float_cell(r.layer->vendor_us, 2);
       }},
      // How the best case was measured: passes (placements) and the spread of their medians.
      {"passes", [](const L& r) { return int_cell(r.layer->passes); }},
      {"placements", [](const L& r) { return int_cell(r.layer->placements); }},
      {"spread", [](const L& r) { return float_cell(r.layer->spread, 3); }},
      {"noisy", [](const L& r) { return int_cell(r.layer->noisy); }},
      {"critical_path", [](const L& r) { return int_cell(r.layer->on_critical_path ? 1 : 0); }},
      {"flops", [](const L& r) { return int_cell(r.layer->flops); }},
      {"roofline_flops", [](const L& r) { return int_cell(r.layer->roofline_flops); }},
      {"bytes", [](const L& r) { return int_cell(r.layer->bytes); }},
      {"algorithm", [](const L& r) { return text_cell(r.layer->algorithm); }},
      // The thread count of the best case (the thread budget: at most the system's threads).
      {"threads", [](const L& r) { return int_cell(r.layer->threads); }},
      {"key", [](const L& r) { return text_cell(r.layer->key); }},
  };
}

std::vector<LayerRow> layer_rows(const Report& r) {
  std::vector<LayerRow> rows;
  for (const auto& m : r.models)
    for (const auto& l : m.bounds.layers) rows.push_back({&m.bounds, &l});
  return rows;
}

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// --- throughput view (throughput.hpp) ----------------------------------------------------------

struct ThroughputRow {
  const ModelThroughput* model;
  const ThroughputSeries* series;
};

std::vector<Field<ThroughputRow>> throughput_fields(const std::vector<ModelThroughput>& view) {
  using T = ThroughputRow;
  std::vector<Field<T>> f = {
      {"model", [](const T& r) { return text_cell(r.model->model); }},
      {"series", [](const T& r) { return text_cell(r.series->name); }},
  };
  // Named only when some series has no batch-1 point: its single stream is then another batch.
  bool other_batch = false;
  for (const auto& t : view) {
    other_batch |= t.bound.single_stream.batch != 1;
    for (const auto& s : t.runtimes) other_batch |= s.single_stream.batch != 1;
  }
  if (other_batch)
    f.push_back({"single_stream_batch", [](const T& r) { return int_cell(r.series->single_stream.batch); }});
  f.push_back(
      {"single_stream_us", [](const T& r) { return float_cell(r.series->single_stream.latency_us, 1); }});
  for (int64_t batch : throughput_batches(view))
    f.push_back({fmt::format("b{}_per_s", batch), [batch](const T& r) {
                   for (const auto& p : r.series->points)
                     if (p.batch == batch) return float_cell(p.inferences_per_s, 2);
                   return output::missing_cell();
                 }});
  f.push_back(
      {"offline_per_s", [](const T& r) { return float_cell(r.series->offline.inferences_per_s, 2); }});
  f.push_back({"offline_batch", [](const T& r) { return int_cell(r.series->offline.batch); }});
  f.push_back({"over_bound", [](const T& r) { return float_cell(r.series->offline_over_bound, 2); }});
  return f;
}

std::vector<ThroughputRow> throughput_rows(const std::vector<ModelThroughput>& view) {
  std::vector<ThroughputRow> rows;
  for (const auto& t : view) {
    rows.push_back({&t, &t.bound});
    for (const auto& s : t.runtimes) rows.push_back({&t, &s});
  }
  return rows;
}

std::string join_batches(const std::vector<int64_t>& batches) {
  std::string s;
  for (int64_t b : batches) s += (s.empty() ? "" : ", ") + std::to_string(b);
  return s;
}

// The table's throughput section: only when it says more than the summary (several batch sizes,
// or a runtime to compare with).
std::string throughput_section(const Report& r) {
  const auto view = throughput_view(r.models);
  bool runtimes = false;
  for (const auto& t : view) runtimes |= !t.runtimes.empty();
  if (view.empty() || (throughput_batches(view).size() < 2 && !runtimes)) return "";
  std::string out =
      "\nthroughput (MLPerf scenarios): single stream = latency at batch 1 or the smallest analyzed (µs), "
      "offline = batch / "
      "latency (inferences/s) at each batch and at the best batch analyzed; over_bound: a runtime's "
      "offline throughput over the bound's\n";
  out += output::render_table(throughput_fields(view), throughput_rows(view));
  for (const auto& t : view) {
    for (const auto& s : t.runtimes)
      if (!s.faster_than_bound.empty())
        out += fmt::format("  note: {} {} is faster than S at batch {}: S is no lower bound there\n", t.model,
                           s.name, join_batches(s.faster_than_bound));
    if (t.bound.points.size() > 1 && t.bound.offline.batch == t.bound.points.back().batch)
      out += fmt::format("  note: {}: the bound's throughput still rises at batch {}, the largest analyzed\n",
                         t.model, t.bound.offline.batch);
  }
  return out;
}

// --- language-model view (llm.hpp) -------------------------------------------------------------

// The fields of a decoder step's row: the same names in the table and in JSON's "decoder".
std::vector<Field<ModelReport>> decoder_fields() {
  using M = ModelReport;
  auto d = [](const M& m) -> const DecoderStep& { return *m.bounds.decoder; };
  auto mib = [](int64_t bytes) { return float_cell(static_cast<double>(bytes) / (1 << 20), 1); };
  return {
      {"model", [](const M& m) { return text_cell(m.bounds.model); }},
      {"batch", [](const M& m) { return int_cell(m.bounds.batch); }},
      {"phase", [d](const M& m) { return text_cell(d(m).phase); }},
      {"new_tokens", [d](const M& m) { return int_cell(d(m).new_tokens); }},
      {"past_tokens", [d](const M& m) { return int_cell(d(m).past_tokens); }},
      {"S_us", [](const M& m) { return float_cell(m.bounds.S, 1); }},
      {"tokens_per_s", [d](const M& m) { return float_cell(d(m).tokens_per_s, 1); }},
      {"M_us", [](const M& m) { return float_cell(m.bounds.M, 1); }},
      {"M_tokens_per_s",
       [d](const M& m) {
         if (!m.bounds.M || *m.bounds.M <= 0) return output::missing_cell();
         return float_cell(static_cast<double>(m.bounds.batch * d(m).new_tokens) * 1e6 / *m.bounds.M, 1);
       }},
      {"kv_cache_mib", [d, mib](const M& m) { return mib(d(m).kv_cache_bytes); }},
      {"weights_mib", [d, mib](const M& m) { return mib(d(m).weight_bytes); }},
      {"memory_floor_us", [d](const M& m) { return float_cell(d(m).memory_floor_us, 1); }},
      {"S_over_floor", [d](const M& m) { return float_cell(d(m).S_over_floor, 2); }},
      {"measured_share", [](const M& m) { return float_cell(m.bounds.measured_fraction, 3); }},
      {"if_branch",
       [d](const M& m) {
         return d(m).if_branch.empty() ? output::missing_cell() : text_cell(d(m).if_branch);
       }},
  };
}

std::vector<ModelReport> decoder_rows(const Report& r) {
  std::vector<ModelReport> rows;
  for (const auto& m : r.models)
    if (m.bounds.decoder) rows.push_back(m);
  return rows;
}

// The table's language-model section: only when a decoder was analyzed.
std::string decoder_section(const Report& r) {
  const auto rows = decoder_rows(r);
  if (rows.empty()) return "";
  std::string out =
      "\nlanguage models: S of a prefill step bounds the time to first token (TTFT), S of a decode step the "
      "time per output token (TPOT) at its past length; tokens_per_s = batch × new tokens / S (M_*: the "
      "fastest runtime); kv_cache: the cache after the step; memory_floor: (weights + cache read) / the "
      "memory bandwidth (a copy of 4x the largest cache), a reference, not a bound; if_branch: the branch a "
      "merged decoder's If runs at that past length\n";
  auto fields = decoder_fields();
  if (std::none_of(rows.begin(), rows.end(),
                   [](const ModelReport& m) { return !m.bounds.decoder->if_branch.empty(); }))
    std::erase_if(fields, [](const auto& f) { return f.name == "if_branch"; });  // no merged decoder
  return out + output::render_table(fields, rows);
}

nlohmann::json point_json(const ThroughputPoint& p) {
  return {{"batch", p.batch},
          {"latency_us", p.latency_us},
          {"inferences_per_s", p.inferences_per_s},
          {"complete", p.complete}};
}

nlohmann::json throughput_json(const Report& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : throughput_view(r.models)) {
    auto series = [](const ThroughputSeries& s) {
      nlohmann::json points = nlohmann::json::array();
      for (const auto& p : s.points) points.push_back(point_json(p));
      nlohmann::json o = {{"name", s.name},
                          {"single_stream", point_json(s.single_stream)},
                          {"offline", point_json(s.offline)},
                          {"points", points}};
      if (!s.bound) {
        o["runtime"] = s.runtime;
        o["runtime_version"] = s.runtime_version;
        o["settings"] = s.settings;
        o["threads"] = s.threads;
        o["offline_over_bound"] = opt_json(s.offline_over_bound);
        o["faster_than_bound"] = s.faster_than_bound;
      }
      return o;
    };
    nlohmann::json runtimes = nlohmann::json::array();
    for (const auto& s : t.runtimes) runtimes.push_back(series(s));
    out.push_back(
        {{"model", t.model}, {"dtype", t.dtype}, {"bound", series(t.bound)}, {"runtimes", runtimes}});
  }
  return out;
}

}  // namespace

std::map<std::pair<std::string, int64_t>, std::vector<std::string>> cases_to_retime(const Report& report) {
  std::map<std::pair<std::string, int64_t>, std::vector<std::string>> out;
  for (const auto& m : report.models) {
    // The model's measured cases: a node's list may also say "roofline" for a layer without one.
    std::set<std::string> cases;
    for (const auto& l : m.bounds.layers) {
      if (!l.best_case.empty()) cases.insert(l.best_case);
      if (!l.epilogue_case.empty()) cases.insert(l.epilogue_case);
    }
    std::set<std::string> names;
    bool any = false;
    for (const auto& v : m.bound_check.violations) {
      if (v.replay) continue;
      any = true;
      for (const auto& n : v.nodes)
        for (const auto& c : n.best_cases)
          if (cases.count(c)) names.insert(c);
      if (v.nodes.empty()) names.insert(cases.begin(), cases.end());
    }
    if (any && !names.empty())
      out[{m.bounds.model, m.bounds.batch}] = std::vector<std::string>(names.begin(), names.end());
  }
  return out;
}

double s_of(const Report& report, const std::string& model, int64_t batch) {
  for (const auto& m : report.models)
    if (m.bounds.model == model && m.bounds.batch == batch) return m.bounds.S;
  return 0;
}

Result<Report> build_report(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                            std::optional<int64_t> system, const AnalyzeOptions& options) {
  Report r;
  r.database = db.path();
  if (!dtype_of(options.dtype))
    return make_error("unknown data type '{}' (f32, f16, bf16 or int8)", options.dtype);
  FL_ASSIGN_OR_RETURN(const int64_t id, choose_system(db, models, system, options.threads));
  FL_ASSIGN_OR_RETURN(r.costs, load_model_costs(db, id, models, options.dtype, options.thread_budget));
  for (const auto& m : models) {
    ModelReport mr;
    mr.bounds = analyze_model(m, r.costs, options);
    mr.findings = advise(mr.bounds);
    mr.runtime_layers = compare_runtime_layers(mr.bounds, r.costs);
    mr.bound_check = check_bound(mr.bounds, r.costs);
    std::stable_sort(mr.findings.begin(), mr.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.saving_us > b.saving_us; });
    r.models.push_back(std::move(mr));
  }
  std::vector<ModelBounds*> bounds;
  for (auto& m : r.models) bounds.push_back(&m.bounds);
  confidence_intervals(models, r.costs, options, bounds);
  return r;
}

namespace {

// What a reader needs to trust the figures: how the cases were measured, and a line when the
// sentinel saw the machine slow down.
std::string method_lines(const MethodSummary& m) {
  if (m.cases == 0) return "";
  std::string out = fmt::format(
      "measurement: {} passed cases, {} pass(es) each (a fresh buffer placement per pass), median spread "
      "{:.1f}% between a best case's passes\n",
      m.cases,
      m.min_passes == m.max_passes ? fmt::format("{}", m.min_passes)
                                   : fmt::format("{}-{}", m.min_passes, m.max_passes),
      100 * m.median_spread);
  if (m.slowed_cases)
    out += fmt::format("sentinel: the machine slowed down while {} case(s) were timed; {}\n", m.slowed_cases,
                       slowed_text(m));
  if (m.noisy_cases)
    out += fmt::format(
        "noisy: {} case(s) whose lowest repetitions disagree by more than 5% (flagged; after a "
        "re-measurement, but for `run --quick`)\n",
        m.noisy_cases);
  return out;
}

std::string format_table_text(const Report& r, bool layers, size_t top_findings) {
  std::string out;
  if (r.costs.system_id) out += fmt::format("system {}: {}\n", r.costs.system_id, r.costs.system);
  if (r.costs.system_id) {
    auto f = r.costs.peaks.find({"flops", "f32"});
    auto b = r.costs.peaks.find({"bytes", "f32"});
    if (f != r.costs.peaks.end() && b != r.costs.peaks.end())
      out += fmt::format("roofline peaks (f32): {:.1f} GFLOP/s, {:.1f} GB/s\n", f->second / 1e9,
                         b->second / 1e9);
    for (const auto& n : r.costs.peak_notes) out += "  " + n + "\n";
    out += method_lines(r.costs.method);
  }
  out += "\n";
  if (layers) {
    auto fields = layer_fields();
    fields.pop_back();  // the key is in --format csv/json; the table names the best algorithm
    out += output::render_table(fields, layer_rows(r)) + "\n";
  }
  // The summary: the figures people compare first.
  const auto all = model_fields(r);
  std::vector<Field<ModelReport>> summary;
  for (const auto& f : all)
    if (f.name != "layers" && f.name != "roofline_layers" && f.name != "critical_path_layers" &&
        f.name != "conversions_us" && f.name != "untimed_layers" && f.name != "vendor_roofline_layers")
      summary.push_back(f);
  out += output::render_table(summary, r.models);
  out +=
      "\nS sequential, S_vendor S over vendor libraries only (without Floorline's own kernels), P critical "
      "path, H library defaults, F fused, R roofline, M framework, replay: the best cases run as the graph, "
      "E: the composed estimate, each layer's case timed with its weights from the last-level cache and "
      "from memory, E_memory_share of them from memory (an estimate, never a bound) (all µs); "
      "measured_share: share of S from measured cases; *_ci_hi: high end of "
      "the 95% bootstrap interval of S, P, F over the cases' repetitions (the low end is the bound itself)\n";
  out += throughput_section(r);
  out += decoder_section(r);
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    std::vector<std::string> notes;
    if (b.roofline_layers)
      notes.push_back(fmt::format("{} layer(s) with no passed case costed by roofline", b.roofline_layers));
    if (b.untimed_layers)
      notes.push_back(fmt::format("{} layer(s) with no time at all: S is incomplete", b.untimed_layers));
    if (b.vendor_roofline_layers)
      notes.push_back(
          fmt::format("{} layer(s) run only by Floorline's own kernels costed by roofline in S_vendor",
                      b.vendor_roofline_layers));
    if (b.vendor_untimed_layers)
      notes.push_back(
          fmt::format("{} layer(s) run only by Floorline's own kernels with no roofline time: "
                      "S_vendor is incomplete",
                      b.vendor_untimed_layers));
    if (!b.peaks_note.empty()) notes.push_back(b.peaks_note);
    if (!b.assumption.empty()) notes.push_back("assumption: " + b.assumption);
    if (b.heuristic_missing)
      notes.push_back(
          fmt::format("{} layer(s) with no passed default case keep t(v) in H", b.heuristic_missing));
    if (m.findings.empty() && notes.empty() && !m.runtime_layers) continue;
    out += fmt::format("\n{} (batch {}):\n", b.model, b.batch);
    for (const auto& n : notes) out += fmt::format("  note: {}\n", n);
    for (size_t i = 0; i < m.findings.size() && i < top_findings; ++i) {
      const auto& f = m.findings[i];
      out += fmt::format("  [{}] {:.1f} µs ({:.1f}%): {}\n", f.advisor, f.saving_us, f.saving_pct, f.summary);
      for (size_t k = 0; k < f.items.size() && k < 3; ++k)
        out += fmt::format("      {:>10.1f} µs  {}: {}\n", f.items[k].saving_us, f.items[k].label,
                           f.items[k].detail);
    }
    if (m.runtime_layers)
      out += runtime_layers_table(b, *m.runtime_layers, std::max<size_t>(top_findings, 3));
  }
  // The validity check last (its one-line summary, validity_line(), is the commands' last line).
  out += validity_table(r, std::max<size_t>(top_findings, 3));
  return out;
}

}  // namespace

// Layer names and findings quote the model: whatever bytes it holds, no escape sequence reaches a
// terminal.
std::string format_table(const Report& r, bool layers, size_t top_findings) {
  return output::terminal_safe(format_table_text(r, layers, top_findings));
}

std::string format_json(const Report& r) {
  nlohmann::json j;
  j["database"] = r.database;
  if (r.costs.system_id) {
    j["system"] = {
        {"id", r.costs.system_id}, {"description", r.costs.system}, {"device_kind", r.costs.device_kind}};
    nlohmann::json peaks = nlohmann::json::array();
    for (const auto& [k, v] : r.costs.peaks)
      peaks.push_back({{"peak", k.first},
                       {"dtype", k.second},
                       {"value_per_s", v},
                       {"calibrated_per_s", r.costs.calibrated_peaks.at(k)}});
    j["system"]["peaks"] = peaks;
    nlohmann::json memory = nlohmann::json::object();
    for (const auto& [dtype, v] : r.costs.memory_bandwidth) memory[dtype] = v;
    j["system"]["memory_bandwidth_per_s"] = memory;
    j["system"]["peak_notes"] = r.costs.peak_notes;
    nlohmann::json budget = nlohmann::json::array();
    for (const auto& b : r.costs.budget)
      budget.push_back({{"system_id", b.system_id}, {"threads", b.threads}});
    j["system"]["thread_budget"] = budget;
  }
  const auto mf = model_fields(r);
  const auto lf = layer_fields();
  nlohmann::json models = nlohmann::json::array();
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    nlohmann::json o = output::render_json(mf, std::vector<ModelReport>{m}).at(0);
    o["complete"] = b.complete;
    o["peaks_note"] = b.peaks_note;
    if (!b.assumption.empty()) o["assumption"] = b.assumption;
    if (!b.dims.empty()) {
      o["dims"] = nlohmann::json::object();
      for (const auto& [name, value] : b.dims) o["dims"][name] = value;
    }
    if (b.decoder) {
      nlohmann::json d = output::render_json(decoder_fields(), std::vector<ModelReport>{m}).at(0);
      for (const char* k : {"model", "batch", "S_us", "M_us", "measured_share"}) d.erase(k);
      d["weight_bytes"] = b.decoder->weight_bytes;
      d["kv_read_bytes"] = b.decoder->kv_read_bytes;
      d["kv_cache_bytes"] = b.decoder->kv_cache_bytes;
      if (b.decoder->if_branch.empty()) d.erase("if_branch");
      o["decoder"] = d;
    }
    o["heuristic_missing"] = b.heuristic_missing;
    o["critical_path"] = b.critical_path;
    nlohmann::json reduced = nlohmann::json::array();
    for (const auto& x : b.reduced)
      reduced.push_back({{"dtype", x.dtype},
                         {"math_mode", x.math_mode},
                         {"us", x.us},
                         {"layers_reduced", x.layers_reduced},
                         {"layers_kept", x.layers_kept}});
    o["reduced"] = reduced;
    nlohmann::json fw = nlohmann::json::array();
    for (const auto& f : b.framework)
      fw.push_back({{"runtime", f.runtime},
                    {"runtime_version", f.runtime_version},
                    {"settings", f.settings},
                    {"threads", f.threads},
                    {"us", f.us}});
    o["framework"] = fw;
    o["replay_note"] = b.replay_note;
    o["replay_conversions_us"] = opt_json(b.replay_conversions_us);
    nlohmann::json fusions = nlohmann::json::array();
    for (const auto& f : b.fusions)
      fusions.push_back({{"pattern", f.pattern},
                         {"layers", f.layers},
                         {"unfused_us", f.unfused_us},
                         {"fused_us", opt_json(f.fused_us)},
                         {"fused_case", f.fused_case},
                         {"applied", f.applied}});
    o["fusions"] = fusions;
    nlohmann::json branches = nlohmann::json::array();
    for (const auto& x : b.branches)
      branches.push_back({{"fork", x.fork}, {"fork_name", x.fork_name}, {"us", x.us}, {"layers", x.layers}});
    o["branches"] = branches;
    std::vector<LayerRow> rows;
    for (const auto& l : b.layers) rows.push_back({&b, &l});
    nlohmann::json layers = output::render_json(lf, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      layers[i].erase("model");
      layers[i].erase("batch");
      layers[i]["best_case"] = rows[i].layer->best_case;
      layers[i]["preds"] = rows[i].layer->preds;
    }
    o["layers"] = layers;
    nlohmann::json findings = nlohmann::json::array();
    for (const auto& f : m.findings) {
      nlohmann::json items = nlohmann::json::array();
      for (const auto& it : f.items)
        items.push_back(
            {{"label", it.label}, {"saving_us", it.saving_us}, {"detail", it.detail}, {"layers", it.layers}});
      findings.push_back({{"advisor", f.advisor},
                          {"summary", f.summary},
                          {"saving_us", f.saving_us},
                          {"saving_pct", f.saving_pct},
                          {"items", items}});
    }
    o["findings"] = findings;
    if (m.runtime_layers) o["runtime_layers"] = runtime_layers_json(*m.runtime_layers);
    models.push_back(std::move(o));
  }
  j["models"] = models;
  j["throughput"] = throughput_json(r);
  j["bound_check"] = validity_json(r);
  // Names come from model files and databases: bytes that are not UTF-8 become U+FFFD.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string format_csv(const Report& r, bool layers) {
  if (layers) return output::render_csv(layer_fields(), layer_rows(r));
  return output::render_csv(model_fields(r), r.models);
}

namespace {

// The text of a DOT quoted string: valid UTF-8 (Graphviz reads UTF-8), quotes and backslashes
// escaped (a name ending in a backslash would otherwise escape the closing quote), and no line
// breaks or other control characters.
std::string dot_quoted(const std::string& s) {
  std::string out;
  for (const char ch : output::valid_utf8(s)) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\')
      out += std::string("\\") + ch;
    else if (c < 0x20 || c == 0x7F)
      out += ' ';
    else
      out += ch;
  }
  return out;
}

}  // namespace

std::string format_dot(const Report& r) {
  std::string out;
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    const std::string model = dot_quoted(b.model);
    out += fmt::format(
        "digraph \"{}_b{}\" {{\n  label=\"{} batch {}: S {:.1f} µs, P {:.1f} µs (critical path in red)\";\n"
        "  labelloc=t;\n  node [shape=box, style=filled, fillcolor=white, fontname=Helvetica, "
        "fontsize=10];\n",
        model, b.batch, model, b.batch, b.S, b.P);
    for (const auto& l : b.layers) {
      const std::string time =
          l.source == CostSource::kNone
              ? "no time"
              : fmt::format("{:.1f} µs{}", l.us, l.source == CostSource::kRoofline ? " (roofline)" : "");
      const std::string name = dot_quoted(l.name);
      out += fmt::format("  n{} [label=\"{}\\n{}\\n{}\"{}];\n", l.index, name, dot_quoted(l.kind), time,
                         l.on_critical_path ? ", color=red, fillcolor=\"#ffe0e0\", penwidth=2" : "");
    }
    // Consecutive cost-bearing layers of the critical path (view layers in between are not drawn).
    std::set<std::pair<int, int>> path_edges;
    int last = -1;
    for (int v : b.critical_path)
      if (std::any_of(b.layers.begin(), b.layers.end(), [v](const LayerCost& l) { return l.index == v; })) {
        if (last >= 0) path_edges.insert({last, v});
        last = v;
      }
    for (const auto& l : b.layers)
      for (int p : l.preds)
        out += fmt::format("  n{} -> n{}{};\n", p, l.index,
                           path_edges.count({p, l.index}) ? " [color=red, penwidth=2]" : "");
    out += "}\n";
  }
  return out;
}

}  // namespace floorline::analyzer
