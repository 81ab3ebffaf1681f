// floorline/kernels/omp_denormals.hpp — denormals flushed to zero on an OpenMP pool's threads.
// Header-only, for the sources of a kernel library compiled with OpenMP (the CPU libraries that run
// on libgomp's one pool: oneDNN's, Floorline's own, XNNPACK's on the OpenMP pool).
#pragma once

#include <algorithm>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

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

}  // namespace floorline::kernels
