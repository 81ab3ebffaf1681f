// The layer IR: layers from the model's nodes and their inferred shapes, and the graph's
// fingerprint (model_stages.hpp).
#include <map>
#include <set>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/defs/schema.h>

#include "einsum.hpp"
#include "gelu.hpp"
#include "kinds.hpp"
#include "model_stages.hpp"
#include "qdq.hpp"
#include "transposed_matmul.hpp"
#include "validate.hpp"

namespace floorline::mp {
namespace {

// Ops whose definition changed in opset 18 (onnx/docs/Changelog.md): opset18.hpp reads the forms
// with an opset-17 equivalent; the others stay Unsupported in a model of opset 18 or newer.
const std::set<std::string> kChangedIn18 = {
    "ReduceMean", "ReduceSum", "ReduceMax",     "ReduceMin",         "ReduceProd",
    "ReduceL1",   "ReduceL2",  "ReduceLogSum",  "ReduceLogSumExp",   "ReduceSumSquare",
    "Split",      "Pad",       "Resize",        "ScatterND",         "ScatterElements",
    "LpPool",     "Col2Im",    "CenterCropPad", "GroupNormalization"};
// Ops whose definition changed after opset 17 (onnx/docs/Changelog.md, opsets 18–21): in a
// model of a newer opset ONNX 1.12 would read them with the wrong signature (those not in
// kChangedIn18 changed in opset 19 or later).
const std::set<std::string> kChangedAfter17 = {"ReduceMean",
                                               "ReduceSum",
                                               "ReduceMax",
                                               "ReduceMin",
                                               "ReduceProd",
                                               "ReduceL1",
                                               "ReduceL2",
                                               "ReduceLogSum",
                                               "ReduceLogSumExp",
                                               "ReduceSumSquare",
                                               "Split",
                                               "Pad",
                                               "Resize",
                                               "ScatterND",
                                               "ScatterElements",
                                               "LpPool",
                                               "Col2Im",
                                               "CenterCropPad",
                                               "GroupNormalization",
                                               "Cast",
                                               "CastLike",
                                               "Constant",
                                               "Shape",
                                               "Size",
                                               "Identity",
                                               "If",
                                               "Loop",
                                               "Scan",
                                               "Reshape",
                                               "Squeeze",
                                               "Unsqueeze",
                                               "Flatten",
                                               "Transpose",
                                               "DequantizeLinear",
                                               "QuantizeLinear",
                                               "Pow",
                                               "Equal",
                                               "Less",
                                               "Greater",
                                               "AveragePool",
                                               "MaxPool",
                                               "GridSample",
                                               "DFT",
                                               "ConstantOfShape",
                                               "Gelu",
                                               "AffineGrid"};

// ---------------------------------------------------------------------------------------------
// Layer IR.

class IrBuilder {
 public:
  IrBuilder(const Loaded& L, const Inference& inf, ModelIR& ir) : L_(L), inf_(inf), ir_(ir) {}

  Status build() {
    const auto& g = L_.model->graph();
    FL_ASSIGN_OR_RETURN(auto order, topological_order(g));
    for (int idx : order) add_node(g.node(idx), idx, "", inf_.folded[idx]);
    if (overflow_) return *overflow_;
    // Quantized (QDQ) models: the int8 layers runtimes fuse (qdq.hpp).
    std::unordered_set<std::string> graph_outputs;
    for (const auto& o : g.output()) graph_outputs.insert(o.name());
    fuse_qdq(
        ir_, [this](const std::string& name) { return describe(name).value; }, graph_outputs);
    // GELU written as Div/Mul → Erf → Add → Mul → Mul: one Gelu layer (gelu.hpp).
    if (const int n = collapse_gelu(
            ir_, [this](const std::string& name) { return describe(name).value; }, graph_outputs))
      ir_.notes.push_back(
          fmt::format("{} GELU chain(s) (erf: Div or Mul, Erf, Add, Mul, Mul; or the tanh approximation's) "
                      "collapsed into "
                      "one Gelu layer each",
                      n));
    // Transpose of a MatMul's right operand: read transposed by the MatMul (transposed_matmul.hpp).
    if (const int n = collapse_transposed_matmul(ir_, graph_outputs))
      ir_.notes.push_back(fmt::format(
          "{} Transpose(s) of a MatMul's right operand folded into the MatMul (transB: read transposed)", n));
    int64_t flops = 0, bytes = 0;
    for (const auto& l : ir_.layers)
      if (l.cost_bearing() &&
          (__builtin_add_overflow(flops, l.flops, &flops) || __builtin_add_overflow(bytes, l.bytes, &bytes)))
        return make_error("the model's total FLOPs or bytes do not fit in 64 bits (at node {})", l.name);
    for (const auto& [op, count] : unsupported_)
      ir_.warnings.push_back(fmt::format("{} layer(s) of op {}: {}", count, op, unsupported_why_[op]));
    if (unknown_shape_layers_ > 0) {
      std::string msg =
          fmt::format("{} cost-bearing layer(s) with unknown shapes (first: {}); their cost is not counted",
                      unknown_shape_layers_, first_unknown_);
      if (!inf_.missing_values.empty()) return make_error("{}; {}", msg, inf_.missing_values.front());
      ir_.warnings.push_back(msg);
    }
    return {};
  }

