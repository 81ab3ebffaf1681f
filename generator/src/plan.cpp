// The planner: unique configs × backends × data types → cases (backend enumerates implementations).
#include "floorline/generator/plan.hpp"

#include <set>

#include "floorline/benchdb/schema.hpp"

namespace floorline::gen {

namespace {

std::string math_mode_for(const std::string& dtype) { return dtype == "f32" ? "fp32" : dtype; }

int64_t scaled_bytes(int64_t bytes, const std::string& dtype) {
  if (bytes <= 0) return bytes;
  return dtype == "bf16" || dtype == "f16" ? bytes / 2 : bytes;
}

// The one case of a kind the backend's kind table does not map: its reason is the table's.
PlannedCase unmapped_case(const kernels::CaseSpec& base, const kernels::KindSupport& support) {
  PlannedCase pc;
  pc.spec = base;
  pc.spec.algorithm = "none";
  pc.status = "unsupported";
  pc.reason = fmt::format("{}: {}", base.problem.op, support.reason);
  return pc;
}

}  // namespace

kernels::Work conversion_work(const kernels::CaseSpec& base, const std::string& conversion) {
  const auto& shape = conversion.rfind("dst", 0) == 0 ? base.problem.outputs.at(0).shape : base.problem.inputs.at(0).shape;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  kernels::Work w;
  w.bytes = 2 * n * (base.dtype == "f32" ? 4 : 2);
  w.flops = 0;
  return w;
}

benchdb::CaseRow case_row(const PlannedCase& c) {
  benchdb::CaseRow row;
  row.backend = c.spec.backend;
  row.algorithm = c.spec.algorithm;
  row.dtype = c.spec.dtype;
  row.math_mode = c.spec.math_mode;
  row.layout = c.spec.layout;
  row.fusion = c.spec.fusion;
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
    for (const auto* backend : backends)
      for (const auto& dtype : options.dtypes) {
        kernels::CaseSpec base;
        base.problem = problem;
        base.backend = backend->name();
        base.dtype = dtype;
        base.math_mode = math_mode_for(dtype);
        const kernels::KindSupport support = backend->support(problem.kind);
        if (!support.supported()) {
          PlannedCase pc = unmapped_case(base, support);
          pc.spec.name = benchdb::case_name(case_row(pc), u.key);
          pc.work.flops = u.flops;
          pc.work.bytes = scaled_bytes(u.bytes, dtype);
          plan.cases.push_back(std::move(pc));
          continue;
        }
        std::vector<PlannedCase> cases = backend->cases_for(base, options);
        if (auto it = patterns.find(u.key); it != patterns.end())
          for (const auto& ops : it->second) {
            kernels::CaseSpec fused = base;
            fused.problem.post_ops = ops;
            fused.fusion = fusion_name(ops);
            for (auto& c : backend->cases_for(fused, options)) cases.push_back(std::move(c));
          }
        std::set<std::string> names;
        for (auto& c : cases) {
          c.spec.name = benchdb::case_name(case_row(c), u.key);
          if (!names.insert(c.spec.name).second) continue;  // e.g. one conversion feeding two implementations
          if (c.work.flops == 0 && c.work.bytes == 0) {
            c.work.flops = u.flops;
            c.work.bytes = scaled_bytes(u.bytes, dtype);
          }
          plan.cases.push_back(std::move(c));
        }
      }
  }
  return plan;
}

}  // namespace floorline::gen
