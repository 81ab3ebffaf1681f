// CUDA int8 builders: an int8 (QDQ) Conv on cuDNN's int8 convolution and an int8 Gemm or
// MatMul on cuBLASLt's int8 matmul (IMMA), both s8 × s8 with int32 accumulation and an s8 output
// scaled by f32 factors. Against the layer's quantization (problem.hpp; the oneDNN int8 cases'
//   y = saturate(round(scale · (Σ (x − x_zp)·w + bias)) + y_zp)):
//  - zero points are not applied and u8 operands run as s8: neither library takes zero points (a
//    runtime folds x's into the bias, a per-channel constant); the bytes and the work are the same;
//  - cuDNN's legacy int8 convolution takes one output scale (alpha): per-channel scales run as one;
//    cuBLASLt takes one per output channel (a device vector of alpha);
//  - the bias is added in f32 after the scale (both libraries add it in the output's scale): the
//    kernel multiplies it by the scales before timing, as a runtime does once at load time.
// The reference computes that symmetric form (Build::reference_problem), on the same tensors.
#include <algorithm>
#include <cmath>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

namespace {

Quantization need_quantization(const Ctx& c) {
  const auto q = quantization(c.p);
  if (!q)
    fail(Disposition::kUnsupported,
         fmt::format("{} has no int8 form (qtypes '{}')", c.p.op, c.p.string_attr("qtypes", "")));
  if (!c.p.post_ops.empty()) fail(Disposition::kUnsupported, "Floorline fuses no epilogue into an int8 case");
  return *q;
}

// An 8-bit operand: whole numbers drawn in [lo, lo + span).
void int8_operand(Ctx& c, int t, float lo, float span) {
  Tensor& x = c.b.tensors.at(static_cast<size_t>(t));
  x.type = DType::kInt8;
  x.fill = Fill::kRange;
  x.lo = lo;
  x.span = span;
}

// The bias, int32 in a QDQ model (in the accumulator's scale), held in f32: whole-number-sized
// values of the accumulator's order.
void f32_bias(Ctx& c, int t) {
  Tensor& x = c.b.tensors.at(static_cast<size_t>(t));
  x.type = DType::kF32;
  x.fill = Fill::kRange;
  x.lo = -2000.f;
  x.span = 4000.f;
}

struct Scales {
  int tensor = -1;
  std::vector<float> values;
};

// The output scales (x_scale · w_scale / y_scale), `count` of them, for a reduction of length k:
// fixed when the kernel is built (a runtime knows them once the model is loaded) and uploaded once.
// 0.015/√k · [0.5, 1.5): sums of k products of ±~74 by ±~37 (uniform s8 data, 7-bit weights) then
// spread over the 8-bit range, as the oneDNN int8 cases draw theirs.
Scales output_scales(Ctx& c, int64_t count, int64_t k) {
  Scales s;
  s.tensor = c.extra({count}, Fill::kNone);
  c.b.tensors[static_cast<size_t>(s.tensor)].type = DType::kF32;
  const double base = 0.015 / std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  for (int64_t i = 0; i < count; ++i)
    s.values.push_back(static_cast<float>(base * (0.5 + static_cast<double>((i * 7919) % 1000) / 1000.0)));
  check(cudaMemcpy(c.ptr(s.tensor), s.values.data(), s.values.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy (output scales)");
  return s;
}

// bias ⊙ scales (a vector of n; one scale or n) into a buffer of the kernel's, before timing and
// before verification's call: the bias in the output's scale, as both libraries add it.
const void* scaled_bias(Ctx& c, int bias, const Scales& s, int64_t n) {
  void* out = c.scratch(static_cast<size_t>(n) * sizeof(float));
  device::Broadcast shape;
  shape.rank = 1;
  shape.dims[0] = n;
  shape.a_strides[0] = 1;
  shape.b_strides[0] = s.values.size() > 1 ? 1 : 0;
  const void* bp = c.ptr(bias);
  const void* sp = c.ptr(s.tensor);
  c.b.prefills.push_back([=](Context& d) {
    check(device::binary(DType::kF32, device::BinaryOp::kMul, bp, sp, out, shape, d.stream),
          "prefill (bias in the output scale)");
  });
  return out;
}

// The symmetric int8 form of `p` the libraries run: s8 operands and output, no zero points.
void symmetric(Problem& p, bool per_channel) {
  p.strings["qtypes"] = "i8,i8>i8";
  p.ints["zero_points"] = {0, 0, 0};
  p.ints["per_channel"] = {per_channel ? 1 : 0};
}

}  // namespace

// cudnnConvolutionForward (no bias) or cudnnConvolutionBiasActivationForward (identity, the bias
// in f32): x, w and y int8 in NHWC (w as K×R×S×C), int32 accumulation (CUDNN_DATA_INT32), y scaled
// by alpha, as cuDNN's INT8 configuration of these calls asks (NHWC, channels in multiples of 4).
void conv_int8(Ctx& c) {
  need_quantization(c);
  auto geo = conv_geometry(c.p);
  if (!geo) fail(Disposition::kUnsupported, geo.error().message);
  const ConvGeometry& g = *geo;
  // The plan's conditions (cuda_plan.cpp), checked again for a case built by hand.
  if (g.x.size() != 4 || g.groups != 1 || g.explicit_pad || g.x[1] % 4 != 0 || g.y[1] % 4 != 0)
    fail(Disposition::kUnsupported,
         "cuDNN int8 convolutions here: 2-D, one group, symmetric padding, channels in multiples of 4");
  const bool fused = c.family() == "cudnn_conv_bias_act";
  const int x = c.input(0), w = c.input(1), y = c.output();
  const int bias = c.p.input("bias") ? c.input(2) : -1;
  if (fused != (bias >= 0))
    fail(Disposition::kUnsupported, "int8: cudnn_conv_bias_act for a Conv with a bias, cudnn_conv without");
  int8_operand(c, x, -128.f, 256.f);
  int8_operand(c, w, -64.f, 128.f);  // 7-bit weights, as the oneDNN int8 cases draw them
  c.b.tensors[static_cast<size_t>(y)].type = DType::kInt8;
  for (const int t : {x, w, y}) c.b.tensors[static_cast<size_t>(t)].channels_last = true;
  if (bias >= 0) f32_bias(c, bias);
  const Scales scales = output_scales(c, 1, int64_t{g.w[1]} * g.w[2] * g.w[3]);
  Problem ref = c.p;
  symmetric(ref, false);
  c.b.reference_problem = std::move(ref);

  auto& xd = c.desc<TensorDesc>();
  auto& yd = c.desc<TensorDesc>();
  auto& wd = c.desc<FilterDesc>();
  auto& cd = c.desc<ConvDesc>();
  set_tensor(xd, DType::kInt8, g.x, true);
  set_tensor(yd, DType::kInt8, g.y, true);
  check(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC, static_cast<int>(g.w.size()),
                                   g.w.data()),
        "cudnnSetFilterNdDescriptor");
  check(cudnnSetConvolutionNdDescriptor(cd, g.spatial, g.pads.data(), g.strides.data(), g.dilations.data(),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_INT32),
        "cudnnSetConvolutionNdDescriptor");
  check(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH), "cudnnSetConvolutionMathType");
  std::vector<int> out(g.y.size());
  check(cudnnGetConvolutionNdForwardOutputDim(cd, xd, wd, static_cast<int>(out.size()), out.data()),
        "cudnnGetConvolutionNdForwardOutputDim");
  if (out != g.y)
    fail(fmt::format("cuDNN's output dims {} differ from the layer's {}", fmt::join(out, "x"),
                     fmt::join(g.y, "x")));

