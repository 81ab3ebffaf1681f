// The planner: unique configs × backends × data types → cases (backend enumerates implementations).
#include "floorline/generator/plan.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "floorline/benchdb/schema.hpp"

namespace floorline::gen {

namespace {

// A config's bytes are counted in f32 (the models' type): scaled to the case's element size. A
// quantized config's bytes are its own tensors' already.
int64_t scaled_bytes(int64_t bytes, DType dtype, bool quantized = false) {
  if (bytes <= 0 || quantized) return bytes;
  return bytes * element_size(dtype) / element_size(DType::kF32);
}

// --- quantization: the data types a config is planned in. A quantized config (QDQ) is int8 work
// whatever was asked; a float config is planned in int8 (`--dtype int8`) only where oneDNN has int8
// primitives that a runtime would quantize it into (Conv, Gemm, MatMul).
std::vector<DType> config_dtypes(const mp::LayerConfig& config, const std::vector<DType>& asked) {
  if (mp::quantized_config(config)) return {DType::kInt8};
  std::vector<DType> out;
  for (DType d : asked)
    if (d != DType::kInt8 || config.kind == LayerKind::kConv || config.kind == LayerKind::kGemm ||
        config.kind == LayerKind::kMatMul)
      out.push_back(d);
  return out;
}

// The one case of a kind the backend's kind table does not map: its reason is the table's.
PlannedCase unmapped_case(const kernels::CaseSpec& base, const kernels::KindSupport& support) {
  PlannedCase pc;
  pc.spec = base;
  pc.spec.variant.algorithm = "none";
  pc.status = Disposition::kUnsupported;
  pc.reason = fmt::format("{}: {}", base.problem.op, support.reason);
  return pc;
}

// The planned case of one candidate: its variant, implementation and feeds on a copy of `base`,
// its work, and its params (the library, oneDNN's implementation and formats).
PlannedCase planned(const kernels::CaseSpec& base, const kernels::LibraryCase& c) {
  PlannedCase pc;
  pc.spec = base;
  pc.spec.variant = c.variant;
  pc.spec.impl_index = c.impl_index;
  pc.spec.impl_name = c.impl_name;
  pc.spec.feeds = c.feeds;
  pc.status = c.status;
  pc.reason = c.reason;
  pc.work.is_default = c.is_default;
  pc.group = c.group;
  pc.reference = c.reference;
  pc.multi_thread_only = c.multi_thread_only;
  pc.library = c.library;
  pc.conversion = c.conversion;
  if (c.conversion) pc.work = conversion_work(base, *c.conversion);
  nlohmann::json params = nlohmann::json::object();
  if (!c.library.empty()) params["library"] = c.library;
  if (!c.impl_name.empty() && !c.conversion) {
    params["impl_index"] = c.impl_index;
    params["impl_name"] = c.impl_name;
  }
  if (!c.formats.empty()) params["formats"] = c.formats;
  pc.params = params.dump();
  return pc;
}

}  // namespace

std::string layout_family(std::string_view layout) {
  static const std::set<std::string_view> kChannelsLast = {"acb", "acdb", "acdeb", "nwc", "nhwc", "ndhwc"};
  if (kChannelsLast.count(layout)) return "channels_last";
  const auto upper =
      std::find_if(layout.begin(), layout.end(), [](char ch) { return ch >= 'A' && ch <= 'Z'; });
  if (upper != layout.end() &&
      std::any_of(upper, layout.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return "blocked";
  return std::string(layout);
}

kernels::Work conversion_work(const kernels::CaseSpec& base, const LayoutConversion& conversion) {
  auto elements = [](const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  };
  // The output; or the largest input that is no weight operand (a binary's full-size operand, not
  // its broadcast one: an SE block's scale · x has the 1×C×1×1 scale first).
  int64_t n = 0;
  if (conversion.tensor == "dst") {
    n = elements(base.problem.outputs.at(0).shape);
  } else {
    for (size_t k = 0; k < base.problem.inputs.size(); ++k)
      if (!kernels::weight_operand(base.problem, k)) n = std::max(n, elements(base.problem.inputs[k].shape));
    if (n == 0) n = elements(base.problem.inputs.at(0).shape);
  }
  kernels::Work w;
  w.bytes = 2 * n * element_size(base.variant.dtype);
  w.flops = 0;
  return w;
}

std::vector<PlannedCase> plan_cases(const kernels::CaseSpec& base,
                                    const std::vector<kernels::LibraryCase>& candidates,
                                    const PlanOptions& options) {
  using kernels::LibraryCase;
  std::vector<PlannedCase> out;
  const bool fused = !base.problem.post_ops.empty();
  std::vector<MathMode> modes;
  for (const auto& c : candidates)
    if (std::find(modes.begin(), modes.end(), c.variant.math_mode) == modes.end())
      modes.push_back(c.variant.math_mode);
  std::vector<bool> conversion_planned(candidates.size(), false);
  for (const MathMode mode : modes) {
    // The policy's order: defaults, the first of every other variant, the rest.
    std::vector<size_t> ordered;
    std::vector<bool> first_of_variant;
    std::vector<std::string> seen;  // variant_of() of the first of each variant
    auto in_mode = [&](size_t i) {
      return candidates[i].variant.math_mode == mode && !candidates[i].conversion;
    };
    // A variant: the group and layout; for a fused case also the layout families its operands are
    // converted to (layout_family of the conversions that feed it). A fused convolution timed only
    // with the group's first implementation reads one layout (brgconv: NHWC on AVX-512), and a
    // replay whose batch normalization before it wrote the blocked layout converted every such
    // input (densenet121 at batch 1 on 2 threads: 95 conversions, 4.2 ms); with the first
    // implementation of each family timed, the layout-aware choice keeps the blocked one (11 left).
    auto variant_of = [&](size_t i) {
      std::string v = candidates[i].group + "|" + candidates[i].variant.layout;
      if (!fused) return v;
      std::vector<std::string> reads;
      for (const LibraryCase& conv : candidates)
        if (conv.conversion && conv.variant.math_mode == mode &&
            conv.feeds.feeds(candidates[i].variant.algorithm, candidates[i].variant.layout))
          reads.push_back(conv.conversion->tensor + ":" + layout_family(conv.conversion->to));
      std::sort(reads.begin(), reads.end());
      reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
      for (const auto& r : reads) v += "|" + r;
      return v;
    };
    auto take = [&](size_t i, bool first) {
      ordered.push_back(i);
      first_of_variant.push_back(first);
      if (first) seen.push_back(variant_of(i));
    };
    for (size_t i = 0; i < candidates.size(); ++i)
      if (in_mode(i) && !candidates[i].status && candidates[i].is_default)
        take(i, std::find(seen.begin(), seen.end(), variant_of(i)) == seen.end());
    for (size_t i = 0; i < candidates.size(); ++i)
      if (in_mode(i) && !candidates[i].status && !candidates[i].is_default && !candidates[i].reference &&
          std::find(seen.begin(), seen.end(), variant_of(i)) == seen.end())
        take(i, true);
    for (size_t i = 0; i < candidates.size(); ++i)
      if (in_mode(i) && std::find(ordered.begin(), ordered.end(), i) == ordered.end()) take(i, false);
    // A reference implementation is skipped only where a real one exists: a config that only the
    // reference implements is still timed, so that every config has a measurement.
    const bool only_reference = std::all_of(ordered.begin(), ordered.end(), [&](size_t i) {
      return candidates[i].status || candidates[i].reference;
    });
    int timed = 0;
    for (size_t k = 0; k < ordered.size(); ++k) {
      const LibraryCase& c = candidates[ordered[k]];
      if (c.status) {  // the backend knows it cannot run
        out.push_back(planned(base, c));
        continue;
      }
      // A fused variant is timed with the first implementation of each variant only, every one with
      // fused_all (--all-impls): S's activation epilogues take the fastest fused case there is.
      if (fused && !first_of_variant[k] && !options.fused_all) continue;
      PlannedCase pc = planned(base, c);
      if (c.reference && !options.include_reference && !only_reference) {
        pc.status = Disposition::kSkipped;
        pc.reason = "reference implementation (plain loops); --include-ref times it";
      } else if (options.max_impls > 0 && timed >= options.max_impls && !first_of_variant[k]) {
        pc.status = Disposition::kSkipped;
        pc.reason = fmt::format("beyond --max-impls {}; --all-impls times it", options.max_impls);
      } else if (!c.multi_thread_only) {
        ++timed;
      }
      const bool timed_case = !pc.status;
      out.push_back(std::move(pc));
      if (!timed_case || !options.conversions || fused) continue;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const LibraryCase& conv = candidates[i];
        if (!conv.conversion || conversion_planned[i] || conv.variant.math_mode != mode ||
            !conv.feeds.feeds(c.variant.algorithm, c.variant.layout))
          continue;
        conversion_planned[i] = true;
        out.push_back(planned(base, conv));
      }
    }
  }
  return out;
}

benchdb::CaseRow case_row(const PlannedCase& c) {
  benchdb::CaseRow row;
  row.identity = c.spec.id();
  row.params = c.params;
  row.conversion = c.conversion;
  row.feeds = c.spec.feeds;
  return row;
}

Plan make_plan(const std::vector<mp::ModelIR>& models, const std::vector<const Backend*>& backends,
               const PlanOptions& options) {
  Plan plan;
  plan.configs = mp::dedup(models);
  const auto patterns = options.fusion ? fusion_patterns(models) : decltype(fusion_patterns(models)){};
  for (const auto* b : backends) plan.backends.push_back(b->name());
  for (const auto& u : plan.configs) {
    const kernels::Problem problem = to_problem(u.config, u.key);
    const bool quantized = mp::quantized_config(u.config);
    for (const auto* backend : backends)
      for (const auto& dtype : config_dtypes(u.config, options.dtypes)) {
        kernels::CaseSpec base;
        base.problem = problem;
        base.variant.backend = backend->name();
        base.variant.dtype = dtype;
        base.variant.math_mode = own_math_mode(dtype);
        const kernels::KindSupport support = backend->support(problem.kind);
        if (!support.supported()) {
          PlannedCase pc = unmapped_case(base, support);
          pc.spec.name = case_name(pc.spec.id());
          pc.work.flops = u.flops;
          pc.work.bytes = scaled_bytes(u.bytes, dtype, quantized);
          plan.cases.push_back(std::move(pc));
          continue;
        }
        std::vector<PlannedCase> cases = plan_cases(base, backend->candidates(base), options);
        if (auto it = patterns.find(u.key); it != patterns.end() && dtype != DType::kInt8)  // int8: unfused
          for (const auto& pattern : it->second) {
            kernels::CaseSpec fused = base;
            fused.problem.post_ops = pattern.post_ops;
            fused.variant.fusion = pattern.name;
            for (auto& c : plan_cases(fused, backend->candidates(fused), options)) {
              if (pattern.flops > 0 || pattern.bytes > 0) {
                c.work.flops = pattern.flops;
                c.work.bytes = pattern.bytes;
              }
              cases.push_back(std::move(c));
            }
          }
        std::set<std::string> names;
        for (auto& c : cases) {
          c.spec.name = case_name(c.spec.id());
          if (!names.insert(c.spec.name).second) continue;  // e.g. one conversion feeding two implementations
          if (c.work.flops == 0 && c.work.bytes == 0) {
            c.work.flops = u.flops;
            c.work.bytes = scaled_bytes(u.bytes, dtype, quantized);
          }
          plan.cases.push_back(std::move(c));
        }
      }
  }
  return plan;
}

}  // namespace floorline::gen
