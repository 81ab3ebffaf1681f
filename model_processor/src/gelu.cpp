// GELU collapse (gelu.hpp): one Gelu layer from the Div/Mul → Erf → Add → Mul → Mul chain.
#include "gelu.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

namespace floorline::mp {

namespace {

using K = LayerKind;

constexpr double kSqrt2 = 1.4142135623730951;

class Collapser {
 public:
  Collapser(ModelIR& ir, const ValueLookup& value_of, const std::unordered_set<std::string>& outputs)
      : ir_(ir), value_of_(value_of), outputs_(outputs) {
    for (const auto& l : ir_.layers) {
      for (const auto& o : l.output_names)
        if (!o.empty()) producer_[o] = l.index;
      for (const auto& in : l.input_names)
        if (!in.empty()) consumers_[in].push_back(l.index);
    }
  }

  int run() {
    std::vector<bool> removed(ir_.layers.size(), false);
    int collapsed = 0;
    for (size_t k = 0; k < ir_.layers.size(); ++k) {
      const Layer& erf = ir_.layers[k];
      if (erf.config.kind != K::kErf || removed[k]) continue;
      Chain ch;
      if (!match(erf, ch)) continue;
      rewrite(ch);
      for (int r : ch.gone) removed[static_cast<size_t>(r)] = true;
      ++collapsed;
    }
    if (collapsed > 0) renumber(removed);
    return collapsed;
  }

 private:
  struct Chain {
    std::string x;
    int erf = -1;
    int last = -1;          // the layer that becomes the Gelu (the chain's last in topological order)
    std::vector<int> gone;  // the other four
  };

  Layer& at(int i) { return ir_.layers[static_cast<size_t>(i)]; }
  Layer* producer_of(const std::string& value) {
    auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : &at(it->second);
  }
  // The single consumer of `value`, or nullptr (none, several, or a graph output).
  Layer* only_consumer(const std::string& value) {
    auto it = consumers_.find(value);
    if (it == consumers_.end() || it->second.size() != 1 || outputs_.count(value)) return nullptr;
    return &at(it->second[0]);
  }
  // Whether `value` is a known scalar or one-element constant within 1e-5 relative of `want`.
  bool constant_is(const std::string& value, double want) const {
    const ConstTensor* t = value_of_(value);
    if (!t || t->size() != 1) return false;
    return std::abs(t->as_double(0) - want) <= 1e-5 * std::abs(want);
  }
  // A binary layer of `kind` that `belongs` to the chain: compute, shapes known, two operands, one
  // output, in the Erf's (sub)graph.
  bool usable(const Layer* l, LayerKind kind, const Layer& erf) const {
    return l && l->config.kind == kind && l->cost == CostClass::kCompute && l->shapes_known &&
           l->input_names.size() == (kind == K::kErf ? 1u : 2u) && l->output_names.size() == 1 &&
           l->subgraph == erf.subgraph;
  }
  // Of a binary layer's two operands, the one that is not the constant `c`; "" when neither
  // operand is that constant.
  std::string other_than_constant(const Layer& l, double c, bool commutative) const {
    if (constant_is(l.input_names[1], c)) return l.input_names[0];
    if (commutative && constant_is(l.input_names[0], c)) return l.input_names[1];
    return {};
  }
  // The operand of a Mul that is not `value`; "" when `value` is not one of them.
  static std::string other_than(const Layer& mul, const std::string& value) {
    if (mul.input_names[0] == value) return mul.input_names[1];
    if (mul.input_names[1] == value) return mul.input_names[0];
    return {};
  }

  // The operand of `l` that reads `value`.
  static const TensorArg* x_operand(const Layer& l, const std::string& value) {
    for (size_t k = 0; k < l.input_names.size() && k < l.config.inputs.size(); ++k)
      if (l.input_names[k] == value) return &l.config.inputs[k];
    return nullptr;
  }

