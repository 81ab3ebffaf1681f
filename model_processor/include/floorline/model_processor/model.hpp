// floorline/model_processor/model.hpp — load an ONNX model and turn it into the layer IR.
//
// Loading uses ONNX's own protobuf classes and shape inference (onnx::shape_inference::InferShapes,
// ONNX 1.12, opsets 7–17). Weights are never needed except where a constant tensor carries a shape
// (Reshape/Expand/Slice/Pad/Resize inputs): initializers stored as external data are read only then,
// and only the bytes of that tensor. A shape-only copy of a model (external data file absent) loads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/layer.hpp"

namespace floorline::mp {

// A model processed at one batch size.
struct ModelIR {
  std::string name;  // file stem ("resnet50")
  std::filesystem::path path;
  int64_t batch = 1;
  int64_t ir_version = 0;
  int64_t opset = 0;   // default-domain opset of the model
  int node_count = 0;  // ONNX nodes in the main graph (subgraph nodes not included)
  // 16 hex digits: hash of the graph's structure (nodes, attributes, initializer names/types/dims,
  // never weight values). Equal for every batch size and for re-exports with other weights.
  std::string fingerprint;
  std::vector<Layer> layers;          // topological order; subgraph layers follow their If/Loop node
  std::vector<std::string> warnings;  // one line each; already names the node
  double process_ms = 0;              // wall time to load, infer shapes and build the IR (ms)

  int64_t total_flops() const;  // Σ FLOPs of cost-bearing layers with known shapes
  int64_t total_bytes() const;
};

struct ProcessOptions {
  std::vector<int64_t> batches = {1};  // each graph input's leading dim (symbolic or 1) is set to B
  // Constant tensors larger than this many elements are not evaluated at load time (they stay
  // run-time layers); a cap on the memory that constant folding may take.
  int64_t max_folded_elements = 1 << 20;
};

// Process one .onnx file at every requested batch size. Results are in the order of
// options.batches. Errors (one line, naming the file and, where there is one, the node):
// unreadable/empty/garbage/truncated file, ir_version <= 0, no graph, external data missing where
// values are needed, inconsistent shapes, or a batch size the model cannot take (constants pinning
// the batch: "not re-batchable at batch B").
Result<std::vector<ModelIR>> process_model(const std::filesystem::path& path, const ProcessOptions& options);

// Process an in-memory ONNX text model (onnx/defs/parser.h syntax), as the tests do.
// `name` stands in for the file name in messages.
Result<std::vector<ModelIR>> process_model_text(std::string_view onnx_text, std::string_view name,
                                                const ProcessOptions& options);

}  // namespace floorline::mp
