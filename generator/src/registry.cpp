// The backend registry: the one place that lists Floorline's backends.
#include <fmt/format.h>

#include "floorline/generator/backend.hpp"

namespace floorline::gen {

#ifdef FLOORLINE_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend();
#endif
#ifdef FLOORLINE_HAVE_ONEDNN
std::unique_ptr<Backend> make_onednn_backend();
#endif

const std::vector<std::unique_ptr<Backend>>& backends() {
  static const std::vector<std::unique_ptr<Backend>> kBackends = [] {
    std::vector<std::unique_ptr<Backend>> v;
#ifdef FLOORLINE_HAVE_CUDA
    v.push_back(make_cuda_backend());
#endif
#ifdef FLOORLINE_HAVE_ONEDNN
    v.push_back(make_onednn_backend());
#endif
    return v;
  }();
  return kBackends;
}

const Backend* find_backend(const std::string& name) {
  for (const auto& b : backends())
    if (b->name() == name) return b.get();
  return nullptr;
}

Result<std::vector<const Backend*>> select_backends(const std::string& spec) {
  std::vector<const Backend*> out;
  if (spec == "auto") {
    for (const auto& b : backends())
      if (b->available()) out.push_back(b.get());
    if (out.empty()) return make_error("no backend can run on this machine (`floorline system` says why)");
    return out;
  }
  std::string known;
  for (const auto& b : backends()) known += (known.empty() ? "" : ", ") + b->name();
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string name = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const Backend* b = find_backend(name);
    if (!b) return make_error("unknown backend '{}' (this build has: {})", name, known.empty() ? "none" : known);
    out.push_back(b);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<BackendChoice> choose_backend() {
  std::string gpu_why;
  for (const auto& b : backends()) {
    if (b->device_kind() != "gpu") continue;
    if (auto st = b->available(); st.ok()) return BackendChoice{b.get(), b->name() + ": a usable GPU"};
    else gpu_why += fmt::format("{}{}: {}", gpu_why.empty() ? "" : "; ", b->name(), st.error().message);
  }
  for (const auto& b : backends()) {
    if (b->device_kind() != "cpu" || !b->available()) continue;
    return BackendChoice{b.get(), gpu_why.empty() ? fmt::format("{}: this build has no GPU backend", b->name())
                                                   : fmt::format("{}: {}", b->name(), gpu_why)};
  }
  return make_error("no backend can run on this machine{}", gpu_why.empty() ? "" : " (" + gpu_why + ")");
}

}  // namespace floorline::gen
