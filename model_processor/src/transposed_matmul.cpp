// Transpose-into-MatMul collapse (transposed_matmul.hpp).
#include "transposed_matmul.hpp"

#include <algorithm>
#include <unordered_map>

#include "drop_layers.hpp"

namespace floorline::mp {

namespace {

using K = LayerKind;

// Whether `perm` swaps the last two of its axes and keeps the others in place.
bool swaps_last_two(const std::vector<int64_t>& perm) {
  const size_t r = perm.size();
  if (r < 2) return false;
  for (size_t k = 0; k + 2 < r; ++k)
    if (perm[k] != static_cast<int64_t>(k)) return false;
  return perm[r - 2] == static_cast<int64_t>(r - 1) && perm[r - 1] == static_cast<int64_t>(r - 2);
}

}  // namespace

int collapse_transposed_matmul(ModelIR& ir, const std::unordered_set<std::string>& graph_outputs) {
  if (std::none_of(ir.layers.begin(), ir.layers.end(),
                   [](const Layer& l) { return l.config.kind == K::kMatMul; }))
    return 0;
  // Readers of each value, over every layer (a value read anywhere else keeps its Transpose).
  std::unordered_map<std::string, std::vector<int>> readers;
  for (const auto& l : ir.layers)
    for (const auto& name : l.input_names) readers[name].push_back(l.index);
  std::vector<bool> removed(ir.layers.size(), false);
  int collapsed = 0;
  for (auto& t : ir.layers) {
    if (t.config.kind != K::kTranspose || t.cost != CostClass::kCompute || !t.shapes_known) continue;
    if (t.output_names.size() != 1 || t.input_names.empty() || t.config.inputs.empty()) continue;
    const std::string& out = t.output_names[0];
    if (graph_outputs.count(out) || !swaps_last_two(t.config.attr_ints("perm"))) continue;
    const auto it = readers.find(out);
    if (it == readers.end() || it->second.size() != 1) continue;
    Layer& m = ir.layers[static_cast<size_t>(it->second[0])];
    if (m.config.kind != K::kMatMul || m.cost != CostClass::kCompute || !m.shapes_known ||
        m.subgraph != t.subgraph)
      continue;
    if (m.input_names.size() != 2 || m.input_names[1] != out || m.input_names[0] == out) continue;
    // An int8 MatMul fused from QDQ keeps its Transpose: its kernels read plain operands only.
    if (m.config.find_attr("transB") || m.config.inputs.size() != 2 || quantized_config(m.config)) continue;
    const Shape& stored = t.config.inputs[0].shape;
    if (stored.size() != m.config.inputs[1].shape.size() || m.config.inputs[0].shape.size() < 2) continue;
    m.config.inputs[1].shape = stored;
    m.config.attrs.push_back({"transB", int64_t{1}});
    m.key = m.config.canonical_key();
    m.flops = std::max<int64_t>(0, config_flops(m.config));
    m.bytes = std::max<int64_t>(0, config_bytes(m.config));
    m.input_names[1] = t.input_names[0];
    std::vector<int> preds;
    for (int p : m.preds)
      if (p != t.index) preds.push_back(p);
    preds.insert(preds.end(), t.preds.begin(), t.preds.end());
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    m.preds = std::move(preds);
    // The Transpose's input is now read by the MatMul.
    auto& r = readers[t.input_names[0]];
    std::replace(r.begin(), r.end(), t.index, m.index);
    readers.erase(out);
    removed[static_cast<size_t>(t.index)] = true;
    ++collapsed;
  }
  if (collapsed == 0) return 0;
  drop_layers(ir, removed);
  return collapsed;
}

}  // namespace floorline::mp
