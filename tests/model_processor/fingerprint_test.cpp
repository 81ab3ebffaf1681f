// Model fingerprints: databases match models by (name, fingerprint), so the value follows the
// graph's structure and never its weight values, and stays the same from release to release (a
// changed value records every model again under a new row).
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "test_helpers.hpp"

namespace floorline::mp::test {
namespace {

namespace fs = std::filesystem;

// A Conv whose 64x64x3x3 weight (144 KiB, above the payload size the loader passes over unread) and
// bias hold random values drawn from `seed`.
std::string conv_text(uint32_t seed, int stride) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto values = [&](int n) {
    std::string s;
    for (int k = 0; k < n; ++k) s += fmt::format("{}{}", k ? "," : "", u(rng));
    return s;
  };
  const std::string w = values(64 * 64 * 9), b = values(64);
  return model_text(
      fmt::format("g (float[N,64,8,8] x) => (y) <float[64,64,3,3] w = {{{}}}, float[64] b = {{{}}}> {{\n"
                  "  y = Conv <pads = [1, 1, 1, 1], strides = [{}, {}]> (x, w, b)\n}}",
                  w, b, stride, stride));
}

// The fingerprint of the model in `text`, written to a file and loaded from it.
std::string file_fingerprint(const std::string& text) {
  onnx::ModelProto model;
  const auto status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  const fs::path path = fs::temp_directory_path() / fmt::format("floorline_fingerprint_{}.onnx", ::getpid());
  {
    std::ofstream out(path, std::ios::binary);
    model.SerializeToOstream(&out);
  }
  ProcessOptions opts;
  auto r = process_model(path, opts);
  fs::remove(path);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() && !r->empty() ? r->front().fingerprint : std::string();
}

TEST(Fingerprint, OtherWeightValuesMatchAndAnOtherAttributeDoesNot) {
  const std::string a = file_fingerprint(conv_text(1, 1));
  ASSERT_EQ(a.size(), 16u);
  EXPECT_EQ(file_fingerprint(conv_text(2, 1)), a);
  EXPECT_NE(file_fingerprint(conv_text(1, 2)), a);
  // Loaded from text (every payload kept in memory) or from a file (the large one passed over).
  auto m = process_ok(conv_text(3, 1));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].fingerprint, a);
}

TEST(Fingerprint, EveryBatchOfAModelCarriesTheSameValue) {
  auto m = process_ok(conv_text(1, 1), {1, 8});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].fingerprint, m[1].fingerprint);
}

// The zoo's values were recorded by the implementation that copied the graph and cleared the
// payloads before serializing it (databases written since hold them); the one that serializes the
// graph's parts without the copy gives the same on all 38 zoo models and full-weight exports.
TEST(Fingerprint, ValuesStoredInDatabasesStayTheSame) {
  EXPECT_EQ(file_fingerprint(conv_text(1, 1)), "8a886f7850ffe387");
  const fs::path src(FLOORLINE_SOURCE_DIR);
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"resnet18", "5747cbe21c4440fc"}, {"bert_base_encoder", "14675753017618bc"}}) {
    ProcessOptions opts;
    auto r = process_model(src / "models/zoo" / (name + ".onnx"), opts);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->front().fingerprint, value) << name;
  }
}

}  // namespace
}  // namespace floorline::mp::test
