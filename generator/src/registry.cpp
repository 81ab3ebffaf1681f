// The backend registry: the one place that lists Floorline's backends, and the loader of their
// plugins (floorline/generator/plugin.hpp). A backend is added here (one row) and in its folder,
// generator/backends/<name>/ (its kernel library and floorline_add_backend_plugin).
#include <dlfcn.h>

#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "floorline/common/isa.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/generator/plugin.hpp"

namespace floorline::gen {
namespace {

// A variable set in the environment before a plugin loads, unless the user set it (or set
// `unless`, a variable that already says what the user wants): a runtime the plugin links may read
// it only when it loads.
struct EnvDefault {
  const char* name = nullptr;
  const char* value = nullptr;
  const char* unless = nullptr;
};

struct BackendEntry {
  const char* name;
  const char* device_kind;  // "cpu" or "gpu"
  const char* plugin;       // the plugin's file name
  std::array<EnvDefault, 2> env{};
};

// How long idle workers spin for their library's next call before they sleep. A case timed at
// several threads is called back to back, as a runtime's one pool runs layer after layer: a worker
// asleep after each call adds a wake-up to every call (the 1x1 convolution of mnasnet's second
// block at 2 threads: oneDNN 128.7 µs asleep against 53.1 spinning, docs/MEASUREMENT.md). A worker
// spinning on after its library's last call takes the core the next library's threads need, so the
// spin is bounded: libgomp's 10,000 spins (about 0.1 ms by its own estimate) and OpenBLAS's 2^20
// cycles (0.3-0.5 ms), long enough for back-to-back calls (measured: no slower than spinning
// without end). XNNPACK runs on libgomp's pool too where its build allows (the XNNPACK kernel
// library's src/openmp_pool.cpp); with pthreadpool's own threads it spins until it is parked
// (Backend::park_threads).
constexpr EnvDefault kOpenMpSpin{"GOMP_SPINCOUNT", "10000", "OMP_WAIT_POLICY"};

// The registry's order is the order of `floorline system` and of choose_backend's preference among
// backends of one device kind.
// Adding a backend adds a row here (and nothing else in this file): std::to_array counts them.
constexpr auto kBackends = std::to_array<BackendEntry>({
    {"cuda", "gpu", "libfloorline-backend-cuda.so"},
    {"onednn", "cpu", "libfloorline-backend-onednn.so", {kOpenMpSpin}},
    // Floorline's own CPU kernels; OpenMP as oneDNN's (whichever plugin loads libgomp first sets it).
    {"floorline", "cpu", "libfloorline-backend-floorline.so", {kOpenMpSpin}},
    // XNNPACK's parallel loops on the same OpenMP pool (or its own pthreadpool: park_threads).
    {"xnnpack", "cpu", "libfloorline-backend-xnnpack.so", {kOpenMpSpin}},
    // OpenBLAS's pthread build starts its threads when it loads: one thread until set_threads. Its
    // idle workers spin (yielding) for 2^28 cycles, about 0.1 s, after each call by default.
    {"openblas",
     "cpu",
     "libfloorline-backend-openblas.so",
     {EnvDefault{"OPENBLAS_NUM_THREADS", "1"}, EnvDefault{"OPENBLAS_THREAD_TIMEOUT", "20"}}},
});

// Stands in for a backend whose plugin could not be loaded: named as in the registry, never
// available (the reason is the load error), plans and builds nothing.
class UnloadedBackend final : public Backend {
 public:
  UnloadedBackend(const BackendEntry& entry, Error why) : entry_(entry), why_(std::move(why)) {}
  std::string name() const override { return entry_.name; }
  std::string device_kind() const override { return entry_.device_kind; }
  Status available() const override { return why_; }
  void describe(benchdb::SystemRow&) const override {}
  kernels::KindSupport support(LayerKind) const override {
    return {{}, "not mapped: the backend's plugin could not be loaded (`floorline system` says why)"};
  }
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec&) const override { return {}; }
  kernels::KernelFactory factory() const override {
    return [why = why_, name = name()](const kernels::CaseSpec&) -> Result<std::unique_ptr<kernels::Kernel>> {
      return why.with_context(name);
    };
  }
  void set_threads(int) const override {}
  std::string generated_header() const override { return ""; }
  std::string generated_register_function() const override { return ""; }
  std::string generated_cmake_target() const override { return ""; }

