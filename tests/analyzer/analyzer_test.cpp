// The analyzer on small hand-made graphs with known times in a test database: every bound is
// computed by hand and asserted exactly; advisors fire on their patterns and stay silent elsewhere;
// JSON and CSV outputs match golden files.
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/advisors.hpp"
#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/bounds.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/model.hpp"
#include "floorline/model_processor/runtime_profile.hpp"

namespace floorline::analyzer {
namespace {

// Shapes differ between graphs so that no two graphs share a config (one time per config).
// chain:    x → Relu (10) → Sigmoid (20) → Tanh (30)
constexpr const char* kChain = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
chain (float[1,1000] x) => (float y) {
  a = Relu (x)
  b = Sigmoid (a)
  y = Tanh (b)
}
)onnx";
// diamond:  x → Relu (10) → {Sigmoid (20), Tanh (5)} → Add (7)
constexpr const char* kDiamond = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
diamond (float[1,2000] x) => (float y) {
  a = Relu (x)
  b = Sigmoid (a)
  c = Tanh (a)
  y = Add (b, c)
}
)onnx";
// parallel: two branches from the input, two sinks: Relu (10) | Sigmoid (20) → Tanh (5); a
// Reshape (a view layer, free) between Sigmoid and Tanh.
constexpr const char* kParallel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
parallel (float[1,3000] x) => (float y1, float y2) {
  y1 = Relu (x)
  b = Sigmoid (x)
  shape = Constant <value = int64[2] {3000, 1}> ()
  r = Reshape (b, shape)
  y2 = Tanh (r)
}
)onnx";
// convs: Conv (100) → Relu (10), fused Conv+Relu measured at 104; Conv (50) → BatchNormalization (8).
constexpr const char* kConvs = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
convs (float[1,4,8,8] x, float[4,4,3,3] w, float[4,4,1,1] w2, float[4] s, float[4] b, float[4] m, float[4] v)
    => (float y1, float y2) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  y1 = Relu (c)
  d = Conv (x, w2)
  y2 = BatchNormalization (d, s, b, m, v)
}
)onnx";

mp::ModelIR process(const char* text, const char* name) {
  auto r = mp::process_model_text(text, name, {});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->front() : mp::ModelIR{};
}

const mp::Layer& layer(const mp::ModelIR& m, const std::string& op, int nth = 0) {
  for (const auto& l : m.layers)
    if (l.op_type == op && nth-- == 0) return l;
  throw std::runtime_error("no " + op + " in " + m.name);
}

// A test database: models recorded, one CPU system, cases timed by hand.
struct TestDb {
  std::filesystem::path dir;
  std::optional<benchdb::Database> db_;
  benchdb::Database& db;
  int64_t system = 0, run = 0;
  std::vector<mp::ModelIR> models;
  std::string backend = "onednn";  // the backend of the cases time() writes

  explicit TestDb(std::vector<mp::ModelIR> ms) : db(open_db(dir, db_)), models(std::move(ms)) {
    check(db.record_models(models));
    benchdb::SystemRow s;
    s.device_kind = "cpu";
    s.device_name = "Test CPU";
    s.cpu_model = "Test CPU";
    s.threads = 1;
    s.libraries = {{"onednn", "2.6.3"}};
    s.floorline_version = "test";
    system = value(db.upsert_system(s));
    benchdb::RunRow r;
    r.system_id = system;
    run = value(db.begin_run(r));
  }
  ~TestDb() { std::filesystem::remove_all(dir); }

  static benchdb::Database& open_db(std::filesystem::path& dir, std::optional<benchdb::Database>& slot) {
    dir = std::filesystem::temp_directory_path() /
          ("floorline_analyzer_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(dir);
    auto opened = benchdb::Database::open(dir / "a.db");
    if (!opened) throw std::runtime_error(opened.error().message);
    slot.emplace(std::move(opened).value());
    return *slot;
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  template <class T>
  static T value(Result<T> r) {
    if (!r) throw std::runtime_error(r.error().message);
    return std::move(r).value();
  }
  static void check(const Status& s) {
    if (!s) throw std::runtime_error(s.error().message);
  }

  // A passed measurement of `key` with `algorithm`; a layout conversion when `layout` names one,
  // feeding `feeds`.
  void time(const std::string& key, const std::string& algorithm, double us, bool is_default = false,
            const std::string& fusion = "", const std::string& dtype = "f32", const std::string& layout = "",
            const std::string& params = "{}", const CaseFeeds& feeds = {}) {
    auto q = value(db.query("SELECT id FROM layer_configs WHERE key = ?1", {key}));
    if (q.rows.empty()) throw std::runtime_error("no config " + key);
    benchdb::CaseRow c;
    c.config_id = std::get<int64_t>(q.rows[0][0]);
    c.identity = {backend, algorithm, dtype, dtype == "f32" ? "fp32" : dtype, layout, fusion, key};
    c.params = params;
    c.conversion = parse_conversion(layout);
    c.feeds = feeds;
    benchdb::MeasurementRow m;
    m.case_id = value(db.upsert_case(c));
    m.status = Disposition::kPassed;
    m.is_default = is_default ? 1 : 0;
    m.iterations = 10;
    m.repetitions = 1;
    m.min_us = m.median_us = m.mean_us = us;
    benchdb::MeasurementWriter w(db, system, run);
    check(w.add(std::move(m)));
    check(w.flush());
  }
  // Each (op, µs): the first layer of that op in `m` gets one passed case, its library default.
  void times(const mp::ModelIR& m, std::initializer_list<std::pair<const char*, double>> ops) {
    for (const auto& [op, us] : ops) time(layer(m, op).key, "default", us, true);
  }
  void peaks(double flops_per_s, double bytes_per_s) {
    for (const auto& [peak, v] : {std::pair{"flops", flops_per_s}, std::pair{"bytes", bytes_per_s}}) {
      benchdb::SystemPeakRow p;
      p.system_id = system;
      p.peak = peak;
      p.dtype = "f32";
      p.math_mode = std::string(peak) == "flops" ? "fp32" : "";
      p.value_per_s = v;
      p.method = "test";
      p.measured_at = "2026-11-21T00:00:00Z";
      check(db.upsert_system_peak(p));
    }
  }
  CostTable costs() { return value(load_costs(db, system)); }
};

std::vector<int> indices(std::initializer_list<const char*> ops, const mp::ModelIR& m) {
  std::vector<int> out;
  std::map<std::string, int> seen;
  for (const char* op : ops) out.push_back(layer(m, op, seen[op]++).index);
  return out;
}

std::vector<int> path_of_cost_layers(const ModelBounds& b) {
  std::vector<int> out;
  for (int v : b.critical_path)
    for (const auto& l : b.layers)
      if (l.index == v) out.push_back(v);
  return out;
}

const Finding* finding(const std::vector<Finding>& fs, const std::string& advisor) {
  for (const auto& f : fs)
    if (f.advisor == advisor) return &f;
  return nullptr;
}

TEST(Bounds, ChainIsItsOwnCriticalPath) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 30}});
  const auto b = analyze_model(m, t.costs());
  EXPECT_DOUBLE_EQ(b.S, 60);
  EXPECT_DOUBLE_EQ(b.P, 60);
  EXPECT_DOUBLE_EQ(b.H, 60);
  EXPECT_DOUBLE_EQ(b.F, 60);
  EXPECT_EQ(path_of_cost_layers(b), indices({"Relu", "Sigmoid", "Tanh"}, m));
  EXPECT_EQ(b.measured_layers, 3);
  EXPECT_DOUBLE_EQ(b.measured_fraction, 1.0);
  EXPECT_FALSE(b.R);  // no calibrated peaks: no roofline, and said so
  EXPECT_NE(b.peaks_note.find("no calibrated f32 peaks"), std::string::npos);
  // Nothing to advise: defaults are the best, no fusable chain, no branch, no R, no M.
  EXPECT_TRUE(advise(b).empty());
}

