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

// One tile of one matrix: index = (matrix, row tile, column tile).
void TiledTranspose::tile(int64_t index) const {
  const int64_t col_tiles = tiles_along(cols), per_matrix = tiles_along(rows) * col_tiles;
  const int64_t b = index / per_matrix, rt = index % per_matrix / col_tiles, ct = index % col_tiles;
  const float* xm = x + b * rows * cols;
  float* ym = y + b * rows * cols;
  const int64_t r1 = std::min(rows, (rt + 1) * kTile), c1 = std::min(cols, (ct + 1) * kTile);
  for (int64_t r = rt * kTile; r < r1; ++r)
    for (int64_t c = ct * kTile; c < c1; ++c) ym[c * rows + r] = xm[r * cols + c];
}

}  // namespace floorline::kernels
