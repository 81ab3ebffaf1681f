// The analyzer's views on real zoo models: the throughput view across batch sizes (bound and
// imported runtimes), findings that group the layers of one config, and the roofline legend's
// colours. A test database holds the models' real layers; every config is timed by a formula
// (1 µs + FLOPs / 100 GFLOP/s + bytes / 100 GB/s), so each figure can be recomputed here from the
// model processor's layer table, independently of the analyzer's own sums.
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/report.hpp"
#include "floorline/analyzer/throughput.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/model.hpp"
#include "recorded_db.hpp"

namespace floorline::analyzer {
namespace {

using recorded::check;
using recorded::value;

std::vector<mp::ModelIR> zoo(const std::string& name, std::vector<int64_t> batches) {
  mp::ProcessOptions o;
  o.batches = std::move(batches);
  return value(
      mp::process_model(std::filesystem::path(FLOORLINE_SOURCE_DIR) / "models/zoo" / (name + ".onnx"), o));
}

double formula_us(const mp::Layer& l) {
  return 1.0 + static_cast<double>(l.flops) / 1e5 + static_cast<double>(l.bytes) / 1e5;
}

// S of a model under the formula, summed here over the model processor's layers.
double formula_S(const mp::ModelIR& m) {
  double s = 0;
  for (const auto& l : m.layers)
    if (l.cost_bearing()) s += formula_us(l);
  return s;
}

// A database with the models recorded on one CPU system (1 thread), every cost-bearing config timed
// by the formula (its library default); `slow_default` kinds get a default 1.5x slower than a
// second, best case, so that the algorithm advisor has something to group.
struct ZooDb {
  std::filesystem::path dir;
  std::optional<benchdb::Database> db;
  int64_t system = 0;

