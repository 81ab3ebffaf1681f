// The Google Benchmark body shared by the runner and generated sources (kernel.hpp).
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "floorline/common/benchmark_error.hpp"
#include "floorline/kernels/buffer.hpp"
#include "floorline/kernels/kernel.hpp"

namespace floorline::kernels {

Error error_of(const std::exception& e) {
  if (const auto* k = dynamic_cast<const KernelError*>(&e)) return Error{k->what(), k->code};
  return Error{e.what()};
}

double Kernel::timed_run() {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t Kernel::release_unused_buffers(const std::vector<Port>& former, const std::vector<Port>& now) {
  int64_t released = 0;
  for (const auto& was : former) {
    const auto at = reinterpret_cast<uintptr_t>(was.data);
    const auto end = at + static_cast<uintptr_t>(was.bytes);
    const bool still = std::any_of(now.begin(), now.end(), [&](const Port& p) {
      const auto from = reinterpret_cast<uintptr_t>(p.data);
      return from < end && at < from + static_cast<uintptr_t>(p.bytes);
    });
    if (!still) released += static_cast<int64_t>(release_pages(was.data, static_cast<size_t>(was.bytes)));
  }
  return released;
}

LibraryCase unsupported_case(const CaseSpec& base, MathMode math_mode, std::string reason) {
  LibraryCase c;
  c.variant = base.variant;
  c.variant.algorithm = "none";
  c.variant.math_mode = math_mode;
  c.status = Disposition::kUnsupported;
  c.reason = std::move(reason);
  return c;
}

LibraryCase conversion_case(const CaseSpec& base, std::string algorithm, MathMode math_mode,
                            LayoutConversion conversion, CaseFeeds feeds, std::string library) {
  LibraryCase c;
  c.variant = base.variant;
  c.variant.algorithm = std::move(algorithm);
  c.variant.math_mode = math_mode;
  c.variant.layout = conversion_layout(conversion);
  c.group = c.variant.algorithm;
  c.library = std::move(library);
  c.conversion = std::move(conversion);
  c.feeds = std::move(feeds);
  return c;
}

WarmUp warm_up_calls(Kernel& kernel, double seconds) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const auto start = clock::now();
  WarmUp w;
  w.lowest = kernel.timed_run();
  w.calls = 1;
  w.wall_per_call = since(start);
  const auto after_first = clock::now();
  while (since(start) < seconds) {
    w.lowest = std::min(w.lowest, kernel.timed_run());
    ++w.calls;
  }
  if (w.calls > 1) w.wall_per_call = since(after_first) / static_cast<double>(w.calls - 1);
  return w;
}

double warm_up(Kernel& kernel, double seconds) {
  return warm_up_calls(kernel, seconds).lowest;
}

std::map<std::string, double> case_counters(const Work& work, const Kernel& kernel, double calls,
                                            double seconds) {
  std::map<std::string, double> c;
  if (work.flops > 0) {
    c["flops"] = static_cast<double>(work.flops);
    c["gflops"] = seconds > 0 ? static_cast<double>(work.flops) * calls / seconds / 1e9 : 0;
  }
  if (work.bytes > 0) {
    c["bytes"] = static_cast<double>(work.bytes);
    c["gbytes_per_s"] = seconds > 0 ? static_cast<double>(work.bytes) * calls / seconds / 1e9 : 0;
  }
  c["workspace_bytes"] = static_cast<double>(kernel.workspace_bytes());
  c["is_default"] = work.is_default ? 1 : 0;
  for (const auto& [name, value] : kernel.device_counters()) c[name] = value;
  return c;
}

benchmark::internal::Benchmark* register_case(const CaseSpec& spec, const Work& work, KernelFactory factory,
                                              std::shared_ptr<Kernel> prebuilt) {
  struct State {
    std::shared_ptr<Kernel> kernel;
    std::string error;
    bool warmed = false;
  };
  auto st = std::make_shared<State>();
  st->kernel = std::move(prebuilt);
  if (st->kernel) st->warmed = true;  // the caller built it and warmed it up
  return benchmark::RegisterBenchmark(
             spec.name.c_str(),
             [spec, work, st, factory](benchmark::State& state) {
               if (!st->kernel && st->error.empty()) {
                 auto k = factory(spec);
                 if (k.ok())
                   st->kernel = std::shared_ptr<Kernel>(std::move(k).value());
                 else
                   st->error = benchmark_error_text(k.error());
               }
               if (!st->kernel) {
                 state.SkipWithError(st->error.c_str());
                 for (auto _ : state) {
                 }
                 return;
               }
               double total = 0;
               try {
                 if (!st->warmed) {
                   warm_up(*st->kernel, 0.002);
                   st->warmed = true;
                 }
                 st->kernel->sample_device(false);
                 for (auto _ : state) {
                   const double s = st->kernel->timed_run();
                   state.SetIterationTime(s);
                   total += s;
                 }
                 st->kernel->sample_device(true);
               } catch (const std::exception& e) {
                 // A library error in one case becomes that case's row (failed unless coded); the run goes
                 // on.
                 state.SkipWithError(benchmark_error_text(error_of(e)).c_str());
                 return;
               }
               for (const auto& [name, value] :
                    case_counters(work, *st->kernel, static_cast<double>(state.iterations()), total))
                 state.counters[name] = value;
             })
      ->UseManualTime();
}

}  // namespace floorline::kernels
