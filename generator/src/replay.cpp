// Replay: the chosen cases of a model wired into its graph and timed as one pass.
#include "floorline/generator/replay.hpp"

#include "floorline/generator/cache_state.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "floorline/common/statistics.hpp"
#include "floorline/generator/measurement.hpp"
#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/reference.hpp"
#include "floorline/model_processor/layer.hpp"
#include "floorline/model_processor/patterns.hpp"

namespace floorline::gen {

namespace {

// Visits the best passed cases of `dtype` on the systems of `system_id`'s thread budget (or on
// `system_id` alone), unfused or fused: visit(key, fusion, planned case, µs, threads), systems by
// thread count ascending.
template <class Visit>
Status for_each_best(benchdb::Database& db, int64_t system_id, const Plan& plan, DType dtype,
                     bool thread_budget, bool fused, Visit visit, bool every_case = false) {
  std::vector<benchdb::BudgetSystem> systems;
  if (thread_budget) {
    FL_ASSIGN_OR_RETURN(systems, db.thread_budget(system_id));
  } else {
    FL_ASSIGN_OR_RETURN(const auto r, db.query("SELECT threads FROM systems WHERE id = ?1", {system_id}));
    if (r.rows.empty()) return make_error("{}: no system {}", db.path(), system_id);
    const auto* t = std::get_if<int64_t>(&r.rows[0][0]);
    systems.push_back({system_id, t ? *t : 1});
  }
  std::unordered_map<std::string, const PlannedCase*> by_name;
  for (const auto& c : plan.cases) by_name.emplace(c.spec.name, &c);
  // A quantized config (QDQ) runs its int8 case whatever `dtype` is (as the analyzer costs it).
  std::set<std::string> quantized;
  for (const auto& u : plan.configs)
    if (mp::quantized_config(u.config)) quantized.insert(u.key);
  // Every passed case (as best_measurements is rebuilt: benchdb schema.cpp), or the best per config.
  const std::string sql =
      every_case
          ? fmt::format(
                "SELECT lc.key, c.name, coalesce(m.min_us, m.median_us), c.fusion FROM measurements m "
                "JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
                "WHERE m.system_id = ?1 AND c.dtype = ?2 AND c.math_mode = ?3 AND c.fusion {} '' "
                "AND m.status = 'passed' AND m.superseded = 0 AND m.median_us IS NOT NULL "
                "AND c.conversion_tensor = ''",
                fused ? "!=" : "=")
          : fmt::format(
                "SELECT lc.key, c.name, coalesce(b.min_us, b.median_us), b.fusion FROM best_measurements b "
                "JOIN layer_configs lc ON lc.id = b.config_id JOIN cases c ON c.id = b.case_id "
                "WHERE b.system_id = ?1 AND b.dtype = ?2 AND b.math_mode = ?3 AND b.fusion {} ''",
                fused ? "!=" : "=");
  for (const auto& system : systems)
    for (const DType d : {dtype, DType::kInt8}) {
      if (d == DType::kInt8 && (dtype == DType::kInt8 || quantized.empty())) break;
      const std::string type(dtype_name(d)), math(math_mode_name(own_math_mode(d)));
      FL_TRY(db.for_each(sql, {system.system_id, type, math},
                         [&](const std::vector<std::string>&, const std::vector<benchdb::SqlValue>& v) {
                           const std::string key = std::get<std::string>(v[0]);
                           if ((quantized.count(key) > 0) != (d == DType::kInt8) && dtype != DType::kInt8)
                             return Status{};
                           auto it = by_name.find(std::get<std::string>(v[1]));
                           if (it == by_name.end()) return Status{};
                           visit(key, std::get<std::string>(v[3]), *it->second, std::get<double>(v[2]),
                                 static_cast<int>(system.threads));
                           return Status{};
                         }));
    }
  return {};
}

}  // namespace

Result<std::map<std::string, ChosenCase>> best_cases(benchdb::Database& db, int64_t system_id,
                                                     const Plan& plan, DType dtype, bool thread_budget) {
  std::map<std::string, ChosenCase> out;
  FL_TRY(for_each_best(
      db, system_id, plan, dtype, thread_budget, false,
      [&](const std::string& key, const std::string&, const PlannedCase& c, double us, int threads) {
        // Ties go to the fewer threads (systems come by thread count ascending).
        if (auto have = out.find(key); have == out.end() || us < have->second.us)
          out[key] = {c.spec, us, threads};
      }));
  return out;
}

Result<CaseAlternatives> passed_cases(benchdb::Database& db, int64_t system_id, const Plan& plan, DType dtype,
                                      bool thread_budget) {
  CaseAlternatives out;
  for (const bool fused : {false, true})
    FL_TRY(for_each_best(
        db, system_id, plan, dtype, thread_budget, fused,
        [&](const std::string& key, const std::string& fusion, const PlannedCase& c, double us, int threads) {
          out[{key, fusion}].push_back({c.spec, us, threads});
        },
        true));
  for (auto& [key, cases] : out)  // fastest first; a tie to the fewer threads (systems come so)
    std::stable_sort(cases.begin(), cases.end(),
                     [](const ChosenCase& a, const ChosenCase& b) { return a.us < b.us; });
  return out;
}

Result<FusedChoices> best_fused_cases(benchdb::Database& db, int64_t system_id, const Plan& plan, DType dtype,
                                      bool thread_budget) {
  FusedChoices out;
  FL_TRY(for_each_best(
      db, system_id, plan, dtype, thread_budget, true,
      [&](const std::string& key, const std::string& fusion, const PlannedCase& c, double us, int threads) {
        const auto k = std::make_pair(key, fusion);
        if (auto have = out.find(k); have == out.end() || us < have->second.us)
          out[k] = {c.spec, us, threads};
      }));
  return out;
}

namespace {

// Where a value of the graph lives during replay: its buffer and layout, and the output (`out` of
// step `step`) whose port describes that layout: the producer's own, or, for an element-wise layer
// that kept its input's blocked layout, that input's.
struct Source {
  size_t step = 0;
  size_t out = 0;
  void* data = nullptr;
  std::string layout;
  int64_t bytes = 0;
};

// The input whose layout an element-wise layer keeps, as replay_model wires it and layout_choice's
// estimate of it assumes: where every input has a source (`source_of(k)`: its buffer's layout and
// bytes, or null) and a plain port (`port_of(k)`), the first input in a layout other than plain, of
// its port's size, where the output port (`out_bytes`) is of that size too; nullopt where the layer
// reads its inputs as any other layer does.
template <class SourceOf, class PortOf>
std::optional<size_t> kept_layout_input(const mp::Layer& layer, SourceOf source_of, PortOf port_of,
                                        std::optional<int64_t> out_bytes) {
  if (!mp::layout_agnostic(layer) || layer.input_names.size() != layer.config.inputs.size())
    return std::nullopt;
  std::optional<size_t> kept;
  for (size_t k = 0; k < layer.input_names.size(); ++k) {
    const auto* src = source_of(k);
    const auto to = port_of(k);
    if (!src || !to || to->layout != "plain") return std::nullopt;
    if (!kept && src->layout != "plain" && src->bytes == to->bytes) kept = k;
  }
  if (!kept || !out_bytes || *out_bytes != source_of(*kept)->bytes) return std::nullopt;
  return kept;
}

struct Step {
  std::unique_ptr<kernels::Kernel> kernel;
  std::string label;  // the layer, for error messages
  bool conversion = false;
  double alone_us = 0;
  const Backend* backend = nullptr;               // whose factory (or conversion) built the kernel
  std::string layer, op;                          // the layer's ONNX node name and op ("" for a conversion)
  std::string key;                                // the layer's config key ("" for a conversion)
  int threads = 1;                                // the backend's thread count while it runs (its case's)
  std::string fusion;                             // the activation its fused case applies ("" unfused)
  std::string case_name;                          // the case it runs ("" for a conversion)
  bool alternative = false;                       // the layout-aware choice's case, not the layer's best
  double best_us = 0;                             // the time S takes for the layer (its best case's)
  std::vector<std::pair<size_t, int64_t>> reads;  // (step that wrote it, bytes) per value read
  int64_t own_bytes = 0, written_bytes = 0;       // its own operands' bytes, and what it writes
  std::vector<std::pair<uint64_t, int64_t>> writes;  // (buffer, bytes) per output it writes
  std::vector<size_t> f32_outputs;  // its output ports that hold f32 values (the data check scans them)
};

// A conversion between the ports of two cases: built by the consumer's backend, by the producer's
// and by every backend of `others` (the run's: XNNPACK converts between its NHWC ports and any plain
// port, oneDNN between its ports and plain, blocked or NHWC ones, Floorline between plain and
// oneDNN's aBcd8b/aBcd16b by 8 × 8 transposes, whoever's ports they are), where each can, at each thread
// count of `counts` (the backend set to it while it builds; empty: the count it has), each timed
// alone (one call to warm it, then the lowest of kConversionCalls calls), and the fastest kept, with
// the backend that built it (whose threads run it), its count and its time. A conversion so runs on the
// fastest library and count within the thread budget, as a layer's case does: oneDNN's reorder of a
// 1x58x28x28 plain tensor into 8-channel blocks took 31 µs on 2 threads and 10 µs on one, on a
// 2-core AVX2 EPYC (docs/MEASUREMENT.md, "Conversions in the replay"). The first error (the
// consumer's backend's) where none builds. The backends are left at `threads_now`, their workers
// parked.
struct TimedConversion {
  std::unique_ptr<kernels::Kernel> kernel;
  const Backend* by = nullptr;
  int threads = 1;
  double alone_us = 0;
};
constexpr int kConversionCalls = 5;

Result<TimedConversion> convert(const Backend* producer, const Backend* consumer,
                                const kernels::PortRef& from, const kernels::PortRef& to,
                                const std::vector<int>& counts, int threads_now,
                                const std::vector<const Backend*>& others) {
  std::optional<TimedConversion> best;
  std::optional<Error> failed;
  const std::vector<int> tried = counts.empty() ? std::vector<int>{threads_now} : counts;
  std::vector<const Backend*> by = {consumer};
  for (const Backend* b : others)
    if (std::find(by.begin(), by.end(), b) == by.end()) by.push_back(b);
  if (std::find(by.begin(), by.end(), producer) == by.end()) by.push_back(producer);
  for (const Backend* b : by)
    for (const int t : tried) {
      if (!counts.empty()) b->set_threads(t);
      auto conv = b->conversion(from, to);
      if (!conv) {
        if (!failed) failed = conv.error();
        break;  // (what a backend converts does not depend on its thread count)
      }
      (*conv)->run();
      double us = std::numeric_limits<double>::infinity();
      for (int k = 0; k < kConversionCalls; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        (*conv)->run();
        us = std::min(us, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
      }
      if (!best || us < best->alone_us) best = TimedConversion{std::move(conv).value(), b, t, us};
    }
  if (!counts.empty())
    for (const Backend* b : by) {
      b->set_threads(threads_now);
      b->park_threads();
    }
  if (!best) return *failed;
  return std::move(*best);
}

// The step of a conversion that reads `from` and writes `bytes` into its own destination buffer.
Step conversion_step(TimedConversion conv, std::string label, const Source& from, int64_t bytes) {
  Step s;
  const auto dest = conv.kernel->port(true, 0);
  s.kernel = std::move(conv.kernel);
  s.label = std::move(label);
  s.conversion = true;
  s.alone_us = conv.alone_us;
  s.backend = conv.by;
  s.threads = conv.threads;
  s.reads = {{from.step, from.bytes}};
  s.written_bytes = bytes;
  if (dest) s.writes = {{reinterpret_cast<uintptr_t>(dest->data), bytes}};
  return s;
}

// Replay's memory planner, as a framework's memory pool: a layer's outputs take buffers of their
// exact size that earlier layers' outputs held until their last reader ran; new buffers otherwise.
// New buffers are the kernel API's (zeroed, outside timing), placed as a case's buffers are in a
// build (placement 0, huge pages as the run asks): a large buffer on its own mapping at its own
// offset within the page, so that no two of them alias at 4 KiB (loads stall behind stores to the
// same offset), as the cases alone were timed.
class BufferPool {
 public:
  explicit BufferPool(bool huge_pages) : scope_(kernels::BufferPlacement{0, huge_pages}) {}
  void* take(int64_t bytes) {
    auto& list = free_[bytes];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      ++reused_;
      return p;
    }
    return fresh(bytes);
  }
  // A new buffer, never one another step held (the shared scratchpad).
  void* fresh(int64_t bytes) {
    owned_.emplace_back(static_cast<size_t>(std::max<int64_t>(bytes, 64)));
    return owned_.back().data();
  }
  void give(void* data, int64_t bytes) { free_[bytes].push_back(data); }
  int64_t reused() const { return reused_; }
  size_t buffers() const { return owned_.size(); }

 private:
  kernels::PlacementScope scope_;  // while the pool allocates (the replay's build, on this thread)
  std::unordered_map<int64_t, std::vector<void*>> free_;
  std::deque<kernels::HostBuffer> owned_;
  int64_t reused_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace layout_choice {

double estimate_pass(const std::vector<WalkItem>& walk, const std::vector<LayerChoice>& choices,
                     int& conversions) {
  std::unordered_map<std::string, PortSig> value;  // value name → its buffer's layout
  std::set<std::pair<std::string, std::string>> converted;
  double us = 0;
  conversions = 0;
  auto convert = [&](const std::string& name, const PortSig& to, bool once) {
    if (once && !converted.insert({name, fmt::format("{} {}", to.layout, to.bytes)}).second) return;
    us += static_cast<double>(to.bytes) / kConversionBytesPerUs;
    ++conversions;
  };
  for (const auto& w : walk) {
    const mp::Layer& layer = *w.layer;
    if (w.choice < 0) {
      if (!layer.input_names.empty() && !layer.output_names.empty())
        if (auto it = value.find(layer.input_names[0]); it != value.end())
          value[layer.output_names[0]] = it->second;
      continue;
    }
    const LayerChoice& c = choices[static_cast<size_t>(w.choice)];
    const CaseSig& sig = *c.sigs[c.taken];
    us += c.cases[c.taken]->us;
    auto in_port = [&](size_t k) { return k < sig.in.size() ? sig.in[k] : std::nullopt; };
    // An element-wise layer keeps its first blocked input's layout (replay_model below).
    auto value_of = [&](size_t k) -> const PortSig* {
      auto it = value.find(layer.input_names[k]);
      return it == value.end() ? nullptr : &it->second;
    };
    const auto out = sig.out.empty() ? std::nullopt : sig.out[0];
    if (const auto kept = kept_layout_input(layer, value_of, in_port,
                                            out ? std::optional<int64_t>(out->bytes) : std::nullopt)) {
      const PortSig t = *value_of(*kept);
      for (const auto& name : layer.input_names)
        if (value.at(name).layout != t.layout) convert(name, t, false);
      value[layer.output_names[0]] = t;
      continue;
    }
    for (size_t k = 0; k < layer.input_names.size(); ++k) {
      auto src = value.find(layer.input_names[k]);
      const auto to = in_port(k);
      if (src == value.end() || !to) continue;
      if (src->second.layout != to->layout || src->second.bytes != to->bytes)
        convert(layer.input_names[k], *to, true);
    }
    size_t o = 0;
    for (const auto& name : layer.output_names) {
      if (name.empty()) continue;
      if (o < sig.out.size() && sig.out[o])
        value[name] = *sig.out[o];
      else
        value.erase(name);
      ++o;
    }
  }
  return us;
}

namespace {

// Coordinate descent from the choices' current state; returns the estimate it ends at.
double descend(const std::vector<WalkItem>& walk, std::vector<LayerChoice>& choices) {
  int n = 0;
  double best = estimate_pass(walk, choices, n);
  for (int sweep = 0; sweep < 4; ++sweep) {
    bool changed = false;
    for (auto& c : choices) {
      if (c.cases.size() < 2) continue;
      const size_t was = c.taken;
      size_t pick = was;
      for (size_t j = 0; j < c.cases.size(); ++j) {
        if (j == was) continue;
        c.taken = j;
        const double t = estimate_pass(walk, choices, n);
        if (t < best - 1e-6) {
          best = t;
          pick = j;
        }
      }
      c.taken = pick;
      changed = changed || pick != was;
    }
    if (!changed) break;
  }
  return best;
}

// Whether a case reads or writes any port in the layout `tag` (" aBcd8b ": oneDNN's spelling
// within a tagged_layout string).
bool has_layout(const CaseSig& sig, const std::string& tag) {
  for (const auto* ports : {&sig.in, &sig.out})
    for (const auto& p : *ports)
      if (p && p->layout.find(tag) != std::string::npos) return true;
  return false;
}

}  // namespace

std::pair<int, int> choose_for_layouts(const std::vector<WalkItem>& walk, std::vector<LayerChoice>& choices) {
  int before = 0;
  (void)estimate_pass(walk, choices, before);
  // From every layer's best case; then from every layer in one layout family where it has a case
  // in it (a chain of layers that only move data, ShuffleNet's Concat, channel shuffle and Slice,
  // is cheaper all blocked or all plain, and no single layer's change is: a descent from the best
  // cases alone stops there). The lowest estimate wins; the best cases' start on a tie.
  const std::vector<LayerChoice> start = choices;
  double best = descend(walk, choices);
  for (const std::string tag : {" aBcd8b ", " aBcd16b ", " acdb "}) {
    std::vector<LayerChoice> trial = start;
    bool any = false;
    for (auto& c : trial)
      for (size_t j = 0; j < c.cases.size(); ++j)
        if (has_layout(*c.sigs[j], tag)) {
          any = any || j != c.taken;
          c.taken = j;
          break;
        }
    if (!any) continue;
    const double t = descend(walk, trial);
    if (t < best - 1e-6) {
      best = t;
      choices = std::move(trial);
    }
  }
  int after = 0;
  (void)estimate_pass(walk, choices, after);
  return {before, after};
}

}  // namespace layout_choice

namespace {
Result<ReplayResult> replay_model_throwing(const mp::ModelIR& model,
                                           const std::map<std::string, ChosenCase>& chosen,
                                           const Backend& backend, const ReplayOptions& options,
                                           const FusedChoices& epilogues,
                                           const CaseAlternatives& alternatives);
}  // namespace

// A buffer that cannot be had (kernels::HostBuffer's memory guard, a failed mapping) ends this
// model's replay with an error, not the run.
Result<ReplayResult> replay_model(const mp::ModelIR& model, const std::map<std::string, ChosenCase>& chosen,
                                  const Backend& backend, const ReplayOptions& options,
                                  const FusedChoices& epilogues, const CaseAlternatives& alternatives) {
  try {
    return replay_model_throwing(model, chosen, backend, options, epilogues, alternatives);
  } catch (const std::exception& e) {
    return make_error("{} (batch {}): replay stopped: {}", model.name, model.batch, e.what());
  }
}

namespace {
Result<ReplayResult> replay_model_throwing(const mp::ModelIR& model,
                                           const std::map<std::string, ChosenCase>& chosen,
                                           const Backend& backend, const ReplayOptions& options,
                                           const FusedChoices& epilogues,
                                           const CaseAlternatives& alternatives) {
  ReplayResult r;
  r.model = model.name;
  r.batch = model.batch;
  // Each case is built by its own backend (the best case of a layer may be any library's).
  std::map<std::string, std::pair<const Backend*, kernels::KernelFactory>> factories;
  auto backend_of = [&](const std::string& name) -> const std::pair<const Backend*, kernels::KernelFactory>* {
    auto it = factories.find(name);
    if (it == factories.end()) {
      const Backend* b = name == backend.name() ? &backend : find_backend(name);
      if (!b || !b->available().ok()) return nullptr;
      b->set_threads(options.threads);
      it = factories.emplace(name, std::make_pair(b, b->factory())).first;
    }
    return &it->second;
  };
  (void)backend_of(backend.name());
  // Every backend of a chosen case converts too, where it can (convert, above).
  std::vector<const Backend*> converters;
  for (const auto& [key, c] : chosen)
    if (const auto* b = backend_of(c.spec.variant.backend))
      if (std::find(converters.begin(), converters.end(), b->first) == converters.end())
        converters.push_back(b->first);
  std::vector<Step> steps;
  std::vector<std::pair<uintptr_t, int64_t>> own_large;  // the steps' own large operands (ReplayResult)
  std::unordered_map<std::string, Source> sources;
  std::unordered_map<std::string, int> produced;     // every value some layer of the main graph writes
  std::unordered_map<std::string, int> last_reader;  // value → index of the last layer that reads it
  std::unordered_map<std::string, std::vector<int>> readers;  // value → every layer that reads it
  for (const auto& layer : model.layers) {
    if (!layer.subgraph.empty()) continue;
    if (layer.cost != mp::CostClass::kHost)
      for (const auto& n : layer.output_names) produced[n] = layer.index;
    for (const auto& n : layer.input_names) {
      last_reader[n] = layer.index;
      readers[n].push_back(layer.index);
    }
  }
  auto last_use = [&](const std::string& name) {
    auto it = last_reader.find(name);
    return it == last_reader.end() ? -1 : it->second;
  };
  // The epilogues, as the analyzer's S counts them: a head layer → its fused case (and the
  // fusion's name), and the layers those cases apply (no step of their own), each with the input
  // that carries the chain's value (`chain_input`). A residual Add's other operand (`residual`) is
  // the fused case's destination, summed into in place as a runtime does, so a chain is fused only
  // where that value is written before the head and read by no layer after it but the Add (else a
  // runtime would copy it first).
  std::unordered_map<int, std::pair<const ChosenCase*, std::string>> fused_head;
  std::set<int> in_epilogue;
  std::unordered_map<int, std::string> chain_input;  // absorbed layer → the input from the chain
  std::unordered_map<int, std::string> residual;     // head layer → the residual value it sums into
  // head layer → the values its fused case reads beyond the head's inputs (attention: the biases
  // and V, mp::FusionMatch::operands), each written before the head's step.
  std::unordered_map<int, std::vector<std::string>> extra_inputs;
  if (!epilogues.empty()) {
    std::unordered_map<int, const mp::Layer*> layer_at;
    for (const auto& l : model.layers) layer_at[l.index] = &l;
    std::set<int> claimed;  // a layer is in one chain at most (two convolutions may share an Add)
    // A value → the value it is a view of (Reshape, Dropout...: no data moves), to the first that is not.
    std::unordered_map<std::string, std::string> view_of;
    for (const auto& l : model.layers)
      if (l.cost == mp::CostClass::kView && l.subgraph.empty() && !l.input_names.empty() &&
          !l.output_names.empty())
        view_of[l.output_names[0]] = l.input_names[0];
    auto viewed = [&](std::string name) {
      for (int hops = 0; hops < 64; ++hops) {
        const auto it = view_of.find(name);
        if (it == view_of.end()) break;
        name = it->second;
      }
      return name;
    };
    // The chains by what their fused case saves over their layers' cases, most first, as the
    // analyzer's S takes them where two share a layer (a Conv's Swish and its Sigmoid's own SiLU).
    const std::vector<mp::FusionMatch> matches = mp::fusion_matches(model);
    auto saving = [&](const mp::FusionMatch& m) {
      const auto head = layer_at.find(m.head);
      if (head == layer_at.end()) return -1.0;
      const auto h = chosen.find(head->second->key);
      const auto f = epilogues.find({head->second->key, m.name});
      if (h == chosen.end() || f == epilogues.end()) return -1.0;
      double unfused = h->second.us;
      for (int index : m.absorbed) {
        const auto a = layer_at.find(index);
        const auto c = a == layer_at.end() ? chosen.end() : chosen.find(a->second->key);
        if (c == chosen.end()) return -1.0;
        unfused += c->second.us;
      }
      return unfused - f->second.us;
    };
    std::vector<std::pair<double, const mp::FusionMatch*>> by_saving;
    for (const auto& m : matches) by_saving.emplace_back(saving(m), &m);
    std::stable_sort(by_saving.begin(), by_saving.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [saved, match] : by_saving) {
      const mp::FusionMatch& m = *match;
      if (!mp::is_epilogue_fusion(m)) continue;
      const auto head = layer_at.find(m.head);
      if (head == layer_at.end() || !head->second->subgraph.empty() || head->second->output_names.empty())
        continue;
      if (claimed.count(m.head) ||
          std::any_of(m.absorbed.begin(), m.absorbed.end(), [&](int a) { return claimed.count(a) > 0; }))
        continue;
      // Each absorbed layer reads the chain's value so far: the head's output, then the layer before
      // (or a view of it: attention's Dropout between its Softmax and the product by V).
      std::unordered_map<int, std::string> carries;
      std::string value = head->second->output_names[0];
      bool linked = true;
      for (int index : m.absorbed) {
        const auto a = layer_at.find(index);
        if (a == layer_at.end() || a->second->output_names.empty() ||
            std::none_of(a->second->input_names.begin(), a->second->input_names.end(),
                         [&](const std::string& in) { return viewed(in) == value; })) {
          linked = false;
          break;
        }
        carries[index] = value;
        // A Swish's Mul reads the head's output and the Sigmoid's: both are the case's output.
        value = a->second->output_names[0];
      }
      if (!linked) continue;
      std::string summand;
      if (mp::has_residual(m)) {
        const mp::Layer& add = *layer_at.at(m.absorbed.front());
        for (const auto& name : add.input_names)
          if (name != carries.at(add.index)) summand = name;
        // In place at the head's step: the summand must exist by then, and no layer but the Add may
        // read it after (the convolution that writes it last claims a shared Add).
        const auto p = produced.find(summand);
        if (summand.empty() || p == produced.end() || p->second > m.head) continue;
        const auto& read_by = readers[summand];
        if (std::any_of(read_by.begin(), read_by.end(), [&](int r) { return r != add.index && r > m.head; }))
          continue;
      }
      std::vector<std::string> extras;
      for (const auto& [index, position] : m.operands) {
        const mp::Layer& reader = *layer_at.at(index);
        if (position >= reader.input_names.size()) break;
        const std::string& name = reader.input_names[position];
        if (const auto p = produced.find(name); p != produced.end() && p->second > m.head) break;
        extras.push_back(name);
      }
      if (extras.size() != m.operands.size()) continue;  // an operand written after the head
      const auto h = chosen.find(head->second->key);
      const auto f = epilogues.find({head->second->key, m.name});
      if (h == chosen.end() || f == epilogues.end()) continue;
      // The activation's layers (a Swish's two) with their chosen cases' time.
      double acts_us = 0;
      bool all = true;
      for (int index : m.absorbed) {
        const auto act = layer_at.find(index);
        const auto a = act == layer_at.end() ? chosen.end() : chosen.find(act->second->key);
        if (a == chosen.end())
          all = false;
        else
          acts_us += a->second.us;
      }
      if (!all || f->second.us >= h->second.us + acts_us) continue;
      fused_head[m.head] = {&f->second, m.name};
      in_epilogue.insert(m.absorbed.begin(), m.absorbed.end());
      claimed.insert(m.head);
      claimed.insert(m.absorbed.begin(), m.absorbed.end());
      for (const auto& [index, name] : carries) chain_input[index] = name;
      if (!summand.empty()) residual[m.head] = summand;
      if (!extras.empty()) extra_inputs[m.head] = std::move(extras);
    }
  }
  // The layout-aware choice: layer index → the case it runs where that is not its best.
  std::unordered_map<int, const ChosenCase*> taken_case;
  if (!alternatives.empty() && options.layout_slack > 1.0) {
    using namespace layout_choice;
    // A case's ports, from a build of it (cached by case and thread count; nullptr where it does
    // not build: the pass below counts the layer missing).
    std::map<std::pair<std::string, int>, std::optional<CaseSig>> sigs;
    auto sig_of = [&](const ChosenCase& c, const mp::Layer& layer) -> const CaseSig* {
      const int threads = c.threads > 0 ? c.threads : options.threads;
      auto it = sigs.find({c.spec.name, threads});
      if (it == sigs.end()) {
        std::optional<CaseSig> sig;
        if (const auto* own = backend_of(c.spec.variant.backend)) {
          own->first->set_threads(threads);
          if (auto built = own->second(placed_as_benched(c.spec, options.huge_pages))) {
            CaseSig cs;
            auto as_sig = [](const std::optional<kernels::Port>& p) {
              return p ? std::optional<PortSig>(PortSig{p->layout, p->bytes}) : std::nullopt;
            };
            for (size_t k = 0; k < layer.input_names.size(); ++k)
              cs.in.push_back(as_sig((*built)->port(false, k)));
            size_t o = 0;
            for (const auto& name : layer.output_names)
              if (!name.empty()) cs.out.push_back(as_sig((*built)->port(true, o++)));
            sig = std::move(cs);
          }
        }
        it = sigs.emplace(std::make_pair(c.spec.name, threads), std::move(sig)).first;
      }
      return it->second ? &*it->second : nullptr;
    };
    auto same_ports = [](const CaseSig& a, const CaseSig& b) {
      auto eq = [](const std::vector<std::optional<PortSig>>& x,
                   const std::vector<std::optional<PortSig>>& y) {
        return std::equal(x.begin(), x.end(), y.begin(), y.end(), [](const auto& p, const auto& q) {
          return p.has_value() == q.has_value() && (!p || (p->layout == q->layout && p->bytes == q->bytes));
        });
      };
      return eq(a.in, b.in) && eq(a.out, b.out);
    };
    std::vector<WalkItem> walk;
    std::vector<LayerChoice> choices;
    std::vector<int> choice_layer;
    for (const auto& layer : model.layers) {
      if (!layer.subgraph.empty()) continue;
      if (layer.cost == mp::CostClass::kView || in_epilogue.count(layer.index)) {
        walk.push_back({&layer, -1});
        continue;
      }
      if (!layer.cost_bearing()) continue;
      const auto fused = fused_head.find(layer.index);
      const ChosenCase* best = nullptr;
      if (fused != fused_head.end())
        best = fused->second.first;
      else if (auto c = chosen.find(layer.key); c != chosen.end())
        best = &c->second;
      const CaseSig* best_sig = best ? sig_of(*best, layer) : nullptr;
      if (!best_sig) continue;
      LayerChoice lc;
      lc.cases.push_back(best);
      lc.sigs.push_back(best_sig);
      // The next fastest within the slack whose ports differ from every candidate's before it (one
      // with the same ports as a faster one can only cost more).
      const std::string fusion = fused == fused_head.end() ? std::string() : fused->second.second;
      if (auto a = alternatives.find({layer.key, fusion}); a != alternatives.end())
        for (const auto& alt : a->second) {
          if (static_cast<int>(lc.cases.size()) >= options.layout_candidates) break;
          if (alt.us > options.layout_slack * best->us) break;
          const CaseSig* sig = sig_of(alt, layer);
          if (!sig || std::any_of(lc.sigs.begin(), lc.sigs.end(),
                                  [&](const CaseSig* have) { return same_ports(*have, *sig); }))
            continue;
          lc.cases.push_back(&alt);
          lc.sigs.push_back(sig);
        }
      walk.push_back({&layer, static_cast<int>(choices.size())});
      choices.push_back(std::move(lc));
      choice_layer.push_back(layer.index);
    }
    std::tie(r.conversions_expected_before, r.conversions_expected_after) =
        layout_choice::choose_for_layouts(walk, choices);
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i].taken != 0) taken_case[choice_layer[i]] = choices[i].cases[choices[i].taken];
  }

  BufferPool pool(options.huge_pages);
  // (value, layout and size) → the buffer a conversion wrote it into, owned by that conversion, and
  // that conversion's step.
  std::map<std::pair<std::string, std::string>, std::pair<void*, size_t>> converted;
  struct Live {
    int64_t bytes = 0;
    int last = -1;  // index of the last layer reading the buffer under any name (views alias it)
  };
  std::unordered_map<void*, Live> live;
  // After a layer: the buffers it read or wrote that no later layer reads go back to the pool
  // (an output nobody reads included).
  auto release = [&](const mp::Layer& layer) {
    for (const auto* names : {&layer.input_names, &layer.output_names})
      for (const auto& n : *names) {
        auto src = sources.find(n);
        if (src == sources.end()) continue;
        auto it = live.find(src->second.data);
        if (it != live.end() && it->second.last <= layer.index) {
          pool.give(it->first, it->second.bytes);
          live.erase(it);
        }
      }
  };

  for (const auto& layer : model.layers) {
    if (!layer.subgraph.empty()) continue;  // If/Loop bodies: not replayed
    const bool applied_by_producer = in_epilogue.count(layer.index) > 0;
    if (layer.cost == mp::CostClass::kView || applied_by_producer) {
      // A view passes its input's buffer on unchanged; an activation its producer's fused case
      // applied is that case's output.
      if (applied_by_producer) ++r.layers_replayed;
      const auto carried = chain_input.find(layer.index);
      if (!layer.input_names.empty() && !layer.output_names.empty())
        if (auto it = sources.find(carried != chain_input.end() ? carried->second : layer.input_names[0]);
            it != sources.end()) {
          sources[layer.output_names[0]] = it->second;
          if (auto l = live.find(it->second.data); l != live.end())
            l->second.last = std::max(l->second.last, last_use(layer.output_names[0]));
        }
      release(layer);
      continue;
    }
    if (!layer.cost_bearing()) continue;
    const auto fused = fused_head.find(layer.index);
    const ChosenCase* choice = nullptr;
    const ChosenCase* best = nullptr;  // the layer's best case where the layout-aware choice took another
    if (fused != fused_head.end()) {
      choice = fused->second.first;
    } else if (auto c = chosen.find(layer.key); c != chosen.end()) {
      choice = &c->second;
    } else {
      ++r.layers_missing;
      continue;
    }
    if (auto t = taken_case.find(layer.index); t != taken_case.end()) {
      best = choice;
      choice = t->second;
    }
    const std::string fusion = fused != fused_head.end() ? fused->second.second : std::string();
    // The values the step reads, in its case's operand order: the layer's inputs, then a fused
    // case's extra operands.
    std::vector<std::string> input_names = layer.input_names;
    if (fused != fused_head.end())
      if (const auto e = extra_inputs.find(layer.index); e != extra_inputs.end())
        input_names.insert(input_names.end(), e->second.begin(), e->second.end());
    const auto* own = backend_of(choice->spec.variant.backend);
    if (!own) {
      ++r.layers_missing;
      continue;
    }
    // The case runs at the thread count it was timed at (the thread budget), built so too: a
    // oneDNN primitive fixes its thread partition when it is created.
    const int threads = choice->threads > 0 ? choice->threads : options.threads;
    own->first->set_threads(threads);
    auto built = own->second(placed_as_benched(choice->spec, options.huge_pages));
    if (!built) {
      ++r.layers_missing;
      continue;
    }
    std::unique_ptr<kernels::Kernel> kernel = std::move(built).value();
    // The case's own buffers of its ports, before any is wired: those wired elsewhere are given
    // back once the step is (below).
    std::vector<kernels::Port> own_ports;
    for (const bool output : {false, true})
      for (size_t k = 0, n = output ? layer.output_names.size() : input_names.size(); k < n; ++k)
        if (const auto port = kernel->port(output, k)) own_ports.push_back(*port);
    // Each step's case keeps its weights, its own copies of them and (until the workspace is shared)
    // its scratchpad: a large model at a large batch can need more memory than the machine has.
    // Stop this model's replay while the machine still has min_available_bytes.
    if (const int64_t left = kernels::available_memory_bytes();
        left >= 0 && left < options.min_available_bytes)
      return make_error(
          "{} (batch {}): replay stopped after building {} step(s): {:.1f} GiB of memory left, under the "
          "{:.1f} GiB the replay keeps free (each step's case holds its weights and scratchpad)",
          model.name, model.batch, steps.size(), static_cast<double>(left) / (1 << 30),
          static_cast<double>(options.min_available_bytes) / (1 << 30));
    const std::string label = fusion.empty() ? fmt::format("{} ({})", layer.name, layer.op_type)
                                             : fmt::format("{} ({}+{})", layer.name, layer.op_type, fusion);
    // What the step touches (ReplayStep::reads, own_bytes, written_bytes).
    std::vector<std::pair<size_t, int64_t>> reads;
    std::vector<std::pair<uint64_t, int64_t>> writes;
    int64_t own_bytes = 0, written_bytes = 0;
    auto operand_bytes = [&](size_t k) -> int64_t {
      const auto& ins = choice->spec.problem.inputs;
      if (k >= ins.size())  // a fused case's extra operand (attention's biases and V)
        if (const auto port = kernel->port(false, k)) return port->bytes;
      return k < ins.size() ? kernels::elements(ins[k].shape) * element_size(choice->spec.variant.dtype) : 0;
    };
    // Outputs into pooled buffers (inputs still live are never handed out); a residual epilogue's
    // output is its summand's buffer, where the summand's layout is the output's: the fused case
    // adds into it in place, reading it (its last reader, the chain's condition above). A summand in
    // another layout is converted into the output's first, as a runtime reorders it, and the fused
    // case adds into the conversion's buffer (never the copy an input of the layer reads).
    {
      size_t out = 0;
      const auto summand = fused != fused_head.end() ? residual.find(layer.index) : residual.end();
      for (const auto& name : layer.output_names) {
        if (name.empty()) continue;
        if (const auto port = kernel->port(true, out)) {
          if (out == 0 && summand != residual.end()) {
            const auto from = sources.find(summand->second);
            if (from != sources.end() && from->second.layout == port->layout &&
                from->second.bytes == port->bytes) {
              FL_TRY(kernel->bind(true, out, from->second.data));
              if (auto l = live.find(from->second.data); l != live.end())
                l->second.last = std::max(l->second.last, std::max(last_use(name), layer.index));
              reads.emplace_back(from->second.step, port->bytes);
              written_bytes += port->bytes;
              writes.emplace_back(reinterpret_cast<uintptr_t>(from->second.data), port->bytes);
              ++r.operands_shared;
              ++out;
              continue;
            }
            if (from != sources.end()) {
              const Source& sum = from->second;
              auto conv = convert(steps[sum.step].backend, own->first,
                                  {steps[sum.step].kernel.get(), true, sum.out, sum.data},
                                  {kernel.get(), true, out, nullptr}, options.conversion_threads, threads,
                                  converters);
              const auto dest = conv ? conv->kernel->port(true, 0) : std::nullopt;
              if (dest && dest->bytes == port->bytes) {
                FL_TRY(kernel->bind(true, out, dest->data));
                reads.emplace_back(steps.size(), port->bytes);
                written_bytes += port->bytes;
                writes.emplace_back(reinterpret_cast<uintptr_t>(dest->data), port->bytes);
                steps.push_back(conversion_step(
                    std::move(conv).value(),
                    fmt::format("conversion {} > {} for {} (its summand)", sum.layout, port->layout, label),
                    sum, dest->bytes));
                ++r.conversions;
                ++r.operands_shared;
                ++out;
                continue;
              }
            }
            ++r.operands_unwired;  // its own (pooled) destination: the summand is not wired in
          }
          void* buffer = pool.take(port->bytes);
          FL_TRY(kernel->bind(true, out, buffer));
          live[buffer] = {port->bytes, std::max(last_use(name), layer.index)};
          written_bytes += port->bytes;
          writes.emplace_back(reinterpret_cast<uintptr_t>(buffer), port->bytes);
        }
        ++out;
      }
    }
    // An element-wise layer keeps the blocked layout of its first blocked input (of its own byte
    // size): inputs in that layout are read where they are, the others converted into it, and its
    // output is in that layout too.
    std::optional<Source> adopted;
    auto source_of = [&](size_t k) -> const Source* {
      auto it = sources.find(layer.input_names[k]);
      return it == sources.end() ? nullptr : &it->second;
    };
    const auto out_port = kernel->port(true, 0);
    if (const auto kept = kept_layout_input(
            layer, source_of, [&](size_t k) { return kernel->port(false, k); },
            out_port ? std::optional<int64_t>(out_port->bytes) : std::nullopt)) {
      const Source layout = *source_of(*kept);
      bool wired = true;
      std::vector<Step> converts;
      for (size_t k = 0; k < layer.input_names.size() && wired; ++k) {
        const Source& from = sources.at(layer.input_names[k]);
        if (from.layout == layout.layout) continue;
        auto conv = convert(steps[from.step].backend, steps[layout.step].backend,
                            {steps[from.step].kernel.get(), true, from.out, from.data},
                            {steps[layout.step].kernel.get(), true, layout.out, nullptr},
                            options.conversion_threads, threads, converters);
        wired = static_cast<bool>(conv);
        if (wired)
          converts.push_back(
              conversion_step(std::move(conv).value(),
                              fmt::format("conversion {} > {} for {}", from.layout, layout.layout, label),
                              from, layout.bytes));
      }
      if (wired) {
        for (size_t k = 0, c = 0; k < layer.input_names.size(); ++k) {
          const Source& from = sources.at(layer.input_names[k]);
          const bool same = from.layout == layout.layout;
          void* data = same ? from.data : converts[c].kernel->port(true, 0)->data;
          reads.emplace_back(same ? from.step : steps.size() + c, same ? from.bytes : layout.bytes);
          c += same ? 0 : 1;
          FL_TRY(kernel->bind(false, k, data));
          ++r.operands_shared;
        }
        r.conversions += static_cast<int>(converts.size());
        for (auto& c : converts) steps.push_back(std::move(c));
        adopted = Source{layout.step, layout.out, out_port->data, layout.layout, layout.bytes};
      }
    }
    for (size_t k = 0; k < input_names.size() && !adopted; ++k) {
      auto src = sources.find(input_names[k]);
      if (src == sources.end()) {
        if (produced.count(input_names[k])) ++r.operands_unwired;  // its producer is not replayed
        own_bytes += operand_bytes(k);  // a weight, a constant, a graph input: the case's own buffer
        if (const auto port = kernel->port(false, k);
            port && port->bytes >= int64_t{kernels::kHugePageMinBytes})
          own_large.emplace_back(reinterpret_cast<uintptr_t>(port->data), port->bytes);
        continue;
      }
      const Source& from = src->second;
      const auto to = kernel->port(false, k);
      if (!to) {
        ++r.operands_unwired;
        own_bytes += operand_bytes(k);
        continue;
      }
      if (from.layout == to->layout && from.bytes == to->bytes) {
        FL_TRY(kernel->bind(false, k, from.data));
        reads.emplace_back(from.step, from.bytes);
        ++r.operands_shared;
        continue;
      }
      // A value converted into this layout for an earlier reader is read from that copy.
      const auto key = std::make_pair(input_names[k], fmt::format("{} {}", to->layout, to->bytes));
      if (auto hit = converted.find(key); hit != converted.end()) {
        FL_TRY(kernel->bind(false, k, hit->second.first));
        reads.emplace_back(hit->second.second, to->bytes);
        ++r.operands_shared;
        continue;
      }
      auto conv = convert(steps[from.step].backend, own->first,
                          {steps[from.step].kernel.get(), true, from.out, from.data},
                          {kernel.get(), false, k, nullptr}, options.conversion_threads, threads, converters);
      const auto dest = conv ? conv->kernel->port(true, 0) : std::nullopt;
      if (!conv || !dest) {
        ++r.operands_unwired;
        own_bytes += to->bytes;
        continue;
      }
      FL_TRY(kernel->bind(false, k, dest->data));
      converted[key] = {dest->data, steps.size()};
      reads.emplace_back(steps.size(), dest->bytes);
      steps.push_back(conversion_step(
          std::move(conv).value(), fmt::format("conversion {} > {} for {}", from.layout, to->layout, label),
          from, dest->bytes));
      ++r.conversions;
    }
    if (adopted) {
      if (!layer.output_names.empty()) sources[layer.output_names[0]] = *adopted;
    } else {
      size_t out = 0;
      for (const auto& name : layer.output_names) {
        if (name.empty()) continue;
        if (const auto port = kernel->port(true, out))
          sources[name] = {steps.size(), out, port->data, port->layout, port->bytes};
        ++out;
      }
    }
    // The outputs the data check reads: f32 values, in a plain layout of an f32 case whose layer
    // writes floats, or in a blocked layout that names f32.
    std::vector<size_t> f32_outputs;
    if (!adopted)
      for (size_t out = 0, named = 0; named < layer.output_names.size(); ++named) {
        if (layer.output_names[named].empty()) continue;
        if (const auto port = kernel->port(true, out)) {
          const bool float_value =
              out < layer.config.outputs.size() && layer.config.outputs[out].dtype == mp::DataType::kF32;
          if (port->layout.rfind("f32 ", 0) == 0 ||
              (port->layout == "plain" && float_value && choice->spec.variant.dtype == DType::kF32))
            f32_outputs.push_back(out);
        }
        ++out;
      }
    // The case's own buffers that run() no longer touches (its ports' former ones, now a producer's
    // output, a pooled buffer or a conversion's copy; oneDNN's plain copies) go back to the system:
    // else each step would hold a second copy of every activation.
    {
      std::vector<kernels::Port> now;
      for (const bool output : {false, true})
        for (size_t k = 0, n = output ? layer.output_names.size() : input_names.size(); k < n; ++k)
          if (const auto port = kernel->port(output, k)) now.push_back(*port);
      r.released_bytes += kernel->release_unused_buffers(own_ports, now);
    }
    const double s_us = best ? best->us : choice->us;  // S's time for the layer (its best case's)
    steps.push_back({std::move(kernel), label, false, choice->us, own->first, layer.name, layer.op_type,
                     layer.key, threads, fusion, choice->spec.name, best != nullptr, s_us, std::move(reads),
                     own_bytes, written_bytes, std::move(writes), std::move(f32_outputs)});
    release(layer);
    r.cases_us += s_us;
    if (best) {
      ++r.alternatives;
      r.alternatives_us += choice->us - best->us;
    }
    ++r.layers_replayed;
  }
  r.buffers = static_cast<int64_t>(pool.buffers());
  r.buffers_reused = pool.reused();
  // Where the cases' own large operands landed: on mappings advised huge pages, as the bench's.
  {
    const auto advised = kernels::huge_page_advised_ranges();
    for (const auto& [at, bytes] : own_large) {
      r.own_large_bytes += bytes;
      const auto in = std::upper_bound(advised.begin(), advised.end(), std::make_pair(at, UINTPTR_MAX));
      if (in != advised.begin() && at + static_cast<uintptr_t>(bytes) <= std::prev(in)->second)
        r.own_huge_advised_bytes += bytes;
    }
  }
  // One scratchpad for every case, of the largest size, placed as the pool's buffers are.
  for (const auto& s : steps) r.workspace_bytes = std::max(r.workspace_bytes, s.kernel->workspace_bytes());
  if (r.workspace_bytes > 0) {
    void* workspace = pool.fresh(r.workspace_bytes);
    for (auto& s : steps)
      if (s.kernel->workspace_bytes() > 0 && s.kernel->share_workspace(workspace)) {
        ++r.workspaces_shared;
        r.released_bytes += s.kernel->release_unused_buffers({}, {});  // its own scratchpad
      }
  }
  if (r.layers_replayed == 0)
    return make_error("{} (batch {}): no layer has a measured case to replay", model.name, model.batch);

  size_t failing = 0;
  // Before a step, its backend is set to the step's thread count (a layer of the thread budget
  // timed fastest at fewer threads than the run has) where the step before was another backend's or
  // at another count: two backends may share one runtime's setting (oneDNN's and our kernels'
  // OpenMP), so a backend's own last setting is not enough to know the current one. There the
  // workers of the step before, spinning for their library's next call, are parked first, so that
  // they do not take the cores this step's threads need (Backend::park_threads): within a run of
  // one backend's steps its workers spin, as a runtime's one pool does between layers.
  const Backend* backend_now = nullptr;
  int threads_now = 0;
  auto run_step = [&](Step& s) {
    if (s.backend != backend_now || s.threads != threads_now) {
      if (backend_now) backend_now->park_threads();
      s.backend->set_threads(s.threads);
      backend_now = s.backend;
      threads_now = s.threads;
    }
    s.kernel->run();
  };
  auto pass = [&] {
    for (failing = 0; failing < steps.size(); ++failing) run_step(steps[failing]);
  };
  // Denormals flushed while the timed passes run, on every backend's threads (ReplayOptions::
  // flush_denormals): a guard. With the weights in [-1, 1) the cases had before they were scaled by
  // their fan-in, softmax and sigmoid outputs went denormal (vit_b_16's attention MatMul took 1.7 ms
  // in the graph against 0.15 alone on them). Restored in reverse order when the replay returns.
  struct Flushed {
    std::vector<const Backend*> backends;
    int threads = 1;
    ~Flushed() {
      for (auto it = backends.rbegin(); it != backends.rend(); ++it) (*it)->flush_denormals(false, threads);
    }
  } flushed;
  // The data check (ReplayResult::denormal_steps): one pass with denormals as the hardware makes
  // them, each step's f32 outputs scanned right after it runs (a pooled buffer holds a later
  // step's values by the end of the pass).
  std::vector<DataCount> counts(steps.size());
  try {
    for (failing = 0; failing < steps.size(); ++failing) {
      run_step(steps[failing]);
      for (const size_t out : steps[failing].f32_outputs)
        if (const auto port = steps[failing].kernel->port(true, out))
          counts[failing] += count_abnormal(static_cast<const float*>(port->data), port->bytes / 4);
    }
  } catch (const std::exception& e) {
    if (backend_now) backend_now->park_threads();
    return make_error("{} (batch {}): replay failed at {}: {}", model.name, model.batch,
                      failing < steps.size() ? steps[failing].label : "?", e.what());
  }
  for (const auto& c : counts) {
    r.denormal_steps += c.denormals > 0 ? 1 : 0;
    r.nonfinite_steps += c.nonfinite > 0 ? 1 : 0;
  }
  if (options.flush_denormals) {
    flushed.threads = options.threads;
    for (const auto& s : steps) flushed.threads = std::max(flushed.threads, s.threads);
    for (const auto& s : steps)
      if (std::find(flushed.backends.begin(), flushed.backends.end(), s.backend) == flushed.backends.end())
        flushed.backends.push_back(s.backend);
    for (const Backend* b : flushed.backends) b->flush_denormals(true, flushed.threads);
  }
  try {
    const auto w0 = std::chrono::steady_clock::now();
    int64_t warm = 0;
    do {
      pass();
      ++warm;
    } while (seconds_since(w0) < options.warmup_seconds);
    const double per_pass = seconds_since(w0) / static_cast<double>(warm);
    const auto n =
        static_cast<int64_t>(std::clamp(std::ceil(options.min_time / std::max(per_pass, 1e-9)), 1.0, 1e6));
    std::vector<double> reps;
    SlowdownDetector watch(options.sentinel_slow_factor);
    // A sentinel reading with every backend's workers parked (they would spin through it).
    auto read_sentinel = [&] {
      if (backend_now) backend_now->park_threads();
      backend_now = nullptr;
      return watch.record(options.sentinel());
    };
    if (options.sentinel) read_sentinel();  // the baseline: the lowest reading so far
    // A long pass (ReplayOptions::long_pass): fewer repetitions and profile passes.
    const bool long_pass = options.long_pass > 0 && per_pass >= options.long_pass;
    const int wanted = std::max(
        1, long_pass ? std::min(options.repetitions, options.long_repetitions) : options.repetitions);
    for (int rep = 0; rep < wanted;) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < n; ++k) pass();
      const double us = seconds_since(t0) / static_cast<double>(n) * 1e6;
      r.passes += n;
      if (options.sentinel && read_sentinel() && r.slowed_repetitions < wanted) {
        ++r.slowed_repetitions;
        continue;
      }
      reps.push_back(us);
      ++rep;
    }
    const Summary s = summarize(reps);
    r.median_us = s.median;
    r.min_us = s.min;
    r.max_us = s.max;
    r.stddev_us = s.stddev;
    r.repetitions = static_cast<int>(s.n);
    // The profile passes, each paired with the same steps alone (ReplayOptions::paired): a pass
    // with every step timed, then each layer step run once more to warm it and timed on the next
    // call. Both halves of a pair see the host in one state, so the pass over its steps alone is
    // the graph's cost over its cases', whatever the host's load.
    std::vector<std::vector<double>> per_step(steps.size()), alone_now(steps.size());
    std::vector<double> pair_ratios;
    const int profile_passes = std::max(
        std::max(1, long_pass ? std::min(options.profile_passes, options.long_profile_passes)
                              : options.profile_passes),
        static_cast<int>(std::min(
            ReplayOptions::kMaxProfilePasses,
            std::ceil(options.profile_seconds / std::max((options.paired ? 3 : 1) * per_pass, 1e-9)))));
    for (int p = 0; p < profile_passes; ++p) {
      double graph_us = 0, alone_sum_us = 0;
      for (failing = 0; failing < steps.size(); ++failing) {
        const auto t0 = std::chrono::steady_clock::now();
        run_step(steps[failing]);
        per_step[failing].push_back(seconds_since(t0) * 1e6);
        graph_us += per_step[failing].back();
      }
      if (!options.paired) continue;
      for (failing = 0; failing < steps.size(); ++failing) {
        if (steps[failing].conversion) continue;
        run_step(steps[failing]);
        const auto t0 = std::chrono::steady_clock::now();
        run_step(steps[failing]);
        alone_now[failing].push_back(seconds_since(t0) * 1e6);
        alone_sum_us += alone_now[failing].back();
      }
      if (alone_sum_us > 0) pair_ratios.push_back(graph_us / alone_sum_us);
    }
    if (!pair_ratios.empty()) {
      r.paired_ratio = summarize(pair_ratios).median;
      r.pairs = static_cast<int>(pair_ratios.size());
    }
    for (size_t k = 0; k < steps.size(); ++k) {
      const Summary step_summary = summarize(per_step[k]);
      const double us = step_summary.min;
      (steps[k].conversion ? r.conversions_us : r.layers_us) += us;
      r.steps_median_us += step_summary.median;
      if (!steps[k].conversion) r.steps_alone_us += steps[k].alone_us;
      const double now_us = alone_now[k].empty() ? 0.0 : summarize(alone_now[k]).min;
      r.alone_now_us += now_us;
      r.steps.push_back({steps[k].label,
                         steps[k].conversion,
                         us,
                         step_summary.median,
                         steps[k].alone_us,
                         steps[k].layer,
                         steps[k].op,
                         steps[k].key,
                         steps[k].threads,
                         steps[k].backend->name(),
                         steps[k].fusion,
                         steps[k].case_name,
                         steps[k].alternative,
                         steps[k].best_us,
                         steps[k].reads,
                         steps[k].own_bytes,
                         steps[k].written_bytes,
                         steps[k].kernel->workspace_bytes(),
                         steps[k].writes,
                         ""});
      r.steps.back().alone_now_us = now_us;
      r.steps.back().denormals = counts[k].denormals;
      r.steps.back().nonfinite = counts[k].nonfinite;
    }
    const int64_t l2 = options.l2_bytes > 0 ? options.l2_bytes : cache_sizes().l2;
    name_slow_steps(r, l2);
    // The probe (ReplayStep::after_previous_us): each slow step without a cause in what it touches,
    // right after the step before it, in pairs; then the causes again.
    if (options.paired && r.slow_unexplained > 0) {
      for (size_t k = 1; k < steps.size(); ++k) {
        if (!r.steps[k].slow() || !r.steps[k].excess_cause.empty()) continue;
        double lowest = 0;
        for (int p = 0; p < kAfterPreviousPairs; ++p) {
          failing = k - 1;
          run_step(steps[k - 1]);
          failing = k;
          const auto t0 = std::chrono::steady_clock::now();
          run_step(steps[k]);
          const double us = seconds_since(t0) * 1e6;
          lowest = p == 0 ? us : std::min(lowest, us);
        }
        r.steps[k].after_previous_us = lowest;
      }
      name_slow_steps(r, l2);
    }
  } catch (const std::exception& e) {
    if (backend_now) backend_now->park_threads();
    return make_error("{} (batch {}): replay failed at {}: {}", model.name, model.batch,
                      failing < steps.size() ? steps[failing].label : "?", e.what());
  }
  if (backend_now) backend_now->park_threads();
  return r;
}
}  // namespace

