// floorline/kernels/problem.hpp — what one benchmark case computes, in plain data.
//
// A Problem is a layer configuration (model_processor's LayerConfig) with everything a kernel
// needs and nothing that ties it to ONNX: the kernel library, and the standalone folders that
// `floorline generate` writes, depend on oneDNN and Google Benchmark only. The generator turns a
// LayerConfig into a Problem in one place (generator/src/problem.cpp); generated sources spell a
// Problem out as C++ initializers.
//
// Shapes are in elements, in the ONNX (plain, row-major) layout: NCHW for images, (M, K) for
// matrices. Attribute names are the canonical-key names of docs/LAYERS.md ("pads", "strides",
// "dil", "group", "kernel", "axis", "perm", ...); an integer scalar is a one-element list.
//
// Backends and the reference dispatch on `kind`, never on the op name. The IR fills every
// attribute that has an ONNX default (model_processor/src/kinds.cpp), so kernels read those with
// the one-argument accessors, which throw MissingAttribute instead of restating the default; the
// two-argument ones are for attributes that may legitimately be absent (Clip's bounds, Pow's
// constant exponent, the pre-opset-13 Softmax marker).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "floorline/common/case_id.hpp"
#include "floorline/common/dtype.hpp"
#include "floorline/common/layer_kind.hpp"
#include "floorline/common/result.hpp"
#include "floorline/kernels/buffer.hpp"

namespace floorline::kernels {

struct Operand {
  std::string role;  // "x", "w", "bias", "a", "b", "scale", "x0", ...
  std::vector<int64_t> shape = {};
};

// One operation fused into the epilogue of the main one (oneDNN post-ops, cuDNN/cuBLASLt
// epilogues). `op` is the ONNX op fused: "Relu", "Clip", "Sigmoid", "Tanh", "HardSwish",
// "HardSigmoid", "LeakyRelu", "Elu"; "Swish", x·sigmoid(x) (a Sigmoid and the Mul of its input by
// it: SiLU, EfficientNet's activation); "Add", an element-wise sum with a tensor of the output's
// shape (a residual connection); or "BiasAdd", a vector added along the last dimension (MatMul
// followed by the Add of a bias).
struct PostOp {
  std::string op;
  double alpha = 0;  // Clip: min; LeakyRelu/Elu/HardSigmoid: alpha; Scale: the factor
  double beta = 0;   // Clip: max; HardSigmoid: beta
  // Attention's post-ops (mp::Epilogue): AttentionBias: the bias' shape, broadcast to the scores;
  // MatMul: V's shape. Empty for the others.
  std::vector<int64_t> shape = {};
};

// Thrown by the one-argument Problem accessors when a Problem lacks an attribute the IR always
// fills: a Problem built by hand, or an IR bug. Backends turn it into an error of the case.
struct MissingAttribute : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Problem {
  LayerKind kind = LayerKind::kUnsupported;  // what the backends and the reference dispatch on
  std::string op;                            // ONNX op type of the layer ("Conv"), for names and messages
  std::string key;                           // its canonical key, for names and messages
  std::vector<Operand> inputs;               // data operands, in the layer's input order
  std::vector<Operand> outputs;
  std::map<std::string, std::vector<int64_t>> ints;   // integer attributes
  std::map<std::string, std::vector<double>> floats;  // float attributes (Clip min/max, alpha...)
  std::map<std::string, std::string> strings;         // string attributes (Resize mode, Pad mode)
  std::vector<PostOp> post_ops;                       // fused epilogue, in order; empty for an unfused case

