// Pad (mode constant, non-negative pads) on the plain layout and on the layouts oneDNN's
// convolutions write: pad, pad@blocked16c, pad@blocked8c, pad@nhwc.
//
// Why: a runtime that keeps its convolutions' blocked or NHWC outputs pads them in place. With
// oneDNN's Pad (a fill and a reorder, plain only) the replay converted Inception-v3's 768×17×17
// activations to plain before each of its four Pads and back to NHWC for the AveragePool after them
// (70 µs alone each way, up to 180 in the graph; 2.1 ms of the model's 2.2 ms of conversions at
// batch 1, on a 2-core Zen 4 EPYC), and MaxViT's and DenseNet's pooled projections the same.
//
// Every layout is the same copy. The tensor is seen as dims D0 × ... × Dr-1 of units of u floats:
// plain: its own dims, u = 1; NHWC ([N, H, W, C]): [N, H, W], u = C; aBcd<B>b ([N, C/B, H, W, B]):
// [N, ⌈C/B⌉, H, W], u = B. The layouts pad H and W only (N and C pads 0). Trailing dims without
// pads merge into the unit (a Pad of zeros is one run). y is then rows of its last dim: a row whose
// leading indices all fall inside x is [left pad zeros][a row of x][right pad zeros]; any other is
// zeros. One write of y and one read of x; rows (cut into pieces of at most kPiece floats) shared by
// the threads.
//
// The constant is 0: the value is not part of a layer's key (the reference pads with 0 too).
// A blocked x's padding lanes (C not a multiple of B) are oneDNN's zeros, copied as they are.
#include <cmath>
#include <cstring>
#include <limits>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// The longest piece of a row one thread writes at a time (floats; 256 KiB, as copy_runs splits).
constexpr int64_t kPiece = int64_t{1} << 16;

// The copy a Pad is in one layout (above): dims and unit, begin pads, rows; KernelError
// (unsupported) where the case is not ours.
struct PadPlan {
  std::vector<int64_t> dx, dy, pb, x_stride;  // x_stride: of dims [0, r-1) in x's rows
  int64_t unit = 1, rows = 1, row = 1, x_row = 1, pieces = 1, nx = 1, ny = 1;
};

PadPlan plan_pad(const Problem& p, int block) {
  if (p.inputs.empty() || p.outputs.size() != 1) unsupported("Pad has one input and one output");
  if (p.string_attr("mode", "constant") != "constant") unsupported("Pad: mode constant only");
  const Shape& x = p.inputs[0].shape;
  const Shape& y = p.outputs[0].shape;
  const auto pads = p.ints_attr("pads");
  const size_t r = x.size();
  if (r == 0 || y.size() != r || pads.size() != 2 * r)
    unsupported(fmt::format("Pad: {} pads for a rank-{} input", pads.size(), r));
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  for (size_t k = 0; k < r; ++k) {
    if (pads[k] < 0 || pads[r + k] < 0) unsupported("Pad: negative pads (a crop) are not ours");
    if (x[k] <= 0 || x[k] > kMaxDim || pads[k] > kMaxDim || pads[r + k] > kMaxDim ||
        y[k] != x[k] + pads[k] + pads[r + k])
      unsupported(fmt::format("Pad: output dim {} is {}, not {} + its pads", k, y[k], x[k]));
  }
  PadPlan pl;
  if (block == 0) {
    pl.dx.assign(x.begin(), x.end());
    pl.dy.assign(y.begin(), y.end());
    pl.pb.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  } else {
    if (block != 8 && block != 16 && block != kNhwc) unsupported(fmt::format("no blocked{}c layout", block));
    if (r != 4) unsupported("Pad on a blocked or channels-last layout: 4-D tensors only");
    if (pads[0] || pads[1] || pads[4] || pads[5])
      unsupported("Pad on a blocked or channels-last layout: the batch and channels unpadded");
    if (block == kNhwc) {
      pl.dx = {x[0], x[2], x[3]};
      pl.dy = {y[0], y[2], y[3]};
      pl.pb = {0, pads[2], pads[3]};
      pl.unit = x[1];
    } else {
      const int64_t cb = (x[1] + block - 1) / block;
      pl.dx = {x[0], cb, x[2], x[3]};
      pl.dy = {y[0], cb, y[2], y[3]};
      pl.pb = {0, 0, pads[2], pads[3]};
      pl.unit = block;
    }
  }
  // The sizes, checked: at most 2^34 floats each (64 GiB).
  constexpr int64_t kMaxFloats = int64_t{1} << 34;
  auto times = [&](int64_t a, int64_t b) {
    if (a > kMaxFloats / std::max<int64_t>(b, 1)) unsupported("Pad: the tensors are too large");
    return a * b;
  };
  // Trailing dims without pads merge into the unit.
  while (pl.dx.size() > 1 && pl.dx.back() == pl.dy.back()) {
    pl.unit = times(pl.unit, pl.dx.back());
    pl.dx.pop_back();
    pl.dy.pop_back();
    pl.pb.pop_back();
  }
  pl.nx = pl.unit;
  pl.ny = pl.unit;
  for (size_t k = 0; k < pl.dx.size(); ++k) {
    pl.nx = times(pl.nx, pl.dx[k]);
    pl.ny = times(pl.ny, pl.dy[k]);
  }
  pl.x_stride.assign(pl.dx.size() - 1, 1);
  for (size_t k = pl.x_stride.size(); k-- > 1;) pl.x_stride[k - 1] = pl.x_stride[k] * pl.dx[k];
  for (size_t k = 0; k + 1 < pl.dy.size(); ++k) pl.rows *= pl.dy[k];
  pl.row = pl.dy.back() * pl.unit;
  pl.x_row = pl.dx.back() * pl.unit;
  pl.pieces = (pl.row + kPiece - 1) / kPiece;
  return pl;
}

