// Systems side by side (compare.hpp).
#include "floorline/analyzer/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/common/output.hpp"
#include "html_text.hpp"

namespace floorline::analyzer {

std::optional<double> ModelComparison::speedup(size_t system, size_t baseline) const {
  if (system >= systems.size() || baseline >= systems.size()) return std::nullopt;
  const auto &a = systems[baseline], &b = systems[system];
  // An incomplete S (a layer without a time) would flatter its system.
  if (!a.present || !b.present || !a.complete || !b.complete || a.S <= 0 || b.S <= 0) return std::nullopt;
  return a.S / b.S;
}

Result<ComparisonResult> compare_systems(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                                         const CompareOptions& options) {
  ComparisonResult out;
  out.database = db.path();
  std::vector<int64_t> ids = options.systems;
  if (ids.empty()) {
    FL_ASSIGN_OR_RETURN(const auto measuring, systems_measuring(db, models));
    for (const auto& [id, s] : measuring) ids.push_back(id);
    if (ids.empty())
      return make_error("{}: no system has a measurement of these models (run floorline bench first)",
                        db.path());
  }
  AnalyzeOptions aopts;
  aopts.dtype = options.dtype;
  aopts.thread_budget = options.thread_budget;
  std::vector<CostTable> costs;
  for (const int64_t id : ids) {
    FL_ASSIGN_OR_RETURN(CostTable c, load_model_costs(db, id, models, options.dtype, options.thread_budget));
    out.systems.push_back({id, c.system, c.device_kind, c.threads});
    costs.push_back(std::move(c));
  }
  if (options.baseline) {
    const auto it = std::find(ids.begin(), ids.end(), *options.baseline);
    if (it == ids.end())
      return make_error("{}: the baseline system {} is not among the compared systems ({})", db.path(),
                        *options.baseline, fmt::join(ids, ", "));
    out.baseline = static_cast<size_t>(it - ids.begin());
  }
  const size_t n = ids.size();
  out.fastest_count.assign(n, 0);
  std::map<std::string, std::vector<double>> kind_us;
  // Per system: every model's bounds (kept for the scaling view).
  std::vector<std::vector<ModelBounds>> bounds(n);
  for (const auto& m : models) {
    ModelComparison mc;
    mc.model = m.name;
    mc.batch = m.batch;
    std::map<std::string, ConfigChange> configs;
    std::vector<std::string> order;  // configurations in the model's layer order
    for (size_t s = 0; s < n; ++s) {
      ModelBounds b = analyze_model(m, costs[s], aopts);
      SystemBounds sb;
      sb.present = b.measured_layers > 0;
      sb.S = b.S, sb.P = b.P, sb.H = b.H, sb.F = b.F;
      sb.R = b.R, sb.M = b.M, sb.replay = b.replay;
      sb.measured_fraction = b.measured_fraction;
      sb.complete = b.complete;
      if (sb.present) {
        const BoundCheck check = check_bound(b, costs[s]);
        sb.latencies = check.latencies;
        sb.violations = static_cast<int64_t>(check.violations.size());
      }
      for (const auto& l : b.layers) {
        auto [it, fresh] = configs.try_emplace(l.key);
        ConfigChange& c = it->second;
        if (fresh) {
          c.key = l.key, c.kind = l.kind, c.layer = l.name;
          c.us.assign(n, std::nullopt);
          order.push_back(l.key);
        }
        if (s == 0) ++c.layers;
        if (sb.present && l.source == CostSource::kMeasured) c.us[s] = c.us[s].value_or(0.0) + l.us;
      }
      mc.systems.push_back(sb);
      bounds[s].push_back(std::move(b));
    }
    // Time by layer kind: the layers measured on every system that measured the model, so that each
    // system's total covers the same layers (a system missing a config does not look faster on it).
    const size_t cost_bearing = bounds[0].back().layers.size();  // the same model on every system
    for (size_t j = 0; j < cost_bearing; ++j) {
      const LayerCost* first = nullptr;
      bool everywhere = true;
      for (size_t s = 0; s < n && everywhere; ++s) {
        if (!mc.systems[s].present) continue;
        const auto& layers = bounds[s].back().layers;
        everywhere = j < layers.size() && layers[j].source == CostSource::kMeasured;
        if (!first && everywhere) first = &layers[j];
      }
      if (!everywhere || !first) continue;
      auto& k = kind_us[first->kind];
      k.resize(n, 0.0);
      for (size_t s = 0; s < n; ++s)
        if (mc.systems[s].present) k[s] += bounds[s].back().layers[j].us;
    }
    // The fastest: the lowest complete S (a system missing layers has no comparable S).
    for (size_t s = 0; s < n; ++s) {
      const auto& sb = mc.systems[s];
      if (!sb.present || !sb.complete || sb.S <= 0) continue;
      if (!mc.fastest || sb.S < mc.systems[*mc.fastest].S) mc.fastest = s;
    }
    if (mc.fastest) ++out.fastest_count[*mc.fastest];
    for (const auto& key : order) {
      ConfigChange c = configs.at(key);
      double lo = INFINITY, hi = -INFINITY;
      int have = 0;
      for (const auto& u : c.us)
        if (u) lo = std::min(lo, *u), hi = std::max(hi, *u), ++have;
      if (have < 2) continue;
      c.spread_us = hi - lo;
      mc.configs.push_back(std::move(c));
    }
    std::stable_sort(mc.configs.begin(), mc.configs.end(),
                     [](const ConfigChange& a, const ConfigChange& b) { return a.spread_us > b.spread_us; });
    if (mc.configs.size() > options.top_configs) mc.configs.resize(options.top_configs);
    out.models.push_back(std::move(mc));
  }
  for (auto& [kind, us] : kind_us) {
    us.resize(n, 0.0);
    out.kinds.push_back({kind, us});
  }
  const size_t base = out.baseline;
  std::stable_sort(out.kinds.begin(), out.kinds.end(),
                   [base](const KindTotals& a, const KindTotals& b) { return a.us[base] > b.us[base]; });
  // Thread scaling: each compared system of N > 1 threads whose host was measured at one thread.
  for (size_t s = 0; s < n; ++s) {
    if (out.systems[s].threads <= 1 || out.systems[s].device_kind != "cpu") continue;
    FL_ASSIGN_OR_RETURN(const auto budget, db.thread_budget(ids[s]));
    std::optional<size_t> one;
    for (const auto& b : budget)
      if (b.threads == 1)
        if (auto it = std::find(ids.begin(), ids.end(), b.system_id); it != ids.end())
          one = static_cast<size_t>(it - ids.begin());
    if (!one) continue;
    ThreadScaling t;
    t.one = *one, t.many = s, t.threads = out.systems[s].threads;
    std::map<std::string, std::pair<double, double>> kinds;
    std::map<std::string, ThreadScaling::Config> cfg;
    for (size_t k = 0; k < models.size(); ++k) {
      const ModelBounds &a = bounds[*one][k], &b = bounds[s][k];
      if (a.measured_layers == 0 || b.measured_layers == 0) continue;
      t.models.push_back({a.model, a.batch, a.S, b.S});
      for (size_t j = 0; j < a.layers.size() && j < b.layers.size(); ++j) {
        const LayerCost &la = a.layers[j], &lb = b.layers[j];
        if (la.source != CostSource::kMeasured || lb.source != CostSource::kMeasured) continue;
        kinds[la.kind].first += la.us;
        kinds[la.kind].second += lb.us;
        auto [it, fresh] = cfg.try_emplace(la.key);
        if (fresh) it->second = {la.key, la.kind, la.name, 0, 0, lb.threads};
        it->second.us_one += la.us;
        it->second.us_many += lb.us;
      }
    }
    for (const auto& [kind, v] : kinds) t.kinds.push_back({kind, v});
    std::stable_sort(t.kinds.begin(), t.kinds.end(),
                     [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
    const double N = static_cast<double>(t.threads);
    for (const auto& [key, c] : cfg)
      if (t.efficiency(c.us_one, c.us_many) < 0.75) t.worst.push_back(c);
    std::stable_sort(t.worst.begin(), t.worst.end(), [N](const auto& x, const auto& y) {
      return x.us_many - x.us_one / N > y.us_many - y.us_one / N;
    });
    if (t.worst.size() > 10) t.worst.resize(10);
    out.scaling.push_back(std::move(t));
  }
  return out;
}

// --- formats -----------------------------------------------------------------------------------

namespace {

std::string ms(double us) {
  return fmt::format("{:.3f}", us / 1e3);
}
std::string opt_ms(const std::optional<double>& us) {
  return us ? ms(*us) : "-";
}
std::string ratio(const std::optional<double>& r) {
  return r ? fmt::format("{:.2f}", *r) : "-";
}
std::string short_label(const ComparedSystem& s) {
  return fmt::format("#{} {}", s.id, s.label);
}

}  // namespace

std::string format_compare_table(const ComparisonResult& c) {
  const size_t n = c.systems.size(), base = c.baseline;
  std::string o = fmt::format("Comparing {} system(s) of {} (baseline: system {}):\n", n, c.database,
                              c.systems.empty() ? 0 : c.systems[base].id);
  for (const auto& s : c.systems) o += fmt::format("  {}\n", output::terminal_safe(short_label(s)));
  o += "\nS per model (ms) and speedup over the baseline (S_baseline / S; above 1: faster); M: the "
       "fastest framework latency at the system's thread count\n";
  o += fmt::format("{:28} {:>5}", "model", "batch");
  for (const auto& s : c.systems)
    o += fmt::format(" {:>10} {:>6} {:>10}", fmt::format("S #{}", s.id), "x", "M");
  o += "  fastest\n";
  for (const auto& m : c.models) {
    o += fmt::format("{:28} {:>5}", output::terminal_safe(m.model), m.batch);
    for (size_t s = 0; s < n; ++s) {
      const auto& b = m.systems[s];
      o += fmt::format(" {:>10} {:>6} {:>10}", b.present ? ms(b.S) + (b.complete ? "" : "*") : "-",
                       ratio(m.speedup(s, base)), b.present ? opt_ms(b.M) : "-");
    }
    o += fmt::format("  {}\n", m.fastest ? fmt::format("#{}", c.systems[*m.fastest].id) : "-");
  }
  o += "(* S incomplete: a layer has no time on that system)\n\nFastest system per model:";
  for (size_t s = 0; s < n; ++s) o += fmt::format(" #{} {}", c.systems[s].id, c.fastest_count[s]);
  o += "\n\nTime by layer kind, Σ over the models (ms), and speedup over the baseline\n";
  o += fmt::format("{:24}", "kind");
  for (const auto& s : c.systems) o += fmt::format(" {:>10} {:>6}", fmt::format("#{}", s.id), "x");
  o += "\n";
  for (const auto& k : c.kinds) {
    o += fmt::format("{:24}", k.kind);
    for (size_t s = 0; s < n; ++s)
      o += fmt::format(" {:>10} {:>6}", ms(k.us[s]),
                       k.us[s] > 0 && k.us[base] > 0 ? fmt::format("{:.2f}", k.us[base] / k.us[s]) : "-");
    o += "\n";
  }
  o += "\nConfigurations whose time changes most between the systems (per model, ms)\n";
  for (const auto& m : c.models) {
    if (m.configs.empty()) continue;
    o += fmt::format("{} (batch {}):\n", output::terminal_safe(m.model), m.batch);
    for (const auto& cf : m.configs) {
      o += fmt::format("  {:18} x{:<3}", cf.kind, cf.layers);
      for (size_t s = 0; s < n; ++s) o += fmt::format(" #{} {:>9}", c.systems[s].id, opt_ms(cf.us[s]));
      o += fmt::format("  {}\n", output::terminal_safe(cf.layer));
    }
  }
  for (const auto& t : c.scaling) {
    o += fmt::format(
        "\nThread scaling: system #{} (1 thread) against #{} ({} threads); efficiency (S_1 / S_N) / N\n",
        c.systems[t.one].id, c.systems[t.many].id, t.threads);
    for (const auto& m : t.models)
      o += fmt::format("  {:28} b{:<4} S_1 {:>10} ms  S_{} {:>10} ms  speedup {:.2f}  efficiency {:.2f}\n",
                       output::terminal_safe(m.model), m.batch, ms(m.S_one), t.threads, ms(m.S_many),
                       m.S_many > 0 ? m.S_one / m.S_many : 0.0, t.efficiency(m.S_one, m.S_many));
    o += "  by kind:\n";
    for (const auto& [kind, v] : t.kinds)
      o += fmt::format("    {:24} {:>10} ms  {:>10} ms  efficiency {:.2f}\n", kind, ms(v.first), ms(v.second),
                       t.efficiency(v.first, v.second));
    if (!t.worst.empty())
      o += "  configurations that scale worst (efficiency below 0.75, most time lost first):\n";
    for (const auto& w : t.worst)
      o += fmt::format("    {:18} {:>10} ms  {:>10} ms  efficiency {:.2f}  S_{} takes {} thread(s)  {}\n",
                       w.kind, ms(w.us_one), ms(w.us_many), t.efficiency(w.us_one, w.us_many), t.threads,
                       w.threads_chosen, output::terminal_safe(w.layer));
  }
  o += "\nBound check per system (S below every framework latency at its thread count and its replay):\n";
  for (size_t s = 0; s < n; ++s) {
    int64_t lat = 0, viol = 0, replays = 0, checked = 0;
    for (const auto& m : c.models) {
      const auto& b = m.systems[s];
      if (!b.present) continue;
      ++checked;
      lat += b.latencies;
      viol += b.violations;
      replays += b.replay ? 1 : 0;
    }
    o += fmt::format(
        "  #{}: {} model-batch(es), {} framework latencies and {} replays compared, {}\n", c.systems[s].id,
        checked, lat, replays,
        viol ? fmt::format("{} below S (floorline analyze --system {} names them)", viol, c.systems[s].id)
             : std::string("S holds"));
  }
  return o;
}

namespace {

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string format_compare_json(const ComparisonResult& c) {
  nlohmann::json j;
  j["database"] = output::valid_utf8(c.database);
  j["baseline"] = c.systems.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.systems[c.baseline].id);
  j["systems"] = nlohmann::json::array();
  for (size_t s = 0; s < c.systems.size(); ++s)
    j["systems"].push_back({{"id", c.systems[s].id},
                            {"label", output::valid_utf8(c.systems[s].label)},
                            {"device_kind", c.systems[s].device_kind},
                            {"threads", c.systems[s].threads},
                            {"fastest_models", c.fastest_count[s]}});
  j["models"] = nlohmann::json::array();
  for (const auto& m : c.models) {
    nlohmann::json jm = {{"model", output::valid_utf8(m.model)}, {"batch", m.batch}};
    jm["fastest_system"] = m.fastest ? nlohmann::json(c.systems[*m.fastest].id) : nlohmann::json(nullptr);
    jm["systems"] = nlohmann::json::array();
    for (size_t s = 0; s < c.systems.size(); ++s) {
      const auto& b = m.systems[s];
      nlohmann::json js = {{"system", c.systems[s].id}, {"present", b.present}};
      if (b.present) {
        js.update({{"S_us", b.S},
                   {"P_us", b.P},
                   {"H_us", b.H},
                   {"F_us", b.F},
                   {"R_us", opt_json(b.R)},
                   {"M_us", opt_json(b.M)},
                   {"replay_us", opt_json(b.replay)},
                   {"speedup", opt_json(m.speedup(s, c.baseline))},
                   {"measured_share", b.measured_fraction},
                   {"complete", b.complete},
                   {"latencies_compared", b.latencies},
                   {"violations", b.violations}});
      }
      jm["systems"].push_back(std::move(js));
    }
    jm["configs"] = nlohmann::json::array();
    for (const auto& cf : m.configs) {
      nlohmann::json us = nlohmann::json::array();
      for (const auto& u : cf.us) us.push_back(opt_json(u));
      jm["configs"].push_back({{"key", output::valid_utf8(cf.key)},
                               {"kind", cf.kind},
                               {"layer", output::valid_utf8(cf.layer)},
                               {"layers", cf.layers},
                               {"us", us},
                               {"spread_us", cf.spread_us}});
    }
    j["models"].push_back(std::move(jm));
  }
  j["kinds"] = nlohmann::json::array();
  for (const auto& k : c.kinds) j["kinds"].push_back({{"kind", k.kind}, {"us", k.us}});
  j["thread_scaling"] = nlohmann::json::array();
  for (const auto& t : c.scaling) {
    nlohmann::json jt = {
        {"system_one", c.systems[t.one].id}, {"system_many", c.systems[t.many].id}, {"threads", t.threads}};
    jt["models"] = nlohmann::json::array();
    for (const auto& m : t.models)
      jt["models"].push_back({{"model", output::valid_utf8(m.model)},
                              {"batch", m.batch},
                              {"S_one_us", m.S_one},
                              {"S_many_us", m.S_many},
                              {"efficiency", t.efficiency(m.S_one, m.S_many)}});
    jt["kinds"] = nlohmann::json::array();
    for (const auto& [kind, v] : t.kinds)
      jt["kinds"].push_back({{"kind", kind},
                             {"us_one", v.first},
                             {"us_many", v.second},
                             {"efficiency", t.efficiency(v.first, v.second)}});
    jt["worst"] = nlohmann::json::array();
    for (const auto& w : t.worst)
      jt["worst"].push_back({{"key", output::valid_utf8(w.key)},
                             {"kind", w.kind},
                             {"layer", output::valid_utf8(w.layer)},
                             {"us_one", w.us_one},
                             {"us_many", w.us_many},
                             {"efficiency", t.efficiency(w.us_one, w.us_many)},
                             {"threads_chosen", w.threads_chosen}});
    j["thread_scaling"].push_back(std::move(jt));
  }
  return j.dump(2) + "\n";
}

std::string format_compare_csv(const ComparisonResult& c) {
  std::string o =
      "model,batch,system,threads,S_us,P_us,H_us,F_us,R_us,M_us,replay_us,speedup,measured_share,complete,"
      "violations,fastest\n";
  auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string("-"); };
  for (const auto& m : c.models)
    for (size_t s = 0; s < c.systems.size(); ++s) {
      const auto& b = m.systems[s];
      if (!b.present) continue;
      o += fmt::format("{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{},{},{},{},{:.4f},{},{},{}\n",
                       output::csv_escape(m.model), m.batch, c.systems[s].id, c.systems[s].threads, b.S, b.P,
                       b.H, b.F, num(b.R), num(b.M), num(b.replay), num(m.speedup(s, c.baseline)),
                       b.measured_fraction, b.complete ? 1 : 0, b.violations,
                       m.fastest && *m.fastest == s ? 1 : 0);
    }
  return o;
}

namespace {

std::string h(const std::string& s) {
  return html_text(s);
}

// Horizontal grouped bars on a log scale around 1 (speedup or efficiency): one row per label, one
// bar per series, each from 1 to its value.
struct Bars {
  std::string label;
  std::vector<std::optional<double>> v;  // per series
};
std::string ratio_chart(const std::string& id, const std::string& what, const std::vector<Bars>& rows,
                        const std::vector<std::string>& series, const std::vector<std::string>& colors) {
  double lo = 1, hi = 1;
  for (const auto& r : rows)
    for (const auto& v : r.v)
      if (v && *v > 0) lo = std::min(lo, *v), hi = std::max(hi, *v);
  lo = std::pow(2.0, std::floor(std::log2(lo))), hi = std::pow(2.0, std::ceil(std::log2(hi)));
  if (hi <= lo) hi = lo * 2;
  const double left = 220, right = 880, top = 24, bar = 7;
  const double group = bar * static_cast<double>(std::max<size_t>(series.size(), 1)) + 6;
  const double height = top + group * static_cast<double>(rows.size()) + 36;
  auto x = [&](double v) {
    return left + (right - left) * (std::log2(v) - std::log2(lo)) / (std::log2(hi) - std::log2(lo));
  };
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" "
      "role=\"img\" aria-label=\"{}\">\n",
      id, right + 40, height, h(what));
  for (double t = lo; t <= hi * 1.0001; t *= 2)
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.1f}\" stroke=\"{3}\"/><text x=\"{0:.1f}\" "
        "y=\"{4:.1f}\" font-size=\"10\" text-anchor=\"middle\">{5:g}×</text>\n",
        x(t), top - 4, height - 30, t == 1 ? "#333" : "#ddd", height - 18, t);
  s += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{} (log scale)</text>\n",
      (left + right) / 2, height - 4, h(what));
  double y = top;
  for (const auto& r : rows) {
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", left - 6,
                     y + group / 2, h(r.label));
    for (size_t k = 0; k < r.v.size(); ++k) {
      if (!r.v[k] || *r.v[k] <= 0) continue;
      const double a = x(1), b = x(*r.v[k]);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: {}: "
          "{:.2f}×</title></rect>\n",
          std::min(a, b), y + bar * static_cast<double>(k), std::max(std::fabs(b - a), 1.0), bar - 1,
          colors[k], h(r.label), h(series[k]), *r.v[k]);
    }
    y += group;
  }
  s += "</svg>\n<p class=\"legend\">";
  for (size_t k = 0; k < series.size(); ++k)
    s += fmt::format("<span style=\"color:{}\">&#9632;</span> {} ", colors[k], h(series[k]));
  return s + "</p>\n";
}

}  // namespace

