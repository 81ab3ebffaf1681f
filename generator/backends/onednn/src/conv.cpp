// oneDNN builders: Conv and ConvTranspose (convolution_forward, deconvolution_forward; a 1x1
// convolution also as a matmul; at T threads also as T one-thread convolutions run side by side).
#include <omp.h>

#include <algorithm>

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

// The layout of a split case's windowed tensor (src at batch N > 1, dst), as its parts chose it:
// one format for every part, in which each part's window is contiguous: a range of images
// (N outermost: NCHW, NHWC, nChw8c, nChw16c), or at batch 1 a range of channel blocks (NCHW,
// nChw8c, nChw16c). Sets `whole` and each part's offset; unsupported otherwise.
void set_windows(Ctx& c, int arg, int tensor, const Shape& full, bool by_images,
                 const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  using tag = memory::format_tag;
  const memory::desc first = c.b.steps[0].pd().query_md(dnnl::query::exec_arg_md, arg);
  const auto t = format_tag_of(first);
  const std::vector<tag> contiguous = by_images
                                          ? std::vector<tag>{tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c}
                                          : std::vector<tag>{tag::nchw, tag::nChw8c, tag::nChw16c};
  if (!t || std::find(contiguous.begin(), contiguous.end(), *t) == contiguous.end())
    unsupported(
        fmt::format("convolution_direct_split: its parts chose {}, in which a part's {} are not contiguous",
                    format_name(first), by_images ? "images" : "channels"));
  const memory::desc whole(dims(full.begin(), full.end()), c.type_of(tensor), *t);
  const int64_t n = full[0];
  const int64_t per_image = static_cast<int64_t>(whole.get_size()) / n;
  const int64_t per_channel =
      static_cast<int64_t>(memory::data_type_size(c.type_of(tensor))) * full[2] * full[3];
  for (size_t i = 0; i < c.b.steps.size(); ++i) {
    StepDef& st = c.b.steps[i];
    const memory::desc got = st.pd().query_md(dnnl::query::exec_arg_md, arg);
    if (got != memory::desc(got.dims(), got.data_type(), *t))
      unsupported(fmt::format("convolution_direct_split: its parts chose different layouts ({}, {})",
                              format_name(first), format_name(got)));
    for (auto& a : st.args)
      if (a.arg == arg) {
        a.whole = whole;
        a.whole_offset_bytes = ranges[i].first * (by_images ? per_image : per_channel);
      }
  }
}

