// `floorline layers`: process models into the layer IR and print per-model and zoo summaries.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace floorline::cli {

struct LayersOptions {
  std::vector<std::string> models;
  std::vector<int64_t> batches = {1};
  int64_t max_detections = 100;                      // ProcessOptions::max_detections
  std::map<std::string, std::vector<int64_t>> dims;  // ProcessOptions::dims (--dim)
  std::string format = "table";
  std::string out = "-";
  bool show_unique = false;
  bool show_layers = false;
  std::string db;  // record models, configs and layers into this results database
};

void add_layers_command(CLI::App& app, LayersOptions& opts, int& exit_code);
int run_layers(const LayersOptions& opts);

}  // namespace floorline::cli
