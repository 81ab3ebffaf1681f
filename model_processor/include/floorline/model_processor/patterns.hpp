// floorline/model_processor/patterns.hpp — graph patterns over the layer IR: the chains a library
// can run as one fused call (a Conv/ConvTranspose/Gemm/MatMul with an epilogue; scaled dot-product
// attention, MatMul → Softmax → MatMul), and Conv → BatchNormalization, which folds into the conv's
// weights.
//
// Pure functions of a ModelIR: the generator plans a fused case per pattern (its `fusion` is
// fusion_name()), the analyzer's fused bound F looks those cases up by the same name. The names
// are stored in databases (cases.fusion): changing one orphans every measurement made with it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// One operation of a fused epilogue, as the IR sees it (the generator turns it into the kernel
// library's post-op).
struct Epilogue {
  // The ONNX op it replaces: an activation ("Relu", "Clip", "Sigmoid", "Tanh", "HardSwish",
  // "HardSigmoid", "LeakyRelu", "Elu"), "Swish" (x·sigmoid(x): a Sigmoid and a Mul, SiLU),
  // "MulInput" (after a Sigmoid head: its output times the head's own input, the Mul of a SiLU
  // on its own), "Add" (a
  // residual Add of a tensor of the head's output shape), or "BiasAdd" (a MatMul's Add of a vector
  // along its last output dim). Attention's chain after its first MatMul (scores = Q·Kᵀ):
  // "Scale" (a Mul or Div of the scores by a scalar: alpha, the factor it multiplies by; the
  // model's constant is not in the IR, so 1/√D, D the head size), "AttentionBias" (an Add of a
  // tensor broadcast to the scores: `shape`), "Softmax" (along the last axis), "MatMul" (the
  // probabilities times V: `shape`, V's).
  std::string op;
  double alpha = 0;  // Clip: min; LeakyRelu/Elu/HardSigmoid: alpha (ONNX defaults filled in); Scale
  double beta = 0;   // Clip: max; HardSigmoid: beta
  std::vector<int64_t> shape = {};  // AttentionBias: the bias' shape; MatMul: V's shape
};

// The epilogue op of an activation layer that libraries fuse (oneDNN post-ops, cuDNN's
// conv-bias-activation, cuBLASLt epilogues), with its parameters; nullopt for any other layer and
// for a Clip whose bounds are run-time inputs.
std::optional<Epilogue> fusable_activation(const Layer& layer);

// One fusable chain: the head layer and the layers its epilogue replaces.
struct FusionMatch {
  int head = 0;                    // Layer::index of the Conv/ConvTranspose/Gemm/MatMul
  std::vector<int> absorbed;       // Layer::index of the layers the epilogue replaces, in order
  std::vector<Epilogue> epilogue;  // empty when folded
  std::string name;                // fusion_name(epilogue), or "BatchNormalization(folded)"
  bool folded = false;             // Conv+BatchNormalization: no epilogue, no fused case needed
  // The operands the fused case reads beyond the head's inputs, in the epilogue's order: (absorbed
  // layer index, that layer's input position). Attention: each bias, then V. A residual Add's
  // summand is not one (it is the destination, has_residual).
  std::vector<std::pair<int, size_t>> operands;
};

// The fusable chains of a model, in layer order, one per head at most. A head is a Conv,
// ConvTranspose, Gemm or MatMul with known shapes whose output has exactly one consumer, a compute
// layer of the same (sub)graph, which is:
//   - BatchNormalization after a Conv: folded (inference BN folds into the conv's weights and bias);
//   - a fusable activation: [activation];
//   - an Add of a tensor of the head's output shape, produced by another layer (residual): [Add],
//     or for a MatMul an Add of a vector of its last dim: [BiasAdd]; then, when the Add's sole
//     consumer is a fusable activation, that too: [Add, activation], [BiasAdd, activation].
// Or, a head whose output's only readers are a Sigmoid (read by nothing else) and a Mul of the
// output by that Sigmoid's: x·sigmoid(x), [Swish] absorbing {Sigmoid, Mul}.
// Or a BatchNormalization (the head) read by a Relu alone, of its shape: [Relu] (DenseNet's
// pre-activation norm → relu, which oneDNN's normalization fuses).
// Or SiLU on its own: a Sigmoid (the head) read by one Mul alone, whose other input is the
// Sigmoid's input, every tensor of one shape: [MulInput] absorbing {Mul}, one pass over x as ONNX
// Runtime's fused SiLU (its QuickGelu node) runs it. Where the Sigmoid's producer has the Swish match
// too, S and the replay take the one that saves more.
// Or scaled dot-product attention (is_attention): a MatMul of Q [..., Sq, D] and Kᵀ ([..., D, Sk],
// or K [..., Sk, D] with transB), f32, every operand of the same leading dims, whose scores pass,
// each step the sole reader of the one before (a Dropout or Identity view between two steps passed
// through), through at most one Mul/Div by a scalar [Scale],
// any Adds of a tensor broadcast to the scores [AttentionBias(shape)], a Softmax along the last
// axis [Softmax] and a MatMul of the probabilities by V [..., Sk, Dv] [MatMul(V's shape)]: what
// ONNX Runtime's Attention/MultiHeadAttention and FlashAttention compute in one pass, the scores
// never written to memory. Matched before the epilogues above (an Add of a bias of the scores'
// shape would otherwise be a residual).
std::vector<FusionMatch> fusion_matches(const ModelIR& model);

// A chain S counts at its fused case's time where that is faster (docs/ANALYZER.md, "The
// epilogue"; the analyzer's layer_costs and the replay): every chain but a folded
// BatchNormalization — an activation (a Swish's two layers included), a residual Add with its
// activation, a MatMul's bias Add with its activation: what the libraries' epilogues and the
// runtimes' fused nodes compute in the producer's pass.
bool is_epilogue_fusion(const FusionMatch& match);

// Whether the chain is scaled dot-product attention (its epilogue ends with "MatMul").
bool is_attention(const FusionMatch& match);

// Whether the chain's first absorbed layer is a residual Add (epilogue [Add] or [Add, activation]):
// the fused case reads the other operand of the Add (its destination, prefilled, in oneDNN's sum).
bool has_residual(const FusionMatch& match);

// The fused case's name of an epilogue: the ops joined by '+', parameters in %g:
// "Relu", "Add+Relu", "Clip(0,6)", "LeakyRelu(0.1)", "HardSigmoid(0.2,0.5)", "BiasAdd+Erf".
std::string fusion_name(const std::vector<Epilogue>& epilogue);

}  // namespace floorline::mp
