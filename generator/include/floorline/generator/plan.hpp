// floorline/generator/plan.hpp — the plan: unique layer configurations × backend × every
// implementation × data type, plus the fused variants and layout conversions the models need.
//
// A case's name (case_name(spec.id()), common/case_id.hpp) contains the canonical key, so it is recognizable
// in any output and re-runnable alone (`floorline bench ... --case NAME`); its uid is a hash of the name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/kernels/kernel.hpp"
#include "floorline/kernels/problem.hpp"
#include "floorline/model_processor/model.hpp"
#include "floorline/model_processor/patterns.hpp"
#include "floorline/model_processor/zoo.hpp"

namespace floorline::gen {

struct PlanOptions {
  std::vector<DType> dtypes = {DType::kF32};
  // Implementations timed per config, data type and backend (oneDNN's first choice first, then
  // next_impl() order); the rest are planned as skipped. 0 = all. A backend whose configurations
  // have several algorithms or layouts (variants) times the first implementation of each beyond
  // the cap (the oneDNN backend does).
  int max_impls = 3;
  bool include_reference = false;  // time "ref:" implementations too (plain loops: slow)
  bool fusion = true;              // plan the fused variants (post-ops) the models contain
  bool conversions = true;         // plan the layout conversions blocked-format implementations need
};

struct PlannedCase {
  kernels::CaseSpec spec;  // spec.name is the case name
  kernels::Work work;
  std::optional<Disposition>
      status;  // nullopt = to be timed; skipped, unsupported (or failed) when planning decided
  std::string reason;
  std::string params = "{}";  // JSON for cases.params: impl, formats, conversions, proxy notes
};

// The work of a layout-conversion case of `base` (layout "src:<from>><to>" or "dst:..."): it reads
// and writes one activation tensor (the layer's input, or its output for "dst:"), and computes
// nothing (bytes > 0 keeps the planner from filling in the layer's FLOPs). Inline: the backend
// plugins call it and link no generator code.
inline kernels::Work conversion_work(const kernels::CaseSpec& base, const std::string& conversion) {
  const auto& shape =
      conversion.rfind("dst", 0) == 0 ? base.problem.outputs.at(0).shape : base.problem.inputs.at(0).shape;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  kernels::Work w;
  w.bytes = 2 * n * element_size(base.variant.dtype);
  w.flops = 0;
  return w;
}

// The planned cases of a kernel library's list for `base` (a library backend's cases_for): each
// LibraryCase's variant, feeds, default flag and disposition on a copy of `base`. Layout
// conversions are left out when options.conversions is off, and carry conversion_work(). params
// names the library: "floorline" for conversions and for kernels of ours (is_own_kernel,
// common/case_id.hpp), `library` otherwise (left out when empty), and the feeds of a
// conversion. Inline: the backend plugins call it and link no generator code.
inline std::vector<PlannedCase> planned_cases(const kernels::CaseSpec& base, const PlanOptions& options,
                                              const std::vector<kernels::LibraryCase>& cases,
                                              const std::string& library) {
  std::vector<PlannedCase> out;
  out.reserve(cases.size());
  for (const auto& c : cases) {
    const bool conversion = c.variant.layout.find('>') != std::string::npos;
    if (conversion && !options.conversions) continue;
    PlannedCase pc;
    pc.spec = base;
    pc.spec.variant = c.variant;
    pc.spec.feeds = c.feeds;
    pc.work.is_default = c.is_default;
    if (conversion) pc.work = conversion_work(base, c.variant.layout);
    pc.status = c.status;
    pc.reason = c.reason;
    nlohmann::json params = nlohmann::json::object();
    if (conversion || is_own_kernel(c.variant))
      params["library"] = std::string(kOwnBackend);
    else if (!library.empty())
      params["library"] = library;
    if (!c.feeds.empty()) params["feeds"] = c.feeds;
    pc.params = params.dump();
    out.push_back(std::move(pc));
  }
  return out;
}

// The case's row for the database (config_id left 0): its identity (spec.id(); upsert_case sets its key
// again from the config) and params.
benchdb::CaseRow case_row(const PlannedCase& c);

// Converts a layer configuration to the kernel library's Problem (attributes typed, roles kept).
kernels::Problem to_problem(const mp::LayerConfig& config, const std::string& key);

// The kernel library's post-op for an epilogue op of the IR's fusion patterns
// (model_processor/patterns.hpp): the same op name and parameters.
kernels::PostOp to_post_op(const mp::Epilogue& epilogue);

// A fused variant of a config: its case's `fusion` (mp::fusion_name, the name the analyzer looks
// up) and the post-ops the kernels run.
struct FusionPattern {
  std::string name;  // "Relu", "Add+Relu", "Clip(0,6)"...
  std::vector<kernels::PostOp> post_ops;
};

// The fused epilogues found in the models (mp::fusion_matches, folded BatchNormalization excepted)
// for each config key, each name once, by name: a Conv/ConvTranspose/Gemm/MatMul whose only
// consumer is an activation (Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu, Elu),
// a residual Add of its output's shape (then optionally an activation), or, for MatMul, the Add
// of a bias vector (then optionally an activation).
std::map<std::string, std::vector<FusionPattern>> fusion_patterns(const std::vector<mp::ModelIR>& models);

struct Plan {
  std::vector<mp::UniqueConfig> configs;
  std::vector<PlannedCase> cases;
  std::vector<std::string> backends;
};

Plan make_plan(const std::vector<mp::ModelIR>& models, const std::vector<const Backend*>& backends,
               const PlanOptions& options);

}  // namespace floorline::gen
