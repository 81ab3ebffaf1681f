// floorline/kernels/reference.hpp — the oracle: plain-loop computations of each layer kind's ONNX
// semantics, and the per-element comparison every backend's Kernel::verify() makes with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "floorline/common/dtype.hpp"
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
// The same for a PostOp's op name ("Relu", "Clip"...; "Swish", x·sigmoid(x), the Sigmoid and Mul pair
// mp::fusion_matches fuses): NaN for a name that is no such kind.
float eltwise_reference(const std::string& op, float x, double alpha, double beta);

// Whether the reference computes `kind` (mapping "plain loops"), or why not: every kind has one or
// the other (tests/generator/kind_support_test.cpp).
KindSupport reference_support(LayerKind kind);

// Reference outputs of `p` (every post-op applied) from its inputs, in the plain ONNX layout,
// computed with plain loops and double accumulation. `extras` are the tensors a fused epilogue
// reads: for an "Add" post-op, the tensor added (output shape) or, for MatMul/Gemm, the bias (N);
// for attention's chain (Scale, AttentionBias, Softmax, MatMul: problem.hpp), each bias, then V.
// The output is then the last post-op's: attention's [..., Sq, Dv].
// Error when Floorline has no reference for the kind (reference_support says why) or the problem
// lacks an attribute the IR always fills.
Result<std::vector<HostTensor>> reference(const Problem& p, const std::vector<HostTensor>& inputs,
                                          const std::vector<HostTensor>& extras);

// --- verification: per element, as benchdnn checks ---------------------------------------------
// Every element of an output must satisfy
//     |got − want| <= atol + rtol · |want|,     atol = rtol · rms(want) + step
// where want is the reference (double accumulation, rounded once to f32) and rms(want) is the
// root mean square of the whole expected output: the floor for elements that cancel to near zero,
// whose rounding error is that of the terms that cancelled, not of the result. (benchdnn compares
// each element's relative error, and its absolute error where |want| is near zero, against a
// threshold per data type and driver, with documented relaxations; its inputs are small integers so
// that most results are exact. Ours are uniform random floats, so the threshold follows the
// rounding error analysis instead.)
//
// rtol, by the layer kind's class (accuracy_class, a switch over every kind), in units of u, the
// unit roundoff of the accumulator (f32, 2^-24, for every math mode: oneDNN, XNNPACK, OpenBLAS
// and cuBLAS/cuDNN accumulate f16 and bf16 products in f32):
//   exact           0: data movement, selections (MaxPool, ReduceMax, ArgMax, TopK...), sign and
//                   comparison ops. The result is one of the inputs, bit for bit.
//   rounded         4 u: a few correctly rounded arithmetic operations per element (Add, Div,
//                   BatchNormalization at inference, HardSwish...).
//   transcendental  16 u: exp, log, tanh, erf... which libraries approximate to a few ulps.
//   accumulating    (16 + 8·√K) u, K = accumulation_length(p): the sum of K products or terms.
//                   A float sum of K terms of random sign has a rounding error of about u·√K
//                   times the result's typical size (the probabilistic bound of Higham and Mary,
//                   "A new approach to probabilistic rounding error analysis", 2019, where the
//                   worst-case bound K·u is far too loose for any real summation); 8 is the margin
//                   for the largest of a million elements (about 5 standard deviations) and for
//                   blocked or pairwise orders; 16 covers the bias, post-ops and the transcendental
//                   parts (softmax's exp, LSTM's gates).
//   interpolating   (16 + 8·√K + 4·E) u (Resize, GridSample, RoiAlign; K: the taps): a sample
//                   position computed in f32 from coordinates up to E, the input's largest spatial
//                   dimension (RoiAlign: over spatial_scale, its boxes are in the image's
//                   coordinates), is off by about E·u pixels, times the data's slope per pixel.
// plus, for a math mode that rounds the products' inputs (tf32: 2^-11), 8 times that unit
// roundoff (the error of a product of two rounded inputs, independent of K), and for an output
// stored in f16 or bf16, 4 times its unit roundoff (2^-11, 2^-8): the output's own rounding and
// that of an intermediate tensor. A fused epilogue raises an exact or rounded kind to 16 u.
// int8 outputs are compared in their quantized integers: atol = 1 (one quantization step: a tie
// rounded the other way, a scale applied in another order, as benchdnn allows), rtol = 0.
// Relaxation: a Winograd or FFT convolution (FastAlgorithm) multiplies rtol by 64: its transforms
// amplify the rounding error (benchdnn compares Winograd by a norm only); keyed on the algorithm
// the backend built, never on a name.
// NaN: an element passes where both are NaN, or both infinite of one sign; a NaN in one only fails.

// The length of the sums behind one output element of `p` (1 where there is none): Conv:
// C/group · the kernel's size; ConvTranspose: C_in/group · the kernel's size (an upper bound);
// Gemm/MatMul: K; AveragePool: the window; GlobalAveragePool: the spatial size; Reduce*: the
// reduced elements; Softmax/LogSoftmax: the axis (or the coerced 2-D row); LayerNormalization,
// InstanceNormalization: the normalized elements; LRN: its size; CumSum: the axis; LSTM/GRU/RNN:
// (input + hidden size) · sequence length; Mean/Sum: the inputs; Resize/GridSample/RoiAlign: the
// taps. The one derivation every backend's verify() uses.
int64_t accumulation_length(const Problem& p);

// How a kind's output relates to its inputs, for its tolerance (see above).
enum class AccuracyClass : uint8_t { kExact, kRounded, kTranscendental, kAccumulating, kInterpolating };
AccuracyClass accuracy_class(LayerKind kind);

// An implementation whose algorithm changes the rounding error: what the backend built.
enum class FastAlgorithm : uint8_t { kNone, kWinograd, kFft };

struct Tolerance {
  double rtol = 0;      // times |want|
  double rms_atol = 0;  // times rms(want): the absolute floor
  double step = 0;      // absolute, in the output's units (int8: 1)
  std::string rule;     // how it was derived, for messages ("Conv f32/fp32 K=4608: (16+8·√K)·2^-24")
};

// The tolerance of `p`'s outputs stored in `storage`, computed in `math` by `algorithm`.
Tolerance verify_tolerance(const Problem& p, DType storage, MathMode math,
                           FastAlgorithm algorithm = FastAlgorithm::kNone);
// The same for an f32 case in strict fp32 math (Floorline's own kernels, OpenBLAS, XNNPACK).
Tolerance verify_tolerance(const Problem& p);

// Compares `got` (elements(expected.shape) floats, plain layout) with the reference element by
// element. Error: how many elements fail, and the worst (largest |got − want| / tolerance): its
// flat index and multi-index, got, want, its tolerance and the rule.
Status compare_output(const float* got, const HostTensor& expected, const Tolerance& tol);

// What compare_output() found on the last output it compared on this thread: the worst element's
// error over its tolerance (0 where all are equal; > 1 fails). For tests and diagnostics.
double last_worst_ratio();

// Fault injection for tests: while an OutputFault lives on this thread, compare_output() adds
// `scale` · rms(want) to element `index` of (a copy of) `got` before comparing, so that a test
// can check that each backend's verify() fails on one wrong element of its real output.
class OutputFault {
 public:
  OutputFault(int64_t index, double scale);
  ~OutputFault();
  OutputFault(const OutputFault&) = delete;
  OutputFault& operator=(const OutputFault&) = delete;
};

}  // namespace floorline::kernels
