// The advisors (advisors.hpp).
#include "floorline/analyzer/advisors.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace floorline::analyzer {

namespace {

std::string short_key(const std::string& key, size_t n = 70) {
  return key.size() <= n ? key : key.substr(0, n - 3) + "...";
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

  // Algorithm selection: per config, Σ over its instances of (default − best).
  {
    struct Agg {
      int n = 0;
      double def = 0, best = 0;
      std::string best_alg;
    };
    std::map<std::string, Agg> by_key;
    for (const auto& l : b.layers) {
      if (!l.heuristic_us || l.source != "measured") continue;
      auto& a = by_key[l.key];
      ++a.n;
      a.def += *l.heuristic_us;
      a.best += l.us;
      a.best_alg = l.algorithm;
    }
    Finding f;
    f.advisor = "algorithm";
    for (const auto& [key, a] : by_key) {
      if (a.def - a.best <= 0) continue;
      f.saving_us += a.def - a.best;
      f.items.push_back(
          {fmt::format("{}x {}", a.n, short_key(key)), a.def - a.best,
           fmt::format("library default {:.1f} µs vs best {:.1f} µs ({})", a.def, a.best, a.best_alg)});
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
      f.items.push_back({fmt::format("{}x {}", a.n, p), a.unfused - a.fused,
                         fmt::format("unfused {:.1f} µs, fused {:.1f} µs", a.unfused, a.fused)});
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
    f.summary = fmt::format(
        "{} math ({}) saves {:.1f} µs (S {:.1f} → {:.1f} µs); {} layer(s) have a {} case, {} keep {}",
        r.math_mode, r.dtype, f.saving_us, b.S, r.us, r.layers_reduced, r.dtype, r.layers_kept, b.math_mode);
    for (const auto& [kind, t] : r.by_kind)
      if (t.first != t.second)
        f.items.push_back(
            {kind, t.first - t.second,
             fmt::format("{:.1f} µs in {} vs {:.1f} µs in {}", t.first, b.math_mode, t.second, r.math_mode)});
    finish(f, b.S, top);
    out.push_back(std::move(f));
  }

  // Parallelism.
  if (b.S - b.P > 0 && !b.branches.empty()) {
    Finding f;
    f.advisor = "parallelism";
    f.saving_us = b.S - b.P;
    for (const auto& br : b.branches)
      f.items.push_back({fmt::format("branch from {}", br.fork_name), br.us,
                         fmt::format("{} layer(s), {:.1f} µs off the critical path", br.layers, br.us)});
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
    for (const auto& l : b.layers) {
      if (l.source != "measured" || !l.roofline_us || l.us <= *l.roofline_us) continue;
      f.items.push_back({fmt::format("{} {}", l.name, l.kind), l.us - *l.roofline_us,
                         fmt::format("{:.1f} µs vs roofline {:.1f} µs ({:.0f}% of peak), {}", l.us,
                                     *l.roofline_us, 100.0 * *l.roofline_us / l.us, short_key(l.key, 60))});
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
    for (const auto& l : b.layers)
      if (l.conversion_us > 0)
        f.items.push_back({fmt::format("{} {}", l.name, l.kind), l.conversion_us,
                           fmt::format("{} needs {:.1f} µs of reorders", l.algorithm, l.conversion_us)});
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
          {fmt::format("{} {} {}", t.runtime, t.runtime_version, t.settings), t.us - b.S,
           fmt::format("{:.1f} µs: M/S {:.2f}, M/F {:.2f}, M/P {:.2f}", t.us, b.S > 0 ? t.us / b.S : 0.0,
                       b.F > 0 ? t.us / b.F : 0.0, b.P > 0 ? t.us / b.P : 0.0)});
    f.summary =
        fmt::format("the framework takes {:.1f} µs, {:.2f}x the sequential bound S ({:.2f}x F, {:.2f}x P)",
                    *b.M, b.S > 0 ? *b.M / b.S : 0.0, b.F > 0 ? *b.M / b.F : 0.0, b.P > 0 ? *b.M / b.P : 0.0);
    finish(f, *b.M, top);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace floorline::analyzer
