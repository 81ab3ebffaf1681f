// CUDA builders on Floorline's own kernels (device_kernels.cu), one per op family.
#include <algorithm>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

// --- Floorline's own kernels ---------------------------------------------------------------------------

namespace {

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int k = static_cast<int>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
  return st;
}

// One strided copy: `box` elements from src (strides, offset) into dst (strides, offset).
void copy_step(Ctx& c, int src, int dst, const Shape& box, const std::vector<int64_t>& src_strides,
               int64_t src_offset, const std::vector<int64_t>& dst_strides, int64_t dst_offset) {
  if (box.size() > device::kMaxRank)
    fail(Disposition::kUnsupported,
         fmt::format("rank {} exceeds the copy kernel's {}", box.size(), device::kMaxRank));
  const device::StridedCopy cp =
      device::make_strided_copy(box, src_strides, src_offset, dst_strides, dst_offset);
  const void* sp = c.ptr(src);
  void* dp = c.ptr(dst);
  const DType t = c.type;
  c.b.steps.push_back(
      [=](Context& d) { check(device::strided_copy(t, sp, dp, cp, d.stream), "floorline-kernel copy"); });
}

}  // namespace

void own_copy(Ctx& c) {
  const std::string& op = c.p.op;
  const LayerKind kind = c.p.kind;
  const Shape& x = c.in_shape(0);
  const auto xs = row_major_strides(x);
  c.b.implementation = fmt::format("floorline-kernel strided copy ({})", op);
  if (kind == LayerKind::kTranspose) {
    const Shape& y = c.out_shape();
    auto perm = c.p.ints_attr("perm");
    if (perm.empty())
      for (int64_t k = static_cast<int64_t>(x.size()) - 1; k >= 0; --k) perm.push_back(k);
    std::vector<int64_t> src(y.size());
    for (size_t k = 0; k < y.size(); ++k) src[k] = xs[static_cast<size_t>(perm[k])];
    copy_step(c, c.input(0), c.output(), y, src, 0, row_major_strides(y), 0);
  } else if (kind == LayerKind::kSlice) {
    const Shape& y = c.out_shape();
    const auto starts = c.p.ints_attr("starts"), axes = c.p.ints_attr("axes"), steps = c.p.ints_attr("steps");
    if (starts.size() != axes.size()) fail(Disposition::kUnsupported, "Slice with run-time starts");
    std::vector<int64_t> src = xs;
    int64_t offset = 0;
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t step = k < steps.size() ? steps[k] : 1;
      offset += starts[k] * xs[static_cast<size_t>(axes[k])];
      src[static_cast<size_t>(axes[k])] *= step;
    }
    copy_step(c, c.input(0), c.output(), y, src, offset, row_major_strides(y), 0);
  } else if (kind == LayerKind::kConcat) {
    const Shape& y = c.out_shape();
    int64_t axis = c.p.int_attr("axis");
    if (axis < 0) axis += static_cast<int64_t>(y.size());
    const auto ys = row_major_strides(y);
    int64_t at = 0;
    for (size_t k = 0; k < c.p.inputs.size(); ++k) {
      const Shape& s = c.in_shape(k);
      copy_step(c, c.input(k), c.output(), s, row_major_strides(s), 0, ys,
                at * ys[static_cast<size_t>(axis)]);
      at += s[static_cast<size_t>(axis)];
    }
  } else if (kind == LayerKind::kSplit) {
    int64_t axis = c.p.int_attr("axis");
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    int64_t at = 0;
    for (size_t k = 0; k < c.p.outputs.size(); ++k) {
      const Shape& s = c.out_shape(k);
      copy_step(c, c.input(0), c.output(k), s, xs, at * xs[static_cast<size_t>(axis)], row_major_strides(s),
                0);
      at += s[static_cast<size_t>(axis)];
    }
  } else if (kind == LayerKind::kExpand) {
    const Shape& y = c.out_shape();
    Shape padded = x;
    while (padded.size() < y.size()) padded.insert(padded.begin(), 1);
    const auto ps = row_major_strides(padded);
    std::vector<int64_t> src(y.size());
    for (size_t k = 0; k < y.size(); ++k) src[k] = padded[k] == 1 ? 0 : ps[k];
    copy_step(c, c.input(0), c.output(), y, src, 0, row_major_strides(y), 0);
  } else if (kind == LayerKind::kPad) {
    const Shape& y = c.out_shape();
    const auto pads = c.p.ints_attr("pads");
    if (pads.size() != 2 * x.size()) fail(Disposition::kUnsupported, "Pad with run-time pads");
    const auto ys = row_major_strides(y);
    Shape box(x.size());
    int64_t src_offset = 0, dst_offset = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const int64_t begin = pads[k];
      src_offset += std::max<int64_t>(0, -begin) * xs[k];
      dst_offset += std::max<int64_t>(0, begin) * ys[k];
      box[k] = std::min(x[k] - std::max<int64_t>(0, -begin), y[k] - std::max<int64_t>(0, begin));
    }
    // The output is written whole each call: zeros, then the input inside them.
    void* yp = c.ptr(c.output());
    const size_t bytes = c.b.tensors[static_cast<size_t>(c.output())].bytes();
    c.b.steps.push_back([=](Context& d) { check(cudaMemsetAsync(yp, 0, bytes, d.stream), "Pad fill"); });
    copy_step(c, c.input(0), c.output(), box, xs, src_offset, ys, dst_offset);
  } else {
    fail(Disposition::kUnsupported, fmt::format("no floorline-kernel copy for {}", op));
  }
}