std::string format_compare_html(const ComparisonResult& c) {
  const size_t n = c.systems.size(), base = c.baseline;
  const std::vector<std::string> system_colors = distinct_colors(n);  // one per system, on every chart
  auto color = [&](size_t k) { return system_colors[k]; };
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Floorline: systems "
      "compared</title>\n<style>\n"
      "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}\n"
      "table{border-collapse:collapse;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid "
      "#ddd;text-align:right;white-space:nowrap}\n"
      "td:first-child,th:first-child{text-align:left}.legend{font-size:12px}.note{color:#555}\n"
      "h2{margin-top:32px;border-bottom:2px solid #4e79a7}.best{font-weight:bold}\n"
      ".wide{display:block;overflow-x:auto;max-width:100%}\n</style></head><body>\n"
      "<h1>Floorline: systems compared</h1>\n";
  s += fmt::format("<p>Database <code>{}</code>. Baseline: system {}.</p>\n<ul>\n", h(c.database),
                   n ? c.systems[base].id : 0);
  for (size_t k = 0; k < n; ++k)
    s += fmt::format(
        "<li><span style=\"color:{}\">&#9632;</span> system {}: {} — lowest S for {} model-batch(es)</li>\n",
        color(k), c.systems[k].id, h(c.systems[k].label), c.fastest_count[k]);
  s += "</ul>\n<p class=\"note\">Speedup: S on the baseline over S on the system (above 1: the system is "
       "faster). S is the sum of each layer's fastest measured case among the system's libraries, at "
       "its thread budget; M the fastest framework latency at the system's thread count.</p>\n";
  std::vector<std::string> names, colors;
  std::vector<size_t> others;
  for (size_t k = 0; k < n; ++k)
    if (k != base) {
      others.push_back(k);
      names.push_back(fmt::format("system {}", c.systems[k].id));
      colors.push_back(color(k));
    }
  if (!others.empty()) {
    std::vector<Bars> rows;
    for (const auto& m : c.models) {
      Bars b{fmt::format("{} b{}", m.model, m.batch), {}};
      for (size_t k : others) b.v.push_back(m.speedup(k, base));
      rows.push_back(std::move(b));
    }
    s += fmt::format("<h2>Speedup of S over system {}</h2>\n", c.systems[base].id) +
         ratio_chart("chart-speedup", "speedup over the baseline", rows, names, colors);
    std::vector<Bars> kinds;
    for (const auto& k : c.kinds) {
      if (kinds.size() == 20) break;  // the kinds that take most of the baseline's time (the table has all)
      Bars b{k.kind, {}};
      for (size_t o : others)
        b.v.push_back(k.us[o] > 0 && k.us[base] > 0 ? std::optional<double>(k.us[base] / k.us[o])
                                                    : std::nullopt);
      kinds.push_back(std::move(b));
    }
    s += "<h2>Speedup by layer kind (Σ over the models; the 20 largest on the baseline)</h2>\n" +
         ratio_chart("chart-kinds", "speedup over the baseline", kinds, names, colors);
  }
  s += "<h2>Bounds per system</h2>\n<table class=\"wide\" id=\"compare\"><tr><th>model</th><th>batch</th>";
  for (const auto& sys : c.systems)
    s += fmt::format("<th>S #{0}</th><th>speedup</th><th>M #{0}</th><th>replay #{0}</th>", sys.id);
  s += "<th>fastest</th></tr>\n";
  auto cell_ms = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f} ms", *v / 1e3) : "–"; };
  for (const auto& m : c.models) {
    s += fmt::format("<tr><td>{}</td><td>{}</td>", h(m.model), m.batch);
    for (size_t k = 0; k < n; ++k) {
      const auto& b = m.systems[k];
      const bool best = m.fastest && *m.fastest == k;
      s += fmt::format("<td{}>{}{}</td><td>{}</td><td>{}</td><td>{}</td>", best ? " class=\"best\"" : "",
                       b.present ? cell_ms(b.S) : "–", b.present && !b.complete ? " (incomplete)" : "",
                       ratio(m.speedup(k, base)), b.present ? cell_ms(b.M) : "–",
                       b.present ? cell_ms(b.replay) : "–");
    }
    s += fmt::format("<td>{}</td></tr>\n", m.fastest ? fmt::format("#{}", c.systems[*m.fastest].id) : "–");
  }
  s += "</table>\n<h2>Time by layer kind (Σ over the models)</h2>\n<table id=\"kinds\"><tr><th>kind</th>";
  for (const auto& sys : c.systems) s += fmt::format("<th>#{}</th><th>speedup</th>", sys.id);
  s += "</tr>\n";
  for (const auto& k : c.kinds) {
    s += fmt::format("<tr><td>{}</td>", h(k.kind));
    for (size_t o = 0; o < n; ++o)
      s += fmt::format("<td>{:.3f} ms</td><td>{}</td>", k.us[o] / 1e3,
                       k.us[o] > 0 && k.us[base] > 0 ? fmt::format("{:.2f}", k.us[base] / k.us[o]) : "–");
    s += "</tr>\n";
  }
  s += "</table>\n";
  for (const auto& t : c.scaling) {
    const std::string title = fmt::format("system {} (1 thread) → system {} ({} threads)",
                                          c.systems[t.one].id, c.systems[t.many].id, t.threads);
    std::vector<Bars> rows;
    for (const auto& m : t.models)
      rows.push_back({fmt::format("{} b{}", m.model, m.batch),
                      {m.S_many > 0 ? std::optional<double>(m.S_one / m.S_many) : std::nullopt}});
    s += "<h2>Thread scaling: " + h(title) + "</h2>\n" +
         ratio_chart(fmt::format("chart-scaling-{}", c.systems[t.many].id), "speedup of S", rows,
                     {fmt::format("S_1 / S_{}", t.threads)}, {color(t.many)});
    s += "<table><tr><th>kind</th><th>1 thread</th><th>" + std::to_string(t.threads) +
         " threads</th><th>efficiency</th></tr>\n";
    for (const auto& [kind, v] : t.kinds)
      s += fmt::format("<tr><td>{}</td><td>{:.3f} ms</td><td>{:.3f} ms</td><td>{:.2f}</td></tr>\n", h(kind),
                       v.first / 1e3, v.second / 1e3, t.efficiency(v.first, v.second));
    s += "</table>\n";
    if (!t.worst.empty()) {
      s +=
          "<p>Configurations that scale worst (efficiency below 0.75, most time lost first):</p>\n<table "
          "class=\"wide\"><tr><th>kind</th><th>1 thread</th><th>N threads</th><th>efficiency</th><th>threads "
          "S takes</th><th>first layer</th></tr>\n";
      for (const auto& w : t.worst)
        s += fmt::format(
            "<tr><td>{}</td><td>{:.1f} µs</td><td>{:.1f} µs</td><td>{:.2f}</td><td>{}</td><td "
            "style=\"text-align:"
            "left\">{}</td></tr>\n",
            h(w.kind), w.us_one, w.us_many, t.efficiency(w.us_one, w.us_many), w.threads_chosen, h(w.layer));
      s += "</table>\n";
    }
  }
  s += "<h2>Configurations whose time changes most</h2>\n";
  for (const auto& m : c.models) {
    if (m.configs.empty()) continue;
    s += fmt::format(
        "<details><summary>{} (batch {})</summary><table class=\"wide\"><tr><th>kind</th><th>layers</th>",
        h(m.model), m.batch);
    for (const auto& sys : c.systems) s += fmt::format("<th>#{}</th>", sys.id);
    s += "<th>first layer</th></tr>\n";
    for (const auto& cf : m.configs) {
      s += fmt::format("<tr><td>{}</td><td>{}</td>", h(cf.kind), cf.layers);
      for (const auto& u : cf.us) s += fmt::format("<td>{}</td>", u ? fmt::format("{:.1f} µs", *u) : "–");
      s += fmt::format("<td style=\"text-align:left\">{}</td></tr>\n", h(cf.layer));
    }
    s += "</table></details>\n";
  }
  return s + "</body></html>\n";
}

}  // namespace floorline::analyzer
