// The advisors (advisors.hpp).
#include "floorline/analyzer/advisors.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace floorline::analyzer {

namespace {

// 17.0 ms, 312.4 µs: per-layer figures stay readable at any size.
std::string time_text(double us) {
  return us >= 1e3 ? fmt::format("{:.1f} ms", us / 1e3) : fmt::format("{:.1f} µs", us);
}

// A canonical key as a reader sees a config: "MatMul a=128x1x768 b=768x2304 f32", cut at n
// characters (UTF-8 "…" marks the cut).
std::string config_text(const std::string& key, size_t n = 90) {
  std::string s = key;
  std::replace(s.begin(), s.end(), '|', ' ');
  return s.size() <= n ? s : s.substr(0, n - 1) + "…";
}

// Layers of one config share t(v), roofline and conversions: a finding lists them once, as a group,
// instead of repeating the same line per layer (BERT's 12 encoder blocks).
struct LayerGroup {
  std::string key;
  std::vector<std::string> names;  // in layer order
};

// "a, b, c and 9 more".
std::string some_names(const std::vector<std::string>& names) {
  constexpr size_t kNamed = 3;
  std::string s;
  for (size_t i = 0; i < names.size() && i < kNamed; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kNamed) s += fmt::format(" and {} more", names.size() - kNamed);
  return s;
}

// "conv1: Conv x=..." for one layer, "12 layers: MatMul a=..." for several.
FindingItem group_item(const LayerGroup& g, double saving_us, const std::string& figures) {
  FindingItem it;
  const size_t n = g.names.size();
  it.label = n == 1 ? fmt::format("{}: {}", g.names[0], config_text(g.key))
                    : fmt::format("{} layers: {}", n, config_text(g.key));
  it.saving_us = saving_us;
  it.detail = n == 1 ? figures : fmt::format("{} × {}; {}", n, figures, some_names(g.names));
  it.layers = g.names;
  return it;
}

// The measured layers grouped by `by` (a config key, or a key with an implementation), in the order
// each group first occurs.
template <class Key, class Pick>
std::vector<std::pair<Key, LayerGroup>> groups(const std::vector<LayerCost>& layers, Pick by) {
  std::vector<std::pair<Key, LayerGroup>> out;
  std::map<Key, size_t> at;
  for (const auto& l : layers) {
    std::optional<Key> k = by(l);
    if (!k) continue;
    auto [it, added] = at.emplace(*k, out.size());
    if (added) out.push_back({*k, LayerGroup{l.key, {}}});
    out[it->second].second.names.push_back(l.name);
  }
  return out;
}

void finish(Finding& f, double of, size_t top) {
  f.saving_pct = of > 0 ? 100.0 * f.saving_us / of : 0;
  std::stable_sort(f.items.begin(), f.items.end(),
                   [](const FindingItem& a, const FindingItem& b) { return a.saving_us > b.saving_us; });
  if (f.items.size() > top) f.items.resize(top);
}

}  // namespace