TEST(Bounds, DiamondCriticalPathTakesTheSlowerBranchAndIncludesSourceAndSink) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  const auto b = analyze_model(m, t.costs());
  EXPECT_DOUBLE_EQ(b.S, 42);
  EXPECT_DOUBLE_EQ(b.P, 37);  // Relu + Sigmoid + Add
  EXPECT_EQ(path_of_cost_layers(b), indices({"Relu", "Sigmoid", "Add"}, m));
  const auto fs = advise(b);
  const Finding* par = finding(fs, "parallelism");
  ASSERT_NE(par, nullptr);
  EXPECT_DOUBLE_EQ(par->saving_us, 5);
  ASSERT_EQ(par->items.size(), 1u);
  EXPECT_EQ(par->items[0].label, "branch from " + layer(m, "Relu").name);
  EXPECT_EQ(finding(fs, "algorithm"), nullptr);
  EXPECT_EQ(finding(fs, "fusion"), nullptr);
}

TEST(Bounds, ParallelBranchesWithTwoSinksAndAViewLayer) {
  const auto m = process(kParallel, "parallel");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}});
  const auto b = analyze_model(m, t.costs());
  EXPECT_DOUBLE_EQ(b.S, 35);
  EXPECT_DOUBLE_EQ(b.P, 25);  // Sigmoid → (Reshape, free) → Tanh
  EXPECT_EQ(path_of_cost_layers(b), indices({"Sigmoid", "Tanh"}, m));
  EXPECT_EQ(b.critical_path.size(), 3u);  // the view layer is on the path, at no cost
  EXPECT_EQ(b.view_layers, 1);
  // Tanh reads Sigmoid through the Reshape.
  for (const auto& l : b.layers) {
    if (l.kind == "Tanh") {
      EXPECT_EQ(l.preds, std::vector<int>{layer(m, "Sigmoid").index});
    }
  }
}

TEST(Bounds, HeuristicIsTheDefaultCaseAndTheAlgorithmAdvisorNamesIt) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  t.time(layer(m, "Relu").key, "eltwise:default", 15, true);
  t.time(layer(m, "Relu").key, "eltwise:fast", 10, false);
  t.time(layer(m, "Sigmoid").key, "eltwise:a", 20, true);
  t.time(layer(m, "Tanh").key, "eltwise:fast", 30, false);  // its default never passed
  const auto b = analyze_model(m, t.costs());
  EXPECT_DOUBLE_EQ(b.S, 60);
  EXPECT_DOUBLE_EQ(b.H, 65);  // 15 + 20 + 30 (Tanh keeps t(v))
  EXPECT_EQ(b.heuristic_missing, 1);
  const auto fs = advise(b);
  const Finding* alg = finding(fs, "algorithm");
  ASSERT_NE(alg, nullptr);
  EXPECT_DOUBLE_EQ(alg->saving_us, 5);
  EXPECT_NEAR(alg->saving_pct, 100.0 * 5 / 60, 1e-9);
  ASSERT_EQ(alg->items.size(), 1u);
  EXPECT_NE(alg->items[0].label.find("Relu x=1x1000"), std::string::npos);  // the config, readable
  EXPECT_NE(alg->items[0].detail.find("eltwise:fast"), std::string::npos);
}

TEST(Bounds, FusedBoundUsesTheMeasuredFusedCaseAndFoldsBatchNormalization) {
  const auto m = process(kConvs, "convs");
  TestDb t({m});
  const auto& conv = layer(m, "Conv", 0);
  const auto& conv2 = layer(m, "Conv", 1);
  t.time(conv.key, "convolution_direct:a", 100, true);
  t.time(conv.key, "convolution_direct:a", 104, true, "Relu");
  t.time(layer(m, "Relu").key, "eltwise:a", 10, true);
  t.time(conv2.key, "convolution_direct:a", 50, true);
  t.time(layer(m, "BatchNormalization").key, "batch_normalization:a", 8, true);
  const auto b = analyze_model(m, t.costs());
  // S counts the Relu in the conv's epilogue (the fused case adds 4 µs to the conv's 100): 162.
  EXPECT_DOUBLE_EQ(b.S, 168 - 6);
  EXPECT_DOUBLE_EQ(b.F, 168 - 6 - 8);
  ASSERT_EQ(b.fusions.size(), 2u);
  EXPECT_FALSE(b.fusions[0].applied) << "Conv+Relu: S already counts it";
  EXPECT_TRUE(b.fusions[1].applied) << b.fusions[1].pattern;
  const auto fs = advise(b);
  const Finding* fu = finding(fs, "fusion");
  ASSERT_NE(fu, nullptr);
  EXPECT_DOUBLE_EQ(fu->saving_us, 8);
  ASSERT_EQ(fu->items.size(), 1u);
  EXPECT_EQ(fu->items[0].label, "1x Conv+BatchNormalization(folded)");
}

TEST(Bounds, AFusedCaseSlowerThanUnfusedIsNotApplied) {
  const auto m = process(kConvs, "convs");
  TestDb t({m});
  const auto& conv = layer(m, "Conv", 0);
  t.time(conv.key, "convolution_direct:a", 100, true);
  t.time(conv.key, "convolution_direct:a", 130, true, "Relu");
  t.time(layer(m, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(m, "Conv", 1).key, "convolution_direct:a", 50, true);
  t.time(layer(m, "BatchNormalization").key, "batch_normalization:a", 8, true);
  const auto b = analyze_model(m, t.costs());
  EXPECT_DOUBLE_EQ(b.F, 168 - 8);
}

TEST(Bounds, RooflineFromCalibratedPeaksAndMissingMeasurementsFallBackToIt) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  t.peaks(1e9, 1e9);  // 1 GFLOP/s, 1 GB/s: a layer's roofline time is max(FLOPs, bytes) ns
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}});
  // Tanh: no case passed.
  const auto b = analyze_model(m, t.costs());
  // Each layer reads and writes 1000 f32: 8000 bytes → 8 µs, more than its FLOPs' time.
  for (const auto& l : b.layers) {
    EXPECT_EQ(l.bytes, 8000) << l.kind;
    ASSERT_TRUE(l.roofline_us);
    EXPECT_DOUBLE_EQ(*l.roofline_us, 8.0) << l.kind;
  }
  ASSERT_TRUE(b.R);
  EXPECT_DOUBLE_EQ(*b.R, 24);
  EXPECT_DOUBLE_EQ(b.S, 10 + 20 + 8);  // Tanh costed by its roofline, never 0
  EXPECT_EQ(b.roofline_layers, 1);
  EXPECT_NEAR(b.measured_fraction, 30.0 / 38.0, 1e-12);
  EXPECT_TRUE(b.complete);
  const auto fs = advise(b);
  const Finding* eff = finding(fs, "efficiency");
  ASSERT_NE(eff, nullptr);
  EXPECT_DOUBLE_EQ(eff->saving_us, 38 - 24);
  ASSERT_FALSE(eff->items.empty());
  EXPECT_DOUBLE_EQ(eff->items[0].saving_us, 12);  // Sigmoid: 20 vs 8
}

TEST(Bounds, NoMeasurementAndNoPeaksLeavesTheLayerUntimedNotFree) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  t.time(layer(m, "Relu").key, "eltwise:a", 10, true);
  const auto b = analyze_model(m, t.costs());
  EXPECT_EQ(b.untimed_layers, 2);
  EXPECT_FALSE(b.complete);
  EXPECT_DOUBLE_EQ(b.S, 10);
  EXPECT_DOUBLE_EQ(b.measured_fraction, 1.0);
  int none = 0;
  for (const auto& l : b.layers) none += l.source == CostSource::kNone ? 1 : 0;
  EXPECT_EQ(none, 2);
}

TEST(Bounds, RooflineFlopsLeaveOutTheTapsOnPadding) {
  const auto m = process(kConvs, "convs");
  // 3x3, pads 1 on 8x8: per spatial dim 8 outputs x 3 taps = 24 pairs, 2 of them on padding.
  const auto& conv = layer(m, "Conv", 0);
  EXPECT_EQ(conv.flops, 2 * 4 * 4 * 8 * 8 * 9);
  EXPECT_EQ(roofline_flops(conv), 2 * 4 * 4 * 22 * 22);
  EXPECT_EQ(roofline_flops(layer(m, "Conv", 1)), layer(m, "Conv", 1).flops);  // 1x1, no padding
}

