// The CUDA backend: plans every cuDNN algorithm, cuBLAS/cuBLASLt call and Floorline kernel for a
// problem (kernels::cuda_cases, no device needed) and builds kernels with the CUDA kernel library.
// Registered in generator/src/registry.cpp;
// built as the plugin libfloorline-backend-cuda.so (floorline/generator/plugin.hpp).

#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"
#include "floorline/kernels/cuda.hpp"

namespace floorline::gen {
namespace {

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string device_kind() const override { return "gpu"; }
  Status available() const override { return kernels::cuda_available(); }

  void describe(benchdb::SystemRow& row) const override {
    const kernels::CudaDeviceInfo d = kernels::cuda_device_info();
    row.device_kind = "gpu";
    if (!d.name.empty()) row.device_name = d.name;
    row.compute_capability = d.compute_capability;
    row.compute_units = d.sm_count;
    row.clock_mhz = d.clock_mhz;
    row.memory_bytes = d.memory_bytes;
    row.memory_clock_mhz = d.memory_clock_mhz;
    row.memory_bus_bits = d.memory_bus_bits;
    row.driver_version = d.driver_version;
    row.libraries["cuda_runtime"] = d.runtime_version;
    row.libraries["cudnn"] = d.cudnn_version;
    row.libraries["cublas"] = d.cublas_version;
  }

  std::function<double()> sentinel() const override { return kernels::cuda_sentinel_seconds; }
  std::string device_uuid() const override { return kernels::cuda_device_info().uuid; }

  kernels::KindSupport support(LayerKind kind) const override { return kernels::cuda_support(kind); }
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    return kernels::cuda_cases(base);
  }

  kernels::KernelFactory factory() const override { return kernels::make_cuda_kernel; }
  void set_threads(int) const override {}
  Status set_cold_cache(bool cold) const override {
    kernels::set_cuda_cold_cache(cold);
    return {};
  }
  int64_t cold_cache_bytes() const override { return kernels::cuda_cold_cache_bytes(); }
  std::string generated_header() const override { return "floorline/kernels/cuda.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_cuda_case";
  }
  std::string generated_cmake_target() const override { return "floorline::cuda_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::CudaBackend)