  ZooDb(const std::vector<mp::ModelIR>& models, const std::set<std::string>& slow_default = {}) {
    dir = std::filesystem::temp_directory_path() /
          ("floorline_views_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(dir);
    db.emplace(value(benchdb::Database::open(dir / "v.db")));
    check(db->record_models(models));
    benchdb::SystemRow s;
    s.device_kind = "cpu";
    s.device_name = "Test CPU";
    s.cpu_model = "Test CPU";
    s.threads = 1;
    s.libraries = {{"onednn", "2.6.3"}};
    s.floorline_version = "test";
    system = value(db->upsert_system(s));
    benchdb::RunRow r;
    r.system_id = system;
    const int64_t run = value(db->begin_run(r));
    std::map<std::string, const mp::Layer*> configs;
    for (const auto& m : models)
      for (const auto& l : m.layers)
        if (l.cost_bearing()) configs.emplace(l.key, &l);
    benchdb::MeasurementWriter w(*db, system, run);
    for (const auto& [key, l] : configs) {
      const bool slow = slow_default.count(l->op_type) > 0;
      add(w, *l, slow ? "default:ref" : "default:jit", formula_us(*l) * (slow ? 1.5 : 1.0), true);
      if (slow) add(w, *l, "best:brg", formula_us(*l), false);
    }
    check(w.flush());
    // Peaks far above the formula's rates (100 G/s): every layer is slower than its roofline time,
    // and no measured rate raises them.
    for (const auto& [peak, v] : {std::pair{"flops", 1e12}, std::pair{"bytes", 1e12}}) {
      benchdb::SystemPeakRow p;
      p.system_id = system;
      p.peak = peak;
      p.dtype = "f32";
      p.math_mode = std::string(peak) == "flops" ? "fp32" : "";
      p.value_per_s = v;
      p.method = "test";
      p.measured_at = "2026-11-23T00:00:00Z";
      check(db->upsert_system_peak(p));
    }
  }
  ~ZooDb() { std::filesystem::remove_all(dir); }

  static int& counter() {
    static int n = 0;
    return n;
  }

  void add(benchdb::MeasurementWriter& w, const mp::Layer& l, const std::string& algorithm, double us,
           bool is_default) {
    auto q = value(db->query("SELECT id FROM layer_configs WHERE key = ?1", {l.key}));
    benchdb::CaseRow c;
    c.config_id = std::get<int64_t>(q.rows.at(0).at(0));
    c.identity = {"onednn", algorithm, "f32", "fp32", "", "", l.key};
    c.params = "{}";
    benchdb::MeasurementRow m;
    m.case_id = value(db->upsert_case(c));
    m.status = Disposition::kPassed;
    m.is_default = is_default ? 1 : 0;
    m.iterations = 10;
    m.repetitions = 1;
    m.min_us = m.median_us = m.mean_us = us;
    check(w.add(std::move(m)));
  }

  // An imported end-to-end latency, as `floorline db import --framework` stores it.
  void framework(const std::string& model, const std::string& runtime, const std::string& version,
                 const std::string& settings, int64_t threads, int64_t batch, double us) {
    benchdb::FrameworkLatencyRow f;
    f.model_name = model;
    f.runtime = runtime;
    f.runtime_version = version;
    f.device = "cpu";
    f.batch = batch;
    f.settings = settings;
    f.threads = threads;
    f.median_us = us;
    f.repetitions = 20;
    value(db->upsert_framework_latency(f));
  }

  Report report(const std::vector<mp::ModelIR>& models) {
    return value(build_report(*db, models, std::nullopt));
  }
};

const std::vector<int64_t> kBatches = {1, 4, 16};

// --- throughput view ---------------------------------------------------------------------------

class Throughput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new std::vector<mp::ModelIR>(zoo("bert_base_encoder", kBatches));
    db_ = new ZooDb(*models_);
    for (size_t i = 0; i < kBatches.size(); ++i) S_[i] = formula_S(models_->at(i));
    // ONNX Runtime with graph optimizations: slower than the bound at batch 1 and 16, faster at 4
    // (a bound violation), and at its best at 4. Without optimizations: batches 1 and 4 only.
    // PyTorch at 2 threads: not comparable with 1-thread measurements, so not a series.
    db_->framework("bert_base_encoder", "onnxruntime", "1.30.0", "graph_optimization=all", 1, 1, 1.5 * S_[0]);
    db_->framework("bert_base_encoder", "onnxruntime", "1.30.0", "graph_optimization=all", 1, 4, 0.8 * S_[1]);
    db_->framework("bert_base_encoder", "onnxruntime", "1.30.0", "graph_optimization=all", 1, 16,
                   1.5 * S_[2]);
    db_->framework("bert_base_encoder", "onnxruntime", "1.30.0", "graph_optimization=disabled", 1, 1,
                   3 * S_[0]);
    db_->framework("bert_base_encoder", "onnxruntime", "1.30.0", "graph_optimization=disabled", 1, 4,
                   2 * S_[1]);
    db_->framework("bert_base_encoder", "pytorch", "1.13.0", "eager", 2, 1, 0.5 * S_[0]);
    report_ = new Report(db_->report(*models_));
  }
  static void TearDownTestSuite() {
    delete report_;
    delete db_;
    delete models_;
  }
  static std::vector<mp::ModelIR>* models_;
  static ZooDb* db_;
  static Report* report_;
  static double S_[3];
};
std::vector<mp::ModelIR>* Throughput::models_ = nullptr;
ZooDb* Throughput::db_ = nullptr;
Report* Throughput::report_ = nullptr;
double Throughput::S_[3] = {0, 0, 0};

TEST_F(Throughput, BoundIsBatchOverSAtEachBatchWithSingleStreamAtBatchOne) {
  // The fixed 1 µs per layer amortizes over the batch: per-inference time falls with it.
  ASSERT_GT(S_[0], 0);
  EXPECT_LT(S_[1] / 4, S_[0]);
  EXPECT_LT(S_[2] / 16, S_[1] / 4);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(report_->models[i].bounds.S, S_[i], 1e-6 * S_[i]);

  const auto view = throughput_view(report_->models);
  ASSERT_EQ(view.size(), 1u);
  const auto& t = view[0];
  EXPECT_EQ(t.model, "bert_base_encoder");
  EXPECT_EQ(t.dtype, "f32");
  EXPECT_TRUE(t.bound.bound);
  ASSERT_EQ(t.bound.points.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.bound.points[i].batch, kBatches[i]);
    EXPECT_NEAR(t.bound.points[i].latency_us, S_[i], 1e-6 * S_[i]);
    EXPECT_NEAR(t.bound.points[i].inferences_per_s, static_cast<double>(kBatches[i]) * 1e6 / S_[i],
                1e-6 * static_cast<double>(kBatches[i]) * 1e6 / S_[i]);
    EXPECT_TRUE(t.bound.points[i].complete);
  }
  EXPECT_EQ(t.bound.single_stream.batch, 1);
  EXPECT_NEAR(t.bound.single_stream.latency_us, S_[0], 1e-6 * S_[0]);
  EXPECT_EQ(t.bound.offline.batch, 16);
  EXPECT_FALSE(t.bound.offline_over_bound);
}

