// The plan on a real model of the zoo: names, defaults, caps, reference skips, fusion, conversions.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/plan.hpp"

namespace floorline::gen {
namespace {

std::vector<mp::ModelIR> resnet18() {
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/resnet18.onnx", {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : std::vector<mp::ModelIR>{};
}

TEST(Plan, Resnet18CasesAreNamedCappedAndComplete) {
  const auto models = resnet18();
  PlanOptions o;
  o.max_impls = 2;
  const Plan plan = make_plan(models, {find_backend("onednn")}, o);
  ASSERT_EQ(plan.configs.size(), 23u);  // `floorline layers --show-unique` on resnet18 at batch 1
  std::map<std::pair<std::string, std::string>, int> timed_per_config, defaults_per_config;
  // Per config: the algorithms (variants) with a real implementation, and those timed.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> offered_variants, timed_variants;
  std::set<std::string> names;
  for (const auto& c : plan.cases) {
    // The name contains the canonical key and parses back into the case's fields.
    auto parsed = benchdb::parse_case_name(c.spec.name);
    ASSERT_TRUE(parsed.has_value()) << c.spec.name;
    EXPECT_EQ(parsed->key, c.spec.problem.key);
    EXPECT_EQ(parsed->algorithm, c.spec.variant.algorithm);
    EXPECT_EQ(parsed->fusion, c.spec.variant.fusion);
    // One identity, one name: parsing gives the spec's identity back, and it names the case.
    EXPECT_EQ(*parsed, c.spec.id()) << c.spec.name;
    EXPECT_EQ(case_name(c.spec.id()), c.spec.name);
    // ...and the text identity converts back into the typed variant the spec carries.
    EXPECT_EQ(case_variant(*parsed), c.spec.variant) << c.spec.name;
    EXPECT_TRUE(names.insert(c.spec.name).second) << "duplicate " << c.spec.name;
    if (!c.spec.feeds.empty()) continue;
    const auto k = std::make_pair(c.spec.problem.key, c.spec.variant.fusion);
    const std::string variant = c.spec.variant.algorithm.substr(0, c.spec.variant.algorithm.find(':'));
    if (c.spec.impl_name.rfind("ref", 0) != 0) offered_variants[k].insert(variant);
    if (!c.status) {
      ++timed_per_config[k];
      timed_variants[k].insert(variant);
    }
    if (c.work.is_default) ++defaults_per_config[k];
    if (c.spec.impl_name.rfind("ref", 0) == 0 && timed_per_config[k] > 0) {
      EXPECT_EQ(c.status, Disposition::kSkipped);
    }
    EXPECT_GT(c.work.flops + c.work.bytes, 0) << c.spec.name;
  }
  for (const auto& [k, n] : timed_per_config) {
    // The cap (2) bounds the implementations beyond the first of each algorithm and layout, which
    // are all timed (a fused variant only with the first implementation of each).
    const int variants = static_cast<int>(timed_variants[k].size());
    EXPECT_LE(n, k.second.empty() ? std::max(2, variants) : variants) << k.first;
    if (k.second.empty()) {
      EXPECT_EQ(timed_variants[k], offered_variants[k]) << k.first;
    }
    EXPECT_EQ(defaults_per_config[k], 1) << k.first << " " << k.second;
  }
  // ResNet's basic block: Conv → Relu, and Conv → Add(residual) → Relu.
  std::set<std::string> fusions;
  int conversions = 0;
  for (const auto& c : plan.cases) {
    if (!c.spec.variant.fusion.empty()) fusions.insert(c.spec.problem.op + "+" + c.spec.variant.fusion);
    if (!c.spec.feeds.empty()) {
      ++conversions;
      EXPECT_EQ(c.spec.variant.algorithm, "reorder");
      EXPECT_NE(c.spec.variant.layout.find('>'), std::string::npos);
    }
  }
  EXPECT_TRUE(fusions.count("Conv+Relu"));
  EXPECT_TRUE(fusions.count("Conv+Add+Relu"));
  EXPECT_GT(conversions, 0);
}

TEST(Plan, AllImplsAndReferenceFlagsWidenThePlan) {
  const auto models = resnet18();
  PlanOptions narrow;
  narrow.max_impls = 1;
  PlanOptions wide;
  wide.max_impls = 0;
  wide.include_reference = true;
  const Plan a = make_plan(models, {find_backend("onednn")}, narrow);
  const Plan b = make_plan(models, {find_backend("onednn")}, wide);
  auto timed = [](const Plan& p) {
    int n = 0;
    for (const auto& c : p.cases) n += c.status ? 0 : 1;
    return n;
  };
  EXPECT_GT(timed(b), timed(a));
  for (const auto& c : b.cases)
    EXPECT_TRUE(!c.status || c.status == Disposition::kUnsupported) << c.spec.name;
}

TEST(Plan, BackendSelection) {
  EXPECT_TRUE(select_backends("onednn").ok());
  EXPECT_TRUE(select_backends("auto").ok());
  auto bad = select_backends("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown backend 'tpu'"), std::string::npos);
}

}  // namespace
}  // namespace floorline::gen
