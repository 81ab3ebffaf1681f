// The layer-kind table: one row per LayerKind. Adding a kind = one row here plus its line in
// common/include/floorline/common/layer_kind.hpp (docs/ADDING_A_LAYER.md). FLOPs and bytes
// formulas are documented in docs/LAYERS.md.
#include <algorithm>
#include <array>
#include <cctype>
#include <numeric>

#include "floorline/model_processor/layer.hpp"
#include "kinds.hpp"

namespace floorline::mp {
namespace {

using CostFn = int64_t (*)(const LayerConfig&);
using FixupFn = void (*)(const NodeView&, LayerConfig&);

// ---------------------------------------------------------------------------------------------
// Cost formulas. They read the config only, so a config from the database is costed the same way.

const TensorArg* arg(const LayerConfig& c, std::string_view role) {
  for (const auto& a : c.inputs)
    if (a.role == role) return &a;
  return nullptr;
}
int64_t arg_numel(const LayerConfig& c, std::string_view role) {
  const auto* a = arg(c, role);
  return a ? numel(a->shape) : -1;
}
int64_t out_numel(const LayerConfig& c) {
  return c.outputs.empty() ? -1 : numel(c.outputs[0].shape);
}
// kCostOverflow and -1 propagate: a product or sum with an overflowed factor has overflowed, one
// with an unknown factor is unknown; a result that does not fit int64 is kCostOverflow.
int64_t mul(int64_t a, int64_t b) {
  if (a == kCostOverflow || b == kCostOverflow) return kCostOverflow;
  if (a < 0 || b < 0) return -1;
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kCostOverflow : r;
}
int64_t add(int64_t a, int64_t b) {
  if (a == kCostOverflow || b == kCostOverflow) return kCostOverflow;
  if (a < 0 || b < 0) return -1;
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kCostOverflow : r;
}
int64_t tensor_bytes(const TensorArg& t) {
  return mul(numel(t.shape), dtype_size(t.dtype));
}

int64_t zero(const LayerConfig&) {
  return 0;
}

// Compulsory traffic: all inputs read once, all outputs written once.
int64_t io_bytes(const LayerConfig& c) {
  int64_t b = 0;
  for (const auto& t : c.inputs) b = add(b, tensor_bytes(t));
  for (const auto& t : c.outputs) b = add(b, tensor_bytes(t));
  return b;
}
// Gather and Slice read only the elements they write (plus Gather's indices).
int64_t gather_bytes(const LayerConfig& c) {
  int64_t b = c.outputs.empty() ? -1 : mul(2, tensor_bytes(c.outputs[0]));
  if (const auto* idx = arg(c, "indices")) b = add(b, tensor_bytes(*idx));
  return b;
}
int64_t slice_bytes(const LayerConfig& c) {
  return c.outputs.empty() ? -1 : mul(2, tensor_bytes(c.outputs[0]));
}

template <int kOpsPerOutput>
int64_t per_output(const LayerConfig& c) {
  return mul(kOpsPerOutput, out_numel(c));
}
template <int kOpsPerInput>
int64_t per_input(const LayerConfig& c) {
  return mul(kOpsPerInput, arg_numel(c, "x"));
}

int64_t spatial_product(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t k = from; k < s.size(); ++k) p = mul(p, s[k]);
  return p;
}

// Conv: 2 · N·Cout·∏out_spatial · (Cin/group)·∏kernel, plus one add per output for the bias.
int64_t conv_flops(const LayerConfig& c) {
  const auto* w = arg(c, "w");
  if (!w || w->shape.size() < 2) return -1;
  const int64_t macs_per_output = mul(w->shape[1], spatial_product(w->shape, 2));
  int64_t f = mul(2, mul(out_numel(c), macs_per_output));
  if (arg(c, "bias")) f = add(f, out_numel(c));
  return f;
}
// ConvTranspose: each input element scatters into (Cout/group)·∏kernel outputs: 2·N·Cin·∏in·(Cout/g)·∏k.
int64_t conv_transpose_flops(const LayerConfig& c) {
  const auto* w = arg(c, "w");
  if (!w || w->shape.size() < 2) return -1;
  int64_t f = mul(2, mul(arg_numel(c, "x"), mul(w->shape[1], spatial_product(w->shape, 2))));
  if (arg(c, "bias")) f = add(f, out_numel(c));
  return f;
}
// Gemm: 2·M·N·K, plus M·N for a bias (C).
int64_t gemm_flops(const LayerConfig& c) {
  const auto* a = arg(c, "a");
  if (!a || a->shape.size() != 2) return -1;
  const int64_t k = c.attr_int("transA", 0) ? a->shape[0] : a->shape[1];
  int64_t f = mul(2, mul(out_numel(c), k));
  if (arg(c, "bias")) f = add(f, out_numel(c));
  return f;
}
// MatMul: 2·(batch·M·N)·K with K the last dim of A (NumPy matmul semantics).
int64_t matmul_flops(const LayerConfig& c) {
  const auto* a = arg(c, "a");
  if (!a || a->shape.empty()) return -1;
  return mul(2, mul(out_numel(c), a->shape.back()));
}
// MatMulNBits: y[M×N] = A[M×K] · dequantize(B)ᵀ (+ bias): 2·M·N·K for the product (M: A's leading
// dims folded), plus one subtract and one multiply per weight to dequantize it, (q − zero_point) ·
// scale, done once per call (ONNX Runtime's contrib_ops/cpu/quantization/matmul_nbits.cc), plus
// M·N for the bias.
int64_t matmul_nbits_flops(const LayerConfig& c) {
  const int64_t k = c.attr_int("K", -1), n = c.attr_int("N", -1);
  if (k < 0 || n < 0) return -1;
  int64_t f = add(mul(2, mul(out_numel(c), k)), mul(2, mul(k, n)));
  if (arg(c, "bias")) f = add(f, out_numel(c));
  return f;
}
// LRN: per element a windowed sum of squares (2·size) then bias + alpha/size·sum, pow and divide (4).
int64_t lrn_flops(const LayerConfig& c) {
  return mul(add(mul(2, c.attr_int("size", 1)), 4), arg_numel(c, "x"));
}
// Pooling: one op per kernel element per output; average adds one divide per output.
int64_t pool_flops(const LayerConfig& c) {
  int64_t per = 1;
  for (int64_t k : c.attr_ints("kernel")) per = mul(per, k);
  if (c.kind == LayerKind::kAveragePool) per = add(per, 1);
  return mul(per, out_numel(c));
}
// Sum: one add per output element for each input after the first.
int64_t sum_flops(const LayerConfig& c) {
  return mul(static_cast<int64_t>(c.inputs.size()) - 1, out_numel(c));
}
// Mean: the Sum of its k inputs, then one divide per output: k · n(y).
int64_t mean_flops(const LayerConfig& c) {
  return mul(static_cast<int64_t>(c.inputs.size()), out_numel(c));
}
// LSTM, GRU, RNN: per time step and direction, the gate GEMMs of the ONNX equations
// (onnx/docs/Operators.md, LSTM/GRU/RNN: Xt·Wᵀ and Ht-1·Rᵀ for each of G gates, 2 FLOPs per
// multiply-add) plus the element-wise work per hidden unit and batch row, counted by the
// conventions of docs/LAYERS.md (sigmoid 4, tanh 1, add/mul 1):
//   LSTM (G = 4): 4 gates × (Wx + Rh + bias) 8, 3 sigmoids 12, 2 tanh 2, Ct = f⊙C + i⊙c 3,
//                 Ht = o⊙h(Ct) 1 → 26; peepholes (P) add 3 × (mul + add) = 6.
//   GRU (G = 3):  3 gates × 2 adds 6, 2 sigmoids 8, r⊙(…) 1, tanh 1, Ht = (1−z)⊙h + z⊙Ht-1 3 → 19.
//   RNN (G = 1):  2 adds + the activation (tanh 1) → 3.
// Total: T · D · (2 · N · G·H · (I + H) + e · N · H), T, N from X (layout 0: [T, N, I]; layout 1:
// [N, T, I]), D and H from R [D, G·H, H].
int64_t recurrent_flops(const LayerConfig& c) {
  const auto* x = arg(c, "x");
  const auto* r = arg(c, "r");
  if (!x || !r || x->shape.size() != 3 || r->shape.size() != 3) return -1;
  const bool batch_first = c.attr_int("layout", 0) != 0;
  const int64_t t = batch_first ? x->shape[1] : x->shape[0], n = batch_first ? x->shape[0] : x->shape[1];
  const int64_t in = x->shape[2], d = r->shape[0], h = r->shape[2];
  const int64_t gates = c.kind == LayerKind::kLSTM ? 4 : c.kind == LayerKind::kGRU ? 3 : 1;
  int64_t elementwise = c.kind == LayerKind::kLSTM ? 26 : c.kind == LayerKind::kGRU ? 19 : 3;
  if (c.kind == LayerKind::kLSTM && arg(c, "p")) elementwise += 6;
  const int64_t gemm = mul(2, mul(n, mul(mul(gates, h), add(in, h))));
  const int64_t step = add(gemm, mul(elementwise, mul(n, h)));
  return mul(mul(t, d), step);
}
// --- detection heads. Comparisons count as FLOPs, as for ArgMax and MaxPool.
int64_t ceil_log2(int64_t n) {
  int64_t l = 0;
  while (l < 62 && (int64_t{1} << l) < n) ++l;
  return l;
}
// TopK: per slice along the axis (n elements, K kept), a selection that keeps the K best in a
// heap: n · ⌈log₂ K⌉ comparisons (the ISO C++ bound of std::partial_sort, [partial.sort]: about
// N · log(M)), at least one per element (K = 1 is ArgMax's n).
int64_t topk_flops(const LayerConfig& c) {
  const auto* x = arg(c, "x");
  if (!x || c.outputs.empty()) return -1;
  const int64_t axis = c.attr_int("axis", -1);
  if (axis < 0 || axis >= static_cast<int64_t>(x->shape.size()) ||
      c.outputs[0].shape.size() != x->shape.size())
    return -1;
  const int64_t k = c.outputs[0].shape[static_cast<size_t>(axis)];
  if (k < 0) return -1;
  return mul(numel(x->shape), std::max<int64_t>(1, ceil_log2(k)));
}
// NonMaxSuppression (ONNX greedy definition; torchvision's nms kernel does the same): per batch
// and class, the S boxes' areas (3 FLOPs each: two subtractions, a product) and a sort of the S
// scores (S · ⌈log₂ S⌉ comparisons); then each selected box is compared with at most the S
// candidates: one IoU test is 13 (intersection: 2 max, 2 min, 2 subtractions, 2 clamps at 0, a
// product; union: an add and a subtract; inter > t · union: a product and a compare). With B·C·S
// the scores' elements and K the selected count (the output's rows): B·C·S·(⌈log₂ S⌉ + 3) + 13·K·S.
int64_t nms_flops(const LayerConfig& c) {
  const auto* s = arg(c, "scores");
  if (!s || s->shape.size() != 3 || c.outputs.empty() || c.outputs[0].shape.empty()) return -1;
  const int64_t boxes = s->shape[2], selected = c.outputs[0].shape[0];
  return add(mul(numel(s->shape), add(ceil_log2(boxes), 3)), mul(13, mul(selected, boxes)));
}
std::string str_or(const LayerConfig& c, std::string_view name, std::string fallback);  // (below)

// --- sampling and scatter. Per sample point, the bilinear interpolation's work on one
// channel: 4 weight × value products, 3 adds (RoiAlign max mode: 3 maxes) and 1 accumulate = 8;
// the sample's coordinates and weights (2 multiply-adds for y and x, then ly, lx, hy, hx and the 4
// weight products = 10) are computed once per point and shared by every channel, as ONNX
// Runtime's and torchvision's CPU kernels precompute them.
//
// RoiAlign (ONNX RoiAlign-16): y [R, C, oh, ow]; s = sampling_ratio² sample points per bin, or
// with sampling_ratio 0 (adaptive: ⌈roi_h / oh⌉ × ⌈roi_w / ow⌉, which depends on the boxes) the
// stated assumption s = 2 × 2 (docs/LAYERS.md; the kernels are fed boxes that realise it).
// FLOPs: n(y) · (8 · s + 1) (+1: the average's divide) + 10 · R · oh · ow · s.
int64_t roi_samples(const LayerConfig& c) {
  const int64_t ratio = c.attr_int("sampling_ratio", 0);
  return ratio > 0 ? mul(ratio, ratio) : 4;
}
int64_t roi_align_flops(const LayerConfig& c) {
  if (c.outputs.empty() || c.outputs[0].shape.size() != 4) return -1;
  const Shape& y = c.outputs[0].shape;
  const int64_t s = roi_samples(c), points = mul(mul(y[0], mul(y[2], y[3])), s);
  return add(mul(out_numel(c), add(mul(8, s), 1)), mul(10, points));
}
// RoiAlign reads at most the 4 neighbours of each sample point per channel, and X at most once.
int64_t roi_align_bytes(const LayerConfig& c) {
  const auto* x = arg(c, "x");
  if (!x || c.outputs.empty()) return -1;
  const int64_t reads = mul(mul(4, roi_samples(c)), mul(out_numel(c), dtype_size(x->dtype)));
  int64_t b = reads < 0 ? -1 : std::min(tensor_bytes(*x), reads);
  for (const auto& t : c.inputs)
    if (&t != x) b = add(b, tensor_bytes(t));
  return add(b, tensor_bytes(c.outputs[0]));
}
// GridSample (ONNX GridSample-16): y [N, C, Ho, Wo]. Per output element: bilinear 9 (two
// products and an add per corner pair, then the same across rows: dy2·(dx2·p11 + dx1·p12) +
// dy1·(dx2·p21 + dx1·p22)), bicubic 35 (4 rows of 4 taps: 4 products and 3 adds each, then the
// same across the rows), nearest 0 (a copy). Per grid point, shared by the channels: the
// denormalization of x and y (4), then bilinear floor and weights 6 (total 10), nearest rounding 2
// (6), bicubic floor, fractions and 2 × 4 Keys coefficients of 6 each 52 (56).
// FLOPs: n(y) · e + N · Ho · Wo · p. Padding's clamping or reflection is not counted.
struct GridCost {
  int64_t per_element, per_point, neighbours;
};
GridCost grid_cost(const LayerConfig& c) {
  const std::string mode = str_or(c, "mode", "bilinear");
  if (mode == "nearest") return {0, 6, 1};
  if (mode == "bicubic") return {35, 56, 16};
  return {9, 10, 4};
}
int64_t grid_sample_flops(const LayerConfig& c) {
  if (c.outputs.empty() || c.outputs[0].shape.size() != 4) return -1;
  const Shape& y = c.outputs[0].shape;
  const GridCost g = grid_cost(c);
  return add(mul(out_numel(c), g.per_element), mul(g.per_point, mul(y[0], mul(y[2], y[3]))));
}
// GridSample reads at most its neighbours per output element, and X at most once.
int64_t grid_sample_bytes(const LayerConfig& c) {
  const auto* x = arg(c, "x");
  const auto* grid = arg(c, "grid");
  if (!x || !grid || c.outputs.empty()) return -1;
  const int64_t reads = mul(grid_cost(c).neighbours, mul(out_numel(c), dtype_size(x->dtype)));
  const int64_t xb = reads < 0 ? -1 : std::min(tensor_bytes(*x), reads);
  return add(add(xb, tensor_bytes(*grid)), tensor_bytes(c.outputs[0]));
}
// ScatterElements: a copy of data (no FLOPs) and one add, multiply, max or min per update element
// with a reduction (opset 16/18); none is data movement.
int64_t scatter_elements_flops(const LayerConfig& c) {
  return str_or(c, "reduction", "none") == "none" ? 0 : arg_numel(c, "updates");
}
int64_t global_pool_flops(const LayerConfig& c) {
  return add(arg_numel(c, "x"), c.kind == LayerKind::kGlobalAveragePool ? out_numel(c) : 0);
}
int64_t reduce_flops(const LayerConfig& c) {
  return add(arg_numel(c, "x"), c.kind == LayerKind::kReduceMean ? out_numel(c) : 0);
}

// ---------------------------------------------------------------------------------------------
// Attribute fix-ups: what the generic normalizer (node attributes + schema defaults + parameter
// inputs) cannot know.

Attr* find(LayerConfig& c, std::string_view name) {
  for (auto& a : c.attrs)
    if (a.name == name) return &a;
  return nullptr;
}
void erase(LayerConfig& c, std::initializer_list<std::string_view> names) {
  c.attrs.erase(std::remove_if(c.attrs.begin(), c.attrs.end(),
                               [&](const Attr& a) {
                                 return std::find(names.begin(), names.end(), a.name) != names.end();
                               }),
                c.attrs.end());
}
void set(LayerConfig& c, std::string name, AttrValue v) {
  if (auto* a = find(c, name))
    a->value = std::move(v);
  else
    c.attrs.push_back({std::move(name), std::move(v)});
}
std::vector<int64_t> ints_or(const LayerConfig& c, std::string_view name, size_t n, int64_t fill) {
  auto v = c.attr_ints(name);
  if (v.empty()) v.assign(n, fill);
  return v;
}
std::string str_or(const LayerConfig& c, std::string_view name, std::string fallback) {
  const auto* a = c.find_attr(name);
  if (a && std::holds_alternative<std::string>(a->value)) return std::get<std::string>(a->value);
  return fallback;
}
int64_t input_rank(const LayerConfig& c) {
  const auto* x = c.inputs.empty() ? nullptr : &c.inputs[0];
  return x ? static_cast<int64_t>(x->shape.size()) : 0;
}
int64_t positive_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}
void normalize_axis_attr(LayerConfig& c, std::string_view name, int64_t fallback) {
  set(c, std::string(name), positive_axis(c.attr_int(name, fallback), input_rank(c)));
}
// Move attributes into a fixed order (names not present are skipped); the rest follow, sorted.
void order(LayerConfig& c, std::initializer_list<std::string_view> names) {
  std::vector<Attr> ordered;
  for (auto n : names)
    if (auto* a = find(c, n)) ordered.push_back(*a);
  for (auto& a : c.attrs)
    if (std::find(names.begin(), names.end(), a.name) == names.end()) ordered.push_back(a);
  c.attrs = std::move(ordered);
}