DataCount count_abnormal(const float* x, int64_t n) {
  DataCount c;
  for (int64_t i = 0; i < n; ++i) {
    // Classified by the bits: no floating-point operation on a denormal (DAZ may be set).
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    const uint32_t exponent = (bits >> 23) & 0xFFu, mantissa = bits & 0x7FFFFFu;
    c.denormals += exponent == 0 && mantissa != 0 ? 1 : 0;
    c.nonfinite += exponent == 0xFFu ? 1 : 0;
  }
  return c;
}

void name_slow_steps(ReplayResult& r, int64_t l2_bytes) {
  constexpr int64_t kSizable = 64 * 1024;  // operands under this are no cause
  auto mb = [](int64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); };
  // Bytes each step touches, and a pass's (the shared scratchpad once: the largest).
  std::vector<int64_t> touched(r.steps.size());
  int64_t pass = 0, workspace = 0;
  for (size_t k = 0; k < r.steps.size(); ++k) {
    const ReplayStep& s = r.steps[k];
    int64_t read = 0;
    for (const auto& [from, bytes] : s.reads) read += bytes;
    touched[k] = read + s.own_bytes + s.written_bytes;
    pass += touched[k];
    workspace = std::max(workspace, s.workspace_bytes);
  }
  pass += workspace;
  // Prefix sums: the bytes the steps before k touched.
  const size_t n = r.steps.size();
  std::vector<int64_t> before(n + 1, 0);
  for (size_t k = 0; k < n; ++k) before[k + 1] = before[k] + touched[k];
  // The bytes touched after step j and before step k, going forward through the passes (the pass
  // before where j is not before k; all but k's own where j is k).
  auto between = [&](size_t j, size_t k) {
    if (j < k) return before[k] - before[j + 1];
    if (j > k) return before[n] - before[j + 1] + before[k];
    return before[n] - touched[k];
  };
  // Every step that touches a buffer: writes it, or reads a value a step wrote into it.
  std::unordered_map<uint64_t, std::vector<size_t>> touching;
  for (size_t k = 0; k < n; ++k) {
    for (const auto& [buffer, bytes] : r.steps[k].writes) touching[buffer].push_back(k);
    for (const auto& [from, bytes] : r.steps[k].reads)
      if (from < n)
        for (const auto& [buffer, b] : r.steps[from].writes) touching[buffer].push_back(k);
  }
  for (auto& [buffer, ks] : touching) {
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  }
  // The last step before k (cyclically) that touched `buffer`.
  auto last_touch = [&](uint64_t buffer, size_t k) {
    const auto& ks = touching.at(buffer);
    auto it = std::lower_bound(ks.begin(), ks.end(), k);
    if (it != ks.begin()) return *std::prev(it);
    return ks.back();  // in the pass before (k itself where it is the only one)
  };
  r.slow_steps = r.slow_unexplained = 0;
  for (size_t k = 0; k < r.steps.size(); ++k) {
    ReplayStep& s = r.steps[k];
    s.excess_cause.clear();
    if (s.conversion || s.in_graph_us <= s.alone_us) continue;
    const int64_t cache = l2_bytes * std::max(1, s.threads);
    std::vector<std::string> causes;
    if (s.own_bytes >= kSizable && pass - touched[k] + s.own_bytes > cache)
      causes.push_back("cold weights " + mb(s.own_bytes));
    int64_t cold_input = 0;
    for (const auto& [from, bytes] : s.reads)
      if (bytes >= kSizable && from < k && before[k] - before[from + 1] + bytes > cache)
        cold_input = std::max(cold_input, bytes);
    if (cold_input > 0) causes.push_back("cold input " + mb(cold_input));
    int64_t cold_output = 0;
    for (const auto& [buffer, bytes] : s.writes)
      if (bytes >= kSizable && between(last_touch(buffer, k), k) + bytes > cache)
        cold_output = std::max(cold_output, bytes);
    if (cold_output > 0) causes.push_back("cold output " + mb(cold_output));
    if (k > 0 && r.steps[k - 1].threads != s.threads)
      causes.push_back(fmt::format("thread switch {}>{}", r.steps[k - 1].threads, s.threads));
    if (s.alone_us < 5) causes.push_back("short step");
    if (causes.empty() && k > 0 && s.after_previous_us > 0) {
      const ReplayStep& previous = r.steps[k - 1];
      const double alone = s.alone_now_us > 0 ? s.alone_now_us : s.alone_us;
      causes.push_back(
          s.after_previous_us > kSlowStep * alone
              ? fmt::format("after {}: {:.1f} us", previous.label, s.after_previous_us)
              : fmt::format("the pass before it: {:.1f} us after {}", s.after_previous_us, previous.label));
    }
    s.excess_cause = fmt::format("{}", fmt::join(causes, "; "));
    if (!s.slow()) continue;
    ++r.slow_steps;
    if (causes.empty()) ++r.slow_unexplained;
  }
}