TEST(Bounds, RaisePeaksToTheFastestMeasuredRate) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  t.peaks(1e9, 1e8);
  t.time(layer(m, "Relu").key, "eltwise:a", 10, true);  // 8000 bytes in 10 µs: 0.8 GB/s
  auto costs = t.costs();
  raise_peaks(costs, {m}, "f32");
  EXPECT_DOUBLE_EQ((costs.peaks[{"bytes", "f32"}]), 8e8);
  EXPECT_DOUBLE_EQ((costs.calibrated_peaks[{"bytes", "f32"}]), 1e8);
  EXPECT_DOUBLE_EQ((costs.peaks[{"flops", "f32"}]), 1e9);  // 1000 FLOPs in 10 µs is below it
  ASSERT_EQ(costs.peak_notes.size(), 1u);
}

TEST(Bounds, ReducedPrecisionAndFrameworkLatency) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  t.time(layer(m, "Sigmoid").key, "eltwise:a", 12, true, "", "bf16");
  benchdb::FrameworkLatencyRow fw;
  fw.model_name = "diamond";
  fw.runtime = "pytorch";
  fw.runtime_version = "1.13";
  fw.device = "cpu";
  fw.settings = "eager";
  fw.threads = 1;
  fw.median_us = 84;
  fw.repetitions = 10;
  TestDb::value(t.db.upsert_framework_latency(fw));
  fw.threads = 2;  // another thread count: not comparable with these measurements
  fw.median_us = 50;
  TestDb::value(t.db.upsert_framework_latency(fw));
  const auto b = analyze_model(m, t.costs());
  ASSERT_EQ(b.reduced.size(), 1u);
  EXPECT_EQ(b.reduced[0].math_mode, "bf16");
  EXPECT_DOUBLE_EQ(b.reduced[0].us, 42 - 8);
  EXPECT_EQ(b.reduced[0].layers_reduced, 1);
  EXPECT_EQ(b.reduced[0].layers_kept, 3);
  ASSERT_TRUE(b.M);
  EXPECT_DOUBLE_EQ(*b.M, 84);
  const auto fs = advise(b);
  const Finding* pr = finding(fs, "precision");
  ASSERT_NE(pr, nullptr);
  EXPECT_DOUBLE_EQ(pr->saving_us, 8);
  ASSERT_EQ(pr->items.size(), 1u);
  EXPECT_EQ(pr->items[0].label, "Sigmoid");
  const Finding* fwf = finding(fs, "framework");
  ASSERT_NE(fwf, nullptr);
  EXPECT_DOUBLE_EQ(fwf->saving_us, 42);
  EXPECT_NE(fwf->summary.find("2.00x the sequential bound S"), std::string::npos);
}

// The runtime per layer: a fused node against the sum of its layers' best cases, violations
// (runtime faster than the best cases) and losses ordered by µs, reorders as runtime-only work,
// and the profile of the settings whose end-to-end latency is M.
TEST(RuntimeLayers, FusedNodesAgainstTheSumOfTheirLayersViolationsAndLosses) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  auto node = [&](int64_t order, const std::string& name, const std::string& op, double us,
                  std::vector<std::string> layers, const std::string& settings) {
    benchdb::FrameworkLayerTimeRow r;
    r.model_name = "diamond";
    r.runtime = "onnxruntime";
    r.runtime_version = "1.30.0";
    r.device = "cpu";
    r.settings = settings;
    r.threads = 1;
    r.node_order = order;
    r.node_name = name;
    r.op = op;
    r.layers = nlohmann::json(layers).dump();
    r.median_us = us;
    r.runs = 3;
    r.measured_at = "2026-11-23T10:00:00Z";
    return r;
  };
  const std::string relu = layer(m, "Relu").name, sig = layer(m, "Sigmoid").name,
                    tanh = layer(m, "Tanh").name, add = layer(m, "Add").name;
  const std::string all = "graph_optimization=all", off = "graph_optimization=disabled";
  TestDb::value(t.db.replace_framework_layer_times({
      node(0, "relu", "Relu", 16, {relu}, all),                    // loses 6
      node(1, "fused", "FusedSigmoidTanh", 12, {sig, tanh}, all),  // 12 < 20 + 5: a violation of 13
      node(2, "reorder", "ReorderOutput", 3, {}, all),             // runtime-only
      node(3, "add", "Add", 9, {add}, all),                        // loses 2
  }));
  // The disabled setting's profile: slower end to end, so not the one compared.
  TestDb::value(t.db.replace_framework_layer_times({node(0, "relu", "Relu", 1, {relu}, off)}));
  for (const auto& [settings, us] : {std::pair{all, 45.0}, std::pair{off, 60.0}}) {
    benchdb::FrameworkLatencyRow fw;
    fw.model_name = "diamond";
    fw.runtime = "onnxruntime";
    fw.runtime_version = "1.30.0";
    fw.device = "cpu";
    fw.settings = settings;
    fw.threads = 1;
    fw.median_us = us;
    TestDb::value(t.db.upsert_framework_latency(fw));
  }
  auto report = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_TRUE(report->models[0].runtime_layers);
  const RuntimeComparison& c = *report->models[0].runtime_layers;
  EXPECT_EQ(c.settings, all);
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_DOUBLE_EQ(c.runtime_us, 16 + 12 + 3 + 9);
  EXPECT_DOUBLE_EQ(c.runtime_only_us, 3);
  EXPECT_DOUBLE_EQ(c.compared_runtime_us, 16 + 12 + 9);
  EXPECT_DOUBLE_EQ(c.compared_best_us, 10 + 25 + 7);
  EXPECT_EQ(c.layers_not_run, 0);
  EXPECT_EQ(c.nodes[1].kinds, "Sigmoid+Tanh");
  ASSERT_TRUE(c.nodes[1].best_us);
  EXPECT_DOUBLE_EQ(*c.nodes[1].best_us, 25);
  EXPECT_FALSE(c.nodes[2].best_us);
  ASSERT_EQ(c.violations, (std::vector<size_t>{1}));
  EXPECT_EQ(c.losses, (std::vector<size_t>{0, 3}));  // 6 µs, then 2 µs
  EXPECT_EQ(c.nodes[1].best_cases.size(), 2u);
  EXPECT_NE(c.nodes[1].best_cases[0].find("onednn/default"), std::string::npos);

  // The reports: table lines, JSON object, HTML section.
  const std::string table = format_table(*report, false, 3);
  EXPECT_NE(table.find("1 bound violation(s)"), std::string::npos) << table;
  EXPECT_NE(table.find("fused [FusedSigmoidTanh] Sigmoid+Tanh"), std::string::npos) << table;
  const auto json = nlohmann::json::parse(format_json(*report));
  const auto& rl = json["models"][0]["runtime_layers"];
  EXPECT_EQ(rl["violations"], nlohmann::json::array({1}));
  EXPECT_EQ(rl["nodes"][1]["best_us"], 25.0);
  EXPECT_EQ(rl["nodes"][1]["violation"], true);
  const std::string html = format_html(*report);
  EXPECT_NE(html.find("Runtime vs bound per layer"), std::string::npos);
  EXPECT_NE(html.find("id=\"runtime-diamond-b1\""), std::string::npos);
  EXPECT_NE(html.find("<b>1 bound violation(s)</b>"), std::string::npos);

  // Another model with no profile has no comparison, and its JSON no key.
  const auto chain = process(kChain, "chain");
  TestDb u({chain});
  u.times(chain, {{"Relu", 1}, {"Sigmoid", 1}, {"Tanh", 1}});
  auto plain = build_report(u.db, {chain}, std::nullopt);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->models[0].runtime_layers);
  EXPECT_FALSE(nlohmann::json::parse(format_json(*plain))["models"][0].contains("runtime_layers"));
}

