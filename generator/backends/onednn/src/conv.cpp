// oneDNN builders: Conv and ConvTranspose (convolution_forward, deconvolution_forward; a 1x1
// convolution also as a matmul).
#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

namespace {

// A 1x1 convolution with unit strides and no padding is a GEMM per image on NCHW buffers:
// Y[n] (Cout x S) = W (Cout x Cin) · X[n] (Cin x S), S the spatial size; grouped, one GEMM per
// group: (G, Cout/G, Cin/G) · (N, G, Cin/G, S). oneDNN's matmul runs it with the weights as the
// broadcast left operand, no layout conversion, where convolutions want blocked activations.
void conv_as_matmul(Ctx& c, const ConvDesc& cd) {
  if (!cd.pointwise()) unsupported("only a 1x1 convolution with unit strides and no padding is a matmul");
  const int64_t g = cd.group;
  const int64_t spatial = elements(cd.in);
  const int64_t n = cd.n, co = cd.k_per_group(), ci = cd.c_per_group();
  // Grouped, the groups are the batch of the GEMMs, one image at a time (oneDNN 2.6's optimized
  // matmuls broadcast the left operand over a batch, not over an image dim ahead of the groups).
  if (g > 1 && n != 1) unsupported("a grouped 1x1 convolution is a matmul at batch 1 only");
  // ...and their binary post-ops broadcast a (G, Cout/G, 1) bias only in the reference one.
  if (g > 1 && c.p.inputs.size() > 2) unsupported("a grouped 1x1 convolution with bias is not a matmul");
  const dims a = g == 1 ? dims{1, co, ci} : dims{g, co, ci};
  const dims b = g == 1 ? dims{n, ci, spatial} : dims{g, ci, spatial};
  const dims d = g == 1 ? dims{n, co, spatial} : dims{g, co, spatial};
  const dims bias_d = g == 1 ? dims{1, co, 1} : dims{g, co, 1};
  const int prefill = sum_prefill(c);
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(1), reshaped(a)},
                              {DNNL_ARG_WEIGHTS, c.input(0), reshaped(b)},
                              {DNNL_ARG_DST, c.output(0), reshaped(d), prefill}};
  c.b.algorithm = "matmul";
  primitive_attr attr = c.attr();
  if (c.p.inputs.size() > 2) {
    // The bias is one value per output row (channel), which oneDNN 2.6's matmul bias argument
    // takes only in its reference implementation: a binary add post-op broadcast over the rows,
    // ahead of the fused epilogue, runs in the GEMM-based ones.
    dnnl::post_ops fused = attr.get_post_ops(), po;
    po.append_binary(algorithm::binary_add, c.md(c.input(2), reshaped(bias_d)));
    for (int i = 0; i < fused.len(); ++i) {
      if (fused.kind(i) == dnnl::primitive::kind::sum) {
        po.append_sum(1.f);
      } else {
        float scale = 1.f, alpha = 0.f, beta = 0.f;
        algorithm alg{};
        fused.get_params_eltwise(i, scale, alg, alpha, beta);
        po.append_eltwise(scale, alg, alpha, beta);
      }
    }
    attr.set_post_ops(po);
    args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, c.input(2), reshaped(bias_d)});
  }
  dnnl::matmul::desc md(c.md(c.input(1), reshaped(a)), c.md(c.input(0), reshaped(b)),
                        c.md(c.output(0), reshaped(d)));
  c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(md, attr, args));
}

}  // namespace

void conv(Ctx& c, const std::string& variant) {
  const Shape& x = c.in_shape(0);
  const Shape& w = c.in_shape(1);
  const Shape& y = c.out_shape();
  const auto cd = conv_desc(c.p);  // the kernel API's one reading of the geometry
  if (!cd) unsupported(cd.error().message);
  const size_t n = cd->spatial();
  const int64_t g = cd->group;
  dims strides(cd->strides), pl(cd->pads_begin), pr(cd->pads_end), dil;
  for (const int64_t d : cd->dilations) dil.push_back(d - 1);  // oneDNN counts the gaps: ONNX dilation − 1
  const bool deconv = cd->transposed;
  const bool int8 = int8_case(c);
  if (int8) {
    if (deconv || (variant != "convolution_direct" && variant != "convolution_auto"))
      unsupported("int8: oneDNN's direct convolutions only");
    int8_operands(c);
  }
  if (variant == "matmul") {
    if (deconv) unsupported("a transposed convolution is not offered as a matmul");
    conv_as_matmul(c, *cd);
    return;
  }
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
  const auto src = c.any_t(xi, x), wei = c.any_t(wi, wv.d), dst = c.any_t(yi, y);
  const memory::desc bias = has_bias ? c.md(c.input(2), plain(c.in_shape(2))) : memory::desc();
  const int prefill = sum_prefill(c);
  std::vector<ArgDef> args = {
      {DNNL_ARG_SRC, xi, plain(x)}, {DNNL_ARG_WEIGHTS, wi, wv}, {DNNL_ARG_DST, yi, plain(y), prefill}};
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.input(2), plain(c.in_shape(2))});
  c.b.algorithm = variant;
  if (deconv) {
    // ONNX output_padding adds rows at the end: oneDNN sees them as less right padding.
    for (size_t k = 0; k < n; ++k) pr[k] -= cd->output_padding[k];
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
  if (alg == algorithm::convolution_winograd) c.b.fast_algorithm = FastAlgorithm::kWinograd;
  dnnl::convolution_forward::desc d =
      has_bias ? dnnl::convolution_forward::desc(kInference, alg, src, wei, bias, dst, strides, dil, pl, pr)
               : dnnl::convolution_forward::desc(kInference, alg, src, wei, dst, strides, dil, pl, pr);
  // int8: per-output-channel scales are over the destination's channel dimension (mask 1 << 1).
  const primitive_attr attr = int8 ? int8_attr(c, args, w[0], 1 << 1, w[1] * elements(ks)) : c.attr();
  c.b.steps.push_back(make_step<dnnl::convolution_forward::primitive_desc>(d, attr, args));
}

}  // namespace floorline::kernels::onednn_detail
