// CUDA builders on cuDNN: batch normalization, activations, softmax, pooling and LRN.
#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

// --- cuDNN normalizations, activations, pooling, softmax, LRN ----------------------------------------

void batch_norm(Ctx& c) {
  const Shape& xs = c.in_shape(0);
  if (c.p.inputs.size() < 5)
    fail(Disposition::kUnsupported, "BatchNormalization needs scale, B, mean and var");
  const int x = c.input(0), y = c.output();
  c.b.tensors[x].channels_last = c.b.tensors[y].channels_last = c.nhwc;
  for (int k = 1; k <= 4; ++k)
    c.b.tensors[k].type = DType::kF32;  // cuDNN's BN parameters are f32 for f16/bf16 data
  c.b.tensors[4].fill = Fill::kPositive;
  auto& xd = c.desc<TensorDesc>();
  auto& pd = c.desc<TensorDesc>();
  set_tensor(xd, c.type, nchw_dims(xs), c.nhwc);
  check(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL), "cudnnDeriveBNTensorDescriptor");
  void* xp = c.ptr(x);
  void* yp = c.ptr(y);
  void* sp = c.ptr(1);
  void* bp = c.ptr(2);
  void* mp = c.ptr(3);
  void* vp = c.ptr(4);
  c.b.implementation = "cudnnBatchNormalizationForwardInference CUDNN_BATCHNORM_SPATIAL";
  c.b.steps.push_back([=, &xd, &pd](Context& d) {
    check_run(cudnnBatchNormalizationForwardInference(d.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, xp,
                                                      xd, yp, pd, sp, bp, mp, vp, 1e-5),
              "cudnnBatchNormalizationForwardInference");
  });
}

void activation(Ctx& c) {
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  double coef = 0;
  switch (c.p.kind) {
    case LayerKind::kRelu:
      break;
    case LayerKind::kSigmoid:
      mode = CUDNN_ACTIVATION_SIGMOID;
      break;
    case LayerKind::kTanh:
      mode = CUDNN_ACTIVATION_TANH;
      break;
    case LayerKind::kElu:
      mode = CUDNN_ACTIVATION_ELU, coef = c.p.float_attr("alpha");
      break;
    case LayerKind::kClip:
      mode = CUDNN_ACTIVATION_CLIPPED_RELU, coef = c.p.float_attr("max", 3.4e38);
      break;  // absent: unbounded
    default:
      fail(Disposition::kUnsupported, fmt::format("cuDNN has no activation {}", c.p.op));
  }
  auto& ad = c.desc<ActDesc>();
  check(cudnnSetActivationDescriptor(ad, mode, CUDNN_NOT_PROPAGATE_NAN, coef),
        "cudnnSetActivationDescriptor");
  auto& td = c.desc<TensorDesc>();
  set_flat(td, c.type, elements(c.in_shape(0)));
  void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  c.b.implementation = "cudnnActivationForward";
  c.b.steps.push_back([=, &ad, &td](Context& d) {
    check_run(cudnnActivationForward(d.cudnn, ad, &kOne, td, xp, &kZero, td, yp), "cudnnActivationForward");
  });
}

void softmax(Ctx& c) {
  const Shape& x = c.in_shape(0);
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = c.p.int_attr("axis");
  if (axis < 0) axis += r;
  const bool coerce = c.p.int_attr("coerce_2d", 0) != 0;
  const int64_t outer = elements(Shape(x.begin(), x.begin() + axis));
  const int64_t len = coerce ? elements(Shape(x.begin() + axis, x.end())) : x[axis];
  const int64_t inner = coerce ? 1 : elements(Shape(x.begin() + axis + 1, x.end()));
  auto& td = c.desc<TensorDesc>();
  set_tensor(td, c.type, int_dims({outer, len, inner, 1}), false);
  const cudnnSoftmaxAlgorithm_t alg =
      c.p.kind == LayerKind::kLogSoftmax ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
  void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  c.b.implementation = fmt::format("cudnnSoftmaxForward {} CUDNN_SOFTMAX_MODE_CHANNEL",
                                   alg == CUDNN_SOFTMAX_LOG ? "CUDNN_SOFTMAX_LOG" : "CUDNN_SOFTMAX_ACCURATE");
  c.b.steps.push_back([=, &td](Context& d) {
    check_run(cudnnSoftmaxForward(d.cudnn, alg, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, td, xp, &kZero, td, yp),
              "cudnnSoftmaxForward");
  });
}

