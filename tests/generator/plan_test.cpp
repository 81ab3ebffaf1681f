// The plan on a real model of the zoo: names, defaults, caps, reference skips, fusion, conversions.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/plan.hpp"
#include "test_support.hpp"

namespace floorline::gen {
namespace {

using test::zoo_model;

std::vector<mp::ModelIR> resnet18() {
  return zoo_model("resnet18");
}

// A fused case's variant beyond its group: the layout families its operands are converted to, from
// the backend's own candidates for the case (the policy of plan_cases); "" for an unfused case.
std::string fused_reads(const Backend& backend, const PlannedCase& c) {
  if (c.spec.variant.fusion.empty()) return "";
  std::set<std::string> reads;
  for (const auto& cand : backend.candidates(c.spec))
    if (cand.conversion && cand.variant.math_mode == c.spec.variant.math_mode &&
        cand.feeds.feeds(c.spec.variant.algorithm, c.spec.variant.layout))
      reads.insert(cand.conversion->tensor + ":" + layout_family(cand.conversion->to));
  std::string out;
  for (const auto& r : reads) out += "|" + r;
  return out;
}

TEST(Plan, LayoutFamiliesGroupChannelBlocksAndChannelsLast) {
  EXPECT_EQ(layout_family("aBcd16b"), "blocked");
  EXPECT_EQ(layout_family("aBcd8b"), "blocked");
  EXPECT_EQ(layout_family("aBcde4b"), "blocked");
  EXPECT_EQ(layout_family("acdb"), "channels_last");
  EXPECT_EQ(layout_family("nhwc"), "channels_last");
  EXPECT_EQ(layout_family("abcd"), "abcd");
  EXPECT_EQ(layout_family("nchw"), "nchw");
  EXPECT_EQ(layout_family("ABcd16a16b"), "blocked");
}

TEST(Plan, Resnet18CasesAreNamedCappedAndComplete) {
  const auto models = resnet18();
  PlanOptions o;
  o.max_impls = 2;
  const Backend* onednn = find_backend("onednn");
  ASSERT_NE(onednn, nullptr);
  const Plan plan = make_plan(models, {onednn}, o);
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
    if (c.multi_thread_only) {  // the split convolutions: planned, not counted against the cap
      EXPECT_FALSE(c.status) << c.spec.name;
      EXPECT_EQ(c.group, "convolution_direct_split") << c.spec.name;
      continue;
    }
    const auto k = std::make_pair(c.spec.problem.key, c.spec.variant.fusion);
    const std::string variant = c.group + fused_reads(*onednn, c);
    if (!c.reference) offered_variants[k].insert(variant);
    if (!c.status) {
      ++timed_per_config[k];
      timed_variants[k].insert(variant);
    }
    if (c.work.is_default) ++defaults_per_config[k];
    if (c.reference && timed_per_config[k] > 0) {
      EXPECT_EQ(c.status, Disposition::kSkipped);
    }
    EXPECT_GT(c.work.flops + c.work.bytes, 0) << c.spec.name;
  }
  for (const auto& [k, n] : timed_per_config) {
    // The cap (2) bounds the implementations beyond the first of each algorithm and layout, which
    // are all timed (a fused variant only with the first implementation of each, under a cap, its
    // variant naming the layout families it reads too).
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
      ASSERT_TRUE(c.conversion.has_value()) << c.spec.name;
      EXPECT_EQ(conversion_layout(*c.conversion), c.spec.variant.layout);
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

// The policy on hand-made candidates: defaults first, every variant's first timed whatever the
// cap, the cap on the rest, references skipped unless alone or asked for, a fused base with the
// first of each variant only (all with no cap), and a conversion beside the timed case it feeds.
TEST(Plan, PolicyOnCandidates) {
  kernels::CaseSpec base;
  base.problem.kind = LayerKind::kConv;
  base.problem.inputs = {{"x", {1, 8, 4, 4}}};
  base.problem.outputs = {{"y", {1, 8, 4, 4}}};
  base.variant.backend = "test";
  auto make = [&](std::string group, std::string impl, bool is_default = false, bool reference = false) {
    kernels::LibraryCase c;
    c.variant = base.variant;
    c.variant.algorithm = group + ":" + impl;
    c.group = std::move(group);
    c.is_default = is_default;
    c.reference = reference;
    return c;
  };
  const std::vector<kernels::LibraryCase> candidates = {
      make("direct", "ref", false, true),
      make("direct", "a"),
      make("direct", "b"),
      make("direct", "c", true),
      kernels::conversion_case(base, "reorder", MathMode::kFp32, {"src", "abcd", "aBcd8b"}, {"direct:b", ""},
                               ""),
      make("winograd", "a"),
  };
  auto outcome = [](const std::vector<PlannedCase>& cases) {
    std::vector<std::string> out;
    for (const auto& c : cases)
      out.push_back(c.spec.variant.algorithm + (c.conversion ? "." + c.spec.variant.layout : "") +
                    (c.status ? " skipped" : ""));
    return out;
  };
  PlanOptions o;
  o.max_impls = 2;
  EXPECT_EQ(outcome(plan_cases(base, candidates, o)),
            (std::vector<std::string>{"direct:c", "winograd:a", "direct:ref skipped", "direct:a skipped",
                                      "direct:b skipped"}));
  o.max_impls = 4;
  EXPECT_EQ(outcome(plan_cases(base, candidates, o)),
            (std::vector<std::string>{"direct:c", "winograd:a", "direct:ref skipped", "direct:a", "direct:b",
                                      "reorder.src:abcd>aBcd8b"}));
  o.include_reference = true;
  o.conversions = false;
  EXPECT_EQ(
      outcome(plan_cases(base, candidates, o)),
      (std::vector<std::string>{"direct:c", "winograd:a", "direct:ref", "direct:a", "direct:b skipped"}));
  // The conversion's work is the tensor it converts, read and written.
  const auto planned = plan_cases(base, candidates, PlanOptions{.max_impls = 0});
  EXPECT_EQ(planned.back().work.bytes, 2 * 8 * 4 * 4 * 4);
  EXPECT_EQ(planned.back().spec.feeds, (CaseFeeds{"direct:b", ""}));
  // Its database row carries the conversion and the cases it feeds as columns, not as params text.
  const benchdb::CaseRow row = case_row(planned.back());
  ASSERT_TRUE(benchdb::is_conversion(row));
  EXPECT_EQ(*row.conversion, (LayoutConversion{"src", "abcd", "aBcd8b"}));
  EXPECT_EQ(row.feeds, (CaseFeeds{"direct:b", ""}));
  EXPECT_EQ(row.params.find("feeds"), std::string::npos) << row.params;
  EXPECT_FALSE(benchdb::is_conversion(case_row(planned.front())));
  EXPECT_TRUE(case_row(planned.front()).feeds.empty());
  // Fused: the first of each variant only, with or without a cap, where a fused variant is also
  // told apart by the layouts it reads (direct:b reads the blocked source its conversion writes, so
  // it is the first of its own: a replay whose producer wrote that layout can keep it); every
  // implementation with fused_all (--all-impls: S's activation epilogues take the fastest fused
  // case); no conversions.
  kernels::CaseSpec fused = base;
  fused.problem.post_ops = {{"Relu"}};
  EXPECT_EQ(outcome(plan_cases(fused, candidates, PlanOptions{.max_impls = 3})),
            (std::vector<std::string>{"direct:c", "direct:b", "winograd:a"}));
  EXPECT_EQ(outcome(plan_cases(fused, candidates, PlanOptions{.max_impls = 0})),
            (std::vector<std::string>{"direct:c", "direct:b", "winograd:a"}));
  EXPECT_EQ(
      outcome(plan_cases(fused, candidates, PlanOptions{.max_impls = 0, .fused_all = true})),
      (std::vector<std::string>{"direct:c", "direct:b", "winograd:a", "direct:ref skipped", "direct:a"}));
  // Without the conversion, direct:b reads what direct:c reads: the first of the variant is enough.
  std::vector<kernels::LibraryCase> unconverted = candidates;
  unconverted.erase(unconverted.begin() + 4);
  EXPECT_EQ(outcome(plan_cases(fused, unconverted, PlanOptions{.max_impls = 0})),
            (std::vector<std::string>{"direct:c", "winograd:a"}));
  // Only a reference: timed, so that the config has a measurement.
  EXPECT_EQ(outcome(plan_cases(base, {make("direct", "ref", true, true)}, PlanOptions{})),
            (std::vector<std::string>{"direct:ref"}));
}

// The same policy for every CPU backend, on real models: per config, data type and math mode, each
// variant's first timed, at most --max-impls beyond them, references skipped where a real
// implementation exists, and every conversion feeding a timed case of the plan.
TEST(Plan, EveryCpuBackendHonoursThePolicy) {
  std::vector<mp::ModelIR> models = resnet18();
  for (auto& m : zoo_model("mobilenet_v2")) models.push_back(std::move(m));
  for (const std::string name : {"onednn", "xnnpack", "openblas"}) {
    const Backend* backend = find_backend(name);
    ASSERT_NE(backend, nullptr) << name;
    if (!backend->available().ok()) {
      ADD_FAILURE() << name << " is not available: " << backend->available().error().message;
      continue;
    }
    for (const int cap : {1, 2}) {
      PlanOptions o;
      o.max_impls = cap;
      const Plan plan = make_plan(models, {backend}, o);
      using Config = std::tuple<std::string, std::string, std::string>;  // key, fusion, math mode
      std::map<Config, int> timed;
      std::map<Config, std::set<std::pair<std::string, std::string>>> offered, timed_variants;
      std::map<Config, bool> real_timed;
      std::set<std::tuple<std::string, std::string, std::string>> timed_cases;  // key, algorithm, layout
      int timed_total = 0;
      for (const auto& c : plan.cases) {
        EXPECT_EQ(c.spec.variant.backend, name);
        if (c.conversion) continue;
        const Config k{c.spec.problem.key, c.spec.variant.fusion,
                       std::string(math_mode_name(c.spec.variant.math_mode))};
        if (c.status == Disposition::kUnsupported || c.status == Disposition::kFailed) continue;
        if (c.multi_thread_only) {  // a _split variant: not counted against the cap, but timed
          if (!c.status)
            timed_cases.insert({c.spec.problem.key, c.spec.variant.algorithm, c.spec.variant.layout});
          continue;
        }
        const std::string variant = c.group + fused_reads(*backend, c);
        if (!c.reference) offered[k].insert({variant, c.spec.variant.layout});
        if (c.status) continue;
        ++timed[k];
        ++timed_total;
        if (!c.reference) real_timed[k] = true;
        timed_variants[k].insert({variant, c.spec.variant.layout});
        timed_cases.insert({c.spec.problem.key, c.spec.variant.algorithm, c.spec.variant.layout});
      }
      EXPECT_GT(timed_total, 0) << name;
      for (const auto& [k, n] : timed) {
        for (const auto& v : offered[k])
          EXPECT_TRUE(timed_variants[k].count(v)) << name << " " << std::get<0>(k) << " " << v.first;
        EXPECT_LE(n, std::max<int>(cap, static_cast<int>(timed_variants[k].size())))
            << name << " " << std::get<0>(k);
      }
      for (const auto& c : plan.cases) {
        if (c.reference && c.status == Disposition::kSkipped) {
          const Config k{c.spec.problem.key, c.spec.variant.fusion,
                         std::string(math_mode_name(c.spec.variant.math_mode))};
          EXPECT_TRUE(real_timed[k]) << c.spec.name;
        }
        if (!c.conversion) continue;
        EXPECT_FALSE(c.status) << c.spec.name;
        EXPECT_FALSE(c.spec.feeds.empty()) << c.spec.name;
        const bool fed = std::any_of(timed_cases.begin(), timed_cases.end(), [&](const auto& t) {
          return std::get<0>(t) == c.spec.problem.key && c.spec.feeds.feeds(std::get<1>(t), std::get<2>(t));
        });
        EXPECT_TRUE(fed) << name << " " << c.spec.name;
      }
    }
  }
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