  void* xp = c.ptr(x);
  void* wp = c.ptr(w);
  void* yp = c.ptr(y);
  const ConvAlgorithm chosen = choose_conv_algorithm(c, xd, xp, wd, wp, cd, yd, yp);
  const cudnnConvolutionFwdAlgo_t algo = chosen.algo;
  size_t ws_bytes = 0;
  check(cudnnGetConvolutionForwardWorkspaceSize(c.dev.cudnn, xd, wd, cd, yd, algo, &ws_bytes),
        "cudnnGetConvolutionForwardWorkspaceSize");
  check_workspace(static_cast<int64_t>(ws_bytes));
  void* ws = c.scratch(ws_bytes);
  c.b.workspace = static_cast<int64_t>(ws_bytes);
  c.b.implementation =
      fmt::format("{} {}{} (int8 NHWC, s8 x s8 -> s8, one output scale, no zero points)",
                  fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward",
                  conv_algo_name(algo), chosen.how);
  const float alpha = scales.values.at(0);
  if (!fused) {
    c.b.steps.push_back([=, &xd, &wd, &cd, &yd](Context& d) {
      check_run(
          cudnnConvolutionForward(d.cudnn, &alpha, xd, xp, wd, wp, cd, algo, ws, ws_bytes, &kZero, yd, yp),
          "cudnnConvolutionForward");
    });
    return;
  }
  // y = identity(alpha·conv(x) + 0·z + bias'), z = y (not read), bias' = bias · alpha in f32.
  std::vector<int> bias_dims(g.y.size(), 1);
  bias_dims[1] = g.y[1];
  auto& bd = c.desc<TensorDesc>();
  set_tensor(bd, DType::kF32, bias_dims, false);
  const void* bp = scaled_bias(c, bias, scales, g.y[1]);
  auto& ad = c.desc<ActDesc>();
  check(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN, 0.0),
        "cudnnSetActivationDescriptor");
  c.b.steps.push_back([=, &xd, &wd, &cd, &yd, &bd, &ad](Context& d) {
    check_run(cudnnConvolutionBiasActivationForward(d.cudnn, &alpha, xd, xp, wd, wp, cd, algo, ws, ws_bytes,
                                                    &kZero, yd, yp, bd, bp, ad, yd, yp),
              "cudnnConvolutionBiasActivationForward");
  });
}