// Pooling geometry in 3 spatial dims (leading ones 1), from the problem.
device::Pooling pooling_geometry(const Ctx& c) {
  const Shape& x = c.in_shape(0);
  const Shape& y = c.out_shape();
  const size_t n = x.size() - 2;
  const LayerKind kind = c.p.kind;
  const bool global = kind == LayerKind::kGlobalAveragePool || kind == LayerKind::kGlobalMaxPool;
  device::Pooling p;
  p.nc = x[0] * x[1];
  p.max = kind == LayerKind::kMaxPool || kind == LayerKind::kGlobalMaxPool;
  p.include_pad = kind == LayerKind::kAveragePool && c.p.int_attr("count_include_pad") != 0;
  auto pads = c.p.ints_attr("pads"), kernel = c.p.ints_attr("kernel"), strides = c.p.ints_attr("strides"),
       dil = c.p.ints_attr("dil");
  pads.resize(2 * n, 0);
  strides.resize(n, 1);
  dil.resize(n, 1);
  kernel.resize(n, 1);
  const size_t off = 3 - n;
  for (size_t k = 0; k < n; ++k) {
    p.in[off + k] = x[2 + k];
    p.out[off + k] = y[2 + k];
    p.kernel[off + k] = global ? x[2 + k] : kernel[k];
    p.stride[off + k] = global ? 1 : strides[k];
    p.pad[off + k] = global ? 0 : pads[k];
    p.pad_end[off + k] = global ? 0 : pads[k + n];
    p.dil[off + k] = global ? 1 : dil[k];
  }
  return p;
}

void cudnn_pooling(Ctx& c) {
  const device::Pooling g = pooling_geometry(c);
  const Shape& x = c.in_shape(0);
  const int xi = c.input(0), yi = c.output();
  c.b.tensors[xi].channels_last = c.b.tensors[yi].channels_last = c.nhwc;
  const bool three_d = x.size() == 5;
  const int first = three_d ? 0 : 1;  // 1-D and 2-D pool as 2-D
  std::vector<int> window, pads, strides;
  for (int k = first; k < 3; ++k) {
    if (g.pad[k] != g.pad_end[k] || g.dil[k] != 1)
      fail(Disposition::kUnsupported, "cuDNN pools with symmetric pads and no dilation");
    window.push_back(static_cast<int>(g.kernel[k]));
    pads.push_back(static_cast<int>(g.pad[k]));
    strides.push_back(static_cast<int>(g.stride[k]));
  }
  std::vector<int> xd_dims = {static_cast<int>(x[0]), static_cast<int>(x[1])}, yd_dims = xd_dims;
  for (int k = first; k < 3; ++k) {
    xd_dims.push_back(static_cast<int>(g.in[k]));
    yd_dims.push_back(static_cast<int>(g.out[k]));
  }
  const cudnnPoolingMode_t mode = g.max           ? CUDNN_POOLING_MAX
                                  : g.include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  auto& pd = c.desc<PoolDesc>();
  check(cudnnSetPoolingNdDescriptor(pd, mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(window.size()),
                                    window.data(), pads.data(), strides.data()),
        "cudnnSetPoolingNdDescriptor");
  auto& xd = c.desc<TensorDesc>();
  auto& yd = c.desc<TensorDesc>();
  set_tensor(xd, c.type, xd_dims, c.nhwc);
  set_tensor(yd, c.type, yd_dims, c.nhwc);
  std::vector<int> out(yd_dims.size());
  check(cudnnGetPoolingNdForwardOutputDim(pd, xd, static_cast<int>(out.size()), out.data()),
        "cudnnGetPoolingNdForwardOutputDim");
  if (out != yd_dims)
    fail(Disposition::kUnsupported, fmt::format("cuDNN's pooling output {} differs from the layer's {}",
                                                fmt::join(out, "x"), fmt::join(yd_dims, "x")));
  void* xp = c.ptr(xi);
  void* yp = c.ptr(yi);
  c.b.implementation = "cudnnPoolingForward";
  c.b.steps.push_back([=, &pd, &xd, &yd](Context& d) {
    check_run(cudnnPoolingForward(d.cudnn, pd, &kOne, xd, xp, &kZero, yd, yp), "cudnnPoolingForward");
  });
}

void lrn(Ctx& c) {
  const Shape& x = c.in_shape(0);
  auto& ld = c.desc<LrnDesc>();
  // ONNX defaults (alpha 1e-4, beta 0.75, bias 1); both divide alpha by the window size.
  check(cudnnSetLRNDescriptor(ld, static_cast<unsigned>(c.p.int_attr("size")), 1e-4, 0.75, 1.0),
        "cudnnSetLRNDescriptor");
  auto& td = c.desc<TensorDesc>();
  set_tensor(td, c.type, nchw_dims(x), false);
  void* xp = c.ptr(c.input(0));
  void* yp = c.ptr(c.output());
  c.b.implementation = "cudnnLRNCrossChannelForward";
  c.b.steps.push_back([=, &ld, &td](Context& d) {
    check_run(
        cudnnLRNCrossChannelForward(d.cudnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, td, xp, &kZero, td, yp),
        "cudnnLRNCrossChannelForward");
  });
}

}  // namespace floorline::kernels::cuda_detail
