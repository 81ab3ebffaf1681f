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

// One row-major GEMM: y[m×n] = alpha · op(a)[m×k] · op(b)[k×n] + beta · y. The leading dimensions
// are the dense ones (a: k, or m transposed; b: n, or k transposed; y: n) unless set, as a block of
// a larger GEMM sets them (gemm_block).
struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  float alpha = 1, beta = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0: dense
  void operator()(const float* a, const float* b, float* y) const {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, blas_int(m),
                blas_int(n), blas_int(k), alpha, a,
                blas_int(lda  ? lda
                         : ta ? m
                              : k),
                b,
                blas_int(ldb  ? ldb
                         : tb ? k
                              : n),
                beta, y, blas_int(ldc ? ldc : n));
  }
};

// Part `part` of `parts` of one dense GEMM: a block of y's columns where N ≥ M (each part reads all
// of op(a) and its columns of op(b)), else a block of its rows; column blocks start at multiples of
// 16 floats (64 bytes), so that two parts share no cache line of a row of y where N is a multiple
// of 16 (vit_b_16's 3072 and 768), and at most one per row otherwise. An empty part is none.
// The parts' calls run on one thread each (openblas_set_num_threads(1), by the caller).
inline void gemm_block(const Gemm& g, const float* a, const float* b, float* y, int part, int parts) {
  Gemm s = g;
  s.lda = g.ta ? g.m : g.k;
  s.ldb = g.tb ? g.k : g.n;
  s.ldc = g.n;
  if (g.n >= g.m) {
    const int64_t lines = (g.n + 15) / 16;
    const int64_t n0 = std::min(g.n, lines * part / parts * 16),
                  n1 = std::min(g.n, lines * (part + 1) / parts * 16);
    s.n = n1 - n0;
    b += g.tb ? n0 * g.k : n0;
    y += n0;
  } else {
    const int64_t m0 = g.m * part / parts, m1 = g.m * (part + 1) / parts;
    s.m = m1 - m0;
    a += g.ta ? m0 : m0 * g.k;
    y += m0 * g.n;
  }
  if (s.m > 0 && s.n > 0) s(a, b, y);
}

using BlasKernel = PlainKernel;

// LSTM, GRU and RNN as one input-projection GEMM over all time steps, then per step the recurrent
// product and the gate math (recurrent.cpp). Throws KernelError (unsupported) for what it does not map.
std::unique_ptr<Kernel> make_recurrent_kernel(const Problem& p);

}  // namespace floorline::kernels::openblas_detail
