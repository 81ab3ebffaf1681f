// floorline/analyzer/validity.hpp — the validity check: S must be a lower bound.
//
// The validity rule (docs/ARCHITECTURE.md): S (the sum of the fastest measured case of every layer) is below
// what any real execution of the model achieves on the same system. Each analyzed model × batch × dtype is
// checked against every imported framework latency of it that compares with the measurements
// (framework_latencies: ONNX Runtime with graph optimizations on and off, PyTorch, ...; on a CPU at
// the measurements' thread count, as for M) and against its replay (the best cases run as the
// graph, generator/replay.hpp). A latency strictly below S is a **bound violation**: a finding
// about the benchmarks (an implementation, a fusion or a formulation they miss, or a case time
// that overstates the layer), not a failure of the run.
//
// The layers responsible come from the per-layer profile of the same runtime identity (runtime,
// version, settings, threads), when one was imported (runtime_layers.hpp): every runtime node
// faster than Σ t(v) of the layers it computes (a fused group against the sum of its layers' best
// cases), largest gap first, with the runtime's op and the best cases (library/algorithm). A
// framework without a profile (PyTorch) names no layers. The replay runs the best cases themselves,
// so its violation says a case's time alone overstates its time in the graph: it names the layers
// whose time in the replayed graph (ModelBounds::replay_layers, the replay's profile passes) is
// below their share of S (their case's time alone), largest gap first, as ViolatingNodes whose
// node is the layer, runtime_us its replay time and best_us its case's time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "floorline/analyzer/analyzer.hpp"

namespace floorline::analyzer {

// A runtime node (one layer or a fused group) faster than the best cases of its layers.
struct ViolatingNode {
  std::string node;                     // the runtime's node name
  std::string op;                       // the runtime's op or kernel ("Conv", "FusedMatMul")
  std::string kinds;                    // the layers' kinds joined by '+' ("Conv+Relu")
  std::vector<std::string> layers;      // the model layers it computes (ONNX node names)
  double runtime_us = 0;                // the runtime's median time of the node (µs)
  double best_us = 0;                   // Σ t(v) over those layers (µs)
  std::vector<std::string> best_cases;  // the case names of that sum ("onednn/brg:avx2/...")
};

struct BoundViolation {
  std::string model;
  int64_t batch = 1;
  std::string dtype = "f32";
  bool replay = false;  // the replay; otherwise a framework latency
  // The framework latency's identity (empty for the replay).
  std::string runtime, runtime_version, settings;
  int64_t threads = 0;
  double latency_us = 0;  // the framework's median or the replay's (µs)
  double S_us = 0;
  bool S_complete = true;            // every layer of S has a time (ModelBounds::complete)
  bool profiled = false;             // a per-layer profile of this identity was imported (the replay:
                                     // it recorded per-layer times)
  std::vector<ViolatingNode> nodes;  // largest best − runtime first; empty without a profile
  double nodes_gap_us = 0;           // Σ (best − runtime) over nodes
  double ratio() const { return S_us > 0 ? latency_us / S_us : 0; }
  // "onnxruntime 1.30.0 graph_optimization=all, 1 thread" or "replay".
  std::string source() const;
};

// What the check compared for one model × batch × dtype.
struct BoundCheck {
  int64_t latencies = 0;                   // framework latencies compared with S
  bool replay = false;                     // a replay was compared with S
  std::vector<BoundViolation> violations;  // framework latencies in import order, then the replay
};

// Every comparable framework latency and the replay of `bounds` against its S; nothing when S is 0
// (no layer). Per-layer profiles are read from costs.layer_times.
BoundCheck check_bound(const ModelBounds& bounds, const CostTable& costs);

}  // namespace floorline::analyzer
