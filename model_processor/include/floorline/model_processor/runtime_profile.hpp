// floorline/model_processor/runtime_profile.hpp — a runtime's per-node profile, mapped back to the
// nodes of the ONNX model it ran (the per-layer M, XSP-style across-stack profiling).
//
// ONNX Runtime's profiler (SessionOptions.enableProfiling) writes a Chrome-trace JSON array: one
// event per executed node and run ({"cat": "Node", "name": "<node>_kernel_time", "ts", "dur" (µs),
// "args": {"op_name", "provider", ...}}) inside "model_run" events (cat "Session"), one per run.
// With graph optimizations on, the nodes that run are not the model's: fusions replace chains
// (a FusedMatMul named "/l/MatMul_1/MatmulTransposeFusion/", a BiasGelu named "BiasGelu_token_11")
// and the NCHWc transformer renames convolutions after the value they write
// ("/layer1/layer1.0/relu/Relu_output_0_nchwc": Conv + Relu) and adds reorders. Names alone cannot
// say which model nodes a fused node computes; the optimized graph (SessionOptions.
// optimizedModelFilePath, reference/onnxruntime/measure.js saves it) can, by the values it reads
// and writes:
//   - an anchor of a runtime node is a value of the model that it writes (an output of the
//     model's graph kept under its name, or, for an NCHWc node "<value>_nchwc", that value; for
//     a BatchNormalization run as an NCHWc convolution, "<value>_bn_nchwc"), or, for a node that
//     writes none but is named as a model node (densenet's Concat in the NCHWc domain), that
//     node's outputs;
//   - a fused node that writes no model value (inside the NCHWc domain between two convolutions)
//     but is named after the model node it replaces, "<node>/<Fusion>/" (efficientnet's SiLUs:
//     "<Mul>/QuickGeluFusion/"), takes that node's outputs as its anchors: until 2026-12-07 it
//     computed nothing, and the next convolution or a reorder took its Sigmoid and Mul;
//   - a fused activation (Gelu, FastGelu, QuickGelu, BiasGelu) with neither ("Gelu_token_20":
//     maxvit's Gelus, between a reorder out of the
//     NCHWc domain and one back) computes the element-wise chain of the model fed by the value it
//     reads (traced back through reorders to the runtime node that writes it, that node's anchor):
//     the Div, Mul, Add, Sub, Erf, Sigmoid, Tanh, Pow and Sqrt nodes whose inputs are that value,
//     constants and the chain's own outputs (at most 16), claimed before any anchor's walk;
//   - boundaries are every anchor, every model value the optimized graph reads, the graph inputs
//     and the initializers;
//   - a runtime node computes the model node that writes its anchor and, walking back through
//     inputs that are not boundaries, every node that only feeds it (Conv → Relu fused: the Relu
//     writes the anchor, the Conv is walked to). An NCHWc Conv with a fourth (sum) input also
//     computes the Add that consumes its anchor, and, with an activation attribute, the
//     activation after that Add (the residual fused into the conv); one without a sum input but
//     with an activation attribute, named after its own output, computes the activation that
//     consumes it alone (mobilenet_v3's Conv + HardSwish);
//   - runtime nodes are taken in execution order, and a model node is computed by the first that
//     reaches it. Runtime nodes that compute no model node (ReorderInput, ReorderOutput) are
//     runtime-only work; model nodes no runtime node computes were folded or removed at load time.
// Without an optimized graph (optimizations disabled), runtime node names are the model's node
// names and map one to one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"

namespace floorline::mp {

// One node of the runtime's execution, with its time over the profiled runs.
struct RuntimeNodeTime {
  std::string node;      // the runtime's node name ("/relu/Relu_output_0_nchwc")
  std::string op;        // the runtime's op or kernel ("Conv", "FusedMatMul", "ReorderOutput")
  std::string provider;  // "CPUExecutionProvider"
  double median_us = 0;  // median over the runs of its time in the run (µs; summed when it ran twice)
  double min_us = 0;
  int64_t runs = 0;  // runs it was timed in (the first run of the profile is left out when there are more)
  // Names of the model nodes it computes (Layer::name: the ONNX node name, or "<op_type>_<index>"
  // for an unnamed node), in the model's node order. Empty: runtime-only work (a reorder).
  std::vector<std::string> layers;
};

struct RuntimeProfile {
  std::vector<RuntimeNodeTime> nodes;  // in the order of their first execution
  int64_t runs = 0;                    // runs the times are taken from
  double run_median_us = 0;            // median of the "model_run" events over those runs (µs)
  // Model nodes no runtime node computes (folded into constants or removed at load time).
  std::vector<std::string> not_run;
};

// Reads an ONNX Runtime profile and maps its nodes to the nodes of `model` (the .onnx that ran, or
// one with the same graph: a shape-only zoo model and its materialized copy map alike). Main-graph
// nodes only. `optimized_graph`: the graph ONNX Runtime saved for the session (absent when
// optimizations were disabled: names then map one to one). Errors (one line, naming the file):
// unreadable or non-JSON profile, no "Node" events, a model or graph that does not parse.
Result<RuntimeProfile> read_onnxruntime_profile(const std::filesystem::path& profile,
                                                const std::filesystem::path& model,
                                                const std::optional<std::filesystem::path>& optimized_graph);

}  // namespace floorline::mp
