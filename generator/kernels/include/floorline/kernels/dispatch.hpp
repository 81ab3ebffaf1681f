// floorline/kernels/dispatch.hpp — Floorline's own vectorised loops built for AVX-512F, AVX2 and the
// baseline, one chosen per process under the ISA cap (floorline/common/isa.hpp).
//
// GCC's function multiversioning (target_clones) picks its clone in an ifunc resolver from the CPU
// alone, before main, and cannot be capped. Here the body is an always_inline function, compiled
// again inside each of three wrappers of different target (the vectoriser then uses that target's
// registers), and the first call picks the wrapper from kernel_target(): the highest build the CPU
// supports and FLOORLINE_MAX_CPU_ISA allows. A call costs one indirect call, as an ifunc's does.
//
//   [[gnu::always_inline]] inline float row_max_body(const float* x, int64_t n) { ... }
//   float row_max(const float* x, int64_t n) { return ByTarget<row_max_body>::call(x, n); }
#pragma once

#include <atomic>

#include "floorline/common/isa.hpp"

namespace floorline::kernels {

template <auto Body>
struct ByTarget;

template <class R, class... A, R (*Body)(A...)>
struct ByTarget<Body> {
  using Fn = R (*)(A...);
  [[gnu::target("avx512f")]] static R avx512(A... a) { return Body(a...); }
  [[gnu::target("avx2")]] static R avx2(A... a) { return Body(a...); }
  static R baseline(A... a) { return Body(a...); }

  static Fn pick(KernelTarget t) {
    switch (t) {
      case KernelTarget::kAvx512:
        return &avx512;
      case KernelTarget::kAvx2:
        return &avx2;
      case KernelTarget::kBaseline:
        break;
    }
    return &baseline;
  }

  // The build this body runs: picked at the first use (after the CLI has set the cap; a library
  // loaded with the executable runs its static initialisers before main), then fixed.
  static KernelTarget chosen() {
    static const KernelTarget t = kernel_target();
    return t;
  }
  // The first call goes to `resolve`, which puts the chosen build in `fn` for the calls after it
  // (a lazily bound PLT slot: no guard on each call, one relaxed load and an indirect call).
  static R resolve(A... a) {
    const Fn f = pick(chosen());
    fn.store(f, std::memory_order_relaxed);
    return f(a...);
  }
  static inline std::atomic<Fn> fn{&resolve};
  static R call(A... a) { return fn.load(std::memory_order_relaxed)(a...); }
};

}  // namespace floorline::kernels
