// Fusable chains of a model's layer graph (patterns.hpp).
#include "floorline/model_processor/patterns.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace floorline::mp {

std::optional<Epilogue> fusable_activation(const Layer& l) {
  using K = LayerKind;
  const auto& c = l.config;
  auto f = [&](std::string_view name, double fallback) {
    const auto* a = c.find_attr(name);
    if (!a) return fallback;
    if (const auto* d = std::get_if<double>(&a->value)) return *d;
    if (const auto* i = std::get_if<int64_t>(&a->value)) return static_cast<double>(*i);
    return fallback;
  };
  switch (c.kind) {
    case K::kRelu:
      return Epilogue{"Relu"};
    case K::kSigmoid:
      return Epilogue{"Sigmoid"};
    case K::kTanh:
      return Epilogue{"Tanh"};
    case K::kHardSwish:
      return Epilogue{"HardSwish"};
    case K::kLeakyRelu:
      return Epilogue{"LeakyRelu", f("alpha", 0.01)};
    case K::kElu:
      return Epilogue{"Elu", f("alpha", 1.0)};
    case K::kHardSigmoid:
      return Epilogue{"HardSigmoid", f("alpha", 0.2), f("beta", 0.5)};
    case K::kClip:
      if (c.inputs.size() != 1) return std::nullopt;  // run-time bounds
      return Epilogue{"Clip", f("min", -3.4028234663852886e38), f("max", 3.4028234663852886e38)};
    default:
      return std::nullopt;
  }
}

