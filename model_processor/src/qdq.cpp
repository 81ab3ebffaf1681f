// QDQ fusion (qdq.hpp): int8 layers from QuantizeLinear/DequantizeLinear pairs.
#include "qdq.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

namespace floorline::mp {

namespace {

using K = LayerKind;

bool fusable_kind(LayerKind k) {
  switch (k) {
    case K::kConv:
    case K::kGemm:
    case K::kMatMul:
    case K::kAdd:
    case K::kMaxPool:
    case K::kAveragePool:
    case K::kGlobalAveragePool:
      return true;
    default:
      return false;
  }
}
bool weighted(LayerKind k) {
  return k == K::kConv || k == K::kGemm || k == K::kMatMul;
}
bool is_8bit(DataType t) {
  return t == DataType::kU8 || t == DataType::kI8;
}

void make_view(Layer& l) {
  l.cost = CostClass::kView;
  l.flops = 0;
  l.bytes = 0;
}

// A Cast to the type its input already has moves no data.
void same_type_casts_as_views(ModelIR& ir) {
  for (auto& l : ir.layers)
    if (l.config.kind == K::kCast && l.cost == CostClass::kCompute && !l.config.inputs.empty() &&
        !l.config.outputs.empty() && l.config.inputs[0].dtype == l.config.outputs[0].dtype)
      make_view(l);
}

class Fuser {
 public:
  Fuser(ModelIR& ir, const ValueLookup& value_of, const std::unordered_set<std::string>& outputs)
      : ir_(ir), value_of_(value_of), outputs_(outputs) {
    for (auto& l : ir_.layers) {
      for (const auto& o : l.output_names)
        if (!o.empty()) producer_[o] = l.index;
      for (const auto& in : l.input_names)
        if (!in.empty()) consumers_[in].push_back(l.index);
    }
  }

  int run() {
    drop_qdq_around_views();
    int fused = 0;
    std::unordered_set<int> int8_layers;
    for (auto& l : ir_.layers)
      if (fusable_kind(l.config.kind) && l.cost == CostClass::kCompute && l.shapes_known && fuse(l)) {
        ++fused;
        int8_layers.insert(l.index);
      }
    // A DequantizeLinear whose consumers are all int8 layers is folded into them.
    for (auto& l : ir_.layers) {
      if (l.config.kind != K::kDequantizeLinear || l.cost != CostClass::kCompute || l.output_names.empty())
        continue;
      const auto& users = consumers_of(l.output_names[0]);
      if (!users.empty() && !outputs_.count(l.output_names[0]) &&
          std::all_of(users.begin(), users.end(), [&](int u) { return int8_layers.count(u) > 0; }))
        make_view(l);
    }
    return fused;
  }

 private:
  const std::vector<int>& consumers_of(const std::string& value) const {
    static const std::vector<int> kNone;
    auto it = consumers_.find(value);
    return it == consumers_.end() ? kNone : it->second;
  }
  Layer* producer_of(const std::string& value) {
    auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : &ir_.layers[static_cast<size_t>(it->second)];
  }
  // The single consumer of `value`, or nullptr (none, several, or a graph output).
  Layer* only_consumer(const std::string& value) {
    const auto& users = consumers_of(value);
    if (users.size() != 1 || outputs_.count(value)) return nullptr;
    return &ir_.layers[static_cast<size_t>(users[0])];
  }
  // Whether a Q/DQ layer's zero point is known to be `v` (absent means 0).
  bool zero_point_is(const Layer& q, int64_t v) const {
    if (q.input_names.size() < 3 || q.input_names[2].empty()) return v == 0;
    const ConstTensor* t = value_of_(q.input_names[2]);
    if (!t || t->size() == 0) return false;
    for (int64_t k = 0; k < t->size(); ++k)
      if (t->as_int(k) != v) return false;
    return true;
  }
  static bool scale_per_channel(const Layer& q) {
    return q.config.inputs.size() > 1 && numel(q.config.inputs[1].shape) > 1;
  }

