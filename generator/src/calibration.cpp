// Calibration cases and timing for the roofline peaks.
#include "floorline/generator/calibration.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "floorline/generator/plan.hpp"

namespace floorline::gen {

int64_t memory_copy_elements(bool cpu, int64_t element_bytes) {
  if (!cpu) return int64_t{1} << 28;
  int64_t largest = 0;  // bytes of the largest cache the kernel reports for CPU 0
  for (int k = 0; k < 8; ++k) {
    std::ifstream in(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", k));
    std::string size;
    if (!(in >> size) || size.empty()) continue;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), v);
    if (ec != std::errc()) continue;
    const char unit = end < size.data() + size.size() ? *end : ' ';
    v *= unit == 'K' ? int64_t{1} << 10 : unit == 'M' ? int64_t{1} << 20 : unit == 'G' ? int64_t{1} << 30 : 1;
    largest = std::max(largest, v);
  }
  int64_t elements = std::max(int64_t{1} << 25, 4 * largest / element_bytes);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) elements = std::min(elements, int64_t{pages} * page / 8 / 2 / element_bytes);
  return std::max<int64_t>(elements, 1 << 20);
}

Result<std::vector<CalibrationCase>> calibration_cases(const Backend& backend, DType dtype_type) {
  const std::string_view dtype = dtype_name(dtype_type);
  const int64_t element_bytes = element_size(dtype_type);
  const bool gpu = backend.device_kind() == "gpu";
  const int64_t n = gpu ? 8192 : 2048;
  const int64_t memory_elements = gpu ? (int64_t{1} << 28) : (int64_t{1} << 25);
  const int64_t cache_elements = gpu ? (int64_t{1} << 20) : (int64_t{1} << 15);
  std::vector<CalibrationCase> out;
  auto add = [&](const std::string& peak, kernels::Problem p, kernels::Work work,
                 const std::string& what) -> Status {
    kernels::CaseSpec base;
    base.problem = std::move(p);
    base.variant.backend = backend.name();
    base.variant.dtype = dtype_type;
    base.variant.math_mode = own_math_mode(dtype_type);
    PlanOptions opts;
    opts.max_impls = 1;
    opts.conversions = false;
    const auto cases = plan_cases(base, backend.candidates(base), opts);
    auto it = std::find_if(cases.begin(), cases.end(), [](const PlannedCase& c) { return !c.status; });
    if (it == cases.end())
      return make_error("{} calibration: {} offers no implementation of {} in {}{}", peak, backend.name(),
                        what, dtype, cases.empty() ? "" : ": " + cases.front().reason);
    CalibrationCase cc;
    cc.peak = peak;
    cc.spec = it->spec;
    cc.spec.name = fmt::format("calibration/{}/{}", peak, base.problem.key);
    cc.work = work;
    cc.method = fmt::format("{} {} {} ({})", backend.name(), what, dtype, it->spec.variant.algorithm);
    out.push_back(std::move(cc));
    return {};
  };
  kernels::Problem mm;
  mm.kind = LayerKind::kMatMul;
  mm.op = "MatMul";
  mm.key = fmt::format("MatMul|a={0}x{0}|b={0}x{0}|{1}", n, dtype);
  mm.inputs = {{"a", {n, n}}, {"b", {n, n}}};
  mm.outputs = {{"y", {n, n}}};
  FL_TRY(add("flops", mm, {2 * n * n * n, 3 * n * n * element_bytes, false},
             fmt::format("MatMul {0}x{0}x{0}", n)));
  // Two copies: one that stays in cache and one far larger than any cache. The bytes peak is the
  // faster of the two: layers whose working set stays in cache (as in a warm microbenchmark) move
  // data at cache bandwidth, and a roofline bound must not exceed what any layer can reach.
  // An identity Transpose of `elements` elements: a plain copy.
  auto copy = [&](int64_t elements) {
    kernels::Problem p;
    p.kind = LayerKind::kTranspose;
    p.op = "Transpose";
    p.key = fmt::format("Transpose|x={}|perm=0|{}", elements, dtype);
    p.inputs = {{"x", {elements}}};
    p.outputs = {{"y", {elements}}};
    p.ints["perm"] = {0};
    return p;
  };
  for (const int64_t elements : {cache_elements, memory_elements})
    FL_TRY(add("bytes", copy(elements), {0, 2 * elements * element_bytes, false},
               fmt::format("copy of {} elements", elements)));
  const int64_t streamed = memory_copy_elements(!gpu, element_bytes);
  FL_TRY(add("memory", copy(streamed), {0, 2 * streamed * element_bytes, false},
             fmt::format("copy of {} elements from memory", streamed)));
  return out;
}

