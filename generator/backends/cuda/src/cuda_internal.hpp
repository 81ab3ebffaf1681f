// Shared by the CUDA backend's plan (cuda_plan.cpp) and kernels (cuda_kernel.cpp), defined in
// cuda_mapping.cpp: the mappings from ONNX ops and post-ops to library operations, decided without a device.
#pragma once

#include <optional>
#include <string>

#include "device_kernels.hpp"
#include "floorline/kernels/problem.hpp"

namespace floorline::kernels {

// Algorithms asked of cublasLtMatmulAlgoGetHeuristic, each planned as its own case.
constexpr int kLtAlgorithms = 8;

// A cuBLASLt epilogue for a Gemm/MatMul problem: its post-ops, and Gemm's own C when it is a
// vector of N (a bias). `residual`: the post-op Add of a tensor of y's shape, as beta = 1 with C.
struct LtEpilogue {
  bool bias = false;
  bool residual = false;
  std::string activation;  // "", "Relu" or "Gelu"
};
// nullopt when the post-ops are not one of: [Add] then [BiasAdd] then [Relu | Gelu], in that order,
// each optional (a Gemm's vector C counts as the bias).
std::optional<LtEpilogue> lt_epilogue_for(const Problem& p);

// The device kernel's function for a unary / binary kind; nullopt where it has none.
std::optional<device::UnaryOp> unary_op_for(LayerKind kind);
std::optional<device::BinaryOp> binary_op_for(LayerKind kind);

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2 };
// ReduceSum, ReduceMean, ...; GlobalAveragePool and GlobalMaxPool as a mean or max over H×W.
std::optional<ReduceOp> reduce_op_for(LayerKind kind);

}  // namespace floorline::kernels
