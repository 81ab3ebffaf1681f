// Named symbolic input dims (ProcessOptions::dims): which a model uses, and its scenarios.
#include <fmt/format.h>

#include "model_stages.hpp"
#include "validate.hpp"

namespace floorline::mp {

std::string scenario_name(const std::string& stem, const DimValues& dims) {
  if (dims.empty()) return stem;
  std::string out = stem + "[";
  for (size_t k = 0; k < dims.size(); ++k)
    out += fmt::format("{}{}={}", k ? ";" : "", dims[k].first, dims[k].second);
  return out + "]";
}

std::map<std::string, std::vector<int64_t>> dims_for(
    const std::string& stem, const std::map<std::string, std::vector<int64_t>>& dims) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, values] : dims)
    if (name.find(':') == std::string::npos) out[name] = values;
  for (const auto& [name, values] : dims) {
    const size_t colon = name.find(':');
    if (colon != std::string::npos && name.compare(0, colon, stem) == 0 && colon == stem.size())
      out[name.substr(colon + 1)] = values;
  }
  return out;
}

Result<std::vector<DimValues>> dim_scenarios(const Loaded& L,
                                             const std::map<std::string, std::vector<int64_t>>& all_dims) {
  const auto dims = dims_for(L.name, all_dims);
  for (const auto& [name, values] : dims) {
    if (values.empty()) return make_error("--dim {}: no value given", name);
    for (int64_t v : values)
      if (v < 0 || v > kMaxDim) return make_error("--dim {}={}: values must be 0..{}", name, v, kMaxDim);
  }
  // The named dims the graph inputs use, in the order of `dims` (sorted by name).
  std::vector<std::string> used;
  const auto& g = L.model->graph();
  for (const auto& in : g.input()) {
    if (L.initializers.count(in.name())) continue;  // IR < 4 lists initializers as inputs
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    const auto& shape = in.type().tensor_type().shape();
    for (int axis = 0; axis < shape.dim_size(); ++axis) {
      const auto& d = shape.dim(axis);
      if (d.has_dim_value()) continue;
      const std::string& name = d.dim_param();
      const bool given = !name.empty() && dims.count(name);
      if (axis == 0 && shape.dim_size() > 1) {
        if (given)
          return make_error(
              "--dim {}: '{}' is the batch dim of graph input '{}' (its axis 0); set it with --batch", name,
              name, in.name());
        continue;
      }
      if (!given) {
        if (axis == 0) continue;  // a rank-1 input's only dim: the batch, as before named dims
        if (name.empty())
          return make_error(
              "graph input '{}' has an unnamed symbolic dim at axis {}: Floorline cannot set it", in.name(),
              axis);
        return make_error(
            "graph input '{}' has the symbolic dim '{}' at axis {}: give its value with --dim {}=N",
            in.name(), name, axis, name);
      }
      if (std::find(used.begin(), used.end(), name) == used.end()) used.push_back(name);
    }
  }
  std::sort(used.begin(), used.end());
  // Every combination, the last dim varying fastest.
  std::vector<DimValues> out = {DimValues{}};
  for (const auto& name : used) {
    std::vector<DimValues> next;
    for (const auto& partial : out)
      for (int64_t v : dims.at(name)) {
        next.push_back(partial);
        next.back().emplace_back(name, v);
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace floorline::mp
