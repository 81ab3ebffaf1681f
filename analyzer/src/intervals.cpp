// Bootstrap intervals of S, P and F (analyzer.hpp, confidence_intervals).
#include <algorithm>
#include <cmath>
#include <random>

#include "floorline/analyzer/analyzer.hpp"

namespace floorline::analyzer {

void confidence_intervals(const std::vector<mp::ModelIR>& models, const CostTable& costs,
                          const AnalyzeOptions& options, std::vector<ModelBounds*> bounds, int replicates) {
  bool any = false;
  for (const auto& [k, c] : costs.best) any = any || c.samples.size() >= 2;
  if (!any || replicates < 2) return;
  // A fixed seed: the same database gives the same report (golden files, two readers agreeing).
  std::mt19937_64 rng(18);
  CostTable redrawn = costs;
  // The intervals are S's, P's and F's: E (its cache times, its layout choice over the passed
  // cases) is left out of the replicates, which it slowed 30× (efficientnet_v2_s: 3.7 s).
  redrawn.cache_times.clear();
  redrawn.passed.clear();
  std::vector<std::vector<double>> s(bounds.size()), p(bounds.size()), f(bounds.size());
  for (int r = 0; r < replicates; ++r) {
    for (auto& [k, c] : redrawn.best) {
      const auto& samples = costs.best.at(k).samples;
      if (samples.size() < 2) continue;
      std::uniform_int_distribution<size_t> pick(0, samples.size() - 1);
      double lowest = samples[pick(rng)];
      for (size_t i = 1; i < samples.size(); ++i) lowest = std::min(lowest, samples[pick(rng)]);
      c.us = lowest;
    }
    for (size_t m = 0; m < bounds.size() && m < models.size(); ++m) {
      const ModelBounds b = analyze_model(models[m], redrawn, options);
      s[m].push_back(b.S);
      p[m].push_back(b.P);
      f[m].push_back(b.F);
    }
  }
  auto upper = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    const auto at = static_cast<size_t>(std::ceil(0.975 * static_cast<double>(v.size()))) - 1;
    return v[std::min(at, v.size() - 1)];
  };
  for (size_t m = 0; m < bounds.size() && m < models.size(); ++m) {
    ModelBounds& b = *bounds[m];
    b.S_ci = Interval{b.S, std::max(b.S, upper(s[m]))};
    b.P_ci = Interval{b.P, std::max(b.P, upper(p[m]))};
    b.F_ci = Interval{b.F, std::max(b.F, upper(f[m]))};
  }
}

}  // namespace floorline::analyzer
