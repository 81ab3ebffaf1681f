// oneDNN builders: Conv and ConvTranspose (convolution_forward, deconvolution_forward).
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void conv(Ctx& c, const std::string& variant) {
  const Shape& x = c.in_shape(0);
  const Shape& w = c.in_shape(1);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5) unsupported("oneDNN convolutions are 1-D, 2-D or 3-D");
  const size_t n = x.size() - 2;
  const int64_t g = c.p.int_attr("group");
  const auto pads = c.p.ints_attr("pads");
  dims strides, dil, pl, pr;
  for (size_t k = 0; k < n; ++k) {
    strides.push_back(c.p.ints_attr("strides").at(k));
    dil.push_back(c.p.ints_attr("dil").at(k) - 1);  // oneDNN counts the gaps: ONNX dilation − 1
    pl.push_back(pads.at(k));
    pr.push_back(pads.at(k + n));
  }
  const bool deconv = c.p.kind == LayerKind::kConvTranspose;
  // Weights as oneDNN sees them: (O, I, k...) or grouped (G, O/G, I/G, k...). ONNX stores Conv
  // weights OIk (the grouped view is the same buffer) and ConvTranspose weights IOk.
  View wv;
  const Shape ks(w.begin() + 2, w.end());
  if (!deconv) {
    dims d = g > 1 ? dims{g, w[0] / g, w[1]} : dims{w[0], w[1]};
    d.insert(d.end(), ks.begin(), ks.end());
    wv = reshaped(d);
  } else {
    // ONNX (Cin, Cout/G, k...) = (G, Cin/G, Cout/G, k...) stored; oneDNN wants (G, Cout/G, Cin/G, k...).
    Shape stored = {g, w[0] / g, w[1]};
    stored.insert(stored.end(), ks.begin(), ks.end());
    std::vector<int64_t> order = {0, 2, 1};
    for (size_t k = 0; k < n; ++k) order.push_back(static_cast<int64_t>(3 + k));
    wv = permuted(stored, order);
    if (g == 1) {  // drop the group dim
      wv.d.erase(wv.d.begin());
      wv.strides.erase(wv.strides.begin());
    }
  }
  const int xi = c.input(0), wi = c.input(1), yi = c.output(0);
  const bool has_bias = c.p.inputs.size() > 2;
  const auto src = c.any(x), wei = c.any(wv.d), dst = c.any(y);
  const memory::desc bias = has_bias ? c.md(c.input(2), plain(c.in_shape(2))) : memory::desc();
  const int prefill = sum_prefill(c);
  std::vector<ArgDef> args = {
      {DNNL_ARG_SRC, xi, plain(x)}, {DNNL_ARG_WEIGHTS, wi, wv}, {DNNL_ARG_DST, yi, plain(y), prefill}};
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.input(2), plain(c.in_shape(2))});
  c.b.algorithm = variant;
  if (deconv) {
    // ONNX output_padding adds rows at the end: oneDNN sees them as less right padding.
    const auto out_pad = c.p.ints_attr("output_padding");
    for (size_t k = 0; k < n && k < out_pad.size(); ++k) pr[k] -= out_pad[k];
    dnnl::deconvolution_forward::desc d =
        has_bias ? dnnl::deconvolution_forward::desc(kInference, algorithm::deconvolution_direct, src, wei,
                                                     bias, dst, strides, dil, pl, pr)
                 : dnnl::deconvolution_forward::desc(kInference, algorithm::deconvolution_direct, src, wei,
                                                     dst, strides, dil, pl, pr);
    c.b.steps.push_back(make_step<dnnl::deconvolution_forward::primitive_desc>(d, c.attr(), args));
    return;
  }
  const algorithm alg = variant == "convolution_winograd" ? algorithm::convolution_winograd
                        : variant == "convolution_auto"   ? algorithm::convolution_auto
                                                          : algorithm::convolution_direct;
  dnnl::convolution_forward::desc d =
      has_bias ? dnnl::convolution_forward::desc(kInference, alg, src, wei, bias, dst, strides, dil, pl, pr)
               : dnnl::convolution_forward::desc(kInference, alg, src, wei, dst, strides, dil, pl, pr);
  c.b.steps.push_back(make_step<dnnl::convolution_forward::primitive_desc>(d, c.attr(), args));
}

}  // namespace floorline::kernels::onednn_detail