// Fusion wins apart from violations, on the real ONNX Runtime profile of the zoo's ResNet-18
// (tests/fixtures/ort: NCHWc convolutions computing their Relu and residual Add+Relu). Each case is
// timed here relative to the real node's time: conv1's Relu is in S at what its fused Conv+Relu case
// (1.05x) adds to the conv (0.9x), and the runtime's fused node (1x) beats that: a violation of a
// fused node below a measured fused case; layer1.0's conv2+Add+Relu node beats its unfused cases
// (1.2x) but not the measured fused Conv+Add+Relu case (0.95x), which F has: a fusion win; the
// downsampling conv runs alone and is faster than its one case (a violation, no fusion involved).
TEST(RuntimeLayers, ResnetFusedNodesCompareWithTheEpiloguesSCounts) {
  const std::filesystem::path src = FLOORLINE_SOURCE_DIR;
  auto processed = mp::process_model(src / "models/zoo/resnet18.onnx", {});
  ASSERT_TRUE(processed.ok()) << processed.error().message;
  const mp::ModelIR m = processed->front();
  auto profile = mp::read_onnxruntime_profile(src / "tests/fixtures/ort/resnet18_b1_all.profile.json",
                                              src / "models/zoo/resnet18.onnx",
                                              src / "tests/fixtures/ort/resnet18_b1_all.optimized.onnx");
  ASSERT_TRUE(profile.ok()) << profile.error().message;
  TestDb t({m});
  std::vector<benchdb::FrameworkLayerTimeRow> rows;
  for (const auto& n : profile->nodes) {
    benchdb::FrameworkLayerTimeRow r;
    r.model_name = m.name;
    r.runtime = "onnxruntime";
    r.runtime_version = "1.30.0";
    r.device = "cpu";
    r.settings = "graph_optimization=all";
    r.threads = 1;
    r.node_order = static_cast<int64_t>(rows.size());
    r.node_name = n.node;
    r.op = n.op;
    r.layers = nlohmann::json(n.layers).dump();
    r.median_us = n.median_us;
    r.min_us = n.min_us;
    r.runs = n.runs;
    r.measured_at = "2026-11-23T10:00:00Z";
    rows.push_back(std::move(r));
  }
  TestDb::value(t.db.replace_framework_layer_times(rows));
  auto runtime_us = [&](const std::string& node) {
    for (const auto& n : profile->nodes)
      if (n.node == node) return n.median_us;
    throw std::runtime_error("no runtime node " + node);
  };
  auto key = [&](const std::string& name) {
    for (const auto& l : m.layers)
      if (l.name == name) return l.key;
    throw std::runtime_error("no layer " + name);
  };
  const std::string conv1_node = "/relu/Relu_output_0_nchwc",
                    block_node = "/layer1/layer1.0/conv2/Conv_output_0_nchwc",
                    down_node = "/layer2/layer2.0/downsample/downsample.0/Conv_output_0_nchwc";
  const double r1 = runtime_us(conv1_node), r2 = runtime_us(block_node), r3 = runtime_us(down_node);
  ASSERT_GT(r1, 0);
  t.time(key("/conv1/Conv"), "brg", 0.9 * r1, true);
  t.time(key("/relu/Relu"), "eltwise", 0.3 * r1, true);
  t.time(key("/conv1/Conv"), "brg", 1.05 * r1, false, "Relu");
  // layer1.0 and layer1.1 share these configs: both blocks' nodes are costed alike.
  t.time(key("/layer1/layer1.0/conv2/Conv"), "brg", 0.8 * r2, true);
  t.time(key("/layer1/layer1.0/Add"), "binary", 0.2 * r2, true);
  t.time(key("/layer1/layer1.0/relu_1/Relu"), "eltwise", 0.2 * r2, true);
  t.time(key("/layer1/layer1.0/conv2/Conv"), "brg", 0.95 * r2, false, "Add+Relu");
  t.time(key("/layer2/layer2.0/downsample/downsample.0/Conv"), "jit_1x1", 1.5 * r3, true);

  auto report = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_TRUE(report->models[0].runtime_layers);
  const RuntimeComparison& c = *report->models[0].runtime_layers;
  auto at = [&](const std::string& node) -> size_t {
    for (size_t k = 0; k < c.nodes.size(); ++k)
      if (c.nodes[k].node == node) return k;
    throw std::runtime_error("not compared: " + node);
  };
  // S counts the Relu in conv1's epilogue (docs/ANALYZER.md): the node's best is its fused case's
  // 1.05 r1 already (no fusion left for F), and the runtime's node is below it.
  const auto& conv1 = c.nodes[at(conv1_node)];
  EXPECT_EQ(conv1.kinds, "Conv+Relu");
  EXPECT_NEAR(*conv1.best_us, 1.05 * r1, 1e-9 * r1);
  EXPECT_NEAR(*conv1.best_fused_us, 1.05 * r1, 1e-9 * r1);
  EXPECT_TRUE(conv1.fusions.empty());
  EXPECT_EQ(conv1.epilogues, (std::vector<std::string>{"Relu"}));
  ASSERT_EQ(conv1.best_cases.size(), 2u);
  EXPECT_NE(conv1.best_cases[1].find("+Relu"), std::string::npos) << conv1.best_cases[1];
  EXPECT_TRUE(conv1.violation());
  EXPECT_FALSE(conv1.fusion_win());
  // The residual Add and its Relu are conv2's epilogue in S too: the node's best is the fused case's
  // 0.95 r2 (not the unfused 1.2 r2), below the runtime's node, and no fusion is left for F.
  const auto& block = c.nodes[at(block_node)];
  EXPECT_EQ(block.kinds, "Conv+Add+Relu");
  EXPECT_NEAR(*block.best_us, 0.95 * r2, 1e-9 * r2);
  EXPECT_NEAR(*block.best_fused_us, 0.95 * r2, 1e-9 * r2);
  EXPECT_TRUE(block.fusions.empty());
  EXPECT_EQ(block.epilogues, (std::vector<std::string>{"Add", "Relu"}));
  EXPECT_FALSE(block.below_unfused());
  EXPECT_FALSE(block.violation());
  EXPECT_FALSE(block.fusion_win());
  const auto& down = c.nodes[at(down_node)];
  EXPECT_EQ(down.kinds, "Conv");
  EXPECT_DOUBLE_EQ(*down.best_fused_us, *down.best_us);  // no fused case inside the node
  EXPECT_TRUE(down.fusion_win() == false && down.violation());
  EXPECT_TRUE(down.fusions.empty());
  // Violations, largest (best_fused − runtime) first; no fusion win is left. layer1.1's conv2 node
  // has the same cases but ran 3.3x their unfused sum in the fixture: a loss.
  const std::vector<size_t> violations = 1.05 * r1 - r1 > 1.5 * r3 - r3
                                             ? std::vector<size_t>{at(conv1_node), at(down_node)}
                                             : std::vector<size_t>{at(down_node), at(conv1_node)};
  EXPECT_EQ(c.violations, violations);
  EXPECT_TRUE(c.fusion_wins.empty());
  const auto& block2 = c.nodes[at("/layer1/layer1.1/conv2/Conv_output_0_nchwc")];
  EXPECT_NEAR(*block2.best_fused_us, 0.95 * r2, 1e-9 * r2);
  EXPECT_FALSE(block2.below_unfused());

  const std::string table = format_table(*report, false, 3);
  EXPECT_NE(table.find("2 bound violation(s)"), std::string::npos) << table;
  EXPECT_NE(table.find("1 of one layer, 1 fused below a measured fused case, 0 fused with none measured"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("1 fusion win(s)"), std::string::npos) << table;
  const auto json = nlohmann::json::parse(format_json(*report));
  const auto& rl = json["models"][0]["runtime_layers"];
  EXPECT_EQ(rl["fusion_wins"], nlohmann::json::array());
  EXPECT_EQ(rl["violations"].size(), 2u);
  const auto& j1 = rl["nodes"][at(conv1_node)];
  EXPECT_EQ(j1["violation"], true);
  EXPECT_EQ(j1["fusion_win"], false);
  EXPECT_NEAR(j1["best_us"].get<double>(), 1.05 * r1, 1e-9 * r1);
  EXPECT_EQ(j1["fusions"], nlohmann::json::array());
  EXPECT_EQ(j1["epilogues"], nlohmann::json::array({"Relu"}));
  const std::string html = format_html(*report);
  EXPECT_NE(html.find("<b>2 bound violation(s)</b>"), std::string::npos);
  EXPECT_EQ(html.find("<b>1 fusion win(s)</b>"), std::string::npos);
}

// An attention S takes at its fused case (the scores' MatMul, the Softmax and the product by V as
// one case, 20 µs against 10 + 8 + 10 unfused): the Softmax carries what the case adds to the
// scores' MatMul (10) and the product by V 0. A runtime that runs the three as three nodes is
// compared on their sum, as one row: its Softmax node alone (4 µs) is no violation of the 10.
TEST(RuntimeLayers, AnAttentionRunAsSeveralNodesComparesWithItsFusedCaseOnTheirSum) {
  const auto m = process(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
attn (float[1,4,6,8] q, float[1,4,8,6] kt, float[1,4,6,8] v) => (float y) {
  s = MatMul (q, kt)
  p = Softmax <axis = -1> (s)
  y = MatMul (p, v)
}
)onnx",
                         "attn");
  const auto& scores = layer(m, "MatMul", 0);
  const auto& softmax = layer(m, "Softmax");
  const auto& by_v = layer(m, "MatMul", 1);
  auto node = [&](int64_t order, const std::string& name, const std::string& op, double us,
                  const std::string& layer_name) {
    benchdb::FrameworkLayerTimeRow r;
    r.model_name = "attn";
    r.runtime = "onnxruntime";
    r.runtime_version = "1.30.0";
    r.device = "cpu";
    r.settings = "graph_optimization=all";
    r.threads = 1;
    r.node_order = order;
    r.node_name = name;
    r.op = op;
    r.layers = nlohmann::json(std::vector<std::string>{layer_name}).dump();
    r.median_us = us;
    r.runs = 3;
    r.measured_at = "2026-11-23T10:00:00Z";
    return r;
  };
  for (const double softmax_node_us : {4.0, 1.0}) {
    TestDb t({m});
    t.time(scores.key, "default", 10, true);
    t.time(softmax.key, "default", 8, true);
    t.time(by_v.key, "default", 10, true);
    t.time(scores.key, "attention", 20, false, "Softmax+MatMul(1x4x6x8)");
    TestDb::value(t.db.replace_framework_layer_times({
        node(0, "mm1", "FusedMatMul", 9, scores.name),
        node(1, "sm", "Softmax", softmax_node_us, softmax.name),
        node(2, "mm2", "MatMul", 9, by_v.name),
    }));
    auto report = build_report(t.db, {m}, std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().message;
    const auto& b = report->models[0].bounds;
    EXPECT_DOUBLE_EQ(b.S, 20);
    ASSERT_TRUE(report->models[0].runtime_layers);
    const RuntimeComparison& c = *report->models[0].runtime_layers;
    ASSERT_EQ(c.nodes.size(), 1u);
    const auto& n = c.nodes[0];
    EXPECT_EQ(n.node, "mm1 + sm + mm2");
    EXPECT_EQ(n.op, "FusedMatMul+Softmax+MatMul");
    EXPECT_EQ(n.kinds, "MatMul+Softmax+MatMul");
    EXPECT_DOUBLE_EQ(n.runtime_us, 18 + softmax_node_us);
    EXPECT_DOUBLE_EQ(*n.best_us, 20);
    EXPECT_DOUBLE_EQ(c.runtime_us, 18 + softmax_node_us);
    // 22 µs: the runtime loses by 2; 19 µs: one violation, the whole chain's.
    EXPECT_EQ(n.violation(), softmax_node_us < 2);
    EXPECT_EQ(c.violations.size(), softmax_node_us < 2 ? 1u : 0u);
  }
}

// The validity check: every framework latency and the replay against S = 10 + 20 + 5 + 7 = 42 µs;
// the layers responsible from the profile of the violating runtime identity.
TEST(BoundCheck, LatenciesBelowSAreViolationsWithTheFasterRuntimeNodes) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  const std::string all = "graph_optimization=all", off = "graph_optimization=disabled";
  auto node = [&](int64_t order, const std::string& name, const std::string& op, double us,
                  std::vector<std::string> layers) {
    benchdb::FrameworkLayerTimeRow r;
    r.model_name = "diamond";
    r.runtime = "onnxruntime";
    r.runtime_version = "1.30.0";
    r.device = "cpu";
    r.settings = all;
    r.threads = 1;
    r.node_order = order;
    r.node_name = name;
    r.op = op;
    r.layers = nlohmann::json(layers).dump();
    r.median_us = us;
    r.runs = 3;
    r.measured_at = "2026-11-23T10:00:00Z";
    return r;
  };
  TestDb::value(t.db.replace_framework_layer_times({
      node(0, "relu", "Relu", 8, {layer(m, "Relu").name}),  // 2 below
      node(1, "fused", "FusedSigmoidTanh", 12,
           {layer(m, "Sigmoid").name, layer(m, "Tanh").name}),  // 13 below
      node(2, "add", "Add", 9, {layer(m, "Add").name}),         // loses
  }));
  for (const auto& [runtime, settings, us] :
       {std::tuple{"onnxruntime", all, 30.0}, std::tuple{"onnxruntime", off, 50.0},
        std::tuple{"pytorch", std::string("eager"), 41.0}}) {
    benchdb::FrameworkLatencyRow fw;
    fw.model_name = "diamond";
    fw.runtime = runtime;
    fw.runtime_version = std::string(runtime) == "pytorch" ? "1.13.1" : "1.30.0";
    fw.device = "cpu";
    fw.settings = settings;
    fw.threads = 1;
    fw.median_us = us;
    TestDb::value(t.db.upsert_framework_latency(fw));
  }
  benchdb::ReplayRow rp;
  rp.model_name = "diamond";
  rp.system_id = t.system;
  rp.median_us = 43;  // above S: no violation
  rp.measured_at = "2026-11-23T10:00:00Z";
  TestDb::value(t.db.upsert_replay(rp));

  auto report = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().message;
  const BoundCheck& c = report->models[0].bound_check;
  EXPECT_EQ(c.latencies, 3);
  EXPECT_TRUE(c.replay);
  ASSERT_EQ(c.violations.size(), 2u);  // ORT all (30) and PyTorch (41); not ORT disabled (50), not the replay
  const BoundViolation* ort = nullptr;
  const BoundViolation* pt = nullptr;
  for (const auto& v : c.violations) (v.runtime == "pytorch" ? pt : ort) = &v;
  ASSERT_TRUE(ort && pt);
  EXPECT_EQ(ort->settings, all);
  EXPECT_DOUBLE_EQ(ort->S_us, 42);
  EXPECT_DOUBLE_EQ(ort->ratio(), 30.0 / 42);
  EXPECT_TRUE(ort->profiled);
  ASSERT_EQ(ort->nodes.size(), 2u);  // largest gap first
  EXPECT_EQ(ort->nodes[0].node, "fused");
  EXPECT_EQ(ort->nodes[0].op, "FusedSigmoidTanh");
  EXPECT_EQ(ort->nodes[0].kinds, "Sigmoid+Tanh");
  EXPECT_DOUBLE_EQ(ort->nodes[0].runtime_us, 12);
  EXPECT_DOUBLE_EQ(ort->nodes[0].best_us, 25);
  ASSERT_EQ(ort->nodes[0].best_cases.size(), 2u);
  EXPECT_NE(ort->nodes[0].best_cases[0].find("onednn/default"), std::string::npos);
  EXPECT_EQ(ort->nodes[1].node, "relu");
  EXPECT_DOUBLE_EQ(ort->nodes_gap_us, 13 + 2);
  EXPECT_FALSE(pt->profiled);
  EXPECT_TRUE(pt->nodes.empty());

  const ValiditySummary s = validity_summary(*report);
  EXPECT_EQ(s.model_batches, 1);
  EXPECT_EQ(s.latencies, 3);
  EXPECT_EQ(s.replays, 1);
  EXPECT_EQ(s.violating, 1);
  EXPECT_EQ(s.violations, 2);
  const std::string line = validity_line(*report);
  EXPECT_NE(line.find("2 BOUND VIOLATION(S) in 1 of 1 model/batch(es)"), std::string::npos) << line;
  EXPECT_NE(line.find("diamond b1 onnxruntime 1.30.0 graph_optimization=all, 1 thread 0.71"),
            std::string::npos)
      << line;
  const std::string table = format_table(*report, false, 3);
  EXPECT_NE(table.find("bound violations"), std::string::npos) << table;
  EXPECT_NE(table.find("fused [FusedSigmoidTanh] Sigmoid+Tanh"), std::string::npos) << table;
  EXPECT_NE(table.find("no per-layer profile of this runtime was imported"), std::string::npos) << table;
  const auto json = nlohmann::json::parse(format_json(*report));
  const auto& bc = json["bound_check"];
  EXPECT_EQ(bc["violating"], 1);
  ASSERT_EQ(bc["violations"].size(), 2u);
  EXPECT_EQ(bc["violations"][0]["nodes"][0]["best_us"], 25.0);
  const std::string html = format_html(*report);
  EXPECT_NE(html.find("id=\"bound-violations\""), std::string::npos);

  // The replay below S is one too; with every latency above S the check holds.
  rp.median_us = 40;
  rp.measured_at = "2026-11-23T11:00:00Z";
  TestDb::value(t.db.upsert_replay(rp));
  auto again = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->models[0].bound_check.violations.size(), 3u);
  EXPECT_TRUE(again->models[0].bound_check.violations.back().replay);
  const auto chain = process(kChain, "chain");
  TestDb u({chain});
  u.times(chain, {{"Relu", 1}, {"Sigmoid", 1}, {"Tanh", 1}});
  auto plain = build_report(u.db, {chain}, std::nullopt);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->models[0].bound_check.violations.empty());
  EXPECT_EQ(validity_line(*plain),
            "bound check: no framework latency or replay to compare with S (1 model/batch(es))");
}

