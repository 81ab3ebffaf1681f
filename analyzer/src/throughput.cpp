// The throughput view (throughput.hpp): single-stream latency and offline throughput per model,
// for the bound S and for each imported runtime.
#include "floorline/analyzer/throughput.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace floorline::analyzer {

namespace {

ThroughputPoint point(int64_t batch, double latency_us, bool complete) {
  ThroughputPoint p;
  p.batch = batch;
  p.latency_us = latency_us;
  p.inferences_per_s = latency_us > 0 ? static_cast<double>(batch) * 1e6 / latency_us : 0;
  p.complete = complete;
  return p;
}

// Sorts the points by batch and sets the single-stream and offline points.
void finish(ThroughputSeries& s) {
  std::stable_sort(s.points.begin(), s.points.end(),
                   [](const ThroughputPoint& a, const ThroughputPoint& b) { return a.batch < b.batch; });
  s.single_stream = s.points.front();
  s.offline = s.points.front();
  for (const auto& p : s.points)
    if (p.inferences_per_s > s.offline.inferences_per_s) s.offline = p;
}

std::string runtime_name(const FrameworkTime& f) {
  std::string n = f.runtime;
  for (const auto* part : {&f.runtime_version, &f.settings})
    if (!part->empty()) n += " " + *part;
  if (f.threads > 0) n += fmt::format(", {} thread{}", f.threads, f.threads == 1 ? "" : "s");
  return n;
}

}  // namespace

std::vector<ModelThroughput> throughput_view(const std::vector<ModelReport>& models) {
  std::vector<ModelThroughput> out;
  auto entry = [&out](const ModelBounds& b) -> ModelThroughput& {
    for (auto& t : out)
      if (t.model == b.model && t.dtype == b.dtype) return t;
    ModelThroughput t;
    t.model = b.model;
    t.dtype = b.dtype;
    t.bound.name = "bound S";
    t.bound.bound = true;
    out.push_back(std::move(t));
    return out.back();
  };
  for (const auto& m : models) {
    const auto& b = m.bounds;
    auto& t = entry(b);
    t.bound.points.push_back(point(b.batch, b.S, b.complete));
    for (const auto& f : b.framework) {
      auto same = [&f](const ThroughputSeries& s) {
        return std::tie(s.runtime, s.runtime_version, s.settings, s.threads) ==
               std::tie(f.runtime, f.runtime_version, f.settings, f.threads);
      };
      auto it = std::find_if(t.runtimes.begin(), t.runtimes.end(), same);
      if (it == t.runtimes.end()) {
        ThroughputSeries s;
        s.name = runtime_name(f);
        s.runtime = f.runtime;
        s.runtime_version = f.runtime_version;
        s.settings = f.settings;
        s.threads = f.threads;
        t.runtimes.push_back(std::move(s));
        it = std::prev(t.runtimes.end());
      }
      // Two rows of one runtime at one batch (imported twice): the faster, as M takes the fastest.
      auto p = std::find_if(it->points.begin(), it->points.end(),
                            [&b](const ThroughputPoint& q) { return q.batch == b.batch; });
      if (p == it->points.end())
        it->points.push_back(point(b.batch, f.us, true));
      else if (f.us < p->latency_us)
        *p = point(b.batch, f.us, true);
      if (f.us < b.S && b.S > 0) it->faster_than_bound.push_back(b.batch);
    }
  }
  for (auto& t : out) {
    finish(t.bound);
    for (auto& s : t.runtimes) {
      finish(s);
      std::sort(s.faster_than_bound.begin(), s.faster_than_bound.end());
      s.faster_than_bound.erase(std::unique(s.faster_than_bound.begin(), s.faster_than_bound.end()),
                                s.faster_than_bound.end());
      if (t.bound.offline.inferences_per_s > 0)
        s.offline_over_bound = s.offline.inferences_per_s / t.bound.offline.inferences_per_s;
    }
  }
  return out;
}

std::vector<int64_t> throughput_batches(const std::vector<ModelThroughput>& view) {
  std::set<int64_t> batches;
  for (const auto& t : view) {
    for (const auto& p : t.bound.points) batches.insert(p.batch);
    for (const auto& s : t.runtimes)
      for (const auto& p : s.points) batches.insert(p.batch);
  }
  return {batches.begin(), batches.end()};
}

}  // namespace floorline::analyzer
