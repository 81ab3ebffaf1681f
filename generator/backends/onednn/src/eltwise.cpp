// oneDNN builders: element-wise unary ops (eltwise chains), binary ops (binary, PReLU) and Sum.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

namespace {

constexpr float kFloatMax = std::numeric_limits<float>::max();

float finite(double v) {
  return static_cast<float>(std::clamp<double>(v, -kFloatMax, kFloatMax));
}

}  // namespace

// The oneDNN eltwise chain of an ONNX unary kind (HardSigmoid and Selu take two). `proxy` is set
// when oneDNN computes a different function of the same cost (Erf as gelu_erf).
std::vector<EltwiseOp> eltwise_chain(LayerKind kind, double alpha, double beta, std::string* proxy) {
  using K = LayerKind;
  switch (kind) {
    case K::kRelu:
      return {{algorithm::eltwise_relu, 0.f, 0.f}};
    case K::kLeakyRelu:
      return {{algorithm::eltwise_relu, static_cast<float>(alpha), 0.f}};
    case K::kElu:
      return {{algorithm::eltwise_elu, static_cast<float>(alpha), 0.f}};
    case K::kSelu:
      return {{algorithm::eltwise_elu, 1.6732632f, 0.f}, {algorithm::eltwise_linear, 1.0507009f, 0.f}};
    case K::kClip:
      return {{algorithm::eltwise_clip_v2, finite(alpha), finite(beta)}};
    case K::kSigmoid:
      return {{algorithm::eltwise_logistic, 0.f, 0.f}};
    case K::kTanh:
      return {{algorithm::eltwise_tanh, 0.f, 0.f}};
    case K::kHardSigmoid:
      return {{algorithm::eltwise_linear, static_cast<float>(alpha), static_cast<float>(beta)},
              {algorithm::eltwise_clip_v2, 0.f, 1.f}};
    case K::kHardSwish:
      return {{algorithm::eltwise_hardswish, 0.f, 0.f}};
    case K::kSoftplus:
      return {{algorithm::eltwise_soft_relu, 0.f, 0.f}};
    case K::kExp:
      return {{algorithm::eltwise_exp, 0.f, 0.f}};
    case K::kLog:
      return {{algorithm::eltwise_log, 0.f, 0.f}};
    case K::kSqrt:
      return {{algorithm::eltwise_sqrt, 0.f, 0.f}};
    case K::kAbs:
      return {{algorithm::eltwise_abs, 0.f, 0.f}};
    case K::kNeg:
      return {{algorithm::eltwise_linear, -1.f, 0.f}};
    case K::kReciprocal:
      return {{algorithm::eltwise_pow, 1.f, -1.f}};
    case K::kPow:
      return {{algorithm::eltwise_pow, 1.f, static_cast<float>(beta)}};
    case K::kErf:
      if (proxy)
        *proxy = "Erf is timed as oneDNN's gelu_erf (one erf per element, same traffic): oneDNN has no erf";
      return {{algorithm::eltwise_gelu_erf, 0.f, 0.f}};
    case K::kGelu:  // alpha 1: approximate = "tanh" (unary_params)
      return {{alpha != 0 ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf, 0.f, 0.f}};
    default:
      return {};
  }
}

// Alpha/beta of a unary kind from its ONNX attributes (the IR fills their defaults); Clip's bounds
// are absent when unbounded, Pow's exponent when it is a run-time input (NaN).
std::pair<double, double> unary_params(const Problem& p) {
  switch (p.kind) {
    case LayerKind::kClip:
      return {p.float_attr("min", -std::numeric_limits<double>::infinity()),
              p.float_attr("max", std::numeric_limits<double>::infinity())};
    case LayerKind::kLeakyRelu:
    case LayerKind::kElu:
      return {p.float_attr("alpha"), 0};
    case LayerKind::kHardSigmoid:
      return {p.float_attr("alpha"), p.float_attr("beta")};
    case LayerKind::kPow:
      return {1.0, p.float_attr("y", std::numeric_limits<double>::quiet_NaN())};
    case LayerKind::kGelu:
      return {p.string_attr("approximate", "none") == "tanh" ? 1.0 : 0.0, 0};
    default:
      return {0, 0};
  }
}

void eltwise(Ctx& c, const std::string& variant) {
  // A Sigmoid with its Mul by its own input (SiLU, post-op MulInput): oneDNN's swish, x·sigmoid(x).
  const bool silu =
      c.p.kind == LayerKind::kSigmoid && c.p.post_ops.size() == 1 && c.p.post_ops[0].op == "MulInput";
  if (!silu) require_no_post_ops(c);
  const auto [alpha, beta] = unary_params(c.p);
  const auto chain = silu ? std::vector<EltwiseOp>{{algorithm::eltwise_swish, 1.f, 0.f}}
                          : eltwise_chain(c.p.kind, alpha, beta, &c.b.not_verifiable);
  if (chain.empty()) unsupported(fmt::format("oneDNN 2.6 has no element-wise algorithm for {}", c.p.op));
  const LayerKind k = c.p.kind;
  if (k == LayerKind::kPow && std::isnan(beta)) unsupported("Pow with a run-time (non-constant) exponent");
  if (k == LayerKind::kLog || k == LayerKind::kSqrt || k == LayerKind::kReciprocal || k == LayerKind::kPow)
    c.set_fill(c.input(0), Fill::kPositive);
  const View v = plain(c.in_shape(0));
  c.b.algorithm = variant;
  c.b.iterate = chain.size() == 1;
  for (size_t k = 0; k < chain.size(); ++k) {
    // The second algorithm of a chain runs in place on the output.
    const int src = k == 0 ? c.input(0) : c.output(0);
    dnnl::eltwise_forward::desc d(kInference, chain[k].alg, c.md(src, v), chain[k].alpha, chain[k].beta);
    c.b.steps.push_back(make_step<dnnl::eltwise_forward::primitive_desc>(
        d, c.attr(false), {{DNNL_ARG_SRC, src, v}, {DNNL_ARG_DST, c.output(0), v}}));
  }
}