 private:
  const BackendEntry& entry_;
  Error why_;
};

struct LoadedBackend {
  std::once_flag once;
  std::unique_ptr<Backend> backend;  // the plugin's, or an UnloadedBackend
  Result<std::string> path = Error{"not loaded yet"};
};

std::array<LoadedBackend, kBackends.size()>& slots() {
  // Never destroyed: plugins stay loaded until the process ends, and a backend's destructor must
  // not run after its plugin's static objects are gone.
  static auto* s = new std::array<LoadedBackend, kBackends.size()>();
  return *s;
}

// The directories searched for plugins, in order (backend.hpp, plugin_path).
std::vector<std::filesystem::path> plugin_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("FLOORLINE_PLUGIN_DIR"); env && *env) {
    const std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
      const size_t colon = list.find(':', start);
      const std::string dir =
          list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      std::error_code ec;
      if (!dir.empty()) dirs.push_back(std::filesystem::absolute(dir, ec));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path());
    dirs.push_back((exe.parent_path() / ".." / "lib" / "floorline").lexically_normal());
  }
  return dirs;
}

// The ISA cap (floorline/common/isa.hpp) in each CPU library's terms, set before a plugin loads and
// over what the user set (the cap is what the system row records): oneDNN reads ONEDNN_MAX_CPU_ISA
// (2.6 reads the DNNL_ name too) at its first dispatch, OpenBLAS's DYNAMIC_ARCH build
// OPENBLAS_CORETYPE when it loads. XNNPACK cannot be capped (its backend is unavailable under a cap).
void apply_isa_cap() {
  const auto cap = isa_cap();
  if (!cap) return;
  std::string upper(isa_name(*cap));
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  setenv("ONEDNN_MAX_CPU_ISA", upper.c_str(), /*overwrite=*/1);
  setenv("DNNL_MAX_CPU_ISA", upper.c_str(), /*overwrite=*/1);
  const char* core = *cap <= IsaLevel::kSse41      ? "Nehalem"
                     : *cap <= IsaLevel::kAvx      ? "Sandybridge"
                     : *cap <= IsaLevel::kAvx2Vnni ? "Haswell"
                                                   : "SkylakeX";
  setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/1);
}

// Loads the plugin of `entry`: its path, or why not. On success `out` is the plugin's backend.
Result<std::string> load_plugin(const BackendEntry& entry, std::unique_ptr<Backend>& out) {
  const std::vector<std::filesystem::path> dirs = plugin_dirs();
  std::filesystem::path path;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / entry.plugin, ec)) {
      path = dir / entry.plugin;
      break;
    }
  }
  if (path.empty()) {
    std::string searched;
    for (const auto& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir.string();
    if (!std::getenv("FLOORLINE_PLUGIN_DIR")) searched += " (FLOORLINE_PLUGIN_DIR unset)";
    return make_error("not installed: {} is in none of {}", entry.plugin,
                      searched.empty() ? "no directory" : searched);
  }
  for (const EnvDefault& e : entry.env)
    if (e.name && !(e.unless && std::getenv(e.unless))) setenv(e.name, e.value, /*overwrite=*/0);
  apply_isa_cap();
  // RTLD_NOW: a missing vendor symbol is reported here, not at the first call; RTLD_LOCAL: two
  // plugins never see each other's symbols.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    // dlerror() starts with the file's path when the file itself is at fault: said once.
    std::string why = dlerror();
    if (why.rfind(path.string() + ": ", 0) == 0) why.erase(0, path.string().size() + 2);
    return make_error("cannot load {}: {}", path.string(), why);
  }
  using EntryFn = const BackendPluginEntry* (*)();
  auto* fn = reinterpret_cast<EntryFn>(dlsym(handle, kBackendEntrySymbol));
  if (!fn) {
    dlclose(handle);
    return make_error(
        "cannot load {}: it has no {} entry point (not a Floorline backend plugin of this "
        "interface version)",
        path.string(), kBackendEntrySymbol);
  }
  const BackendPluginEntry* plugin = fn();
  const std::string expected = backend_abi_tag();
  if (!plugin || !plugin->abi_tag || expected != plugin->abi_tag) {
    const std::string got = plugin && plugin->abi_tag ? plugin->abi_tag : "(none)";
    dlclose(handle);
    return make_error(
        "cannot load {}: built for '{}', this floorline needs '{}' (rebuild or reinstall the plugins "
        "with the executable)",
        path.string(), got, expected);
  }
  out.reset(plugin->create());
  if (!out || out->name() != entry.name) {
    // The handle stays open: `out` (if any) has code in it.
    return make_error("cannot load {}: it made backend '{}', the registry expects '{}'", path.string(),
                      out ? out->name() : "(none)", entry.name);
  }
  return path.string();
}

