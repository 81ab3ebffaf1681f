// floorline/model_processor/layer.hpp — the layer IR: kinds, configurations, layers.
//
// Vocabulary (docs/ARCHITECTURE.md, Glossary): a Layer is an ONNX node with everything resolved; its
// LayerConfig is the work it does independent of where it sits in a graph. Two layers whose
// configs have equal canonical keys do identical work.
//
// FLOPs and bytes (per kind, docs/LAYERS.md has the full table):
//  - FLOPs count arithmetic operations, a multiply-add as 2 (Conv, Gemm, MatMul are 2·MACs, the
//    convention of Benanza §III and of cuDNN/cuBLAS throughput figures). Element-wise ops count
//    the operations in their ONNX definition per output element, exp/log/erf/tanh/sqrt as one each.
//  - bytes is the compulsory memory traffic: every input read once, every output written once
//    (weights included); Gather and Slice read only the elements they output. View and Host layers
//    move 0 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "floorline/common/layer_kind.hpp"
#include "floorline/model_processor/tensor.hpp"

namespace floorline::mp {

// How a layer is charged by the analyzer.
enum class CostClass {
  kCompute,      // does work on a device: benchmarked
  kView,         // moves no data (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout at inference)
  kHost,         // runs before inference on constants (Shape, Constant, and any node folded to a constant)
  kControl,      // If/Loop: the layers of its subgraphs carry the cost
  kUnsupported,  // no kind in Floorline's table (or an op ONNX does not know): kept, counted, costed by
                 // roofline
};
std::string_view cost_class_name(CostClass c);

// Every layer kind Floorline understands: the list is floorline/common/layer_kind.hpp (shared with
// the kernel libraries); the single table in model_processor/src/kinds.cpp gives each one its cost
// class, attribute normalization, FLOPs and bytes.
using floorline::kAllLayerKinds;
using floorline::kind_name;  // the ONNX op name of a kind ("Conv"); "Unsupported" for kUnsupported
using floorline::kLayerKindCount;
using floorline::LayerKind;

// The cost class a kind has when it is not folded to a constant.
CostClass kind_cost_class(LayerKind k);
// The kind for an ONNX op of the default domain; nullopt when Floorline has no entry for it.
std::optional<LayerKind> kind_from_op_type(std::string_view op_type);

// A normalized attribute value: integer, float, string, or lists of integers/floats.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;
std::string attr_value_string(const AttrValue& v);

struct Attr {
  std::string name;
  AttrValue value;
};

// One operand of a layer: its role in the kind ("x", "w", "bias", "a", "indices"...), shape and type.
// A flag_only operand (Conv's bias) appears in the key as its role alone: its shape is implied.
struct TensorArg {
  std::string role;
  Shape shape;
  DataType dtype = DataType::kUndefined;
  bool flag_only = false;
};

// The work a layer does, independent of where it sits. Attributes are normalized: defaults filled,
// auto_pad resolved to explicit (possibly asymmetric) pads, negative axes made positive, and
// constant inputs that parameterize the op (Pad's pads, Slice's starts, Clip's min/max) read
// into attributes.
struct LayerConfig {
  LayerKind kind = LayerKind::kUnsupported;
  std::string op_type;  // the ONNX op (kept for Unsupported kinds; equals kind_name otherwise)
  DataType dtype = DataType::kUndefined;  // the compute type (the first data input's type)
  std::vector<TensorArg> inputs;
  std::vector<TensorArg> outputs;
  std::vector<Attr> attrs;  // in the order the kind's normalizer emits them
  // Output shapes join the key where inputs and attributes do not determine them (Resize,
  // Slice, a run-time parameter input, Unsupported ops).
  bool key_includes_outputs = false;

  // e.g. "Conv|x=8x64x56x56|w=64x64x3x3|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32".
  // Derived from the fields above in one place; equal keys iff identical work.
  std::string canonical_key() const;

  const Attr* find_attr(std::string_view name) const;
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name) const;
};

// Whether the config is int8 work of a quantized model: a QuantizeLinear or DequantizeLinear, or a
// layer fused from QDQ (its key has `qtypes`, qdq fusion in docs/LAYERS.md). Such configs are
// planned and costed in the int8 data type whatever the base dtype of the analysis.
bool quantized_config(const LayerConfig& c);

// FNV-1a 64-bit hash of a canonical key: stable across runs, machines and compilers.
uint64_t key_hash(std::string_view canonical_key);
// The hash as 16 lowercase hex digits.
std::string key_hash_hex(std::string_view canonical_key);

// FLOPs and bytes of a config, by the per-kind formulas (see the header comment).
// Returns -1 where a shape needed by the formula is unknown, and kCostOverflow where the count does
// not fit int64 (the model processor rejects such a layer with an error naming it).
constexpr int64_t kCostOverflow = kNumelOverflow;
int64_t config_flops(const LayerConfig& c);
int64_t config_bytes(const LayerConfig& c);

// A node of a processed graph.
struct Layer {
  int index = 0;     // position in topological order within its model
  std::string name;  // ONNX node name, or "<op_type>_<index>" when the node has none
  std::string op_type;
  CostClass cost = CostClass::kUnsupported;
  bool folded = false;       // evaluated on constants at load time (hence Host)
  bool shapes_known = true;  // every input/output shape the kind needs is concrete
  std::string subgraph;      // "" for the main graph; "If_3/then_branch" for a layer inside a subgraph
  LayerConfig config;
  std::string key;  // config.canonical_key(), cached
  int64_t flops = 0;
  int64_t bytes = 0;
  std::vector<int> preds;  // indices of the cost-bearing or view layers whose outputs this one reads
  std::vector<std::string> input_names;   // the ONNX value each of config.inputs reads, in order
  std::vector<std::string> output_names;  // the ONNX values it writes, in node output order

  bool cost_bearing() const { return cost == CostClass::kCompute || cost == CostClass::kUnsupported; }
};

// An element-wise layer (an activation, Add/Sub/Mul/Div/Max/Min/Sum, Identity, Dropout) with one
// output and every input of the output's shape: each output element comes from the input elements
// at its position, so it gives the same result on any layout of its operands, and a
// oneDNN-aware framework runs it on the blocked layout its producer wrote (no conversion). The
// replay (generator/replay.hpp) and the estimate E's conversions (analyzer/bounds.hpp) both keep
// the layout across such a layer.
bool layout_agnostic(const Layer& layer);

}  // namespace floorline::mp