// cublasLtMatmul in cuBLASLt's int8 form: compute CUBLAS_COMPUTE_32I, scale type CUDA_R_32F, A and B
// CUDA_R_8I, C and D CUDA_R_8I, "TN" (the weight, N×K row-major, is cuBLASLt's transposed A; the
// activation, M×K row-major, its B), leading dimensions and K, N multiples of 4 (cuBLAS's IMMA
// requirements). A Gemm's C is the bias epilogue (f32, in the output's scale); a MatMul's or a
// Gemm's K×N weight is held as N×K, as a runtime lays out constant weights once.
void gemm_int8(Ctx& c) {
  const Quantization q = need_quantization(c);
  const Problem& p = c.p;
  const Shape& as = c.in_shape(0);
  const Shape& bs = c.in_shape(1);
  int64_t m = 0, k = 0, n = 0;
  int bias = -1;
  if (p.kind == LayerKind::kGemm) {
    if (as.size() != 2 || bs.size() != 2) fail(Disposition::kUnsupported, "Gemm operands are matrices");
    if (p.int_attr("transA") != 0)
      fail(Disposition::kUnsupported, "int8 Gemm with transA: cuBLASLt's int8 GEMM reads a as M×K (TN)");
    const bool tb = p.int_attr("transB") != 0;
    m = as[0];
    k = as[1];
    n = tb ? bs[0] : bs[1];
    if (p.inputs.size() > 2) {
      const Shape& cs = c.in_shape(2);
      if (cs.empty() || cs.back() != n || elements(cs) != n)
        fail(Disposition::kUnsupported, "int8 Gemm: C other than a bias vector of N");
      bias = c.input(2);
    }
  } else {
    if (as.size() < 2 || bs.size() < 2) fail(Disposition::kUnsupported, "int8 MatMul with a 1-D operand");
    k = as.back();
    m = elements(as) / std::max<int64_t>(k, 1);
    n = bs.back();
    if (bs[bs.size() - 2] != k || elements(bs) != k * n)
      fail(Disposition::kUnsupported, "int8 MatMul with batch dims on b (both operands activations)");
  }
  if (k % 4 != 0 || n % 4 != 0)
    fail(Disposition::kUnsupported,
         fmt::format("cuBLASLt int8 (IMMA) needs K and N in multiples of 4 (K = {}, N = {})", k, n));
  const int a = c.input(0), b = c.input(1), y = c.output();
  int8_operand(c, a, -128.f, 256.f);
  int8_operand(c, b, -64.f, 128.f);
  c.b.tensors[static_cast<size_t>(a)].shape = {m, k};
  c.b.tensors[static_cast<size_t>(b)].shape = {n, k};
  c.b.tensors[static_cast<size_t>(y)].shape = {m, n};
  c.b.tensors[static_cast<size_t>(y)].type = DType::kInt8;
  if (bias >= 0) {
    f32_bias(c, bias);
    c.b.tensors[static_cast<size_t>(bias)].shape = {n};
  }
  const Scales scales = output_scales(c, q.per_channel ? n : 1, k);
  Problem ref;
  ref.kind = LayerKind::kGemm;
  ref.op = "Gemm";
  ref.key = p.key;
  ref.inputs = {{"a", {m, k}}, {"b", {n, k}}};
  if (bias >= 0) ref.inputs.push_back({"c", {n}});
  ref.outputs = {{"y", {m, n}}};
  ref.ints["transA"] = {0};
  ref.ints["transB"] = {1};
  ref.floats["alpha"] = {1.0};
  ref.floats["beta"] = {1.0};
  symmetric(ref, q.per_channel);
  c.b.reference_problem = std::move(ref);

  auto desc = std::make_shared<LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>();
  c.b.keep.push_back(desc);
  check(cublasLtMatmulDescCreate(&desc->h, CUBLAS_COMPUTE_32I, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n), "TRANSB");
  if (scales.values.size() > 1) {
    const int32_t mode = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof mode),
          "POINTER_MODE");
  }
  if (bias >= 0) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
          "EPILOGUE");
    const int32_t bias_type = CUDA_R_32F;
    check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                         sizeof bias_type),
          "BIAS_DATA_TYPE");
    const void* bp = scaled_bias(c, bias, scales, n);
    check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp),
          "BIAS_POINTER");
  }
  auto layout = [&](int64_t rows, int64_t cols, int64_t ld) {
    auto l = std::make_shared<LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>();
    c.b.keep.push_back(l);
    check(cublasLtMatrixLayoutCreate(&l->h, CUDA_R_8I, static_cast<uint64_t>(rows),
                                     static_cast<uint64_t>(cols), ld),
          "cublasLtMatrixLayoutCreate");
    return l->h;
  };
  LtCall call;
  call.desc = desc->h;
  call.a = layout(k, n, k);  // the weight: K×N column-major (N×K row-major), transposed
  call.b = layout(k, m, k);  // the activation: K×M column-major (M×K row-major)
  call.c = call.d = layout(n, m, n);
  call.a_ptr = c.ptr(b);
  call.b_ptr = c.ptr(a);
  call.d_ptr = c.ptr(y);
  call.c_ptr = call.d_ptr;  // beta = 0: not read
  call.alpha = scales.values.at(0);
  call.beta = 0;
  if (scales.values.size() > 1) call.alpha_device = c.ptr(scales.tensor);
  lt_matmul_step(c, call);
  c.b.implementation +=
      fmt::format(", int8 TN (s8 x s8 -> s8, {} output scale{}, no zero points)",
                  scales.values.size() > 1 ? "per-channel" : "one", scales.values.size() > 1 ? "s" : "");
}

}  // namespace floorline::kernels::cuda_detail
