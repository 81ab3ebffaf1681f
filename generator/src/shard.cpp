#include "floorline/generator/shard.hpp"

#include "floorline/generator/runner.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

namespace floorline::gen {

namespace {

bool parse_int(std::string_view s, int& out) {
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

// A number column (SQLite may hand back a whole REAL as an integer).
double number(const benchdb::SqlValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return 0;
}

// What one backend's cases are estimated with.
struct Rates {
  std::map<std::string, double> flops_per_s, bytes_per_s;  // by dtype name; "" = any dtype
  double scale = 1;                                        // measured / roofline time
  std::unordered_map<std::string, double> measured_s;      // per-call seconds by case name
  std::string source;
};

double rate_for(const std::map<std::string, double>& rates, const std::string& dtype) {
  if (auto it = rates.find(dtype); it != rates.end()) return it->second;
  if (auto it = rates.find("f32"); it != rates.end()) return it->second;
  return rates.at("");
}

double roofline_seconds(const PlannedCase& c, const Rates& r) {
  const std::string dtype(dtype_name(c.spec.variant.dtype));
  const double flops = static_cast<double>(std::max<int64_t>(0, c.work.flops));
  const double bytes = static_cast<double>(std::max<int64_t>(0, c.work.bytes));
  return std::max(flops / rate_for(r.flops_per_s, dtype), bytes / rate_for(r.bytes_per_s, dtype));
}

Rates nominal_rates(const std::string& device_kind, int threads) {
  Rates r;
  const double t = std::max(1, threads);
  if (device_kind == "gpu") {
    r.flops_per_s[""] = kNominalGpuFlops;
    r.bytes_per_s[""] = kNominalGpuBytes;
  } else {
    r.flops_per_s[""] = kNominalCpuFlopsPerThread * t;
    r.bytes_per_s[""] = kNominalCpuBytesPerThread * t;
  }
  r.source = "nominal rates";
  return r;
}

// The earlier database's system with the most current passed cases of `backend` (ties: the lowest
// id), its peaks, its measurements and the median measured-to-roofline ratio.
Result<Rates> earlier_rates(benchdb::Database& db, const std::string& backend, const std::string& device_kind,
                            int threads, const Plan& plan) {
  Rates r = nominal_rates(device_kind, threads);
  FL_ASSIGN_OR_RETURN(auto sys, db.query("SELECT m.system_id, count(*) AS n FROM measurements m "
                                         "JOIN cases c ON c.id = m.case_id "
                                         "WHERE m.superseded = 0 AND m.status = 'passed' AND c.backend = ?1 "
                                         "GROUP BY m.system_id ORDER BY n DESC, m.system_id LIMIT 1",
                                         {backend}));
  if (sys.rows.empty()) {
    r.source += " (no passed " + backend + " case in the earlier database)";
    return r;
  }
  const int64_t system_id = std::get<int64_t>(sys.rows[0][0]);
  FL_TRY(
      db.for_each("SELECT peak, dtype, max(value_per_s) FROM system_peaks WHERE system_id = ?1 "
                  "GROUP BY peak, dtype",
                  {system_id}, [&](const auto&, const std::vector<benchdb::SqlValue>& v) -> Status {
                    const double value = number(v[2]);
                    if (value <= 0) return {};
                    auto& m = std::get<std::string>(v[0]) == "flops" ? r.flops_per_s : r.bytes_per_s;
                    m[std::get<std::string>(v[1])] = value;
                    return {};
                  }));
  FL_TRY(
      db.for_each("SELECT c.name, m.median_us FROM measurements m JOIN cases c ON c.id = m.case_id "
                  "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.status = 'passed' AND c.backend = ?2 "
                  "AND m.median_us IS NOT NULL",
                  {system_id, backend}, [&](const auto&, const std::vector<benchdb::SqlValue>& v) -> Status {
                    r.measured_s[std::get<std::string>(v[0])] = number(v[1]) * 1e-6;
                    return {};
                  }));
  // The roofline is a floor that layers do not reach: scale it by how far the measured cases were
  // from it (the median ratio; the upper middle one of an even count), so that estimated and
  // measured cases are comparable.
  std::vector<double> ratios;
  for (const auto& c : plan.cases) {
    if (c.spec.variant.backend != backend) continue;
    auto it = r.measured_s.find(c.spec.name);
    if (it == r.measured_s.end()) continue;
    const double roof = roofline_seconds(c, r);
    if (roof > 0) ratios.push_back(it->second / roof);
  }
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2),
                     ratios.end());
    r.scale = std::max(1.0, ratios[ratios.size() / 2]);
  }
  r.source = fmt::format("system {} of the earlier database: {} measured cases, roofline x {:.1f}", system_id,
                         r.measured_s.size(), r.scale);
  return r;
}

}  // namespace