  // Whether two Q/DQ layers have the same known scale and zero point (inputs 1 and 2).
  bool same_quantization(const Layer& a, const Layer& b) const {
    for (size_t k : {size_t{1}, size_t{2}}) {
      const bool ha = a.input_names.size() > k && !a.input_names[k].empty();
      const bool hb = b.input_names.size() > k && !b.input_names[k].empty();
      if (ha != hb) return false;
      if (!ha) continue;
      const ConstTensor* va = value_of_(a.input_names[k]);
      const ConstTensor* vb = value_of_(b.input_names[k]);
      if (!va || !vb || va->size() != vb->size()) return false;
      for (int64_t i = 0; i < va->size(); ++i)
        if (va->as_double(i) != vb->as_double(i)) return false;
    }
    return true;
  }
  // DequantizeLinear → a view op (Reshape, Flatten, Squeeze, Unsqueeze, Identity) → QuantizeLinear
  // with the same scale and zero point: the view runs on the 8-bit values and both go (ONNX
  // Runtime's QDQ propagation drops such pairs).
  void drop_qdq_around_views() {
    for (auto& v : ir_.layers) {
      if (v.cost != CostClass::kView || v.input_names.empty() || v.output_names.size() != 1) continue;
      Layer* dq = producer_of(v.input_names[0]);
      Layer* q = only_consumer(v.output_names[0]);
      if (!dq || !q || dq->config.kind != K::kDequantizeLinear || dq->cost != CostClass::kCompute ||
          q->config.kind != K::kQuantizeLinear || q->cost != CostClass::kCompute ||
          dq->output_names.empty() || consumers_of(dq->output_names[0]).size() != 1 ||
          !same_quantization(*dq, *q))
        continue;
      make_view(*dq);
      make_view(*q);
    }
  }

  bool fuse(Layer& l) {
    // Data operands: every input but a bias.
    std::vector<size_t> data;
    for (size_t k = 0; k < l.config.inputs.size(); ++k)
      if (l.config.inputs[k].role != "bias") data.push_back(k);
    if (data.empty() || l.input_names.size() != l.config.inputs.size() || l.output_names.size() != 1)
      return false;
    std::vector<const Layer*> dq;
    for (size_t k : data) {
      const Layer* p = producer_of(l.input_names[k]);
      if (!p || p->config.kind != K::kDequantizeLinear || p->config.inputs.empty() ||
          !is_8bit(p->config.inputs[0].dtype))
        return false;
      dq.push_back(p);
    }
    // Output: one QuantizeLinear, possibly behind a Relu that its clamp makes redundant.
    Layer* next = only_consumer(l.output_names[0]);
    Layer* relu = nullptr;
    if (next && next->config.kind == K::kRelu && next->output_names.size() == 1) {
      relu = next;
      next = only_consumer(relu->output_names[0]);
    }
    if (!next || next->config.kind != K::kQuantizeLinear || next->config.outputs.empty()) return false;
    const Layer& q = *next;
    const DataType out_type = q.config.outputs[0].dtype;
    if (!is_8bit(out_type)) return false;
    if (relu && !zero_point_is(q, out_type == DataType::kU8 ? 0 : -128)) return false;

    std::vector<std::string> types;
    std::vector<int64_t> zps;
    for (size_t j = 0; j < data.size(); ++j) {
      auto& t = l.config.inputs[data[j]];
      t.dtype = dq[j]->config.inputs[0].dtype;
      types.emplace_back(dtype_name(t.dtype));
      zps.push_back(zero_point_is(*dq[j], 0) ? 0 : 1);
    }
    for (size_t k = 0; k < l.config.inputs.size(); ++k)
      if (l.config.inputs[k].role == "bias")
        if (const Layer* p = producer_of(l.input_names[k]);
            p && p->config.kind == K::kDequantizeLinear && !p->config.inputs.empty())
          l.config.inputs[k].dtype = p->config.inputs[0].dtype;  // int32, in the accumulator's scale
    l.config.outputs[0].dtype = out_type;
    zps.push_back(zero_point_is(q, 0) ? 0 : 1);
    l.config.dtype = l.config.inputs[data[0]].dtype;
    l.config.attrs.push_back({"qtypes", fmt::format("{}>{}", fmt::join(types, ","), dtype_name(out_type))});
    l.config.attrs.push_back({"zero_points", zps});
    if (weighted(l.config.kind) && dq.size() > 1)
      l.config.attrs.push_back({"per_channel", int64_t{scale_per_channel(*dq[1])}});
    l.key = l.config.canonical_key();
    l.flops = std::max<int64_t>(0, config_flops(l.config));
    l.bytes = std::max<int64_t>(0, config_bytes(l.config));
    if (relu) make_view(*relu);
    make_view(*next);
    return true;
  }

  ModelIR& ir_;
  const ValueLookup& value_of_;
  const std::unordered_set<std::string>& outputs_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
};

}  // namespace

int fuse_qdq(ModelIR& ir, const ValueLookup& value_of, const std::unordered_set<std::string>& graph_outputs) {
  same_type_casts_as_views(ir);
  // Every fusion starts from a DequantizeLinear: a model without one (most) needs no producer and
  // consumer maps.
  if (std::none_of(ir.layers.begin(), ir.layers.end(),
                   [](const Layer& l) { return l.config.kind == K::kDequantizeLinear; }))
    return 0;
  return Fuser(ir, value_of, graph_outputs).run();
}

}  // namespace floorline::mp
