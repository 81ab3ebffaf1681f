// floorline/common/statistics.hpp — the summary statistics of repeated timings.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace floorline {

// Summary of n samples (any unit). stddev is the sample standard deviation (n − 1 in the
// denominator), 0 for fewer than two samples; every field is 0 for no samples.
struct Summary {
  size_t n = 0;
  double min = 0, max = 0, median = 0, mean = 0, stddev = 0;
};

inline Summary summarize(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = s.n % 2 ? v[s.n / 2] : 0.5 * (v[s.n / 2 - 1] + v[s.n / 2]);
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(s.n);
  if (s.n >= 2) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(s.n - 1));
  }
  return s;
}

}  // namespace floorline
