// oneDNN int8 builders: QuantizeLinear/DequantizeLinear as reorders with scales and zero
// points, and what the int8 forms of Conv, Gemm/MatMul, Add and pooling share: 8-bit operand types,
// output scales and zero points given at run time (DNNL_RUNTIME_*_VAL, as a runtime whose scales
// are known only when the model is loaded), oneDNN 2.x semantics:
//   dst = saturate(round(output_scale · (Σ (src − src_zp) · wei + bias)) + dst_zp).
#include <cmath>
#include <tuple>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

namespace {

dt dt_of(const std::string& t) {
  return t == "u8" ? dt::u8 : dt::s8;
}
// The integers drawn for 8-bit data, and for its zero points (near the middle of the range, so
// that data and zero point together span it).
std::pair<int64_t, int64_t> data_range(dt t) {
  return t == dt::u8 ? std::pair<int64_t, int64_t>{0, 255} : std::pair<int64_t, int64_t>{-128, 127};
}
std::pair<int64_t, int64_t> zero_point_range(dt t) {
  return t == dt::u8 ? std::pair<int64_t, int64_t>{100, 150} : std::pair<int64_t, int64_t>{-20, 20};
}

Quantization need_quantization(const Ctx& c) {
  const auto q = quantization(c.p);
  if (!q)
    unsupported(fmt::format("{} has no int8 form here (qtypes '{}')", c.p.op, c.p.string_attr("qtypes", "")));
  return *q;
}

int zero_point_tensor(Ctx& c, dt of) {
  const int t = c.extra({1});
  const auto [lo, hi] = zero_point_range(of);
  c.set_integer(t, dt::s32, lo, hi);
  return t;
}

}  // namespace

bool int8_case(const Ctx& c) {
  return c.spec.variant.dtype == DType::kInt8;
}

void int8_operands(Ctx& c) {
  const Quantization q = need_quantization(c);
  size_t j = 0;
  for (size_t k = 0; k < c.p.inputs.size(); ++k) {
    const int t = c.input(k);
    if (c.p.inputs[k].role == "bias") {  // int32, in the accumulator's scale
      c.set_integer(t, dt::s32, -2000, 2000);
      continue;
    }
    if (j >= q.inputs.size())
      unsupported(fmt::format("{} has more data inputs than quantized types", c.p.op));
    const dt type = dt_of(q.inputs[j++]);
    auto [lo, hi] = data_range(type);
    // Weights in 7 bits, as x86 runtimes quantize them for CPUs without VNNI: there u8 × s8 products
    // are summed in pairs in int16 (vpmaddubsw), which saturates with full-range weights (oneDNN's
    // "int8 computations" notes; fbgemm's reduce_range). The time does not depend on the values.
    const bool weights = j == 2 && (c.p.kind == LayerKind::kConv || c.p.kind == LayerKind::kGemm ||
                                    c.p.kind == LayerKind::kMatMul);
    if (weights && type == dt::s8) std::tie(lo, hi) = std::pair<int64_t, int64_t>{-64, 63};
    c.set_integer(t, type, lo, hi);
  }
  for (size_t k = 0; k < c.p.outputs.size(); ++k)
    c.b.tensors[static_cast<size_t>(c.output(k))].type = dt_of(q.output);
}

