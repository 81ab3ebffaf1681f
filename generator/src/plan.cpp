// The planner: unique configs × backends × data types → cases (backend enumerates implementations).
#include "floorline/generator/plan.hpp"

#include <set>

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

}  // namespace

benchdb::CaseRow case_row(const PlannedCase& c) {
  benchdb::CaseRow row;
  row.identity = c.spec.id();
  row.params = c.params;
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
        std::vector<PlannedCase> cases = backend->cases_for(base, options);
        if (auto it = patterns.find(u.key); it != patterns.end() && dtype != DType::kInt8)  // int8: unfused
          for (const auto& pattern : it->second) {
            kernels::CaseSpec fused = base;
            fused.problem.post_ops = pattern.post_ops;
            fused.variant.fusion = pattern.name;
            for (auto& c : backend->cases_for(fused, options)) cases.push_back(std::move(c));
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