ReplayOptions second_look_options(const ReplayOptions& first) {
  ReplayOptions o = first;
  o.paired = false;
  o.profile_passes = 1;
  o.profile_seconds = 0;
  return o;
}

bool take_second_look(ReplayResult& first, const ReplayResult& second) {
  first.second_look_us = second.min_us;
  first.passes += second.passes;
  first.slowed_repetitions += second.slowed_repetitions;
  if (second.min_us <= 0 || second.min_us >= first.min_us) return false;
  first.min_us = second.min_us;
  first.median_us = second.median_us;
  first.max_us = second.max_us;
  first.stddev_us = second.stddev_us;
  first.repetitions = second.repetitions;
  return true;
}

benchdb::ReplayRow replay_row(const ReplayResult& r, int64_t system_id, std::optional<int64_t> run_id,
                              const std::string& dtype) {
  benchdb::ReplayRow row;
  row.system_id = system_id;
  row.run_id = run_id;
  row.model_name = r.model;
  row.batch = r.batch;
  row.dtype = dtype;
  row.median_us = r.median_us;
  row.min_us = r.min_us;
  row.max_us = r.max_us;
  row.stddev_us = r.stddev_us;
  row.repetitions = r.repetitions;
  row.measured_at = benchdb::utc_now();
  // What the replay consisted of, for the analyzer (analyzer.hpp, ModelBounds::replay_*), with each
  // layer's time in the graph beside its case's time alone (the validity check names the layers
  // faster in the graph than in S).
  nlohmann::json layer_times = nlohmann::json::array();
  for (const auto& s : r.steps)
    if (!s.conversion)
      layer_times.push_back({{"layer", s.layer},
                             {"op", s.op},
                             {"fusion", s.fusion},
                             {"replay_us", s.in_graph_us},
                             {"replay_median_us", s.in_graph_median_us},
                             {"case_us", s.alone_us},
                             {"alone_now_us", s.alone_now_us},
                             {"after_previous_us", s.after_previous_us},
                             {"threads", s.threads},
                             {"alternative", s.alternative},
                             {"cause", s.cause()},
                             {"excess_cause", s.excess_cause}});
  row.makeup = nlohmann::json{{"layers", r.layers_replayed},
                              {"layers_us", r.layers_us},
                              {"cases_us", r.cases_us},
                              {"conversions", r.conversions},
                              {"conversions_us", r.conversions_us},
                              {"steps_median_us", r.steps_median_us},
                              {"paired_ratio", r.paired_ratio},
                              {"pairs", r.pairs},
                              {"steps_alone_us", r.steps_alone_us},
                              {"alone_now_us", r.alone_now_us},
                              {"paired_us", r.paired_us()},
                              {"operands_shared", r.operands_shared},
                              {"layers_missing", r.layers_missing},
                              {"operands_unwired", r.operands_unwired},
                              {"buffers", r.buffers},
                              {"buffers_reused", r.buffers_reused},
                              {"slow_steps", r.slow_steps},
                              {"slow_unexplained", r.slow_unexplained},
                              {"alternatives", r.alternatives},
                              {"alternatives_us", r.alternatives_us},
                              {"conversions_expected_before", r.conversions_expected_before},
                              {"conversions_expected_after", r.conversions_expected_after},
                              {"workspaces_shared", r.workspaces_shared},
                              {"workspace_bytes", r.workspace_bytes},
                              {"own_large_bytes", r.own_large_bytes},
                              {"own_huge_advised_bytes", r.own_huge_advised_bytes},
                              {"released_bytes", r.released_bytes},
                              {"denormal_steps", r.denormal_steps},
                              {"slowed_repetitions", r.slowed_repetitions},
                              {"second_look_us", r.second_look_us},
                              {"nonfinite_steps", r.nonfinite_steps},
                              {"layer_times", layer_times}}
                   .dump();
  return row;
}