  const Operand* input(const std::string& role) const;
  // The position of the first input with `role`, or of the first output with one of `roles`; -1
  // when there is none.
  int input_index(const std::string& role) const;
  int output_index(std::initializer_list<const char*> roles) const;
  int64_t int_attr(const std::string& name, int64_t fallback) const;
  std::vector<int64_t> ints_attr(const std::string& name) const;
  double float_attr(const std::string& name, double fallback) const;
  std::string string_attr(const std::string& name, const std::string& fallback) const;
  // Attributes the IR always fills; MissingAttribute ("<key>: attribute 'alpha' is missing") if not.
  int64_t int_attr(const std::string& name) const;
  double float_attr(const std::string& name) const;
  std::string string_attr(const std::string& name) const;
};

// One benchmark case: a problem × an implementation × a data type.
struct CaseSpec {
  Problem problem;
  // The case's identity but for the problem's key (common/case_id.hpp): backend, algorithm as the
  // library spells it (oneDNN: "convolution_direct:brg:avx512_core"; a layout conversion feeding
  // another case: "reorder:<impl>"), dtype, math mode, layout (oneDNN: the memory formats chosen,
  // "src:aBcd16b wei:... dst:..."; a conversion: "<tensor>:<from>><to>"), fusion. No backend is
  // assumed: the planner sets it.
  CaseVariant variant;
  // The implementation as the planner saw it, for backends that enumerate implementations and must
  // find the same one again when the kernel is built (oneDNN: the position in next_impl() order,
  // 0 = its first choice, and impl_info_str()); a kernel whose implementation is no longer offered
  // there is skipped. Unused (0, "") where the algorithm alone names the implementation (cuDNN).
  int impl_index = 0;
  std::string impl_name;
  // A layout conversion names the cases it feeds (oneDNN: that case's algorithm, and impl_index/
  // impl_name are that case's: the converted formats are the ones its implementation asks for).
  CaseFeeds feeds;
  std::string name;  // the case name, case_name(id()), set by the planner
  // Where the kernel's host buffers land (buffer.hpp): the runner sets one placement per pass and
  // asks for huge pages; not part of the case's identity. Backends build inside a PlacementScope
  // of it.
  BufferPlacement placement;

