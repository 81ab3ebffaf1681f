// Loading a system's measurements and the roofline peaks (analyzer.hpp); the bounds are in bounds.cpp.
#include "floorline/analyzer/analyzer.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "floorline/common/statistics.hpp"
#include "math_mode.hpp"

namespace floorline::analyzer {

std::string slowed_text(const MethodSummary& m) {
  if (m.slowed_only == 0) return "each also has a pass outside a slowed period";
  return fmt::format(
      "{} of them have no pass outside one (their times may be high; `run --quick` times nothing again)",
      m.slowed_only);
}

namespace {

std::string text(const benchdb::SqlValue& v) {
  return benchdb::value_text(v);
}
double real(const benchdb::SqlValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return 0;
}
int64_t integer(const benchdb::SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return 0;
}

bool fewer_multiplies(const std::string& algorithm) {
  // Winograd and FFT convolutions, and Floorline's sum over a convolution's valid taps, do fewer
  // multiplications than the direct count: their FLOP/s against that count is not a rate the
  // hardware reached.
  std::string a = algorithm;
  std::transform(a.begin(), a.end(), a.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return a.find("winograd") != std::string::npos || a.find("fft") != std::string::npos ||
         a.find("valid_taps") != std::string::npos;
}

}  // namespace

int64_t roofline_flops(const mp::Layer& l) {
  if (l.config.kind != mp::LayerKind::kConv || l.flops <= 0) return l.flops;
  const auto* x = l.config.inputs.empty() ? nullptr : &l.config.inputs[0];
  const mp::TensorArg* w = nullptr;
  for (const auto& a : l.config.inputs)
    if (a.role == "w") w = &a;
  if (!x || !w || x->shape.size() != w->shape.size() || x->shape.size() < 3 || l.config.outputs.empty())
    return l.flops;
  const size_t n = x->shape.size() - 2;
  const auto pads = l.config.attr_ints("pads"), strides = l.config.attr_ints("strides"),
             dil = l.config.attr_ints("dil");
  const auto& y = l.config.outputs[0].shape;
  if (pads.size() != 2 * n || strides.size() != n || dil.size() != n || y.size() != x->shape.size())
    return l.flops;
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
  CaseTime t;
  t.us = real(v[4]);
  t.case_id = integer(v[5]);
  t.id = CaseId{text(v[6]), text(v[7]), text(v[1]), text(v[2]), text(v[8]), text(v[3]), text(v[0])};
  t.name = case_name(t.id);
  return t;
}

// The measurement method's columns from v[at]: samples_us (one JSON array per pass), passes,
// placements, slowed, noisy.
void add_method(CaseTime& t, const std::vector<benchdb::SqlValue>& v, size_t at) {
  if (std::holds_alternative<std::string>(v[at])) {
    const auto j = nlohmann::json::parse(std::get<std::string>(v[at]), nullptr, false);
    double lo = 0, hi = 0;
    if (j.is_array())
      for (const auto& pass : j) {
        if (!pass.is_array() || pass.empty()) continue;
        std::vector<double> us;
        for (const auto& x : pass)
          if (x.is_number()) us.push_back(x.get<double>());
        if (us.empty()) continue;
        t.samples.insert(t.samples.end(), us.begin(), us.end());
        const double median = summarize(us).median;
        lo = lo == 0 ? median : std::min(lo, median);
        hi = std::max(hi, median);
      }
    t.spread = lo > 0 ? hi / lo - 1 : 0;
  }
  t.passes = integer(v[at + 1]);
  t.placements = integer(v[at + 2]);
  t.slowed = integer(v[at + 3]);
  t.noisy = integer(v[at + 4]);
}

}  // namespace

Result<std::map<int64_t, MeasuringSystem>> systems_measuring(benchdb::Database& db,
                                                             const std::vector<mp::ModelIR>& models) {
  std::set<std::string> keys;
  for (const auto& m : models)
    for (const auto& l : m.layers)
      if (l.cost_bearing()) keys.insert(l.key);
  std::map<int64_t, MeasuringSystem> out;
  FL_TRY(db.for_each(
      "SELECT b.system_id, lc.key, s.threads FROM best_measurements b JOIN layer_configs lc ON lc.id = "
      "b.config_id JOIN systems s ON s.id = b.system_id",
      {}, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        if (!keys.count(text(v[1]))) return Status{};
        MeasuringSystem& s = out[integer(v[0])];
        ++s.best_cases;
        s.threads = integer(v[2]);
        return Status{};
      }));
  return out;
}