std::vector<std::string> cases_to_retime(const ReplayResult& r,
                                         const std::map<std::string, ChosenCase>& chosen, double below,
                                         bool every) {
  std::vector<std::string> beaten, all;
  if (r.cases_us <= 0 || r.ratio() >= below) return beaten;
  std::set<std::string> seen_beaten, seen_all;
  for (const auto& s : r.steps) {
    // The layout-aware choice's alternative is not S's case; an epilogue's fused case is.
    if (s.conversion || s.alternative) continue;
    auto c = chosen.find(s.key);
    if (s.fusion.empty() && c == chosen.end()) continue;
    const std::string& name = s.fusion.empty() ? c->second.spec.name : s.case_name;
    if (name.empty()) continue;
    if (seen_all.insert(name).second) all.push_back(name);
    if (s.beaten() && seen_beaten.insert(name).second) beaten.push_back(name);
  }
  // Every case only where the replay is below S itself: within `below` above S is replay's usual
  // range for large models, which alone points to no slowed measurement.
  if (every || (beaten.empty() && r.ratio() < 1.0)) return all;
  return beaten;
}

void rebase(ReplayResult& r, const std::map<std::string, ChosenCase>& chosen, const FusedChoices& fused) {
  r.cases_us = 0;
  for (auto& s : r.steps) {
    if (s.conversion) continue;
    // S's time for an unfused layer is its config's best case's; the case that ran is that one
    // unless the layout-aware choice took another (whose own time stays). An epilogue's is its
    // fused case's, when that is the case that ran.
    if (auto c = chosen.find(s.key); c != chosen.end() && s.fusion.empty()) {
      s.best_us = c->second.us;
      if (!s.alternative) s.alone_us = c->second.us;
    } else if (auto f = fused.find({s.key, s.fusion}); f != fused.end() && !s.fusion.empty() &&
                                                       !s.alternative && f->second.spec.name == s.case_name) {
      s.best_us = s.alone_us = f->second.us;
    }
    r.cases_us += s.best_us;
  }
}

