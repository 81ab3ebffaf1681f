// oneDNN builders: Softmax and LogSoftmax (softmax_v2), and the Reduce ops (reduction).
#include <map>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void softmax(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  int64_t axis = c.p.int_attr("axis");
  View v = plain(x);
  if (c.p.int_attr("coerce_2d", 0) != 0) {  // opset < 13: softmax over the flattened trailing dims
    const int64_t outer = elements(Shape(x.begin(), x.begin() + axis));
    v = reshaped({outer, elements(x) / outer});
    axis = 1;
  }
  const auto alg = c.p.kind == LayerKind::kLogSoftmax ? algorithm::softmax_log : algorithm::softmax_accurate;
  dnnl::softmax_v2_forward::desc d(kInference, alg, c.md(c.input(0), v), c.md(c.output(0), v),
                                   static_cast<int>(axis));
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::softmax_v2_forward::primitive_desc>(
      d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), v}, {DNNL_ARG_DST, c.output(0), v}}));
}

void reduce(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  Shape kept = x;
  for (auto a : c.p.ints_attr("axes")) kept.at(a) = 1;
  static const std::map<LayerKind, algorithm> kAlg = {{LayerKind::kReduceMean, algorithm::reduction_mean},
                                                      {LayerKind::kReduceSum, algorithm::reduction_sum},
                                                      {LayerKind::kReduceMax, algorithm::reduction_max},
                                                      {LayerKind::kReduceMin, algorithm::reduction_min},
                                                      {LayerKind::kReduceProd, algorithm::reduction_mul}};
  dnnl::reduction::desc d(kAlg.at(c.p.kind), c.md(c.input(0), plain(x)), c.md(c.output(0), plain(kept)), 0.f,
                          0.f);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::reduction::primitive_desc>(
      d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(kept)}}));
}

}  // namespace floorline::kernels::onednn_detail