Result<int64_t> choose_system(benchdb::Database& db, const std::vector<mp::ModelIR>& models,
                              std::optional<int64_t> requested, std::optional<int64_t> threads) {
  if (requested) {
    FL_ASSIGN_OR_RETURN(const auto r, db.query("SELECT count(*) FROM systems WHERE id = ?1", {*requested}));
    if (integer(r.rows.at(0).at(0)) == 0)
      return make_error("{}: no system {} (floorline db info lists them)", db.path(), *requested);
    return *requested;
  }
  FL_ASSIGN_OR_RETURN(const auto measuring, systems_measuring(db, models));
  std::map<int64_t, int64_t> hits;
  for (const auto& [id, s] : measuring)
    if (!threads || s.threads == *threads) hits[id] = s.best_cases;
  if (hits.empty() && threads)
    return make_error("{}: no measurement of any layer of these models at {} thread(s)", db.path(), *threads);
  if (hits.empty())
    return make_error("{}: no measurement of any layer of these models (run floorline bench on them first)",
                      db.path());
  int64_t best = 0, most = -1;
  for (const auto& [id, n] : hits)
    if (n >= most) best = id, most = n;
  return best;
}

namespace {

// Whether a framework row's device is this system's: a GPU's rows name it ("NVIDIA H100 80GB
// HBM3"); a CPU's name its host's CPU ("cpu:Intel(R) Xeon(R) Processor", the reference stage), or
// just "cpu" (imports and databases from before the name was recorded), which every CPU system takes.
// An ISA-capped CPU system takes none: the frameworks ran uncapped (docs/BACKENDS.md, ISA-capped
// systems), so their latencies are no check of a capped S.
bool framework_device_matches(const std::string& device, const std::string& kind, const std::string& name,
                              const std::string& isa) {
  if (kind != "cpu") return device == name;
  return isa.empty() && (device == "cpu" || device == "cpu:" + name);
}

// A framework row of unknown host ("cpu") gives way to this host's own row of the same identity
// (FrameworkLatencyRow, FrameworkLayerTimeRow): a database resumed after the rows named their host
// holds both.
template <class Row>
void prefer_own_host(std::vector<Row>& rows) {
  auto identity = [](const Row& r) {
    return std::tie(r.model_name, r.runtime, r.runtime_version, r.batch, r.dtype, r.settings, r.threads);
  };
  std::set<std::tuple<std::string, std::string, std::string, int64_t, std::string, std::string, int64_t>> own;
  for (const auto& r : rows)
    if (r.device != "cpu") own.insert(identity(r));
  std::erase_if(rows, [&](const Row& r) { return r.device == "cpu" && own.count(identity(r)); });
}

// The cache states' times of `system_id`'s cases (schema 10) into t.cache_times, the memory state's
// reading with the dst evicted too (schema 11) as "memory_dst", among dirty lines (schema 12) as
// "memory_dirty"; for t's own system, the L2 of the
// cores its cases ran on (half an "llc" flush) into t.private_cache_bytes, and on a device (a GPU,
// whose L2 is its last level and whose "llc" state flushes nothing) its L2, half a "memory" flush
// (generator/cache_state.hpp, time_on_device).
Status load_cache_times(benchdb::Database& db, int64_t system_id, CostTable& t) {
  const std::string dst = db.schema_version() >= 11 ? "dst_memory_min_us" : "NULL";
  const std::string dirty = db.schema_version() >= 12 ? "dirty_memory_min_us" : "NULL";
  return db.for_each(fmt::format("SELECT case_id, state, min_us, flush_bytes, {}, {} FROM cache_times WHERE "
                                 "system_id = ?1",
                                 dst, dirty),
                     {system_id},
                     [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                       const std::string state = std::get<std::string>(v[1]);
                       auto& states = t.cache_times[{system_id, std::get<int64_t>(v[0])}];
                       states[state] = std::get<double>(v[2]);
                       if (state == "memory" && std::holds_alternative<double>(v[4]))
                         states["memory_dst"] = std::get<double>(v[4]);
                       if (state == "memory" && std::holds_alternative<double>(v[5]))
                         states["memory_dirty"] = std::get<double>(v[5]);
                       const bool device = t.device_kind == "gpu";
                       if (state == (device ? "memory" : "llc") && system_id == t.system_id)
                         t.private_cache_bytes = std::max(t.private_cache_bytes, std::get<int64_t>(v[3]) / 2);
                       return Status{};
                     });
}

// One system's own costs (load_costs without the thread budget). With `cases_only`, only what a
// system of a thread budget gives the budget's system: its best cases (S's and S_vendor's) and the
// conversions they need; not the defaults, peaks, replays or framework rows, which are the budget
// system's own (the framework tables are read whole: once per analysis, not once per count).
Result<CostTable> load_system_costs(benchdb::Database& db, int64_t system_id, bool cases_only = false) {
  CostTable t;
  t.system_id = system_id;
  // The row as the file has it (a column newer than the file, systems.isa before v9, stays empty).
  std::optional<benchdb::SystemRow> sys;
  FL_TRY(benchdb::for_each_row<benchdb::SystemRow>(db, benchdb::systems_table(), "id = ?1", {system_id},
                                                   [&](benchdb::SystemRow& r) -> Status {
                                                     sys = std::move(r);
                                                     return Status{};
                                                   }));
  if (!sys) return make_error("{}: no system {}", db.path(), system_id);
  t.device_kind = sys->device_kind;
  t.device_name = sys->device_name;
  t.threads = sys->threads;
  std::string libraries;  // "onednn 2.6.3", "cublas 13.1.0, cuda_runtime 13.0, cudnn 9.19.0"
  for (const auto& [library, version] : sys->libraries) libraries += fmt::format(", {} {}", library, version);
  const std::string isa = sys->isa;  // "avx2 cap" in the label where the libraries were capped
  if (!isa.empty()) libraries += fmt::format(", {} cap", isa);
  t.system = t.device_kind == "gpu" ? fmt::format("{} (gpu{})", t.device_name, libraries)
                                    : fmt::format("{} (cpu{}, {} thread{})", t.device_name, libraries,
                                                  t.threads, t.threads == 1 ? "" : "s");
  const std::vector<benchdb::SqlValue> id = {system_id};
  std::vector<double> spreads;
  FL_TRY(db.for_each(
      "SELECT lc.key, b.dtype, b.math_mode, b.fusion, coalesce(b.min_us, b.median_us), b.case_id, "
      "c.backend, c.algorithm, c.layout, m.samples_us, m.passes, m.placements, m.slowed, m.noisy, "
      "coalesce(json_extract(c.params, '$.formats'), '') "
      "FROM best_measurements b JOIN cases c ON c.id = b.case_id JOIN layer_configs lc ON lc.id "
      "= b.config_id JOIN measurements m ON m.id = b.measurement_id "
      "WHERE b.system_id = ?1",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        CaseTime c = case_time(v);
        add_method(c, v, 9);
        c.formats = text(v[14]);
        spreads.push_back(c.spread);
        t.best[{text(v[0]), text(v[1]), text(v[2]), text(v[3])}] = std::move(c);
        t.modes.emplace(text(v[1]), text(v[2]));
        return Status{};
      }));
  if (!spreads.empty()) t.method.median_spread = summarize(spreads).median;
  if (!cases_only) {
    FL_TRY(
        db.for_each("SELECT count(*), coalesce(sum(slowed > 0), 0), coalesce(sum(noisy), 0), "
                    "coalesce(min(passes), 0), coalesce(max(passes), 0), "
                    "coalesce(sum(slowed > 0 AND slowed >= passes), 0) FROM measurements "
                    "WHERE system_id = ?1 AND superseded = 0 AND status = 'passed'",
                    id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                      t.method.cases = integer(v[0]);
                      t.method.slowed_cases = integer(v[1]);
                      t.method.noisy_cases = integer(v[2]);
                      t.method.min_passes = integer(v[3]);
                      t.method.max_passes = integer(v[4]);
                      t.method.slowed_only = integer(v[5]);
                      return Status{};
                    }));
    FL_TRY(db.for_each(
        "SELECT lc.key, c.dtype, c.math_mode, c.fusion, coalesce(m.min_us, m.median_us), c.id, c.backend, "
        "c.algorithm, c.layout "
        "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
        "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.is_default = 1 AND m.status = 'passed' AND "
        "m.median_us IS NOT NULL",
        id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
          // Several libraries of one system (oneDNN, XNNPACK, OpenBLAS) each have a default: H takes
          // the fastest of them, so that it does not depend on the order rows come in.
          const CaseTime c = case_time(v);
          auto [it, fresh] = t.heuristic.try_emplace({text(v[0]), text(v[1]), text(v[2]), text(v[3])}, c);
          if (!fresh && c.us < it->second.us) it->second = c;
          return Status{};
        }));
  }
  FL_TRY(db.for_each(
      "SELECT lc.key, c.dtype, c.math_mode, c.fusion, coalesce(m.min_us, m.median_us), c.id, c.backend, "
      "c.algorithm, c.layout, c.feeds_algorithm, c.feeds_layout, c.conversion_tensor <> '', "
      "coalesce(json_extract(c.params, '$.formats'), '') "
      "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
      "WHERE m.system_id = ?1 AND m.superseded = 0 AND m.status = 'passed' AND m.median_us IS NOT NULL",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        if (integer(v[11]) == 0) {
          // S_vendor's best: the fastest passed case of a vendor library (best_measurements' rule).
          CaseTime c = case_time(v);
          c.formats = text(v[12]);
          t.races[{text(v[0]), text(v[1]), text(v[2]), text(v[3]), system_id}].add(c.us);
          t.passed[{text(v[0]), text(v[1]), text(v[2]), text(v[3])}].push_back(c);
          if (is_own_kernel(c.id)) return Status{};
          auto [it, fresh] = t.best_vendor.try_emplace({text(v[0]), text(v[1]), text(v[2]), text(v[3])}, c);
          if (!fresh && c.us < it->second.us) it->second = std::move(c);
          return Status{};
        }
        const CaseFeeds feeds{text(v[9]), text(v[10])};
        if (feeds.empty()) return Status{};  // feeds nothing it names: charged to no case
        t.conversions[{text(v[0]), text(v[1]), text(v[2]), feeds}].push_back(case_time(v));
        return Status{};
      }));
  FL_TRY(db.for_each(
      "SELECT lc.key, c.dtype, c.math_mode, c.fusion, count(*) FROM measurements m JOIN cases c ON c.id = "
      "m.case_id JOIN layer_configs lc ON lc.id = c.config_id WHERE m.system_id = ?1 AND m.superseded = 0 "
      "AND m.status = 'skipped' AND m.reason LIKE 'raced out:%' GROUP BY 1, 2, 3, 4",
      id, [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
        t.races[{text(v[0]), text(v[1]), text(v[2]), text(v[3]), system_id}].raced_out = integer(v[4]);
        return Status{};
      }));
  auto stamp = [&] {  // each case's thread count and system: the budget's merge keeps them apart
    for (auto* cases : {&t.best, &t.heuristic, &t.best_vendor})
      for (auto& [k, c] : *cases) c.threads = t.threads, c.system_id = system_id;
    for (auto& [k, list] : t.conversions)
      for (auto& c : list) c.threads = t.threads, c.system_id = system_id;
    for (auto& [k, list] : t.passed)
      for (auto& c : list) c.threads = t.threads, c.system_id = system_id;
    t.budget = {{system_id, t.threads}};
  };
  if (cases_only) {
    stamp();
    return t;
  }
  FL_TRY(db.for_each("SELECT peak, dtype, value_per_s, math_mode FROM system_peaks WHERE system_id = ?1", id,
                     [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                       if (text(v[3]) == "memory") {  // the streaming bandwidth: not a roofline peak
                         t.memory_bandwidth[text(v[1])] = real(v[2]);
                         return Status{};
                       }
                       t.calibrated_peaks[{text(v[0]), text(v[1])}] = real(v[2]);
                       t.peaks[{text(v[0]), text(v[1])}] = real(v[2]);
                       return Status{};
                     }));
  if (db.schema_version() >= 10) FL_TRY(load_cache_times(db, system_id, t));
  FL_TRY(benchdb::for_each_row<benchdb::ReplayRow>(
      db, benchdb::replays_table(), "system_id = ?1", id, [&](benchdb::ReplayRow& r) -> Status {
        t.replays[{r.model_name, r.batch, r.dtype}] = std::move(r);
        return Status{};
      }));
  FL_TRY(benchdb::for_each_row<benchdb::FrameworkLatencyRow>(
      db, benchdb::framework_latencies_table(), "", {}, [&](benchdb::FrameworkLatencyRow& r) -> Status {
        if (framework_device_matches(r.device, t.device_kind, t.device_name, isa))
          t.framework.push_back(std::move(r));
        return Status{};
      }));
  prefer_own_host(t.framework);
  if (db.schema_version() >= 5)
    FL_TRY(benchdb::for_each_row<benchdb::FrameworkLayerTimeRow>(
        db, benchdb::framework_layer_times_table(), "", {}, [&](benchdb::FrameworkLayerTimeRow& r) -> Status {
          if (framework_device_matches(r.device, t.device_kind, t.device_name, isa))
            t.layer_times.push_back(std::move(r));
          return Status{};
        }));
  prefer_own_host(t.layer_times);  // one per-node profile per identity
  stamp();
  return t;
}

}  // namespace

