// XNNPACK operator builders: convolution, fully connected, pooling, element-wise; and the factory.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "internal.hpp"

namespace floorline::kernels {
namespace xnnpack_detail {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t u32(int64_t v) {
  if (v < 0 || v > static_cast<int64_t>(UINT32_MAX))
    unsupported(fmt::format("{} does not fit XNNPACK's uint32_t", v));
  return static_cast<uint32_t>(v);
}

size_t sz(int64_t v) {
  return static_cast<size_t>(v);
}

// Right (end) padding that gives the output size `out`: ONNX's ceil_mode adds an output the
// declared pads do not cover, and XNNPACK sizes outputs from its padding (rounding down).
int64_t end_pad(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dilation, int64_t begin) {
  const int64_t pad = (out - 1) * stride + (kernel - 1) * dilation + 1 - in - begin;
  if (pad < 0) unsupported("an output smaller than the padded input covers is not an XNNPACK pooling");
  return pad;
}

}  // namespace

Clamp epilogue_clamp(const Problem& p, bool allow_bias_add) {
  Clamp c{-kInf, kInf, false};
  for (size_t k = 0; k < p.post_ops.size(); ++k) {
    const PostOp& op = p.post_ops[k];
    if (op.op == "BiasAdd" && allow_bias_add && k == 0) {
      c.bias_add = true;
    } else if (op.op == "Relu" && k + 1 == p.post_ops.size()) {
      c.min = 0;
    } else if (op.op == "Clip" && k + 1 == p.post_ops.size()) {
      c.min = std::isfinite(op.alpha) ? static_cast<float>(op.alpha) : -kInf;
      c.max = std::isfinite(op.beta) ? static_cast<float>(op.beta) : kInf;
    } else {
      unsupported(fmt::format("XNNPACK fuses an output clamp (Relu, Clip){}, not {}",
                              allow_bias_add ? " after the bias" : "", op.op));
    }
  }
  return c;
}

void build_convolution(XnnKernel& k) {
  const Problem& p = k.p_;
  const Shape& x = p.inputs.at(0).shape;
  const Shape& w = p.inputs.at(1).shape;
  const Shape& y = p.outputs.at(0).shape;
  const auto d = conv_desc(p);  // the kernel API's one reading of the geometry
  if (!d) unsupported(d.error().message);
  if (d->spatial() != 2 || d->transposed) unsupported("XNNPACK's convolution here is 2-D, not transposed");
  const int64_t groups = d->group, oc = d->k, gic = d->c_per_group(), goc = d->k_per_group();
  const int64_t kh = d->kernel[0], kw = d->kernel[1];
  const Clamp clamp = epilogue_clamp(p, false);
  // Operands are read back through k.in by index, never through a reference that add() returned:
  // the next add() may reallocate the vector (a reference kept across the bias's add() read freed
  // memory, and on regnet_y_400mf's 1×1-pixel squeeze-excitation convolutions sized the packed
  // weights from a garbage length: std::bad_alloc).
  k.add(k.in, x, true);
  k.add_constant(w);
  const bool has_bias = p.inputs.size() > 2;
  if (has_bias) k.add_constant(p.inputs[2].shape);
  k.add(k.out, y, true);
  // XNNPACK's weights: [groups][group output channels][kh][kw][group input channels].
  const std::vector<float>& onnx_weights = k.in[1].host.data;
  std::vector<float> packed(onnx_weights.size());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < gic; ++i)
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t s = 0; s < kw; ++s)
          packed[sz(((o * kh + r) * kw + s) * gic + i)] = onnx_weights[sz(((o * gic + i) * kh + r) * kw + s)];
  xnn_operator_t op = nullptr;
  // Padding top, right, bottom, left.
  check(xnn_create_convolution2d_nhwc_f32(
            u32(d->pads_begin[0]), u32(d->pads_end[1]), u32(d->pads_end[0]), u32(d->pads_begin[1]), u32(kh),
            u32(kw), u32(d->strides[0]), u32(d->strides[1]), u32(d->dilations[0]), u32(d->dilations[1]),
            u32(groups), sz(gic), sz(goc), sz(x[1]), sz(oc), packed.data(),
            has_bias ? k.in[2].host.data.data() : nullptr, clamp.min, clamp.max, operator_flags(), &op),
        "xnn_create_convolution2d_nhwc_f32", true);
  k.op_.reset(op);
  k.setup = [&k, n = x[0], h = x[2], wd = x[3]] {
    return xnn_setup_convolution2d_nhwc_f32(k.op_.get(), sz(n), sz(h), sz(wd), k.in[0].data, k.out[0].data,
                                            k.pool_);
  };
  k.impl_ = groups > 1 && gic == 1 && goc == 1 ? "convolution2d_nhwc_f32 (depthwise)"
            : groups > 1                       ? "convolution2d_nhwc_f32 (grouped)"
                                               : "convolution2d_nhwc_f32";
}