 private:
  static Result<std::vector<int>> topological_order(const onnx::GraphProto& g) {
    const int n = g.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : g.node(i).output())
        if (!o.empty()) producer[o] = i;
    std::vector<std::vector<int>> users(n);
    std::vector<int> indegree(n, 0);
    for (int i = 0; i < n; ++i) {
      std::set<int> deps;
      for (const auto& in : g.node(i).input())
        if (auto it = producer.find(in); it != producer.end() && it->second != i) deps.insert(it->second);
      for (int d : deps) {
        users[d].push_back(i);
        ++indegree[i];
      }
    }
    // Kahn's algorithm, always taking the lowest index ready: the file's order when it is valid.
    std::set<int> ready;
    for (int i = 0; i < n; ++i)
      if (indegree[i] == 0) ready.insert(i);
    std::vector<int> order;
    while (!ready.empty()) {
      const int i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (int u : users[i])
        if (--indegree[u] == 0) ready.insert(u);
    }
    if (static_cast<int>(order.size()) != n) return make_error("graph has a cycle");
    return order;
  }

  ValueDesc describe(const std::string& name) const {
    ValueDesc d;
    d.name = name;
    d.present = !name.empty();
    if (!d.present) return d;
    if (auto it = inf_.shapes.find(name); it != inf_.shapes.end()) {
      d.dtype = it->second.dtype;
      d.shape = it->second.shape;
    }
    if (auto it = inf_.values.find(name); it != inf_.values.end())
      d.value = &it->second;
    else if (auto o = owned_.find(name); o != owned_.end())
      d.value = &o->second;
    else if (auto t = L_.initializers.find(name); t != L_.initializers.end()) {
      // Small initializers (parameters such as Pad's pads) become attributes.
      if (tensor_numel(*t->second) <= 64 && t->second->data_location() != onnx::TensorProto::EXTERNAL) {
        auto v = read_tensor(*t->second, &L_.external);
        if (v) d.value = &owned_.emplace(name, std::move(*v)).first->second;
      }
    }
    return d;
  }