Result<CostTable> load_costs(benchdb::Database& db, int64_t system_id, bool thread_budget) {
  FL_ASSIGN_OR_RETURN(CostTable t, load_system_costs(db, system_id));
  if (!thread_budget || t.device_kind != "cpu") return t;
  FL_ASSIGN_OR_RETURN(const auto budget, db.thread_budget(system_id));
  for (const auto& other : budget) {
    if (other.system_id == system_id) continue;
    FL_ASSIGN_OR_RETURN(const CostTable o, load_system_costs(db, other.system_id, /*cases_only=*/true));
    t.budget.push_back(other);
    // A configuration's best case and the conversions it needs come from one system: the
    // conversion cases of the other thread count feed other kernels.
    for (const auto& [k, c] : o.best) {
      auto [it, fresh] = t.best.try_emplace(k, c);
      if (!fresh && c.us < it->second.us) it->second = c;
      if (fresh || it->second.system_id == other.system_id) t.modes.emplace(std::get<1>(k), std::get<2>(k));
    }
    for (const auto& [k, c] : o.best_vendor) {  // S_vendor within the same budget
      auto [it, fresh] = t.best_vendor.try_emplace(k, c);
      if (!fresh && c.us < it->second.us) it->second = c;
    }
    for (const auto& [k, list] : o.conversions) {
      auto& mine = t.conversions[k];
      mine.insert(mine.end(), list.begin(), list.end());
    }
    for (const auto& [k, list] : o.passed) {
      auto& mine = t.passed[k];
      mine.insert(mine.end(), list.begin(), list.end());
    }
    t.races.insert(o.races.begin(), o.races.end());
    if (db.schema_version() >= 10) FL_TRY(load_cache_times(db, other.system_id, t));
  }
  std::sort(
      t.budget.begin(), t.budget.end(),
      [](const benchdb::BudgetSystem& a, const benchdb::BudgetSystem& b) { return a.threads < b.threads; });
  if (t.budget.size() > 1) {
    std::vector<int64_t> counts;
    for (const auto& b : t.budget) counts.push_back(b.threads);
    t.system += fmt::format("; thread budget {}: each layer's fastest case at {} thread(s)", t.threads,
                            fmt::join(counts, ", "));
  }
  return t;
}

