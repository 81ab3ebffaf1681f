// The OpenBLAS kernels' shared parts: one row-major GEMM call; the kernel base class (tensors per
// operand, verification against the reference, replay ports) is the kernel API's PlainKernel.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floorline/kernels/openblas.hpp"
#include "floorline/kernels/plain_kernel.hpp"
#include "floorline/kernels/reference.hpp"

namespace floorline::kernels::openblas_detail {

// Plain f32 buffers and the kernel base over them (floorline/kernels/plain_kernel.hpp).
using Buffer = PlainBuffer;

inline int blas_int(int64_t v) {
  if (v < 0 || v > INT32_MAX) unsupported(fmt::format("{} does not fit a 32-bit BLAS integer", v));
  return static_cast<int>(v);
}

// One row-major GEMM: y[m×n] = alpha · op(a)[m×k] · op(b)[k×n] + beta · y.
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  float alpha = 1, beta = 0;
  void operator()(const float* a, const float* b, float* y) const {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(m),
                blas_int(n), blas_int(k), alpha, a, blas_int(ta ? m : k), b, blas_int(tb ? k : n), beta, y,
                blas_int(n));
  }
};

using BlasKernel = PlainKernel;

// LSTM, GRU and RNN as one input-projection GEMM over all time steps, then per step the recurrent
// product and the gate math (recurrent.cpp). Throws KernelError (unsupported) for what it does not map.
std::unique_ptr<Kernel> make_recurrent_kernel(const Problem& p);

}  // namespace floorline::kernels::openblas_detail
