// The oneDNN backend: plans every implementation oneDNN offers, builds kernels with the oneDNN
// kernel library. Registered in generator/src/registry.cpp;
// built as the plugin libfloorline-backend-onednn.so (floorline/generator/plugin.hpp).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"
#include "floorline/kernels/onednn.hpp"

namespace floorline::gen {
namespace {

class OnednnBackend final : public Backend {
 public:
  std::string name() const override { return "onednn"; }
  std::string device_kind() const override { return "cpu"; }
  Status available() const override { return {}; }  // the CPU is always there

  void describe(benchdb::SystemRow& row) const override {
    row.libraries["onednn"] = kernels::onednn_version();
    row.threads = kernels::onednn_threads();
    if (!row.cpu_flags.empty()) row.cpu_flags += " ";
    row.cpu_flags += "onednn_isa=" + kernels::onednn_isa();
  }

  kernels::KindSupport support(LayerKind kind) const override { return kernels::onednn_support(kind); }
  std::vector<PlannedCase> cases_for(const kernels::CaseSpec& base,
                                     const PlanOptions& options) const override {
    std::vector<PlannedCase> out;
    auto impls = kernels::onednn_implementations(base);
    if (!impls) {
      PlannedCase pc;
      pc.spec = base;
      pc.spec.variant.algorithm = "none";
      pc.status =
          impls.error().code == Disposition::kUnsupported ? Disposition::kUnsupported : Disposition::kFailed;
      pc.reason = impls.error().message;
      out.push_back(std::move(pc));
      return out;
    }
    // oneDNN's first choice first, then the first implementation of every other variant (each
    // formulation and activation layout: a 1x1 convolution as a matmul, pooling on the blocked
    // layout), then the rest in next_impl() order. Every variant's first is timed whatever the
    // --max-impls cap: a formulation left untimed can leave S above what a runtime achieves.
    auto variant_of = [](const kernels::Implementation& im) {
      return im.algorithm.substr(0, im.algorithm.find(':'));
    };
    std::vector<kernels::Implementation> ordered;
    std::vector<bool> first_of_variant;
    std::vector<std::string> seen;
    for (const auto& im : *impls)
      if (im.is_default) {
        ordered.push_back(im);
        first_of_variant.push_back(true);
        seen.push_back(variant_of(im));
      }
    for (const auto& im : *impls)
      if (!im.is_default && !im.reference &&
          std::find(seen.begin(), seen.end(), variant_of(im)) == seen.end()) {
        ordered.push_back(im);
        first_of_variant.push_back(true);
        seen.push_back(variant_of(im));
      }
    for (const auto& im : *impls)
      if (std::none_of(ordered.begin(), ordered.end(), [&](const kernels::Implementation& o) {
            return o.algorithm == im.algorithm && o.impl_index == im.impl_index;
          })) {
        ordered.push_back(im);
        first_of_variant.push_back(false);
      }
    const bool fused = !base.problem.post_ops.empty();
    // A reference implementation is skipped only where a real one exists: a config that only the
    // reference implements is still timed, so that every config has a measurement.
    const bool only_reference = std::all_of(ordered.begin(), ordered.end(),
                                            [](const kernels::Implementation& im) { return im.reference; });
    int timed = 0;
    for (size_t i = 0; i < ordered.size(); ++i) {
      // A fused variant is timed with the first implementation of each algorithm only.
      if (fused && !first_of_variant[i]) continue;
      const auto& im = ordered[i];
      PlannedCase pc;
      pc.spec = base;
      pc.spec.variant.algorithm = im.algorithm;
      pc.spec.impl_index = im.impl_index;
      pc.spec.impl_name = im.impl_name;
      pc.work.is_default = im.is_default;
      nlohmann::json params = {{"impl_index", im.impl_index}, {"impl_name", im.impl_name}};
      if (!im.layout.empty()) params["formats"] = im.layout;
      if (!im.conversions.empty()) params["conversions"] = im.conversions;
      if (im.reference && !options.include_reference && !only_reference) {
        pc.status = Disposition::kSkipped;
        pc.reason = "reference implementation (plain loops); --include-ref times it";
      } else if (options.max_impls > 0 && timed >= options.max_impls && !first_of_variant[i]) {
        pc.status = Disposition::kSkipped;
        pc.reason = fmt::format("beyond --max-impls {}; --all-impls times it", options.max_impls);
      } else {
        ++timed;
      }
      pc.params = params.dump();
      const bool timed_case = !pc.status;
      out.push_back(pc);
      if (timed_case && options.conversions && !fused)
        for (const auto& conv : im.conversions) {
          PlannedCase cc;
          cc.spec = base;
          cc.spec.variant.algorithm = "reorder";
          cc.spec.variant.layout = conv;
          cc.spec.feeds = im.algorithm;
          cc.spec.impl_index = im.impl_index;
          cc.spec.impl_name = im.impl_name;
          cc.params = nlohmann::json{{"feeds", im.algorithm}, {"conversion", conv}}.dump();
          cc.work = conversion_work(base, conv);
          out.push_back(std::move(cc));
        }
    }
    return out;
  }

  kernels::KernelFactory factory() const override { return kernels::make_onednn_kernel; }
  Result<std::unique_ptr<kernels::Kernel>> conversion(const kernels::PortRef& from,
                                                      const kernels::PortRef& to) const override {
    return kernels::make_onednn_conversion(from, to);
  }
  void set_threads(int threads) const override { kernels::set_onednn_threads(threads); }
  std::string generated_header() const override { return "floorline/kernels/onednn.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_onednn_case";
  }
  std::string generated_cmake_target() const override { return "floorline::onednn_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::OnednnBackend)
