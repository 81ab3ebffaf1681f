// floorline/kernels/reference.hpp — the oracle: plain-loop computations of each layer kind's ONNX
// semantics, which every backend's Kernel::verify() compares its output with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/kernels/problem.hpp"
#include "floorline/kernels/support.hpp"

namespace floorline::kernels {

using Shape = std::vector<int64_t>;

struct HostTensor {
  Shape shape;
  std::vector<float> data;
};

int64_t elements(const Shape& s);
// Row-major (C-order) strides of `s`, in elements.
Shape strides_of(const Shape& s);
// `s` as (outer, n, inner) around `axis`: the product of the dims before it, its own, and the
// product of those after it.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at_axis(const Shape& s, int64_t axis);

// The element-wise function of an ONNX unary kind, as the ONNX operator documentation defines it.
// `alpha`/`beta` as in PostOp (Pow: beta is the exponent). NaN for a kind that is not one.
float eltwise_reference(LayerKind kind, float x, double alpha, double beta);
// The same for a PostOp's op name ("Relu", "Clip"...): NaN for a name that is no such kind.
float eltwise_reference(const std::string& op, float x, double alpha, double beta);

// Whether the reference computes `kind` (mapping "plain loops"), or why not: every kind has one or
// the other (tests/generator/kind_support_test.cpp).
KindSupport reference_support(LayerKind kind);

// Reference outputs of `p` (every post-op applied) from its inputs, in the plain ONNX layout,
// computed with plain loops and double accumulation. `extras` are the tensors a fused epilogue
// reads: for an "Add" post-op, the tensor added (output shape) or, for MatMul/Gemm, the bias (N).
// Error when Floorline has no reference for the kind (reference_support says why) or the problem
// lacks an attribute the IR always fills.
Result<std::vector<HostTensor>> reference(const Problem& p, const std::vector<HostTensor>& inputs,
                                          const std::vector<HostTensor>& extras);

// Compares `got` (elements(expected.shape) floats, plain layout) with the reference: ok when the
// relative L2 error ‖got − expected‖ / ‖expected‖ is at most `tolerance` (a NaN anywhere fails).
// The error names the error, the tolerance and the element that differs most.
Status compare_output(const float* got, const HostTensor& expected, double tolerance);

}  // namespace floorline::kernels
