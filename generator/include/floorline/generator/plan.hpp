// floorline/generator/plan.hpp — the plan: unique layer configurations × backend × every
// implementation × data type, plus the fused variants and layout conversions the models need.
//
// A case's name (case_name(spec.id()), common/case_id.hpp) contains the canonical key, so it is recognizable in any
// output and re-runnable alone (`floorline bench ... --case NAME`); its uid is a hash of the name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/kernels/problem.hpp"
#include "floorline/model_processor/model.hpp"
#include "floorline/model_processor/zoo.hpp"

namespace floorline::gen {

struct PlanOptions {
  std::vector<DType> dtypes = {DType::kF32};
  // Implementations timed per config, data type and backend (oneDNN's first choice first, then
  // next_impl() order); the rest are planned as skipped. 0 = all.
  int max_impls = 3;
  bool include_reference = false;  // time "ref:" implementations too (plain loops: slow)
  bool fusion = true;              // plan the fused variants (post-ops) the models contain
  bool conversions = true;         // plan the layout conversions blocked-format implementations need
};

struct PlannedCase {
  kernels::CaseSpec spec;          // spec.name is the case name
  kernels::Work work;
  std::optional<Disposition> status;  // nullopt = to be timed; skipped, unsupported (or failed) when planning decided
  std::string reason;
  std::string params = "{}";       // JSON for cases.params: impl, formats, conversions, proxy notes
};

// The work of a layout-conversion case of `base` (layout "src:<from>><to>" or "dst:..."): it reads
// and writes one activation tensor (the layer's input, or its output for "dst:"), and computes
// nothing (bytes > 0 keeps the planner from filling in the layer's FLOPs).
kernels::Work conversion_work(const kernels::CaseSpec& base, const std::string& conversion);

// The case's row for the database (config_id left 0): its identity (spec.id() less the key) and params.
benchdb::CaseRow case_row(const PlannedCase& c);

// Converts a layer configuration to the kernel library's Problem (attributes typed, roles kept).
kernels::Problem to_problem(const mp::LayerConfig& config, const std::string& key);

// One fusable chain in a model: the head layer and the layers its epilogue replaces (see
// fusion_patterns for the chains recognized), and Conv → BatchNormalization, which needs no fused
// case: inference batch normalization folds into the conv's weights and bias (`folded`).
struct FusionMatch {
  int head = 0;                          // Layer::index of the Conv/ConvTranspose/Gemm/MatMul
  std::vector<int> absorbed;             // Layer::index of the layers the epilogue replaces, in order
  std::vector<kernels::PostOp> post_ops;
  std::string name;                      // fusion_name(post_ops): the fused case's `fusion`
  bool folded = false;                   // Conv+BatchNormalization: no post-ops, no fused case
};
std::vector<FusionMatch> fusion_matches(const mp::ModelIR& model);

// The fused epilogues found in the models for each config key: a Conv/ConvTranspose/Gemm/MatMul
// whose only consumer is an activation (Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid,
// LeakyRelu, Elu), a residual Add of its output's shape (then optionally an activation), or, for
// MatMul, the Add of a bias vector (then optionally an activation).
std::map<std::string, std::vector<std::vector<kernels::PostOp>>> fusion_patterns(const std::vector<mp::ModelIR>& models);

// "Relu", "Add+Relu", "Clip(0,6)", "BiasAdd+Erf"...
std::string fusion_name(const std::vector<kernels::PostOp>& post_ops);

struct Plan {
  std::vector<mp::UniqueConfig> configs;
  std::vector<PlannedCase> cases;
  std::vector<std::string> backends;
};

Plan make_plan(const std::vector<mp::ModelIR>& models, const std::vector<const Backend*>& backends,
               const PlanOptions& options);

}  // namespace floorline::gen
