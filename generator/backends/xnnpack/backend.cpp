// The XNNPACK backend: one case per configuration (XNNPACK picks its micro-kernels itself), NHWC
// convolution and pooling with their layout conversions, built with the XNNPACK kernel library.
// Registered in generator/src/registry.cpp; built as the plugin libfloorline-backend-xnnpack.so.

#include "floorline/generator/backend.hpp"
#include "floorline/common/isa.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"
#include "floorline/kernels/xnnpack.hpp"

namespace floorline::gen {
namespace {

class XnnpackBackend final : public Backend {
 public:
  std::string name() const override { return "xnnpack"; }
  std::string device_kind() const override { return "cpu"; }
  Status available() const override {
    if (const auto cap = isa_cap())
      return make_error(
          "XNNPACK picks its kernels from the CPU's features and cannot be capped at {}={}: left out of "
          "this system",
          kIsaCapVariable, isa_name(*cap));
    return kernels::xnnpack_initialize();
  }

  void describe(benchdb::SystemRow& row) const override {
    row.libraries["xnnpack"] = kernels::xnnpack_version();
  }

  kernels::KindSupport support(LayerKind kind) const override { return kernels::xnnpack_support(kind); }
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    return kernels::xnnpack_cases(base);
  }

  kernels::KernelFactory factory() const override { return kernels::make_xnnpack_kernel; }
  Result<std::unique_ptr<kernels::Kernel>> conversion(const kernels::PortRef& from,
                                                      const kernels::PortRef& to) const override {
    return kernels::make_xnnpack_conversion(from, to);
  }
  void set_threads(int threads) const override { kernels::set_xnnpack_threads(threads); }
  void flush_denormals(bool flush, int threads) const override {
    kernels::flush_xnnpack_denormals(flush, threads);
  }
  void on_threads(int threads, const std::function<void(int, int)>& work) const override {
    kernels::on_xnnpack_threads(threads, work);
  }
  void park_threads() const override { kernels::park_xnnpack_threads(); }
  std::string generated_header() const override { return "floorline/kernels/xnnpack.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_xnnpack_case";
  }
  std::string generated_cmake_target() const override { return "floorline::xnnpack_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::XnnpackBackend)
