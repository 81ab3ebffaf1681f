// floorline/common/isa.hpp — the process-wide ISA cap: the highest x86 instruction set level the CPU
// libraries may use, so that one machine can be measured as a distinct, honestly labelled system
// (an AVX-512 host measured as an AVX2 one).
//
// The cap is the environment variable FLOORLINE_MAX_CPU_ISA (unset or empty: no cap, each library
// uses whatever the CPU offers); `floorline bench|run|system --isa NAME` sets it before any backend
// loads. The levels are oneDNN's names (its dnnl_cpu_isa_t and ONEDNN_MAX_CPU_ISA, lower-cased), in
// increasing order. Where each library's cap comes from (generator/src/registry.cpp sets them
// before a plugin loads; the cap overrides what the user set):
//   oneDNN     ONEDNN_MAX_CPU_ISA (and DNNL_MAX_CPU_ISA, its name before 3.0) = the name
//              upper-cased, read by oneDNN at its first dispatch.
//   OpenBLAS   OPENBLAS_CORETYPE of its DYNAMIC_ARCH build, read when it loads: Nehalem (sse41),
//              Sandybridge (avx), Haswell (avx2, avx2_vnni), SkylakeX (the AVX-512 levels).
//   Floorline  its vectorised loops (softmax, the recurrent gates), built for AVX-512F, AVX2 and the
//              baseline, pick the highest that the CPU has and the cap allows (kernel_target below);
//              its other kernels are built for the baseline (SSE2) only, which every cap allows.
//   XNNPACK    picks its kernels from the CPU's features (cpuinfo) and cannot be capped: under a cap
//              its backend is unavailable and left out of the system, and `floorline system` says why.
// The system row records the cap (benchdb SystemRow::isa), so a capped system has its own
// fingerprint. ONNX Runtime (the reference stage) cannot be capped either: it is skipped there.
#pragma once

#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "floorline/common/result.hpp"

namespace floorline {

enum class IsaLevel {
  kSse41,
  kAvx,
  kAvx2,
  kAvx2Vnni,
  kAvx512Core,
  kAvx512CoreVnni,
  kAvx512CoreBf16,
  kAvx512CoreFp16,
  kAvx512CoreAmx,
};

// The names, in the order of IsaLevel (increasing).
inline constexpr std::array<std::string_view, 9> kIsaNames = {"sse41",
                                                              "avx",
                                                              "avx2",
                                                              "avx2_vnni",
                                                              "avx512_core",
                                                              "avx512_core_vnni",
                                                              "avx512_core_bf16",
                                                              "avx512_core_fp16",
                                                              "avx512_core_amx"};

inline constexpr const char* kIsaCapVariable = "FLOORLINE_MAX_CPU_ISA";

inline std::string_view isa_name(IsaLevel l) {
  return kIsaNames[static_cast<size_t>(l)];
}

// All names, comma-separated (for error messages and help texts).
inline std::string isa_names() {
  std::string s;
  for (std::string_view n : kIsaNames) (s += s.empty() ? "" : ", ") += n;
  return s;
}

// The level of a name (as listed, in any case: oneDNN's ONEDNN_MAX_CPU_ISA spells them upper
// case); an error listing the valid names otherwise.
inline Result<IsaLevel> parse_isa(std::string_view name) {
  auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      const char c = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
      if (c != b[i]) return false;
    }
    return true;
  };
  for (size_t k = 0; k < kIsaNames.size(); ++k)
    if (same(name, kIsaNames[k])) return static_cast<IsaLevel>(k);
  return make_error("unknown ISA '{}' (valid: {})", name, isa_names());
}

// The cap of this process (FLOORLINE_MAX_CPU_ISA), or none where it is unset or empty. An invalid
// value is an error (the CLI validates --isa; a hand-set variable may be wrong).
inline Result<std::optional<IsaLevel>> read_isa_cap() {
  const char* v = std::getenv(kIsaCapVariable);
  if (!v || !*v) return std::optional<IsaLevel>();
  auto level = parse_isa(v);
  if (!level) return level.error().with_context(kIsaCapVariable);
  return std::optional<IsaLevel>(*level);
}

// The cap, or none (unset, empty, or invalid: an invalid value caps nothing here, and the CLI
// reports it before any backend loads).
inline std::optional<IsaLevel> isa_cap() {
  auto cap = read_isa_cap();
  return cap ? *cap : std::nullopt;
}

// Whether code built for `level` may run under the cap.
inline bool isa_allows(IsaLevel level) {
  const auto cap = isa_cap();
  return !cap || level <= *cap;
}

// The highest level this CPU offers (CPUID through GCC's __builtin_cpu_supports; the OS's support
// of the wider registers included): a cap above it caps nothing and is refused by the CLI.
inline IsaLevel cpu_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool core = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (core) {
    if (!__builtin_cpu_supports("avx512vnni")) return IsaLevel::kAvx512Core;
    if (!__builtin_cpu_supports("avx512bf16")) return IsaLevel::kAvx512CoreVnni;
    if (!__builtin_cpu_supports("avx512fp16")) return IsaLevel::kAvx512CoreBf16;
    if (!__builtin_cpu_supports("amx-tile")) return IsaLevel::kAvx512CoreFp16;
    return IsaLevel::kAvx512CoreAmx;
  }
  if (__builtin_cpu_supports("avx2"))
    return __builtin_cpu_supports("avxvnni") ? IsaLevel::kAvx2Vnni : IsaLevel::kAvx2;
  if (__builtin_cpu_supports("avx")) return IsaLevel::kAvx;
#endif
  return IsaLevel::kSse41;
}

// A cap named `name` (--isa, FLOORLINE_MAX_CPU_ISA), checked: one of oneDNN's ISA names in any
// letter case, at most this CPU's highest level (a cap above it would cap nothing). Errors: "unknown
// ISA 'avx3' (valid: ...)", "'avx512_core' is above this CPU's: this CPU's highest level is avx2".
inline Result<IsaLevel> check_isa_cap(std::string_view name) {
  auto level = parse_isa(name);
  if (!level) return level.error();
  if (*level > cpu_isa())
    return make_error("'{}' is above this CPU's: this CPU's highest level is {}", name, isa_name(cpu_isa()));
  return *level;
}

// The builds of Floorline's own vectorised kernels: AVX-512F, AVX2, the baseline (SSE2).
enum class KernelTarget { kBaseline, kAvx2, kAvx512 };

// The build a kernel of Floorline runs in this process: the highest the CPU supports and the cap
// allows (AVX-512F under avx512_core or no cap, AVX2 under avx2 and above). Computed at each call;
// the kernels pick once (floorline/kernels/dispatch.hpp).
inline KernelTarget kernel_target() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && isa_allows(IsaLevel::kAvx512Core)) return KernelTarget::kAvx512;
  if (__builtin_cpu_supports("avx2") && isa_allows(IsaLevel::kAvx2)) return KernelTarget::kAvx2;
#endif
  return KernelTarget::kBaseline;
}

}  // namespace floorline
