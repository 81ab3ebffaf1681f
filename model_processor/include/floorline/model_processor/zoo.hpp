// floorline/model_processor/zoo.hpp — a zoo of models: discovery, deduplication, summary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "floorline/common/result.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::mp {

// Expand files and folders into the sorted list of *.onnx files (folders are searched recursively).
// A named file is taken as given whatever its extension; a path that does not exist is an error.
Result<std::vector<std::filesystem::path>> find_models(const std::vector<std::string>& paths);

// One distinct LayerConfig across a zoo, with its multiplicity.
struct UniqueConfig {
  LayerConfig config;
  std::string key;
  int64_t flops = 0;
  int64_t bytes = 0;
  int64_t count = 0;                      // layer instances with this key, all models
  std::map<std::string, int64_t> models;  // "resnet50@b1" -> instances in that model
};

// A model that could not be processed, with its one-line error.
struct ModelFailure {
  std::filesystem::path path;
  std::string error;
};

// Every unique cost-bearing config (Compute and Unsupported layers with known shapes) across the
// given models, sorted by kind then key. Layers with unknown shapes are not deduplicated: they are
// listed as warnings of their model.
std::vector<UniqueConfig> dedup(const std::vector<ModelIR>& models);

// Per-kind aggregate for the zoo table.
struct KindSummary {
  LayerKind kind = LayerKind::kUnsupported;
  std::string op_type;    // for Unsupported, the ONNX op(s)
  int64_t instances = 0;  // cost-bearing instances
  int64_t unique = 0;     // unique configs
  int64_t flops = 0;      // Σ FLOPs over instances
  int models = 0;         // models containing the kind
};
std::vector<KindSummary> summarize_kinds(const std::vector<ModelIR>& models,
                                         const std::vector<UniqueConfig>& unique);

}  // namespace floorline::mp
