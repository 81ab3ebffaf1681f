// CUDA builder for Conv: cudnnConvolutionForward or cudnnConvolutionBiasActivationForward.
#include <algorithm>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

namespace {

cudnnConvolutionFwdAlgo_t conv_algo(const std::string& name) {
  const auto& all = cudnn_conv_algorithms();
  auto it = std::find(all.begin(), all.end(), name);
  if (it == all.end()) fail(fmt::format("unknown cuDNN convolution algorithm {}", name));
  return static_cast<cudnnConvolutionFwdAlgo_t>(it - all.begin());
}

// The algorithms whose transforms amplify the rounding error (verify relaxes them, reference.hpp).
FastAlgorithm fast_algorithm(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return FastAlgorithm::kWinograd;
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return FastAlgorithm::kFft;
    default:  // the GEMM forms and DIRECT: the direct sum's order changes, not its error
      return FastAlgorithm::kNone;
  }
}

// Algorithm and problem pairs on which cuDNN returns wrong results rather than an error. Measured on
// an H100 with cuDNN 9.19: WINOGRAD_NONFUSED on grouped (depthwise) 5×5 convolutions of
// mobilenet_v3 and lraspp differed from the reference by up to 57% of the value in 4–9% of the
// elements (CudaKernelsGpu.MobileNetV3AndBertOpsMatchTheReference), where 3×3 grouped ones and
// every other algorithm on the same layers matched. A case that computes something else is no
// bound, so it is unsupported, and the heuristic's or the search's next choice is taken instead.
std::string known_wrong(cudnnConvolutionFwdAlgo_t a, const Problem& p) {
  if (a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED) return {};
  auto g = conv_geometry(p);
  if (!g || g->groups <= 1) return {};
  for (size_t k = 2; k < g->w.size(); ++k)
    if (g->w[k] == 5)
      return "cuDNN's WINOGRAD_NONFUSED computes grouped 5x5 convolutions wrongly (measured: up to 57% off "
             "the "
             "reference on an H100, cuDNN 9.19)";
  return {};
}

}  // namespace

std::string conv_algo_name(cudnnConvolutionFwdAlgo_t a) {
  const auto& all = cudnn_conv_algorithms();
  const auto i = static_cast<size_t>(a);
  return i < all.size() ? all[i] : fmt::format("algo {}", i);
}