// A replay below S names the layers whose time in the replayed graph is below their share of S
// (their case's time alone), largest gap first; S = 10 + 20 + 5 + 7 = 42 µs, the replay 40 µs.
TEST(BoundCheck, AReplayBelowSNamesTheLayersFasterInTheGraph) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  auto times = [&](std::initializer_list<std::tuple<const char*, double, double>> l) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [op, replay_us, case_us] : l)
      a.push_back({{"layer", layer(m, op).name}, {"op", op}, {"replay_us", replay_us}, {"case_us", case_us}});
    return a;
  };
  benchdb::ReplayRow rp;
  rp.model_name = "diamond";
  rp.system_id = t.system;
  rp.median_us = 40;
  rp.measured_at = "2026-11-23T10:00:00Z";
  rp.makeup = nlohmann::json{{"layers", 4},
                             {"conversions", 0},
                             {"conversions_us", 0.0},
                             {"layer_times", times({{"Relu", 6, 10},  // 4 below
                                                    {"Sigmoid", 21, 20},
                                                    {"Tanh", 4, 5},  // 1 below
                                                    {"Add", 7, 7}})}}
                  .dump();
  TestDb::value(t.db.upsert_replay(rp));
  auto report = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->models[0].bound_check.violations.size(), 1u);
  const BoundViolation& v = report->models[0].bound_check.violations[0];
  EXPECT_TRUE(v.replay);
  EXPECT_TRUE(v.profiled);
  ASSERT_EQ(v.nodes.size(), 2u);
  EXPECT_EQ(v.nodes[0].node, layer(m, "Relu").name);
  EXPECT_EQ(v.nodes[0].layers, std::vector<std::string>{layer(m, "Relu").name});
  EXPECT_EQ(v.nodes[0].op, "Relu");
  EXPECT_EQ(v.nodes[0].kinds, "Relu");
  EXPECT_DOUBLE_EQ(v.nodes[0].runtime_us, 6);
  EXPECT_DOUBLE_EQ(v.nodes[0].best_us, 10);
  ASSERT_EQ(v.nodes[0].best_cases.size(), 1u);
  EXPECT_NE(v.nodes[0].best_cases[0].find("onednn/default"), std::string::npos);
  EXPECT_EQ(v.nodes[1].node, layer(m, "Tanh").name);
  EXPECT_DOUBLE_EQ(v.nodes_gap_us, 4 + 1);
  const std::string table = format_table(*report, false, 3);
  EXPECT_NE(table.find("6.0 µs vs best       10.0 µs (0.60x)  " + layer(m, "Relu").name + " [Relu] Relu"),
            std::string::npos)
      << table;
  const auto json = nlohmann::json::parse(format_json(*report));
  const auto& jv = json["bound_check"]["violations"][0];
  EXPECT_EQ(jv["source"], "replay");
  EXPECT_EQ(jv["nodes"].size(), 2u);
  EXPECT_EQ(jv["nodes"][1]["runtime_us"], 4.0);
  EXPECT_EQ(jv["nodes_gap_us"], 5.0);
  EXPECT_NE(format_html(*report).find("<tr><td>" + layer(m, "Relu").name + "</td><td>Relu</td>"),
            std::string::npos);

  // A replay row without per-layer times (from before they were recorded) names none, and says so.
  rp.makeup = R"({"layers":4,"conversions":0,"conversions_us":0})";
  rp.measured_at = "2026-11-23T11:00:00Z";
  TestDb::value(t.db.upsert_replay(rp));
  auto old = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(old.ok());
  const BoundViolation& o = old->models[0].bound_check.violations.at(0);
  EXPECT_FALSE(o.profiled);
  EXPECT_TRUE(o.nodes.empty());
  EXPECT_NE(format_table(*old, false, 3).find("the replay recorded no per-layer times"), std::string::npos);
}

