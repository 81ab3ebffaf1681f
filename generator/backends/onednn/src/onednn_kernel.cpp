// oneDNN kernels: one builder per layer kind maps a Problem onto oneDNN 2.6 primitives (2.x API,
// op descriptors), and one generic Kernel allocates, initialises, runs and verifies them.
//
// Every tensor of a problem has a plain buffer in the ONNX layout (the "tensor"); a primitive sees
// it through a View (dims, strides and offset in elements: a grouped-weights reshape, a transposed
// matrix, a slice). Where the implementation oneDNN chose wants another format (format_tag::any
// for convolution weights, blocked activations), a separate buffer in that format is filled by a
// reorder once, before timing; that reorder is not part of the timed call (weights are packed once
// by any framework; activation conversions are measured as their own cases by the planner).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include "floorline/kernels/onednn.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::primitive_attr;
using dnnl::prop_kind;
using dt = memory::data_type;
using dims = memory::dims;

constexpr float kNormEps = 1e-5f;  // the ONNX default (epsilon is not part of the canonical key)
constexpr auto kInference = prop_kind::forward_inference;

dnnl::engine& cpu_engine() {
  static dnnl::engine e = [] {
    // oneDNN 2.6's implementation iterator answers from the primitive cache, keyed by (descriptor,
    // position), without moving its own cursor: once a primitive of the same descriptor exists,
    // next_impl() returns the first implementation again. Every case builds its own primitive
    // anyway (that is what is timed), so the cache buys nothing here.
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}
dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}

// --- tensors and views ----------------------------------------------------------------------------

enum class Fill { kUniform, kPositive, kNone };

struct TensorDef {
  Shape shape;
  Fill fill = Fill::kUniform;
  bool f32_only = false;   // normalization statistics and scale/shift stay f32 in oneDNN
  bool is_output = false;
};

// How a primitive sees a tensor's plain buffer.
struct View {
  dims d;
  dims strides;
  int64_t offset = 0;  // elements
};

