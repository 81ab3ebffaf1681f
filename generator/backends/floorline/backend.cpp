// The floorline backend: Floorline's own CPU kernels (floorline/kernels/floorline.hpp), one case
// per layer its kind table maps. Registered in generator/src/registry.cpp; built, always (it needs
// no vendor library), as the plugin libfloorline-backend-floorline.so (floorline/generator/plugin.hpp).
#include <algorithm>

#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"
#include "floorline/kernels/floorline.hpp"

namespace floorline::gen {
namespace {

class FloorlineBackend final : public Backend {
 public:
  std::string name() const override { return "floorline"; }
  std::string device_kind() const override { return "cpu"; }
  Status available() const override { return {}; }  // the CPU is always there

  void describe(benchdb::SystemRow& row) const override {
    row.libraries["floorline"] = kernels::floorline_version();
    row.threads = kernels::floorline_threads();
  }

  kernels::KindSupport support(LayerKind kind) const override { return kernels::floorline_support(kind); }
  // One candidate: the kernel floorline_kernel_name() names, where it builds for these shapes and
  // this data type (unsupported, with the kernel's reason, where it does not). A 4-D Concat along
  // the channels has a second (third) one on oneDNN's blocked layout, concat@blocked16c (concat@blocked8c):
  // the same copies where every input's channels are a multiple of the block, lanes moved where not
  // (channels.cpp), where a oneDNN-aware runtime keeps the convolutions' blocked outputs (DenseNet's, whose
  // 32-channel growth would otherwise convert every input; ShuffleNet's 58 and 116); each its own group, so
  // each is timed whatever the cap. A 4-D GlobalAveragePool and a MatMulNBits have more too (below).
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    const std::string name = kernels::floorline_kernel_name(base.problem);
    std::vector<std::string> algorithms = {name.empty() ? "none" : name};
    const auto& p = base.problem;
    if (name == "concat" && !p.outputs.empty() && p.outputs[0].shape.size() == 4) {
      const int64_t axis = p.int_attr("axis");
      if (axis == 1 || axis == -3) {
        for (const int block : {16, 8}) algorithms.push_back(fmt::format("concat@blocked{}c", block));
        algorithms.push_back("concat@nhwc");
      }
    }
    // Slice, Split and the channel shuffle (a Transpose) of whole channels: on the blocked layouts
    // too (channels.cpp), where a oneDNN-aware runtime keeps ShuffleNet's blocked convolution outputs
    // through the shuffle and the split after it; and channels-last, where XNNPACK's NHWC
    // convolutions are the fastest (ShuffleNet's 1×1s on AVX-512).
    if (name == "slice" || name == "split" || name == "channel_shuffle") {
      for (const int block : {16, 8}) algorithms.push_back(fmt::format("{}@blocked{}c", name, block));
      algorithms.push_back(name + "@nhwc");
    }
    // Pad of H and W of a 4-D tensor: on the blocked layouts and channels-last too (pad.cpp), where a
    // runtime pads a convolution's blocked or NHWC output in place (Inception-v3's Pad before each
    // AveragePool); the check marks it unsupported where the batch or the channels are padded.
    if (name == "pad" && !p.inputs.empty() && p.inputs[0].shape.size() == 4) {
      for (const int block : {16, 8}) algorithms.push_back(fmt::format("pad@blocked{}c", block));
      algorithms.push_back("pad@nhwc");
    }
    // A Transpose between NCHW and NHWC: its NCHW side held channels-last, a copy (relabel.cpp), as
    // a runtime that keeps a convolution's NHWC output runs ConvNeXt's transposes around LayerNorm.
    // Planned only where it applies.
    if (p.kind == LayerKind::kTranspose && p.inputs.size() == 1 && p.inputs[0].shape.size() == 4) {
      kernels::CaseSpec probe = base;
      probe.variant.algorithm = "transpose@nhwc";
      if (kernels::check_floorline_case(probe).ok()) algorithms.push_back("transpose@nhwc");
    }
    // GlobalAveragePool of a 4-D input: on the blocked layouts and channels-last too (blocked.cpp),
    // where a runtime pools a convolution's blocked or NHWC output in place (an SE block's squeeze).
    if (name == "global_average_pool" && !p.inputs.empty() && p.inputs[0].shape.size() == 4) {
      for (const int block : {16, 8})
        algorithms.push_back(fmt::format("global_average_pool@blocked{}c", block));
      algorithms.push_back("global_average_pool@nhwc");
    }
    // Add, Sub, Mul, Div of a 4-D output with pixels whose inputs are its shape or per channel
    // (blocked.cpp): the same on the blocked layouts and channels-last, where an SE block's scale
    // multiplies a convolution's blocked or NHWC output.
    if (name == "binary" && p.inputs.size() == 2 && !p.outputs.empty() && p.outputs[0].shape.size() == 4) {
      const auto& y = p.outputs[0].shape;
      const bool fits = std::all_of(p.inputs.begin(), p.inputs.end(), [&](const kernels::Operand& in) {
        return in.shape == y ||
               (in.shape.size() == 4 && in.shape[1] == y[1] && in.shape[2] == 1 && in.shape[3] == 1);
      });
      if (y[2] * y[3] > 1 && fits) {
        for (const int block : {16, 8}) algorithms.push_back(fmt::format("binary@blocked{}c", block));
        algorithms.push_back("binary@nhwc");
      }
    }
    // MatMulNBits: beside the 4-bit kernel, its weights dequantized once at load into an f32 copy
    // (matmul_nbits@f32_weights), as a runtime that folds a weight's DequantizeLinear holds them:
    // the faster way for a compute-bound prefill.
    if (name == "matmul_nbits") algorithms.push_back("matmul_nbits@f32_weights");
    // A 3x3 Conv: Winograd F(2x2, 3x3) beside F(4x4, 3x3) (winograd.cpp): smaller transforms and
    // transformed weights against more multiplies; which is faster depends on the map's size and the
    // channels. Planned only where the kernel runs the convolution (one unsupported row per config).
    if (name == "winograd_f4x4_3x3") {
      kernels::CaseSpec probe = base;
      probe.variant.algorithm = name;
      if (kernels::check_floorline_case(probe).ok()) algorithms.push_back("winograd_f2x2_3x3");
      // A convolution whose taps read padding for many outputs (DeepLabV3's dilated ASPP): the sum
      // of its taps over their valid regions (taps.cpp). Planned only where it applies.
      probe.variant.algorithm = "conv_valid_taps";
      if (kernels::check_floorline_case(probe).ok()) algorithms.push_back("conv_valid_taps");
    }
    std::vector<kernels::LibraryCase> out;
    for (const auto& algorithm : algorithms) {
      kernels::LibraryCase c;
      c.variant = base.variant;
      c.variant.math_mode = MathMode::kFp32;
      c.variant.algorithm = algorithm;
      c.group = c.variant.algorithm;
      c.library = "floorline";
      c.is_default = out.empty();
      kernels::CaseSpec probe = base;
      probe.variant = c.variant;
      if (name.empty() && algorithm == "none") {
        c.status = Disposition::kUnsupported;
        c.reason = fmt::format("{}: no kernel of Floorline's for this layer", base.problem.op);
      } else if (const Status k = kernels::check_floorline_case(probe); !k.ok()) {
        c.status =
            k.error().code == Disposition::kUnsupported ? Disposition::kUnsupported : Disposition::kFailed;
        c.reason = k.error().message;
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  kernels::KernelFactory factory() const override { return kernels::make_floorline_kernel; }
  // Plain ↔ oneDNN's aBcd8b/aBcd16b, between any two cases' ports (the replay asks every backend of
  // the run and runs the fastest conversion).
  Result<std::unique_ptr<kernels::Kernel>> conversion(const kernels::PortRef& from,
                                                      const kernels::PortRef& to) const override {
    return kernels::make_floorline_conversion(from, to);
  }
  void set_threads(int threads) const override { kernels::set_floorline_threads(threads); }
  void flush_denormals(bool flush, int threads) const override {
    kernels::flush_floorline_denormals(flush, threads);
  }
  void on_threads(int threads, const std::function<void(int, int)>& work) const override {
    kernels::on_floorline_threads(threads, work);
  }
  std::string generated_header() const override { return "floorline/kernels/floorline.hpp"; }
  std::string generated_register_function() const override {
    return "floorline::kernels::register_floorline_case";
  }
  std::string generated_cmake_target() const override { return "floorline::floorline_kernels"; }
};

}  // namespace
}  // namespace floorline::gen

FLOORLINE_BACKEND_ENTRY_POINT(floorline::gen::FloorlineBackend)