primitive_attr int8_attr(Ctx& c, std::vector<ArgDef>& args, int64_t channels, int channel_mask, int64_t k) {
  const Quantization q = need_quantization(c);
  if (!c.p.post_ops.empty()) unsupported("Floorline fuses no epilogue into an int8 case");
  if (q.zero_points.size() > 2 && q.zero_points[1] != 0)
    unsupported("oneDNN 2.6 int8 convolutions and matmuls take no weight zero points");
  primitive_attr a = c.attr(false);
  const int64_t n = q.per_channel ? channels : 1;
  // x_scale · w_scale / y_scale, drawn so that the outputs spread over the 8-bit range: Σ of k
  // products of ±~74 (uniform 8-bit data less its zero point) by ±~37 (7-bit weights) has a
  // deviation of ~2700·√k.
  // oneDNN 2.6's int8 convolutions take no run-time output scales: the values are fixed when the
  // primitive is created (as a runtime does once the model is loaded), the same for every call.
  const int s = c.extra({n}, Fill::kNone);
  c.set_f32_only(s);
  auto& values = c.b.tensors[static_cast<size_t>(s)].values;
  values.resize(static_cast<size_t>(n));
  fill_random(values.data(), n, Fill::kPositive, static_cast<uint64_t>(n * 7919 + k));
  for (auto& v : values)
    v *= static_cast<float>(0.015 / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))));
  a.set_output_scales(q.per_channel ? channel_mask : 0, values);
  if (q.zero_points.front() != 0) {
    const int zp = zero_point_tensor(c, dt_of(q.inputs.front()));
    a.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp, plain({1})});
  }
  if (q.zero_points.back() != 0) {
    const int zp = zero_point_tensor(c, dt_of(q.output));
    a.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, zp, plain({1})});
  }
  return a;
}

// QuantizeLinear (f32 → 8 bits: output scale 1 / y_scale, dst zero point) and DequantizeLinear
// (8 bits → f32: src zero point, output scale x_scale), one reorder each.
void quantize(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const bool q = c.p.kind == LayerKind::kQuantizeLinear;
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  const int64_t n = elements(c.in_shape(1));
  const int64_t axis = c.p.int_attr("axis", 1);
  const bool has_zp = c.p.inputs.size() > 2;
  if (has_zp && elements(c.in_shape(2)) > 1)
    unsupported("oneDNN 2.6 reorders take one zero point (per tensor)");
  const dt t8 = dt_of(c.p.string_attr(q ? "to" : "from", "u8"));
  const int xi = c.input(0), si = c.input(1), yi = c.output(0);
  c.set_f32_only(si);
  c.set_fill(si, Fill::kPositive);
  if (q) {
    c.b.tensors[static_cast<size_t>(xi)].type = dt::f32;
    c.b.tensors[static_cast<size_t>(yi)].type = t8;
    c.b.tensors[static_cast<size_t>(si)].scale = 0.01f;  // x in [−1, 1) spans ±100 steps
  } else {
    const auto [lo, hi] = data_range(t8);
    c.set_integer(xi, t8, lo, hi);
    c.b.tensors[static_cast<size_t>(yi)].type = dt::f32;
  }
  std::vector<ArgDef> args = {{DNNL_ARG_FROM, xi, plain(x)}, {DNNL_ARG_TO, yi, plain(y)}};
  int scales = si;
  if (q) {
    scales = c.extra(c.in_shape(1), Fill::kPositive);
    c.set_f32_only(scales);
    c.b.tensors[static_cast<size_t>(scales)].reciprocal_of = si;
  }
  primitive_attr a = c.attr(false);
  a.set_output_scales(n > 1 ? 1 << axis : 0, {DNNL_RUNTIME_F32_VAL});
  args.push_back({DNNL_ARG_ATTR_OUTPUT_SCALES, scales, plain({n})});
  if (has_zp) {
    const auto [lo, hi] = zero_point_range(t8);
    c.set_integer(c.input(2), dt::s32, lo, hi);
    a.set_zero_points(q ? DNNL_ARG_DST : DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | (q ? DNNL_ARG_DST : DNNL_ARG_SRC), c.input(2), plain({1})});
  }
  dnnl::reorder::primitive_desc rpd(cpu_engine(), c.md(xi, plain(x)), cpu_engine(), c.md(yi, plain(y)), a,
                                    true);
  if (!rpd) unsupported(fmt::format("oneDNN has no reorder with scales and zero points for {}", c.p.key));
  c.b.algorithm = variant;
  c.b.iterate = false;
  c.b.steps.push_back(step(std::move(rpd), std::move(args)));
}

}  // namespace floorline::kernels::onednn_detail
