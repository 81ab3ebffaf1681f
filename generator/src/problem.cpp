// LayerConfig → kernels::Problem, and the fusion patterns of a model's graph.
#include <map>
#include <set>

#include <fmt/format.h>

#include "floorline/generator/plan.hpp"

namespace floorline::gen {

kernels::Problem to_problem(const mp::LayerConfig& config, const std::string& key) {
  kernels::Problem p;
  p.kind = config.kind;
  p.op = config.op_type.empty() ? std::string(mp::kind_name(config.kind)) : config.op_type;
  p.key = key;
  for (const auto& t : config.inputs) p.inputs.push_back({t.role, t.shape});
  for (const auto& t : config.outputs) p.outputs.push_back({t.role, t.shape});
  for (const auto& a : config.attrs) {
    if (const auto* i = std::get_if<int64_t>(&a.value)) p.ints[a.name] = {*i};
    else if (const auto* is = std::get_if<std::vector<int64_t>>(&a.value)) p.ints[a.name] = *is;
    else if (const auto* d = std::get_if<double>(&a.value)) p.floats[a.name] = {*d};
    else if (const auto* ds = std::get_if<std::vector<double>>(&a.value)) p.floats[a.name] = *ds;
    else if (const auto* s = std::get_if<std::string>(&a.value)) p.strings[a.name] = *s;
  }
  return p;
}

namespace {

// An activation that oneDNN post-ops (and cuDNN/cuBLASLt epilogues) can fuse, with its parameters.
std::optional<kernels::PostOp> activation(const mp::Layer& l) {
  using K = mp::LayerKind;
  const auto& c = l.config;
  auto f = [&](std::string_view name, double fallback) {
    const auto* a = c.find_attr(name);
    if (!a) return fallback;
    if (const auto* d = std::get_if<double>(&a->value)) return *d;
    if (const auto* i = std::get_if<int64_t>(&a->value)) return static_cast<double>(*i);
    return fallback;
  };
  switch (c.kind) {
    case K::kRelu: return kernels::PostOp{"Relu"};
    case K::kSigmoid: return kernels::PostOp{"Sigmoid"};
    case K::kTanh: return kernels::PostOp{"Tanh"};
    case K::kHardSwish: return kernels::PostOp{"HardSwish"};
    case K::kLeakyRelu: return kernels::PostOp{"LeakyRelu", f("alpha", 0.01)};
    case K::kElu: return kernels::PostOp{"Elu", f("alpha", 1.0)};
    case K::kHardSigmoid: return kernels::PostOp{"HardSigmoid", f("alpha", 0.2), f("beta", 0.5)};
    case K::kClip:
      if (c.inputs.size() != 1) return std::nullopt;  // run-time bounds
      return kernels::PostOp{"Clip", f("min", -3.4028234663852886e38), f("max", 3.4028234663852886e38)};
    default: return std::nullopt;
  }
}

}  // namespace

std::vector<FusionMatch> fusion_matches(const mp::ModelIR& m) {
  std::vector<FusionMatch> out;
  std::map<int, size_t> at;  // layer index → position
  for (size_t k = 0; k < m.layers.size(); ++k) at[m.layers[k].index] = k;
  std::map<int, std::vector<int>> consumers;
  for (const auto& l : m.layers)
    for (int p : l.preds) consumers[p].push_back(l.index);
  auto sole_consumer = [&](const mp::Layer& l) -> const mp::Layer* {
    auto it = consumers.find(l.index);
    if (it == consumers.end() || it->second.size() != 1) return nullptr;
    const mp::Layer& c = m.layers[at[it->second[0]]];
    return c.subgraph == l.subgraph && c.shapes_known && c.cost == mp::CostClass::kCompute ? &c : nullptr;
  };
  for (const auto& l : m.layers) {
    using K = mp::LayerKind;
    const K kind = l.config.kind;
    if (kind != K::kConv && kind != K::kConvTranspose && kind != K::kGemm && kind != K::kMatMul) continue;
    if (!l.shapes_known || l.config.outputs.empty()) continue;
    const mp::Layer* c = sole_consumer(l);
    if (!c) continue;
    FusionMatch f;
    f.head = l.index;
    const mp::Shape& y = l.config.outputs[0].shape;
    if (kind == K::kConv && c->config.kind == K::kBatchNormalization) {
      // Inference batch normalization folds into the conv's weights and bias at load time.
      f.absorbed.push_back(c->index);
      f.folded = true;
      f.name = "BatchNormalization(folded)";
      out.push_back(std::move(f));
      continue;
    }
    if (auto a = activation(*c)) {
      f.post_ops.push_back(*a);
      f.absorbed.push_back(c->index);
    } else if (c->config.kind == K::kAdd && c->config.inputs.size() == 2 && c->config.outputs[0].shape == y) {
      const auto& other = c->config.inputs[0].shape == y && c->config.inputs[1].shape == y
                              ? c->config.inputs[1].shape
                              : (c->config.inputs[0].shape == y ? c->config.inputs[1].shape : c->config.inputs[0].shape);
      if (other == y && c->preds.size() == 2) f.post_ops.push_back({"Add"});
      else if (kind == K::kMatMul && other.size() == 1 && !y.empty() && other[0] == y.back()) f.post_ops.push_back({"BiasAdd"});
      else continue;
      f.absorbed.push_back(c->index);
      if (const mp::Layer* d = sole_consumer(*c))
        if (auto a = activation(*d)) {
          f.post_ops.push_back(*a);
          f.absorbed.push_back(d->index);
        }
    } else {
      continue;
    }
    f.name = fusion_name(f.post_ops);
    out.push_back(std::move(f));
  }
  return out;
}

std::map<std::string, std::vector<std::vector<kernels::PostOp>>> fusion_patterns(const std::vector<mp::ModelIR>& models) {
  std::map<std::string, std::map<std::string, std::vector<kernels::PostOp>>> found;
  for (const auto& m : models) {
    std::map<int, const mp::Layer*> by_index;
    for (const auto& l : m.layers) by_index[l.index] = &l;
    for (auto& f : fusion_matches(m))
      if (!f.folded) found[by_index.at(f.head)->key].emplace(f.name, f.post_ops);
  }
  std::map<std::string, std::vector<std::vector<kernels::PostOp>>> out;
  for (auto& [key, pats] : found)
    for (auto& [name, ops] : pats) out[key].push_back(ops);
  return out;
}

std::string fusion_name(const std::vector<kernels::PostOp>& post_ops) {
  std::string s;
  for (const auto& op : post_ops) {
    if (!s.empty()) s += '+';
    s += op.op;
    if (op.op == "Clip") s += fmt::format("({:g},{:g})", op.alpha, op.beta);
    else if (op.op == "LeakyRelu" || op.op == "Elu") s += fmt::format("({:g})", op.alpha);
    else if (op.op == "HardSigmoid") s += fmt::format("({:g},{:g})", op.alpha, op.beta);
  }
  return s;
}

}  // namespace floorline::gen
