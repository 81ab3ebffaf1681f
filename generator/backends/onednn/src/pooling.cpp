// oneDNN builders: MaxPool, AveragePool and the global pools (pooling_v2 or reduction).
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void pooling(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5) unsupported("oneDNN pooling is 1-D, 2-D or 3-D");
  const size_t n = x.size() - 2;
  const LayerKind k = c.p.kind;
  const bool global = k == LayerKind::kGlobalAveragePool || k == LayerKind::kGlobalMaxPool;
  const bool is_max = k == LayerKind::kMaxPool || k == LayerKind::kGlobalMaxPool;
  // int8 (a QDQ model's pooling): 8-bit in and out, input and output scales taken equal (oneDNN
  // 2.6 pooling has no scales; the scale values are not part of the config).
  if (int8_case(c)) int8_operands(c);
  if (base_variant(variant) == "reduction") {
    dnnl::reduction::desc d(is_max ? algorithm::reduction_max : algorithm::reduction_mean,
                            c.md(c.input(0), plain(x)), c.md(c.output(0), plain(y)), 0.f, 0.f);
    c.b.algorithm = variant;
    c.b.steps.push_back(make_step<dnnl::reduction::primitive_desc>(
        d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
    return;
  }
  dims kernel, strides, dil, pl, pr;
  const auto pads = c.p.ints_attr("pads");
  for (size_t k = 0; k < n; ++k) {
    kernel.push_back(global ? x[k + 2] : c.p.ints_attr("kernel").at(k));
    strides.push_back(global ? 1 : c.p.ints_attr("strides").at(k));
    const auto d = c.p.ints_attr("dil");
    dil.push_back(global || d.empty() ? 0 : d.at(k) - 1);
    pl.push_back(global ? 0 : pads.at(k));
    // Right padding from the output size, so that ceil_mode outputs come out right.
    pr.push_back((y[k + 2] - 1) * strides[k] + (kernel[k] - 1) * (dil[k] + 1) + 1 - x[k + 2] - pl[k]);
  }
  // (A global pool has no padding, nor the attribute.)
  const algorithm alg = is_max ? algorithm::pooling_max
                        : !global && c.p.int_attr("count_include_pad") != 0
                            ? algorithm::pooling_avg_include_padding
                            : algorithm::pooling_avg_exclude_padding;
  dnnl::pooling_v2_forward::desc d(kInference, alg, activation_md(c, c.input(0), x, variant),
                                   activation_md(c, c.output(0), y, variant), strides, kernel, dil, pl, pr);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::pooling_v2_forward::primitive_desc>(
      d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

}  // namespace floorline::kernels::onednn_detail
