// floorline/kernels/omp_denormals.hpp — denormals flushed to zero on an OpenMP pool's threads, and
// work done with the pool's workers held busy. Header-only, for the sources of a kernel library
// compiled with OpenMP (the CPU libraries that run on libgomp's one pool: oneDNN's, Floorline's own,
// XNNPACK's on the OpenMP pool).
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>

#if defined(__SSE2__)
#include <emmintrin.h>
#elif defined(__SSE__)
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

// Runs `work` on the calling thread inside a parallel region of `threads` threads whose other
// threads spin until it returns, then ends the region: the pool's workers stay busy on their cores
// through `work` and spin for the next region (GOMP_SPINCOUNT, about 0.1 ms) after it, as between
// the steps of a pass. Idle longer than that, a worker sleeps, and on a VM its core may go to
// another tenant: the next call pays the wake-up and the worker's core cold (generator/cache_state.hpp,
// time_in_cache_states). `work` must not start parallel regions of its own. One thread: `work` alone.
inline void omp_hold(int threads, const std::function<void()>& work) {
  if (threads <= 1) {
    work();
    return;
  }
  std::atomic<bool> done{false};
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() == 0) {
      work();
      done.store(true, std::memory_order_release);
    } else {
      while (!done.load(std::memory_order_acquire)) {
#if defined(__SSE2__)
        _mm_pause();
#endif
      }
    }
  }
}

}  // namespace floorline::kernels