Result<CostTable> load_model_costs(benchdb::Database& db, int64_t system_id,
                                   const std::vector<mp::ModelIR>& models, const std::string& dtype,
                                   bool thread_budget) {
  FL_ASSIGN_OR_RETURN(CostTable costs, load_costs(db, system_id, thread_budget));
  raise_peaks(costs, models, dtype);
  if (dtype != "int8") raise_peaks(costs, models, "int8");
  return costs;
}

void raise_peaks(CostTable& costs, const std::vector<mp::ModelIR>& models, const std::string& dtype) {
  const std::string mode = math_mode_of(dtype);
  const std::optional<double> scale = byte_scale_of(dtype);
  if (!scale) return;  // an unknown dtype: no case of it, no peak of it
  struct Top {
    double rate = 0;
    std::string by;
  };
  Top flops, bytes;
  for (const auto& m : models)
    for (const auto& l : m.layers) {
      if (!l.cost_bearing() || !l.shapes_known) continue;
      auto it = costs.best.find({l.key, dtype, mode, ""});
      if (it == costs.best.end() || it->second.us <= 0) continue;
      // A quantized layer's bytes are its own (int8) already; a float layer's are counted in f32.
      const double byte_scale = mp::quantized_config(l.config) ? 1.0 : *scale;
      const double f = static_cast<double>(roofline_flops(l)) / it->second.us * 1e6;
      const double b = static_cast<double>(l.bytes) * byte_scale / it->second.us * 1e6;
      if (!fewer_multiplies(it->second.id.algorithm) && f > flops.rate) flops = {f, it->second.name};
      if (b > bytes.rate) bytes = {b, it->second.name};
    }
  for (const auto& [peak, top] :
       {std::pair{std::string("flops"), flops}, std::pair{std::string("bytes"), bytes}}) {
    auto it = costs.peaks.find({peak, dtype});
    if (it == costs.peaks.end() || top.rate <= it->second) continue;
    costs.peak_notes.push_back(
        fmt::format("{} peak raised from the calibrated {:.1f} G/s to {:.1f} G/s, reached by {}", peak,
                    it->second / 1e9, top.rate / 1e9, top.by));
    it->second = top.rate;
  }
}

}  // namespace floorline::analyzer
