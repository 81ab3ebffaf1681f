// The analyzer on small hand-made graphs with known times in a test database: every bound is
// computed by hand and asserted exactly; advisors fire on their patterns and stay silent elsewhere;
// JSON and CSV outputs match golden files.
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/advisors.hpp"
#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/model.hpp"

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

  // A passed measurement of `key` with `algorithm`.
  void time(const std::string& key, const std::string& algorithm, double us, bool is_default = false,
            const std::string& fusion = "", const std::string& dtype = "f32", const std::string& layout = "",
            const std::string& params = "{}") {
    auto q = value(db.query("SELECT id FROM layer_configs WHERE key = ?1", {key}));
    if (q.rows.empty()) throw std::runtime_error("no config " + key);
    benchdb::CaseRow c;
    c.config_id = std::get<int64_t>(q.rows[0][0]);
    c.identity = {"onednn", algorithm, dtype, dtype == "f32" ? "fp32" : dtype, layout, fusion, key};
    c.params = params;
    benchdb::MeasurementRow m;
    m.case_id = value(db.upsert_case(c));
    m.status = "passed";
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
  EXPECT_DOUBLE_EQ(b.S, 168);
  EXPECT_DOUBLE_EQ(b.F, 168 - 6 - 8);
  ASSERT_EQ(b.fusions.size(), 2u);
  for (const auto& f : b.fusions) EXPECT_TRUE(f.applied) << f.pattern;
  const auto fs = advise(b);
  const Finding* fu = finding(fs, "fusion");
  ASSERT_NE(fu, nullptr);
  EXPECT_DOUBLE_EQ(fu->saving_us, 14);
  ASSERT_EQ(fu->items.size(), 2u);
  EXPECT_EQ(fu->items[0].label, "1x Conv+BatchNormalization(folded)");
  EXPECT_EQ(fu->items[1].label, "1x Conv+Relu");
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
  for (const auto& l : b.layers) none += l.source == "none" ? 1 : 0;
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
  t.time(conv.key, "reorder", 3, false, "", "f32", "src:abcd>aBcd8b",
         R"({"feeds":"convolution_direct:blocked"})");
  t.time(conv.key, "convolution_direct:blocked", 104, true, "Relu");
  t.time(layer(convs, "Relu").key, "eltwise:a", 10, true);
  t.time(layer(convs, "Conv", 1).key, "convolution_direct:a", 50, true);
  // BatchNormalization: not measured, costed by its roofline.
  auto r = build_report(t.db, {diamond, convs}, std::nullopt);
  if (!r) throw std::runtime_error(r.error().message);
  r->database = "test.db";
  return std::move(r).value();
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
  t.time(conv.key, "reorder", 3, false, "", "f32", "src:abcd>aBcd8b",
         R"({"feeds":"convolution_direct:blocked"})");
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