void own_eltwise(Ctx& c) {
  const LayerKind k = c.p.kind;
  const auto op = unary_op_for(k);
  if (!op) fail(Disposition::kUnsupported, fmt::format("no floorline-kernel for {}", c.p.op));
  // The kinds that have alpha/beta read them (the IR fills their ONNX defaults); the others ignore them.
  float alpha = 0, beta = 0;
  if (k == LayerKind::kLeakyRelu || k == LayerKind::kElu || k == LayerKind::kHardSigmoid)
    alpha = static_cast<float>(c.p.float_attr("alpha"));
  if (k == LayerKind::kHardSigmoid) beta = static_cast<float>(c.p.float_attr("beta"));
  if (k == LayerKind::kClip) {  // absent bounds: unbounded
    alpha = static_cast<float>(c.p.float_attr("min", -3.4e38));
    beta = static_cast<float>(c.p.float_attr("max", 3.4e38));
  }
  if (k == LayerKind::kPow) beta = static_cast<float>(c.p.float_attr("y", 1.0));
  if (k == LayerKind::kGelu) alpha = c.p.string_attr("approximate", "none") == "tanh" ? 1.0f : 0.0f;
  if (k == LayerKind::kLog || k == LayerKind::kSqrt || k == LayerKind::kReciprocal || k == LayerKind::kPow)
    c.b.tensors[0].fill = Fill::kPositive;
  const int64_t n = elements(c.in_shape(0));
  const void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  const auto u = *op;
  c.b.implementation = fmt::format("floorline-kernel element-wise {}", c.p.op);
  c.b.steps.push_back([=](Context& d) {
    check(device::unary(t, u, alpha, beta, xp, yp, n, d.stream), "floorline-kernel eltwise");
  });
}

void own_binary(Ctx& c) {
  const auto op = binary_op_for(c.p.kind);
  if (!op) fail(Disposition::kUnsupported, fmt::format("no floorline-kernel for {}", c.p.op));
  const Shape& y = c.out_shape();
  if (y.size() > device::kMaxRank) fail(Disposition::kUnsupported, "rank over 8");
  if (c.p.kind == LayerKind::kDiv) c.b.tensors[1].fill = Fill::kPositive;
  device::Broadcast s;
  s.rank = static_cast<int>(y.size());
  auto strides = [&](const Shape& in) {
    Shape padded = in;
    while (padded.size() < y.size()) padded.insert(padded.begin(), 1);
    const auto st = row_major_strides(padded);
    std::vector<int64_t> out(y.size());
    for (size_t k = 0; k < y.size(); ++k) out[k] = padded[k] == 1 ? 0 : st[k];
    return out;
  };
  const auto as = strides(c.in_shape(0)), bs = strides(c.in_shape(1));
  for (size_t k = 0; k < y.size(); ++k) {
    s.dims[k] = y[k];
    s.a_strides[k] = as[k];
    s.b_strides[k] = bs[k];
  }
  const void* ap = c.ptr(c.input(0));
  const void* bp = c.ptr(c.input(1));
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  const auto b = *op;
  c.b.implementation = fmt::format("floorline-kernel broadcast {}", c.p.op);
  c.b.steps.push_back(
      [=](Context& d) { check(device::binary(t, b, ap, bp, yp, s, d.stream), "floorline-kernel binary"); });
}

