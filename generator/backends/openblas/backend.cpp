// The OpenBLAS backend: Gemm and MatMul as cblas_sgemm (one GEMM or a loop), Conv as im2col +
// cblas_sgemm, all NCHW/row-major. Registered in generator/src/registry.cpp; built as the plugin
// libfloorline-backend-openblas.so.

#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"
#include "floorline/kernels/openblas.hpp"

namespace floorline::gen {
namespace {

class OpenblasBackend final : public Backend {
 public:
  std::string name() const override { return "openblas"; }
  std::string device_kind() const override { return "cpu"; }
  Status available() const override { return {}; }  // the CPU is always there

  void describe(benchdb::SystemRow& row) const override {
    row.libraries["openblas"] = kernels::openblas_version();
    if (!row.cpu_flags.empty()) row.cpu_flags += " ";
    row.cpu_flags += "openblas_core=" + kernels::openblas_core();
  }

  kernels::KindSupport support(LayerKind kind) const override { return kernels::openblas_support(kind); }
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    return kernels::openblas_cases(base);
  }

  kernels::KernelFactory factory() const override { return kernels::make_openblas_kernel; }
  void set_threads(int threads) const override { kernels::set_openblas_threads(threads); }
  std::string generated_header() const override { return "floorline/kernels/openblas.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_openblas_case";
  }
  std::string generated_cmake_target() const override { return "floorline::openblas_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::OpenblasBackend)
