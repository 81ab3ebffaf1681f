// Removing layers from a built IR, for the rewrites that fold several layers into one (gelu.hpp,
// transposed_matmul.hpp). Internal to model_processor.
#pragma once

#include <algorithm>
#include <vector>

#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// Drops the layers marked in `removed` (indexed by position, each layer's index its position);
// the others are renumbered in order and every `preds` list follows (sorted), a removed
// predecessor dropped from it (the rewrite has already given its reader the predecessors it needs).
inline void drop_layers(ModelIR& ir, const std::vector<bool>& removed) {
  std::vector<int> new_index(ir.layers.size(), -1);
  std::vector<Layer> kept;
  kept.reserve(ir.layers.size());
  for (size_t k = 0; k < ir.layers.size(); ++k) {
    if (removed[k]) continue;
    new_index[k] = static_cast<int>(kept.size());
    kept.push_back(std::move(ir.layers[k]));
  }
  for (auto& l : kept) {
    l.index = new_index[static_cast<size_t>(l.index)];
    std::vector<int> preds;
    for (int p : l.preds)
      if (new_index[static_cast<size_t>(p)] >= 0) preds.push_back(new_index[static_cast<size_t>(p)]);
    std::sort(preds.begin(), preds.end());
    l.preds = std::move(preds);
  }
  ir.layers = std::move(kept);
}

}  // namespace floorline::mp
