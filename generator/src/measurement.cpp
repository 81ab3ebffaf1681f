// The measurement method's order, statistics and sentinel (measurement.hpp).
#include "floorline/generator/measurement.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "floorline/common/statistics.hpp"

namespace floorline::gen {

std::vector<Visit> interleaved_order(size_t cases, int passes, size_t block) {
  std::vector<Visit> out;
  if (cases == 0 || passes <= 0) return out;
  if (block == 0) block = cases;
  out.reserve(cases * static_cast<size_t>(passes));
  for (size_t first = 0; first < cases; first += block) {
    const size_t last = std::min(cases, first + block);
    for (int p = 0; p < passes; ++p)
      for (size_t i = first; i < last; ++i) out.push_back({i, p});
  }
  return out;
}

CaseStatistics case_statistics(const std::vector<PassSamples>& passes) {
  CaseStatistics s;
  s.min_us = std::numeric_limits<double>::infinity();
  bool any_clean = false;
  for (const auto& p : passes) {
    if (p.us.empty()) continue;
    ++s.passes;
    s.repetitions += p.us.size();
    if (p.slowed)
      ++s.slowed;
    else
      any_clean = true;
    for (double v : p.us) s.min_us = std::min(s.min_us, v);
  }
  if (s.passes == 0) return CaseStatistics{};
  // The best placement among the passes the sentinel did not find slowed (all, when every pass
  // was): a slowed period says nothing about the kernel.
  const Summary* best = nullptr;
  std::vector<Summary> summaries;
  summaries.reserve(passes.size());
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& p : passes) {
    if (p.us.empty() || (any_clean && p.slowed)) continue;
    summaries.push_back(summarize(p.us));
    lo = std::min(lo, summaries.back().median);
    hi = std::max(hi, summaries.back().median);
  }
  for (const auto& sm : summaries)
    if (!best || sm.median < best->median) best = &sm;
  for (const auto& sm : summaries)
    if (&sm != best && (s.runner_up_us == 0 || sm.median < s.runner_up_us)) s.runner_up_us = sm.median;
  s.median_us = best->median;
  s.mean_us = best->mean;
  s.stddev_us = best->stddev;
  s.cv = best->mean > 0 ? best->stddev / best->mean : 0;
  s.spread = lo > 0 ? hi / lo - 1 : 0;
  std::vector<double> kept;
  for (const auto& p : passes)
    if (!(any_clean && p.slowed)) kept.insert(kept.end(), p.us.begin(), p.us.end());
  std::sort(kept.begin(), kept.end());
  kept.resize(std::max<size_t>(std::min<size_t>(2, kept.size()), (kept.size() + 1) / 2));
  const Summary low = summarize(kept);
  s.low_cv = low.n >= 2 && low.mean > 0 ? low.stddev / low.mean : 0;
  return s;
}

std::string samples_json(const std::vector<PassSamples>& passes) {
  std::string out = "[";
  bool first_pass = true;
  for (const auto& p : passes) {
    if (p.us.empty()) continue;
    out += first_pass ? "[" : ",[";
    first_pass = false;
    for (size_t i = 0; i < p.us.size(); ++i) out += fmt::format("{}{:.4g}", i ? "," : "", p.us[i]);
    out += "]";
  }
  return out + "]";
}

bool SlowdownDetector::record(double seconds) {
  ++readings_;
  if (!(seconds > 0)) return false;
  if (baseline_ <= 0 || seconds < baseline_) {
    baseline_ = seconds;
    return false;
  }
  const double ratio = seconds / baseline_;
  worst_ = std::max(worst_, ratio);
  if (ratio <= factor_) return false;
  ++slowed_;
  return true;
}

Sentinel::Sentinel(int threads) : n_(size_t{4} << 18) {  // 4 MiB of floats per thread
  data_.resize(static_cast<size_t>(std::max(1, threads)));
  sink_.assign(data_.size(), 0.f);
  for (auto& d : data_) {
    d = std::make_unique<float[]>(n_);
    // A fixed, normal-range pattern: no denormals, the same work in every process.
    for (size_t i = 0; i < n_; ++i) d[i] = 0.5f + static_cast<float>(i % 1021) / 2048.f;
  }
}

double Sentinel::time_one(size_t t) {
  using clock = std::chrono::steady_clock;
  const float* data = data_[t].get();
  double best = std::numeric_limits<double>::infinity();
  for (int call = 0; call < 3; ++call) {
    const auto t0 = clock::now();
    // Four independent chains: memory and a little arithmetic, as the cases have.
    float a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 3 < n_; i += 4) {
      a = a * 0.999f + data[i];
      b = b * 0.999f + data[i + 1];
      c = c * 0.999f + data[i + 2];
      d = d * 0.999f + data[i + 3];
    }
    // Each thread writes its own sink: the sum is used, so the loop is not optimized away.
    *static_cast<volatile float*>(&sink_[t]) = a + b + c + d;
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
  }
  return best;
}

double Sentinel::time() {
  if (data_.size() == 1) return time_one(0);
  // Threads of our own (the core links no OpenMP), started for each reading: a reading comes every
  // RunOptions::sentinel_interval (0.2 s), and the start of a thread is outside its timed calls.
  std::vector<double> best(data_.size(), 0.0);
  std::vector<std::thread> others;
  others.reserve(data_.size() - 1);
  for (size_t t = 1; t < data_.size(); ++t) others.emplace_back([this, t, &best] { best[t] = time_one(t); });
  best[0] = time_one(0);
  for (auto& th : others) th.join();
  return *std::max_element(best.begin(), best.end());
}

}  // namespace floorline::gen
