// oneDNN builders: batch, layer and instance normalization, and LRN.
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void batch_norm(Ctx& c, const std::string& variant) {
  // A Relu after it (post-op Relu, mp::fusion_matches): oneDNN's fused normalization + ReLU.
  const bool relu = c.p.post_ops.size() == 1 && c.p.post_ops[0].op == "Relu";
  if (!relu) require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  if (c.p.inputs.size() < 5) unsupported("BatchNormalization needs scale, B, mean and var");
  for (int k = 1; k <= 4; ++k) c.set_f32_only(c.input(k));
  c.set_fill(c.input(4), Fill::kPositive);
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  dnnl::batch_normalization_forward::desc d(kInference, activation_md(c, c.input(0), x, variant), kNormEps,
                                            flags);
  const View cv = reshaped({x.at(1)});
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::batch_normalization_forward::primitive_desc>(
      d, c.attr(false),
      {{DNNL_ARG_SRC, c.input(0), plain(x)},
       {DNNL_ARG_SCALE, c.input(1), cv},
       {DNNL_ARG_SHIFT, c.input(2), cv},
       {DNNL_ARG_MEAN, c.input(3), cv},
       {DNNL_ARG_VARIANCE, c.input(4), cv},
       {DNNL_ARG_DST, c.output(0), plain(c.out_shape())}}));
}

void layer_norm(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const int64_t axis = c.p.int_attr("axis");
  const int64_t inner = elements(Shape(x.begin() + axis, x.end())), outer = elements(x) / inner;
  const View data = reshaped({outer, inner});  // oneDNN normalizes over the last dimension
  auto flags = dnnl::normalization_flags::use_scale;
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), data},
                              {DNNL_ARG_SCALE, c.input(1), reshaped({inner})},
                              {DNNL_ARG_DST, c.output(0), data}};
  c.set_f32_only(c.input(1));
  if (c.p.inputs.size() > 2) {
    flags = flags | dnnl::normalization_flags::use_shift;
    c.set_f32_only(c.input(2));
    args.push_back({DNNL_ARG_SHIFT, c.input(2), reshaped({inner})});
  }
  dnnl::layer_normalization_forward::desc d(kInference, c.md(c.input(0), data), kNormEps, flags);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::layer_normalization_forward::primitive_desc>(d, c.attr(false), args));
}

// InstanceNormalization is batch normalization of the (1, N·C, spatial) view with statistics
// computed per channel; scale and shift repeat per image, so they get N·C-element tensors of their
// own (the reference sees the ONNX (C) tensors: the kernel fills the repeats from them).
void instance_norm(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  if (x.at(0) != 1) unsupported("InstanceNormalization is mapped for batch 1 only");
  dims d(x.begin(), x.end());
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc bd(kInference, c.md(c.input(0), reshaped(d)), kNormEps, flags);
  c.set_f32_only(c.input(1));
  c.set_f32_only(c.input(2));
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::batch_normalization_forward::primitive_desc>(
      bd, c.attr(false),
      {{DNNL_ARG_SRC, c.input(0), reshaped(d)},
       {DNNL_ARG_SCALE, c.input(1), reshaped({x[1]})},
       {DNNL_ARG_SHIFT, c.input(2), reshaped({x[1]})},
       {DNNL_ARG_DST, c.output(0), reshaped(d)}}));
}

void lrn(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  dnnl::lrn_forward::desc d(kInference, algorithm::lrn_across_channels, c.md(c.input(0), plain(x)),
                            c.p.int_attr("size"), 1e-4f, 0.75f, 1.f);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::lrn_forward::primitive_desc>(
      d, c.attr(false),
      {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(c.out_shape())}}));
}

}  // namespace floorline::kernels::onednn_detail