Result<ShardSpec> parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  ShardSpec s;
  if (slash == std::string_view::npos || !parse_int(text.substr(0, slash), s.index) ||
      !parse_int(text.substr(slash + 1), s.count))
    return make_error("--shard {}: expected I/N, two integers (e.g. 0/4)", text);
  if (s.count < 1) return make_error("--shard {}: the shard count N must be at least 1", text);
  if (s.index < 0 || s.index >= s.count)
    return make_error("--shard {}: the shard index is 0-based, from 0 to {}", text, s.count - 1);
  return s;
}

std::string shard_label(const ShardSpec& s) {
  return fmt::format("{}/{}", s.index, s.count);
}

Result<CaseCosts> estimate_case_costs(const Plan& plan, const std::vector<const Backend*>& backends,
                                      const CostOptions& options, benchdb::Database* earlier) {
  std::map<std::string, Rates> rates;  // by backend name
  std::vector<std::string> sources;
  for (const auto& c : plan.cases) {
    const std::string& name = c.spec.variant.backend;
    if (rates.count(name)) continue;
    std::string kind = "cpu";
    for (const Backend* b : backends)
      if (b->name() == name) kind = b->device_kind();
    if (earlier) {
      FL_ASSIGN_OR_RETURN(rates[name], earlier_rates(*earlier, name, kind, options.threads, plan));
    } else {
      rates[name] = nominal_rates(kind, options.threads);
    }
    sources.push_back(name + ": " + rates[name].source);
  }
  CaseCosts out;
  out.source = fmt::format("{}", fmt::join(sources, "; "));
  out.seconds.reserve(plan.cases.size());
  for (const auto& c : plan.cases) {
    if (c.status) {  // decided by the plan: recorded, not timed
      out.seconds.push_back(kRecordOverhead);
      continue;
    }
    const Rates& r = rates.at(c.spec.variant.backend);
    double t = 0;
    if (auto it = r.measured_s.find(c.spec.name); it != r.measured_s.end()) {
      t = it->second;
      ++out.measured;
    } else {
      t = roofline_seconds(c, r) * r.scale;
      ++out.roofline;
    }
    // In each pass the runner builds the case, warms it up for at least warmup_seconds (one call
    // at least), then sizes each repetition to last min_time and hold min_iterations calls (one
    // for a long call: repetition_calls); a warm-up of one call that is a repetition's one call is
    // the first repetition (RunOptions::first_call_counts).
    const double calls = least_calls(t, options.min_iterations, options.long_call);
    const bool first_counts =
        options.first_call_counts && calls == 1 && t >= options.warmup_seconds && t >= options.min_time;
    const double per_pass = kCaseOverhead + std::max(options.warmup_seconds, t) +
                            std::max(first_counts ? 0 : 1, options.repetitions - (first_counts ? 1 : 0)) *
                                std::max(options.min_time, calls * t);
    out.seconds.push_back(std::max(1, options.passes) * per_pass);
  }
  return out;
}

Partition partition_cases(const std::vector<std::string>& names, const std::vector<double>& seconds,
                          int count) {
  count = std::max(1, count);
  Partition p;
  p.shard_of.assign(names.size(), 0);
  p.seconds.assign(static_cast<size_t>(count), 0.0);
  p.cases.assign(static_cast<size_t>(count), 0);
  // Whole nanoseconds: integer comparisons and sums give the same order on every machine.
  std::vector<int64_t> cost(names.size());
  for (size_t k = 0; k < names.size(); ++k)
    cost[k] = std::isfinite(seconds[k]) ? std::llround(std::max(0.0, seconds[k]) * 1e9) : 0;
  std::vector<size_t> order(names.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (cost[a] != cost[b]) return cost[a] > cost[b];
    return names[a] < names[b];
  });
  std::vector<int64_t> load(static_cast<size_t>(count), 0);
  for (size_t k : order) {
    // The least-loaded shard, the lowest index among equals (count is small: a linear scan).
    size_t best = 0;
    for (size_t s = 1; s < load.size(); ++s)
      if (load[s] < load[best]) best = s;
    load[best] += cost[k];
    p.shard_of[k] = static_cast<int>(best);
    ++p.cases[best];
  }
  for (size_t s = 0; s < load.size(); ++s) p.seconds[s] = static_cast<double>(load[s]) * 1e-9;
  return p;
}

Plan shard_plan(const Plan& plan, const Partition& partition, int index) {
  Plan out;
  out.configs = plan.configs;
  out.backends = plan.backends;
  for (size_t k = 0; k < plan.cases.size(); ++k)
    if (partition.shard_of.at(k) == index) out.cases.push_back(plan.cases[k]);
  return out;
}

}  // namespace floorline::gen
