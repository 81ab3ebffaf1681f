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
  // Implementations timed per config, data type, math mode and backend (the library's first choice
  // first, then the backend's order); the rest are planned as skipped. 0 = all. The first
  // implementation of each variant (formulation or algorithm family, and layout) is timed beyond
  // the cap (plan_cases). The same for every backend.
  int max_impls = 3;
  // A fused variant plans every candidate (--all-impls), not the first of each variant only.
  bool fused_all = false;
  bool include_reference = false;  // time reference implementations (oneDNN's "ref:", plain loops: slow)
  bool fusion = true;              // plan the fused variants (post-ops) the models contain
  bool conversions = true;         // plan the layout conversions blocked-format implementations need
};

struct PlannedCase {
  kernels::CaseSpec spec;  // spec.name is the case name
  kernels::Work work;
  std::optional<Disposition>
      status;  // nullopt = to be timed; skipped, unsupported (or failed) when planning decided
  std::string reason;
  std::string params = "{}";  // JSON for cases.params: library, impl, formats, proxy notes
  // The candidate's typed facts (kernels::LibraryCase): its variant group, whether it is a
  // reference implementation, the library, and for a conversion case what it converts (the cases
  // it feeds are spec.feeds).
  std::string group;
  bool reference = false;
  bool multi_thread_only = false;  // a _split variant: unsupported at one thread (the plain case)
  std::string library;
  std::optional<LayoutConversion> conversion;
};

// The work of a layout-conversion case of `base`: it reads and writes one activation tensor (the
// layer's largest input that is no weight operand, or its output for a "dst" conversion), and
// computes nothing (bytes > 0 keeps the
// planner from filling in the layer's FLOPs).
kernels::Work conversion_work(const kernels::CaseSpec& base, const LayoutConversion& conversion);

// The family of a layout a conversion writes (LayoutConversion::to, in oneDNN's or the NHWC
// backends' spelling): "blocked" for any channel block (aBcd16b, aBcd8b, aBcde4b: one family, so that
// an AVX2 implementation on an AVX-512 host adds no fused case of its own), "channels_last" (acb,
// acdb, acdeb, nwc, nhwc, ndhwc), else the layout itself.
std::string layout_family(std::string_view layout);

// The planning policy, one for every backend: the planned cases of `base` from the backend's
// candidates (Backend::candidates, in its order). Per math mode:
//  - the library's defaults come first, then the first candidate of every other variant (variant
//    group and layout; reference implementations are no variant's first), then the rest in the
//    backend's order;
//  - every variant's first is timed, and at most options.max_impls candidates in all (0: no cap),
//    the rest are planned as skipped;
//  - reference implementations are skipped unless options.include_reference, or unless they are
//    all there is (every config keeps a measurement);
//  - a fused base (post-ops) plans the first of each variant only, where its variant also names
//    the layout families its operands are converted to (layout_family of the conversions that feed
//    it: a fused convolution reading NHWC and one reading the blocked layout are both timed, so
//    that a replay can keep the layout its producer wrote); every candidate with options.fused_all;
//  - a conversion is planned after the first timed case it feeds, unfused, with
//    options.conversions; each once.
// A candidate whose status the backend set is planned as it is. spec.name is left to make_plan.
std::vector<PlannedCase> plan_cases(const kernels::CaseSpec& base,
                                    const std::vector<kernels::LibraryCase>& candidates,
                                    const PlanOptions& options);

// The case's row for the database (config_id left 0): its identity (spec.id(); upsert_case sets its key
// again from the config), params, the conversion it is and the cases it feeds.
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
  // The fused case's work where it is not the head's (0, 0): attention's, the FLOPs of the chain's
  // layers and the bytes of Q, K, the biases, V and the output (the scores never leave the cache).
  int64_t flops = 0, bytes = 0;
};

// The fused epilogues found in the models (mp::fusion_matches, folded BatchNormalization excepted)
// for each config key, each name once, by name: a Conv/ConvTranspose/Gemm/MatMul whose only
// consumer is an activation (Relu, Clip, Sigmoid, Tanh, HardSwish, HardSigmoid, LeakyRelu, Elu),
// a residual Add of its output's shape (then optionally an activation), or, for MatMul, the Add
// of a bias vector (then optionally an activation), or attention's chain after its scores.
std::map<std::string, std::vector<FusionPattern>> fusion_patterns(const std::vector<mp::ModelIR>& models);

struct Plan {
  std::vector<mp::UniqueConfig> configs;
  std::vector<PlannedCase> cases;
  std::vector<std::string> backends;
};

Plan make_plan(const std::vector<mp::ModelIR>& models, const std::vector<const Backend*>& backends,
               const PlanOptions& options);

}  // namespace floorline::gen
