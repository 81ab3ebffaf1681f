// oneDNN builders: Concat, Transpose, Slice, Split, Pad, Resize, and copies for ops with no primitive.
#include <algorithm>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void concat(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  std::vector<memory::desc> srcs;
  std::vector<ArgDef> args;
  for (size_t k = 0; k < c.p.inputs.size(); ++k) {
    srcs.push_back(activation_md(c, c.input(k), c.in_shape(k), variant));
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), c.input(k), plain(c.in_shape(k))});
  }
  args.push_back({DNNL_ARG_DST, c.output(0), plain(c.out_shape())});
  c.b.algorithm = variant;
  c.b.steps.push_back(step(
      dnnl::concat::primitive_desc(activation_md(c, c.output(0), c.out_shape(), variant),
                                   static_cast<int>(c.p.int_attr("axis")), srcs, cpu_engine(), c.attr(false)),
      args));
}
namespace {

// A reorder from `src` (seen through sv) into `dst` (seen through dv): Transpose, Slice, Split, Pad
// and the copies of data-movement ops are all this.
StepDef reorder_step(Ctx& c, int src, const View& sv, int dst, const View& dv) {
  return step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(src, sv), cpu_engine(), c.md(dst, dv),
                                            c.attr(false), true),
              {{DNNL_ARG_FROM, src, sv}, {DNNL_ARG_TO, dst, dv}});
}

}  // namespace

void transpose(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const auto perm = c.p.ints_attr("perm");
  c.b.algorithm = variant;
  c.b.steps.push_back(
      reorder_step(c, c.input(0), permuted(c.in_shape(0), perm), c.output(0), plain(c.out_shape())));
}
namespace {

// The plain, uninterpreted copy that stands in for a data-movement op with no oneDNN primitive
// (Gather, Expand, Tile...): read and write the output's size, the op's compulsory traffic.
void copy_proxy(Ctx& c, const std::string& variant, std::string why) {
  const Shape& y = c.out_shape();
  const int src = c.extra(y);
  c.b.algorithm = variant;
  c.b.not_verifiable = std::move(why);
  c.b.steps.push_back(reorder_step(c, src, plain(y), c.output(0), plain(y)));
}

}  // namespace

void slice(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const dims xs = plain_strides(dims(x.begin(), x.end()));
  View v{dims(c.out_shape().begin(), c.out_shape().end()), xs, 0};
  const auto starts = c.p.ints_attr("starts"), axes = c.p.ints_attr("axes"), steps = c.p.ints_attr("steps");
  if (starts.size() != axes.size()) {
    copy_proxy(c, "copy", "Slice with run-time starts is timed as a copy of its output");
    return;
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t step_k = k < steps.size() ? steps[k] : 1;
    if (step_k <= 0) {
      copy_proxy(c, "copy", "Slice with a negative step is timed as a copy of its output");
      return;
    }
    v.offset += starts[k] * xs[axes[k]];
    v.strides[axes[k]] *= step_k;
  }
  c.b.algorithm = variant;
  c.b.steps.push_back(reorder_step(c, c.input(0), v, c.output(0), plain(c.out_shape())));
}

void split(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const int64_t axis = c.p.int_attr("axis");
  const dims xs = plain_strides(dims(x.begin(), x.end()));
  int64_t at = 0;
  c.b.algorithm = variant;
  c.b.iterate = false;
  for (size_t k = 0; k < c.p.outputs.size(); ++k) {
    const Shape& y = c.out_shape(k);
    View v{dims(y.begin(), y.end()), xs, at * xs[axis]};
    c.b.steps.push_back(reorder_step(c, c.input(0), v, c.output(k), plain(y)));
    at += y[axis];
  }
}

void pad(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  const auto pads = c.p.ints_attr("pads");
  const bool negative = std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0; });
  if (c.p.string_attr("mode") != "constant" || negative || pads.size() != 2 * x.size()) {
    copy_proxy(c, "copy", "Pad other than constant and non-negative is timed as a copy of its output");
    return;
  }
  // Fill the output with the constant (eltwise linear 0·y + 0, in place), then copy x inside it.
  const View yv = plain(y);
  dnnl::eltwise_forward::desc fill(kInference, algorithm::eltwise_linear, c.md(c.output(0), yv), 0.f, 0.f);
  const dims ys = plain_strides(dims(y.begin(), y.end()));
  View inner{dims(x.begin(), x.end()), ys, 0};
  for (size_t k = 0; k < x.size(); ++k) inner.offset += pads[k] * ys[k];
  c.b.algorithm = variant;
  c.b.iterate = false;
  c.b.steps.push_back(make_step<dnnl::eltwise_forward::primitive_desc>(
      fill, c.attr(false), {{DNNL_ARG_SRC, c.output(0), yv}, {DNNL_ARG_DST, c.output(0), yv}}));
  c.b.steps.push_back(reorder_step(c, c.input(0), plain(x), c.output(0), inner));
}

void resize(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5 || x[0] != y[0] || x[1] != y[1])
    unsupported("oneDNN resampling resizes the spatial dims of a 3-D to 5-D tensor only");
  const std::string mode = c.p.string_attr("mode");
  if (mode != "nearest" && mode != "linear") unsupported(fmt::format("oneDNN has no {} resampling", mode));
  const std::string coord = c.p.string_attr("coordinate_transformation_mode");
  bool integer_scale = true;
  for (size_t k = 2; k < x.size(); ++k) integer_scale = integer_scale && y[k] % x[k] == 0;
  if (mode == "linear" && coord != "half_pixel" && coord != "pytorch_half_pixel")
    c.b.not_verifiable = fmt::format("oneDNN's linear resampling uses half-pixel centres, not {}", coord);
  if (mode == "nearest" && !integer_scale)
    c.b.not_verifiable = "oneDNN's nearest rounding matches ONNX only for integer upscales";
  dnnl::resampling_forward::desc d(
      kInference, mode == "linear" ? algorithm::resampling_linear : algorithm::resampling_nearest,
      c.md(c.input(0), plain(x)), c.md(c.output(0), plain(y)));
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::resampling_forward::primitive_desc>(
      d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

void copy_kind(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  copy_proxy(c, variant, fmt::format("{} has {}", c.p.op, onednn_support(c.p.kind).reason));
}

}  // namespace floorline::kernels::onednn_detail