void own_pooling(Ctx& c) {
  const device::Pooling g = pooling_geometry(c);
  const void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  c.b.implementation = "floorline-kernel direct pooling";
  c.b.steps.push_back(
      [=](Context& d) { check(device::pooling(t, xp, yp, g, d.stream), "floorline-kernel pooling"); });
}

void own_layer_norm(Ctx& c) {
  const Shape& x = c.in_shape(0);
  int64_t axis = c.p.int_attr("axis");
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  const int64_t inner = elements(Shape(x.begin() + axis, x.end())),
                rows = elements(x) / std::max<int64_t>(inner, 1);
  const void* xp = c.ptr(c.input(0));
  const void* sp = c.ptr(c.input(1));
  const void* bp = c.p.inputs.size() > 2 ? c.ptr(c.input(2)) : nullptr;
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  c.b.implementation = "floorline-kernel layer normalization (one block per row)";
  c.b.steps.push_back([=](Context& d) {
    check(device::layer_norm(t, xp, sp, bp, yp, rows, inner, 1e-5f, d.stream), "floorline-kernel layer_norm");
  });
}

void own_gather(Ctx& c) {
  const Shape& x = c.in_shape(0);
  const Shape& idx = c.in_shape(1);
  int64_t axis = c.p.int_attr("axis");
  if (axis < 0) axis += static_cast<int64_t>(x.size());
  const int64_t outer = elements(Shape(x.begin(), x.begin() + axis)),
                inner = elements(Shape(x.begin() + axis + 1, x.end()));
  Tensor& it = c.b.tensors[1];
  it.is_index = true;
  it.index_bound = x[static_cast<size_t>(axis)];
  const void* xp = c.ptr(c.input(0));
  const auto* ip = static_cast<const int64_t*>(c.ptr(c.input(1)));
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  const int64_t axis_dim = x[static_cast<size_t>(axis)], n_idx = elements(idx);
  c.b.not_verifiable = "Floorline has no reference for Gather (its indices are random)";
  c.b.implementation = "floorline-kernel gather";
  c.b.steps.push_back([=](Context& d) {
    check(device::gather(t, xp, ip, yp, outer, axis_dim, n_idx, inner, d.stream), "floorline-kernel gather");
  });
}

void own_resize(Ctx& c) {
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  const bool linear = c.p.string_attr("mode") == "linear";
  const std::string coord = c.p.string_attr("coordinate_transformation_mode");
  bool integer_scale = true;
  for (size_t k = 2; k < x.size(); ++k) integer_scale = integer_scale && y[k] % x[k] == 0;
  if (linear && coord != "half_pixel" && coord != "pytorch_half_pixel")
    c.b.not_verifiable = fmt::format("the kernel's linear resize uses half-pixel centres, not {}", coord);
  if (!linear && !integer_scale)
    c.b.not_verifiable = "the kernel's nearest rounding matches ONNX only for integer upscales";
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  const size_t n = x.size() - 2, off = 3 - n;
  for (size_t k = 0; k < n; ++k) {
    in[off + k] = x[2 + k];
    out[off + k] = y[2 + k];
  }
  const int64_t nc = x[0] * x[1];
  const void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  const DType t = c.type;
  c.b.implementation = fmt::format("floorline-kernel {} resize", linear ? "linear" : "nearest");
  c.b.steps.push_back([=](Context& d) {
    check(device::resize(t, xp, yp, nc, in, out, linear, d.stream), "floorline-kernel resize");
  });
}

}  // namespace floorline::kernels::cuda_detail