class PadKernel final : public Kernel {
 public:
  PadKernel(Problem p, uint64_t seed, int block, PadPlan plan)
      : p_(std::move(p)), seed_(seed), block_(block), pl_(std::move(plan)), x_(pl_.nx), y_(pl_.ny) {
    fill_uniform(x_.data(), pl_.nx, seed_);
  }

  std::string implementation() const override { return "floorline pad"; }
  int64_t workspace_bytes() const override { return 0; }

  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_;
    const Shape& dims = output ? p_.outputs[0].shape : p_.inputs[0].shape;
    // Without pixels (H = W = 1) channels-last is the plain order, as XNNPACK's ports say.
    if (block_ == 0 || (block_ == kNhwc && dims[2] * dims[3] == 1)) return Port{t.data(), t.bytes(), "plain"};
    if (block_ == kNhwc) return Port{t.data(), t.bytes(), channels_last_layout(dims)};
    return Port{t.data(), t.bytes(), blocked_channels_layout(block_, dims)};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_).bind(data);
    return {};
  }

  void run() override {
    const PadPlan& pl = pl_;
    if (pl.pieces > 1) {  // long rows: pieces of one row each
      for_rows(pl.rows * pl.pieces, [this, &pl](int64_t task) {
        const int64_t row = task / pl.pieces, lo = (task % pl.pieces) * kPiece;
        write_row(first_index(row), row, lo, std::min(pl.row, lo + kPiece));
      });
      return;
    }
    // Short rows: runs of consecutive rows (about kPiece floats a task), the indices stepped on.
    const int64_t per_task = std::max<int64_t>(1, kPiece / pl.row);
    for_rows((pl.rows + per_task - 1) / per_task, [this, &pl, per_task](int64_t task) {
      const int64_t r0 = task * per_task, r1 = std::min(pl.rows, r0 + per_task);
      std::vector<int64_t> index = first_index(r0);
      for (int64_t row = r0; row < r1; ++row) {
        write_row(index, row, 0, pl.row);
        for (size_t k = index.size(); k-- > 0;) {  // the next row's indices
          if (++index[k] < pl.dy[k]) break;
          index[k] = 0;
        }
      }
    });
  }

  // The indices of y row `row` in y's leading dims.
  std::vector<int64_t> first_index(int64_t row) const {
    std::vector<int64_t> index(pl_.dy.size() - 1);
    for (size_t k = index.size(); k-- > 0;) {
      index[k] = row % pl_.dy[k];
      row /= pl_.dy[k];
    }
    return index;
  }
  // Floats [lo, hi) of y row `row` (leading indices `index`): [0, a) zeros, [a, b) the x row it
  // holds, [b, row) zeros; all zeros where an index falls in a pad.
  void write_row(const std::vector<int64_t>& index, int64_t row, int64_t lo, int64_t hi) const {
    const PadPlan& pl = pl_;
    float* dst = y_.data() + row * pl.row;
    int64_t x_row = 0;
    for (size_t k = 0; k < index.size(); ++k) {
      const int64_t i = index[k] - pl.pb[k];
      if (i < 0 || i >= pl.dx[k]) {
        std::fill(dst + lo, dst + hi, 0.f);
        return;
      }
      x_row += i * pl.x_stride[k];
    }
    const int64_t a = pl.pb.back() * pl.unit, b = a + pl.x_row;
    if (lo < a) std::fill(dst + lo, dst + std::min(hi, a), 0.f);
    if (const int64_t c0 = std::max(lo, a), c1 = std::min(hi, b); c0 < c1)
      std::memcpy(dst + c0, x_.data() + x_row * pl.x_row + (c0 - a),
                  static_cast<size_t>(c1 - c0) * sizeof(float));
    if (hi > b) std::fill(dst + std::max(lo, b), dst + hi, 0.f);
  }

  Status verify() override {
    // Plain values packed into the layout (a blocked x's padding lanes 0, as oneDNN keeps them);
    // y NaN before the call: every element must be written.
    const Shape& xs = p_.inputs[0].shape;
    const Shape& ys = p_.outputs[0].shape;
    HostTensor plain;
    plain.shape = xs;
    plain.data.resize(static_cast<size_t>(elements(xs)));
    fill_uniform(plain.data.data(), static_cast<int64_t>(plain.data.size()), seed_ + 101);
    x_.fill(0.f);
    if (block_ == 0)
      std::copy(plain.data.begin(), plain.data.end(), x_.begin());
    else
      hold_nchw(plain.data.data(), block_, xs, x_.data());
    y_.fill(std::numeric_limits<float>::quiet_NaN());
    run();
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, {plain}, {}));
    if (ref.size() != 1) return make_error("the reference gave {} outputs, not 1", ref.size());
    std::vector<float> got(static_cast<size_t>(elements(ys)));
    if (block_ == 0) {
      std::copy(y_.begin(), y_.end(), got.begin());
    } else {
      unhold_nchw(y_.data(), block_, ys, got.data());
      for (size_t i = 0; i < y_.size(); ++i)
        if (std::isnan(y_[i])) return make_error("element {} of the padded output was never written", i);
    }
    return compare_output(got.data(), ref[0], verify_tolerance(p_));
  }

 private:
  Problem p_;
  uint64_t seed_;
  int block_;
  PadPlan pl_;
  Placed<float> x_, y_;
};

}  // namespace

std::unique_ptr<Kernel> make_pad_kernel(const Problem& p, uint64_t seed, int block, bool check_only) {
  PadPlan plan = plan_pad(p, block);
  if (check_only) return nullptr;
  return std::make_unique<PadKernel>(p, seed, block, std::move(plan));
}

}  // namespace floorline::kernels::floorline_detail
