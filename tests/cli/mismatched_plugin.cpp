// A backend plugin built with another Floorline version in its ABI tag (tests/cli/system.cmake):
// the registry must refuse it, saying what it was built for, without calling create().
#undef FLOORLINE_VERSION
#define FLOORLINE_VERSION "0.0.0-mismatched"
#include "floorline/generator/plugin.hpp"

namespace {

class MismatchedBackend final : public floorline::gen::Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string device_kind() const override { return "gpu"; }
  floorline::Status available() const override { return {}; }
  void describe(floorline::benchdb::SystemRow&) const override {}
  floorline::kernels::KindSupport support(floorline::LayerKind) const override { return {}; }
  std::vector<floorline::kernels::LibraryCase> candidates(
      const floorline::kernels::CaseSpec&) const override {
    return {};
  }
  floorline::kernels::KernelFactory factory() const override { return {}; }
  void set_threads(int) const override {}
  std::string generated_header() const override { return ""; }
  std::string generated_register_function() const override { return ""; }
  std::string generated_cmake_target() const override { return ""; }
};

}  // namespace

FLOORLINE_BACKEND_ENTRY_POINT(MismatchedBackend)