  void add_node(const onnx::NodeProto& node, int idx, const std::string& subgraph, bool folded) {
    const auto* registry = onnx::OpSchemaRegistry::Instance();
    NodeView v;
    v.node = &node;
    v.opset = L_.opset;
    const bool dflt = default_domain(node.domain());
    v.schema = registry->GetSchema(node.op_type(), static_cast<int>(std::min(L_.opset, kMaxKnownOpset)),
                                   dflt ? "" : node.domain());
    for (const auto& in : node.input()) v.in.push_back(describe(in));
    for (const auto& out : node.output()) v.out.push_back(describe(out));

    // ONNX Runtime's com.microsoft operators with a kind of their own (composite.hpp,
    // register_contrib_schemas); the others were decomposed or stay Unsupported.
    const bool contrib_kind = node.domain() == "com.microsoft" && node.op_type() == "MatMulNBits";
    std::optional<LayerKind> kind =
        (dflt || contrib_kind) && v.schema ? kind_from_op_type(node.op_type()) : std::nullopt;
    // Einsum: a matrix product becomes a MatMul of its folded shapes (einsum.hpp); any other
    // equation stays Unsupported, named.
    std::optional<EinsumMatMul> einsum;
    const bool is_einsum = dflt && v.schema && node.op_type() == "Einsum";
    if (is_einsum) {
      std::string equation, why;
      for (const auto& a : node.attribute())
        if (a.name() == "equation") equation = a.s();
      if (v.in.size() == 2 && v.in[0].shape && v.in[1].shape)
        einsum = einsum_as_matmul(equation, *v.in[0].shape, *v.in[1].shape, &why);
      else
        why = v.in.size() != 2 ? "not two operands" : "operand shapes unknown";
      if (!einsum)
        note_unsupported(
            node.op_type(),
            fmt::format("equation '{}' is not a matrix product ({}); kept as Unsupported", equation, why));
    }
    const bool changed =
        L_.opset >= 19 ? kChangedAfter17.count(node.op_type()) > 0 : kChangedIn18.count(node.op_type()) > 0;
    const bool read_as_17 = subgraph.empty() && L_.read_as_17.count(idx) > 0;
    if (kind && L_.opset > kMaxKnownOpset && changed && !read_as_17) {
      note_unsupported(node.op_type(),
                       fmt::format("redefined after opset 17; this model's opset {} is newer than "
                                   "ONNX 1.12 knows, so it is kept as Unsupported",
                                   L_.opset));
      kind.reset();
    } else if (!kind && !is_einsum && !folded) {  // a folded layer is a constant: no work to cost
      note_unsupported(node.op_type(),
                       !v.schema
                           ? fmt::format("not known to ONNX 1.12 (domain '{}'); kept as Unsupported, "
                                         "costed by its roofline time",
                                         node.domain())
                           : "no Floorline layer kind yet; kept as Unsupported, costed by its roofline time");
    }
    Layer layer;
    layer.index = static_cast<int>(ir_.layers.size());
    layer.name =
        subgraph.empty() ? node_label(node, idx) : fmt::format("{}/{}", subgraph, node_label(node, idx));
    layer.op_type = node.op_type();
    layer.subgraph = subgraph;
    layer.folded = folded;
    layer.config = normalize(v, einsum ? LayerKind::kMatMul : kind.value_or(LayerKind::kUnsupported),
                             &layer.input_names);
    if (einsum && layer.config.inputs.size() == 2 && layer.config.outputs.size() == 1) {
      layer.config.inputs[0].role = "a";
      layer.config.inputs[0].shape = einsum->a;
      layer.config.inputs[1].role = "b";
      layer.config.inputs[1].shape = einsum->b;
      layer.config.outputs[0].shape = einsum->y;
      layer.config.attrs.clear();  // the equation is in the shapes: equal GEMMs share one key
    }
    layer.cost = folded ? CostClass::kHost : kind_cost_class(layer.config.kind);
    layer.key = layer.config.canonical_key();
    layer.shapes_known = true;
    for (const auto* list : {&layer.config.inputs, &layer.config.outputs})
      for (const auto& t : *list)
        if (!shape_known(t.shape)) layer.shapes_known = false;
    if (layer.cost_bearing()) {
      if (layer.shapes_known) {
        const int64_t flops = config_flops(layer.config), bytes = config_bytes(layer.config);
        if ((flops == kCostOverflow || bytes == kCostOverflow) && !overflow_)
          overflow_ = make_error("node {} ({}): its {} do not fit in 64 bits ({})", layer.name, layer.op_type,
                                 flops == kCostOverflow ? "FLOPs" : "bytes", layer.key);
        layer.flops = std::max<int64_t>(0, flops);
        layer.bytes = std::max<int64_t>(0, bytes);
      } else if (unknown_shape_layers_++ == 0) {
        first_unknown_ = fmt::format("{} ({})", layer.name, layer.op_type);
      }
    }
    std::set<int> preds;
    for (const auto& in : node.input()) {
      auto it = producer_.find(in);
      if (it != producer_.end() && ir_.layers[it->second].cost != CostClass::kHost) preds.insert(it->second);
    }
    layer.preds.assign(preds.begin(), preds.end());
    for (const auto& out : node.output()) {
      layer.output_names.push_back(out);
      if (!out.empty()) producer_[out] = layer.index;
    }
    const std::string label = layer.name;
    ir_.layers.push_back(std::move(layer));

    // Subgraphs: their layers are processed and counted, marked with the subgraph they sit in.
    for (const auto& a : node.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sg : a.graphs()) subs.push_back(&sg);
      for (const auto* sg : subs) {
        const std::string path = fmt::format("{}/{}", label, a.name());
        for (int k = 0; k < sg->node_size(); ++k) add_node(sg->node(k), k, path, false);
      }
    }
  }

