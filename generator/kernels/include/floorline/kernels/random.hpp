// floorline/kernels/random.hpp — the random inputs of every CPU kernel: one fill, one stream.
//
// Inputs are random, never zeros or ones (kernel.hpp, timing discipline), and the same in every
// process for a seed, so that a case's inputs (and its verification) repeat. Tensors are filled by
// fill_uniform (a counter-based generator, random.cpp); RandomStream, xorshift64* (Vigna, "An
// experimental exploration of Marsaglia's xorshift generators, scrambled", 2016), draws the values
// a kernel picks one by one (indices, boxes). 24 random bits per float are all an f32 mantissa holds.
#pragma once

#include <cstdint>

namespace floorline::kernels {

// A stream of random numbers from `seed` (different seeds give different streams, seed 0 included).
class RandomStream {
 public:
  explicit RandomStream(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  // Uniform in [0, 1): the top 24 bits.
  float unit() { return static_cast<float>(next() >> 40) * (1.f / static_cast<float>(1 << 24)); }
  // Uniform in [lo, lo + span).
  float uniform(float lo, float span) { return lo + span * unit(); }
  // Uniform in [0, n) for n > 0 (0 for n <= 0): random valid indices.
  int64_t below(int64_t n) { return n > 0 ? static_cast<int64_t>(next() % static_cast<uint64_t>(n)) : 0; }

 private:
  uint64_t s_;
};

// out[0..n) uniform in [lo, lo + span), from `seed`: [-1, 1) by default. Element i is a function of
// (seed, i) alone, a counter-based generator (random.cpp: two rounds of a 32-bit integer hash of
// i, keyed by the seed), so the fill is vectorized and has no chain from one element to the next: a
// first look's bench spent 13% of its time in the former serial xorshift fill. The same values on
// every ISA (random.cpp picks an AVX2 or a generic copy of the same loop at load time).
void fill_uniform(float* out, int64_t n, uint64_t seed, float lo = -1.f, float span = 2.f);

}  // namespace floorline::kernels