dims plain_strides(const dims& d) {
  dims st(d.size(), 1);
  for (int k = static_cast<int>(d.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * d[k + 1];
  return st;
}
View plain(const Shape& s) { return View{dims(s.begin(), s.end()), plain_strides(dims(s.begin(), s.end())), 0}; }
// The same buffer seen with other dims of the same element count (row-major reshape).
View reshaped(const dims& d) { return View{d, plain_strides(d), 0}; }
// A buffer of shape `stored` seen in the dim order `order` (view dim k is stored dim order[k]).
View permuted(const Shape& stored, const std::vector<int64_t>& order) {
  const dims st = plain_strides(dims(stored.begin(), stored.end()));
  View v;
  for (auto k : order) {
    v.d.push_back(stored[k]);
    v.strides.push_back(st[k]);
  }
  return v;
}
// Pads a shape with leading 1s to rank r (NumPy broadcasting).
Shape rank_padded(Shape s, size_t r) {
  while (s.size() < r) s.insert(s.begin(), 1);
  return s;
}

struct ArgDef {
  int arg = 0;        // DNNL_ARG_*
  int tensor = -1;
  View view;
  int prefill = -1;   // an output first filled from this tensor (the sum post-op reads dst)
};

struct StepDef {
  // Reorder and concat descriptors are not iterable (primitive_desc_base); the others are.
  std::optional<dnnl::primitive_desc> iterable;
  dnnl::primitive_desc_base fixed;
  std::vector<ArgDef> args;
  // oneDNN 2.x's implementation iterator keeps a pointer to the operation descriptor, not a copy:
  // next_impl() on a descriptor that has gone out of scope reads freed memory.
  std::shared_ptr<const void> op_desc;

  const dnnl::primitive_desc_base& pd() const {
    return iterable ? static_cast<const dnnl::primitive_desc_base&>(*iterable) : fixed;
  }
  bool next_impl() { return iterable && iterable->next_impl(); }
};

struct Build {
  std::string algorithm;             // primitive algorithm, "convolution_direct"
  std::vector<TensorDef> tensors;    // inputs, outputs, then extras (post-op operands, proxy sources)
  size_t n_inputs = 0, n_outputs = 0;
  std::vector<StepDef> steps;        // step 0's implementation is the one chosen by impl_index
  bool iterate = true;               // step 0 offers alternatives via next_impl()
  std::string not_verifiable;        // why the output is not the layer's (a proxy), "" otherwise
};

// Thrown by builders for problems Floorline's mapping or oneDNN cannot express.
struct Unsupported {
  std::string why;
};
[[noreturn]] void unsupported(std::string why) { throw Unsupported{std::move(why)}; }

struct Ctx {
  const CaseSpec& spec;
  const Problem& p;
  dt type;
  Build b;

  int input(size_t k) const {
    if (k >= p.inputs.size()) unsupported(fmt::format("{} has no input {}", p.op, k));
    return static_cast<int>(k);
  }
  int output(size_t k) const {
    if (k >= p.outputs.size()) unsupported(fmt::format("{} has no output {}", p.op, k));
    return static_cast<int>(p.inputs.size() + k);
  }
  const Shape& in_shape(size_t k) const { return p.inputs.at(static_cast<size_t>(input(k))).shape; }
  const Shape& out_shape(size_t k = 0) const { return p.outputs.at(static_cast<size_t>(output(k)) - p.inputs.size()).shape; }
  int extra(Shape s, Fill f = Fill::kUniform) {
    b.tensors.push_back({std::move(s), f, false, false});
    return static_cast<int>(b.tensors.size() - 1);
  }
  void set_fill(int t, Fill f) { b.tensors[t].fill = f; }
  void set_f32_only(int t) { b.tensors[t].f32_only = true; }
  dt type_of(int t) const { return b.tensors[t].f32_only ? dt::f32 : type; }
  memory::desc md(int t, const View& v) const { return memory::desc(v.d, type_of(t), v.strides); }
  memory::desc any(const dims& d) const { return memory::desc(d, type, memory::format_tag::any); }

  primitive_attr attr(bool with_post_ops = true) const;
};

// --- activation layouts -------------------------------------------------------------------------

// Layout-agnostic primitives (batch normalization, pooling, concat) are also offered on the two
// activation layouts oneDNN's convolutions write, as variants "<primitive>@blocked16c" (aBcd16b,
// nChw16c) and "<primitive>@channels_last" (acdb, NHWC): a runtime that keeps convolutions'
// layouts between layers runs them so, and their plain-layout implementations can be far slower.
// The suffix of a variant; "" for the plain layout.
std::string layout_suffix(const std::string& variant) {
  const auto at = variant.find('@');
  return at == std::string::npos ? "" : variant.substr(at + 1);
}
// The variant without its layout suffix.
std::string base_variant(const std::string& variant) { return variant.substr(0, variant.find('@')); }

// The memory descriptor of an activation of shape `s` in the variant's layout (plain without one).
memory::desc activation_md(const Ctx& c, int t, const Shape& s, const std::string& variant) {
  const std::string layout = layout_suffix(variant);
  const dims d(s.begin(), s.end());
  if (layout.empty()) return c.md(t, plain(s));
  using tag = memory::format_tag;
  static const std::map<std::pair<std::string, size_t>, tag> kTags = {
      {{"blocked16c", 3}, tag::aBc16b},   {{"blocked16c", 4}, tag::aBcd16b}, {{"blocked16c", 5}, tag::aBcde16b},
      {{"channels_last", 3}, tag::acb},   {{"channels_last", 4}, tag::acdb}, {{"channels_last", 5}, tag::acdeb}};
  auto it = kTags.find({layout, s.size()});
  if (it == kTags.end()) unsupported(fmt::format("no {} layout for a rank-{} tensor", layout, s.size()));
  return memory::desc(d, c.type_of(t), it->second);
}

// --- element-wise algorithms ----------------------------------------------------------------------

struct EltwiseOp {
  algorithm alg;
  float alpha = 0, beta = 0;
};
constexpr float kFloatMax = std::numeric_limits<float>::max();

float finite(double v) { return static_cast<float>(std::clamp<double>(v, -kFloatMax, kFloatMax)); }

// The oneDNN eltwise chain of an ONNX unary op (HardSigmoid and Selu take two). `proxy` is set
// when oneDNN computes a different function of the same cost (Erf as gelu_erf).
std::vector<EltwiseOp> eltwise_chain(const std::string& op, double alpha, double beta, std::string* proxy) {
  if (op == "Relu") return {{algorithm::eltwise_relu, 0.f, 0.f}};
  if (op == "LeakyRelu") return {{algorithm::eltwise_relu, static_cast<float>(alpha), 0.f}};
  if (op == "Elu") return {{algorithm::eltwise_elu, static_cast<float>(alpha), 0.f}};
  if (op == "Selu") return {{algorithm::eltwise_elu, 1.6732632f, 0.f}, {algorithm::eltwise_linear, 1.0507009f, 0.f}};
  if (op == "Clip") return {{algorithm::eltwise_clip_v2, finite(alpha), finite(beta)}};
  if (op == "Sigmoid") return {{algorithm::eltwise_logistic, 0.f, 0.f}};
  if (op == "Tanh") return {{algorithm::eltwise_tanh, 0.f, 0.f}};
  if (op == "HardSigmoid")
    return {{algorithm::eltwise_linear, static_cast<float>(alpha), static_cast<float>(beta)},
            {algorithm::eltwise_clip_v2, 0.f, 1.f}};
  if (op == "HardSwish") return {{algorithm::eltwise_hardswish, 0.f, 0.f}};
  if (op == "Softplus") return {{algorithm::eltwise_soft_relu, 0.f, 0.f}};
  if (op == "Exp") return {{algorithm::eltwise_exp, 0.f, 0.f}};
  if (op == "Log") return {{algorithm::eltwise_log, 0.f, 0.f}};
  if (op == "Sqrt") return {{algorithm::eltwise_sqrt, 0.f, 0.f}};
  if (op == "Abs") return {{algorithm::eltwise_abs, 0.f, 0.f}};
  if (op == "Neg") return {{algorithm::eltwise_linear, -1.f, 0.f}};
  if (op == "Reciprocal") return {{algorithm::eltwise_pow, 1.f, -1.f}};
  if (op == "Pow") return {{algorithm::eltwise_pow, 1.f, static_cast<float>(beta)}};
  if (op == "Erf") {
    if (proxy) *proxy = "Erf is timed as oneDNN's gelu_erf (one erf per element, same traffic): oneDNN has no erf";
    return {{algorithm::eltwise_gelu_erf, 0.f, 0.f}};
  }
  return {};
}

// Default alpha/beta of a unary op as its ONNX attributes give them.
std::pair<double, double> unary_params(const Problem& p) {
  const std::string& op = p.op;
  if (op == "Clip")
    return {p.float_attr("min", -std::numeric_limits<double>::infinity()),
            p.float_attr("max", std::numeric_limits<double>::infinity())};
  if (op == "LeakyRelu") return {p.float_attr("alpha", 0.01), 0};
  if (op == "Elu") return {p.float_attr("alpha", 1.0), 0};
  if (op == "HardSigmoid") return {p.float_attr("alpha", 0.2), p.float_attr("beta", 0.5)};
  if (op == "Pow") return {1.0, p.float_attr("y", std::numeric_limits<double>::quiet_NaN())};
  return {0, 0};
}

primitive_attr Ctx::attr(bool with_post_ops) const {
  primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (spec.math_mode == "bf16" && type == dt::f32) a.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  if (with_post_ops && !p.post_ops.empty()) {
    dnnl::post_ops po;
    for (const auto& op : p.post_ops) {
      if (op.op == "Add") {
        po.append_sum(1.f);
        continue;
      }
      if (op.op == "BiasAdd") continue;  // the primitive's own bias argument
      const auto chain = eltwise_chain(op.op, op.alpha, op.beta, nullptr);
      if (chain.empty()) unsupported(fmt::format("no oneDNN post-op for {}", op.op));
      for (const auto& e : chain) po.append_eltwise(1.f, e.alg, e.alpha, e.beta);
    }
    a.set_post_ops(po);
  }
  return a;
}

// A post-op list may only be given to primitives that take one.
void require_no_post_ops(const Ctx& c) {
  if (!c.p.post_ops.empty()) unsupported(fmt::format("Floorline fuses no epilogue into {}", c.p.op));
}

template <class PD>
StepDef step(PD pd, std::vector<ArgDef> args) {
  if (!pd) unsupported("oneDNN has no implementation for these shapes and data type");
  StepDef s;
  if constexpr (std::is_base_of_v<dnnl::primitive_desc, PD>) s.iterable = pd;
  else s.fixed = pd;
  s.args = std::move(args);
  return s;
}

// The tensors a fused epilogue reads, created in post-op order (the reference reads them so):
// "Add" sums a tensor of the output's shape (prefilled into dst: oneDNN's sum post-op), "BiasAdd"
// adds a vector along the last dimension (the primitive's bias argument).
struct Epilogue {
  int sum = -1;
  int bias = -1;
};
Epilogue epilogue_tensors(Ctx& c, const Shape& bias_shape) {
  Epilogue e;
  for (const auto& op : c.p.post_ops) {
    if (op.op == "Add" && e.sum < 0) e.sum = c.extra(c.out_shape());
    else if (op.op == "BiasAdd" && e.bias < 0 && !bias_shape.empty()) e.bias = c.extra(bias_shape);
    else if (op.op == "Add" || op.op == "BiasAdd") unsupported(fmt::format("{} cannot be fused here", op.op));
  }
  return e;
}
// Creates the primitive descriptor from a copy of `desc` that the step keeps alive.
template <class PD, class D>
StepDef make_step(const D& desc, const primitive_attr& attr, std::vector<ArgDef> args) {
  auto held = std::make_shared<const D>(desc);
  StepDef s = step(PD(*held, attr, cpu_engine(), true), std::move(args));
  s.op_desc = held;
  return s;
}

int sum_prefill(Ctx& c) { return epilogue_tensors(c, {}).sum; }

// --- builders, one per kind -----------------------------------------------------------------------

void conv(Ctx& c, const std::string& variant) {
  const Shape& x = c.in_shape(0);
  const Shape& w = c.in_shape(1);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5) unsupported("oneDNN convolutions are 1-D, 2-D or 3-D");
  const size_t n = x.size() - 2;
  const int64_t g = c.p.int_attr("group", 1);
  const auto pads = c.p.ints_attr("pads");
  dims strides, dil, pl, pr;
  for (size_t k = 0; k < n; ++k) {
    strides.push_back(c.p.ints_attr("strides").at(k));
    dil.push_back(c.p.ints_attr("dil").at(k) - 1);  // oneDNN counts the gaps: ONNX dilation − 1
    pl.push_back(pads.at(k));
    pr.push_back(pads.at(k + n));
  }
  const bool deconv = c.p.op == "ConvTranspose";
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
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, xi, plain(x)}, {DNNL_ARG_WEIGHTS, wi, wv}, {DNNL_ARG_DST, yi, plain(y), prefill}};
  if (has_bias) args.push_back({DNNL_ARG_BIAS, c.input(2), plain(c.in_shape(2))});
  c.b.algorithm = variant;
  if (deconv) {
    // ONNX output_padding adds rows at the end: oneDNN sees them as less right padding.
    const auto out_pad = c.p.ints_attr("output_padding");
    for (size_t k = 0; k < n && k < out_pad.size(); ++k) pr[k] -= out_pad[k];
    dnnl::deconvolution_forward::desc d =
        has_bias ? dnnl::deconvolution_forward::desc(kInference, algorithm::deconvolution_direct, src, wei, bias, dst,
                                                     strides, dil, pl, pr)
                 : dnnl::deconvolution_forward::desc(kInference, algorithm::deconvolution_direct, src, wei, dst,
                                                     strides, dil, pl, pr);
    c.b.steps.push_back(make_step<dnnl::deconvolution_forward::primitive_desc>(d, c.attr(), args));
    return;
  }
  const algorithm alg = variant == "convolution_winograd" ? algorithm::convolution_winograd
                        : variant == "convolution_auto"    ? algorithm::convolution_auto
                                                           : algorithm::convolution_direct;
  dnnl::convolution_forward::desc d =
      has_bias ? dnnl::convolution_forward::desc(kInference, alg, src, wei, bias, dst, strides, dil, pl, pr)
               : dnnl::convolution_forward::desc(kInference, alg, src, wei, dst, strides, dil, pl, pr);
  c.b.steps.push_back(make_step<dnnl::convolution_forward::primitive_desc>(d, c.attr(), args));
}

