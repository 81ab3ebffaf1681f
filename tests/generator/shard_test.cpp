// The shard partition on the real zoo plan: deterministic, every case in exactly one shard, and
// balanced by estimated time; costs from an earlier database where it has a measurement.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "floorline/benchdb/writer.hpp"
#include "floorline/generator/runner.hpp"
#include "floorline/generator/shard.hpp"
#include "floorline/model_processor/zoo.hpp"

namespace floorline::gen {
namespace {

std::vector<mp::ModelIR> load(const std::string& path) {
  auto files = mp::find_models({std::string(FLOORLINE_SOURCE_DIR) + path});
  EXPECT_TRUE(files.ok());
  std::vector<mp::ModelIR> out;
  if (!files) return out;
  for (const auto& f : *files) {
    auto r = mp::process_model(f, {});
    EXPECT_TRUE(r.ok()) << f << ": " << (r.ok() ? "" : r.error().message);
    if (r)
      for (auto& m : *r) out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> names_of(const Plan& plan) {
  std::vector<std::string> names;
  for (const auto& c : plan.cases) names.push_back(c.spec.name);
  return names;
}

TEST(Shard, ParsesZeroBasedIndexAndRejectsTheRest) {
  auto s = parse_shard("0/4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 0);
  EXPECT_EQ(s->count, 4);
  EXPECT_EQ(shard_label(*parse_shard("3/4")), "3/4");
  for (const char* bad : {"4/4", "-1/4", "1/0", "1", "a/4", "1/4x", "/4", "1/"}) {
    auto r = parse_shard(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
  EXPECT_NE(parse_shard("4/4").error().message.find("0-based, from 0 to 3"), std::string::npos);
}

// The whole zoo at batch 1 on oneDNN (11,938 cases, 7,261 timed, on an AVX-512 host; 8,299 with
// oneDNN capped at AVX2), every case in exactly one shard,
// the same partition whatever order the cases come in. Balance: LPT's shards differ by at most the
// largest case (a 3-D convolution of r3d_18, ~24 s estimated); up to 8 shards, where a shard is
// ≥ 100 s, they are within 2% of each other; at 64 shards the largest case is a shard of its own
// and the rest stay within that case's time.
TEST(Shard, ZooPartitionIsDeterministicCompleteAndBalanced) {
  const auto models = load("/models/zoo");
  ASSERT_GE(models.size(), 30u);
  const Plan plan = make_plan(models, {find_backend("onednn")}, PlanOptions{});
  ASSERT_GT(plan.cases.size(), 5000u);  // the implementations oneDNN offers depend on the ISA
  int64_t timed = 0;
  for (const auto& c : plan.cases) timed += c.status ? 0 : 1;
  CostOptions co;
  auto costs = estimate_case_costs(plan, {find_backend("onednn")}, co, nullptr);
  ASSERT_TRUE(costs.ok()) << costs.error().message;
  EXPECT_EQ(costs->measured, 0);
  EXPECT_EQ(costs->roofline, timed);
  const auto names = names_of(plan);
  for (int count : {1, 3, 8, 64}) {
    const Partition p = partition_cases(names, costs->seconds, count);
    ASSERT_EQ(p.shard_of.size(), names.size());
    // Every case in exactly one shard: the shard plans together hold each name once.
    std::multiset<std::string> seen;
    int64_t cases = 0;
    for (int s = 0; s < count; ++s) {
      const Plan part = shard_plan(plan, p, s);
      EXPECT_EQ(static_cast<int64_t>(part.cases.size()), p.cases[static_cast<size_t>(s)]);
      EXPECT_EQ(part.configs.size(), plan.configs.size());  // each shard records every model
      for (const auto& c : part.cases) seen.insert(c.spec.name);
      cases += static_cast<int64_t>(part.cases.size());
    }
    EXPECT_EQ(cases, static_cast<int64_t>(names.size()));
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), names.size());
    EXPECT_EQ(seen.size(), names.size());
    const auto [lo, hi] = std::minmax_element(p.seconds.begin(), p.seconds.end());
    const double largest = *std::max_element(costs->seconds.begin(), costs->seconds.end());
    EXPECT_LE(*hi - *lo, largest + 1e-6) << count << " shards: " << *lo << " to " << *hi << " s";
    if (count <= 8) {
      EXPECT_LE(*hi / *lo, 1.02) << count << " shards: " << *lo << " to " << *hi << " s";
    }
    if (count == 64) {
      EXPECT_NEAR(*hi, largest, 1e-6);
    }
    std::printf("%d shards: estimated %.2f to %.2f s per shard (max/min %.4f), %lld to %lld cases\n", count,
                *lo, *hi, *hi / *lo,
                static_cast<long long>(*std::min_element(p.cases.begin(), p.cases.end())),
                static_cast<long long>(*std::max_element(p.cases.begin(), p.cases.end())));
    // Deterministic: the same again, and the same per name with the cases in reverse order.
    EXPECT_EQ(partition_cases(names, costs->seconds, count).shard_of, p.shard_of);
    std::vector<std::string> rev_names(names.rbegin(), names.rend());
    std::vector<double> rev_seconds(costs->seconds.rbegin(), costs->seconds.rend());
    const Partition r = partition_cases(rev_names, rev_seconds, count);
    for (size_t k = 0; k < names.size(); ++k)
      ASSERT_EQ(r.shard_of[names.size() - 1 - k], p.shard_of[k]) << names[k];
  }
}

TEST(Shard, EarlierMeasurementsSetTheCostAndScaleTheRoofline) {
  const auto models = load("/models/zoo/squeezenet1_1.onnx");
  const std::vector<const Backend*> backends = {find_backend("onednn")};
  PlanOptions po;
  po.max_impls = 1;
  const Plan plan = make_plan(models, backends, po);
  // The earlier database: the plan's first three timed cases measured, at 5, 20 and 10 times their
  // nominal roofline time (the median ratio, 10, scales every other case's roofline time).
  const auto dir = std::filesystem::temp_directory_path() / ("floorline_shard_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    auto db = benchdb::Database::open(dir / "earlier.db");
    ASSERT_TRUE(db.ok()) << db.error().message;
    ASSERT_TRUE(db->record_models(models).ok());
    auto nominal = estimate_case_costs(plan, backends, CostOptions{}, nullptr);
    ASSERT_TRUE(nominal.ok());
    benchdb::SystemRow sys;
    sys.device_kind = "cpu";
    sys.device_name = "earlier";
    const int64_t system_id = db->upsert_system(sys).value();
    benchdb::RunRow run;
    run.system_id = system_id;
    const int64_t run_id = db->begin_run(run).value();
    benchdb::MeasurementWriter w(*db, system_id, run_id);
    int measured = 0;
    for (const auto& c : plan.cases) {
      if (c.status || measured == 3) continue;
      const double flops = static_cast<double>(c.work.flops), bytes = static_cast<double>(c.work.bytes);
      const double roof = std::max(flops / kNominalCpuFlopsPerThread, bytes / kNominalCpuBytesPerThread);
      auto cfg = db->query("SELECT id FROM layer_configs WHERE key = ?1", {c.spec.problem.key});
      ASSERT_TRUE(cfg.ok() && !cfg->rows.empty());
      benchdb::CaseRow row = case_row(c);
      row.config_id = std::get<int64_t>(cfg->rows[0][0]);
      const int64_t case_id = db->upsert_case(row).value();
      benchdb::MeasurementRow m;
      m.case_id = case_id;
      m.status = Disposition::kPassed;
      m.median_us = roof * (measured == 0 ? 5 : measured == 1 ? 20 : 10) * 1e6;
      ASSERT_TRUE(w.add(m).ok());
      ++measured;
    }
    ASSERT_TRUE(w.flush().ok());
  }
  benchdb::OpenOptions ro;
  ro.read_only = true;
  auto earlier = benchdb::Database::open(dir / "earlier.db", ro);
  ASSERT_TRUE(earlier.ok()) << earlier.error().message;
  CostOptions co;
  auto nominal = estimate_case_costs(plan, backends, co, nullptr);
  auto costs = estimate_case_costs(plan, backends, co, &*earlier);
  ASSERT_TRUE(costs.ok()) << costs.error().message;
  EXPECT_EQ(costs->measured, 3);
  EXPECT_NE(costs->source.find("3 measured cases, roofline x 10.0"), std::string::npos) << costs->source;
  // A long call's warm-up call is its first repetition (CostOptions::first_call_counts).
  auto cost_of = [&](double t) {
    const double calls = least_calls(t, co.min_iterations, co.long_call);
    const int repetitions =
        calls == 1 && t >= co.warmup_seconds && t >= co.min_time ? co.repetitions - 1 : co.repetitions;
    return co.passes *
           (kCaseOverhead + std::max(co.warmup_seconds, t) + repetitions * std::max(co.min_time, calls * t));
  };
  int seen = 0;
  for (size_t k = 0; k < plan.cases.size(); ++k) {
    const auto& c = plan.cases[k];
    if (c.status) {
      EXPECT_DOUBLE_EQ(costs->seconds[k], kRecordOverhead);
      continue;
    }
    const double roof = std::max(static_cast<double>(c.work.flops) / kNominalCpuFlopsPerThread,
                                 static_cast<double>(c.work.bytes) / kNominalCpuBytesPerThread);
    const double factor = seen == 0 ? 5 : seen == 1 ? 20 : 10;
    EXPECT_NEAR(costs->seconds[k], cost_of(roof * factor), 1e-12) << c.spec.name;
    EXPECT_NEAR(nominal->seconds[k], cost_of(roof), 1e-12) << c.spec.name;
    ++seen;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floorline::gen
