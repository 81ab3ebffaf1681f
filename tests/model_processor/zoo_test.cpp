// Integration: every model of the committed zoo at batch 1 and 8, against a golden summary.
// Regenerate the golden file after an intended change with FLOORLINE_UPDATE_GOLDEN=1.
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
      for (const auto& w : m.warnings) ADD_FAILURE() << f << ": unexpected warning: " << w;
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

}  // namespace
}  // namespace floorline::mp::test
