// XNNPACK's thread pool: pthreadpool's semantics, as the XNNPACK kernel library provides them
// (its OpenMP implementation, generator/backends/xnnpack/src/openmp_pool.cpp, where the build
// chose it; libpthreadpool's own otherwise), and XNNPACK's calls reaching it.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>
#include <pthreadpool.h>
#include <xnnpack.h>

#include "floorline/kernels/xnnpack.hpp"

namespace floorline::kernels {
namespace {

// Counts the visits of every item of a grid of up to 6 dimensions and checks each tile's size.
struct Visits {
  std::vector<size_t> range;
  std::vector<std::atomic<int>> count;
  std::atomic<int> bad_tiles{0};
  explicit Visits(std::vector<size_t> r) : range(std::move(r)), count(total(range)) {}
  static size_t total(const std::vector<size_t>& r) {
    size_t n = 1;
    for (size_t v : r) n *= v;
    return n;
  }
  // A tile starting at `start` with `size` items along each dimension (1 for untiled ones).
  void tile(const std::vector<size_t>& start, const std::vector<size_t>& size,
            const std::vector<size_t>& tile_size) {
    for (size_t d = 0; d < range.size(); ++d) {
      const size_t expect = std::min(tile_size[d], range[d] - start[d]);
      if (start[d] % tile_size[d] != 0 || size[d] != expect) bad_tiles.fetch_add(1);
    }
    std::vector<size_t> at(start);
    for (;;) {
      size_t linear = 0;
      for (size_t d = 0; d < range.size(); ++d) linear = linear * range[d] + at[d];
      count[linear].fetch_add(1);
      size_t d = range.size();
      while (d-- > 0) {
        if (++at[d] < start[d] + size[d]) break;
        at[d] = start[d];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
  }
  int items_not_once() const {
    int n = 0;
    for (const auto& c : count) n += c.load() == 1 ? 0 : 1;
    return n;
  }
};

class PoolTest : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override { pool = pthreadpool_create(GetParam()); }
  void TearDown() override { pthreadpool_destroy(pool); }
  pthreadpool_t pool = nullptr;
};

// Ranges that are not multiples of their tiles, so that the last tile of a dimension is partial.
TEST_P(PoolTest, EveryItemRunsOnceInTilesOfTheAskedSize) {
  EXPECT_EQ(pthreadpool_get_threads_count(pool), GetParam());
  {
    Visits v({1000});
    pthreadpool_parallelize_1d(
        pool, [](void* c, size_t i) { static_cast<Visits*>(c)->tile({i}, {1}, {1}); }, &v, 1000, 0);
    EXPECT_EQ(v.items_not_once(), 0);
  }
  {
    Visits v({1001});
    pthreadpool_parallelize_1d_tile_1d(
        pool, [](void* c, size_t i, size_t n) { static_cast<Visits*>(c)->tile({i}, {n}, {64}); }, &v, 1001,
        64, 0);
    EXPECT_EQ(v.items_not_once(), 0);
    EXPECT_EQ(v.bad_tiles.load(), 0);
  }
  {
    Visits v({37, 45});
    pthreadpool_parallelize_2d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t ni, size_t nj) {
          static_cast<Visits*>(c)->tile({i, j}, {ni, nj}, {8, 7});
        },
        &v, 37, 45, 8, 7, PTHREADPOOL_FLAG_DISABLE_DENORMALS);
    EXPECT_EQ(v.items_not_once(), 0);
    EXPECT_EQ(v.bad_tiles.load(), 0);
  }
  {
    Visits v({3, 17, 29});
    pthreadpool_parallelize_3d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t nj, size_t nk) {
          static_cast<Visits*>(c)->tile({i, j, k}, {1, nj, nk}, {1, 4, 6});
        },
        &v, 3, 17, 29, 4, 6, 0);
    EXPECT_EQ(v.items_not_once(), 0);
    EXPECT_EQ(v.bad_tiles.load(), 0);
  }
  {
    Visits v({2, 3, 5, 7, 11});
    pthreadpool_parallelize_5d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t m, size_t nl, size_t nm) {
          static_cast<Visits*>(c)->tile({i, j, k, l, m}, {1, 1, 1, nl, nm}, {1, 1, 1, 2, 4});
        },
        &v, 2, 3, 5, 7, 11, 2, 4, 0);
    EXPECT_EQ(v.items_not_once(), 0);
    EXPECT_EQ(v.bad_tiles.load(), 0);
  }
  {
    Visits v({2, 2, 3, 3, 5, 9});
    pthreadpool_parallelize_6d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t m, size_t n, size_t nm, size_t nn) {
          static_cast<Visits*>(c)->tile({i, j, k, l, m, n}, {1, 1, 1, 1, nm, nn}, {1, 1, 1, 1, 2, 4});
        },
        &v, 2, 2, 3, 3, 5, 9, 2, 4, 0);
    EXPECT_EQ(v.items_not_once(), 0);
    EXPECT_EQ(v.bad_tiles.load(), 0);
  }
  {
    Visits v({4, 5, 6, 7});
    pthreadpool_parallelize_4d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l) {
          static_cast<Visits*>(c)->tile({i, j, k, l}, {1, 1, 1, 1}, {1, 1, 1, 1});
        },
        &v, 4, 5, 6, 7, 0);
    EXPECT_EQ(v.items_not_once(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, PoolTest, ::testing::Values(size_t{1}, size_t{2}, size_t{3}));

// XNNPACK's own parallel loops reach the OpenMP pool: a sigmoid over 64 × 12,544 values on a pool of
// 2 threads counts parallel calls there, and computes the sigmoid.
TEST(XnnpackPool, XnnpackCallsReachTheOpenMpPool) {
  if (std::string(xnnpack_thread_pool()) != "openmp")
    GTEST_SKIP() << "this build's XNNPACK keeps pthreadpool's own threads (" << xnnpack_version() << ")";
  ASSERT_TRUE(xnnpack_initialize().ok());
  const size_t batch = 12544, channels = 64;
  std::vector<float> x(batch * channels + 16), y(batch * channels + 16);
  for (size_t i = 0; i < batch * channels; ++i) x[i] = static_cast<float>(i % 17) * 0.25f - 2.f;
  xnn_operator_t op = nullptr;
  ASSERT_EQ(xnn_create_sigmoid_nc_f32(channels, channels, channels, 0, &op), xnn_status_success);
  pthreadpool_t pool = pthreadpool_create(2);
  const int64_t before = xnnpack_openmp_pool_calls();
  ASSERT_EQ(xnn_setup_sigmoid_nc_f32(op, batch, x.data(), y.data(), pool), xnn_status_success);
  ASSERT_EQ(xnn_run_operator(op, pool), xnn_status_success);
  EXPECT_GT(xnnpack_openmp_pool_calls(), before) << "XNNPACK's call went to another pthreadpool";
  int wrong = 0;
  for (size_t i = 0; i < batch * channels; ++i)
    wrong += std::fabs(y[i] - 1.f / (1.f + std::exp(-x[i]))) < 1e-5f ? 0 : 1;
  EXPECT_EQ(wrong, 0);
  xnn_delete_operator(op);
  pthreadpool_destroy(pool);
}

}  // namespace
}  // namespace floorline::kernels
