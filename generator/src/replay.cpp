// Replay: the chosen cases of a model wired into its graph and timed as one pass.
#include "floorline/generator/replay.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "floorline/model_processor/layer.hpp"

namespace floorline::gen {

Result<std::map<std::string, ChosenCase>> best_cases(benchdb::Database& db, int64_t system_id, const Plan& plan,
                                                     const std::string& dtype) {
  std::unordered_map<std::string, const PlannedCase*> by_name;
  for (const auto& c : plan.cases) by_name.emplace(c.spec.name, &c);
  const std::string math = dtype == "f32" ? "fp32" : dtype;
  std::map<std::string, ChosenCase> out;
  FL_TRY(db.for_each(
      fmt::format("SELECT lc.key, {} AS name, b.median_us FROM best_measurements b "
                  "JOIN layer_configs lc ON lc.id = b.config_id JOIN cases c ON c.id = b.case_id "
                  "WHERE b.system_id = ?1 AND b.dtype = ?2 AND b.math_mode = ?3 AND b.fusion = ''",
                  benchdb::kCaseNameSql),
      {system_id, dtype, math}, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        auto it = by_name.find(std::get<std::string>(v[1]));
        if (it != by_name.end()) out[std::get<std::string>(v[0])] = {it->second->spec, std::get<double>(v[2])};
        return Status{};
      }));
  return out;
}

namespace {

// Where a value of the graph lives during replay: output `out` of step `step`.
struct Source {
  size_t step = 0;
  size_t out = 0;
};

struct Step {
  std::unique_ptr<kernels::Kernel> kernel;
  std::string label;  // the layer, for error messages
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<ReplayResult> replay_model(const mp::ModelIR& model, const std::map<std::string, ChosenCase>& chosen,
                                  const Backend& backend, const ReplayOptions& options) {
  ReplayResult r;
  r.model = model.name;
  r.batch = model.batch;
  backend.set_threads(options.threads);
  const auto factory = backend.factory();
  std::vector<Step> steps;
  std::unordered_map<std::string, Source> sources;
  std::unordered_map<std::string, int> produced;  // every value some layer of the main graph writes
  for (const auto& layer : model.layers)
    if (layer.subgraph.empty() && layer.cost != mp::CostClass::kHost)
      for (const auto& n : layer.output_names) produced[n] = layer.index;

  for (const auto& layer : model.layers) {
    if (!layer.subgraph.empty()) continue;  // If/Loop bodies: not replayed
    if (layer.cost == mp::CostClass::kView) {
      // A view passes its input's buffer on unchanged.
      if (!layer.input_names.empty() && !layer.output_names.empty())
        if (auto it = sources.find(layer.input_names[0]); it != sources.end()) sources[layer.output_names[0]] = it->second;
      continue;
    }
    if (!layer.cost_bearing()) continue;
    auto c = chosen.find(layer.key);
    if (c == chosen.end()) {
      ++r.layers_missing;
      continue;
    }
    auto built = factory(c->second.spec);
    if (!built) {
      ++r.layers_missing;
      continue;
    }
    std::unique_ptr<kernels::Kernel> kernel = std::move(built).value();
    const std::string label = fmt::format("{} ({})", layer.name, layer.op_type);
    for (size_t k = 0; k < layer.input_names.size(); ++k) {
      auto src = sources.find(layer.input_names[k]);
      if (src == sources.end()) {
        if (produced.count(layer.input_names[k])) ++r.operands_unwired;  // its producer is not replayed
        continue;
      }
      kernels::Kernel& producer = *steps[src->second.step].kernel;
      const auto from = producer.port(true, src->second.out);
      const auto to = kernel->port(false, k);
      if (!from || !to) {
        ++r.operands_unwired;
        continue;
      }
      if (from->layout == to->layout && from->bytes == to->bytes) {
        FL_TRY(kernel->bind_input(k, from->data));
        ++r.operands_shared;
        continue;
      }
      auto conv = backend.conversion(producer, src->second.out, *kernel, k);
      if (!conv) {
        ++r.operands_unwired;
        continue;
      }
      steps.push_back({std::move(conv).value(), fmt::format("conversion {} > {} for {}", from->layout, to->layout, label)});
      ++r.conversions;
    }
    size_t out = 0;
    for (const auto& name : layer.output_names) {
      if (name.empty()) continue;
      sources[name] = {steps.size(), out++};
    }
    steps.push_back({std::move(kernel), label});
    r.cases_us += c->second.median_us;
    ++r.layers_replayed;
  }
  if (r.layers_replayed == 0)
    return make_error("{} (batch {}): no layer has a measured case to replay", model.name, model.batch);

  size_t failing = 0;
  auto pass = [&] {
    for (failing = 0; failing < steps.size(); ++failing) steps[failing].kernel->run();
  };
  try {
    const auto w0 = std::chrono::steady_clock::now();
    int64_t warm = 0;
    do {
      pass();
      ++warm;
    } while (seconds_since(w0) < options.warmup_seconds);
    const double per_pass = seconds_since(w0) / static_cast<double>(warm);
    const auto n = static_cast<int64_t>(std::clamp(std::ceil(options.min_time / std::max(per_pass, 1e-9)), 1.0, 1e6));
    std::vector<double> reps;
    for (int rep = 0; rep < std::max(1, options.repetitions); ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < n; ++k) pass();
      reps.push_back(seconds_since(t0) / static_cast<double>(n) * 1e6);
      r.passes += n;
    }
    std::vector<double> sorted = reps;
    std::sort(sorted.begin(), sorted.end());
    const size_t m = sorted.size();
    r.median_us = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
    r.min_us = sorted.front();
    r.max_us = sorted.back();
    double mean = 0, var = 0;
    for (double x : reps) mean += x / static_cast<double>(m);
    for (double x : reps) var += (x - mean) * (x - mean);
    r.stddev_us = m > 1 ? std::sqrt(var / static_cast<double>(m - 1)) : 0;
    r.repetitions = static_cast<int>(m);
  } catch (const std::exception& e) {
    return make_error("{} (batch {}): replay failed at {}: {}", model.name, model.batch,
                      failing < steps.size() ? steps[failing].label : "?", e.what());
  }
  return r;
}

benchdb::FrameworkLatencyRow replay_row(const ReplayResult& r, int64_t system_id, const std::string& device,
                                        int threads, const std::string& dtype, const std::string& version) {
  benchdb::FrameworkLatencyRow row;
  row.model_name = r.model;
  row.runtime = std::string(benchdb::kReplayRuntime);
  row.runtime_version = version;
  row.device = device;
  row.batch = r.batch;
  row.dtype = dtype;
  row.settings = fmt::format("system={}", system_id);
  row.threads = threads;
  row.median_us = r.median_us;
  row.min_us = r.min_us;
  row.max_us = r.max_us;
  row.stddev_us = r.stddev_us;
  row.repetitions = r.repetitions;
  row.measured_at = benchdb::utc_now();
  row.source = fmt::format("replay of {} layers ({} shared operands, {} conversions, {} missing, {} unwired)",
                           r.layers_replayed, r.operands_shared, r.conversions, r.layers_missing, r.operands_unwired);
  return row;
}

}  // namespace floorline::gen