void build_fully_connected(XnnKernel& k) {
  const Problem& p = k.p_;
  const Shape& a = p.inputs.at(0).shape;
  const Shape& b = p.inputs.at(1).shape;
  const Shape& y = p.outputs.at(0).shape;
  const bool gemm = p.kind == LayerKind::kGemm;
  const auto g = gemm_desc(p);  // the kernel API's one reading of the operands
  if (!g) unsupported(g.error().message);
  if (!g->folded)
    unsupported("a MatMul whose right operand has batch dimensions (no batched fully connected)");
  if (g->ta) unsupported("XNNPACK's fully connected reads A untransposed (transA = 1)");
  if (g->alpha != 1.f) unsupported("Gemm with alpha != 1 is not a fully connected operator");
  // b as [K][N] (XNN_FLAG_TRANSPOSE_WEIGHTS) rather than [N][K]: MatMul's always, Gemm's without transB.
  const bool transpose_b = !g->tb;
  const int64_t rows = g->m, kdim = g->k, n = g->n;
  const Clamp clamp = epilogue_clamp(p, !gemm);
  k.add(k.in, a, false);
  k.add_constant(b);
  const float* bias = nullptr;
  if (gemm && p.inputs.size() > 2) {
    const Shape& c = p.inputs[2].shape;
    if (elements(c) != n || (c.size() == 2 && c[0] != 1))
      unsupported("XNNPACK's fully connected adds a bias vector of N, not a C of shape " +
                  fmt::format("{}", fmt::join(c, "x")));
    if (p.float_attr("beta") != 1.0) unsupported("Gemm with beta != 1 is not a fully connected bias");
    bias = k.add_constant(c).host.data.data();
  }
  if (clamp.bias_add) {
    // MatMul → Add(bias): the bias the reference adds is the one packed.
    HostTensor h{{n}, std::vector<float>(sz(n))};
    fill_random(h.data.data(), n, Fill::kUniform, 4242);
    k.extras.push_back(std::move(h));
    bias = k.extras.back().data.data();
  }
  k.add(k.out, y, false);
  xnn_operator_t op = nullptr;
  check(xnn_create_fully_connected_nc_f32(
            sz(kdim), sz(n), sz(kdim), sz(n), k.in[1].host.data.data(), bias, clamp.min, clamp.max,
            (transpose_b ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0) | operator_flags(), &op),
        "xnn_create_fully_connected_nc_f32", true);
  k.op_.reset(op);
  k.setup = [&k, rows] {
    return xnn_setup_fully_connected_nc_f32(k.op_.get(), sz(rows), k.in[0].data, k.out[0].data, k.pool_);
  };
  k.impl_ = "fully_connected_nc_f32";
}

