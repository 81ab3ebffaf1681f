// Helpers several generator test files share: a zoo model processed at a batch, a temporary folder
// of this process removed with everything in it, and a backend forwarding to another.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floorline/generator/backend.hpp"
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

// A backend that forwards everything to another (oneDNN in the tests): a test overrides the part it
// changes (its sentinel, its defaults, its device kind and cold-cache mode).
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(const Backend& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  std::string device_kind() const override { return inner_.device_kind(); }
  Status available() const override { return inner_.available(); }
  void describe(benchdb::SystemRow& row) const override { inner_.describe(row); }
  kernels::KindSupport support(LayerKind kind) const override { return inner_.support(kind); }
  std::vector<kernels::LibraryCase> candidates(const kernels::CaseSpec& base) const override {
    return inner_.candidates(base);
  }
  kernels::KernelFactory factory() const override { return inner_.factory(); }
  void set_threads(int threads) const override { inner_.set_threads(threads); }
  void park_threads() const override { inner_.park_threads(); }
  std::string generated_header() const override { return inner_.generated_header(); }
  std::string generated_register_function() const override { return inner_.generated_register_function(); }
  std::string generated_cmake_target() const override { return inner_.generated_cmake_target(); }

 protected:
  const Backend& inner_;
};

}  // namespace floorline::gen::test
