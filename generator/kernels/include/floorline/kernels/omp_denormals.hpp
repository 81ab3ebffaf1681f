// floorline/kernels/omp_denormals.hpp — denormals flushed to zero on an OpenMP pool's threads, and
// work run on the pool's threads. Header-only, for the sources of a kernel library
// compiled with OpenMP (the CPU libraries that run on libgomp's one pool: oneDNN's, Floorline's own,
// XNNPACK's on the OpenMP pool).
#pragma once

#include <algorithm>
#include <functional>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <omp.h>

namespace floorline::kernels {

// With `flush`, each of the first `threads` threads of the OpenMP pool (the calling thread, the
// team's master, included) flushes denormal results to zero and reads denormal operands as zero
// (x86 MXCSR: FTZ, bit 15, and DAZ, bit 6), keeping the mode it had; without, each restores the mode
// it kept. A call with `flush` is paired with one without, in reverse order of any others. No-op off
// x86. The mode is per thread and stays with the pool's threads between parallel regions.
inline void omp_flush_denormals(bool flush, int threads) {
#pragma omp parallel num_threads(std::max(1, threads))
  {
#if defined(__SSE__)
    static thread_local unsigned saved = 0;
    if (flush) {
      saved = _mm_getcsr();
      _mm_setcsr(saved | 0x8040u);
    } else {
      _mm_setcsr(saved);
    }
#else
    (void)flush;
#endif
  }
}

// Runs work(i, n) on each thread of a parallel region of `threads` threads (i: omp_get_thread_num,
// n: omp_get_num_threads; i = 0 the calling thread) and returns after its end: the pool's workers
// busy through `work` and spinning for the next region after it (GOMP_SPINCOUNT, about 0.1 ms), as
// between the steps of a pass. Idle longer than that, a worker sleeps, and on a VM its core may go
// to another tenant (generator/cache_state.hpp, time_in_cache_states). `work` must not start
// parallel regions of its own.
inline void omp_team(int threads, const std::function<void(int, int)>& work) {
  if (threads <= 1) {
    work(0, 1);
    return;
  }
#pragma omp parallel num_threads(threads)
  work(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace floorline::kernels