void build_pooling(XnnKernel& k) {
  const Problem& p = k.p_;
  const Shape& x = p.inputs.at(0).shape;
  const Shape& y = p.outputs.at(0).shape;
  if (p.outputs.size() > 1) unsupported("MaxPool's Indices output is not an XNNPACK pooling output");
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  k.add(k.in, x, true);
  xnn_operator_t op = nullptr;
  if (p.kind == LayerKind::kGlobalAveragePool) {
    // NHWC [N, H·W, C] → [N, C]: the NCHW [N, C, 1, 1] output needs no conversion.
    k.add(k.out, y, false);
    check(xnn_create_global_average_pooling_nwc_f32(sz(c), sz(c), sz(c), -kInf, kInf, operator_flags(), &op),
          "xnn_create_global_average_pooling_nwc_f32", true);
    k.op_.reset(op);
    k.setup = [&k, n, hw = h * w] {
      return xnn_setup_global_average_pooling_nwc_f32(k.op_.get(), sz(n), sz(hw), k.in[0].data, k.out[0].data,
                                                      k.pool_);
    };
    k.impl_ = "global_average_pooling_nwc_f32";
    return;
  }
  k.add(k.out, y, true);
  const auto kernel = p.ints_attr("kernel"), strides = p.ints_attr("strides"), pads = p.ints_attr("pads");
  const bool is_max = p.kind == LayerKind::kMaxPool;
  std::vector<int64_t> dil = {1, 1};
  if (is_max) dil = p.ints_attr("dil");
  const int64_t bottom = end_pad(h, y[2], kernel[0], strides[0], dil[0], pads[0]);
  const int64_t right = end_pad(w, y[3], kernel[1], strides[1], dil[1], pads[1]);
  if (is_max) {
    check(xnn_create_max_pooling2d_nhwc_f32(u32(pads[0]), u32(right), u32(bottom), u32(pads[1]),
                                            u32(kernel[0]), u32(kernel[1]), u32(strides[0]), u32(strides[1]),
                                            u32(dil[0]), u32(dil[1]), sz(c), sz(c), sz(c), -kInf, kInf,
                                            operator_flags(), &op),
          "xnn_create_max_pooling2d_nhwc_f32", true);
    k.op_.reset(op);
    k.setup = [&k, n, h, w] {
      return xnn_setup_max_pooling2d_nhwc_f32(k.op_.get(), sz(n), sz(h), sz(w), k.in[0].data, k.out[0].data,
                                              k.pool_);
    };
    k.impl_ = "max_pooling2d_nhwc_f32";
    return;
  }
  // XNNPACK averages over the input pixels a window covers (padding excluded), ONNX's
  // count_include_pad = 0.
  const bool padded = pads[0] || pads[1] || bottom || right;
  if (p.int_attr("count_include_pad") != 0 && padded)
    unsupported("XNNPACK's average pooling excludes padding (count_include_pad = 0)");
  check(xnn_create_average_pooling2d_nhwc_f32(
            u32(pads[0]), u32(right), u32(bottom), u32(pads[1]), u32(kernel[0]), u32(kernel[1]),
            u32(strides[0]), u32(strides[1]), sz(c), sz(c), sz(c), -kInf, kInf, operator_flags(), &op),
        "xnn_create_average_pooling2d_nhwc_f32", true);
  k.op_.reset(op);
  k.setup = [&k, n, h, w] {
    return xnn_setup_average_pooling2d_nhwc_f32(k.op_.get(), sz(n), sz(h), sz(w), k.in[0].data, k.out[0].data,
                                                k.pool_);
  };
  k.impl_ = "average_pooling2d_nhwc_f32";
}

