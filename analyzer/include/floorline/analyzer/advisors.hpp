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

// Items about layers (algorithm, efficiency, layout conversions) group the layers of one config:
// they share its figures, so a finding says "12 layers: MatMul a=128x1x768 b=768x2304 f32" with
// "12 × 17.0 ms vs roofline 3.1 ms (18% of peak); a, b, c and 9 more" once, instead of one line per
// layer; a group of one is labelled with the layer's name ("conv1: Conv x=1x3x224x224 ...").
// Branches off the critical path of the same size and time are grouped alike ("12 branches of 4
// layer(s)", "12 × 4 layer(s), 318.6 µs off the critical path; from a, b, c and 9 more").
struct FindingItem {
  std::string label;     // what: a layer or group of layers of one config, a pattern, kind or branch
  double saving_us = 0;  // its part of the saving (a group's: Σ over its layers)
  std::string detail;    // the figures behind it, per layer ("N × ..." for a group of N)
  // The ONNX node names the item stands for, in layer order: a group's layers, or the layers a
  // group of alike branches fork from (parallelism); empty for patterns, kinds and runtimes.
  std::vector<std::string> layers;
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
