// floorline/generator/calibration.hpp — the measured peaks behind the roofline bound.
//
// The roofline (speed-of-light) bound R = Σ max(FLOPs / peak FLOP/s, bytes / peak bytes/s) needs
// the peaks a system actually reaches, not its data-sheet numbers (docs/ANALYZER.md, Roofline details). They
// are measured once per system, backend and data type with two calibration cases run through the backend's
// own kernels, using the library's first-choice implementation:
//   flops: a square MatMul n×n · n×n, 2·n³ FLOPs per call (n = 2048 on a CPU, 8192 on a GPU);
//   bytes: identity Transposes (plain copies), bytes read plus bytes written, of 2^15 elements (CPU;
//          2^20 on a GPU), which stay in cache, and of 2^25 (2^28) elements, far beyond any cache;
//          the faster is the peak: warm layers move data at cache bandwidth, and a roofline bound
//          must not exceed what a layer can reach. `method` names both rates.
//   memory: the same copy of memory_copy_elements() elements, at least 4 × the largest cache the
//          machine reports, so that every byte comes from memory: the streaming bandwidth a step
//          pays whose data exceed the caches (a decoder streaming its weights, analyzer/llm.hpp).
//          Stored as a "bytes" peak with math_mode "memory" (the roofline's bytes peak has math_mode
//          ""): R never uses it.
// Each peak = work per call / the fastest of `repetitions` repetitions' per-call time (the peak is
// what the hardware can reach, so the fastest repetition is its best estimate; a higher peak only
// lowers R, which keeps R a lower bound).
#pragma once

#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/generator/backend.hpp"

namespace floorline::gen {

struct CalibrationOptions {
  double seconds_per_repetition = 0.05;
  int repetitions = 5;
  int threads = 1;
};

struct Peak {
  std::string peak;        // "flops" or "bytes"
  std::string dtype;       // dtype_name(): "f32", "bf16"
  std::string math_mode;   // math_mode_name() for flops: "fp32", "bf16"; "" for bytes, "memory" for memory
  double value_per_s = 0;  // FLOP/s or bytes/s
  std::string method;      // "onednn MatMul 2048x2048x2048 f32 (gemm:jit)"
};

// The calibration cases of `backend` in `dtype` (problem, implementation and work per call).
struct CalibrationCase {
  std::string peak;  // "flops", "bytes" or "memory" (stored as a "bytes" peak of math_mode "memory")
  kernels::CaseSpec spec;
  kernels::Work work;
  std::string method;
};
Result<std::vector<CalibrationCase>> calibration_cases(const Backend& backend, DType dtype);

// Elements of the memory copy for `element_bytes`-byte elements: 4 × the largest CPU cache in
// /sys/devices/system/cpu/cpu0/cache (`cpu`; the GPU's copy is 2^28 elements), at least 2^25, at most
// what keeps its two buffers within an eighth of the physical memory.
int64_t memory_copy_elements(bool cpu, int64_t element_bytes);

// Times the cases (only the memory case with `memory_only`). Error when a case cannot be built or run.
Result<std::vector<Peak>> calibrate(const Backend& backend, DType dtype, const CalibrationOptions& options,
                                    bool memory_only = false);

// Calibrates each data type whose peaks the database lacks for `system_id` (the memory peak alone
// where a database from before it has the others), and stores the peaks.
// Returns the peaks measured now (empty when every one was already stored). A data type whose
// calibration fails (the CUDA backend has no int8 copy for the int8 bytes peak) is said in
// `failures` ("int8: ...") and the others are still calibrated; without `failures` the first
// failure is the error. A database error is always the error.
Result<std::vector<Peak>> calibrate_missing(benchdb::Database& db, int64_t system_id, const Backend& backend,
                                            const std::vector<DType>& dtypes,
                                            const CalibrationOptions& options,
                                            std::vector<std::string>* failures = nullptr);

}  // namespace floorline::gen
