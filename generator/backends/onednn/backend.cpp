// The oneDNN backend: plans every implementation oneDNN offers, builds kernels with the oneDNN
// kernel library. Registered in generator/src/registry.cpp;
// built as the plugin libfloorline-backend-onednn.so (floorline/generator/plugin.hpp).
#include "floorline/generator/backend.hpp"
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
  // Every implementation oneDNN offers, in its order (its first choice marked), each followed by
  // the activation reorders it needs (feeding that implementation: its formats are the ones the
  // reorder produces).
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    auto impls = kernels::onednn_implementations(base);
    if (!impls) {
      kernels::LibraryCase c = kernels::unsupported_case(base, base.variant.math_mode, impls.error().message);
      if (impls.error().code != Disposition::kUnsupported) c.status = Disposition::kFailed;
      return {c};
    }
    std::vector<kernels::LibraryCase> out;
    for (const auto& im : *impls) {
      kernels::LibraryCase c;
      c.variant = base.variant;
      c.variant.algorithm = im.algorithm;
      c.group = im.variant;
      c.reference = im.reference;
      c.library = "onednn";
      c.is_default = im.is_default;
      c.multi_thread_only = im.variant.ends_with("_split");
      c.impl_index = im.impl_index;
      c.impl_name = im.impl_name;
      c.formats = im.layout;
      out.push_back(c);
      for (const auto& conv : im.conversions) {
        kernels::LibraryCase cc = kernels::conversion_case(base, "reorder", base.variant.math_mode, conv,
                                                           CaseFeeds{im.algorithm, ""}, "onednn");
        cc.impl_index = im.impl_index;
        cc.impl_name = im.impl_name;
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
  void flush_denormals(bool flush, int threads) const override {
    kernels::flush_onednn_denormals(flush, threads);
  }
  void on_threads(int threads, const std::function<void(int, int)>& work) const override {
    kernels::on_onednn_threads(threads, work);
  }
  std::string generated_header() const override { return "floorline/kernels/onednn.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_onednn_case";
  }
  std::string generated_cmake_target() const override { return "floorline::onednn_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::OnednnBackend)
