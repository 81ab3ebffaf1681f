// Floorline's tiled transpose (floorline.hpp, TiledTranspose): XNNPACK 2022-02 has no transpose
// operator, so its NCHW ↔ NHWC conversions run this one, on XNNPACK's thread pool.
#include <algorithm>

#include "internal.hpp"

namespace floorline::kernels {

namespace {
constexpr int64_t kTile = 32;
int64_t tiles_along(int64_t n) {
  return (n + kTile - 1) / kTile;
}
}  // namespace

int64_t TiledTranspose::tiles() const {
  return batch * tiles_along(rows) * tiles_along(cols);
}

// One tile of one matrix: index = (matrix, column tile, row tile). Column tile before row tile, so
// that a run of consecutive tiles (a thread's share of the pool's work) writes whole rows of y: the
// tiles of one column tile write the same rows of y, each a 32-float piece of them, and two threads
// writing pieces of one row share its cache lines where `rows` is not a multiple of 16 (mnasnet's
// 1x40x28x28 to NHWC at 2 threads: 30 µs in row-tile order, slower than 17 µs on one thread).
void TiledTranspose::tile(int64_t index) const {
  const int64_t row_tiles = tiles_along(rows), per_matrix = row_tiles * tiles_along(cols);
  const int64_t b = index / per_matrix, ct = index % per_matrix / row_tiles, rt = index % row_tiles;
  const float* xm = x + b * rows * cols;
  float* ym = y + b * rows * cols;
  const int64_t r1 = std::min(rows, (rt + 1) * kTile), c1 = std::min(cols, (ct + 1) * kTile);
  for (int64_t r = rt * kTile; r < r1; ++r)
    for (int64_t c = ct * kTile; c < c1; ++c) ym[c * rows + r] = xm[r * cols + c];
}

}  // namespace floorline::kernels