void gemm(Ctx& c, const std::string& variant) {
  const Shape& a = c.in_shape(0);
  const Shape& bm = c.in_shape(1);
  if (a.size() != 2 || bm.size() != 2) unsupported("Gemm operands must be 2-D");
  const bool ta = c.p.int_attr("transA", 0) != 0, tb = c.p.int_attr("transB", 0) != 0;
  if (c.p.float_attr("alpha", 1.0) != 1.0 || c.p.float_attr("beta", 1.0) != 1.0)
    unsupported("Gemm with alpha or beta other than 1");
  const int64_t K = ta ? a[0] : a[1], N = tb ? bm[0] : bm[1];
  const bool has_bias = c.p.inputs.size() > 2;
  const int yi = c.output(0);
  const int prefill = sum_prefill(c);
  c.b.algorithm = variant;
  if (variant == "inner_product") {
    // y = x · Wᵀ + b with W (N, K): ONNX B (K, N) is W seen transposed, B (N, K) with transB is W.
    if (ta) unsupported("inner product needs A untransposed");
    if (has_bias && elements(c.in_shape(2)) != N) unsupported("inner product bias must be one value per output");
    const View wv = tb ? reshaped({N, K}) : permuted({K, N}, {1, 0});
    std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), plain(a)}, {DNNL_ARG_WEIGHTS, c.input(1), wv},
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
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), av}, {DNNL_ARG_WEIGHTS, c.input(1), bv},
                              {DNNL_ARG_DST, yi, plain(c.out_shape()), prefill}};
  const auto src = c.md(c.input(0), av), wei = c.any(dims{K, N}), dst = c.md(yi, plain(c.out_shape()));
  if (has_bias) {
    const View biasv = plain(rank_padded(c.in_shape(2), 2));
    args.push_back({DNNL_ARG_BIAS, c.input(2), biasv});
    dnnl::matmul::desc d(src, wei, c.md(c.input(2), biasv), dst);
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, c.attr(), args));
  } else {
    dnnl::matmul::desc d(src, wei, dst);
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, c.attr(), args));
  }
}

void matmul(Ctx& c, const std::string& variant) {
  Shape as = c.in_shape(0), bs = c.in_shape(1);
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
  Shape bias_shape(r, 1);
  bias_shape.back() = ys.back();
  const Epilogue e = epilogue_tensors(c, bias_shape);
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), plain(as)}, {DNNL_ARG_WEIGHTS, c.input(1), plain(bs)},
                              {DNNL_ARG_DST, yi, plain(ys), e.sum}};
  c.b.algorithm = variant;
  // A 2-D right operand is a weight matrix: oneDNN may pack it (format any), as frameworks do.
  const auto wei = r == 2 ? c.any(bs) : c.md(c.input(1), plain(bs));
  if (e.bias >= 0) {
    args.push_back({DNNL_ARG_BIAS, e.bias, plain(bias_shape)});
    dnnl::matmul::desc d(c.md(c.input(0), plain(as)), wei, c.md(e.bias, plain(bias_shape)), c.md(yi, plain(ys)));
    c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, c.attr(), args));
    return;
  }
  dnnl::matmul::desc d(c.md(c.input(0), plain(as)), wei, c.md(yi, plain(ys)));
  c.b.steps.push_back(make_step<dnnl::matmul::primitive_desc>(d, c.attr(), args));
}

void batch_norm(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  if (c.p.inputs.size() < 5) unsupported("BatchNormalization needs scale, B, mean and var");
  for (int k = 1; k <= 4; ++k) c.set_f32_only(c.input(k));
  c.set_fill(c.input(4), Fill::kPositive);
  const auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                     dnnl::normalization_flags::use_shift;
  dnnl::batch_normalization_forward::desc d(kInference, activation_md(c, c.input(0), x, variant), kNormEps, flags);
  const View cv = reshaped({x.at(1)});
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::batch_normalization_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_SCALE, c.input(1), cv},
                            {DNNL_ARG_SHIFT, c.input(2), cv}, {DNNL_ARG_MEAN, c.input(3), cv},
                            {DNNL_ARG_VARIANCE, c.input(4), cv}, {DNNL_ARG_DST, c.output(0), plain(c.out_shape())}}));
}

void layer_norm(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const int64_t axis = c.p.int_attr("axis", static_cast<int64_t>(x.size()) - 1);
  const int64_t inner = elements(Shape(x.begin() + axis, x.end())), outer = elements(x) / inner;
  const View data = reshaped({outer, inner});  // oneDNN normalizes over the last dimension
  auto flags = dnnl::normalization_flags::use_scale;
  std::vector<ArgDef> args = {{DNNL_ARG_SRC, c.input(0), data}, {DNNL_ARG_SCALE, c.input(1), reshaped({inner})},
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
  c.b.steps.push_back(make_step<dnnl::batch_normalization_forward::primitive_desc>(bd, c.attr(false), {{DNNL_ARG_SRC, c.input(0), reshaped(d)}, {DNNL_ARG_SCALE, c.input(1), reshaped({x[1]})},
                            {DNNL_ARG_SHIFT, c.input(2), reshaped({x[1]})}, {DNNL_ARG_DST, c.output(0), reshaped(d)}}));
}

void lrn(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  dnnl::lrn_forward::desc d(kInference, algorithm::lrn_across_channels, c.md(c.input(0), plain(x)),
                            c.p.int_attr("size", 1), 1e-4f, 0.75f, 1.f);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::lrn_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(c.out_shape())}}));
}

