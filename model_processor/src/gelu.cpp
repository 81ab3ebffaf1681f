// GELU collapse (gelu.hpp): one Gelu layer from the Div/Mul → Erf → Add → Mul → Mul chain.
#include "gelu.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "drop_layers.hpp"

namespace floorline::mp {

namespace {

using K = LayerKind;

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π), the tanh approximation's scale
constexpr double kCubic = 0.044715;                  // its cubic coefficient

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
      const Layer& anchor = ir_.layers[k];
      if ((anchor.config.kind != K::kErf && anchor.config.kind != K::kTanh) || removed[k]) continue;
      Chain ch;
      if (!(anchor.config.kind == K::kErf ? match(anchor, ch) : match_tanh(anchor, ch))) continue;
      rewrite(ch);
      for (int r : ch.gone) removed[static_cast<size_t>(r)] = true;
      ++collapsed;
    }
    if (collapsed > 0) drop_layers(ir_, removed);
    return collapsed;
  }

 private:
  struct Chain {
    std::string x;
    int erf = -1;           // the Erf (or, for the tanh approximation, the Tanh) the Gelu is named after
    int last = -1;          // the layer that becomes the Gelu (the chain's last in topological order)
    std::vector<int> gone;  // the others; the first reads x
    std::string approximate = "none";
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
           l->input_names.size() == (kind == K::kErf || kind == K::kTanh ? 1u : 2u) &&
           l->output_names.size() == 1 && l->subgraph == erf.subgraph;
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

  // y = x · v · ½ as two Muls in any association: Mul(Mul(x, v), ½), Mul(Mul(v, ½), x) or
  // Mul(v, Mul(x, ½)). `last` is the Gelu-to-be, `extra` the other Mul.
  bool match_tail(const std::string& v, const Layer& erf, const std::string& x, Layer*& last, Layer*& extra) {
    Layer* m1 = only_consumer(v);
    if (!usable(m1, K::kMul, erf)) return false;
    const std::string w = other_than(*m1, v);
    if (w.empty() || w == v) return false;
    if (w == x || constant_is(w, 0.5)) {
      Layer* m2 = only_consumer(m1->output_names[0]);
      if (!usable(m2, K::kMul, erf)) return false;
      const std::string rest = other_than(*m2, m1->output_names[0]);
      if (rest.empty() || !(w == x ? constant_is(rest, 0.5) : rest == x)) return false;
      last = m2;
      extra = m1;
      return true;
    }
    Layer* h = producer_of(w);
    if (!usable(h, K::kMul, erf) || !only_consumer(w) || other_than(*h, x).empty() ||
        !constant_is(other_than(*h, x), 0.5))
      return false;
    last = m1;
    extra = h;
    return true;
  }

  // Whether `l` is Pow(x, 3) with a constant exponent (read into the attribute y, or an operand).
  bool cube_of(const Layer* l, const std::string& x, const Layer& anchor) const {
    if (!l || l->config.kind != K::kPow || l->cost != CostClass::kCompute || !l->shapes_known ||
        l->output_names.size() != 1 || l->subgraph != anchor.subgraph || l->input_names.empty() ||
        l->input_names[0] != x)
      return false;
    if (const Attr* y = l->config.find_attr("y")) {
      if (const auto* v = std::get_if<double>(&y->value)) return *v == 3.0;
      if (const auto* v = std::get_if<int64_t>(&y->value)) return *v == 3;
      return false;
    }
    return l->input_names.size() == 2 && constant_is(l->input_names[1], 3.0);
  }

  // The tanh approximation as PyTorch 1.13 writes gelu(approximate='tanh'), anchored at its Tanh:
  //   x3 = Mul(x, Mul(x, x)) or Pow(x, 3);  s = Mul(√(2/π), Add(x, Mul(0.044715, x3)));
  //   t = Tanh(s);  v = Add(t, 1);  y = x · v · ½ (as for erf); operands in either order.
  bool match_tanh(const Layer& tanh, Chain& ch) {
    if (!usable(&tanh, K::kTanh, tanh) || tanh.input_names.size() != 1 || !only_consumer(tanh.input_names[0]))
      return false;
    Layer* scale = producer_of(tanh.input_names[0]);
    if (!usable(scale, K::kMul, tanh)) return false;
    const std::string inner = other_than_constant(*scale, kSqrt2OverPi, true);
    if (inner.empty() || !only_consumer(inner)) return false;
    Layer* sum = producer_of(inner);  // x + 0.044715·x³
    if (!usable(sum, K::kAdd, tanh)) return false;
    // Which operand of the Add is the cubic term: the one made by Mul(0.044715, ·).
    for (int side = 0; side < 2 && ch.x.empty(); ++side) {
      const std::string& term = sum->input_names[static_cast<size_t>(side)];
      Layer* cubic = producer_of(term);
      if (!usable(cubic, K::kMul, tanh) || !only_consumer(term)) continue;
      const std::string x3 = other_than_constant(*cubic, kCubic, true);
      if (x3.empty() || !only_consumer(x3)) continue;
      const std::string x = sum->input_names[static_cast<size_t>(1 - side)];
      Layer* p3 = producer_of(x3);
      std::vector<int> cube;  // the layers making x³, the first reading x
      if (cube_of(p3, x, tanh)) {
        cube = {p3->index};
      } else if (usable(p3, K::kMul, tanh)) {
        const std::string sq = other_than(*p3, x);
        Layer* p2 = sq.empty() ? nullptr : producer_of(sq);
        if (!usable(p2, K::kMul, tanh) || !only_consumer(sq) || p2->input_names[0] != x ||
            p2->input_names[1] != x)
          continue;
        cube = {p2->index, p3->index};
      } else {
        continue;
      }
      Layer* add = only_consumer(tanh.output_names[0]);
      if (!usable(add, K::kAdd, tanh) || other_than(*add, tanh.output_names[0]).empty() ||
          !constant_is(other_than(*add, tanh.output_names[0]), 1.0))
        return false;
      Layer* last = nullptr;
      Layer* extra = nullptr;
      if (!match_tail(add->output_names[0], tanh, x, last, extra)) return false;
      const auto& y = last->config.outputs;
      const TensorArg* xa = x_operand(at(cube[0]), x);
      if (!xa || y.size() != 1 || xa->shape != y[0].shape || xa->dtype != y[0].dtype) return false;
      ch.x = x;
      ch.erf = tanh.index;
      ch.last = last->index;
      ch.gone = cube;
      for (int i : {cubic->index, sum->index, scale->index, tanh.index, add->index, extra->index})
        ch.gone.push_back(i);
      ch.approximate = "tanh";
    }
    return !ch.x.empty();
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
    Layer* last = nullptr;
    Layer* extra = nullptr;
    if (!match_tail(v, erf, ch.x, last, extra)) return false;
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
    c.attrs = {{"approximate", ch.approximate}};
    g.config = std::move(c);
    g.key = g.config.canonical_key();
    g.flops = std::max<int64_t>(0, config_flops(g.config));
    g.bytes = std::max<int64_t>(0, config_bytes(g.config));
    g.input_names = {ch.x};
    g.preds.clear();
    if (Layer* p = producer_of(ch.x); p && p->cost != CostClass::kHost) g.preds.push_back(p->index);
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
                   [](const Layer& l) { return l.config.kind == K::kErf || l.config.kind == K::kTanh; }))
    return 0;
  return Collapser(ir, value_of, graph_outputs).run();
}

}  // namespace floorline::mp