Result<RetimeResult> retime_cases(benchdb::Database& db, const mp::ModelIR& model, const Plan& plan,
                                  const std::vector<std::string>& names,
                                  const std::vector<const Backend*>& backends, RunOptions options,
                                  int64_t system_id, DType dtype, std::map<std::string, ChosenCase>& chosen,
                                  ReplayResult& r) {
  const auto t0 = std::chrono::steady_clock::now();
  RetimeResult out;
  out.cases_us_before = r.cases_us;
  const std::set<std::string> wanted(names.begin(), names.end());
  Plan sub;
  std::set<std::string> keys, backend_names;
  for (const auto& c : plan.cases)
    if (wanted.count(c.spec.name) && !c.status) {
      sub.cases.push_back(c);
      keys.insert(c.spec.problem.key);
      backend_names.insert(c.spec.variant.backend);
    }
  if (sub.cases.size() != wanted.size())
    return make_error("{} (batch {}): {} case(s) to time again are not timed cases of the plan", model.name,
                      model.batch, wanted.size() - sub.cases.size());
  for (const auto& u : plan.configs)
    if (keys.count(u.key)) sub.configs.push_back(u);
  std::vector<const Backend*> used;
  for (const Backend* b : backends)
    if (backend_names.erase(b->name())) used.push_back(b);
  if (!backend_names.empty())
    return make_error("{} (batch {}): no backend {} to time its cases again", model.name, model.batch,
                      *backend_names.begin());
  sub.backends.assign(plan.backends.begin(), plan.backends.end());
  options.force = true;
  options.keep_lower = true;
  options.calibrate = false;
  options.progress = Progress::kNone;
  options.command =
      options.command.empty()
          ? fmt::format("re-timing cases of {} (batch {})", model.name, model.batch)
          : fmt::format("{} (re-timing cases of {}, batch {})", options.command, model.name, model.batch);
  // Each case is timed again at the thread count it won at (its system within the thread budget):
  // an unfused or fused best case at its own, another case the replay ran at the count it ran at.
  FL_ASSIGN_OR_RETURN(const auto fused_before, best_fused_cases(db, system_id, plan, dtype));
  std::map<std::string, int> threads_of;
  for (const auto& [key, c] : chosen) threads_of[c.spec.name] = c.threads > 0 ? c.threads : options.threads;
  for (const auto& [key, c] : fused_before)
    threads_of.emplace(c.spec.name, c.threads > 0 ? c.threads : options.threads);
  for (const auto& s : r.steps)
    if (!s.case_name.empty()) threads_of.emplace(s.case_name, s.threads);
  std::map<int, Plan> by_threads;
  for (const auto& c : sub.cases) {
    const auto t = threads_of.find(c.spec.name);
    Plan& p = by_threads[t == threads_of.end() ? options.threads : t->second];
    p.cases.push_back(c);
  }
  for (auto& [threads, p] : by_threads) {
    p.configs = sub.configs;
    p.backends = sub.backends;
    RunOptions at = options;
    at.threads = threads;
    FL_ASSIGN_OR_RETURN(RunSummary one, run_plan(&db, {model}, p, used, at));
    const bool interrupted = one.interrupted;
    out.run = std::move(one);
    if (interrupted) break;
  }
  out.cases = static_cast<int>(sub.cases.size());
  FL_ASSIGN_OR_RETURN(auto fresh, best_cases(db, system_id, plan, dtype));
  std::set<std::string> replayed;
  for (const auto& s : r.steps)
    if (!s.conversion) replayed.insert(s.key);
  for (const auto& key : replayed) {
    auto a = chosen.find(key), b = fresh.find(key);
    if (a != chosen.end() && b != fresh.end() && b->second.us < a->second.us) ++out.lowered;
  }
  chosen = std::move(fresh);
  FL_ASSIGN_OR_RETURN(const auto fused, best_fused_cases(db, system_id, plan, dtype));
  rebase(r, chosen, fused);
  out.cases_us_after = r.cases_us;
  out.seconds = seconds_since(t0);
  return out;
}

