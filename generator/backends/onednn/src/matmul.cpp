// oneDNN builders: Gemm (matmul or inner product) and MatMul (matmul, or matmul_flat: one GEMM).
#include <algorithm>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

void gemm(Ctx& c, const std::string& variant) {
  const Shape& a = c.in_shape(0);
  const Shape& bm = c.in_shape(1);
  const auto g = gemm_desc(c.p);  // the kernel API's one reading of the operands
  if (!g) unsupported(g.error().message);
  const bool ta = g->ta, tb = g->tb;
  if (c.p.float_attr("alpha") != 1.0 || c.p.float_attr("beta") != 1.0)
    unsupported("Gemm with alpha or beta other than 1");
  const int64_t K = g->k, N = g->n;
  const bool has_bias = c.p.inputs.size() > 2;
  const bool int8 = int8_case(c);
  if (int8) {
    if (variant != "matmul") unsupported("int8: oneDNN's matmul only");
    int8_operands(c);
  }
  const int yi = c.output(0);
  const int prefill = sum_prefill(c);
  c.b.algorithm = variant;
  if (variant == "inner_product") {
    // y = x · Wᵀ + b with W (N, K): ONNX B (K, N) is W seen transposed, B (N, K) with transB is W.
    if (ta) unsupported("inner product needs A untransposed");
    if (has_bias && elements(c.in_shape(2)) != N)
      unsupported("inner product bias must be one value per output");
    const View wv = tb ? reshaped({N, K}) : permuted({K, N}, {1, 0});
    std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), plain(a)},
                                {DNNL_ARG_WEIGHTS, c.input(1), wv},
                                {DNNL_ARG_DST, yi, plain(c.out_shape()), prefill}};
    const auto src = c.any(a), wei = c.any(dims{N, K}), dst = c.any(c.out_shape());
    if (has_bias) {
      args.push_back({DNNL_ARG_BIAS, c.input(2), reshaped({N})});
      dnnl::inner_product_forward::desc d(kInference, src, wei, c.md(c.input(2), reshaped({N})), dst);
      c.b.steps.push_back(make_step<dnnl::inner_product_forward::primitive_desc>(d, c.attr(), args));
    } else {
      dnnl::inner_product_forward::desc d(kInference, src, wei, dst);
      c.b.steps.push_back(make_step<dnnl::inner_product_forward::primitive_desc>(d, c.attr(), args));
    }
    return;
  }
  const View av = ta ? permuted(a, {1, 0}) : plain(a);
  const View bv = tb ? permuted(bm, {1, 0}) : plain(bm);
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), av},
                              {DNNL_ARG_WEIGHTS, c.input(1), bv},
                              {DNNL_ARG_DST, yi, plain(c.out_shape()), prefill}};
  const auto src = c.md(c.input(0), av), wei = c.any_t(c.input(1), dims{K, N}),
             dst = c.md(yi, plain(c.out_shape()));
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.input(2), plain(rank_padded(c.in_shape(2), 2))});
  const primitive_attr attr = int8 ? int8_attr(c, args, N, 1 << 1, K) : c.attr();
  if (has_bias) {
    const View biasv = plain(rank_padded(c.in_shape(2), 2));
    dnnl::matmul::desc d(src, wei, c.md(c.input(2), biasv), dst);
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, attr, args));
  } else {
    dnnl::matmul::desc d(src, wei, dst);
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, attr, args));
  }
}

void matmul(Ctx& c, const std::string& variant) {
  Shape as = c.in_shape(0), bs = c.in_shape(1);
  // transB (the Transpose-into-MatMul collapse): b is stored (…, N, K); oneDNN reads it through a
  // permuted view, strides and no copy, as B (…, K, N).
  const bool tb = c.p.int_attr("transB", 0) != 0;
  if (tb && bs.size() < 2) unsupported("transB needs a right operand of rank 2 or more");
  if (tb) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const size_t r = std::max(as.size(), bs.size());
  as = rank_padded(as, r);
  bs = rank_padded(bs, r);
  Shape ys(as.begin(), as.end() - 2);
  for (size_t k = 0; k + 2 < r; ++k) ys[k] = std::max(as[k], bs[k]);
  ys.push_back(as[r - 2]);
  ys.push_back(bs[r - 1]);
  const int yi = c.output(0);
  const bool int8 = int8_case(c);
  if (int8) int8_operands(c);
  if (variant == "matmul_flat") {
    // One matrix on the right (its batch dims all 1): the left operand's batch dims fold into its
    // rows, (B..., M, K) x (K, N) = (B...·M, K) x (K, N), the same buffers seen as 2-D.
    if (r < 3 || std::any_of(bs.begin(), bs.end() - 2, [](int64_t d) { return d != 1; }))
      unsupported("matmul_flat needs a batched left operand and one right matrix");
    int64_t rows = 1;
    for (size_t k = 0; k + 1 < r; ++k) rows *= as[k];
    as = {rows, as[r - 1]};
    bs = {bs[r - 2], bs[r - 1]};
    ys = {rows, ys[r - 1]};
  }
  const size_t rr = as.size();
  Shape bias_shape(rr, 1);
  bias_shape.back() = ys.back();
  const Epilogue e = epilogue_tensors(c, bias_shape);
  // B as oneDNN reads it: the stored tensor, or with transB the stored (…, N, K) seen as (…, K, N).
  std::vector<int64_t> swap_last(rr);
  for (size_t k = 0; k < rr; ++k) swap_last[k] = static_cast<int64_t>(k);
  std::swap(swap_last[rr - 1], swap_last[rr - 2]);
  Shape stored = bs;
  std::swap(stored[rr - 1], stored[rr - 2]);
  const View bv = tb ? permuted(stored, swap_last) : plain(bs);
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), plain(as)},
                              {DNNL_ARG_WEIGHTS, c.input(1), bv},
                              {DNNL_ARG_DST, yi, plain(ys), e.sum}};
  c.b.algorithm = variant;
  // A 2-D right operand is a weight matrix: oneDNN may pack it (format any), as frameworks do; a
  // transposed one is read in place.
  const auto wei = rr == 2 && !tb ? c.any_t(c.input(1), bs) : c.md(c.input(1), bv);
  if (e.bias >= 0) {
    args.push_back({DNNL_ARG_BIAS, e.bias, plain(bias_shape)});
    dnnl::matmul::desc d(c.md(c.input(0), plain(as)), wei, c.md(e.bias, plain(bias_shape)),
                         c.md(yi, plain(ys)));
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, c.attr(), args));
    return;
  }
  // int8: per-column scales are over the last destination dimension.
  const primitive_attr attr =
      int8 ? int8_attr(c, args, ys.back(), 1 << static_cast<int>(rr - 1), as.back()) : c.attr();
  dnnl::matmul::desc d(c.md(c.input(0), plain(as)), wei, c.md(yi, plain(ys)));
  c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, attr, args));
}

}  // namespace floorline::kernels::onednn_detail