TEST_F(Throughput, EachRuntimeAndSettingIsASeriesWithItsBestBatchAndViolations) {
  const auto view = throughput_view(report_->models);
  ASSERT_EQ(view.size(), 1u);
  const auto& t = view[0];
  ASSERT_EQ(t.runtimes.size(), 2u);  // PyTorch at 2 threads is left out
  const auto& all = t.runtimes[0];
  EXPECT_EQ(all.name, "onnxruntime 1.30.0 graph_optimization=all, 1 thread");
  EXPECT_EQ(all.settings, "graph_optimization=all");
  ASSERT_EQ(all.points.size(), 3u);
  EXPECT_NEAR(all.single_stream.latency_us, 1.5 * S_[0], 1e-6 * S_[0]);
  EXPECT_NEAR(all.points[1].inferences_per_s, 4e6 / (0.8 * S_[1]), 1e-6 * 4e6 / S_[1]);
  // 4 / (0.8 S4) beats 16 / (1.5 S16) unless S16 < 7.5 S4 / 1: true of BERT (S16 ≈ 4 S4).
  ASSERT_LT(S_[2], 7.5 * S_[1]);
  EXPECT_EQ(all.offline.batch, 4);
  EXPECT_EQ(all.faster_than_bound, std::vector<int64_t>{4});
  ASSERT_TRUE(all.offline_over_bound);
  EXPECT_NEAR(*all.offline_over_bound, (4 / (0.8 * S_[1])) / (16 / S_[2]), 1e-9);

  const auto& off = t.runtimes[1];
  EXPECT_EQ(off.name, "onnxruntime 1.30.0 graph_optimization=disabled, 1 thread");
  ASSERT_EQ(off.points.size(), 2u);
  EXPECT_EQ(off.points[1].batch, 4);
  EXPECT_EQ(off.offline.batch, 4);  // 4 / (2 S4) > 1 / (3 S1) since S4 < 6 S1
  EXPECT_NEAR(off.offline.inferences_per_s, 4e6 / (2 * S_[1]), 1e-6 * 4e6 / S_[1]);
  EXPECT_TRUE(off.faster_than_bound.empty());
}