// Explicit pads from auto_pad (ONNX Conv/Pool spec): SAME_* pads so that out = ceil(in / stride),
// the odd pixel at the end (SAME_UPPER) or the beginning (SAME_LOWER); VALID pads nothing.
std::vector<int64_t> resolve_pads(const std::string& auto_pad, const Shape& x,
                                  const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dil, std::vector<int64_t> pads) {
  const size_t n = kernel.size();
  if (pads.size() != 2 * n) pads.assign(2 * n, 0);
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * n, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") return pads;
  if (strides.size() != n || dil.size() != n) return pads;
  for (size_t i = 0; i < n; ++i) {
    const int64_t in = x.size() > i + 2 ? x[i + 2] : -1;
    // validate_graph refuses strides < 1 and values past 2^31; this keeps the formula total anyway.
    if (in < 0 || strides[i] < 1 || dil[i] < 1 || kernel[i] < 1) return pads;
    const int64_t out = in / strides[i] + (in % strides[i] != 0);
    int64_t span, reach, total;
    if (__builtin_mul_overflow(out - 1, strides[i], &span) ||
        __builtin_mul_overflow(kernel[i] - 1, dil[i], &reach) || __builtin_add_overflow(span, reach, &total))
      return pads;
    total = std::max<int64_t>(0, total + 1 - in);
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + n] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

// The spatial geometry shared by Conv and ConvTranspose: kernel from the weights, defaults filled.
struct ConvGeometry {
  const TensorArg* x = nullptr;
  size_t n = 0;  // spatial dimensions
  std::vector<int64_t> kernel, strides, dil;
};
std::optional<ConvGeometry> conv_geometry(const LayerConfig& c) {
  ConvGeometry g;
  g.x = arg(c, "x");
  const auto* w = arg(c, "w");
  if (!g.x || !w || w->shape.size() < 3) return std::nullopt;
  g.n = w->shape.size() - 2;
  g.kernel.assign(w->shape.begin() + 2, w->shape.end());
  g.strides = ints_or(c, "strides", g.n, 1);
  g.dil = ints_or(c, "dilations", g.n, 1);
  return g;
}

void fix_conv(const NodeView&, LayerConfig& c) {
  const auto g = conv_geometry(c);
  if (!g) return;
  const auto pads = resolve_pads(str_or(c, "auto_pad", "NOTSET"), g->x->shape, g->kernel, g->strides, g->dil,
                                 c.attr_ints("pads"));
  const int64_t group = c.attr_int("group", 1);
  c.attrs = {{"pads", pads}, {"strides", g->strides}, {"dil", g->dil}, {"group", group}};
}

void fix_conv_transpose(const NodeView&, LayerConfig& c) {
  const auto g = conv_geometry(c);
  if (!g) return;
  const auto* x = g->x;
  const size_t n = g->n;
  const auto& kernel = g->kernel;
  const auto& strides = g->strides;
  const auto& dil = g->dil;
  const auto out_pad = ints_or(c, "output_padding", n, 0);
  auto pads = ints_or(c, "pads", 2 * n, 0);
  const auto auto_pad = str_or(c, "auto_pad", "NOTSET");
  auto out_shape = c.attr_ints("output_shape");
  const bool sizes_agree =
      strides.size() == n && dil.size() == n && out_pad.size() == n && pads.size() == 2 * n;
  if (sizes_agree && out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    for (size_t i = 0; i < n && x->shape.size() > i + 2; ++i)
      out_shape.push_back(mul(x->shape[i + 2], strides[i]) < 0 ? -1 : mul(x->shape[i + 2], strides[i]));
  if (sizes_agree && out_shape.size() == n && x->shape.size() == n + 2) {
    // ONNX ConvTranspose spec: total_padding = stride·(in−1) + output_padding + ((k−1)·dil+1) − out.
    // Checked arithmetic: a total that overflows leaves the remaining pads as given.
    for (size_t i = 0; i < n; ++i) {
      const int64_t span = mul(strides[i], x->shape[i + 2] - 1), reach = mul(kernel[i] - 1, dil[i]);
      const int64_t sum = add(add(span, out_pad[i]), reach);
      if (x->shape[i + 2] < 1 || out_shape[i] < 0 || sum < 0) break;
      const int64_t total = sum + 1 - out_shape[i];
      const bool upper =
          auto_pad == "SAME_UPPER";  // the spec: SAME_UPPER puts the odd pixel at the end, else at the start
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + n] = upper ? total - total / 2 : total / 2;
    }
  }
  const int64_t group = c.attr_int("group", 1);
  c.attrs = {
      {"pads", pads}, {"strides", strides}, {"dil", dil}, {"group", group}, {"output_padding", out_pad}};
  c.key_includes_outputs = true;
}

void fix_pool(const NodeView& v, LayerConfig& c) {
  const auto* x = arg(c, "x");
  const auto kernel = c.attr_ints("kernel_shape");
  if (!x || kernel.empty()) return;
  const size_t n = kernel.size();
  const auto strides = ints_or(c, "strides", n, 1), dil = ints_or(c, "dilations", n, 1);
  const auto pads =
      resolve_pads(str_or(c, "auto_pad", "NOTSET"), x->shape, kernel, strides, dil, c.attr_ints("pads"));
  const int64_t ceil_mode = c.attr_int("ceil_mode", 0);
  if (c.kind == LayerKind::kMaxPool) {
    c.attrs = {
        {"kernel", kernel}, {"pads", pads}, {"strides", strides}, {"dil", dil}, {"ceil_mode", ceil_mode}};
    if (v.out.size() > 1 && v.out[1].present) c.attrs.push_back({"indices", int64_t{1}});
  } else {
    const int64_t cip = c.attr_int("count_include_pad", 0);
    c.attrs = {{"kernel", kernel},
               {"pads", pads},
               {"strides", strides},
               {"ceil_mode", ceil_mode},
               {"count_include_pad", cip}};
  }
}

void fix_gemm(const NodeView&, LayerConfig& c) {
  order(c, {"transA", "transB", "alpha", "beta"});
}

// Numeric parameters that do not change the work (epsilon, momentum, dropout ratio) are dropped.
void fix_batchnorm(const NodeView&, LayerConfig& c) {
  erase(c, {"epsilon", "momentum"});
}
void fix_instancenorm(const NodeView&, LayerConfig& c) {
  erase(c, {"epsilon"});
}
void fix_layernorm(const NodeView&, LayerConfig& c) {
  erase(c, {"epsilon", "stash_type"});
  normalize_axis_attr(c, "axis", -1);
}
void fix_lrn(const NodeView&, LayerConfig& c) {
  erase(c, {"alpha", "beta", "bias"});
}
void fix_dropout(const NodeView&, LayerConfig& c) {
  erase(c, {"seed", "ratio"});
}

// Gelu (ONNX Gelu-20; the model processor also makes one from the five-node decomposition that
// exporters write before opset 20, gelu.hpp): `approximate` is "none" (erf) or "tanh", the operand
// is x whatever ONNX 1.12, which has no schema for it, calls it.
void fix_gelu(const NodeView&, LayerConfig& c) {
  set(c, "approximate", str_or(c, "approximate", "none"));
  order(c, {"approximate"});
  if (!c.inputs.empty()) c.inputs[0].role = "x";
}
// Gelu's FLOPs are those of the ops of its definition (ONNX Gelu-20's function body,
// onnx/defs/math/defs.cc), Erf and Tanh counted as one as their own kinds are:
// erf: x·√½, Erf, +1, ·x, ·½ = 5 per element; tanh: x³ (2), ·0.044715, +x, ·√(2/π), Tanh, +1, ·x,
// ·½ = 9 per element.
int64_t gelu_flops(const LayerConfig& c) {
  return mul(str_or(c, "approximate", "none") == "tanh" ? 9 : 5, out_numel(c));
}

void fix_softmax(const NodeView& v, LayerConfig& c) {
  // Before opset 13 Softmax coerced the input to 2-D at `axis` (default 1); from 13 it is per-axis (default
  // -1).
  if (v.opset < 13) {
    normalize_axis_attr(c, "axis", 1);
    set(c, "coerce_2d", int64_t{1});
  } else {
    normalize_axis_attr(c, "axis", -1);
  }
}
void fix_axis0(const NodeView&, LayerConfig& c) {
  normalize_axis_attr(c, "axis", 0);
}
void fix_axis1(const NodeView&, LayerConfig& c) {
  normalize_axis_attr(c, "axis", 1);
}

void fix_axes_list(LayerConfig& c, int64_t rank, bool empty_means_all) {
  auto axes = c.attr_ints("axes");
  for (auto& a : axes) a = positive_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  if (axes.empty() && empty_means_all)
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  set(c, "axes", axes);
}
void fix_reduce(const NodeView&, LayerConfig& c) {
  const bool noop = c.attr_int("noop_with_empty_axes", 0) != 0;
  erase(c, {"noop_with_empty_axes"});
  fix_axes_list(c, input_rank(c), !noop);
  order(c, {"axes", "keepdims"});
}
void fix_squeeze(const NodeView& v, LayerConfig& c) {
  fix_axes_list(c, input_rank(c), false);
  c.key_includes_outputs = true;
  (void)v;
}
void fix_unsqueeze(const NodeView& v, LayerConfig& c) {
  const int64_t rank = v.out.empty() || !v.out[0].shape ? 0 : static_cast<int64_t>(v.out[0].shape->size());
  fix_axes_list(c, rank, false);
}
void fix_transpose(const NodeView&, LayerConfig& c) {
  if (c.attr_ints("perm").empty()) {
    std::vector<int64_t> perm;
    for (int64_t k = input_rank(c) - 1; k >= 0; --k) perm.push_back(k);
    set(c, "perm", perm);
  }
}
void fix_cast(const NodeView&, LayerConfig& c) {
  const auto to = static_cast<DataType>(c.attr_int("to", 0));
  erase(c, {"saturate"});
  set(c, "to", std::string(dtype_name(to)));
}
// Slice: the effective start per sliced axis (clamped as the ONNX spec clamps), positive axes,
// steps; the output shape (in the key) carries the extent.
void fix_slice(const NodeView&, LayerConfig& c) {
  const auto* x = arg(c, "x");
  auto starts = c.attr_ints("starts"), axes = c.attr_ints("axes"), steps = c.attr_ints("steps");
  erase(c, {"starts", "ends", "axes", "steps"});
  c.key_includes_outputs = true;
  if (!x || starts.empty()) return;
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return;
  for (size_t k = 0; k < starts.size(); ++k) {
    axes[k] = positive_axis(axes[k], rank);
    const int64_t dim = axes[k] >= 0 && axes[k] < rank ? x->shape[axes[k]] : -1;
    if (dim < 0) continue;
    const int64_t start = std::clamp<int64_t>(starts[k], -dim - 1, dim);  // no overflow below
    int64_t s = start < 0 ? start + dim : start;
    starts[k] =
        steps[k] > 0 || dim == 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
  }
  c.attrs.insert(c.attrs.begin(), {{"starts", starts}, {"axes", axes}, {"steps", steps}});
}
void fix_pad(const NodeView&, LayerConfig& c) {
  erase(c, {"constant_value", "value"});
  order(c, {"pads", "mode"});
}
void fix_resize(const NodeView&, LayerConfig& c) {
  const auto mode = str_or(c, "mode", "nearest");
  erase(c, {"roi", "scales", "sizes"});
  if (mode != "nearest") erase(c, {"nearest_mode"});
  if (mode != "cubic") erase(c, {"cubic_coeff_a", "exclude_outside"});
  if (str_or(c, "coordinate_transformation_mode", "") != "tf_crop_and_resize")
    erase(c, {"extrapolation_value"});
  c.key_includes_outputs = true;
}
void fix_outputs_in_key(const NodeView&, LayerConfig& c) {
  c.key_includes_outputs = true;
}
void fix_split(const NodeView& v, LayerConfig& c) {
  normalize_axis_attr(c, "axis", 0);
  // Equal split when no sizes are given: the output shapes say it.
  if (c.attr_ints("split").empty()) {
    const int64_t axis = c.attr_int("axis", 0);
    std::vector<int64_t> sizes;
    for (const auto& o : v.out)
      sizes.push_back(o.shape && axis >= 0 && static_cast<int64_t>(o.shape->size()) > axis ? (*o.shape)[axis]
                                                                                           : -1);
    set(c, "split", sizes);
  }
}

// --- quantization ----------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear: the scale and zero point are operands shown by role (their
// values differ per layer, the work does not); `axis` stays only for per-channel scales;
// QuantizeLinear's output type (u8 or i8, from its zero point) joins the key as `to`.
void fix_quantize(const NodeView&, LayerConfig& c) {
  const auto* scale = c.inputs.size() > 1 ? &c.inputs[1] : nullptr;
  if (!scale || numel(scale->shape) <= 1)
    erase(c, {"axis"});
  else
    normalize_axis_attr(c, "axis", 1);
  erase(c, {"saturate", "block_size"});
  if (c.kind == LayerKind::kQuantizeLinear && !c.outputs.empty())
    set(c, "to", std::string(dtype_name(c.outputs[0].dtype)));
  if (c.kind == LayerKind::kDequantizeLinear && !c.inputs.empty())
    set(c, "from", std::string(dtype_name(c.inputs[0].dtype)));
}

// MatMulNBits (ONNX Runtime's com.microsoft): the work is set by the shapes and K, N, bits and
// block_size; accuracy_level picks ONNX Runtime's compute type (0: A's type), kept in the key.
void fix_matmul_nbits(const NodeView&, LayerConfig& c) {
  order(c, {"K", "N", "accuracy_level", "bits", "block_size"});
}

// CumSum: the axis is a parameter input (read as the attribute "axis" when constant).
void fix_cumsum(const NodeView&, LayerConfig& c) {
  normalize_axis_attr(c, "axis", 0);
  order(c, {"axis", "exclusive", "reverse"});
}

// TopK: the axis normalized; K is a parameter input (read as the attribute "k" when constant).
void fix_topk(const NodeView&, LayerConfig& c) {
  normalize_axis_attr(c, "axis", -1);
  order(c, {"k", "axis", "largest", "sorted"});
}
// NonZero and NonMaxSuppression: the output's size is the --max-detections assumption, so the
// output shape is part of the key. NMS's three scalar inputs are parameters when constant.
void fix_nms(const NodeView&, LayerConfig& c) {
  c.key_includes_outputs = true;
  order(c, {"max_output_boxes_per_class", "iou_threshold", "score_threshold", "center_point_box"});
}

// RoiAlign: opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel
// (opset 16's name for it); opset 16's default is half_pixel, filled by the normalizer.
void fix_roi_align(const NodeView&, LayerConfig& c) {
  if (!c.find_attr("coordinate_transformation_mode"))
    set(c, "coordinate_transformation_mode", std::string("output_half_pixel"));
  order(c, {"mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
            "coordinate_transformation_mode"});
}
// ScatterElements: the axis normalized; opsets 11 and 13 have no reduction (none).
void fix_scatter_elements(const NodeView&, LayerConfig& c) {
  normalize_axis_attr(c, "axis", 0);
  if (!c.find_attr("reduction")) set(c, "reduction", std::string("none"));
  order(c, {"axis", "reduction"});
}
void fix_grid_sample(const NodeView&, LayerConfig& c) {
  order(c, {"mode", "padding_mode", "align_corners"});
}

// LSTM/GRU/RNN: the ONNX default activations are dropped from the key (an explicit list equal to
// the defaults is the same work); any other list stays, and backends answer unsupported for it.
// activation_alpha/beta only matter with non-default activations; clip stays when given.
void fix_recurrent(const NodeView&, LayerConfig& c) {
  const std::string acts = str_or(c, "activations", "");  // STRINGS are read comma-joined
  const std::string one = c.kind == LayerKind::kLSTM  ? "Sigmoid,Tanh,Tanh"
                          : c.kind == LayerKind::kGRU ? "Sigmoid,Tanh"
                                                      : "Tanh";
  const std::string dir = str_or(c, "direction", "forward");
  // (RNN's schema default lists Tanh twice, one per direction, whatever the direction.)
  if (acts.empty() || acts == one || acts == one + "," + one)
    erase(c, {"activations", "activation_alpha", "activation_beta"});
  set(c, "direction", dir);
  order(c, {"direction", "hidden_size", "layout"});
}

// ---------------------------------------------------------------------------------------------

struct KindInfo {
  LayerKind kind;
  CostClass cost;
  std::initializer_list<int> param_inputs;  // input slots read as attributes when constant
  std::initializer_list<int> flag_inputs;   // input slots shown in the key by role only (shape implied)
  FixupFn fixup;
  CostFn flops;
  CostFn bytes;
};

using C = CostClass;
using K = LayerKind;
constexpr auto kCompute = C::kCompute;

// One row per kind, in LayerKind order (checked below).
const KindInfo kKinds[] = {
    {K::kConv, kCompute, {}, {2}, fix_conv, conv_flops, io_bytes},
    {K::kConvTranspose, kCompute, {}, {2}, fix_conv_transpose, conv_transpose_flops, io_bytes},
    {K::kGemm, kCompute, {}, {}, fix_gemm, gemm_flops, io_bytes},
    {K::kMatMul, kCompute, {}, {}, nullptr, matmul_flops, io_bytes},
    // BN at inference folds to y = x·a + b: 2 FLOPs per element.
    {K::kBatchNormalization, kCompute, {}, {1, 2, 3, 4}, fix_batchnorm, per_input<2>, io_bytes},
    // mean (1) + variance (3) + normalize (2) + scale and shift (2) = 8 per element.
    {K::kLayerNormalization, kCompute, {}, {1, 2}, fix_layernorm, per_input<8>, io_bytes},
    {K::kInstanceNormalization, kCompute, {}, {1, 2}, fix_instancenorm, per_input<8>, io_bytes},
    {K::kLRN, kCompute, {}, {}, fix_lrn, lrn_flops, io_bytes},
    {K::kRelu, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kLeakyRelu, kCompute, {}, {}, nullptr, per_output<2>, io_bytes},
    {K::kPRelu, kCompute, {}, {}, nullptr, per_output<2>, io_bytes},
    {K::kElu, kCompute, {}, {}, nullptr, per_output<3>, io_bytes},
    {K::kSelu, kCompute, {}, {}, nullptr, per_output<4>, io_bytes},
    {K::kClip, kCompute, {1, 2}, {}, nullptr, per_output<2>, io_bytes},
    {K::kSigmoid, kCompute, {}, {}, nullptr, per_output<4>, io_bytes},  // neg, exp, add, div
    {K::kTanh, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kHardSigmoid, kCompute, {}, {}, nullptr, per_output<4>, io_bytes},  // mul, add, min, max
    {K::kHardSwish, kCompute, {}, {}, nullptr, per_output<5>, io_bytes},    // x · HardSigmoid(x)
    {K::kSoftplus, kCompute, {}, {}, nullptr, per_output<3>, io_bytes},
    {K::kErf, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kExp, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kLog, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kSqrt, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kReciprocal, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kNeg, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kAbs, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kFloor, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kCeil, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kNot, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kCast, kCompute, {}, {}, fix_cast, zero, io_bytes},
    {K::kGelu, kCompute, {}, {}, fix_gelu, gelu_flops, io_bytes},  // one pass: read x, write y
    {K::kAdd, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kSub, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kMul, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kDiv, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kPow, kCompute, {1}, {}, nullptr, per_output<1>, io_bytes},  // a constant exponent is a parameter
    {K::kMax, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kMin, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kMod, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kEqual, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kLess, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kGreater, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kAnd, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kOr, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kWhere, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kSum, kCompute, {}, {}, nullptr, sum_flops, io_bytes},
    // --- comparisons, Xor, Mean, CumSum, ArgMax/ArgMin.
    {K::kGreaterOrEqual, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kLessOrEqual, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kXor, kCompute, {}, {}, nullptr, per_output<1>, io_bytes},
    {K::kMean, kCompute, {}, {}, nullptr, mean_flops, io_bytes},
    {K::kCumSum, kCompute, {1}, {}, fix_cumsum, per_output<1>, io_bytes},
    {K::kArgMax, kCompute, {}, {}, fix_axis0, per_input<1>, io_bytes},
    {K::kArgMin, kCompute, {}, {}, fix_axis0, per_input<1>, io_bytes},
    // --- detection heads. GatherND reads only what it writes (as Gather);
    // NonZero compares every element once.
    {K::kTopK, kCompute, {1}, {}, fix_topk, topk_flops, io_bytes},
    {K::kGatherND, kCompute, {}, {}, nullptr, zero, gather_bytes},
    {K::kNonZero, kCompute, {}, {}, fix_outputs_in_key, per_input<1>, io_bytes},
    {K::kNonMaxSuppression, kCompute, {2, 3, 4}, {}, fix_nms, nms_flops, io_bytes},
    // --- sampling and scatter (detection heads, optical flow).
    {K::kRoiAlign, kCompute, {}, {}, fix_roi_align, roi_align_flops, roi_align_bytes},
    {K::kScatterElements, kCompute, {}, {}, fix_scatter_elements, scatter_elements_flops, io_bytes},
    {K::kGridSample, kCompute, {}, {}, fix_grid_sample, grid_sample_flops, grid_sample_bytes},
    // max, subtract, exp, sum, divide (LogSoftmax: log instead of divide, then subtract).
    {K::kSoftmax, kCompute, {}, {}, fix_softmax, per_output<5>, io_bytes},
    {K::kLogSoftmax, kCompute, {}, {}, fix_softmax, per_output<5>, io_bytes},
    {K::kMaxPool, kCompute, {}, {}, fix_pool, pool_flops, io_bytes},
    {K::kAveragePool, kCompute, {}, {}, fix_pool, pool_flops, io_bytes},
    {K::kGlobalAveragePool, kCompute, {}, {}, nullptr, global_pool_flops, io_bytes},
    {K::kGlobalMaxPool, kCompute, {}, {}, nullptr, global_pool_flops, io_bytes},
    {K::kReduceMean, kCompute, {1}, {}, fix_reduce, reduce_flops, io_bytes},
    {K::kReduceSum, kCompute, {1}, {}, fix_reduce, reduce_flops, io_bytes},
    {K::kReduceMax, kCompute, {1}, {}, fix_reduce, reduce_flops, io_bytes},
    {K::kReduceMin, kCompute, {1}, {}, fix_reduce, reduce_flops, io_bytes},
    {K::kReduceProd, kCompute, {1}, {}, fix_reduce, reduce_flops, io_bytes},
    // --- recurrent layers; sequence_lens (slot 4) is data, kept as an operand.
    {K::kLSTM, kCompute, {}, {}, fix_recurrent, recurrent_flops, io_bytes},
    {K::kGRU, kCompute, {}, {}, fix_recurrent, recurrent_flops, io_bytes},
    {K::kRNN, kCompute, {}, {}, fix_recurrent, recurrent_flops, io_bytes},
    {K::kConcat, kCompute, {}, {}, fix_axis0, zero, io_bytes},
    {K::kSplit, kCompute, {1}, {}, fix_split, zero, io_bytes},
    {K::kSlice, kCompute, {1, 2, 3, 4}, {}, fix_slice, zero, slice_bytes},
    {K::kTranspose, kCompute, {}, {}, fix_transpose, zero, io_bytes},
    {K::kPad, kCompute, {1, 2, 3}, {}, fix_pad, zero, io_bytes},
    // Linear/cubic interpolation cost is counted as data movement only (FLOPs 0): memory-bound.
    {K::kResize, kCompute, {1, 2, 3}, {}, fix_resize, zero, io_bytes},
    {K::kGather, kCompute, {}, {}, fix_axis0, zero, gather_bytes},
    {K::kExpand, kCompute, {1}, {}, fix_outputs_in_key, zero, io_bytes},
    {K::kTile, kCompute, {1}, {}, fix_outputs_in_key, zero, io_bytes},
    {K::kScatterND, kCompute, {}, {}, nullptr, zero, io_bytes},
    {K::kRange, kCompute, {0, 1, 2}, {}, fix_outputs_in_key, zero, io_bytes},
    /* quantization */
    // QuantizeLinear: divide by the scale, round, add the zero point, saturate (3 counted: the
    // divide is a multiply by the reciprocal, the saturation a clamp); Dequantize: subtract, multiply.
    {K::kQuantizeLinear, kCompute, {}, {1, 2}, fix_quantize, per_output<3>, io_bytes},
    {K::kDequantizeLinear, kCompute, {}, {1, 2}, fix_quantize, per_output<2>, io_bytes},
    // B's packed bytes (bits/8 per weight), the scales and zero points are read once: io_bytes.
    {K::kMatMulNBits, kCompute, {}, {3, 4, 5}, fix_matmul_nbits, matmul_nbits_flops, io_bytes},
    {K::kReshape, C::kView, {1}, {}, fix_outputs_in_key, zero, zero},
    {K::kFlatten, C::kView, {}, {}, fix_axis1, zero, zero},
    {K::kSqueeze, C::kView, {1}, {}, fix_squeeze, zero, zero},
    {K::kUnsqueeze, C::kView, {1}, {}, fix_unsqueeze, zero, zero},
    {K::kIdentity, C::kView, {}, {}, nullptr, zero, zero},
    {K::kDropout, C::kView, {1, 2}, {}, fix_dropout, zero, zero},
    {K::kShape, C::kHost, {}, {}, nullptr, zero, zero},
    {K::kSize, C::kHost, {}, {}, nullptr, zero, zero},
    {K::kConstant, C::kHost, {}, {}, nullptr, zero, zero},
    {K::kConstantOfShape, C::kHost, {0}, {}, fix_outputs_in_key, zero, zero},
    {K::kIf, C::kControl, {}, {}, nullptr, zero, zero},
    {K::kLoop, C::kControl, {}, {}, nullptr, zero, zero},
    {K::kUnsupported, C::kUnsupported, {}, {}, fix_outputs_in_key, zero, io_bytes},
};
static_assert(std::size(kKinds) == kLayerKindCount, "one row of kKinds per LayerKind");

const KindInfo& info(LayerKind k) {
  return kKinds[static_cast<int>(k)];
}

bool table_in_enum_order() {
  for (int k = 0; k < kLayerKindCount; ++k)
    if (static_cast<int>(kKinds[k].kind) != k) return false;
  return true;
}
const bool kTableChecked = [] {
  if (!table_in_enum_order()) std::abort();  // a row out of place is a programming error
  return true;
}();

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Role of input slot k: the schema's formal parameter name, lower-cased; "x" for the main data
// input (ONNX calls it X, input or data); variadic inputs numbered (x0, x1, ...).
std::string role_name(const NodeView& v, LayerKind kind, size_t k) {
  if (!v.schema) return fmt::format("in{}", k);
  const auto& formals = v.schema->inputs();
  if (formals.empty()) return fmt::format("in{}", k);
  const size_t f = std::min(k, formals.size() - 1);
  std::string name = lower(formals[f].GetName());
  if (name == "input" || name == "data" || name == "inputs" || name == "data_0") name = "x";
  if ((kind == K::kConv || kind == K::kConvTranspose) && k == 2) name = "bias";
  if (kind == K::kGemm && k == 2) name = "bias";
  if (formals[f].GetOption() == onnx::OpSchema::Variadic) return fmt::format("{}{}", name, k - f);
  return name;
}

AttrValue attr_value(const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      return a.i();
    case onnx::AttributeProto::FLOAT:
      return static_cast<double>(a.f());
    case onnx::AttributeProto::STRING:
      return a.s();
    case onnx::AttributeProto::INTS:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::FLOATS: {
      std::vector<double> v(a.floats().begin(), a.floats().end());
      return v;
    }
    case onnx::AttributeProto::STRINGS: {  // LSTM's activations: "Sigmoid,Tanh,Tanh"
      std::string joined;
      for (const auto& str : a.strings()) joined += (joined.empty() ? "" : ",") + str;
      return joined;
    }
    default:
      return std::string("<") + onnx::AttributeProto_AttributeType_Name(a.type()) + ">";
  }
}