// "convolution_direct_split": at T threads the convolution cut into T one-thread convolutions that
// run at the same time on OpenMP's threads (Build::parallel), as a runtime that gives each thread
// its own slice of the output runs it: ONNX Runtime's NCHWc convolution (MLAS) hands its threads
// output channel blocks and rows. At batch 1 each part computes a range of output channel blocks
// from the whole input; at batch N > 1 a range of images. A part is oneDNN's first direct
// implementation created for one thread (oneDNN runs a primitive sequentially inside a parallel
// region), with its own slice of the weights and bias, packed once; a fused residual sum adds into
// the output, prefilled whole once. On resnet18's 3x3 convolutions
// at batch 1 on 2 threads (AVX2), oneDNN's threads scaled 1.6-1.8x, ONNX Runtime's further.
void conv_split(Ctx& c, const ConvDesc& cd, const Shape& x, const Shape& w, const Shape& y) {
  constexpr std::string_view kName = "convolution_direct_split";
  if (c.threads < 2)
    unsupported(fmt::format("{} at one thread is the plain convolution (case convolution_direct)", kName));
  if (cd.transposed || cd.group != 1) unsupported(fmt::format("{} cuts ungrouped convolutions only", kName));
  if (cd.spatial() != 2) unsupported(fmt::format("{} cuts 2-D convolutions only", kName));
  const int64_t n = x[0], oc = w[0];
  const bool by_images = n > 1;
  const int64_t unit = by_images ? 1 : std::max<int64_t>(1, native_channel_block());
  if (oc % unit)
    unsupported(fmt::format("{}: {} output channels are not whole blocks of {}", kName, oc, unit));
  const int64_t units = by_images ? n : oc / unit;
  const int parts = static_cast<int>(std::min<int64_t>(c.threads, units));
  if (parts < 2)
    unsupported(fmt::format("{}: one {} cannot be cut over {} threads", kName,
                            by_images ? "image" : "channel block", c.threads));
  std::vector<std::pair<int64_t, int64_t>> ranges;  // (first, count), in images or channels
  for (int i = 0; i < parts; ++i) {
    const int64_t b = units * i / parts, e = units * (i + 1) / parts;
    ranges.push_back({b * unit, (e - b) * unit});
  }
  dims strides(cd.strides), pl(cd.pads_begin), pr(cd.pads_end), dil;
  for (const int64_t d : cd.dilations) dil.push_back(d - 1);
  const int xi = c.input(0), wi = c.input(1), yi = c.output(0);
  const bool has_bias = c.p.inputs.size() > 2;
  const int bi = has_bias ? c.input(2) : -1;
  const primitive_attr attr = c.attr();
  // A fused residual sum: dst is prefilled whole, once, before the parts add into their windows.
  const int prefill = sum_prefill(c);
  const int64_t x_image = elements(x) / n, y_image = elements(y) / n, w_filter = elements(w) / oc;
  c.b.algorithm = std::string(kName);
  c.b.parallel = true;
  c.b.iterate = false;
  // Each part is created for the one thread it runs on, and takes oneDNN's first implementation
  // that writes a layout its window is contiguous in (at batch 1 not NHWC, which AVX-512's brgconv
  // picks), the same for every part.
  using tag = memory::format_tag;
  auto fits = [&](const StepDef& st, const std::string& impl) {
    if (!impl.empty() && st.pd().impl_info_str() != impl) return false;
    if (by_images) return true;
    const auto t = format_tag_of(st.pd().query_md(dnnl::query::exec_arg_md, DNNL_ARG_DST));
    return t == tag::nchw || t == tag::nChw8c || t == tag::nChw16c;
  };
  const OmpThreadsScope one(1);
  std::string impl;
  for (const auto& [first, count] : ranges) {
    Shape px = x, pw = w, py = y;
    (by_images ? px[0] : pw[0]) = count;
    py[by_images ? 0 : 1] = count;
    const View xv = by_images ? View{dims(px.begin(), px.end()), plain_strides(dims(px.begin(), px.end())),
                                     first * x_image}
                              : plain(x);
    const View wv = by_images ? plain(w)
                              : View{dims(pw.begin(), pw.end()), plain_strides(dims(pw.begin(), pw.end())),
                                     first * w_filter};
    const View yv{dims(py.begin(), py.end()), plain_strides(dims(py.begin(), py.end())),
                  by_images ? first * y_image : first * y[2] * y[3]};
    std::vector<ArgDef> args = {
        {DNNL_ARG_SRC, xi, xv}, {DNNL_ARG_WEIGHTS, wi, wv}, {DNNL_ARG_DST, yi, yv, prefill}};
    const auto src = c.any_t(xi, xv.d), wei = c.any_t(wi, wv.d), dst = c.any_t(yi, yv.d);
    if (has_bias) {
      const View bv = by_images ? plain(c.in_shape(2)) : View{{count}, {1}, first};
      args.push_back({DNNL_ARG_BIAS, bi, bv});
      const dnnl::convolution_forward::desc d(kInference, algorithm::convolution_direct, src, wei,
                                              c.md(bi, bv), dst, strides, dil, pl, pr);
      c.b.steps.push_back(make_step<dnnl::convolution_forward::primitive_desc>(d, attr, std::move(args)));
    } else {
      const dnnl::convolution_forward::desc d(kInference, algorithm::convolution_direct, src, wei, dst,
                                              strides, dil, pl, pr);
      c.b.steps.push_back(make_step<dnnl::convolution_forward::primitive_desc>(d, attr, std::move(args)));
    }
    StepDef& st = c.b.steps.back();
    while (!fits(st, impl))
      if (!st.next_impl())
        unsupported(
            fmt::format("{}: no implementation {} writes a layout each part's channels are contiguous in",
                        kName, impl.empty() ? "of oneDNN" : impl));
    if (impl.empty()) impl = st.pd().impl_info_str();
  }
  std::string cut;
  for (const auto& [first, count] : ranges)
    cut += fmt::format("{}{}-{}", cut.empty() ? "" : ", ", first, first + count - 1);
  c.b.impl_note = fmt::format(", {} one-thread convolutions side by side on {} {}", parts,
                              by_images ? "images" : "output channels", cut);
  set_windows(c, DNNL_ARG_DST, yi, y, by_images, ranges);
  if (by_images) {
    set_windows(c, DNNL_ARG_SRC, xi, x, true, ranges);
  } else {
    const memory::desc src0 = c.b.steps[0].pd().query_md(dnnl::query::exec_arg_md, DNNL_ARG_SRC);
    for (const auto& st : c.b.steps)
      if (st.pd().query_md(dnnl::query::exec_arg_md, DNNL_ARG_SRC) != src0)
        unsupported(fmt::format("{}: its parts read the input in different layouts", kName));
  }
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
  // "convolution_direct@channels_last": the direct convolution with its activations held NHWC
  // (acdb), where "any" lets a grouped convolution pick channel blocks of the group's width: a
  // runtime that keeps NHWC between layers (XNNPACK's pointwise convolutions write it) runs the
  // grouped and depthwise ones so, without a conversion on each side (docs/BACKENDS.md).
  const bool channels_last = layout_suffix(variant) == "channels_last";
  if (channels_last) {
    if (deconv || int8 || g == 1)
      unsupported(
          "convolution_direct@channels_last: f32 grouped convolutions only (an ungrouped one's "
          "implementations choose NHWC themselves where they want it)");
  }
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
  if (variant == "convolution_direct_split") {
    conv_split(c, *cd, x, w, y);
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
  const auto src = channels_last ? activation_md(c, xi, x, variant) : c.any_t(xi, x);
  const auto dst = channels_last ? activation_md(c, yi, y, variant) : c.any_t(yi, y);
  const auto wei = c.any_t(wi, wv.d);
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
