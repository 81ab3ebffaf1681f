// The CUDA backend's mapping of a problem onto library calls, shared by the plan (cuda_plan.cpp)
// and the kernel builders: the cuDNN convolution algorithms and geometry, the workspace limit, the
// cuBLASLt epilogue, and the element-wise, binary and reduce operations of a kind.
#include <algorithm>
#include <climits>
#include <set>

#include <fmt/format.h>

#include "cuda_internal.hpp"
#include "floorline/kernels/cuda.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

const std::vector<std::string>& cudnn_conv_algorithms() {
  static const std::vector<std::string> kAlgorithms = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  return kAlgorithms;
}

int64_t workspace_limit(int64_t free_bytes) {
  constexpr int64_t kReserve = int64_t{256} << 20;
  return std::max<int64_t>(0, free_bytes - free_bytes / 20 - kReserve);
}

Result<ConvGeometry> conv_geometry(const Problem& p) {
  if (!p.input("x") || !p.input("w") || p.outputs.empty())
    return make_error(Disposition::kUnsupported, "{} needs x, w and y", p.op);
  const auto cd = conv_desc(p);  // the kernel API's one reading of the geometry
  if (!cd)
    return make_error(Disposition::kUnsupported, "cuDNN convolutions are 1-D to 3-D: {}", cd.error().message);
  const Shape& xs = p.inputs[0].shape;
  const Shape& ws = p.inputs[1].shape;
  const Shape& ys = p.outputs[0].shape;
  const size_t n = cd->spatial();
  for (auto v : xs)
    if (v > INT_MAX) return make_error(Disposition::kUnsupported, "a dimension over 2^31 ({})", v);
  for (size_t k = 0; k < n; ++k)
    if (cd->pads_begin[k] < 0 || cd->pads_end[k] < 0)
      return make_error(Disposition::kUnsupported, "negative convolution padding");
  ConvGeometry g;
  g.groups = static_cast<int>(cd->group);
  const bool one_d = n == 1;
  g.spatial = one_d ? 2 : static_cast<int>(n);
  auto dims = [&](const Shape& s) {
    std::vector<int> d(s.begin(), s.end());
    if (one_d) d.insert(d.begin() + 2, 1);  // N C W → N C 1 W
    return d;
  };
  g.x = dims(xs);
  g.w = dims(ws);
  g.y = dims(ys);
  std::vector<int64_t> begin = cd->pads_begin, end = cd->pads_end, st = cd->strides, dl = cd->dilations;
  if (one_d) {
    begin.insert(begin.begin(), 0);
    end.insert(end.begin(), 0);
    st.insert(st.begin(), 1);
    dl.insert(dl.begin(), 1);
  }
  g.explicit_pad = begin != end;
  for (int k = 0; k < g.spatial; ++k) {
    g.strides.push_back(static_cast<int>(st[k]));
    g.dilations.push_back(static_cast<int>(dl[k]));
    g.pads.push_back(g.explicit_pad ? 0 : static_cast<int>(begin[k]));
  }
  if (g.explicit_pad) {
    g.x_unpadded = std::vector<int64_t>(g.x.begin(), g.x.end());
    g.pad_begin = begin;
    for (int k = 0; k < g.spatial; ++k) g.x[2 + k] += static_cast<int>(begin[k] + end[k]);
  }
  return g;
}

std::optional<LtEpilogue> lt_epilogue_for(const Problem& p) {
  LtEpilogue e;
  const bool gemm_c = p.kind == LayerKind::kGemm && p.inputs.size() > 2;
  const bool gemm_vector_c = gemm_c && p.inputs[2].shape.size() <= 1;
  const bool gemm_matrix_c = gemm_c && p.inputs[2].shape.size() == 2;
  e.bias = gemm_vector_c;
  size_t k = 0;
  const auto& ops = p.post_ops;
  if (k < ops.size() && ops[k].op == "Add") {
    if (gemm_matrix_c) return std::nullopt;  // C and the residual would both be a matrix
    e.residual = true;
    ++k;
  }
  if (k < ops.size() && ops[k].op == "BiasAdd") {
    if (e.bias) return std::nullopt;
    e.bias = true;
    ++k;
  }
  if (k < ops.size() && (ops[k].op == "Relu" || ops[k].op == "Gelu")) {
    e.activation = ops[k].op;
    ++k;
  }
  if (k != ops.size()) return std::nullopt;
  return e;
}

std::optional<device::UnaryOp> unary_op_for(LayerKind kind) {
  using K = LayerKind;
  using U = device::UnaryOp;
  switch (kind) {
    case K::kRelu:
      return U::kRelu;
    case K::kLeakyRelu:
      return U::kLeakyRelu;
    case K::kElu:
      return U::kElu;
    case K::kSelu:
      return U::kSelu;
    case K::kClip:
      return U::kClip;
    case K::kSigmoid:
      return U::kSigmoid;
    case K::kTanh:
      return U::kTanh;
    case K::kHardSigmoid:
      return U::kHardSigmoid;
    case K::kHardSwish:
      return U::kHardSwish;
    case K::kSoftplus:
      return U::kSoftplus;
    case K::kErf:
      return U::kErf;
    case K::kExp:
      return U::kExp;
    case K::kLog:
      return U::kLog;
    case K::kSqrt:
      return U::kSqrt;
    case K::kReciprocal:
      return U::kReciprocal;
    case K::kNeg:
      return U::kNeg;
    case K::kAbs:
      return U::kAbs;
    case K::kPow:
      return U::kPow;
    case K::kGelu:
      return U::kGelu;
    default:
      return std::nullopt;
  }
}

std::optional<device::BinaryOp> binary_op_for(LayerKind kind) {
  using K = LayerKind;
  using B = device::BinaryOp;
  switch (kind) {
    case K::kAdd:
      return B::kAdd;
    case K::kSub:
      return B::kSub;
    case K::kMul:
      return B::kMul;
    case K::kDiv:
      return B::kDiv;
    case K::kMax:
      return B::kMax;
    case K::kMin:
      return B::kMin;
    case K::kPRelu:
      return B::kPRelu;
    default:
      return std::nullopt;
  }
}

std::optional<ReduceOp> reduce_op_for(LayerKind kind) {
  using K = LayerKind;
  switch (kind) {
    case K::kReduceSum:
      return ReduceOp::kSum;
    case K::kReduceMean:
    case K::kGlobalAveragePool:
      return ReduceOp::kMean;
    case K::kReduceMax:
    case K::kGlobalMaxPool:
      return ReduceOp::kMax;
    case K::kReduceMin:
      return ReduceOp::kMin;
    case K::kReduceProd:
      return ReduceOp::kProd;
    default:
      return std::nullopt;
  }
}

}  // namespace floorline::kernels
