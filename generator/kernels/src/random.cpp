// The kernel API's random fill (random.hpp): a counter-based generator, element by element.
#include "floorline/kernels/random.hpp"

#include <algorithm>

namespace floorline::kernels {
namespace {

// One round: Wellons' "lowbias32" integer hash (https://nullprogram.com/blog/2018/07/31/, the
// hash prospector's best two-multiply 32-bit permutation, bias 0.17).
inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): the seed to a 64-bit key, consecutive seeds to unrelated keys.
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Elements [begin, end) of the stream keyed (k0, k1): one run of at most 2^31 indices (the index's
// bits above 31 are in the key). Two rounds, the key entering each, so that the streams of two keys are not
// shifts of one another. The top 24 bits of the hash are the float's mantissa, as RandomStream::unit() takes
// them. Vectorized (-O3 on this file); target_clones gives an AVX2 copy and the baseline one, picked by the
// CPU alone: the ISA cap (dispatch.hpp) does not reach it, and need not, since both copies compute the same
// integers and the same floats (no FMA contraction: AVX2 alone) and the fill is never timed.
[[gnu::target_clones("avx2", "default")]] void fill_range(float* out, uint32_t begin, uint32_t end,
                                                          uint32_t k0, uint32_t k1, float lo, float span) {
  const float scale = span * (1.f / static_cast<float>(1 << 24));
  for (uint32_t i = begin; i < end; ++i) {
    const uint32_t h = lowbias32(lowbias32(i ^ k0) + k1);
    out[i - begin] = lo + scale * static_cast<float>(h >> 8);
  }
}

}  // namespace

void fill_uniform(float* out, int64_t n, uint64_t seed, float lo, float span) {
  const uint64_t key = splitmix64(seed);
  for (int64_t done = 0; done < n;) {
    // Runs of at most 2^31 elements, each keyed by its index's high bits as well.
    const auto hi = static_cast<uint64_t>(done) >> 31;
    const auto begin = static_cast<uint32_t>(static_cast<uint64_t>(done) & 0x7fffffffu);
    const int64_t count = std::min<int64_t>(n - done, int64_t{0x80000000} - begin);
    const uint64_t k = hi == 0 ? key : splitmix64(key ^ hi);
    fill_range(out + done, begin, begin + static_cast<uint32_t>(count), static_cast<uint32_t>(k),
               static_cast<uint32_t>(k >> 32), lo, span);
    done += count;
  }
}

}  // namespace floorline::kernels
