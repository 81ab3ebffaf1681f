// Helpers several generator test files share: a zoo model processed at a batch, and a temporary
// folder of this process removed with everything in it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floorline/model_processor/model.hpp"

namespace floorline::gen::test {

// models/zoo/<name>.onnx at `batch`; a failure to process it fails the test and gives no model.
inline std::vector<mp::ModelIR> zoo_model(const std::string& name, int64_t batch = 1) {
  mp::ProcessOptions o;
  o.batches = {batch};
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

// <temp>/floorline_<tag>_<pid>, created now and removed with its contents at the end of scope.
struct TempDir {
  std::filesystem::path dir;
  explicit TempDir(const std::string& tag)
      : dir(std::filesystem::temp_directory_path() /
            ("floorline_" + tag + "_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` to a file `name` in the folder; its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

}  // namespace floorline::gen::test