void eltwise(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const auto [alpha, beta] = unary_params(c.p);
  const auto chain = eltwise_chain(c.p.op, alpha, beta, &c.b.not_verifiable);
  if (chain.empty()) unsupported(fmt::format("oneDNN 2.6 has no element-wise algorithm for {}", c.p.op));
  if (c.p.op == "Pow" && std::isnan(beta)) unsupported("Pow with a run-time (non-constant) exponent");
  if (c.p.op == "Log" || c.p.op == "Sqrt" || c.p.op == "Reciprocal" || c.p.op == "Pow")
    c.set_fill(c.input(0), Fill::kPositive);
  const View v = plain(c.in_shape(0));
  c.b.algorithm = variant;
  c.b.iterate = chain.size() == 1;
  for (size_t k = 0; k < chain.size(); ++k) {
    // The second algorithm of a chain runs in place on the output.
    const int src = k == 0 ? c.input(0) : c.output(0);
    dnnl::eltwise_forward::desc d(kInference, chain[k].alg, c.md(src, v), chain[k].alpha, chain[k].beta);
    c.b.steps.push_back(make_step<dnnl::eltwise_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, src, v}, {DNNL_ARG_DST, c.output(0), v}}));
  }
}

void binary(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& y = c.out_shape();
  const Shape a = rank_padded(c.in_shape(0), y.size()), b = rank_padded(c.in_shape(1), y.size());
  int s0 = c.input(0), s1 = c.input(1);
  Shape sh0 = a, sh1 = b;
  const bool commutative = c.p.op == "Add" || c.p.op == "Mul" || c.p.op == "Max" || c.p.op == "Min" || c.p.op == "Equal";
  if (a != y) {
    if (b != y || !commutative)
      unsupported("oneDNN binary needs the first operand at the output's shape (only the second broadcasts)");
    std::swap(s0, s1);
    std::swap(sh0, sh1);
  }
  if (c.p.op == "Div") c.set_fill(c.input(1), Fill::kPositive);
  c.b.algorithm = variant;
  if (c.p.op == "PRelu") {
    dnnl::prelu_forward::desc d(kInference, c.md(s0, plain(sh0)), c.md(s1, plain(sh1)));
    c.b.steps.push_back(make_step<dnnl::prelu_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, s0, plain(sh0)}, {DNNL_ARG_WEIGHTS, s1, plain(sh1)},
                              {DNNL_ARG_DST, c.output(0), plain(y)}}));
    return;
  }
  static const std::map<std::string, algorithm> kAlg = {
      {"Add", algorithm::binary_add}, {"Sub", algorithm::binary_sub},  {"Mul", algorithm::binary_mul},
      {"Div", algorithm::binary_div}, {"Max", algorithm::binary_max},  {"Min", algorithm::binary_min},
      {"Equal", algorithm::binary_eq}, {"Less", algorithm::binary_lt}, {"Greater", algorithm::binary_gt}};
  dnnl::binary::desc d(kAlg.at(c.p.op), c.md(s0, plain(sh0)), c.md(s1, plain(sh1)), c.md(c.output(0), plain(y)));
  c.b.steps.push_back(make_step<dnnl::binary::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC_0, s0, plain(sh0)}, {DNNL_ARG_SRC_1, s1, plain(sh1)},
                            {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

void softmax(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  int64_t axis = c.p.int_attr("axis", static_cast<int64_t>(x.size()) - 1);
  View v = plain(x);
  if (c.p.int_attr("coerce_2d", 0) != 0) {  // opset < 13: softmax over the flattened trailing dims
    const int64_t outer = elements(Shape(x.begin(), x.begin() + axis));
    v = reshaped({outer, elements(x) / outer});
    axis = 1;
  }
  const auto alg = c.p.op == "LogSoftmax" ? algorithm::softmax_log : algorithm::softmax_accurate;
  dnnl::softmax_v2_forward::desc d(kInference, alg, c.md(c.input(0), v), c.md(c.output(0), v), static_cast<int>(axis));
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::softmax_v2_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), v}, {DNNL_ARG_DST, c.output(0), v}}));
}

void pooling(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5) unsupported("oneDNN pooling is 1-D, 2-D or 3-D");
  const size_t n = x.size() - 2;
  const bool global = c.p.op == "GlobalAveragePool" || c.p.op == "GlobalMaxPool";
  const bool is_max = c.p.op == "MaxPool" || c.p.op == "GlobalMaxPool";
  if (base_variant(variant) == "reduction") {
    dnnl::reduction::desc d(is_max ? algorithm::reduction_max : algorithm::reduction_mean, c.md(c.input(0), plain(x)),
                            c.md(c.output(0), plain(y)), 0.f, 0.f);
    c.b.algorithm = variant;
    c.b.steps.push_back(make_step<dnnl::reduction::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
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
  const algorithm alg = is_max ? algorithm::pooling_max
                        : c.p.int_attr("count_include_pad", 0) != 0 ? algorithm::pooling_avg_include_padding
                                                                    : algorithm::pooling_avg_exclude_padding;
  dnnl::pooling_v2_forward::desc d(kInference, alg, activation_md(c, c.input(0), x, variant),
                                   activation_md(c, c.output(0), y, variant), strides, kernel, dil, pl, pr);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::pooling_v2_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

void reduce(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  Shape kept = x;
  for (auto a : c.p.ints_attr("axes")) kept.at(a) = 1;
  static const std::map<std::string, algorithm> kAlg = {
      {"ReduceMean", algorithm::reduction_mean}, {"ReduceSum", algorithm::reduction_sum},
      {"ReduceMax", algorithm::reduction_max},   {"ReduceMin", algorithm::reduction_min},
      {"ReduceProd", algorithm::reduction_mul}};
  dnnl::reduction::desc d(kAlg.at(c.p.op), c.md(c.input(0), plain(x)), c.md(c.output(0), plain(kept)), 0.f, 0.f);
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::reduction::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(kept)}}));
}

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
  c.b.steps.push_back(step(dnnl::concat::primitive_desc(activation_md(c, c.output(0), c.out_shape(), variant),
                                                        static_cast<int>(c.p.int_attr("axis", 0)), srcs, cpu_engine(),
                                                        c.attr(false)),
                           args));
}

// A reorder from `src` (seen through sv) into `dst` (seen through dv): Transpose, Slice, Split, Pad
// and the copies of data-movement ops are all this.
StepDef reorder_step(Ctx& c, int src, const View& sv, int dst, const View& dv) {
  return step(dnnl::reorder::primitive_desc(cpu_engine(), c.md(src, sv), cpu_engine(), c.md(dst, dv), c.attr(false), true),
              {{DNNL_ARG_FROM, src, sv}, {DNNL_ARG_TO, dst, dv}});
}

void transpose(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const auto perm = c.p.ints_attr("perm");
  c.b.algorithm = variant;
  c.b.steps.push_back(reorder_step(c, c.input(0), permuted(c.in_shape(0), perm), c.output(0), plain(c.out_shape())));
}