bool contains(std::initializer_list<int> list, int k) {
  return std::find(list.begin(), list.end(), k) != list.end();
}

}  // namespace

CostClass kind_cost_class(LayerKind k) {
  return info(k).cost;
}

std::optional<LayerKind> kind_from_op_type(std::string_view op_type) {
  return kind_from_name(op_type);
}

std::string_view cost_class_name(CostClass c) {
  switch (c) {
    case C::kCompute:
      return "compute";
    case C::kView:
      return "view";
    case C::kHost:
      return "host";
    case C::kControl:
      return "control";
    case C::kUnsupported:
      return "unsupported";
  }
  return "?";
}

int64_t config_flops(const LayerConfig& c) {
  return info(c.kind).flops(c);
}
int64_t config_bytes(const LayerConfig& c) {
  return info(c.kind).bytes(c);
}

LayerConfig normalize(const NodeView& v, LayerKind kind, std::vector<std::string>* operand_names) {
  const KindInfo& row = info(kind);
  LayerConfig c;
  c.kind = kind;
  c.op_type = v.node->op_type();

  // Operands and parameter inputs.
  for (size_t k = 0; k < v.in.size(); ++k) {
    const ValueDesc& d = v.in[k];
    if (!d.present) continue;
    const std::string role = role_name(v, kind, k);
    if (contains(row.param_inputs, static_cast<int>(k)) && d.value) {
      if (d.value->is_integer())
        c.attrs.push_back({role, d.value->ints()});
      else
        c.attrs.push_back({role, d.value->f.size() == 1 ? AttrValue(d.value->f[0]) : AttrValue(d.value->f)});
      continue;
    }
    if (contains(row.param_inputs, static_cast<int>(k))) c.key_includes_outputs = true;  // run-time parameter
    TensorArg t{role, d.shape.value_or(Shape{-1}), d.dtype, contains(row.flag_inputs, static_cast<int>(k))};
    c.inputs.push_back(std::move(t));
    if (operand_names) operand_names->push_back(v.node->input(static_cast<int>(k)));
  }
  for (size_t k = 0; k < v.out.size(); ++k) {
    const ValueDesc& d = v.out[k];
    if (!d.present) continue;
    c.outputs.push_back(
        {v.out.size() == 1 ? "y" : fmt::format("y{}", k), d.shape.value_or(Shape{-1}), d.dtype, false});
  }

  // Attributes: the node's own, then the schema's defaults for those it leaves out.
  std::vector<Attr> attrs;
  for (const auto& a : v.node->attribute()) {
    if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS ||
        a.type() == onnx::AttributeProto::TENSOR)
      continue;
    attrs.push_back({a.name(), attr_value(a)});
  }
  if (v.schema) {
    for (const auto& [name, formal] : v.schema->attributes()) {
      if (!formal.default_value.has_name()) continue;  // required, or optional without a default
      const bool given =
          std::any_of(attrs.begin(), attrs.end(), [&name = name](const Attr& a) { return a.name == name; });
      if (!given && formal.default_value.type() != onnx::AttributeProto::GRAPH &&
          formal.default_value.type() != onnx::AttributeProto::TENSOR)
        attrs.push_back({name, attr_value(formal.default_value)});
    }
  }
  std::sort(attrs.begin(), attrs.end(), [](const Attr& a, const Attr& b) { return a.name < b.name; });
  c.attrs.insert(c.attrs.end(), attrs.begin(), attrs.end());

  // Compute type: the first operand that is not a boolean condition.
  for (const auto& t : c.inputs)
    if (t.dtype != DataType::kBool || c.dtype == DataType::kUndefined) {
      c.dtype = t.dtype;
      if (t.dtype != DataType::kBool) break;
    }
  if (c.dtype == DataType::kUndefined && !c.outputs.empty()) c.dtype = c.outputs[0].dtype;

  if (row.fixup) row.fixup(v, c);
  return c;
}

}  // namespace floorline::mp
