// LayerConfig → kernels::Problem, and the IR's fusion patterns as kernel post-ops.
#include <map>

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
    if (const auto* i = std::get_if<int64_t>(&a.value))
      p.ints[a.name] = {*i};
    else if (const auto* is = std::get_if<std::vector<int64_t>>(&a.value))
      p.ints[a.name] = *is;
    else if (const auto* d = std::get_if<double>(&a.value))
      p.floats[a.name] = {*d};
    else if (const auto* ds = std::get_if<std::vector<double>>(&a.value))
      p.floats[a.name] = *ds;
    else if (const auto* s = std::get_if<std::string>(&a.value))
      p.strings[a.name] = *s;
  }
  return p;
}

kernels::PostOp to_post_op(const mp::Epilogue& e) {
  return kernels::PostOp{e.op, e.alpha, e.beta, e.shape};
}

std::map<std::string, std::vector<FusionPattern>> fusion_patterns(const std::vector<mp::ModelIR>& models) {
  std::map<std::string, std::map<std::string, FusionPattern>> found;
  for (const auto& m : models) {
    std::map<int, const mp::Layer*> by_index;
    for (const auto& l : m.layers) by_index[l.index] = &l;
    for (auto& f : mp::fusion_matches(m)) {
      if (f.folded) continue;
      const mp::Layer& head = *by_index.at(f.head);
      FusionPattern pattern{f.name, {}};
      for (const auto& e : f.epilogue) pattern.post_ops.push_back(to_post_op(e));
      if (mp::is_attention(f)) {
        auto bytes = [](const std::vector<int64_t>& shape) { return 4 * mp::numel(shape); };
        pattern.flops = head.flops;
        for (int a : f.absorbed) pattern.flops += by_index.at(a)->flops;
        pattern.bytes = bytes(head.config.inputs[0].shape) + bytes(head.config.inputs[1].shape);
        for (const auto& e : f.epilogue)  // the biases and V
          if (e.op == "AttentionBias" || e.op == "MatMul") pattern.bytes += bytes(e.shape);
        std::vector<int64_t> o = head.config.inputs[0].shape;
        o.back() = f.epilogue.back().shape.back();
        pattern.bytes += bytes(o);
      }
      found[head.key].emplace(f.name, std::move(pattern));
    }
  }
  std::map<std::string, std::vector<FusionPattern>> out;
  for (auto& [key, pats] : found)
    for (auto& [name, pattern] : pats) out[key].push_back(std::move(pattern));
  return out;
}

}  // namespace floorline::gen