// The plain, uninterpreted copy that stands in for a data-movement op with no oneDNN primitive
// (Gather, Expand, Tile...): read and write the output's size, the op's compulsory traffic.
void copy_proxy(Ctx& c, const std::string& variant, std::string why) {
  const Shape& y = c.out_shape();
  const int src = c.extra(y);
  c.b.algorithm = variant;
  c.b.not_verifiable = std::move(why);
  c.b.steps.push_back(reorder_step(c, src, plain(y), c.output(0), plain(y)));
}

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
  const int64_t axis = c.p.int_attr("axis", 0);
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
  if (c.p.string_attr("mode", "constant") != "constant" || negative || pads.size() != 2 * x.size()) {
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
  c.b.steps.push_back(make_step<dnnl::eltwise_forward::primitive_desc>(fill, c.attr(false), {{DNNL_ARG_SRC, c.output(0), yv}, {DNNL_ARG_DST, c.output(0), yv}}));
  c.b.steps.push_back(reorder_step(c, c.input(0), plain(x), c.output(0), inner));
}

void resize(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  if (x.size() < 3 || x.size() > 5 || x[0] != y[0] || x[1] != y[1])
    unsupported("oneDNN resampling resizes the spatial dims of a 3-D to 5-D tensor only");
  const std::string mode = c.p.string_attr("mode", "nearest");
  if (mode != "nearest" && mode != "linear") unsupported(fmt::format("oneDNN has no {} resampling", mode));
  const std::string coord = c.p.string_attr("coordinate_transformation_mode", "half_pixel");
  bool integer_scale = true;
  for (size_t k = 2; k < x.size(); ++k) integer_scale = integer_scale && y[k] % x[k] == 0;
  if (mode == "linear" && coord != "half_pixel" && coord != "pytorch_half_pixel")
    c.b.not_verifiable = fmt::format("oneDNN's linear resampling uses half-pixel centres, not {}", coord);
  if (mode == "nearest" && !integer_scale)
    c.b.not_verifiable = "oneDNN's nearest rounding matches ONNX only for integer upscales";
  dnnl::resampling_forward::desc d(kInference,
                                   mode == "linear" ? algorithm::resampling_linear : algorithm::resampling_nearest,
                                   c.md(c.input(0), plain(x)), c.md(c.output(0), plain(y)));
  c.b.algorithm = variant;
  c.b.steps.push_back(make_step<dnnl::resampling_forward::primitive_desc>(d, c.attr(false), {{DNNL_ARG_SRC, c.input(0), plain(x)}, {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

void copy_kind(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  copy_proxy(c, variant, fmt::format("{} has no oneDNN primitive: timed as a copy of its output", c.p.op));
}

// --- the kind table -------------------------------------------------------------------------------

using Builder = void (*)(Ctx&, const std::string&);
struct KindMapping {
  std::vector<std::string> ops;
  std::vector<std::string> variants;  // primitive algorithms offered, in order
  Builder build;
};

const std::vector<KindMapping>& mappings() {
  static const std::vector<KindMapping> kMappings = {
      {{"Conv"}, {"convolution_direct", "convolution_winograd"}, conv},
      {{"ConvTranspose"}, {"deconvolution_direct"}, conv},
      {{"Gemm"}, {"matmul", "inner_product"}, gemm},
      {{"MatMul"}, {"matmul"}, matmul},
      {{"BatchNormalization"},
       {"batch_normalization", "batch_normalization@blocked16c", "batch_normalization@channels_last"},
       batch_norm},
      {{"LayerNormalization"}, {"layer_normalization"}, layer_norm},
      {{"InstanceNormalization"}, {"batch_normalization"}, instance_norm},
      {{"LRN"}, {"lrn_across_channels"}, lrn},
      {{"Relu", "LeakyRelu", "Elu", "Selu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Softplus", "Erf",
        "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Pow"},
       {"eltwise"},
       eltwise},
      {{"Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "PRelu"}, {"binary"}, binary},
      {{"Softmax", "LogSoftmax"}, {"softmax_v2"}, softmax},
      {{"MaxPool", "AveragePool"}, {"pooling_v2", "pooling_v2@blocked16c", "pooling_v2@channels_last"}, pooling},
      {{"GlobalAveragePool", "GlobalMaxPool"}, {"pooling_v2", "reduction"}, pooling},
      {{"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}, {"reduction"}, reduce},
      {{"Concat"}, {"concat", "concat@blocked16c", "concat@channels_last"}, concat},
      {{"Transpose"}, {"reorder"}, transpose},
      {{"Slice"}, {"reorder"}, slice},
      {{"Split"}, {"reorder"}, split},
      {{"Pad"}, {"reorder"}, pad},
      {{"Resize"}, {"resampling"}, resize},
      {{"Gather", "Expand", "Tile", "ScatterND", "Cast", "Where"}, {"copy"}, copy_kind},
  };
  return kMappings;
}

const KindMapping* mapping_for(const std::string& op) {
  for (const auto& m : mappings())
    if (std::find(m.ops.begin(), m.ops.end(), op) != m.ops.end()) return &m;
  return nullptr;
}

dt data_type(const std::string& name) {
  if (name == "f32") return dt::f32;
  if (name == "bf16") return dt::bf16;
  if (name == "f16") return dt::f16;
  unsupported(fmt::format("the oneDNN backend measures f32 and bf16, not {}", name));
}

// Builds the primitives of one variant. Errors: "unsupported: ..." (see make_kernel()).
Result<Build> build(const CaseSpec& spec, const std::string& variant) {
  const Problem& p = spec.problem;
  const KindMapping* m = mapping_for(p.op);
  if (!m) return make_error("unsupported: Floorline maps no oneDNN primitive to {}", p.op);
  try {
    Ctx c{spec, p, data_type(spec.dtype), {}};
    for (const auto& in : p.inputs) c.b.tensors.push_back({in.shape, Fill::kUniform, false, false});
    for (const auto& out : p.outputs) c.b.tensors.push_back({out.shape, Fill::kNone, false, true});
    c.b.n_inputs = p.inputs.size();
    c.b.n_outputs = p.outputs.size();
    for (const auto& t : c.b.tensors)
      if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; }))
        unsupported("a shape is unknown");
    m->build(c, variant);
    return std::move(c.b);
  } catch (const Unsupported& u) {
    return make_error("unsupported: {}", u.why);
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return make_error("unsupported: oneDNN: {}", e.what());
    return make_error("unsupported: oneDNN rejected the descriptor: {}", e.what());
  } catch (const std::exception& e) {
    return make_error("{}", e.what());
  }
}

// "convolution_direct:brg:avx512_core"
std::string algorithm_name(const std::string& variant, const std::string& impl) { return variant + ":" + impl; }

// --- memory formats, for layouts and conversions --------------------------------------------------

// The name of a memory descriptor's format ("aBcd16b"), found by comparing against every format tag
// of its rank; "strided" when it is a plain layout with unusual strides, "blocked" otherwise.
std::string format_name(const memory::desc& md) {
  const int ndims = md.data.ndims;
  for (int t = static_cast<int>(dnnl_a); t < static_cast<int>(dnnl_format_tag_last); ++t) {
    dnnl_memory_desc_t candidate;
    if (dnnl_memory_desc_init_by_tag(&candidate, ndims, md.data.dims, md.data.data_type,
                                     static_cast<dnnl_format_tag_t>(t)) != dnnl_success)
      continue;
    if (dnnl_memory_desc_equal(&candidate, &md.data)) return dnnl_fmt_tag2str(static_cast<dnnl_format_tag_t>(t));
  }
  return md.data.format_desc.blocking.inner_nblks == 0 ? "strided" : "blocked";
}

bool is_plain(const memory::desc& md) {
  return md == memory::desc(md.dims(), md.data_type(), plain_strides(md.dims()));
}

std::string dtype_name(dt t) {
  switch (t) {
    case dt::f32: return "f32";
    case dt::bf16: return "bf16";
    case dt::f16: return "f16";
    case dt::s8: return "s8";
    case dt::u8: return "u8";
    case dt::s32: return "s32";
    default: return "?";
  }
}

// A port's layout as replay compares it (kernel.hpp, Port::layout).
std::string port_layout(const memory::desc& md) {
  return is_plain(md) ? "plain"
                      : fmt::format("{} {} {}", dtype_name(md.data_type()), format_name(md), fmt::join(md.dims(), "x"));
}

// --- random data ----------------------------------------------------------------------------------

// xorshift64*: fast, and different per tensor (seeded by the tensor's position and size).
void fill_random(float* out, int64_t n, Fill f, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  // [-1, 1) by default; [0.5, 1.5) where the op needs positive inputs (variance, divisor, log, sqrt).
  const float lo = f == Fill::kPositive ? 0.5f : -1.f, span = f == Fill::kPositive ? 1.f : 2.f;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const uint64_t r = s * 0x2545F4914F6CDD1Dull;
    out[i] = lo + span * static_cast<float>(r >> 40) * (1.f / static_cast<float>(1 << 24));  // 24 random bits
  }
}

// --- the kernel -----------------------------------------------------------------------------------

struct Step {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>> in_conversions;   // view → format, before timing
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>> out_conversions;  // format → view, for verify
  std::vector<std::pair<memory, memory>> prefills;  // (prefill tensor view, dst memory in its format)
  memory scratchpad;
};

class OnednnKernel final : public Kernel {
 public:
  // `problem` is what verify() computes the reference of.
  OnednnKernel(Problem problem, Build b, std::string impl, dt type, uint64_t seed)
      : problem_(std::move(problem)), b_(std::move(b)), impl_(std::move(impl)), type_(type), seed_(seed) {}

  Status init() {
    user_.resize(b_.tensors.size());
    dev_.resize(b_.tensors.size());
    used_.assign(b_.tensors.size(), false);
    for (const auto& s : b_.steps)
      for (const auto& a : s.args) {
        used_[a.tensor] = true;
        if (a.prefill >= 0) used_[a.prefill] = true;
      }
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (!used_[t]) continue;
      const auto& td = b_.tensors[t];
      const dims d = td.shape.empty() ? dims{1} : dims(td.shape.begin(), td.shape.end());
      user_[t] = memory(memory::desc(d, dt::f32, plain_strides(d)), cpu_engine());
      const dt tt = td.f32_only ? dt::f32 : type_;
      dev_[t] = tt == dt::f32 ? user_[t] : memory(memory::desc(d, tt, plain_strides(d)), cpu_engine());
    }
    for (const auto& sd : b_.steps) {
      Step s;
      s.prim = dnnl::primitive(sd.pd().get());
      for (const auto& a : sd.args) {
        const auto& td = b_.tensors[a.tensor];
        const dt tt = td.f32_only ? dt::f32 : type_;
        const size_t esize = memory::data_type_size(tt);
        auto* base = static_cast<char*>(dev_[a.tensor].get_data_handle()) + a.view.offset * static_cast<int64_t>(esize);
        memory view(memory::desc(a.view.d, tt, a.view.strides), cpu_engine(), base);
        const memory::desc want = sd.pd().query_md(dnnl::query::exec_arg_md, a.arg);
        memory m = view;
        if (want.get_size() != 0 && want != view.get_desc()) {
          m = memory(want, cpu_engine());
          if (td.is_output) s.out_conversions.push_back({dnnl::reorder(m, view), {m, view}});
          else s.in_conversions.push_back({dnnl::reorder(view, m), {view, m}});
        }
        uses_.push_back({a.tensor, view, a.view.offset * static_cast<int64_t>(esize), m == view ? memory() : m});
        if (a.prefill >= 0) {
          memory src(memory::desc(a.view.d, tt, plain_strides(a.view.d)), cpu_engine(), dev_[a.prefill].get_data_handle());
          s.prefills.push_back({src, m});
        }
        s.args[a.arg] = m;
      }
      const memory::desc sp = sd.pd().scratchpad_desc();
      if (sp.get_size() > 0) {
        s.scratchpad = memory(sp, cpu_engine());
        s.args[DNNL_ARG_SCRATCHPAD] = s.scratchpad;
        workspace_ += static_cast<int64_t>(sp.get_size());
      }
      // Outputs the primitive produces that Floorline does not read (statistics, workspace).
      for (int arg : {DNNL_ARG_WORKSPACE, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE}) {
        if (s.args.count(arg)) continue;
        const memory::desc md = sd.pd().query_md(dnnl::query::exec_arg_md, arg);
        if (md.get_size() > 0) s.args[arg] = memory(md, cpu_engine());
      }
      steps_.push_back(std::move(s));
    }
    initialise(seed_);
    return {};
  }

  void run() override {
    auto& strm = cpu_stream();
    for (auto& s : steps_) s.prim.execute(strm, s.args);
    strm.wait();
  }
  std::string implementation() const override { return impl_; }
  int64_t workspace_bytes() const override { return workspace_; }

  // A port is the memory run() itself reads or writes for the operand: the implementation's own
  // (blocked) buffer when the operand is converted once at build time, else the plain buffer.
  // An operand that several primitive arguments read, one of them through a conversion, has none.
  std::optional<Port> port(bool output, size_t k) const override {
    const memory* m = port_memory(output, k);
    if (!m) return std::nullopt;
    const memory::desc md = m->get_desc();
    const size_t t = output ? b_.n_inputs + k : k;
    void* data = m == &dev_[t] && bound_.count(t) ? bound_.at(t) : m->get_data_handle();
    return Port{data, static_cast<int64_t>(md.get_size()), port_layout(md)};
  }

  Status bind(bool output, size_t k, void* data) override {
    if (!port_memory(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    const int t = static_cast<int>(output ? b_.n_inputs + k : k);
    bound_[static_cast<size_t>(t)] = data;
    for (auto& u : uses_) {
      if (u.tensor != t) continue;
      if (u.converted) u.converted.set_data_handle(data);
      else u.view.set_data_handle(static_cast<char*>(data) + u.offset_bytes);
    }
    return {};
  }

  // The memory of port(output, k), or nullptr (see port()).
  const memory* port_memory(bool output, size_t k) const {
    if (k >= (output ? b_.n_outputs : b_.n_inputs)) return nullptr;
    const int t = static_cast<int>(output ? b_.n_inputs + k : k);
    if (!used_[static_cast<size_t>(t)]) return nullptr;
    const Use* converted = nullptr;
    int n = 0;
    for (const auto& u : uses_)
      if (u.tensor == t) {
        ++n;
        if (u.converted) converted = &u;
      }
    if (converted) return n == 1 ? &converted->converted : nullptr;
    return &dev_[static_cast<size_t>(t)];
  }

  Status verify() override {
    if (!b_.not_verifiable.empty()) return make_error("not verifiable: {}", b_.not_verifiable);
    try {
      return compare_with_reference();
    } catch (const dnnl::error& e) {
      return make_error("oneDNN: {}", e.what());
    }
  }


 private:
  Status compare_with_reference() {
    initialise(seed_ + 7);
    run();
    auto& strm = cpu_stream();
    for (auto& s : steps_)
      for (auto& [r, mm] : s.out_conversions) r.execute(strm, mm.first, mm.second);
    for (size_t t = 0; t < b_.tensors.size(); ++t)
      if (used_[t] && b_.tensors[t].is_output && dev_[t] != user_[t]) dnnl::reorder(dev_[t], user_[t]).execute(strm, dev_[t], user_[t]);
    strm.wait();
    std::vector<HostTensor> ins, extras;
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (b_.tensors[t].is_output) continue;
      HostTensor h{b_.tensors[t].shape, {}};
      if (used_[t]) {
        const float* p = static_cast<const float*>(user_[t].get_data_handle());
        h.data.assign(p, p + elements(h.shape));
      }
      (t < b_.n_inputs ? ins : extras).push_back(std::move(h));
    }
    FL_ASSIGN_OR_RETURN(auto ref, reference(problem_, ins, extras));
    const double tol = type_ == dt::f32 ? 1e-3 : 3e-2;
    for (size_t k = 0; k < b_.n_outputs; ++k) {
      const size_t t = b_.n_inputs + k;
      if (!used_[t] || k >= ref.size()) continue;
      if (auto st = compare_output(static_cast<const float*>(user_[t].get_data_handle()), ref[k], tol); !st)
        return st.error().with_context(fmt::format("output {}", k));
    }
    return {};
  }

  // Fresh random inputs in every format the primitives read them in.
  void initialise(uint64_t seed) {
    auto& strm = cpu_stream();
    for (size_t t = 0; t < b_.tensors.size(); ++t) {
      if (!used_[t]) continue;
      const auto& td = b_.tensors[t];
      const Fill f = td.is_output ? Fill::kUniform : td.fill;
      fill_random(static_cast<float*>(user_[t].get_data_handle()), elements(td.shape), f, seed + t * 131);
      if (dev_[t] != user_[t]) {
        dnnl::reorder(user_[t], dev_[t]).execute(strm, user_[t], dev_[t]);
        // The reference reads what the kernel reads: values rounded to the case's type.
        dnnl::reorder(dev_[t], user_[t]).execute(strm, dev_[t], user_[t]);
      }
    }
    for (auto& s : steps_) {
      for (auto& [r, mm] : s.in_conversions) r.execute(strm, mm.first, mm.second);
      for (auto& [src, dst] : s.prefills)
        if (src != dst) dnnl::reorder(src, dst).execute(strm, src, dst);
    }
    strm.wait();
  }

  Problem problem_;
  Build b_;
  std::string impl_;
  dt type_;
  uint64_t seed_;
  std::vector<memory> user_, dev_;
  std::vector<bool> used_;
  std::vector<Step> steps_;
  int64_t workspace_ = 0;
  // Every primitive argument that reads or writes a data tensor: the plain view of the tensor's
  // buffer (at offset_bytes), and the implementation's own buffer when it converts the tensor.
  struct Use {
    int tensor = 0;
    memory view;
    int64_t offset_bytes = 0;
    memory converted;  // empty when the primitive uses the view directly
  };
  std::vector<Use> uses_;
  std::map<size_t, void*> bound_;  // plain tensors bound to outside buffers (replay)
};

// Replay's layout conversion: reorders from a producer's output buffer into a consumer's input
// buffer, through a plain buffer when both are blocked with different dims.
class ConversionKernel final : public Kernel {
 public:
  void add(memory from, memory to) {
    reorders_.push_back({dnnl::reorder(from, to), {from, to}});
    impl_ += (impl_.empty() ? "" : " + ") + format_name(from.get_desc()) + ">" + format_name(to.get_desc());
  }
  void keep(memory m) { owned_.push_back(std::move(m)); }
  void set_destination(memory m) { dest_ = std::move(m); }
  std::optional<Port> port(bool output, size_t k) const override {
    if (!output || k != 0 || !dest_) return std::nullopt;
    const memory::desc md = dest_.get_desc();
    return Port{dest_.get_data_handle(), static_cast<int64_t>(md.get_size()), port_layout(md)};
  }
  void run() override {
    auto& strm = cpu_stream();
    for (auto& [r, mm] : reorders_) r.execute(strm, mm.first, mm.second);
    strm.wait();
  }
  std::string implementation() const override { return "reorder " + impl_; }
  int64_t workspace_bytes() const override { return 0; }
  Status verify() override { return make_error("not verifiable: a layout conversion has no ONNX counterpart"); }

 private:
  std::vector<std::pair<dnnl::reorder, std::pair<memory, memory>>> reorders_;
  std::vector<memory> owned_;
  memory dest_;
  std::string impl_;
};

// Splits "convolution_direct:brg:avx512_core" into the variant and the implementation name.
std::pair<std::string, std::string> split_algorithm(const std::string& a) {
  const auto colon = a.find(':');
  if (colon == std::string::npos) return {a, ""};
  return {a.substr(0, colon), a.substr(colon + 1)};
}

uint64_t seed_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

// --- public interface -----------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> make_onednn_kernel(const CaseSpec& spec) {
  const bool conversion = !spec.feeds.empty();
  const CaseSpec* main_spec = &spec;
  CaseSpec fed;
  if (conversion) {  // a layout conversion: build the case it feeds to learn the formats
    fed = spec;
    fed.algorithm = spec.feeds;
    fed.feeds.clear();
    main_spec = &fed;
  }
  const auto [variant, impl_name] = split_algorithm(main_spec->algorithm);
  FL_ASSIGN_OR_RETURN(Build b, build(*main_spec, variant));
  try {
    if (b.iterate) {
      for (int k = 0; k < main_spec->impl_index; ++k)
        if (!b.steps[0].next_impl())
          return make_error("skipped: oneDNN now offers only {} implementation(s) of {}", k + 1, variant);
    }
    const std::string impl = b.steps[0].pd().impl_info_str();
    if (!main_spec->impl_name.empty() && impl != main_spec->impl_name)
      return make_error("skipped: implementation {} of {} is now {}, not {} as planned", main_spec->impl_index, variant,
                        impl, main_spec->impl_name);
    const dt type = data_type(spec.dtype);
    if (conversion) {
      // spec.layout is "<tensor>:<from>><to>"; the tensor is src or dst of the fed primitive.
      const std::string tensor = spec.layout.substr(0, spec.layout.find(':'));
      const int arg = tensor == "dst" ? DNNL_ARG_DST : DNNL_ARG_SRC;
      const memory::desc want = b.steps[0].pd().query_md(dnnl::query::exec_arg_md, arg);
      const ArgDef* a = nullptr;
      for (const auto& ad : b.steps[0].args)
        if (ad.arg == arg) a = &ad;
      if (!a || want.get_size() == 0) return make_error("unsupported: no {} tensor to convert", tensor);
      const memory::desc plain_md(a->view.d, type, a->view.strides);
      Build rb;
      rb.algorithm = "reorder";
      rb.iterate = false;
      rb.not_verifiable = "a layout conversion has no ONNX counterpart";
      const Shape shape(a->view.d.begin(), a->view.d.end());
      rb.tensors = {{shape, Fill::kUniform, false, false}, {shape, Fill::kNone, false, true}};
      rb.n_inputs = 1;
      rb.n_outputs = 1;
      // The converted side is allocated in the implementation's format by the generic code.
      const bool to_blocked = tensor == "src";
      const memory::desc from = to_blocked ? plain_md : want, to = to_blocked ? want : plain_md;
      dnnl::reorder::primitive_desc rpd(cpu_engine(), from, cpu_engine(), to, primitive_attr(), true);
      if (!rpd) return make_error("unsupported: oneDNN has no reorder {}", spec.layout);
      const std::string reorder_impl = rpd.impl_info_str();
      rb.steps.push_back(step(std::move(rpd), {{DNNL_ARG_FROM, 0, View{a->view.d, a->view.strides, 0}},
                                               {DNNL_ARG_TO, 1, View{a->view.d, a->view.strides, 0}}}));
      auto k = std::make_unique<OnednnKernel>(spec.problem, std::move(rb), reorder_impl, type, seed_of(spec.name));
      FL_TRY(k->init());
      return std::unique_ptr<Kernel>(std::move(k));
    }
    auto k = std::make_unique<OnednnKernel>(spec.problem, std::move(b), impl, type, seed_of(spec.name));
    FL_TRY(k->init());
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const Unsupported& u) {
    return make_error("unsupported: {}", u.why);
  } catch (const dnnl::error& e) {
    return make_error("oneDNN: {}", e.what());
  } catch (const std::bad_alloc&) {
    return make_error("out of memory allocating the tensors of {}", spec.problem.key);
  }
}

Result<std::unique_ptr<Kernel>> make_onednn_conversion(const PortRef& from_ref, const PortRef& to_ref) {
  const auto* p = dynamic_cast<const OnednnKernel*>(from_ref.kernel);
  const auto* c = dynamic_cast<const OnednnKernel*>(to_ref.kernel);
  if (!p || !c) return make_error("unsupported: a oneDNN conversion joins two oneDNN cases");
  const memory* from_port = p->port_memory(from_ref.output, from_ref.index);
  const memory* to_port = c->port_memory(to_ref.output, to_ref.index);
  if (!from_port || !to_port) return make_error("unsupported: no port to convert between");
  const memory::desc fd = from_port->get_desc(), td = to_port->get_desc();
  auto count = [](const memory::desc& d) {
    int64_t n = 1;
    for (auto x : d.dims()) n *= x;
    return n;
  };
  if (count(fd) != count(td) || fd.data_type() != td.data_type())
    return make_error("unsupported: {} elements of {} cannot feed {} elements of {}", count(fd),
                      dtype_name(fd.data_type()), count(td), dtype_name(td.data_type()));
  try {
    auto k = std::make_unique<ConversionKernel>();
    const memory source(fd, cpu_engine(), from_ref.data);
    const memory* from = &source;
    const memory dest = to_ref.data ? memory(td, cpu_engine(), to_ref.data) : memory(td, cpu_engine());
    const memory* to = &dest;
    k->set_destination(dest);
    if (fd.dims() == td.dims()) {
      k->add(*from, *to);
    } else if (is_plain(fd)) {  // a reshape of a plain buffer: the same bytes seen with the consumer's dims
      k->add(memory(memory::desc(td.dims(), td.data_type(), plain_strides(td.dims())), cpu_engine(),
                    from->get_data_handle()),
             *to);
    } else if (is_plain(td)) {
      k->add(*from, memory(memory::desc(fd.dims(), fd.data_type(), plain_strides(fd.dims())), cpu_engine(),
                           to->get_data_handle()));
    } else {  // blocked → plain (producer's dims) → blocked (consumer's dims)
      memory tmp(memory::desc(fd.dims(), fd.data_type(), plain_strides(fd.dims())), cpu_engine());
      k->add(*from, tmp);
      k->add(memory(memory::desc(td.dims(), td.data_type(), plain_strides(td.dims())), cpu_engine(),
                    tmp.get_data_handle()),
             *to);
      k->keep(tmp);
    }
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const dnnl::error& e) {
    return make_error("unsupported: oneDNN has no reorder for this conversion: {}", e.what());
  }
}

Result<std::vector<Implementation>> onednn_implementations(const CaseSpec& spec) {
  const Problem& p = spec.problem;
  const KindMapping* m = mapping_for(p.op);
  if (!m) return make_error("unsupported: Floorline maps no oneDNN primitive to {}", p.op);
  std::vector<Implementation> out;
  std::string first_error;
  // oneDNN's own first choice: convolution_auto's first implementation for Conv, else the first
  // implementation of the first algorithm that has one.
  std::string auto_impl;
  if (p.op == "Conv")
    if (auto ab = build(spec, "convolution_auto"); ab.ok()) auto_impl = ab->steps[0].pd().impl_info_str();
  for (const auto& variant : m->variants) {
    auto b = build(spec, variant);
    if (!b.ok()) {
      if (first_error.empty()) first_error = b.error().message;
      continue;
    }
    try {
      auto& st0 = b->steps[0];
      int index = 0;
      do {
        Implementation im;
        im.impl_name = st0.pd().impl_info_str();
        im.algorithm = algorithm_name(variant, im.impl_name);
        im.impl_index = index;
        // "ref:any", "bnorm_ref:any": plain-loop implementations
        im.reference = im.impl_name.rfind("ref", 0) == 0 || im.impl_name.find("_ref") != std::string::npos;
        if (p.op == "Conv" || p.op == "ConvTranspose" || p.op == "Gemm" || p.op == "MatMul" ||
            !layout_suffix(variant).empty()) {
          std::vector<std::string> parts;
          for (const auto& a : b->steps[0].args) {
            // (A concat's sources are not listed: a conversion case converts one src or dst tensor.)
            const char* name = a.arg == DNNL_ARG_SRC ? "src" : a.arg == DNNL_ARG_WEIGHTS ? "wei" : a.arg == DNNL_ARG_DST ? "dst" : nullptr;
            if (!name) continue;
            const memory::desc got = st0.pd().query_md(dnnl::query::exec_arg_md, a.arg);
            const memory::desc view(a.view.d, got.data_type(), a.view.strides);
            parts.push_back(fmt::format("{}:{}", name, format_name(got)));
            // Weights are packed once by any framework; activations are converted on every call.
            if (a.arg != DNNL_ARG_WEIGHTS && got != view)
              im.conversions.push_back(fmt::format("{}:{}>{}", name, format_name(view), format_name(got)));
          }
          im.layout = fmt::format("{}", fmt::join(parts, " "));
        }
        out.push_back(std::move(im));
        ++index;
      } while (b->iterate && st0.next_impl());
    } catch (const dnnl::error& e) {
      if (first_error.empty()) first_error = fmt::format("oneDNN: {}", e.what());
    }
  }
  if (out.empty()) return Error{first_error.empty() ? "unsupported: no implementation" : first_error};
  bool marked = false;
  for (auto& im : out)
    if (!auto_impl.empty() && im.impl_name == auto_impl && !marked) marked = im.is_default = true;
  if (!marked) out[0].is_default = true;
  return out;
}

benchmark::internal::Benchmark* register_onednn_case(const CaseSpec& spec, const Work& work) {
  return register_case(spec, work, make_onednn_kernel);
}

std::string onednn_version() {
  const auto* v = dnnl::version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

std::string onednn_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

void set_onednn_threads(int threads) { omp_set_num_threads(std::max(1, threads)); }
int onednn_threads() { return omp_get_max_threads(); }

}  // namespace floorline::kernels