Result<std::vector<Peak>> calibrate(const Backend& backend, DType dtype, const CalibrationOptions& options,
                                    bool memory_only) {
  FL_ASSIGN_OR_RETURN(auto cases, calibration_cases(backend, dtype));
  if (memory_only)
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [](const CalibrationCase& c) { return c.peak != "memory"; }),
                cases.end());
  backend.set_threads(options.threads);
  const auto factory = backend.factory();
  std::vector<Peak> out;
  for (const auto& c : cases) {
    auto built = factory(c.spec);
    if (!built) return built.error().with_context(fmt::format("{} calibration ({})", c.peak, c.method));
    auto& kernel = **built;
    double best = 0;
    try {
      const double per_call = kernels::warm_up(kernel, options.seconds_per_repetition);
      const auto calls = static_cast<int64_t>(
          std::max(1.0, std::ceil(options.seconds_per_repetition / std::max(per_call, 1e-9))));
      using clock = std::chrono::steady_clock;
      for (int r = 0; r < std::max(1, options.repetitions); ++r) {
        const auto t0 = clock::now();
        for (int64_t i = 0; i < calls; ++i) kernel.run();
        const double t =
            std::chrono::duration<double>(clock::now() - t0).count() / static_cast<double>(calls);
        if (best == 0 || t < best) best = t;
      }
    } catch (const std::exception& e) {
      return make_error("{} calibration ({}): {}", c.peak, c.method, e.what());
    }
    const double value = static_cast<double>(c.peak == "flops" ? c.work.flops : c.work.bytes) / best;
    const std::string method = fmt::format("{}: {:.1f} G/s", c.method, value / 1e9);
    const bool memory = c.peak == "memory";
    auto same = std::find_if(out.begin(), out.end(), [&](const Peak& p) {
      return p.peak == c.peak && p.math_mode != "memory" && !memory;
    });
    if (same != out.end()) {  // several cases of one peak: the fastest is the peak, every one is named
      same->method += "; " + method;
      same->value_per_s = std::max(same->value_per_s, value);
      continue;
    }
    Peak p;
    p.peak = memory ? "bytes" : c.peak;
    p.dtype = dtype_name(dtype);
    p.math_mode = c.peak == "flops" ? math_mode_name(c.spec.variant.math_mode) : memory ? "memory" : "";
    p.value_per_s = value;
    p.method = method;
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<Peak>> calibrate_missing(benchdb::Database& db, int64_t system_id, const Backend& backend,
                                            const std::vector<DType>& dtypes,
                                            const CalibrationOptions& options,
                                            std::vector<std::string>* failures) {
  std::vector<Peak> measured;
  for (const auto& dtype : dtypes) {
    FL_ASSIGN_OR_RETURN(const auto have,
                        db.query("SELECT count(*), coalesce(sum(math_mode = 'memory'), 0) FROM system_peaks "
                                 "WHERE system_id = ?1 AND dtype = ?2",
                                 {system_id, std::string(dtype_name(dtype))}));
    const int64_t all = std::get<int64_t>(have.rows.at(0).at(0)),
                  memory = std::get<int64_t>(have.rows.at(0).at(1));
    if (all - memory >= 2 && memory >= 1) continue;
    auto calibrated = calibrate(backend, dtype, options, /*memory_only=*/all - memory >= 2);
    if (!calibrated) {
      if (!failures) return calibrated.error();
      failures->push_back(fmt::format("{}: {}", dtype_name(dtype), calibrated.error().message));
      continue;
    }
    auto peaks = std::move(calibrated).value();
    FL_TRY(db.transaction([&]() -> Status {
      for (const auto& p : peaks) {
        benchdb::SystemPeakRow row;
        row.system_id = system_id;
        row.peak = p.peak;
        row.dtype = p.dtype;
        row.math_mode = p.math_mode;
        row.value_per_s = p.value_per_s;
        row.method = p.method;
        row.measured_at = benchdb::utc_now();
        FL_TRY(db.upsert_system_peak(row));
      }
      return Status{};
    }));
    for (auto& p : peaks) measured.push_back(std::move(p));
  }
  return measured;
}

}  // namespace floorline::gen