TEST_F(Throughput, TableJsonAndHtmlCarryIt) {
  const std::string table = format_table(*report_, false);
  EXPECT_NE(table.find("throughput (MLPerf scenarios)"), std::string::npos) << table;
  for (const char* col : {"single_stream_us", "b1_per_s", "b4_per_s", "b16_per_s", "offline_per_s",
                          "offline_batch", "over_bound"})
    EXPECT_NE(table.find(col), std::string::npos) << col;
  EXPECT_NE(table.find("onnxruntime 1.30.0 graph_optimization=all, 1 thread is faster than S at batch 4"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("bert_base_encoder: the bound's throughput still rises at batch 16"),
            std::string::npos);
  // The bound's row: single stream S1 (1 decimal), and 16e6 / S16 as the offline figure (2 decimals).
  EXPECT_NE(table.find(fmt::format("{:.1f}", S_[0])), std::string::npos);
  EXPECT_NE(table.find(fmt::format("{:.2f}", 16e6 / S_[2])), std::string::npos);

  const auto j = nlohmann::json::parse(format_json(*report_));
  ASSERT_EQ(j["throughput"].size(), 1u);
  const auto& t = j["throughput"][0];
  EXPECT_EQ(t["model"], "bert_base_encoder");
  EXPECT_EQ(t["bound"]["points"].size(), 3u);
  EXPECT_EQ(t["bound"]["offline"]["batch"], 16);
  EXPECT_NEAR(t["bound"]["single_stream"]["latency_us"].get<double>(), S_[0], 1e-6 * S_[0]);
  ASSERT_EQ(t["runtimes"].size(), 2u);
  EXPECT_EQ(t["runtimes"][0]["faster_than_bound"], nlohmann::json::array({4}));
  EXPECT_EQ(t["runtimes"][1]["settings"], "graph_optimization=disabled");

  const std::string html = format_html(*report_);
  EXPECT_NE(html.find("id=\"chart-throughput\""), std::string::npos);
  EXPECT_NE(html.find("id=\"chart-throughput-bert_base_encoder-f32\""), std::string::npos);
  EXPECT_NE(html.find("id=\"legend-throughput\""), std::string::npos);
  EXPECT_NE(html.find("onnxruntime 1.30.0 graph_optimization=disabled, 1 thread"), std::string::npos);
  for (const char* axis : {">batch size<", ">inferences/s<"})
    EXPECT_NE(html.find(axis), std::string::npos) << axis;
  // Three paths in the panel: the bound and the two runtimes.
  const auto panel_at = html.find("id=\"chart-throughput-bert_base_encoder-f32\"");
  const auto panel = html.substr(panel_at, html.find("</svg>", panel_at) - panel_at);
  size_t paths = 0;
  for (size_t at = panel.find("<path"); at != std::string::npos; at = panel.find("<path", at + 1)) ++paths;
  EXPECT_EQ(paths, 3u);
}

// --- findings group the layers of one config ---------------------------------------------------

TEST(Findings, RepeatedConfigsOfBertAreOneGroupedItem) {
  const auto models = zoo("bert_base_encoder", {1});
  ZooDb db(models, {"MatMul"});
  const Report r = db.report(models);
  ASSERT_EQ(r.models.size(), 1u);
  const auto& findings = r.models[0].findings;
  const Finding* eff = nullptr;
  const Finding* alg = nullptr;
  for (const auto& f : findings) {
    if (f.advisor == "efficiency" && !eff) eff = &f;
    if (f.advisor == "algorithm") alg = &f;
    // No line repeats within a finding.
    std::set<std::string> labels;
    for (const auto& it : f.items)
      EXPECT_TRUE(labels.insert(it.label).second) << f.advisor << ": " << it.label;
  }
  ASSERT_NE(eff, nullptr);
  ASSERT_NE(alg, nullptr);
  // The FFN MatMuls (1x128x768 · 768x3072 and back: 604 MFLOPs each) are the largest layers: under
  // the formula, 1 + 6039.79776 + 114.03264 µs each, 12 of each.
  const mp::Layer* ffn = nullptr;
  for (const auto& l : models[0].layers)
    if (l.key == "MatMul|a=1x128x768|b=768x3072|f32") ffn = &l;
  ASSERT_NE(ffn, nullptr);
  const double t = formula_us(*ffn);
  EXPECT_NEAR(t, 6154.8304, 1e-6);
  bool found = false;
  for (const auto& it : eff->items) {
    if (it.label != "12 layers: MatMul a=1x128x768 b=768x3072 f32") continue;
    found = true;
    ASSERT_EQ(it.layers.size(), 12u);
    EXPECT_EQ(std::set<std::string>(it.layers.begin(), it.layers.end()).size(), 12u);
    // Roofline: max(604 MFLOP / 1 TFLOP/s, 11.4 MB / 1 TB/s) = 604.0 µs.
    const double roof = static_cast<double>(ffn->flops) / 1e6;
    EXPECT_NEAR(it.saving_us, 12 * (t - roof), 1e-6 * t);
    EXPECT_EQ(it.detail.rfind("12 × 6.2 ms vs roofline 604.0 µs (10% of peak); " + it.layers[0] + ", " +
                                  it.layers[1] + ", " + it.layers[2] + " and 9 more",
                              0),
              0u)
        << it.detail;
  }
  EXPECT_TRUE(found);
  // The algorithm advisor: every MatMul config's default is 1.5x its best, one item per config.
  EXPECT_EQ(alg->items.size(), 5u);  // top 5 of the 5 MatMul configs, each 12 layers
  for (const auto& it : alg->items) {
    EXPECT_EQ(it.label.rfind("12 layers: MatMul ", 0), 0u) << it.label;
    EXPECT_EQ(it.detail.rfind("12 × library default ", 0), 0u) << it.detail;
    EXPECT_NE(it.detail.find("(best:brg)"), std::string::npos) << it.detail;
  }
  // The 12 encoder blocks' identical branches off the critical path: one item too.
  const Finding* par = nullptr;
  for (const auto& f : findings)
    if (f.advisor == "parallelism") par = &f;
  ASSERT_NE(par, nullptr);
  ASSERT_FALSE(par->items.empty());
  EXPECT_EQ(par->items[0].label, "12 branches of 4 layer(s)");
  EXPECT_EQ(par->items[0].detail.rfind("12 × 4 layer(s), ", 0), 0u) << par->items[0].detail;
  EXPECT_EQ(par->items[0].layers.size(), 12u);
  // In every format: the grouped line once, never the per-layer one.
  const std::string label = "12 layers: MatMul a=1x128x768 b=768x3072 f32";
  const std::string table = format_table(r, false, 10);
  EXPECT_NE(table.find(label + ": 12 × 6.2 ms vs roofline 604.0 µs"), std::string::npos) << table;
  const std::string html = format_html(r);
  EXPECT_NE(html.find(label + ": "), std::string::npos);
  const auto j = nlohmann::json::parse(format_json(r));
  bool in_json = false;
  for (const auto& f : j["models"][0]["findings"])
    for (const auto& it : f["items"])
      if (it["label"] == label && it["layers"].size() == 12) in_json = true;
  EXPECT_TRUE(in_json);
}

// --- the roofline legend ------------------------------------------------------------------------

TEST(RooflineLegend, EveryKindHasItsOwnColour) {
  std::vector<mp::ModelIR> models = zoo("swin_t", {1});
  for (auto& m : zoo("deeplabv3_mobilenet_v3_large", {1})) models.push_back(std::move(m));
  ZooDb db(models);
  const Report r = db.report(models);
  // The kinds the chart plots: measured layers with FLOPs and bytes.
  std::set<std::string> kinds;
  for (const auto& m : r.models)
    for (const auto& l : m.bounds.layers)
      if (l.source == CostSource::kMeasured && l.roofline_flops > 0 && l.bytes > 0 && l.us > 0)
        kinds.insert(l.kind);
  ASSERT_GT(kinds.size(), 10u);  // more than the 10-colour palette
  const std::string html = format_html(r);
  const auto at = html.find("id=\"legend-roofline\"");
  ASSERT_NE(at, std::string::npos);
  const std::string legend = html.substr(at, html.find("</p>", at) - at);
  const std::regex entry("<span style=\"color:(#[0-9a-f]{6})\">[^<]*</span> ([A-Za-z]+)");
  std::map<std::string, std::string> color_of;  // kind → colour
  std::set<std::string> colors;
  for (auto it = std::sregex_iterator(legend.begin(), legend.end(), entry); it != std::sregex_iterator();
       ++it) {
    EXPECT_TRUE(color_of.emplace((*it)[2], (*it)[1]).second) << "kind listed twice: " << (*it)[2];
    EXPECT_TRUE(colors.insert((*it)[1]).second) << "colour repeated: " << (*it)[1] << " for " << (*it)[2];
  }
  std::set<std::string> listed;
  for (const auto& [k, _] : color_of) listed.insert(k);
  EXPECT_EQ(listed, kinds);
  // Each point is drawn in its kind's legend colour.
  const auto chart_at = html.find("id=\"chart-roofline\"");
  const std::string chart = html.substr(chart_at, at - chart_at);
  for (const auto& [kind, color] : color_of)
    EXPECT_NE(chart.find("fill=\"" + color + "\" fill-opacity=\"0.75\"><title>" + kind + "|"),
              std::string::npos)
        << kind;
}

}  // namespace
}  // namespace floorline::analyzer
