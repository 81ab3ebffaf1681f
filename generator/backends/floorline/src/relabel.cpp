// transpose@nhwc: a Transpose between NCHW and NHWC whose NCHW side is held channels-last, as a
// runtime that keeps its convolutions' NHWC outputs runs it: the same bytes in the same order, so
// a copy (PyTorch's channels_last permute is a view; a copy is what a runtime that materializes its
// outputs pays).
//
//   perm (0, 2, 3, 1): x [N, C, H, W] held acdb (NHWC)  ->  y [N, H, W, C] plain
//   perm (0, 3, 1, 2): x [N, H, W, C] plain             ->  y [N, C, H, W] held acdb
//
// Why: ConvNeXt's blocks transpose each depthwise convolution's output to NHWC for LayerNorm and the
// MLP, and back after it. oneDNN's reorder runs them as real transposes (the 1x96x56x56 one 85 µs on
// a Zen 4 EPYC core), and the replay converted the depthwise convolutions' NHWC outputs to plain
// before them: 46 transposes and 42 conversions, 4.1 ms of the model's 48.6 at batch 1.
#include <cstring>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

constexpr int64_t kPiece = int64_t{1} << 16;  // floats a thread copies at a time (256 KiB)

class RelabelKernel final : public Kernel {
 public:
  RelabelKernel(Problem p, uint64_t seed, bool to_nhwc)
      : p_(std::move(p)), seed_(seed), to_nhwc_(to_nhwc), n_(elements(p_.inputs[0].shape)), x_(n_), y_(n_) {
    fill_uniform(x_.data(), n_, seed_);
  }

  std::string implementation() const override { return "floorline transpose"; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_;
    // The NCHW side (x going to NHWC, y coming from it) is held channels-last.
    const bool held_nhwc = output != to_nhwc_;
    const Shape& dims = output ? p_.outputs[0].shape : p_.inputs[0].shape;
    return Port{t.data(), t.bytes(), held_nhwc ? channels_last_layout(dims) : std::string("plain")};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_).bind(data);
    return {};
  }

  void run() override {
    for_rows((n_ + kPiece - 1) / kPiece, [this](int64_t r) {
      const int64_t lo = r * kPiece, hi = std::min(n_, lo + kPiece);
      std::memcpy(y_.data() + lo, x_.data() + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    });
  }

  Status verify() override {
    // x's values in NCHW order held as its port says; y read back as its port says.
    const Shape& xs = p_.inputs[0].shape;
    HostTensor plain;
    plain.shape = xs;
    plain.data.resize(static_cast<size_t>(n_));
    fill_uniform(plain.data.data(), n_, seed_ + 101);
    if (to_nhwc_)
      hold_nchw(plain.data.data(), kNhwc, xs, x_.data());
    else
      std::copy(plain.data.begin(), plain.data.end(), x_.begin());
    y_.fill(std::numeric_limits<float>::quiet_NaN());
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, {plain}, {}));
    if (ref.size() != 1) return make_error("the reference gave {} outputs, not 1", ref.size());
    const Shape& ys = p_.outputs[0].shape;
    std::vector<float> got(static_cast<size_t>(n_));
    if (to_nhwc_)
      std::copy(y_.begin(), y_.end(), got.begin());
    else
      unhold_nchw(y_.data(), kNhwc, ys, got.data());
    return compare_output(got.data(), ref[0], verify_tolerance(p_));
  }

 private:
  Problem p_;
  uint64_t seed_;
  bool to_nhwc_;
  int64_t n_;
  Placed<float> x_, y_;
};

}  // namespace

std::optional<bool> nhwc_relabel(const Problem& p) {
  if (p.kind != LayerKind::kTranspose || p.inputs.empty() || p.outputs.size() != 1) return std::nullopt;
  const Shape& x = p.inputs[0].shape;
  const Shape& y = p.outputs[0].shape;
  if (x.size() != 4 || y.size() != 4) return std::nullopt;
  if (std::any_of(x.begin(), x.end(), [](int64_t d) { return d <= 0; })) return std::nullopt;
  const auto perm = p.ints_attr("perm");
  bool to_nhwc = false;
  if (perm == std::vector<int64_t>{0, 2, 3, 1} && y == Shape{x[0], x[2], x[3], x[1]})
    to_nhwc = true;
  else if (!(perm == std::vector<int64_t>{0, 3, 1, 2} && y == Shape{x[0], x[3], x[1], x[2]}))
    return std::nullopt;
  // The NCHW side's pixels: without them channels-last is the plain order (copy_runs's business).
  const Shape& nchw = to_nhwc ? x : y;
  if (nchw[2] * nchw[3] == 1) return std::nullopt;
  return to_nhwc;
}

std::unique_ptr<Kernel> make_relabel_kernel(const Problem& p, uint64_t seed, bool check_only) {
  const auto to_nhwc = nhwc_relabel(p);
  if (!to_nhwc) unsupported("transpose@nhwc: a 4-D Transpose by perm 0,2,3,1 or 0,3,1,2 with pixels only");
  if (elements(p.inputs[0].shape) > (int64_t{1} << 34))
    unsupported("transpose@nhwc: the tensor is too large");
  if (check_only) return nullptr;
  return std::make_unique<RelabelKernel>(p, seed, *to_nhwc);
}

}  // namespace floorline::kernels::floorline_detail
