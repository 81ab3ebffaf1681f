// Integration: every model of the committed zoo at batch 1 and 8, against a golden summary.
// Regenerate the golden file after an intended change with FLOORLINE_UPDATE_GOLDEN=1.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "floorline/model_processor/zoo.hpp"

namespace floorline::mp::test {
namespace {

namespace fs = std::filesystem;

std::string summary(const std::vector<ModelIR>& models) {
  std::string out = "model batch nodes compute unsupported view host control unique flops bytes\n";
  for (const auto& m : models) {
    int counts[5] = {0, 0, 0, 0, 0};
    std::set<std::string> keys;
    for (const auto& l : m.layers) {
      ++counts[static_cast<int>(l.cost)];
      if (l.cost_bearing()) keys.insert(l.key);
    }
    out +=
        fmt::format("{} {} {} {} {} {} {} {} {} {} {}\n", m.name, m.batch, m.node_count, counts[0], counts[4],
                    counts[1], counts[2], counts[3], keys.size(), m.total_flops(), m.total_bytes());
  }
  const auto unique = dedup(models);
  int64_t instances = 0;
  for (const auto& u : unique) instances += u.count;
  out += fmt::format("zoo instances={} unique={}\n", instances, unique.size());
  out += "kind instances unique models flops\n";
  for (const auto& k : summarize_kinds(models, unique))
    out += fmt::format(
        "{} {} {} {} {}\n",
        k.kind == LayerKind::kUnsupported ? "Unsupported:" + k.op_type : std::string(kind_name(k.kind)),
        k.instances, k.unique, k.models, k.flops);
  return out;
}

// The detection model's ops that have no layer kind yet: kept as Unsupported, with
// their shapes known; any other op without a kind is a regression.
TEST(Zoo, EveryModelAtBatch1And8MatchesTheGoldenSummary) {
  const fs::path src(FLOORLINE_SOURCE_DIR);
  auto files = find_models({(src / "models/zoo").string()});
  ASSERT_TRUE(files.ok()) << files.error().message;
  ASSERT_GE(files->size(), 30u);
  ProcessOptions opts;
  opts.batches = {1, 8};
  std::vector<ModelIR> models;
  for (const auto& f : *files) {
    auto r = process_model(f, opts);
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (auto& m : *r) {
      // (ssdlite's detection head has kinds: no op is left without one)
      for (const auto& w : m.warnings) ADD_FAILURE() << f << ": unexpected warning: " << w;
      if (m.name == "ssdlite320_mobilenet_v3_large")  // its detection head rests on --max-detections
        EXPECT_NE(m.assumption.find("--max-detections 100: 181 NonZero/NonMaxSuppression"), std::string::npos)
            << m.assumption;
      else
        EXPECT_EQ(m.assumption, "") << f;
      for (const auto& l : m.layers)
        EXPECT_TRUE(!l.cost_bearing() || l.shapes_known) << f << ": " << l.name << " has unknown shapes";
      models.push_back(std::move(m));
    }
  }
  const std::string got = summary(models);
  const fs::path golden = src / "tests/model_processor/golden/zoo_summary.txt";
  if (const char* u = std::getenv("FLOORLINE_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    fs::create_directories(golden.parent_path());
    std::ofstream(golden) << got;
    GTEST_SKIP() << "golden file rewritten: " << golden;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "missing " << golden << " (run with FLOORLINE_UPDATE_GOLDEN=1)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str());
}

// --- quantization: the QDQ export of torchvision's quantized ResNet-18 (models/export_zoo.py) fuses
// as ONNX Runtime's QDQ transformer would: 20 Conv (their Relu folded), 8 Add, MaxPool,
// GlobalAveragePool and the Gemm become int8 layers; the QuantizeLinear of the input and the
// DequantizeLinear of the logits stay, as does nothing else of the 116 Q/DQ nodes.
TEST(Zoo, QuantizedResnet18FusesItsQdqPairsIntoInt8Layers) {
  auto r = process_model(fs::path(FLOORLINE_SOURCE_DIR) / "models/zoo/resnet18_qdq.onnx", {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ModelIR& m = r->at(0);
  std::map<std::string, int> int8, cost_bearing;
  int folded_qdq = 0;
  for (const auto& l : m.layers) {
    if (l.cost_bearing()) ++cost_bearing[l.op_type];
    if (l.cost_bearing() && l.config.find_attr("qtypes")) ++int8[l.op_type];
    if ((l.op_type == "QuantizeLinear" || l.op_type == "DequantizeLinear") && l.cost == CostClass::kView)
      ++folded_qdq;
  }
  EXPECT_EQ(int8, (std::map<std::string, int>{
                      {"Add", 8}, {"Conv", 20}, {"Gemm", 1}, {"GlobalAveragePool", 1}, {"MaxPool", 1}}));
  EXPECT_EQ(cost_bearing, (std::map<std::string, int>{{"Add", 8},
                                                      {"Conv", 20},
                                                      {"DequantizeLinear", 1},
                                                      {"Gemm", 1},
                                                      {"GlobalAveragePool", 1},
                                                      {"MaxPool", 1},
                                                      {"QuantizeLinear", 1}}));
  // A Q after each of the 31 int8 layers, a DQ before each of their 39 activation inputs (Conv 20,
  // Add 16, MaxPool, GlobalAveragePool, Gemm), and the DQ → Flatten → Q pair of equal parameters.
  EXPECT_EQ(folded_qdq, 31 + 39 + 2);
  for (const auto& l : m.layers)
    if (l.op_type == "Conv") {
      EXPECT_EQ(l.config.dtype, DataType::kU8) << l.key;
      EXPECT_NE(l.key.find(":i8|bias|"), std::string::npos) << l.key;  // s8 weights
      EXPECT_NE(l.key.find("|per_channel=1|"), std::string::npos) << l.key;
    }
}

}  // namespace
}  // namespace floorline::mp::test