Result<RetimeResult> retime_after_replay(benchdb::Database& db, const mp::ModelIR& model, const Plan& plan,
                                         const std::vector<const Backend*>& backends,
                                         const RunOptions& options, int64_t system_id, DType dtype,
                                         std::map<std::string, ChosenCase>& chosen, ReplayResult& r,
                                         double below, int max_rounds) {
  RetimeResult out;
  out.cases_us_before = out.cases_us_after = r.cases_us;
  std::map<std::string, double> first;  // the replayed configs' times before any round
  for (const auto& s : r.steps)
    if (!s.conversion) first.emplace(s.key, s.alone_us);
  std::vector<std::string> last;  // the names the last round timed
  auto timed_again = [&](const std::vector<std::string>& names) -> Status {
    FL_ASSIGN_OR_RETURN(RetimeResult one,
                        retime_cases(db, model, plan, names, backends, options, system_id, dtype, chosen, r));
    ++out.rounds;
    out.cases += one.cases;
    out.seconds += one.seconds;
    out.cases_us_after = one.cases_us_after;
    out.run = one.run;
    last = names;
    return {};
  };
  for (int round = 0; round < max_rounds; ++round) {
    // After the first round, only while the replay is still below S and some layer still beats
    // its case.
    const auto names = cases_to_retime(r, chosen, round == 0 ? below : 1.0);
    if (names.empty()) break;
    if (round > 0 &&
        std::none_of(r.steps.begin(), r.steps.end(), [](const ReplayStep& s) { return s.beaten(); }))
      break;
    FL_TRY(timed_again(names));
    if (out.run.interrupted) break;
  }
  // Still below S: every replayed layer's case once more (unless the last round was just that).
  if (out.rounds > 0 && !out.run.interrupted && r.ratio() < 1.0)
    if (const auto every = cases_to_retime(r, chosen, 1.0, true); every != last) FL_TRY(timed_again(every));
  for (const auto& [key, us] : first)
    if (auto c = chosen.find(key); c != chosen.end() && c->second.us < us) ++out.lowered;
  return out;
}

kernels::CaseSpec placed_as_benched(kernels::CaseSpec spec, bool huge_pages) {
  spec.placement = kernels::BufferPlacement{0, huge_pages};
  return spec;
}

}  // namespace floorline::gen