  bool match(const Layer& erf, Chain& ch) {
    if (!usable(&erf, K::kErf, erf)) return false;
    const std::string& t = erf.input_names[0];
    if (!only_consumer(t)) return false;
    // t = x / √2 or x · (1/√2).
    Layer* scale = producer_of(t);
    if (usable(scale, K::kDiv, erf))
      ch.x = other_than_constant(*scale, kSqrt2, false);
    else if (usable(scale, K::kMul, erf))
      ch.x = other_than_constant(*scale, 1 / kSqrt2, true);
    else
      return false;
    if (ch.x.empty()) return false;
    // v = Erf(t) + 1.
    Layer* add = only_consumer(erf.output_names[0]);
    if (!usable(add, K::kAdd, erf) || other_than(*add, erf.output_names[0]).empty() ||
        !constant_is(other_than(*add, erf.output_names[0]), 1.0))
      return false;
    const std::string& v = add->output_names[0];
    // y = x · v · ½, two Muls in any association.
    Layer* m1 = only_consumer(v);
    if (!usable(m1, K::kMul, erf)) return false;
    const std::string w = other_than(*m1, v);
    if (w.empty() || w == v) return false;
    Layer* last = nullptr;
    Layer* extra = nullptr;  // the Mul that is neither m1 nor the last
    if (w == ch.x || constant_is(w, 0.5)) {
      // Mul(Mul(x, v), ½) or Mul(Mul(v, ½), x).
      Layer* m2 = only_consumer(m1->output_names[0]);
      if (!usable(m2, K::kMul, erf)) return false;
      const std::string rest = other_than(*m2, m1->output_names[0]);
      if (rest.empty() || !(w == ch.x ? constant_is(rest, 0.5) : rest == ch.x)) return false;
      last = m2;
      extra = m1;
    } else {
      // Mul(v, Mul(x, ½)).
      Layer* h = producer_of(w);
      if (!usable(h, K::kMul, erf) || !only_consumer(w) || other_than(*h, ch.x).empty() ||
          !constant_is(other_than(*h, ch.x), 0.5))
        return false;
      last = m1;
      extra = h;
    }
    // One pass over x: no broadcasting anywhere in the chain.
    const auto& y = last->config.outputs;
    const TensorArg* xa = x_operand(*scale, ch.x);
    if (!xa || y.size() != 1 || xa->shape != y[0].shape || xa->dtype != y[0].dtype) return false;
    ch.erf = erf.index;
    ch.last = last->index;
    ch.gone = {scale->index, erf.index, add->index, extra->index};
    return true;
  }

  void rewrite(const Chain& ch) {
    const Layer& erf = at(ch.erf);
    const Layer& scale = at(ch.gone[0]);
    TensorArg x = *x_operand(scale, ch.x);
    x.role = "x";
    x.flag_only = false;
    const std::string name = erf.name;
    Layer& g = at(ch.last);
    g.name = name;
    g.op_type = "Gelu";
    LayerConfig c;
    c.kind = K::kGelu;
    c.op_type = "Gelu";
    c.dtype = x.dtype;
    c.inputs = {x};
    c.outputs = {g.config.outputs[0]};
    c.outputs[0].role = "y";
    c.attrs = {{"approximate", std::string("none")}};
    g.config = std::move(c);
    g.key = g.config.canonical_key();
    g.flops = std::max<int64_t>(0, config_flops(g.config));
    g.bytes = std::max<int64_t>(0, config_bytes(g.config));
    g.input_names = {ch.x};
    g.preds.clear();
    if (Layer* p = producer_of(ch.x); p && p->cost != CostClass::kHost) g.preds.push_back(p->index);
  }

  // Drops the removed layers; indices and preds follow.
  void renumber(const std::vector<bool>& removed) {
    std::vector<int> new_index(ir_.layers.size(), -1);
    std::vector<Layer> kept;
    kept.reserve(ir_.layers.size());
    for (size_t k = 0; k < ir_.layers.size(); ++k) {
      if (removed[k]) continue;
      new_index[k] = static_cast<int>(kept.size());
      kept.push_back(std::move(ir_.layers[k]));
    }
    for (auto& l : kept) {
      l.index = new_index[static_cast<size_t>(l.index)];
      std::vector<int> preds;
      for (int p : l.preds)
        if (new_index[static_cast<size_t>(p)] >= 0) preds.push_back(new_index[static_cast<size_t>(p)]);
      std::sort(preds.begin(), preds.end());
      l.preds = std::move(preds);
    }
    ir_.layers = std::move(kept);
  }

  ModelIR& ir_;
  const ValueLookup& value_of_;
  const std::unordered_set<std::string>& outputs_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
};

}  // namespace

int collapse_gelu(ModelIR& ir, const ValueLookup& value_of,
                  const std::unordered_set<std::string>& graph_outputs) {
  if (std::none_of(ir.layers.begin(), ir.layers.end(),
                   [](const Layer& l) { return l.config.kind == K::kErf; }))
    return 0;
  return Collapser(ir, value_of, graph_outputs).run();
}

}  // namespace floorline::mp
