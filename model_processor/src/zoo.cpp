#include "floorline/model_processor/zoo.hpp"

#include <algorithm>
#include <climits>
#include <set>
#include <unordered_map>

namespace floorline::mp {

Result<std::vector<std::filesystem::path>> find_models(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const fs::path path(p);
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> found;
      for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
           it != end; it.increment(ec)) {
        if (ec) break;
        if (it->is_regular_file(ec) && it->path().extension() == ".onnx") found.push_back(it->path());
      }
      if (ec) return make_error("{}: cannot list folder: {}", p, ec.message());
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(path, ec)) {
      out.push_back(path);
    } else {
      return make_error("{}: no such file or folder", p);
    }
  }
  return out;
}

std::vector<UniqueConfig> dedup(const std::vector<ModelIR>& models) {
  std::unordered_map<std::string, size_t> index;
  std::vector<UniqueConfig> unique;
  for (const auto& m : models) {
    const std::string tag = fmt::format("{}@b{}", m.name, m.batch);
    for (const auto& l : m.layers) {
      if (!l.cost_bearing() || !l.shapes_known) continue;
      auto [it, inserted] = index.emplace(l.key, unique.size());
      if (inserted) unique.push_back(UniqueConfig{l.config, l.key, l.flops, l.bytes, 0, {}});
      auto& u = unique[it->second];
      ++u.count;
      ++u.models[tag];
    }
  }
  std::sort(unique.begin(), unique.end(), [](const UniqueConfig& a, const UniqueConfig& b) {
    if (a.config.kind != b.config.kind) return a.config.kind < b.config.kind;
    return a.key < b.key;
  });
  return unique;
}

std::vector<KindSummary> summarize_kinds(const std::vector<ModelIR>& models,
                                         const std::vector<UniqueConfig>& unique) {
  std::map<std::string, KindSummary> by;  // keyed by kind name (op name for Unsupported)
  std::map<std::string, std::set<std::string>> model_sets;
  auto label = [](const LayerConfig& c) {
    return c.kind == LayerKind::kUnsupported ? fmt::format("Unsupported:{}", c.op_type)
                                             : std::string(kind_name(c.kind));
  };
  for (const auto& m : models)
    for (const auto& l : m.layers) {
      if (!l.cost_bearing()) continue;
      auto& s = by[label(l.config)];
      s.kind = l.config.kind;
      s.op_type = l.op_type;
      ++s.instances;
      // Saturating: each model's total fits int64 (checked when it is processed), a zoo's may not.
      if (__builtin_add_overflow(s.flops, l.flops, &s.flops)) s.flops = INT64_MAX;
      model_sets[label(l.config)].insert(m.name);
    }
  for (const auto& u : unique) ++by[label(u.config)].unique;
  std::vector<KindSummary> out;
  for (auto& [name, s] : by) {
    s.models = static_cast<int>(model_sets[name].size());
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const KindSummary& a, const KindSummary& b) {
    if (a.instances != b.instances) return a.instances > b.instances;
    return a.op_type < b.op_type;
  });
  return out;
}

}  // namespace floorline::mp