std::vector<Finding> advise(const ModelBounds& b, size_t top) {
  std::vector<Finding> out;

  // Algorithm selection: per config, its instances' (default − best), as one group.
  {
    const auto by_key = groups<std::string>(b.layers, [](const LayerCost& l) -> std::optional<std::string> {
      if (!l.heuristic_us || l.source != CostSource::kMeasured || *l.heuristic_us <= l.us)
        return std::nullopt;
      return l.key;
    });
    Finding f;
    f.advisor = "algorithm";
    for (const auto& [key, g] : by_key) {
      const LayerCost& l = *std::find_if(b.layers.begin(), b.layers.end(),
                                         [&key = key](const LayerCost& x) { return x.key == key; });
      const double n = static_cast<double>(g.names.size());
      const double saving = n * (*l.heuristic_us - l.us);
      f.saving_us += saving;
      f.items.push_back(group_item(g, saving,
                                   fmt::format("library default {} vs best {} ({})",
                                               time_text(*l.heuristic_us), time_text(l.us), l.algorithm)));
    }
    if (f.saving_us > 0) {
      f.summary = fmt::format(
          "choosing the fastest measured implementation instead of the library default saves "
          "{:.1f} µs (H {:.1f} → S {:.1f} µs) over {} configuration(s)",
          f.saving_us, b.H, b.S, f.items.size());
      finish(f, b.S, top);
      out.push_back(std::move(f));
    }
  }

  // Fusion, by pattern.
  {
    struct Agg {
      int n = 0;
      double unfused = 0, fused = 0;
    };
    std::map<std::string, Agg> by_pattern;
    int unmeasured = 0;
    for (const auto& u : b.fusions) {
      if (!u.fused_us) ++unmeasured;
      if (!u.applied) continue;
      auto& a = by_pattern[u.pattern];
      ++a.n;
      a.unfused += u.unfused_us;
      a.fused += *u.fused_us;
    }
    Finding f;
    f.advisor = "fusion";
    for (const auto& [p, a] : by_pattern) {
      f.saving_us += a.unfused - a.fused;
      f.items.push_back({fmt::format("{}x {}", a.n, p),
                         a.unfused - a.fused,
                         fmt::format("unfused {:.1f} µs, fused {:.1f} µs", a.unfused, a.fused),
                         {}});
    }
    if (f.saving_us > 0) {
      int chains = 0;
      for (const auto& [p, a] : by_pattern) chains += a.n;
      f.summary = fmt::format(
          "fusing {} chain(s) of {} pattern(s) saves {:.1f} µs (S {:.1f} → F {:.1f} µs){}", chains,
          by_pattern.size(), f.saving_us, b.S, b.F,
          unmeasured ? fmt::format("; {} more fusable chain(s) have no measured fused case", unmeasured)
                     : "");
      finish(f, b.S, top);
      out.push_back(std::move(f));
    }
  }

  // Precision, per reduced mode, by kind.
  for (const auto& r : b.reduced) {
    if (b.S - r.us <= 0) continue;
    Finding f;
    f.advisor = "precision";
    f.saving_us = b.S - r.us;
    if (r.dtype == "int8")  // quantization: int8 cases of a float model's Conv/Gemm/MatMul (--dtype int8)
      f.summary = fmt::format(
          "int8 would save {:.1f} µs (S {:.1f} → S_int8 {:.1f} µs): {} layer(s) have a measured int8 case, "
          "{} "
          "keep {}; the QuantizeLinear/DequantizeLinear a quantized model adds between float layers are not "
          "counted",
          f.saving_us, b.S, r.us, r.layers_reduced, r.layers_kept, b.math_mode);
    else
      f.summary = fmt::format(
          "{} math ({}) saves {:.1f} µs (S {:.1f} → {:.1f} µs); {} layer(s) have a {} case, {} keep {}",
          r.math_mode, r.dtype, f.saving_us, b.S, r.us, r.layers_reduced, r.dtype, r.layers_kept,
          b.math_mode);
    for (const auto& [kind, t] : r.by_kind)
      if (t.first != t.second)
        f.items.push_back(
            {kind,
             t.first - t.second,
             fmt::format("{:.1f} µs in {} vs {:.1f} µs in {}", t.first, b.math_mode, t.second, r.math_mode),
             {}});
    finish(f, b.S, top);
    out.push_back(std::move(f));
  }

  // Parallelism.
  if (b.S - b.P > 0 && !b.branches.empty()) {
    Finding f;
    f.advisor = "parallelism";
    f.saving_us = b.S - b.P;
    // Branches of the same size and time (a transformer's 12 blocks) are one item.
    std::vector<std::pair<std::pair<int64_t, double>, std::vector<const Branch*>>> alike;
    for (const auto& br : b.branches) {
      const std::pair<int64_t, double> k{br.layers, br.us};
      auto it = std::find_if(alike.begin(), alike.end(), [&k](const auto& a) { return a.first == k; });
      if (it == alike.end()) it = alike.insert(alike.end(), {k, {}});
      it->second.push_back(&br);
    }
    for (const auto& [k, branches] : alike) {
      const auto [layers, us] = k;
      const std::string figures = fmt::format("{} layer(s), {:.1f} µs off the critical path", layers, us);
      std::vector<std::string> forks;
      FindingItem it;
      for (const Branch* br : branches) {
        forks.push_back(br->fork_name);
        if (br->fork >= 0) it.layers.push_back(br->fork_name);  // not "(graph inputs)"
      }
      it.saving_us = static_cast<double>(forks.size()) * us;
      if (forks.size() == 1) {
        it.label = fmt::format("branch from {}", forks[0]);
        it.detail = figures;
      } else {
        it.label = fmt::format("{} branches of {} layer(s)", forks.size(), layers);
        it.detail = fmt::format("{} × {}; from {}", forks.size(), figures, some_names(forks));
      }
      f.items.push_back(std::move(it));
    }
    f.summary = fmt::format(
        "running independent branches concurrently could save up to {:.1f} µs (S {:.1f} → P {:.1f} µs, "
        "S/P {:.2f}); {} branch(es) leave the critical path",
        f.saving_us, b.S, b.P, b.P > 0 ? b.S / b.P : 0.0, b.branches.size());
    finish(f, b.S, top);
    out.push_back(std::move(f));
  }

  // Efficiency: distance from the roofline, and layout conversions.
  if (b.R && b.S - *b.R > 0) {
    Finding f;
    f.advisor = "efficiency";
    f.saving_us = b.S - *b.R;
    const auto by_key = groups<std::string>(b.layers, [](const LayerCost& l) -> std::optional<std::string> {
      if (l.source != CostSource::kMeasured || !l.roofline_us || l.us <= *l.roofline_us) return std::nullopt;
      return l.key;
    });
    for (const auto& [key, g] : by_key) {
      const LayerCost& l = *std::find_if(b.layers.begin(), b.layers.end(),
                                         [&key = key](const LayerCost& x) { return x.key == key; });
      f.items.push_back(group_item(g, static_cast<double>(g.names.size()) * (l.us - *l.roofline_us),
                                   fmt::format("{} vs roofline {} ({:.0f}% of peak)", time_text(l.us),
                                               time_text(*l.roofline_us), 100.0 * *l.roofline_us / l.us)));
    }
    f.summary = fmt::format(
        "the libraries run at {:.0f}% of the roofline overall (R {:.1f} µs vs S {:.1f} µs): "
        "{:.1f} µs of library headroom",
        b.S > 0 ? 100.0 * *b.R / b.S : 0.0, *b.R, b.S, f.saving_us);
    finish(f, b.S, top);
    out.push_back(std::move(f));
  }
  if (b.conversions_us > 0) {
    Finding f;
    f.advisor = "efficiency";
    // With a replay, what keeping blocked layouts between layers leaves is measured: that is the cost.
    f.saving_us = b.replay_conversions_us ? *b.replay_conversions_us : b.conversions_us;
    using KeyAlg = std::pair<std::string, std::string>;
    const auto by_case = groups<KeyAlg>(b.layers, [](const LayerCost& l) -> std::optional<KeyAlg> {
      if (l.conversion_us <= 0) return std::nullopt;
      return KeyAlg{l.key, l.algorithm};
    });
    for (const auto& [ka, g] : by_case) {
      const LayerCost& l = *std::find_if(b.layers.begin(), b.layers.end(), [&ka = ka](const LayerCost& x) {
        return x.key == ka.first && x.algorithm == ka.second;
      });
      f.items.push_back(
          group_item(g, static_cast<double>(g.names.size()) * l.conversion_us,
                     fmt::format("{} needs {} of reorders", l.algorithm, time_text(l.conversion_us))));
    }
    f.summary = fmt::format(
        "the best implementations use blocked layouts: {:.1f} µs of layout conversions ({:.1f}% of S, "
        "not in S) unless neighbouring layers keep the blocked layout",
        b.conversions_us, b.S > 0 ? 100.0 * b.conversions_us / b.S : 0.0);
    if (b.replay_conversions_us)
      f.summary += fmt::format("; the replay, which keeps them, still needed {} conversions taking {:.1f} µs",
                               b.replay_conversions, *b.replay_conversions_us);
    finish(f, b.S, top);
    out.push_back(std::move(f));
  }

  // Framework gap.
  if (b.M) {
    Finding f;
    f.advisor = "framework";
    f.saving_us = *b.M - b.S;
    for (const auto& t : b.framework)
      f.items.push_back(
          {fmt::format("{} {} {}", t.runtime, t.runtime_version, t.settings),
           t.us - b.S,
           fmt::format("{:.1f} µs: M/S {:.2f}, M/F {:.2f}, M/P {:.2f}", t.us, b.S > 0 ? t.us / b.S : 0.0,
                       b.F > 0 ? t.us / b.F : 0.0, b.P > 0 ? t.us / b.P : 0.0),
           {}});
    f.summary =
        fmt::format("the framework takes {:.1f} µs, {:.2f}x the sequential bound S ({:.2f}x F, {:.2f}x P)",
                    *b.M, b.S > 0 ? *b.M / b.S : 0.0, b.F > 0 ? *b.M / b.F : 0.0, b.P > 0 ? *b.M / b.P : 0.0);
    finish(f, *b.M, top);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace floorline::analyzer