// The backend of registry row k, loading its plugin at the first call.
const Backend* load(size_t k) {
  LoadedBackend& slot = slots()[k];
  std::call_once(slot.once, [&] {
    std::unique_ptr<Backend> backend;
    slot.path = load_plugin(kBackends[k], backend);
    if (slot.path)
      slot.backend = std::move(backend);
    else
      slot.backend = std::make_unique<UnloadedBackend>(kBackends[k], slot.path.error());
  });
  return slot.backend.get();
}

}  // namespace

std::vector<const Backend*> backends() {
  std::vector<const Backend*> out;
  for (size_t k = 0; k < kBackends.size(); ++k) out.push_back(load(k));
  return out;
}

const Backend* find_backend(const std::string& name) {
  for (size_t k = 0; k < kBackends.size(); ++k)
    if (name == kBackends[k].name) return load(k);
  return nullptr;
}

Result<std::string> plugin_path(const Backend& backend) {
  for (size_t k = 0; k < kBackends.size(); ++k)
    if (backend.name() == kBackends[k].name) {
      load(k);
      return slots()[k].path;
    }
  return make_error("the registry has no backend '{}'", backend.name());
}

Result<std::vector<const Backend*>> select_backends(const std::string& spec) {
  std::vector<const Backend*> out;
  if (spec == "auto") {
    std::string why;
    for (const Backend* b : backends()) {
      if (auto st = b->available(); st.ok())
        out.push_back(b);
      else
        why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", b->name(), st.error().message);
    }
    if (out.empty()) return make_error("no backend can run on this machine ({})", why);
    return out;
  }
  std::string known;
  for (const auto& entry : kBackends) known += (known.empty() ? "" : ", ") + std::string(entry.name);
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string name =
        spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const Backend* b = find_backend(name);
    if (!b) return make_error("unknown backend '{}' (known: {})", name, known);
    if (auto path = plugin_path(*b); !path) return path.error().with_context(name);
    out.push_back(b);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void describe_system(const Backend& backend, benchdb::SystemRow& row) {
  // In the registry's order whichever backend runs, so that appended fields (cpu_flags) read the
  // same and the runs of each library find one system.
  for (const BackendEntry& e : kBackends) {
    if (e.device_kind != backend.device_kind()) continue;
    const Backend* b = e.name == backend.name() ? &backend : find_backend(e.name);
    if (b != &backend) {
      if (!b || !plugin_path(*b).ok() || !b->available().ok()) continue;
      b->set_threads(static_cast<int>(row.threads));  // the run's count, which some libraries report
    }
    b->describe(row);
  }
}

Result<BackendChoice> choose_backend() {
  std::string gpu_why;
  const std::vector<const Backend*> all = backends();
  for (const Backend* b : all) {
    if (b->device_kind() != "gpu") continue;
    if (auto st = b->available(); st.ok())
      return BackendChoice{b, b->name() + ": a usable GPU", {b}};
    else
      gpu_why += fmt::format("{}{}: {}", gpu_why.empty() ? "" : "; ", b->name(), st.error().message);
  }
  std::string cpu_why;
  for (const Backend* b : all) {
    if (b->device_kind() != "cpu") continue;
    if (auto st = b->available(); !st.ok()) {
      cpu_why += fmt::format("{}{}: {}", cpu_why.empty() ? "" : "; ", b->name(), st.error().message);
      continue;
    }
    // Every CPU library that can run: S is the minimum over all of them.
    BackendChoice choice{b, "", {}};
    for (const Backend* c : all)
      if (c->device_kind() == "cpu" && c->available().ok()) choice.all.push_back(c);
    std::string names;
    for (const Backend* c : choice.all) names += (names.empty() ? "" : ", ") + c->name();
    choice.why = gpu_why.empty() ? fmt::format("{}: this build has no GPU backend", names)
                                 : fmt::format("{}: {}", names, gpu_why);
    return choice;
  }
  std::string why = gpu_why;
  if (!cpu_why.empty()) why += (why.empty() ? "" : "; ") + cpu_why;
  return make_error("no backend can run on this machine{}", why.empty() ? "" : " (" + why + ")");
}

}  // namespace floorline::gen