// --- golden outputs ---------------------------------------------------------------------------

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void expect_golden(const std::string& name, const std::string& got) {
  const std::filesystem::path path =
      std::filesystem::path(FLOORLINE_SOURCE_DIR) / "tests/analyzer/golden" / name;
  if (const char* u = std::getenv("FLOORLINE_UPDATE_GOLDEN"); u && *u == '1') {
    std::ofstream(path) << got;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " (FLOORLINE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(got, read(path)) << "golden file " << path << " differs (FLOORLINE_UPDATE_GOLDEN=1 rewrites it)";
}

Report golden_report() {
  const auto diamond = process(kDiamond, "diamond");
  const auto convs = process(kConvs, "convs");
  TestDb t({diamond, convs});
  t.peaks(1e9, 1e9);
  t.time(layer(diamond, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(diamond, "Sigmoid").key, "eltwise:a", 20, true);
  t.time(layer(diamond, "Sigmoid").key, "eltwise:b", 18, false);
  t.time(layer(diamond, "Tanh").key, "eltwise:a", 5, true);
  t.time(layer(diamond, "Add").key, "binary:a", 7, true);
  const auto& conv = layer(convs, "Conv", 0);
  t.time(conv.key, "convolution_direct:blocked", 100, true, "", "f32", "src:aBcd8b wei:ABcd8b8a dst:aBcd8b",
         R"({"conversions":["src:abcd>aBcd8b","dst:aBcd8b>abcd"]})");
  t.time(conv.key, "reorder", 3, false, "", "f32", conversion_layout({"src", "abcd", "aBcd8b"}), "{}",
         CaseFeeds{"convolution_direct:blocked", ""});
  t.time(conv.key, "convolution_direct:blocked", 104, true, "Relu");
  t.time(layer(convs, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(convs, "Conv", 1).key, "convolution_direct:a", 50, true);
  // BatchNormalization: not measured, costed by its roofline.
  auto r = build_report(t.db, {diamond, convs}, std::nullopt);
  if (!r) throw std::runtime_error(r.error().message);
  r->database = "test.db";
  return std::move(r).value();
}

// S_vendor from a database: the diamond (2000 f32 per tensor) with oneDNN and floorline cases, peaks
// 100 GFLOP/s and 10 GB/s (no case runs faster, so the report raises neither), so Tanh's roofline
// time is its 16000 bytes / 10 GB/s = 1.6 µs:
//   Relu     oneDNN 10                     S 10   S_vendor 10
//   Sigmoid  oneDNN 20, floorline 12       S 12   S_vendor 20
//   Tanh     floorline 5 only              S 5    S_vendor 1.6 (roofline, flagged: only ours ran it)
//   Add      oneDNN 7                      S 7    S_vendor 7
// S = 34, S_vendor = 38.6; JSON and CSV carry S_vendor_us beside S_us.
TEST(Bounds, SVendorTakesTheVendorsCasesOnly) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.peaks(1e11, 1e10);
  t.time(layer(m, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(m, "Sigmoid").key, "eltwise:a", 20, true);
  t.time(layer(m, "Add").key, "binary:a", 7, true);
  t.backend = "floorline";
  t.time(layer(m, "Sigmoid").key, "sigmoid", 12, true);
  t.time(layer(m, "Tanh").key, "tanh", 5, true);
  const CostTable costs = t.costs();
  ModelBounds b = analyze_model(m, costs);
  EXPECT_DOUBLE_EQ(b.S, 34);
  EXPECT_NEAR(b.S_vendor, 38.6, 1e-9);
  EXPECT_EQ(b.vendor_roofline_layers, 1);
  auto r = build_report(t.db, {m}, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto j = nlohmann::json::parse(format_json(*r));
  const auto& model = j["models"][0];
  EXPECT_DOUBLE_EQ(model["S_us"].get<double>(), 34);
  EXPECT_NEAR(model["S_vendor_us"].get<double>(), 38.6, 1e-9);
  const std::string csv = format_csv(*r, false);
  EXPECT_NE(csv.find(",S_us,S_vendor_us,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",34.0,38.6,"), std::string::npos) << csv;
  const std::string table = format_table(*r, false, 3);
  EXPECT_NE(table.find("S_vendor_us"), std::string::npos);
  EXPECT_NE(table.find("1 layer(s) run only by Floorline's own kernels costed by roofline in S_vendor"),
            std::string::npos)
      << table;
}

// The per-case time S takes is the lowest repetition mean, and the intervals come from the
// repetitions. The samples are repetition means (µs) of three cases `floorline bench` timed on the
// project's loaded 2-core machine, one array per pass: a neighbour on the core makes
// some repetitions, and one whole pass of the second, 2.3x slower.
TEST(Bounds, SIsTheSumOfLowestRepetitionMeansWithABootstrapInterval) {
  const auto m = process(kChain, "chain");
  TestDb t({m});
  struct Row {
    const char* op;
    double min_us, median_us;
    int64_t passes, slowed;
    const char* samples;
  };
  const Row rows[] = {
      {"Relu", 118, 118.1, 3, 0, "[[119,276.4,119.4],[143.2,119.2,118],[124,118,118.1]]"},
      {"Sigmoid", 128.1, 128.3, 4, 1,
       "[[298.4,299.9,298],[464.6,129.7,467.7],[140.9,128.1,128.3],[143.3,140,141.5]]"},
      {"Tanh", 4.118, 4.149, 3, 0, "[[4.124,7.532,4.19],[9.542,4.168,10.56],[4.118,4.239,4.149]]"},
  };
  for (const auto& r : rows) {
    auto q = TestDb::value(t.db.query("SELECT id FROM layer_configs WHERE key = ?1", {layer(m, r.op).key}));
    benchdb::CaseRow c;
    c.config_id = std::get<int64_t>(q.rows.at(0)[0]);
    c.identity = {"onednn", "default", "f32", "fp32", "", "", layer(m, r.op).key};
    benchdb::MeasurementRow row;
    row.case_id = TestDb::value(t.db.upsert_case(c));
    row.status = Disposition::kPassed;
    row.is_default = 1;
    row.iterations = 100;
    row.repetitions = 3 * r.passes;
    row.min_us = r.min_us;
    row.median_us = row.mean_us = r.median_us;
    row.passes = row.placements = r.passes;
    row.slowed = r.slowed;
    row.samples_us = r.samples;
    benchdb::MeasurementWriter w(t.db, t.system, t.run);
    TestDb::check(w.add(std::move(row)));
    TestDb::check(w.flush());
  }
  const CostTable costs = t.costs();
  EXPECT_EQ(costs.method.cases, 3);
  EXPECT_EQ(costs.method.slowed_cases, 1);
  EXPECT_EQ(costs.method.min_passes, 3);
  EXPECT_EQ(costs.method.max_passes, 4);
  ModelBounds b = analyze_model(m, costs);
  EXPECT_DOUBLE_EQ(b.S, 118 + 128.1 + 4.118);
  EXPECT_DOUBLE_EQ(b.H, b.S);
  ASSERT_EQ(b.layers.size(), 3u);
  EXPECT_EQ(b.layers[1].passes, 4);
  EXPECT_EQ(b.layers[1].placements, 4);
  EXPECT_NEAR(b.layers[1].spread, 464.6 / 128.3 - 1, 1e-12);  // the pass medians: 298.4 .. 464.6 .. 128.3
  EXPECT_FALSE(b.S_ci);
  confidence_intervals({m}, costs, {}, {&b});
  ASSERT_TRUE(b.S_ci && b.P_ci && b.F_ci);
  // One-sided: a resampled minimum is never below the minimum, and here it is often above it.
  EXPECT_DOUBLE_EQ(b.S_ci->lo, b.S);
  EXPECT_GT(b.S_ci->hi, b.S);
  EXPECT_LT(b.S_ci->hi, 1.2 * b.S);
  EXPECT_DOUBLE_EQ(b.P_ci->hi, b.S_ci->hi);  // a chain: P is S in every replicate
  // The same database gives the same interval (a fixed seed).
  ModelBounds again = analyze_model(m, costs);
  confidence_intervals({m}, costs, {}, {&again});
  EXPECT_DOUBLE_EQ(again.S_ci->hi, b.S_ci->hi);
  // The report says how the cases were measured, and that the sentinel saw a slowdown.
  Report rep;
  rep.costs = costs;
  rep.costs.system_id = t.system;
  rep.models.push_back({b, {}, std::nullopt, {}});
  const std::string table = format_table(rep, false);
  EXPECT_NE(table.find("measurement: 3 passed cases, 3-4 pass(es) each"), std::string::npos) << table;
  EXPECT_NE(table.find("sentinel: the machine slowed down while 1 case(s) were timed"), std::string::npos);
  EXPECT_NE(format_html(rep).find("id=\"sentinel\""), std::string::npos);
  EXPECT_NE(format_csv(rep, false).find("S_ci_hi_us"), std::string::npos);
}

TEST(Bounds, ReplayIsReadForItsSystemAndIsNeverM) {
  const auto m = process(kDiamond, "diamond");
  TestDb t({m});
  t.times(m, {{"Relu", 10}, {"Sigmoid", 20}, {"Tanh", 5}, {"Add", 7}});
  const auto costs = t.costs();
  benchdb::ReplayRow r;
  r.model_name = "diamond";
  r.system_id = costs.system_id;
  r.median_us = 45.5;
  r.makeup = R"("replay of 4 layers")";  // a note in plain text, as a row moved from schema 3 may have
  r.measured_at = "2026-11-01T00:00:00Z";
  TestDb::value(t.db.upsert_replay(r));
  benchdb::SystemRow other;
  other.device_kind = "cpu";
  other.device_name = "Other CPU";
  r.system_id = TestDb::value(t.db.upsert_system(other));  // another system's replay
  r.median_us = 30;
  TestDb::value(t.db.upsert_replay(r));
  const auto b = analyze_model(m, t.costs());
  EXPECT_FALSE(b.M);
  ASSERT_TRUE(b.replay);
  EXPECT_DOUBLE_EQ(*b.replay, 45.5);
  EXPECT_EQ(b.replay_note, "replay of 4 layers");
  EXPECT_EQ(finding(advise(b), "framework"), nullptr);
}

TEST(Bounds, TheReplaysConversionsAreTheLayoutFindingsCost) {
  const auto convs = process(kConvs, "convs");
  TestDb t({convs});
  const auto& conv = layer(convs, "Conv", 0);
  t.time(conv.key, "convolution_direct:blocked", 100, true, "", "f32", "src:aBcd8b wei:ABcd8b8a dst:aBcd8b",
         R"({"conversions":["src:abcd>aBcd8b","dst:aBcd8b>abcd"]})");
  t.time(conv.key, "reorder", 3, false, "", "f32", conversion_layout({"src", "abcd", "aBcd8b"}), "{}",
         CaseFeeds{"convolution_direct:blocked", ""});
  t.time(layer(convs, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(convs, "Conv", 1).key, "convolution_direct:a", 50, true);
  auto layout_finding = [](const std::vector<Finding>& fs) -> const Finding* {
    for (const auto& f : fs)
      if (f.summary.find("layout conversions") != std::string::npos) return &f;
    return nullptr;
  };
  const auto before = analyze_model(convs, t.costs());
  const Finding* f0 = layout_finding(advise(before));
  ASSERT_NE(f0, nullptr);
  EXPECT_DOUBLE_EQ(f0->saving_us, 3);  // every conversion the best case needs, alone
  benchdb::ReplayRow r;
  r.model_name = "convs";
  r.system_id = t.costs().system_id;
  r.median_us = 170;
  r.makeup = R"({"layers":4,"conversions":1,"conversions_us":1.25,"buffers":3,"buffers_reused":1})";
  TestDb::value(t.db.upsert_replay(r));
  const auto after = analyze_model(convs, t.costs());
  ASSERT_TRUE(after.replay_conversions_us);
  EXPECT_DOUBLE_EQ(*after.replay_conversions_us, 1.25);
  EXPECT_EQ(after.replay_note, "4 layers, 1 layout conversions (1.2 µs), 1 of 4 output buffers reused");
  const Finding* f1 = layout_finding(advise(after));
  ASSERT_NE(f1, nullptr);
  EXPECT_DOUBLE_EQ(f1->saving_us, 1.25);  // what keeping layouts between layers leaves
  EXPECT_NE(f1->summary.find("the replay, which keeps them, still needed 1 conversions taking 1.2 µs"),
            std::string::npos)
      << f1->summary;
}

// A conversion is charged by the cases it feeds (cases.feeds_algorithm, feeds_layout): one feeding
// the best case's algorithm (oneDNN), and one feeding every case in the best case's layout (XNNPACK,
// CUDA); never one feeding another algorithm or another layout, and never as a best case itself.
TEST(Bounds, ConversionsAreChargedToTheCasesTheyFeed) {
  const auto convs = process(kConvs, "convs");
  TestDb t({convs});
  const auto& first = layer(convs, "Conv", 0);
  const auto& second = layer(convs, "Conv", 1);
  const std::string to_nhwc = conversion_layout({"src", "nchw", "nhwc"});
  const std::string to_blocked = conversion_layout({"src", "abcd", "aBcd8b"});
  t.time(first.key, "xnn_convolution", 40, true, "", "f32", "nhwc");
  t.time(first.key, "transpose", 1.5, false, "", "f32", to_nhwc, "{}", CaseFeeds{"", "nhwc"});
  t.time(first.key, "transpose", 2.5, false, "", "f32", conversion_layout({"dst", "nhwc", "nchw"}), "{}",
         CaseFeeds{"", "nhwc"});
  t.time(first.key, "direct:blocked", 45, false);
  t.time(first.key, "reorder", 7, false, "", "f32", to_blocked, "{}", CaseFeeds{"direct:blocked", ""});
  t.time(second.key, "direct:blocked", 20, true);
  t.time(second.key, "reorder", 0.75, false, "", "f32", to_blocked, "{}", CaseFeeds{"direct:blocked", ""});
  t.time(second.key, "transpose", 0.5, false, "", "f32", to_nhwc, "{}", CaseFeeds{"", "nhwc"});
  std::map<int, LayerCost> by_index;
  for (const auto& c : layer_costs(convs, t.costs(), "f32")) by_index[c.index] = c;
  const LayerCost& a = by_index.at(first.index);
  EXPECT_EQ(a.algorithm, "xnn_convolution");
  EXPECT_DOUBLE_EQ(a.us, 40);
  EXPECT_DOUBLE_EQ(a.conversion_us, 1.5 + 2.5);
  const LayerCost& b = by_index.at(second.index);
  EXPECT_EQ(b.algorithm, "direct:blocked");
  EXPECT_DOUBLE_EQ(b.us, 20);
  EXPECT_DOUBLE_EQ(b.conversion_us, 0.75);
}

// A base data type this build does not know is an error, not f32 under another name.
TEST(Report, AnUnknownDataTypeIsAnError) {
  const auto convs = process(kConvs, "convs");
  TestDb t({convs});
  t.time(layer(convs, "Relu").key, "eltwise:a", 10, true);
  AnalyzeOptions o;
  o.dtype = "fp8";
  const auto r = build_report(t.db, {convs}, std::nullopt, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown data type 'fp8'"), std::string::npos) << r.error().message;
  o.dtype = "f32";
  EXPECT_TRUE(build_report(t.db, {convs}, std::nullopt, o).ok());
}

TEST(Report, JsonAndCsvMatchTheGoldenFiles) {
  const Report r = golden_report();
  ASSERT_EQ(r.models.size(), 2u);
  // The conversion feeding the conv's best case is charged to it, and is not its best case.
  const auto& convs = r.models[1].bounds;
  EXPECT_DOUBLE_EQ(convs.conversions_us, 3);
  EXPECT_EQ(convs.roofline_layers, 1);
  expect_golden("report.json", format_json(r));
  expect_golden("report.csv", format_csv(r, false));
  expect_golden("layers.csv", format_csv(r, true));
}

TEST(Report, DotHighlightsTheCriticalPathAndHtmlIsSelfContained) {
  const Report r = golden_report();
  const std::string dot = format_dot(r);
  EXPECT_NE(dot.find("digraph \"diamond_b1\""), std::string::npos);
  EXPECT_NE(dot.find("color=red"), std::string::npos);
  const std::string html = format_html(r);
  for (const char* id :
       {"chart-bounds", "chart-batch", "chart-kinds", "chart-roofline", "chart-critical-path"})
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  // Nothing fetched from the network: no external sources, links or stylesheets.
  for (const char* remote : {"src=\"http", "href=\"http", "@import", "<link"})
    EXPECT_EQ(html.find(remote), std::string::npos) << remote;
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(Report, TheShapeAssumptionIsStatedInTableJsonAndHtml) {
  Report r = golden_report();
  const std::string said =
      "--max-detections 7: 2 NonZero/NonMaxSuppression layer(s) assumed to select 7 element(s)";
  r.models[0].bounds.assumption = said;
  EXPECT_NE(format_table(r, false, 3).find("  note: assumption: " + said), std::string::npos);
  const auto j = nlohmann::json::parse(format_json(r));
  EXPECT_EQ(j["models"][0]["assumption"], said);
  EXPECT_FALSE(j["models"][1].contains("assumption"));
  EXPECT_NE(format_html(r).find("Assumption, " + r.models[0].bounds.model + " (batch 1): " + said),
            std::string::npos);
}

TEST(Report, EveryFormatSurvivesAnyBytesInNames) {
  // Names come from model files and databases: an invalid UTF-8 byte, a terminal escape, markup,
  // quotes and a trailing backslash (which in DOT would escape the closing quote).
  Report r = golden_report();
  const std::string hostile = "bad\xff<script>\x1b[31m\"q'\\";
  r.models[0].bounds.model = hostile;
  for (auto& l : r.models[0].bounds.layers) l.name = hostile;
  const std::string json = format_json(r);
  const auto parsed = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded());
  EXPECT_EQ(parsed["models"][0]["model"], "bad\xef\xbf\xbd<script>\x1b[31m\"q'\\");  // U+FFFD for the byte
  for (const std::string& text : {format_table(r, true, 3), format_csv(r, true), format_csv(r, false),
                                  format_html(r), format_dot(r), json}) {
    EXPECT_EQ(text.find('\xff'), std::string::npos);  // only valid UTF-8 comes out
  }
  const std::string table = format_table(r, true, 3);
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_NE(table.find("bad\xef\xbf\xbd<script>\\x1b[31m\"q'\\"), std::string::npos);
  const std::string html = format_html(r);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("bad\xef\xbf\xbd&lt;script&gt; [31m&quot;q&#39;\\"), std::string::npos);
  const std::string dot = format_dot(r);
  EXPECT_NE(dot.find("digraph \"bad\xef\xbf\xbd<script> [31m\\\"q'\\\\_b1\""), std::string::npos) << dot;
  const std::string csv = format_csv(r, true);
  EXPECT_NE(csv.find("\"bad\xef\xbf\xbd<script>\x1b[31m\"\"q'\\\""), std::string::npos) << csv;
}

}  // namespace
}  // namespace floorline::analyzer
