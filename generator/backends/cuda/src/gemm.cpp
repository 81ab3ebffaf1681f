// CUDA builder for Gemm and MatMul: cuBLAS (GemmEx, strided batched, Sgemv) and cuBLASLt.
#include <algorithm>
#include <climits>

#include "kernel_internal.hpp"

namespace floorline::kernels::cuda_detail {

// --- GEMM: cuBLAS and cuBLASLt ---------------------------------------------------------------------

namespace {

// Row-major Y(M×N) = op(A)·op(B) is column-major Yᵀ(N×M) = op(B)ᵀ·op(A)ᵀ: the library's first operand
// is b's buffer, the second a's.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool ta = false, tb = false;         // ONNX transA / transB
  int64_t stride_a = 0, stride_b = 0;  // batch strides of a's and b's buffers (0: shared)
  float alpha = 1, beta = 0;
};

GemmCall gemm_call(const Ctx& c) {
  auto d = gemm_desc(c.p);  // the kernel API's one reading of the operands
  if (!d) fail(Disposition::kUnsupported, d.error().message);
  GemmCall g;
  g.m = d->m;
  g.n = d->n;
  g.k = d->k;
  g.ta = d->ta;
  g.tb = d->tb;
  g.alpha = d->alpha;
  g.beta = d->beta;
  if (d->folded) return g;
  // The batch is the output's, as the plan has it (cuda_plan.cpp gemm_shape): a [3,1,M,K] times
  // b [3,K,N] has 3 batches in each operand but 9 products ([3,3,M,N]), which strided-batched GEMM
  // cannot express.
  if ((d->a_batch != 1 && d->a_batch != d->batch) || d->b_batch != d->batch)
    fail(Disposition::kUnsupported, "MatMul broadcasting other than a whole operand");
  g.batch = d->batch;
  g.stride_b = g.k * g.n;
  g.stride_a = d->a_batch == 1 ? 0 : g.m * g.k;
  return g;
}

cublasComputeType_t compute_type(const Ctx& c) {
  return c.spec.variant.math_mode == MathMode::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

int int_dim(int64_t v) {
  if (v > INT_MAX) fail(Disposition::kUnsupported, fmt::format("dimension {} exceeds cuBLAS's int", v));
  return static_cast<int>(v);
}

// Gemm's C broadcast into y before the call (cublasGemmEx reads and writes y: y = α·AB + β·y).
void prefill_broadcast(Ctx& c, int src, int dst) {
  const Shape& from = c.in_shape(static_cast<size_t>(src));
  const Shape& to = c.out_shape();
  device::StridedCopy copy;
  copy.rank = static_cast<int>(to.size());
  Shape padded = from;
  while (padded.size() < to.size()) padded.insert(padded.begin(), 1);
  int64_t acc = 1;
  std::vector<int64_t> st(padded.size());
  for (int k = static_cast<int>(padded.size()) - 1; k >= 0; --k) {
    st[k] = padded[k] == 1 ? 0 : acc;
    acc *= padded[k];
  }
  int64_t dacc = 1;
  for (int k = copy.rank - 1; k >= 0; --k) {
    copy.dims[k] = to[k];
    copy.src_strides[k] = st[k];
    copy.dst_strides[k] = dacc;
    dacc *= to[k];
  }
  const void* sp = c.ptr(src);
  void* dp = c.ptr(dst);
  const DType t = c.type;
  c.b.prefills.push_back(
      [=](Context& d) { check(device::strided_copy(t, sp, dp, copy, d.stream), "prefill (broadcast C)"); });
}

void cublas_gemm(Ctx& c) {
  const GemmCall g = gemm_call(c);
  const int a = c.input(0), b = c.input(1), y = c.output();
  const bool has_c = c.p.kind == LayerKind::kGemm && c.p.inputs.size() > 2;
  if (has_c) prefill_broadcast(c, c.input(2), y);
  const void* ap = c.ptr(a);
  const void* bp = c.ptr(b);
  void* yp = c.ptr(y);
  const cudaDataType_t dt = cuda_type(c.type);
  const cublasComputeType_t ct = compute_type(c);
  const float alpha = g.alpha, beta = has_c ? g.beta : 0.f;
  const std::string v = c.spec.variant.algorithm;
  const int m = int_dim(g.n), n = int_dim(g.m), k = int_dim(g.k);
  const cublasOperation_t op_first = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_second = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_first = int_dim(g.tb ? g.k : g.n), ld_second = int_dim(g.ta ? g.m : g.k);
  if (v == "cublas_gemv") {
    if (g.batch != 1 || c.type != DType::kF32)
      fail(Disposition::kUnsupported, "cublasSgemv is f32 and unbatched");
    // y(M) = op(A)·b (N = 1) or y(N) = aᵀ·op(B) (M = 1): a matrix-vector product in column-major terms.
    const bool n_is_one = g.n == 1;
    const void* mat = n_is_one ? ap : bp;
    const void* vec = n_is_one ? bp : ap;
    const bool mat_t = n_is_one ? g.ta : g.tb;
    // Row-major R×C stored matrix = column-major C×R: rows/cols of the stored buffer, column-major.
    const int64_t stored_rows = n_is_one ? (g.ta ? g.k : g.m) : (g.tb ? g.n : g.k);
    const int64_t stored_cols = n_is_one ? (g.ta ? g.m : g.k) : (g.tb ? g.k : g.n);
    // n_is_one: y = op(A)·b; column-major view of A's buffer is Aᵀ, so op = T unless transA.
    // m_is_one: y = op(B)ᵀ·a; column-major view of B's buffer is Bᵀ, so op = N unless transB.
    const cublasOperation_t op =
        n_is_one ? (mat_t ? CUBLAS_OP_N : CUBLAS_OP_T) : (mat_t ? CUBLAS_OP_T : CUBLAS_OP_N);
    const int rows = int_dim(stored_cols), cols = int_dim(stored_rows);
    c.b.implementation = "cublasSgemv";
    c.b.steps.push_back([=](Context& d) {
      check(cublasSetMathMode(d.cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      check(cublasSgemv(d.cublas, op, rows, cols, &alpha, static_cast<const float*>(mat), rows,
                        static_cast<const float*>(vec), 1, &beta, static_cast<float*>(yp), 1),
            "cublasSgemv");
    });
    return;
  }
  if (g.batch > 1) {
    const int64_t sa = g.stride_b, sb = g.stride_a, sc = g.m * g.n;
    const int batch = int_dim(g.batch);
    c.b.implementation = "cublasGemmStridedBatchedEx CUBLAS_GEMM_DEFAULT";
    c.b.steps.push_back([=](Context& d) {
      check(
          cublasGemmStridedBatchedEx(d.cublas, op_first, op_second, m, n, k, &alpha, bp, dt, ld_first, sa, ap,
                                     dt, ld_second, sb, &beta, yp, dt, m, sc, batch, ct, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
    });
    return;
  }
  c.b.implementation = "cublasGemmEx CUBLAS_GEMM_DEFAULT";
  c.b.steps.push_back([=](Context& d) {
    check(cublasGemmEx(d.cublas, op_first, op_second, m, n, k, &alpha, bp, dt, ld_first, ap, dt, ld_second,
                       &beta, yp, dt, m, ct, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  });
}

void cublaslt_matmul(Ctx& c) {
  const GemmCall g = gemm_call(c);
  const auto epilogue = lt_epilogue_for(c.p);
  if (!epilogue) fail(Disposition::kUnsupported, "no cuBLASLt epilogue for these post-ops");
  const int a = c.input(0), b = c.input(1), y = c.output();
  const bool gemm_c = c.p.kind == LayerKind::kGemm && c.p.inputs.size() > 2;
  // C: a residual (post-op Add), or Gemm's full-matrix C, read with beta; D is y.
  int c_tensor = -1, bias_tensor = -1;
  float beta = 0;
  if (gemm_c && c.in_shape(2).size() == 2) {
    if (c.in_shape(2) != c.out_shape()) fail(Disposition::kUnsupported, "Gemm's C broadcast along M");
    c_tensor = c.input(2);
    beta = g.beta;
  } else if (gemm_c) {
    if (g.beta != 1.f) fail(Disposition::kUnsupported, "a cuBLASLt bias is not scaled (Gemm beta != 1)");
    bias_tensor = c.input(2);
  }
  for (const auto& po : c.p.post_ops) {
    if (po.op == "Add") {
      c_tensor = c.extra(c.out_shape());
      beta = 1;
    } else if (po.op == "BiasAdd") {
      bias_tensor = c.extra({g.n});
    }
  }
  const cudaDataType_t dt = cuda_type(c.type);
  auto desc = std::make_shared<LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>();
  c.b.keep.push_back(desc);
  check(cublasLtMatmulDescCreate(&desc->h, compute_type(c), CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_second = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first),
        "TRANSA");
  check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
        "TRANSB");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  const std::string act = epilogue->activation;
  if (epilogue->bias)
    epi = act == "Relu"   ? CUBLASLT_EPILOGUE_RELU_BIAS
          : act == "Gelu" ? CUBLASLT_EPILOGUE_GELU_BIAS
                          : CUBLASLT_EPILOGUE_BIAS;
  else if (act == "Relu")
    epi = CUBLASLT_EPILOGUE_RELU;
  else if (act == "Gelu")
    epi = CUBLASLT_EPILOGUE_GELU;
  check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
  if (bias_tensor >= 0) {
    const void* bias = c.ptr(bias_tensor);
    check(cublasLtMatmulDescSetAttribute(desc->h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
          "BIAS_POINTER");
  }
  auto layout = [&](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride) {
    auto l = std::make_shared<LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>();
    c.b.keep.push_back(l);
    check(cublasLtMatrixLayoutCreate(&l->h, dt, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (g.batch > 1) {
      const int32_t count = static_cast<int32_t>(g.batch);
      check(cublasLtMatrixLayoutSetAttribute(l->h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "BATCH_COUNT");
      check(cublasLtMatrixLayoutSetAttribute(l->h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                             sizeof stride),
            "STRIDED_BATCH_OFFSET");
    }
    return l->h;
  };
  // Column-major: first operand = b's buffer (N×K, or K×N transposed), second = a's buffer.
  const auto la = g.tb ? layout(static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.n), g.k, g.stride_b)
                       : layout(static_cast<uint64_t>(g.n), static_cast<uint64_t>(g.k), g.n, g.stride_b);
  const auto lb = g.ta ? layout(static_cast<uint64_t>(g.m), static_cast<uint64_t>(g.k), g.m, g.stride_a)
                       : layout(static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.m), g.k, g.stride_a);
  const auto ld = layout(static_cast<uint64_t>(g.n), static_cast<uint64_t>(g.m), g.n, g.m * g.n);
  LtCall call;
  call.desc = desc->h;
  call.a = la;
  call.b = lb;
  call.c = ld;
  call.d = ld;
  call.a_ptr = c.ptr(b);
  call.b_ptr = c.ptr(a);
  call.d_ptr = c.ptr(y);
  call.c_ptr = c_tensor >= 0 ? c.ptr(c_tensor) : call.d_ptr;
  call.alpha = g.alpha;
  call.beta = beta;
  lt_matmul_step(c, call);
}

}  // namespace

void lt_matmul_step(Ctx& c, const LtCall& call) {
  auto pref = std::make_shared<LtObject<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>();
  c.b.keep.push_back(pref);
  check(cublasLtMatmulPreferenceCreate(&pref->h), "cublasLtMatmulPreferenceCreate");
  // 32 MiB: a framework-sized cuBLASLt workspace (an unchecked choice, not measured against one);
  // never more than the workspace policy allows.
  const uint64_t max_ws =
      static_cast<uint64_t>(std::min<int64_t>(int64_t{32} << 20, workspace_limit(free_device_memory())));
  check(cublasLtMatmulPreferenceSetAttribute(pref->h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                             sizeof max_ws),
        "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t results[kLtAlgorithms] = {};
  int returned = 0;
  check(cublasLtMatmulAlgoGetHeuristic(c.dev.lt, call.desc, call.a, call.b, call.c, call.d, pref->h,
                                       kLtAlgorithms, results, &returned),
        "cublasLtMatmulAlgoGetHeuristic");
  const int index = std::stoi(c.variant());
  if (returned == 0) fail(Disposition::kUnsupported, "cublasLtMatmulAlgoGetHeuristic returned no algorithm");
  if (index >= returned)
    fail(Disposition::kSkipped, fmt::format("cublasLtMatmulAlgoGetHeuristic returned {} algorithm{}, not {}",
                                            returned, returned == 1 ? "" : "s", index + 1));
  const cublasLtMatmulHeuristicResult_t r = results[index];
  void* ws = c.scratch(r.workspaceSize);
  c.b.workspace = static_cast<int64_t>(r.workspaceSize);
  c.b.implementation =
      fmt::format("cublasLtMatmul heuristic #{} of {} (waves {:.2f})", index + 1, returned, r.wavesCount);
  const size_t ws_bytes = r.workspaceSize;
  const LtCall k = call;
  c.b.steps.push_back([=](Context& d) {
    const void* alpha = k.alpha_device ? k.alpha_device : &k.alpha;
    check(cublasLtMatmul(d.lt, k.desc, alpha, k.a_ptr, k.a, k.b_ptr, k.b, &k.beta, k.c_ptr, k.c, k.d_ptr, k.d,
                         &r.algo, ws, ws_bytes, d.stream),
          "cublasLtMatmul");
  });
}

void gemm(Ctx& c) {
  if (c.spec.variant.algorithm.rfind("cublaslt_matmul", 0) == 0)
    cublaslt_matmul(c);
  else if (!c.p.post_ops.empty())
    fail(Disposition::kUnsupported, "cuBLAS fuses no epilogue (cuBLASLt does)");
  else
    cublas_gemm(c);
}

}  // namespace floorline::kernels::cuda_detail
