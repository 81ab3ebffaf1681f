// The analyzer tests' fixture: a results database in a temporary file holding one hand-made model
// (ONNX text) and passed cases with hand-picked times, systems of any CPU, thread count and ISA
// cap, and framework latencies; with value() and check(), which turn an error into a test failure.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "floorline/analyzer/analyzer.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::analyzer::recorded {

// x → Relu → Sigmoid → Tanh on 1x4096 floats: three configs, no parameters.
inline constexpr const char* kReluSigmoidTanh = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
chain (float[1,4096] x) => (float y) {
  a = Relu (x)
  b = Sigmoid (a)
  y = Tanh (b)
}
)onnx";

// The first layer of `kind` ("Relu") in b's layer table; throws where there is none.
inline const LayerCost& layer_of_kind(const ModelBounds& b, const std::string& kind) {
  for (const auto& l : b.layers)
    if (l.kind == kind) return l;
  throw std::runtime_error("no " + kind);
}

template <class T>
T value(Result<T> r) {
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(r).value();
}
inline void check(const Status& s) {
  if (!s) throw std::runtime_error(s.error().message);
}

struct RecordedDb {
  std::filesystem::path path;
  std::optional<benchdb::Database> db;
  mp::ModelIR model;
  std::map<std::string, std::string> key_of;  // op → config key

  // `text` (ONNX text) processed as model `name` at `batch`, recorded in a new file named after
  // `file` (and this process).
  RecordedDb(const std::string& file, const char* text, const std::string& name, int64_t batch = 1)
      : path(std::filesystem::temp_directory_path() /
             ("floorline_" + file + "_" + std::to_string(::getpid()) + ".db")) {
    std::filesystem::remove(path);
    db.emplace(value(benchdb::Database::open(path)));
    mp::ProcessOptions po;
    po.batches = {batch};
    model = value(mp::process_model_text(text, name, po)).front();
    check(db->record_models({model}));
    for (const auto& l : model.layers) key_of[l.op_type] = l.key;
  }
  RecordedDb(const RecordedDb&) = delete;
  RecordedDb& operator=(const RecordedDb&) = delete;
  ~RecordedDb() {
    db.reset();
    std::filesystem::remove(path);
  }

  int64_t system(const std::string& cpu, int64_t threads = 1, const std::string& isa = "",
                 const std::string& device_kind = "cpu") {
    benchdb::SystemRow s;
    s.device_kind = device_kind;
    s.device_name = s.cpu_model = cpu;
    s.threads = threads;
    s.isa = isa;
    s.libraries = {{"onednn", "2.6.3"}};
    s.floorline_version = "test";
    return value(db->upsert_system(s));
  }
  // One passed case of `op`'s config on `system`: the library's default, or with `algorithm` another
  // of its implementations; raced out (skipped, its reading `us`) with `raced_out`.
  void time(int64_t system, const std::string& op, double us, const std::string& algorithm = "",
            bool raced_out = false) {
    benchdb::RunRow run;
    run.system_id = system;
    const int64_t run_id = value(db->begin_run(run));
    auto q = value(db->query("SELECT id FROM layer_configs WHERE key = ?1", {key_of.at(op)}));
    benchdb::CaseRow c;
    c.config_id = std::get<int64_t>(q.rows.at(0).at(0));
    c.identity = {"onednn",     algorithm.empty() ? "eltwise:jit" : algorithm, "f32", "fp32", "", "",
                  key_of.at(op)};
    benchdb::MeasurementRow m;
    m.case_id = value(db->upsert_case(c));
    m.status = raced_out ? Disposition::kSkipped : Disposition::kPassed;
    if (raced_out) m.reason = "raced out: first round, its group's best";
    m.is_default = algorithm.empty() ? 1 : 0;
    m.iterations = 10;
    m.repetitions = 1;
    m.min_us = m.median_us = m.mean_us = us;
    benchdb::MeasurementWriter w(*db, system, run_id);
    check(w.add(std::move(m)));
    check(w.flush());
  }
  // The time of `op`'s default case on `system` in a cache state ("memory", "llc"), with the bytes
  // its flush wrote (benchdb cache_times).
  // `dst_us`: (memory) the reading with the output buffer evicted too; `dirty_us`: (memory) among
  // dirty lines.
  void cache(int64_t system, const std::string& op, const std::string& state, double us, int64_t flush_bytes,
             std::optional<double> dst_us = std::nullopt, std::optional<double> dirty_us = std::nullopt) {
    auto q = value(db->query(
        "SELECT c.id FROM cases c JOIN layer_configs lc ON lc.id = c.config_id WHERE lc.key = ?1 AND "
        "c.algorithm = 'eltwise:jit'",
        {key_of.at(op)}));
    benchdb::CacheTimeRow row;
    row.system_id = system;
    row.case_id = std::get<int64_t>(q.rows.at(0).at(0));
    row.state = state;
    row.median_us = us * 1.1;
    row.min_us = us;
    row.samples = 5;
    row.flush_bytes = flush_bytes;
    row.dst_memory_min_us = dst_us;
    row.dirty_memory_min_us = dirty_us;
    row.measured_at = "2026-11-28T00:00:00Z";
    check(db->upsert_cache_time(row));
  }
  // ONNX Runtime's latency of the model at its batch and `threads` intra-op threads, on `device`
  // ("cpu:MODEL", or "cpu" for a row of unknown host).
  void runtime(const std::string& device, int64_t threads, double us) {
    benchdb::FrameworkLatencyRow fw;
    fw.model_name = model.name;
    fw.runtime = "onnxruntime";
    fw.runtime_version = "1.30.0";
    fw.device = device;
    fw.settings = "graph_optimization=all";
    fw.batch = model.batch;
    fw.threads = threads;
    fw.median_us = us;
    value(db->upsert_framework_latency(fw));
  }
};

}  // namespace floorline::analyzer::recorded
