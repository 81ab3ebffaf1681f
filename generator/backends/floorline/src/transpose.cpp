// Floorline's tiled transpose (floorline.hpp, TiledTranspose): XNNPACK 2022-02 has no transpose
// operator, so its NCHW ↔ NHWC conversions run this one, on XNNPACK's thread pool.
#include <algorithm>
#include <cstring>

#include "internal.hpp"

namespace floorline::kernels {

namespace {
// Tiles of 32 × 32, written element by element; except where a row of x or of y is a multiple of
// 4 KiB long: then a tile's 32 rows (or the 32 rows of y it writes) fall in one set of the L1 data
// cache, eight ways on the x86 cores measured, and the tile is 8 rows × 64 columns instead, taken
// through a buffer on the stack (runs of 64 floats read, runs of 8 written). Measured on one core of
// the Zen 4 EPYC (huge pages, lowest of 21 calls): 1x64x224x224 (rows of 200,704 B) to NHWC 1.9 ms
// against 4.3, back 3.7 against 10.0; on other shapes the 32 × 32 tiles were as fast or faster
// (1x24x112x112: 97 against 113 µs; 1x40x28x28: 10 against 12; 1x3x224x224 to NHWC: 50 against
// 196).
constexpr int64_t kTile = 32, kNarrowRows = 8, kWideCols = 64;
constexpr int64_t kSetPeriod = 4096;
int64_t tiles_along(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile;
}
struct TileShape {
  int64_t rows, cols;
  bool buffered;
};
TileShape tile_shape(int64_t rows, int64_t cols) {
  const auto aliased = [](int64_t floats) {
    return floats > 0 && floats * static_cast<int64_t>(sizeof(float)) % kSetPeriod == 0;
  };
  if (rows >= kNarrowRows && (aliased(rows) || aliased(cols))) return {kNarrowRows, kWideCols, true};
  return {kTile, kTile, false};
}
}  // namespace

int64_t TiledTranspose::tiles() const {
  const TileShape t = tile_shape(rows, cols);
  return batch * tiles_along(rows, t.rows) * tiles_along(cols, t.cols);
}

// One tile of one matrix: index = (matrix, column tile, row tile). Column tile before row tile, so
// that a run of consecutive tiles (a thread's share of the pool's work) writes whole rows of y: the
// tiles of one column tile write the same rows of y, each a piece of them, and two threads writing
// pieces of one row share its cache lines where `rows` is not a multiple of 16 (mnasnet's
// 1x40x28x28 to NHWC at 2 threads: 30 µs in row-tile order, slower than 17 µs on one thread).
void TiledTranspose::tile(int64_t index) const {
  const TileShape ts = tile_shape(rows, cols);
  const int64_t row_tiles = tiles_along(rows, ts.rows), per_matrix = row_tiles * tiles_along(cols, ts.cols);
  const int64_t b = index / per_matrix, ct = index % per_matrix / row_tiles, rt = index % row_tiles;
  const float* xm = x + b * rows * cols;
  float* ym = y + b * rows * cols;
  const int64_t r0 = rt * ts.rows, c0 = ct * ts.cols;
  const int64_t r1 = std::min(rows, r0 + ts.rows), c1 = std::min(cols, c0 + ts.cols);
  if (!ts.buffered || r1 - r0 < kNarrowRows) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) ym[c * rows + r] = xm[r * cols + c];
    return;
  }
  alignas(64) float t[kWideCols][kNarrowRows];
  for (int64_t r = 0; r < kNarrowRows; ++r) {
    const float* xr = xm + (r0 + r) * cols + c0;
    for (int64_t c = 0; c < c1 - c0; ++c) t[c][r] = xr[c];
  }
  for (int64_t c = 0; c < c1 - c0; ++c) std::memcpy(ym + (c0 + c) * rows + r0, t[c], sizeof(t[c]));
}

}  // namespace floorline::kernels