  void note_unsupported(const std::string& op, std::string why) {
    ++unsupported_[op];
    unsupported_why_[op] = std::move(why);
  }

  const Loaded& L_;
  const Inference& inf_;
  ModelIR& ir_;
  std::unordered_map<std::string, int> producer_;
  mutable std::unordered_map<std::string, ConstTensor> owned_;
  std::map<std::string, int> unsupported_;
  std::map<std::string, std::string> unsupported_why_;
  int unknown_shape_layers_ = 0;
  std::string first_unknown_;
  std::optional<Error> overflow_;  // the first layer whose cost does not fit int64
};

// `m` as field `number` of the message being written: tag, length, bytes, as the enclosing message's
// own serializer writes a sub-message.
void write_message_field(google::protobuf::io::CodedOutputStream& out, int number,
                         const google::protobuf::MessageLite& m) {
  using Wire = google::protobuf::internal::WireFormatLite;
  const size_t size = m.ByteSizeLong();  // caches the sizes SerializeWithCachedSizes needs
  out.WriteTag(Wire::MakeTag(number, Wire::WIRETYPE_LENGTH_DELIMITED));
  out.WriteVarint32(static_cast<uint32_t>(size));
  m.SerializeWithCachedSizes(&out);
}

}  // namespace

Status build_layers(const Loaded& L, const Inference& inf, ModelIR& ir) {
  IrBuilder builder(L, inf, ir);
  return builder.build();
}

// A hash of the graph's structure: nodes (with their attributes), graph inputs/outputs, and the
// names, types and dims of initializers, but none of their values, so two exports of one
// architecture with different random weights match, and any change to the work does not.
// The value is stored in databases (models are matched by name and fingerprint): it is FNV-1a of
// the deterministic serialization of the graph with its doc_string and every initializer's payload,
// external_data and doc_string cleared. The graph is written here field by field in field-number
// order (GraphProto: node 1, name 2, initializer 5, input 11, output 12, value_info 13,
// quantization_annotation 14, sparse_initializer 15, then unknown fields), which gives those bytes
// without copying the graph.
std::string graph_fingerprint(const onnx::GraphProto& g) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    for (const auto& n : g.node()) write_message_field(cos, 1, n);
    if (g.has_name()) google::protobuf::internal::WireFormatLite::WriteString(2, g.name(), &cos);
    // An initializer as the fields it keeps without its payload: dims 1, data_type 2, segment 3,
    // name 8, data_location 14 and unknown fields.
    onnx::TensorProto bare;
    for (const auto& t : g.initializer()) {
      bare.Clear();
      *bare.mutable_dims() = t.dims();
      if (t.has_data_type()) bare.set_data_type(t.data_type());
      if (t.has_segment()) *bare.mutable_segment() = t.segment();
      if (t.has_name()) bare.set_name(t.name());
      if (t.has_data_location()) bare.set_data_location(t.data_location());
      if (!t.unknown_fields().empty()) bare.mutable_unknown_fields()->MergeFrom(t.unknown_fields());
      write_message_field(cos, 5, bare);
    }
    for (const auto& v : g.input()) write_message_field(cos, 11, v);
    for (const auto& v : g.output()) write_message_field(cos, 12, v);
    for (const auto& v : g.value_info()) write_message_field(cos, 13, v);
    for (const auto& a : g.quantization_annotation()) write_message_field(cos, 14, a);
    for (const auto& s : g.sparse_initializer()) write_message_field(cos, 15, s);
    if (!g.unknown_fields().empty())
      google::protobuf::internal::WireFormat::SerializeUnknownFields(g.unknown_fields(), &cos);
  }
  return key_hash_hex(bytes);
}

}  // namespace floorline::mp
