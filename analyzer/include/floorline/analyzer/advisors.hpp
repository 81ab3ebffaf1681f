// floorline/analyzer/advisors.hpp — what would make a model faster, with numbers.
//
// Each advisor reads one model's bounds (analyzer.hpp) and, when its pattern is present, returns a
// finding: an estimated saving in µs (and % of S) and the items that make it up, largest first.
// An advisor whose pattern is absent returns nothing (no finding with a zero saving).
//   algorithm    H − S: layers whose library default is slower than the best measured case
//   fusion       S − F: the fusable chains with a measured fused case (or a folded BatchNormalization)
//   precision    S − S_m per reduced math mode, by layer kind
//   parallelism  S − P: the branches off the critical path that could run beside it
//   efficiency   S − R: the layers furthest from their roofline time (library headroom), and the
//                layout conversions the best implementations need (not in S)
//   framework    M − S, with M / S, M / F and M / P (Benanza's latency gap), when M was imported
#pragma once

#include <string>
#include <vector>

#include "floorline/analyzer/analyzer.hpp"

namespace floorline::analyzer {

struct FindingItem {
  std::string label;     // what: a layer, config, pattern, kind or branch
  double saving_us = 0;  // its part of the saving
  std::string detail;    // the figures behind it ("default 120.0 µs (gemm:jit) vs best 80.0 µs (brg)")
};

struct Finding {
  std::string advisor;             // algorithm | fusion | precision | parallelism | efficiency | framework
  std::string summary;             // one line
  double saving_us = 0;            // estimated saving, µs per inference of the batch
  double saving_pct = 0;           // of S (of M for the framework gap)
  std::vector<FindingItem> items;  // largest first, at most `top`
};

std::vector<Finding> advise(const ModelBounds& bounds, size_t top = 5);

}  // namespace floorline::analyzer