void build_unary(XnnKernel& k) {
  const Problem& p = k.p_;
  const Shape& x = p.inputs.at(0).shape;
  const LayerKind kind = p.kind;
  const bool positive = kind == LayerKind::kSqrt;
  k.add(k.in, x, false, positive ? Fill::kPositive : Fill::kUniform);
  k.add(k.out, p.outputs.at(0).shape, false);
  // Rows of the last dimension: XNNPACK's element-wise operators run contiguous rows as one range,
  // softmax normalizes each row.
  int64_t ch = x.empty() ? 1 : x.back();
  if (kind == LayerKind::kSoftmax) {
    int64_t axis = p.int_attr("axis");
    if (axis < 0) axis += static_cast<int64_t>(x.size());
    if (axis != static_cast<int64_t>(x.size()) - 1)
      unsupported("XNNPACK's softmax normalizes the last axis, not axis " + std::to_string(axis));
  }
  const int64_t rows = ch > 0 ? elements(x) / ch : 0;
  const size_t c = sz(ch);
  xnn_operator_t op = nullptr;
  using Setup = xnn_status (*)(xnn_operator_t, size_t, const float*, float*, pthreadpool_t);
  Setup setup = nullptr;
  const char* call = "";
  switch (kind) {
    case LayerKind::kRelu:
    case LayerKind::kClip: {
      float lo = 0, hi = kInf;
      if (kind == LayerKind::kClip) {
        const double mn = p.float_attr("min", -HUGE_VAL), mx = p.float_attr("max", HUGE_VAL);
        lo = std::isfinite(mn) ? static_cast<float>(mn) : -kInf;
        hi = std::isfinite(mx) ? static_cast<float>(mx) : kInf;
      }
      call = "xnn_create_clamp_nc_f32";
      check(xnn_create_clamp_nc_f32(c, c, c, lo, hi, operator_flags(), &op), call, true);
      setup = xnn_setup_clamp_nc_f32;
      break;
    }
    case LayerKind::kLeakyRelu:
      call = "xnn_create_leaky_relu_nc_f32";
      check(xnn_create_leaky_relu_nc_f32(c, c, c, static_cast<float>(p.float_attr("alpha")), operator_flags(),
                                         &op),
            call, true);
      setup = xnn_setup_leaky_relu_nc_f32;
      break;
    case LayerKind::kElu:
      call = "xnn_create_elu_nc_f32";
      check(xnn_create_elu_nc_f32(c, c, c, static_cast<float>(p.float_attr("alpha")), operator_flags(), &op),
            call, true);
      setup = xnn_setup_elu_nc_f32;
      break;
    case LayerKind::kSigmoid:
      call = "xnn_create_sigmoid_nc_f32";
      check(xnn_create_sigmoid_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_sigmoid_nc_f32;
      break;
    case LayerKind::kHardSwish:
      call = "xnn_create_hardswish_nc_f32";
      check(xnn_create_hardswish_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_hardswish_nc_f32;
      break;
    case LayerKind::kAbs:
      call = "xnn_create_abs_nc_f32";
      check(xnn_create_abs_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_abs_nc_f32;
      break;
    case LayerKind::kNeg:
      call = "xnn_create_negate_nc_f32";
      check(xnn_create_negate_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_negate_nc_f32;
      break;
    case LayerKind::kSqrt:
      call = "xnn_create_square_root_nc_f32";
      check(xnn_create_square_root_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_square_root_nc_f32;
      break;
    case LayerKind::kFloor:
      call = "xnn_create_floor_nc_f32";
      check(xnn_create_floor_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_floor_nc_f32;
      break;
    case LayerKind::kCeil:
      call = "xnn_create_ceiling_nc_f32";
      check(xnn_create_ceiling_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_ceiling_nc_f32;
      break;
    case LayerKind::kSoftmax:
      call = "xnn_create_softmax_nc_f32";
      check(xnn_create_softmax_nc_f32(c, c, c, operator_flags(), &op), call, true);
      setup = xnn_setup_softmax_nc_f32;
      break;
    default:
      unsupported(fmt::format("{} is not an XNNPACK unary operator", p.op));
  }
  k.op_.reset(op);
  k.setup = [&k, setup, rows] { return setup(k.op_.get(), sz(rows), k.in[0].data, k.out[0].data, k.pool_); };
  k.impl_ = std::string(call).substr(std::string("xnn_create_").size());
}

void build_binary(XnnKernel& k) {
  const Problem& p = k.p_;
  const Shape& a = p.inputs.at(0).shape;
  const Shape& b = p.inputs.at(1).shape;
  k.add(k.in, a, false);
  k.add(k.in, b, false, p.kind == LayerKind::kDiv ? Fill::kPositive : Fill::kUniform);
  k.add(k.out, p.outputs.at(0).shape, false);
  xnn_operator_t op = nullptr;
  using Setup = xnn_status (*)(xnn_operator_t, size_t, const size_t*, size_t, const size_t*, const float*,
                               const float*, float*, pthreadpool_t);
  Setup setup = nullptr;
  const char* call = "";
  switch (p.kind) {
    case LayerKind::kAdd:
      call = "xnn_create_add_nd_f32";
      check(xnn_create_add_nd_f32(-kInf, kInf, operator_flags(), &op), call, true);
      setup = xnn_setup_add_nd_f32;
      break;
    case LayerKind::kSub:
      call = "xnn_create_subtract_nd_f32";
      check(xnn_create_subtract_nd_f32(-kInf, kInf, operator_flags(), &op), call, true);
      setup = xnn_setup_subtract_nd_f32;
      break;
    case LayerKind::kMul:
      call = "xnn_create_multiply_nd_f32";
      check(xnn_create_multiply_nd_f32(-kInf, kInf, operator_flags(), &op), call, true);
      setup = xnn_setup_multiply_nd_f32;
      break;
    case LayerKind::kDiv:
      call = "xnn_create_divide_nd_f32";
      check(xnn_create_divide_nd_f32(-kInf, kInf, operator_flags(), &op), call, true);
      setup = xnn_setup_divide_nd_f32;
      break;
    case LayerKind::kMax:
      call = "xnn_create_maximum_nd_f32";
      check(xnn_create_maximum_nd_f32(operator_flags(), &op), call, true);
      setup = xnn_setup_maximum_nd_f32;
      break;
    case LayerKind::kMin:
      call = "xnn_create_minimum_nd_f32";
      check(xnn_create_minimum_nd_f32(operator_flags(), &op), call, true);
      setup = xnn_setup_minimum_nd_f32;
      break;
    default:
      unsupported(fmt::format("{} is not an XNNPACK binary operator", p.op));
  }
  k.op_.reset(op);
  std::vector<size_t> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  k.setup = [&k, setup, sa, sb] {
    return setup(k.op_.get(), sa.size(), sa.data(), sb.size(), sb.data(), k.in[0].data, k.in[1].data,
                 k.out[0].data, k.pool_);
  };
  k.impl_ = std::string(call).substr(std::string("xnn_create_").size());
}

}  // namespace xnnpack_detail

using namespace xnnpack_detail;

Result<std::unique_ptr<Kernel>> make_xnnpack_kernel(const CaseSpec& spec) {
  FL_TRY(xnnpack_initialize());
  const PlacementScope placement(spec.placement);
  if (parse_conversion(spec.variant.layout)) return xnnpack_detail::make_conversion_case(spec);
  if (spec.variant.dtype != DType::kF32)
    return make_error(Disposition::kUnsupported, "XNNPACK's operators are mapped for f32, not {}",
                      dtype_name(spec.variant.dtype));
  try {
    auto k = std::make_unique<XnnKernel>(spec.problem);
    switch (spec.problem.kind) {
      case LayerKind::kConv:
        build_convolution(*k);
        break;
      case LayerKind::kGemm:
      case LayerKind::kMatMul:
        build_fully_connected(*k);
        break;
      case LayerKind::kMaxPool:
      case LayerKind::kAveragePool:
      case LayerKind::kGlobalAveragePool:
        build_pooling(*k);
        break;
      case LayerKind::kAdd:
      case LayerKind::kSub:
      case LayerKind::kMul:
      case LayerKind::kDiv:
      case LayerKind::kMax:
      case LayerKind::kMin:
        build_binary(*k);
        break;
      default:
        if (!xnnpack_support(spec.problem.kind).supported())
          return make_error(Disposition::kUnsupported, "{}: {}", spec.problem.op,
                            xnnpack_support(spec.problem.kind).reason);
        build_unary(*k);
    }
    check(k->setup(), "xnn_setup", true);
    return std::unique_ptr<Kernel>(std::move(k));
  } catch (const MissingAttribute& e) {
    return make_error("{}", e.what());
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

}  // namespace floorline::kernels
