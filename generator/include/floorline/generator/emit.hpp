// floorline/generator/emit.hpp — standalone benchmark folders (`floorline generate`).
//
// The folder holds one C++ source per backend with one Google Benchmark registration per planned
// case (the layer's Problem spelled out as initializers, its FLOPs and bytes as counters), a
// main() that records the system in the benchmark context, and a CMakeLists.txt that builds it
// against Floorline's installed kernel library (find_package(Floorline)). The generated code calls
// the same kernel functions as the built-in runner. Its JSON output (--benchmark_out) imports with
// `floorline db import --benchmark-json`.
#pragma once

#include <filesystem>

#include "floorline/generator/plan.hpp"

namespace floorline::gen {

struct EmitSummary {
  int64_t cases = 0;  // registrations written (cases planned as skipped/unsupported included)
  int64_t files = 0;
};

Result<EmitSummary> write_standalone(const Plan& plan, const std::vector<const Backend*>& backends,
                                     const std::filesystem::path& dir);

}  // namespace floorline::gen
