// oneDNN builders: element-wise unary ops (eltwise chains) and binary ops (binary, PReLU).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "internal.hpp"

namespace floorline::kernels::onednn_detail {

namespace {

constexpr float kFloatMax = std::numeric_limits<float>::max();

float finite(double v) { return static_cast<float>(std::clamp<double>(v, -kFloatMax, kFloatMax)); }

}  // namespace

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

}  // namespace floorline::kernels::onednn_detail