ConvAlgorithm choose_conv_algorithm(Ctx& c, const TensorDesc& xd, const void* x, const FilterDesc& wd,
                                    void* w, const ConvDesc& cd, const TensorDesc& yd, void* y) {
  const std::string v = c.variant();
  ConvAlgorithm r;
  if (v == "heuristic") {
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    check(cudnnGetConvolutionForwardAlgorithm_v7(c.dev.cudnn, xd, wd, cd, yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
          "cudnnGetConvolutionForwardAlgorithm_v7");
    const auto* first = std::find_if(perf, perf + returned, [&](const auto& p) {
      return p.status == CUDNN_STATUS_SUCCESS && known_wrong(p.algo, c.p).empty();
    });
    if (first == perf + returned) fail(Disposition::kUnsupported, "the heuristic offers no algorithm");
    r.algo = first->algo;
    r.how = first == perf ? " (cudnnGetConvolutionForwardAlgorithm_v7's first)"
                          : " (cudnnGetConvolutionForwardAlgorithm_v7's first that computes it correctly)";
  } else if (v == "find") {
    const int64_t limit = std::min<int64_t>(workspace_limit(free_device_memory()), int64_t{1} << 30);
    DeviceBuffer search(static_cast<size_t>(limit));  // freed once the search is done
    void* ws = search.data;
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    check(cudnnFindConvolutionForwardAlgorithmEx(c.dev.cudnn, xd, x, wd, w, cd, yd, y,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, ws,
                                                 static_cast<size_t>(limit)),
          "cudnnFindConvolutionForwardAlgorithmEx");
    const auto* best = std::find_if(perf, perf + returned, [&](const auto& p) {
      return p.status == CUDNN_STATUS_SUCCESS && known_wrong(p.algo, c.p).empty();
    });
    if (best == perf + returned)
      fail(Disposition::kUnsupported, "cudnnFindConvolutionForwardAlgorithmEx found no algorithm");
    r.algo = best->algo;
    r.how = fmt::format(" (cudnnFindConvolutionForwardAlgorithmEx's fastest: {:.3f} ms)", best->time);
  } else {
    r.algo = conv_algo(v);
    if (auto why = known_wrong(r.algo, c.p); !why.empty()) fail(Disposition::kUnsupported, why);
  }
  return r;
}

void conv(Ctx& c) {
  auto geo = conv_geometry(c.p);
  if (!geo) fail(geo.error().message);
  const ConvGeometry& g = *geo;
  const bool fused = c.family() == "cudnn_conv_bias_act";
  const int x = c.input(0), w = c.input(1), y = c.output();
  c.b.tensors[x].channels_last = c.b.tensors[w].channels_last = c.b.tensors[y].channels_last = c.nhwc;
  const int bias = c.p.input("bias") ? c.input(2) : -1;
  auto& xd = c.desc<TensorDesc>();
  auto& yd = c.desc<TensorDesc>();
  auto& wd = c.desc<FilterDesc>();
  auto& cd = c.desc<ConvDesc>();
  set_tensor(xd, c.type, g.x, c.nhwc);
  set_tensor(yd, c.type, g.y, c.nhwc);
  check(cudnnSetFilterNdDescriptor(wd, cudnn_type(c.type), c.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                   static_cast<int>(g.w.size()), g.w.data()),
        "cudnnSetFilterNdDescriptor");
  check(cudnnSetConvolutionNdDescriptor(cd, g.spatial, g.pads.data(), g.strides.data(), g.dilations.data(),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolutionNdDescriptor");
  check(cudnnSetConvolutionGroupCount(cd, g.groups), "cudnnSetConvolutionGroupCount");
  // fp32 keeps Tensor Cores (TF32) off; the other modes ask for them.
  check(cudnnSetConvolutionMathType(cd, c.tensor_ops() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
        "cudnnSetConvolutionMathType");
  std::vector<int> out(g.y.size());
  check(cudnnGetConvolutionNdForwardOutputDim(cd, xd, wd, static_cast<int>(out.size()), out.data()),
        "cudnnGetConvolutionNdForwardOutputDim");
  if (out != g.y)
    fail(fmt::format("cuDNN's output dims {} differ from the layer's {}", fmt::join(out, "x"),
                     fmt::join(g.y, "x")));

  // The input cuDNN reads: the layer's x, or a padded copy of it (zero border, interior per call).
  void* x_conv = c.ptr(x);
  if (g.explicit_pad) {
    const Shape padded(g.x.begin(), g.x.end());
    const size_t bytes = static_cast<size_t>(elements(padded) * device::size_of(c.type));
    x_conv = c.scratch(bytes);
    check(cudaMemset(x_conv, 0, bytes), "cudaMemset (padded input)");
    device::StridedCopy copy;
    const Shape& unpadded = g.x_unpadded;
    copy.rank = static_cast<int>(unpadded.size());
    // Logical NCHW index → physical offsets in each buffer's layout.
    auto strides_of = [&](const Shape& s) {
      std::vector<int64_t> st(s.size());
      if (!c.nhwc) {
        int64_t acc = 1;
        for (int k = static_cast<int>(s.size()) - 1; k >= 0; --k) {
          st[k] = acc;
          acc *= s[k];
        }
      } else {  // N, spatial..., C
        int64_t acc = 1;
        st[1] = acc;
        acc *= s[1];
        for (int k = static_cast<int>(s.size()) - 1; k >= 2; --k) {
          st[k] = acc;
          acc *= s[k];
        }
        st[0] = acc;
      }
      return st;
    };
    const auto ss = strides_of(unpadded), ds = strides_of(padded);
    for (int k = 0; k < copy.rank; ++k) {
      copy.dims[k] = unpadded[k];
      copy.src_strides[k] = ss[k];
      copy.dst_strides[k] = ds[k];
    }
    for (int k = 0; k < g.spatial; ++k) copy.dst_offset += g.pad_begin[k] * ds[2 + k];
    // 1-D convs: the layer's x has no H; the copy works on the 2-D view (H = 1) of the same buffer.
    const DType t = c.type;
    const void* src = c.ptr(x);
    c.b.steps.push_back(
        [=](Context& d) { check(device::strided_copy(t, src, x_conv, copy, d.stream), "explicit pad"); });
  }

  // The algorithm: named, the heuristic's first, or Find's fastest.
  const ConvAlgorithm chosen = choose_conv_algorithm(c, xd, x_conv, wd, c.ptr(w), cd, yd, c.ptr(y));
  const cudnnConvolutionFwdAlgo_t algo = chosen.algo;
  const std::string& how = chosen.how;
  c.b.fast_algorithm = fast_algorithm(algo);
  size_t ws_bytes = 0;
  check(cudnnGetConvolutionForwardWorkspaceSize(c.dev.cudnn, xd, wd, cd, yd, algo, &ws_bytes),
        "cudnnGetConvolutionForwardWorkspaceSize");
  check_workspace(static_cast<int64_t>(ws_bytes));
  void* ws = c.scratch(ws_bytes);
  c.b.workspace = static_cast<int64_t>(ws_bytes);
  c.b.implementation =
      fmt::format("{} {}{}{}", fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward",
                  conv_algo_name(algo), how, g.explicit_pad ? " + explicit pad (floorline-kernel)" : "");

  // Bias as cuDNN sees it: 1×K×1×1(×1).
  std::vector<int> bias_dims(g.y.size(), 1);
  bias_dims[1] = g.y[1];
  auto& bd = c.desc<TensorDesc>();
  set_tensor(bd, c.type, bias_dims, false);
  if (!fused) {
    void* wp = c.ptr(w);
    void* yp = c.ptr(y);
    void* bp = bias >= 0 ? c.ptr(bias) : nullptr;
    c.b.steps.push_back([=, &xd, &wd, &cd, &yd, &bd](Context& d) {
      check_run(
          cudnnConvolutionForward(d.cudnn, &kOne, xd, x_conv, wd, wp, cd, algo, ws, ws_bytes, &kZero, yd, yp),
          "cudnnConvolutionForward");
      if (bp) check_run(cudnnAddTensor(d.cudnn, &kOne, bd, bp, &kOne, yd, yp), "cudnnAddTensor (bias)");
    });
    return;
  }
  // Fused: y = act(conv(x) + alpha2·z + bias); a residual Add is z, a missing bias is zeros.
  const bool residual = !c.p.post_ops.empty() && c.p.post_ops[0].op == "Add";
  const bool relu =
      std::any_of(c.p.post_ops.begin(), c.p.post_ops.end(), [](const PostOp& po) { return po.op == "Relu"; });
  void* bp = nullptr;
  if (bias >= 0) {
    bp = c.ptr(bias);
  } else {
    bp = c.scratch(static_cast<size_t>(g.y[1] * device::size_of(c.type)));
    check(cudaMemset(bp, 0, static_cast<size_t>(g.y[1] * device::size_of(c.type))), "cudaMemset (zero bias)");
  }
  void* zp = c.ptr(y);  // alpha2 = 0: z is not read
  if (residual) {
    const int z = c.extra(c.out_shape());
    c.b.tensors[z].channels_last = c.nhwc;
    zp = c.ptr(z);
  }
  auto& ad = c.desc<ActDesc>();
  check(cudnnSetActivationDescriptor(ad, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                     CUDNN_NOT_PROPAGATE_NAN, 0.0),
        "cudnnSetActivationDescriptor");
  void* wp = c.ptr(w);
  void* yp = c.ptr(y);
  const float alpha2 = residual ? 1.f : 0.f;
  c.b.steps.push_back([=, &xd, &wd, &cd, &yd, &bd, &ad](Context& d) {
    check_run(cudnnConvolutionBiasActivationForward(d.cudnn, &kOne, xd, x_conv, wd, wp, cd, algo, ws,
                                                    ws_bytes, &alpha2, yd, zp, bd, bp, ad, yd, yp),
              "cudnnConvolutionBiasActivationForward");
  });
}

}  // namespace floorline::kernels::cuda_detail
