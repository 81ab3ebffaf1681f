// floorline/analyzer/throughput.hpp — the throughput view: what the bounds at each measured batch
// size say about the MLPerf inference scenarios (MLPerf Inference Rules, "Scenarios"), per model.
//
//   single stream  one query of one sample at a time: its latency bound is S at batch 1 (or, when
//                  batch 1 was not analyzed, S at the smallest batch analyzed, which is then named)
//   offline        all samples at once, throughput only: the bound at batch B is B / S(B)
//                  inferences/s; the batch size that maximizes it is the offline operating point
//                  among the batch sizes analyzed (a larger one, not analyzed, may do better)
//
// The same figures for each reference runtime, from its imported end-to-end latencies (M at each
// batch, framework_latencies): a runtime is one (runtime, version, settings, threads), so ONNX
// Runtime with graph optimizations on and off are two series. A runtime whose throughput exceeds
// the bound's at some batch breaks the validity rule (docs/ARCHITECTURE.md, Glossary): S is then not a lower
// bound there, and the per-layer comparison must say which layer we miss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floorline/analyzer/report.hpp"

namespace floorline::analyzer {

struct ThroughputPoint {
  int64_t batch = 1;
  double latency_us = 0;        // one inference of the whole batch (S, or the runtime's median)
  double inferences_per_s = 0;  // batch / latency
  bool complete = true;         // the bound's layers all have a time (ModelBounds::complete)
};

struct ThroughputSeries {
  std::string name;  // "bound S", or "onnxruntime 1.30.0 graph_optimization=all, 1 thread"
  bool bound = false;
  std::string runtime, runtime_version, settings;  // empty for the bound
  int64_t threads = 0;                             // runtime's thread count (0: not recorded)
  std::vector<ThroughputPoint> points;             // by increasing batch; none empty
  ThroughputPoint single_stream;                   // the smallest batch's point (batch 1 when analyzed)
  ThroughputPoint offline;                         // the point of most inferences/s (ties: smaller batch)
  // Runtime series only: its offline inferences/s over the bound's (each at its own best batch);
  // > 1 means the runtime's best throughput beats the bound's. None for the bound.
  std::optional<double> offline_over_bound;
  std::vector<int64_t> faster_than_bound;  // runtime only: batches where its latency is below S
};

struct ModelThroughput {
  std::string model;
  std::string dtype;
  ThroughputSeries bound;                  // S at each batch analyzed
  std::vector<ThroughputSeries> runtimes;  // in the order first imported; empty without M
};

// One entry per (model, dtype) of `models` (ModelReport::bounds, any batch order), in the order
// each model first appears. A model analyzed at one batch size has one point per series.
std::vector<ModelThroughput> throughput_view(const std::vector<ModelReport>& models);

// The batch sizes present in any series of `view`, increasing: the table's and CSV's columns.
std::vector<int64_t> throughput_batches(const std::vector<ModelThroughput>& view);

}  // namespace floorline::analyzer