std::vector<FusionMatch> fusion_matches(const ModelIR& m) {
  std::vector<FusionMatch> out;
  std::map<int, size_t> at;  // layer index → position
  for (size_t k = 0; k < m.layers.size(); ++k) at[m.layers[k].index] = k;
  std::map<int, std::vector<int>> consumers;
  for (const auto& l : m.layers)
    for (int p : l.preds) consumers[p].push_back(l.index);
  auto sole_consumer = [&](const Layer& l) -> const Layer* {
    auto it = consumers.find(l.index);
    if (it == consumers.end() || it->second.size() != 1) return nullptr;
    const Layer& c = m.layers[at[it->second[0]]];
    return c.subgraph == l.subgraph && c.shapes_known && c.cost == CostClass::kCompute ? &c : nullptr;
  };
  auto layer_at = [&](int index) -> const Layer& { return m.layers[at[index]]; };
  // x·sigmoid(x) of the head's output: its only readers a Sigmoid, read by the Mul alone, and that
  // Mul of the two (SiLU): {Sigmoid, Mul}, else empty.
  auto swish_of = [&](const Layer& l) -> std::vector<int> {
    using K = LayerKind;
    auto it = consumers.find(l.index);
    if (it == consumers.end() || it->second.size() != 2) return {};
    const Layer* sig = nullptr;
    const Layer* mul = nullptr;
    for (int c : it->second) {
      const Layer& x = layer_at(c);
      if (x.subgraph != l.subgraph || !x.shapes_known || x.cost != CostClass::kCompute) return {};
      if (x.config.kind == K::kSigmoid) sig = &x;
      if (x.config.kind == K::kMul) mul = &x;
    }
    if (!sig || !mul || sole_consumer(*sig) != mul || mul->preds.size() != 2) return {};
    if (mul->config.outputs.empty() || mul->config.outputs[0].shape != l.config.outputs[0].shape) return {};
    if (std::any_of(mul->config.inputs.begin(), mul->config.inputs.end(),
                    [&](const TensorArg& t) { return t.shape != l.config.outputs[0].shape; }))
      return {};
    return {sig->index, mul->index};
  };
  // Scaled dot-product attention from the scores' MatMul `l` (fusion_matches' contract): the match,
  // or nullopt.
  std::set<std::string> graph_outputs;
  for (const auto& o : m.outputs) graph_outputs.insert(o.name);
  auto attention_of = [&](const Layer& l) -> std::optional<FusionMatch> {
    using K = LayerKind;
    const auto& c = l.config;
    if (c.inputs.size() != 2 || c.outputs.size() != 1 || quantized_config(c) || c.find_attr("transA"))
      return {};
    if (c.inputs[0].dtype != DataType::kF32 || c.inputs[1].dtype != DataType::kF32) return {};
    const Shape& q = c.inputs[0].shape;
    const Shape& k = c.inputs[1].shape;
    const Shape& s = c.outputs[0].shape;
    const size_t r = q.size();
    if (r < 3 || k.size() != r || s.size() != r || !std::equal(q.begin(), q.end() - 2, k.begin())) return {};
    const bool tb = c.attr_int("transB", 0) != 0;
    const int64_t d = q[r - 1], sk = tb ? k[r - 2] : k[r - 1];
    if ((tb ? k[r - 1] : k[r - 2]) != d || d <= 0 || sk <= 0) return {};
    FusionMatch f;
    f.head = l.index;
    const Layer* x = nullptr;
    std::string value = l.output_names.empty() ? std::string() : l.output_names[0];
    auto other_input = [&](const Layer& a) -> std::optional<size_t> {  // the operand not the chain's
      if (a.input_names.size() != 2 || a.config.inputs.size() != 2) return {};
      if (a.input_names[0] == value && a.input_names[1] != value) return 1;
      if (a.input_names[1] == value && a.input_names[0] != value) return 0;
      return {};
    };
    // Every value but the last is the fused case's own, in cache: none may be a graph output
    // (a model that returns its attention probabilities).
    auto kept_inside = [&](const Layer& a) {
      return std::none_of(a.output_names.begin(), a.output_names.end(),
                          [&](const std::string& n) { return graph_outputs.count(n) > 0; });
    };
    if (!kept_inside(l)) return {};
    // The chain's next layer: the sole reader of `a`'s output, through Dropout and Identity views
    // (Swin's attention dropout between its Softmax and the product by V: no data moves), `value`
    // then the name it reads.
    auto next_of = [&](const Layer& a) -> const Layer* {
      const Layer* c = &a;
      for (;;) {
        const auto it = consumers.find(c->index);
        if (it == consumers.end() || it->second.size() != 1) return nullptr;
        const Layer& n = layer_at(it->second[0]);
        if (n.subgraph != a.subgraph || !n.shapes_known) return nullptr;
        if (n.cost == CostClass::kCompute) return &n;
        const bool passes = n.cost == CostClass::kView &&
                            (n.config.kind == K::kDropout || n.config.kind == K::kIdentity) &&
                            !n.input_names.empty() && n.input_names[0] == value && !n.output_names.empty() &&
                            !n.output_names[0].empty();
        if (!passes || !kept_inside(n)) return nullptr;
        value = n.output_names[0];
        c = &n;
      }
    };
    x = next_of(l);
    auto advance = [&](const Layer& a) {
      f.absorbed.push_back(a.index);
      value = a.output_names.empty() ? std::string() : a.output_names[0];
      x = kept_inside(a) ? next_of(a) : nullptr;
    };
    auto keeps_scores = [&](const Layer& a) {
      return a.config.outputs.size() == 1 && a.config.outputs[0].shape == s;
    };
    if (x && (x->config.kind == K::kMul || x->config.kind == K::kDiv) && keeps_scores(*x)) {
      const auto o = other_input(*x);
      if (!o || numel(x->config.inputs[*o].shape) != 1 || (x->config.kind == K::kDiv && *o != 1)) return {};
      f.epilogue.push_back({"Scale", 1.0 / std::sqrt(static_cast<double>(d))});
      advance(*x);
    }
    while (x && x->config.kind == K::kAdd && keeps_scores(*x)) {
      const auto o = other_input(*x);
      if (!o) return {};
      const Shape& b = x->config.inputs[*o].shape;
      if (b.size() > r) return {};
      for (size_t i = 0; i < b.size(); ++i)
        if (b[i] != 1 && b[i] != s[r - b.size() + i]) return {};
      Epilogue bias{"AttentionBias"};
      bias.shape = b;
      f.epilogue.push_back(std::move(bias));
      f.operands.emplace_back(x->index, *o);
      advance(*x);
    }
    if (!x || x->config.kind != K::kSoftmax || !keeps_scores(*x) || x->input_names.empty() ||
        x->input_names[0] != value)
      return {};
    const int64_t axis = x->config.attr_int("axis", -1);
    if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return {};
    f.epilogue.push_back({"Softmax"});
    advance(*x);
    if (!x || x->config.kind != K::kMatMul || x->config.find_attr("transB") ||
        x->config.find_attr("transA") || x->config.inputs.size() != 2 || x->input_names.size() != 2 ||
        x->input_names[0] != value || x->input_names[1] == value || quantized_config(x->config))
      return {};
    const Shape& v = x->config.inputs[1].shape;
    if (v.size() != r || !std::equal(q.begin(), q.end() - 2, v.begin()) || v[r - 2] != sk ||
        x->config.inputs[1].dtype != DataType::kF32)
      return {};
    Epilogue pv{"MatMul"};
    pv.shape = v;
    f.epilogue.push_back(std::move(pv));
    f.operands.emplace_back(x->index, 1);
    f.absorbed.push_back(x->index);
    f.name = fusion_name(f.epilogue);
    return f;
  };
  // SiLU on its own, from the Sigmoid `l`: its output read by one Mul alone, whose other input is
  // the Sigmoid's input (x · sigmoid(x)), every tensor of one shape: the match with head `l`,
  // absorbing the Mul, epilogue [MulInput]; nullopt otherwise.
  auto silu_of = [&](const Layer& l) -> std::optional<FusionMatch> {
    const Layer* mul = sole_consumer(l);
    if (!mul || mul->config.kind != LayerKind::kMul || mul->input_names.size() != 2 ||
        l.input_names.empty() || l.output_names.empty() || l.config.inputs.empty() ||
        l.config.outputs.empty())
      return std::nullopt;
    const std::string& x = l.input_names[0];
    const std::string& s = l.output_names[0];
    if (!((mul->input_names[0] == x && mul->input_names[1] == s) ||
          (mul->input_names[0] == s && mul->input_names[1] == x)))
      return std::nullopt;
    const Shape& shape = l.config.outputs[0].shape;
    if (l.config.inputs[0].shape != shape || mul->config.outputs.empty() ||
        mul->config.outputs[0].shape != shape ||
        std::any_of(mul->config.inputs.begin(), mul->config.inputs.end(),
                    [&](const TensorArg& t) { return t.shape != shape; }))
      return std::nullopt;
    FusionMatch f;
    f.head = l.index;
    f.absorbed = {mul->index};
    f.epilogue = {{"MulInput"}};
    f.name = fusion_name(f.epilogue);
    return f;
  };
  for (const auto& l : m.layers) {
    using K = LayerKind;
    const K kind = l.config.kind;
    if (kind == K::kSigmoid && l.shapes_known && l.cost == CostClass::kCompute &&
        !quantized_config(l.config)) {
      if (auto f = silu_of(l)) out.push_back(std::move(*f));
      continue;
    }
    // A BatchNormalization read by a Relu alone (DenseNet's pre-activation norm1 → relu1):
    // [Relu], as oneDNN's fused normalization and ONNX Runtime's NCHWc convolution run it.
    if (kind == K::kBatchNormalization && l.shapes_known && l.cost == CostClass::kCompute &&
        !quantized_config(l.config) && !l.config.outputs.empty()) {
      const Layer* c = sole_consumer(l);
      const auto a = c ? fusable_activation(*c) : std::nullopt;
      if (a && a->op == "Relu" && c->config.outputs.size() == 1 &&
          c->config.outputs[0].shape == l.config.outputs[0].shape) {
        FusionMatch f;
        f.head = l.index;
        f.absorbed = {c->index};
        f.epilogue = {*a};
        f.name = fusion_name(f.epilogue);
        out.push_back(std::move(f));
      }
      continue;
    }
    if (kind != K::kConv && kind != K::kConvTranspose && kind != K::kGemm && kind != K::kMatMul) continue;
    if (!l.shapes_known || l.config.outputs.empty()) continue;
    if (kind == K::kMatMul)
      if (auto a = attention_of(l)) {
        out.push_back(std::move(*a));
        continue;
      }
    FusionMatch f;
    f.head = l.index;
    const Shape& y = l.config.outputs[0].shape;
    if (auto swish = swish_of(l); !swish.empty()) {
      f.absorbed = std::move(swish);
      f.epilogue.push_back({"Swish"});
      f.name = fusion_name(f.epilogue);
      out.push_back(std::move(f));
      continue;
    }
    const Layer* c = sole_consumer(l);
    if (!c) continue;
    if (kind == K::kConv && c->config.kind == K::kBatchNormalization) {
      // Inference batch normalization folds into the conv's weights and bias at load time.
      f.absorbed.push_back(c->index);
      f.folded = true;
      f.name = "BatchNormalization(folded)";
      out.push_back(std::move(f));
      continue;
    }
    if (auto a = fusable_activation(*c)) {
      f.epilogue.push_back(*a);
      f.absorbed.push_back(c->index);
    } else if (c->config.kind == K::kAdd && c->config.inputs.size() == 2 && c->config.outputs[0].shape == y) {
      const auto& other =
          c->config.inputs[0].shape == y && c->config.inputs[1].shape == y
              ? c->config.inputs[1].shape
              : (c->config.inputs[0].shape == y ? c->config.inputs[1].shape : c->config.inputs[0].shape);
      if (other == y && c->preds.size() == 2)
        f.epilogue.push_back({"Add"});
      else if (kind == K::kMatMul && other.size() == 1 && !y.empty() && other[0] == y.back())
        f.epilogue.push_back({"BiasAdd"});
      else
        continue;
      f.absorbed.push_back(c->index);
      if (const Layer* d = sole_consumer(*c))
        if (auto a = fusable_activation(*d)) {
          f.epilogue.push_back(*a);
          f.absorbed.push_back(d->index);
        }
    } else {
      continue;
    }
    f.name = fusion_name(f.epilogue);
    out.push_back(std::move(f));
  }
  return out;
}

bool is_epilogue_fusion(const FusionMatch& m) {
  return !m.folded && !m.epilogue.empty() && !m.absorbed.empty();
}

bool is_attention(const FusionMatch& m) {
  return !m.epilogue.empty() && m.epilogue.back().op == "MatMul";
}

bool has_residual(const FusionMatch& m) {
  return !m.epilogue.empty() && m.epilogue[0].op == "Add";
}

std::string fusion_name(const std::vector<Epilogue>& epilogue) {
  std::string s;
  for (const auto& op : epilogue) {
    if (!s.empty()) s += '+';
    s += op.op;
    if (op.op == "Clip")
      s += fmt::format("({:g},{:g})", op.alpha, op.beta);
    else if (op.op == "LeakyRelu" || op.op == "Elu")
      s += fmt::format("({:g})", op.alpha);
    else if (op.op == "HardSigmoid")
      s += fmt::format("({:g},{:g})", op.alpha, op.beta);
    else if (op.op == "AttentionBias" || op.op == "MatMul")
      s += fmt::format("({})", fmt::join(op.shape, "x"));
  }
  return s;
}

}  // namespace floorline::mp
