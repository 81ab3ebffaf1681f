// pthreadpool's interface implemented on OpenMP: XNNPACK's parallel loops run on libgomp's one pool,
// the pool oneDNN and Floorline's own kernels run on, instead of a second pool of its own.
//
// Why: a replay (or a runtime) that chains XNNPACK and oneDNN layers at T threads with two pools
// keeps 2T threads for T cores: each switch between the libraries wakes the other pool's sleeping
// workers (a futex wake costs 20-23 µs at best on the 2-core VM of docs/MEASUREMENT.md, with tails
// of milliseconds) or finds them still spinning on the cores it needs. One pool has neither.
//
// How: Debian's libXNNPACK.so links libpthreadpool.so.0 dynamically and imports the functions
// below (`nm -D --undefined-only libXNNPACK.so.0`; CMakeLists.txt checks at configure time that it
// imports no other). This library defines them with default visibility and precedes
// libpthreadpool.so.0 in every lookup scope XNNPACK is loaded in (the plugin's RTLD_LOCAL group
// lists it first; an executable that links it lists it before XNNPACK's own dependencies), so
// XNNPACK's calls bind here. pthreadpool_create and pthreadpool_destroy are defined too: a pool is
// a thread count, and libpthreadpool's own threads are never started.
//
// Semantics (pthreadpool.h): each parallelize call runs `function` once per tile of the grid and
// returns when all have run. Here the tiles, in row-major order of their indices, are split in
// contiguous shares over `threads` OpenMP threads (the caller is thread 0), and a thread done with
// its share takes tiles from the others' (run() below); a null pool or one thread runs them in
// order on the caller. PTHREADPOOL_FLAG_DISABLE_DENORMALS sets the MXCSR's
// flush-to-zero and denormals-are-zero bits for the call on every thread and restores them after;
// PTHREADPOOL_FLAG_YIELD_WORKERS is ignored: idle OpenMP workers spin for GOMP_SPINCOUNT and then
// sleep, the one policy of the one pool (generator/src/registry.cpp).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <omp.h>
#include <pthreadpool.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "floorline/kernels/omp_denormals.hpp"
#include "floorline/kernels/xnnpack.hpp"

struct pthreadpool {
  size_t threads;
};

namespace floorline::kernels {
namespace {

std::atomic<uint64_t> g_parallel_calls{0};

// Sets flush-to-zero and denormals-are-zero for its lifetime when the flags ask for it.
class DenormalsOff {
 public:
  explicit DenormalsOff(uint32_t flags) {
#if defined(__SSE__)
    if (flags & PTHREADPOOL_FLAG_DISABLE_DENORMALS) {
      saved_ = _mm_getcsr();
      _mm_setcsr(saved_ | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
      active_ = true;
    }
#else
    (void)flags;
#endif
  }
  ~DenormalsOff() {
#if defined(__SSE__)
    if (active_) _mm_setcsr(saved_);
#endif
  }
  DenormalsOff(const DenormalsOff&) = delete;
  DenormalsOff& operator=(const DenormalsOff&) = delete;

 private:
  unsigned saved_ = 0;
  bool active_ = false;
};

// A D-dimensional grid of tiles: range[d] items along dimension d in tiles of tile[d] items (1 for
// an untiled dimension). Tile t (row-major, the last dimension fastest) starts at start[d] and
// holds size[d] items along each dimension.
template <size_t D>
struct Grid {
  std::array<size_t, D> range{};
  std::array<size_t, D> tile{};
  std::array<size_t, D> tiles{};
  size_t total = 1;