  // The case's identity as text (common/case_id.hpp): the variant and the problem's key. A layout
  // conversion's `feeds` is not part of it.
  CaseId id() const { return case_id(variant, problem.key); }
};

// --- GEMM ------------------------------------------------------------------------------------------
// A Gemm or MatMul problem as row-major GEMM, derived once for every backend:
// y[m×n] = alpha · op(a)[m×k] · op(b)[k×n] (+ beta · C), `batch` times.
//   Gemm (ONNX): a and b 2-D; op() transposes where transA / transB; C (input 2) broadcast to (m, n).
//   MatMul (NumPy): the last two dims of each operand are the matrix; where b has no batch dims (b
//   2-D, or its leading dims all 1) a's leading dims fold into m (`folded`: one GEMM); otherwise
//   batch is the output's leading elements and a_batch, b_batch the operands' (each 1 when
//   broadcast whole); other broadcasts are the backend's to refuse.
struct GemmDesc {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;  // Gemm's transA, transB; false for MatMul
  float alpha = 1, beta = 0;    // Gemm's alpha, and beta where C is given (else 0)
  bool has_c = false;           // Gemm with a C operand
  int64_t batch = 1;            // GEMMs in the problem (1 when folded)
  int64_t a_batch = 1, b_batch = 1;
  bool folded = true;  // MatMul: a's leading dims folded into m (b has none); Gemm: always
};
// Error for an operand of the wrong rank: a Gemm operand that is not 2-D, a 1-D MatMul operand
// (NumPy's vector promotion is the reference's alone), a kind that is neither.
Result<GemmDesc> gemm_desc(const Problem& p);

// --- convolution ------------------------------------------------------------------------------------
// A Conv or ConvTranspose problem's geometry, read once for every backend (ONNX semantics):
//   Conv:          x (N, C, in...), w (K, C/group, kernel...), y (N, K, out...)
//   ConvTranspose: x (N, C, in...), w (C, K/group, kernel...), y (N, K, out...)
// with 1 to 3 spatial dims each, in ONNX order (D, H, W). Dilations as ONNX counts them (1: dense;
// oneDNN counts the gaps, dilation − 1); pads split into the begin and the end of each dim (ONNX's
// pads = [begin..., end...]); output_padding (ConvTranspose's, else zeros) adds rows at the end.
struct ConvDesc {
  bool transposed = false;
  int64_t n = 0, c = 0, k = 0, group = 1;  // batch, input channels, output channels, groups
  std::vector<int64_t> in, out, kernel;    // spatial extents of x, y and w
  std::vector<int64_t> strides, dilations, pads_begin, pads_end, output_padding;
  bool has_bias = false;  // a third input: one value per output channel
  size_t spatial() const { return in.size(); }
  int64_t c_per_group() const { return c / group; }
  int64_t k_per_group() const { return k / group; }
  // 1x1 (every kernel dim 1), unit strides, no padding: a GEMM per image and group on NCHW.
  bool pointwise() const;
  bool symmetric_pads() const { return pads_begin == pads_end; }
};
// Error where the operands are not a 1-D to 3-D convolution's (ranks, a missing operand), an
// attribute has the wrong length, or the group does not divide both channel counts.
Result<ConvDesc> conv_desc(const Problem& p);

// --- random data -----------------------------------------------------------------------------------
// The half-width of input k's uniform random fill, as a fraction of the default fill [-1, 1):
// √(3 / fan-in), at most 1, for a weight operand; 1 for every other input. The weight operands
// are input 1 of a Conv (fan-in: C/group × the kernel's extent), of a ConvTranspose (C/group ×
// the kernel's extent over the strides' product: the taps that land on one output) and of a Gemm
// or MatMul (fan-in: K). Recurrent weights keep their backend's fill (±1/16 in oneDNN and cuDNN).
// A uniform fill on ±a has variance a²/3, so these weights have variance 1 / fan-in (LeCun,
// Bottou, Orr and Müller, "Efficient BackProp", 1998, §4.6): a layer's output has the second
// moment of its input, as with trained weights, and a chain of cases (the replay, which feeds
// each layer its producer's output and keeps the weights the case was built with) keeps its
// activations in f32's normal range instead of growing by √fan-in per layer into overflow,
// infinities and the denormal outputs of exp and sigmoid. A case's time alone does not depend on
// the scale (no operand nears the denormal range).
float fill_half_width(const Problem& p, size_t k);

// Whether input k is a layer's parameter rather than an activation (floorline::parameter_input, by
// its role, kind and rank): in a model an initializer, read once per pass (the cache stage,
// generator/cache_state.hpp, leaves it cold where it reads the activations back).
bool weight_operand(const Problem& p, size_t k);

// --- quantization (int8 cases) ---------------------------------------------------------------------
// A problem run in int8 (CaseVariant dtype int8) reads its quantization from the attributes the QDQ
// fusion puts in the key (model_processor: `qtypes` "u8,i8>u8", the 8-bit type of each quantized
// input then of the output; `zero_points`, 1 per such operand, then the output, where the zero point
// is not 0; `per_channel`, 1 when the weight scales are per output channel). A float Conv, Gemm or
// MatMul planned in int8 (`--dtype int8`) has none: it takes what x86 runtimes run, u8 activations
// with zero points, s8 symmetric weights with per-channel scales and a u8 output.
struct Quantization {
  std::vector<std::string> inputs;   // "u8" or "i8", one per quantized input (data operands, not bias)
  std::string output;                // "u8" or "i8"
  std::vector<int64_t> zero_points;  // inputs.size() + 1 flags: 1 = a zero point is applied
  bool per_channel = false;
};
// The quantization of `p` (its attributes, or the defaults above for Conv/Gemm/MatMul); nullopt for
// a kind with no int8 form or an unreadable `qtypes`.
std::optional<Quantization> quantization(const Problem& p);
// `p` with the defaults written into its attributes (what the kernel runs and the reference reads).
Problem with_quantization(Problem p);

}  // namespace floorline::kernels