void binary(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& y = c.out_shape();
  const Shape a = rank_padded(c.in_shape(0), y.size()), b = rank_padded(c.in_shape(1), y.size());
  int s0 = c.input(0), s1 = c.input(1);
  Shape sh0 = a, sh1 = b;
  const LayerKind k = c.p.kind;
  const bool commutative = k == LayerKind::kAdd || k == LayerKind::kMul || k == LayerKind::kMax ||
                           k == LayerKind::kMin || k == LayerKind::kEqual;
  if (a != y) {
    if (b != y || !commutative)
      unsupported("oneDNN binary needs the first operand at the output's shape (only the second broadcasts)");
    std::swap(s0, s1);
    std::swap(sh0, sh1);
  }
  if (k == LayerKind::kDiv) c.set_fill(c.input(1), Fill::kPositive);
  c.b.algorithm = variant;
  // A layout variant ("binary@channels_last", "binary@blocked16c"): the full-size operands and the
  // output in that layout, a broadcast operand plain (per channel, 1xCx1x1, it is the same memory).
  const bool laid_out = !layout_suffix(variant).empty();
  if (laid_out && (y.size() < 4 || std::all_of(y.begin() + 2, y.end(), [](int64_t d) { return d == 1; }) ||
                   int8_case(c) || k == LayerKind::kPRelu))
    unsupported(
        "the layout variants are for f32 NCHW/NCDHW outputs with a spatial extent, of Add, Sub, Mul, Div, "
        "Max "
        "and Min");
  if (int8_case(c)) {  // a QDQ model's Add: 8-bit operands, saturated 8-bit output
    if (k != LayerKind::kAdd) unsupported("int8: Add only");
    int8_operands(c);
    c.b.not_verifiable =
        "int8 Add: oneDNN 2.6's binary takes no zero points, so the QDQ rescaling is not applied "
        "(the same traffic and one add per element)";
  }
  if (k == LayerKind::kPRelu) {
    dnnl::prelu_forward::desc d(kInference, c.md(s0, plain(sh0)), c.md(s1, plain(sh1)));
    c.b.steps.push_back(
        make_step<dnnl::prelu_forward::primitive_desc>(d, c.attr(false),
                                                       {{DNNL_ARG_SRC, s0, plain(sh0)},
                                                        {DNNL_ARG_WEIGHTS, s1, plain(sh1)},
                                                        {DNNL_ARG_DST, c.output(0), plain(y)}}));
    return;
  }
  static const std::map<LayerKind, algorithm> kAlg = {
      {LayerKind::kAdd, algorithm::binary_add},       {LayerKind::kSub, algorithm::binary_sub},
      {LayerKind::kMul, algorithm::binary_mul},       {LayerKind::kDiv, algorithm::binary_div},
      {LayerKind::kMax, algorithm::binary_max},       {LayerKind::kMin, algorithm::binary_min},
      {LayerKind::kEqual, algorithm::binary_eq},      {LayerKind::kLess, algorithm::binary_lt},
      {LayerKind::kGreater, algorithm::binary_gt},    {LayerKind::kGreaterOrEqual, algorithm::binary_ge},
      {LayerKind::kLessOrEqual, algorithm::binary_le}};
  auto md_of = [&](int t, const Shape& sh) {
    return laid_out && sh == y ? activation_md(c, t, sh, variant) : c.md(t, plain(sh));
  };
  dnnl::binary::desc d(kAlg.at(k), md_of(s0, sh0), md_of(s1, sh1), md_of(c.output(0), y));
  c.b.steps.push_back(make_step<dnnl::binary::primitive_desc>(d, c.attr(false),
                                                              {{DNNL_ARG_SRC_0, s0, plain(sh0)},
                                                               {DNNL_ARG_SRC_1, s1, plain(sh1)},
                                                               {DNNL_ARG_DST, c.output(0), plain(y)}}));
}

// Sum of N inputs: oneDNN's sum primitive (every scale 1), which adds tensors of the output's shape;
// inputs that broadcast are not what it computes. Mean is the same primitive with every scale 1/N.
void sum(Ctx& c, const std::string& variant) {
  require_no_post_ops(c);
  const Shape& y = c.out_shape();
  std::vector<memory::desc> srcs;
  std::vector<ArgDef> args;
  for (size_t k = 0; k < c.p.inputs.size(); ++k) {
    if (c.in_shape(k) != y)
      unsupported("oneDNN sum adds inputs of the output's shape only (no broadcasting)");
    srcs.push_back(c.md(c.input(k), plain(y)));
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(k), c.input(k), plain(y)});
  }
  args.push_back({DNNL_ARG_DST, c.output(0), plain(y)});
  const float scale = c.p.kind == LayerKind::kMean ? 1.f / static_cast<float>(srcs.size()) : 1.f;
  const std::vector<float> scales(srcs.size(), scale);
  c.b.algorithm = variant;
  c.b.steps.push_back(
      step(dnnl::sum::primitive_desc(c.md(c.output(0), plain(y)), scales, srcs, cpu_engine(), c.attr(false)),
           args));
}

}  // namespace floorline::kernels::onednn_detail