  Grid(std::array<size_t, D> r, std::array<size_t, D> t) : range(r), tile(t) {
    for (size_t d = 0; d < D; ++d) {
      if (tile[d] == 0) tile[d] = 1;
      tiles[d] = (range[d] + tile[d] - 1) / tile[d];
      total *= tiles[d];
    }
  }
  void at(size_t t, std::array<size_t, D>& start, std::array<size_t, D>& size) const {
    for (size_t d = D; d-- > 0;) {
      const size_t i = t % tiles[d];
      t /= tiles[d];
      start[d] = i * tile[d];
      size[d] = range[d] - start[d] < tile[d] ? range[d] - start[d] : tile[d];
    }
  }
};

// One thread's share of the tiles, [next, end): claimed from the front, kClaimsPerShare-th of it at
// a time, by its owner and, once the owner's own share is done, by the others (pthreadpool's scheme:
// contiguous shares keep a thread's tiles next to each other in memory; stealing evens out tiles of unequal
// work).
struct alignas(64) Share {
  std::atomic<size_t> next{0};
  size_t end = 0;
};

// Tiles claimed at once: an eighth of a share, so that a claim (an atomic add, on a cache line the
// owner and a thief may both write) is rare next to a tile's work even where tiles are tiny
// (XNNPACK's 1x1 convolution at 1x16x112x112: 1,792 tiles of 7 x 48 outputs, about 80 ns each).
constexpr size_t kClaimsPerShare = 8;

// Runs body(start, size) for every tile of `grid`, on the pool's threads.
template <size_t D, class Body>
void run(pthreadpool_t pool, uint32_t flags, const Grid<D>& grid, Body body) {
  if (grid.total == 0) return;
  const size_t threads = pool ? pool->threads : 1;
  auto tile = [&](size_t t) {
    std::array<size_t, D> start;
    std::array<size_t, D> size;
    grid.at(t, start, size);
    body(start, size);
  };
  if (threads <= 1 || grid.total == 1) {
    DenormalsOff guard(flags);
    for (size_t t = 0; t < grid.total; ++t) tile(t);
    return;
  }
  g_parallel_calls.fetch_add(1, std::memory_order_relaxed);
  const size_t n = threads < grid.total ? threads : grid.total;
  const size_t chunk = std::max<size_t>(1, grid.total / n / kClaimsPerShare);
  // The calling thread's shares, kept between calls: no allocation on the timed path.
  thread_local std::unique_ptr<Share[]> kept;
  thread_local size_t kept_size = 0;
  if (kept_size < n) {
    kept = std::make_unique<Share[]>(n);
    kept_size = n;
  }
  Share* shares = kept.get();
  for (size_t i = 0; i < n; ++i) {
    shares[i].next.store(grid.total * i / n, std::memory_order_relaxed);
    shares[i].end = grid.total * (i + 1) / n;
  }
  // Every thread drains every share, its own first: the tiles all run even where OpenMP gives the
  // region fewer threads than asked for.
#pragma omp parallel num_threads(static_cast <int>(n))
  {
    DenormalsOff guard(flags);
    const size_t me = static_cast<size_t>(omp_get_thread_num()) % n;
    for (size_t k = 0; k < n; ++k) {
      Share& share = shares[(me + k) % n];
      for (size_t t; (t = share.next.fetch_add(chunk, std::memory_order_relaxed)) < share.end;)
        for (const size_t last = std::min(t + chunk, share.end); t < last; ++t) tile(t);
    }
  }
}

}  // namespace

int64_t xnnpack_openmp_pool_calls() {
  return static_cast<int64_t>(g_parallel_calls.load(std::memory_order_relaxed));
}

void flush_xnnpack_denormals(bool flush, int threads) {
  omp_flush_denormals(flush, threads);
}
void on_xnnpack_threads(int threads, const std::function<void(int, int)>& work) {
  omp_team(threads, work);
}

}  // namespace floorline::kernels

using floorline::kernels::Grid;
using floorline::kernels::run;

#define FLOORLINE_EXPORT __attribute__((visibility("default")))

extern "C" {

FLOORLINE_EXPORT pthreadpool_t pthreadpool_create(size_t threads_count) {
  if (threads_count == 0) threads_count = static_cast<size_t>(omp_get_num_procs());
  return new (std::nothrow) pthreadpool{threads_count};
}

FLOORLINE_EXPORT void pthreadpool_destroy(pthreadpool_t threadpool) {
  delete threadpool;
}

FLOORLINE_EXPORT size_t pthreadpool_get_threads_count(pthreadpool_t threadpool) {
  return threadpool ? threadpool->threads : 1;
}

FLOORLINE_EXPORT void pthreadpool_parallelize_1d(pthreadpool_t pool, pthreadpool_task_1d_t f, void* ctx,
                                                 size_t range, uint32_t flags) {
  run<1>(pool, flags, Grid<1>({range}, {1}), [&](const auto& s, const auto&) { f(ctx, s[0]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_1d_tile_1d(pthreadpool_t pool, pthreadpool_task_1d_tile_1d_t f,
                                                         void* ctx, size_t range, size_t tile,
                                                         uint32_t flags) {
  run<1>(pool, flags, Grid<1>({range}, {tile}), [&](const auto& s, const auto& n) { f(ctx, s[0], n[0]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_2d(pthreadpool_t pool, pthreadpool_task_2d_t f, void* ctx,
                                                 size_t ri, size_t rj, uint32_t flags) {
  run<2>(pool, flags, Grid<2>({ri, rj}, {1, 1}), [&](const auto& s, const auto&) { f(ctx, s[0], s[1]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_2d_tile_1d(pthreadpool_t pool, pthreadpool_task_2d_tile_1d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t tj,
                                                         uint32_t flags) {
  run<2>(pool, flags, Grid<2>({ri, rj}, {1, tj}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], n[1]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_2d_tile_2d(pthreadpool_t pool, pthreadpool_task_2d_tile_2d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t ti,
                                                         size_t tj, uint32_t flags) {
  run<2>(pool, flags, Grid<2>({ri, rj}, {ti, tj}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], n[0], n[1]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_3d(pthreadpool_t pool, pthreadpool_task_3d_t f, void* ctx,
                                                 size_t ri, size_t rj, size_t rk, uint32_t flags) {
  run<3>(pool, flags, Grid<3>({ri, rj, rk}, {1, 1, 1}),
         [&](const auto& s, const auto&) { f(ctx, s[0], s[1], s[2]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_3d_tile_2d(pthreadpool_t pool, pthreadpool_task_3d_tile_2d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t rk,
                                                         size_t tj, size_t tk, uint32_t flags) {
  run<3>(pool, flags, Grid<3>({ri, rj, rk}, {1, tj, tk}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], s[2], n[1], n[2]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_4d(pthreadpool_t pool, pthreadpool_task_4d_t f, void* ctx,
                                                 size_t ri, size_t rj, size_t rk, size_t rl, uint32_t flags) {
  run<4>(pool, flags, Grid<4>({ri, rj, rk, rl}, {1, 1, 1, 1}),
         [&](const auto& s, const auto&) { f(ctx, s[0], s[1], s[2], s[3]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_4d_tile_2d(pthreadpool_t pool, pthreadpool_task_4d_tile_2d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t rk,
                                                         size_t rl, size_t tk, size_t tl, uint32_t flags) {
  run<4>(pool, flags, Grid<4>({ri, rj, rk, rl}, {1, 1, tk, tl}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], s[2], s[3], n[2], n[3]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_5d(pthreadpool_t pool, pthreadpool_task_5d_t f, void* ctx,
                                                 size_t ri, size_t rj, size_t rk, size_t rl, size_t rm,
                                                 uint32_t flags) {
  run<5>(pool, flags, Grid<5>({ri, rj, rk, rl, rm}, {1, 1, 1, 1, 1}),
         [&](const auto& s, const auto&) { f(ctx, s[0], s[1], s[2], s[3], s[4]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_5d_tile_2d(pthreadpool_t pool, pthreadpool_task_5d_tile_2d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t rk,
                                                         size_t rl, size_t rm, size_t tl, size_t tm,
                                                         uint32_t flags) {
  run<5>(pool, flags, Grid<5>({ri, rj, rk, rl, rm}, {1, 1, 1, tl, tm}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], s[2], s[3], s[4], n[3], n[4]); });
}

FLOORLINE_EXPORT void pthreadpool_parallelize_6d_tile_2d(pthreadpool_t pool, pthreadpool_task_6d_tile_2d_t f,
                                                         void* ctx, size_t ri, size_t rj, size_t rk,
                                                         size_t rl, size_t rm, size_t rn, size_t tm,
                                                         size_t tn, uint32_t flags) {
  run<6>(pool, flags, Grid<6>({ri, rj, rk, rl, rm, rn}, {1, 1, 1, 1, tm, tn}),
         [&](const auto& s, const auto& n) { f(ctx, s[0], s[1], s[2], s[3], s[4], s[5], n[4], n[5]); });
}

}  // extern "C"
