// Framework latencies (JSON, CSV) and Google Benchmark results (reporter, JSON files).
#include <fstream>
#include <map>

#include <benchmark/benchmark.h>

#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/framework_io.hpp"
#include "floorline/benchdb/merge.hpp"
#include "floorline/common/benchmark_error.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(FrameworkImport, JsonAndCsvWithUnitsAndIdempotentReimport) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  write(dir.file("pt.json"), R"([
    {"model": "resnet50", "runtime": "pytorch", "runtime_version": "1.13.1", "device": "cpu", "batch": 1,
     "dtype": "f32", "settings": "eager", "threads": 1, "median_ms": 85.5, "min_ms": 84.0, "stddev_ms": 0.5,
     "repetitions": 20, "measured_at": "2026-11-21T10:00:00Z"},
    {"model_name": "vgg16", "runtime": "pytorch", "device": "cpu", "batch": 8, "median_us": 900000}
  ])");
  auto s = must(import_framework_latencies(db, dir.file("pt.json")));
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.changed, 2);
  auto r =
      must(db.query("SELECT median_us, min_us, stddev_us, threads, settings FROM framework_latencies "
                    "WHERE model_name = 'resnet50'"));
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows[0][0]), 85500.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows[0][1]), 84000.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r.rows[0][2]), 500.0);
  EXPECT_EQ(std::get<int64_t>(r.rows[0][3]), 1);
  EXPECT_EQ(value_text(r.rows[0][4]), "eager");
  // The same file again changes nothing.
  EXPECT_EQ(must(import_framework_latencies(db, dir.file("pt.json"))).changed, 0);
  EXPECT_EQ(must(db.count("framework_latencies")), 2);

  write(dir.file("ort.csv"),
        "model_name,runtime,runtime_version,device,batch,dtype,median_us,stddev_us,repetitions\r\n"
        "resnet50,onnxruntime,1.16,cpu,1,f32,61000.5,120,50\r\n"
        "\"mobilenet_v2, width 1.0\",onnxruntime,1.16,cpu,1,f32,9000,,50\r\n");
  auto c = must(import_framework_latencies(db, dir.file("ort.csv")));
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(must(db.count("framework_latencies")), 4);
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM framework_latencies WHERE model_name = 'mobilenet_v2, width 1.0' "
                   "AND stddev_us IS NULL"),
            1);
}

// (v6) Per-node runtime profiles: one profile's rows replace the earlier profile of the same
// identity (a later one only), other identities are untouched, and merge carries them.
TEST(FrameworkLayerTimes, AProfileReplacesTheOlderOneOfItsIdentityAndMergesAcross) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  auto row = [](const std::string& node, double us, const std::string& at, const std::string& settings) {
    FrameworkLayerTimeRow r;
    r.model_name = "resnet18";
    r.runtime = "onnxruntime";
    r.runtime_version = "1.30.0";
    r.device = "cpu";
    r.settings = settings;
    r.threads = 1;
    r.node_name = node;
    r.op = "Conv";
    r.layers = R"(["/conv1/Conv","/relu/Relu"])";
    r.median_us = us;
    r.runs = 2;
    r.measured_at = at;
    return r;
  };
  const std::string all = "graph_optimization=all", off = "graph_optimization=disabled";
  EXPECT_EQ(must(db.replace_framework_layer_times(
                {row("a", 10, "2026-11-23T10:00:00Z", all), row("b", 20, "2026-11-23T10:00:00Z", all)})),
            2);
  EXPECT_EQ(must(db.replace_framework_layer_times({row("a", 30, "2026-11-23T10:00:00Z", off)})), 1);
  // A later profile of the first identity replaces its two rows with its one.
  EXPECT_EQ(must(db.replace_framework_layer_times({row("c", 12, "2026-11-23T11:00:00Z", all)})), 1);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM framework_layer_times"), 2);
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM framework_layer_times WHERE node_name = 'c' AND "
                   "json_array_length(layers) = 2"),
            1);
  // An older one does not.
  EXPECT_EQ(must(db.replace_framework_layer_times({row("d", 5, "2026-11-23T09:00:00Z", all)})), 0);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM framework_layer_times WHERE node_name = 'd'"), 0);
  // Rows of two identities in one call are refused.
  EXPECT_FALSE(db.replace_framework_layer_times(
                     {row("e", 1, "2026-11-23T12:00:00Z", all), row("f", 1, "2026-11-23T12:00:00Z", off)})
                   .ok());
  // Merge: both identities arrive; merging again rewrites them (same age) and adds none.
  auto out = must(Database::open(dir.file("out.db")));
  EXPECT_EQ(must(merge_into(out, dir.file("r.db"))).framework_layer_times_changed, 2);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM framework_layer_times"), 2);
  EXPECT_EQ(must(merge_into(out, dir.file("r.db"))).framework_layer_times_changed, 2);  // same age: rewritten
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM framework_layer_times"), 2);
}

TEST(FrameworkImport, BadRowsNameTheFileAndRowAndWriteNothing) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  write(dir.file("bad.csv"), "model_name,runtime,median_us\nresnet50,pytorch,100\nvgg16,pytorch,fast\n");
  auto r = import_framework_latencies(db, dir.file("bad.csv"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, dir.file("bad.csv") + ": row 2: median_us = \"fast\" is not a REAL");
  write(dir.file("nomedian.json"), R"([{"model": "a", "runtime": "pytorch"}])");
  auto r2 = import_framework_latencies(db, dir.file("nomedian.json"));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().message, dir.file("nomedian.json") + ": row 1: no positive median_us (or median_ms)");
  write(dir.file("short.csv"), "model_name,runtime,median_us\nresnet50,pytorch\n");
  EXPECT_FALSE(import_framework_latencies(db, dir.file("short.csv")).ok());
  EXPECT_EQ(must(db.count("framework_latencies")), 0);
}

TEST(BenchmarkImport, GoogleBenchmarkJsonBecomesMeasurements) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const std::string relu = "onednn/eltwise:jit:avx2/f32/fp32/Relu|x=1x64x56x56|f32";
  const std::string conv =
      "onednn/ref:any/f32/fp32/Conv|x=1x3x8x8|w=4x3x3x3|pads=0,0,0,0|strides=1,1|dil=1,1|group=1|f32";
  // Three repetitions of one case (with the aggregates, which are recomputed, not read), a skipped
  // case, and a benchmark that is not a Floorline case.
  write(dir.file("gb.json"), R"({
    "context": {"date": "2026-11-21T10:00:00+00:00", "host_name": "box", "num_cpus": 2, "mhz_per_cpu": 2400},
    "benchmarks": [
      {"name": ")" + relu + R"(/repeats:3", "run_name": ")" +
                                 relu + R"(", "run_type": "iteration",
       "repetitions": 3, "repetition_index": 0, "iterations": 1000, "real_time": 12000, "cpu_time": 12000,
       "time_unit": "ns", "flops": 200704, "workspace_bytes": 0, "is_default": 1},
      {"name": ")" + relu + R"(/repeats:3", "run_name": ")" +
                                 relu + R"(", "run_type": "iteration",
       "repetitions": 3, "repetition_index": 1, "iterations": 1000, "real_time": 10000, "cpu_time": 10000,
       "time_unit": "ns", "flops": 200704, "workspace_bytes": 0, "is_default": 1},
      {"name": ")" + relu + R"(/repeats:3", "run_name": ")" +
                                 relu + R"(", "run_type": "iteration",
       "repetitions": 3, "repetition_index": 2, "iterations": 1000, "real_time": 14000, "cpu_time": 14000,
       "time_unit": "ns", "flops": 200704, "workspace_bytes": 0, "is_default": 1},
      {"name": ")" + relu + R"(/repeats:3_median", "run_name": ")" +
                                 relu + R"(", "run_type": "aggregate",
       "aggregate_name": "median", "real_time": 99999, "time_unit": "ns"},
      {"name": ")" + conv + R"(", "run_name": ")" +
                                 conv + R"(", "run_type": "iteration", "iterations": 0,
       "error_occurred": true, "error_message": "skipped: reference implementation; use --all-impls",
       "real_time": 0, "time_unit": "ns"},
      {"name": "BM_memcpy/64", "run_name": "BM_memcpy/64", "run_type": "iteration", "iterations": 5,
       "real_time": 1.0, "time_unit": "us"}
    ]})");
  auto s = must(import_benchmark_json(db, dir.file("gb.json")));
  EXPECT_EQ(s.benchmarks, 3);
  EXPECT_EQ(s.stored, 2);
  EXPECT_EQ(s.skipped_names, 1);
  EXPECT_EQ(s.new_configs, 2);
  auto m =
      must(db.query("SELECT status, reason, iterations, repetitions, min_us, median_us, mean_us, stddev_us, "
                    "cv, is_default, workspace_bytes, extra, kind, algorithm FROM current_measurements "
                    "ORDER BY kind"));
  ASSERT_EQ(m.rows.size(), 2u);
  const auto& c = m.rows[0];  // Conv
  EXPECT_EQ(value_text(c[0]), "skipped");
  EXPECT_EQ(value_text(c[1]), "reference implementation; use --all-impls");
  EXPECT_EQ(value_text(c[13]), "ref:any");
  const auto& r = m.rows[1];  // Relu: 12, 10, 14 µs
  EXPECT_EQ(value_text(r[0]), "passed");
  EXPECT_EQ(std::get<int64_t>(r[2]), 3000);
  EXPECT_EQ(std::get<int64_t>(r[3]), 3);
  EXPECT_DOUBLE_EQ(std::get<double>(r[4]), 10.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r[5]), 12.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r[6]), 12.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r[7]), 2.0);
  EXPECT_DOUBLE_EQ(std::get<double>(r[8]), 2.0 / 12.0);
  EXPECT_EQ(std::get<int64_t>(r[9]), 1);
  EXPECT_EQ(std::get<int64_t>(r[10]), 0);
  EXPECT_EQ(value_text(r[11]), R"({"flops":200704.0})");
  EXPECT_EQ(scalar(db, "SELECT flops FROM layer_configs WHERE kind = 'Relu'"), 200704);
  EXPECT_EQ(value_text(must(db.query("SELECT host_name FROM runs")).rows[0][0]), "box");
  // Importing the file again finds its run and stores nothing new.
  auto again = must(import_benchmark_json(db, dir.file("gb.json")));
  EXPECT_EQ(again.run_id, s.run_id);
  EXPECT_EQ(again.stored, 0);
  EXPECT_EQ(must(db.count("measurements")), 2);
  write(dir.file("notgb.json"), R"({"results": []})");
  auto bad = import_benchmark_json(db, dir.file("notgb.json"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            dir.file("notgb.json") + ": not a Google Benchmark JSON file (no \"benchmarks\" array)");
}

TEST(BenchmarkImport, NonFiniteAggregatesAsGoogleBenchmarkWritesThemAreRead) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const std::string relu = "reference/ref:plain/f32/fp32/Relu|x=1x64x56x56|f32";
  // A counter that is 0 in both repetitions has a cv of 0/0, which Google Benchmark writes as NaN;
  // a string that contains the word is left alone.
  write(dir.file("gb.json"), R"({"context": {"date": "2026-11-21T10:00:00+00:00", "note": "NaN, -Infinity"},
    "benchmarks": [
      {"name": ")" + relu + R"(", "run_name": ")" +
                                 relu + R"(", "run_type": "iteration", "repetitions": 2,
       "repetition_index": 0, "iterations": 10, "real_time": 4, "time_unit": "us", "workspace_bytes": 0},
      {"name": ")" + relu + R"(", "run_name": ")" +
                                 relu + R"(", "run_type": "iteration", "repetitions": 2,
       "repetition_index": 1, "iterations": 10, "real_time": 6, "time_unit": "us", "workspace_bytes": 0},
      {"name": ")" + relu + R"(_cv", "run_name": ")" +
                                 relu + R"(", "run_type": "aggregate", "aggregate_name": "cv",
       "real_time": 0.2, "time_unit": "us", "workspace_bytes": NaN, "flops": -Infinity}
    ]})");
  auto s = must(import_benchmark_json(db, dir.file("gb.json")));
  EXPECT_EQ(s.stored, 1);
  EXPECT_DOUBLE_EQ(std::get<double>(must(db.query("SELECT median_us FROM measurements")).rows.at(0).at(0)),
                   5.0);
}

TEST(BenchmarkImport, SystemContextOfNewAndOlderGeneratedFoldersIsTheSameSystem) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const std::string relu = "onednn/eltwise:jit:avx2/f32/fp32/Relu|x=1x64x56x56|f32";
  auto file = [&](const std::string& name, const std::string& system, double us) {
    write(dir.file(name), R"({"context": {"date": "2026-11-21T10:00:00+00:00", "floorline_system": )" +
                              system + R"(}, "benchmarks": [{"name": ")" + relu +
                              R"(", "run_type": "iteration",
                              "iterations": 10, "real_time": )" +
                              std::to_string(us) + R"(, "time_unit": "us"}]})");
    return dir.file(name);
  };
  // As a folder generated now writes it (libraries an object) and as one generated before schema
  // 4 did (one key per library); Google Benchmark stores a custom context as a JSON string.
  const auto now = must(import_benchmark_json(
      db, file("now.json",
               R"("{\"device_kind\": \"cpu\", \"device_name\": \"Box CPU\", \"cpu_model\": \"Box CPU\", )"
               R"(\"libraries\": {\"onednn\": \"2.6.3\"}, \"threads\": 1}")",
               5)));
  const auto older = must(import_benchmark_json(
      db, file("older.json",
               R"("{\"device_kind\": \"cpu\", \"device_name\": \"Box CPU\", \"cpu_model\": \"Box CPU\", )"
               R"(\"onednn_version\": \"2.6.3\", \"threads\": 1}")",
               6)));
  EXPECT_EQ(older.system_id, now.system_id);
  EXPECT_EQ(must(db.count("systems")), 1);
  EXPECT_EQ(value_text(must(db.query("SELECT libraries FROM systems")).rows.at(0).at(0)),
            R"({"onednn":"2.6.3"})");
}

TEST(BenchmarkReporter, RealBenchmarkRunLandsInTheDatabase) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const auto cases = seed_cases(db, 2, 1);
  const int64_t sys = must(db.upsert_system(test_system("cpu")));
  RunRow run;
  run.system_id = sys;
  const int64_t run_id = must(db.begin_run(run));
  MeasurementWriter writer(db, sys, run_id);
  // Two registered benchmarks standing in for runner cases: one that spins, one that fails.
  benchmark::RegisterBenchmark("fl_test/spin",
                               [](benchmark::State& st) {
                                 for (auto _ : st) {
                                   volatile double x = 0;
                                   for (int i = 0; i < 2000; ++i) x = x + i;
                                   benchmark::DoNotOptimize(x);
                                 }
                                 st.counters["workspace_bytes"] = 4096;
                               })
      ->Repetitions(3)
      ->MinTime(0.01);
  benchmark::RegisterBenchmark("fl_test/broken", [](benchmark::State& st) {
    st.SkipWithError("unsupported: no implementation for this shape");
    for (auto _ : st) {
    }
  });
  DatabaseReporter reporter(writer, [&](const std::string& name) -> int64_t {
    if (name == "fl_test/spin") return cases[0];
    if (name == "fl_test/broken") return cases[1];
    return 0;
  });
  int argc = 2;
  char arg0[] = "test", arg1[] = "--benchmark_filter=^fl_test/";
  char* argv[] = {arg0, arg1, nullptr};
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  EXPECT_EQ(reporter.error(), "");
  EXPECT_EQ(reporter.stored(), 2);
  auto m =
      must(db.query("SELECT status, reason, repetitions, min_us, median_us, workspace_bytes, iterations "
                    "FROM measurements ORDER BY case_id"));
  ASSERT_EQ(m.rows.size(), 2u);
  EXPECT_EQ(value_text(m.rows[0][0]), "passed");
  EXPECT_EQ(std::get<int64_t>(m.rows[0][2]), 3);
  EXPECT_GT(std::get<double>(m.rows[0][3]), 0.0);
  EXPECT_LE(std::get<double>(m.rows[0][3]), std::get<double>(m.rows[0][4]));
  EXPECT_EQ(std::get<int64_t>(m.rows[0][5]), 4096);
  EXPECT_GT(std::get<int64_t>(m.rows[0][6]), 3);
  EXPECT_EQ(value_text(m.rows[1][0]), "unsupported");
  EXPECT_EQ(value_text(m.rows[1][1]), "no implementation for this shape");
}

TEST(BenchmarkErrorText, EveryCodeRoundTripsAndUnknownTextIsFailed) {
  for (Disposition d : {Disposition::kSkipped, Disposition::kUnsupported, Disposition::kNotVerifiable,
                        Disposition::kFailed}) {
    const Error e = make_error(d, "workspace {} MiB exceeds: the limit", 300);
    const std::string text = benchmark_error_text(e);
    EXPECT_EQ(text, d == Disposition::kFailed
                        ? "workspace 300 MiB exceeds: the limit"
                        : std::string(disposition_name(d)) + ": workspace 300 MiB exceeds: the limit");
    const Error back = error_from_benchmark_text(text);
    EXPECT_EQ(back.code, d) << text;
    EXPECT_EQ(back.message, "workspace 300 MiB exceeds: the limit");
  }
  // A failed message that looks coded keeps its text through the round trip.
  const Error tricky = make_error("skipped: is part of this library's message");
  EXPECT_EQ(benchmark_error_text(tricky), "failed: skipped: is part of this library's message");
  EXPECT_EQ(error_from_benchmark_text(benchmark_error_text(tricky)).code, Disposition::kFailed);
  EXPECT_EQ(error_from_benchmark_text(benchmark_error_text(tricky)).message, tricky.message);
  // Text with no disposition prefix (an exception's what(), an older file) is a failure, whole.
  const Error unknown = error_from_benchmark_text("cudaErrorLaunchFailure: unspecified launch failure");
  EXPECT_EQ(unknown.code, Disposition::kFailed);
  EXPECT_EQ(unknown.message, "cudaErrorLaunchFailure: unspecified launch failure");
  EXPECT_EQ(error_from_benchmark_text("unsupported:no space").code, Disposition::kFailed);
  EXPECT_EQ(error_from_benchmark_text("passed: not an error").code, Disposition::kFailed);
  EXPECT_EQ(error_from_benchmark_text("").message, "error without a message");
  // with_context keeps the code.
  EXPECT_EQ(make_error(Disposition::kSkipped, "x").with_context("warm-up").code, Disposition::kSkipped);
  EXPECT_EQ(make_error(Disposition::kSkipped, "x").with_context("warm-up").message, "warm-up: x");
}

TEST(BenchmarkReporter, CodedErrorsSurviveGoogleBenchmarkAndUnknownOnesFail) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const auto cases = seed_cases(db, 4, 1);
  const int64_t sys = must(db.upsert_system(test_system("cpu")));
  RunRow run;
  run.system_id = sys;
  const int64_t run_id = must(db.begin_run(run));
  MeasurementWriter writer(db, sys, run_id);
  // As register_case() reports a build error: SkipWithError(benchmark_error_text(error)).
  const std::map<std::string, Error> errors = {
      {"fl_coded/skipped", make_error(Disposition::kSkipped, "out of device memory: cudaMalloc")},
      {"fl_coded/unsupported", make_error(Disposition::kUnsupported, "cuDNN: CUDNN_STATUS_NOT_SUPPORTED")},
      {"fl_coded/failed", make_error("cudnnConvolutionForward: CUDNN_STATUS_EXECUTION_FAILED")},
  };
  for (const auto& [name, error] : errors) {
    const std::string text = benchmark_error_text(error);
    benchmark::RegisterBenchmark(name.c_str(), [text](benchmark::State& st) {
      st.SkipWithError(text.c_str());
      for (auto _ : st) {
      }
    });
  }
  // An exception's text thrown through a body that knows nothing of codes.
  benchmark::RegisterBenchmark("fl_coded/uncoded", [](benchmark::State& st) {
    st.SkipWithError("std::bad_alloc");
    for (auto _ : st) {
    }
  });
  const std::vector<std::string> order = {"fl_coded/skipped", "fl_coded/unsupported", "fl_coded/failed",
                                          "fl_coded/uncoded"};
  DatabaseReporter reporter(writer, [&](const std::string& name) -> int64_t {
    for (size_t k = 0; k < order.size(); ++k)
      if (name == order[k]) return cases[k];
    return 0;
  });
  int argc = 2;
  char arg0[] = "test", arg1[] = "--benchmark_filter=^fl_coded/";
  char* argv[] = {arg0, arg1, nullptr};
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  EXPECT_EQ(reporter.error(), "");
  EXPECT_EQ(reporter.stored(), 4);
  auto m = must(db.query("SELECT status, reason FROM measurements ORDER BY case_id"));
  ASSERT_EQ(m.rows.size(), 4u);
  EXPECT_EQ(value_text(m.rows[0][0]), "skipped");
  EXPECT_EQ(value_text(m.rows[0][1]), "out of device memory: cudaMalloc");
  EXPECT_EQ(value_text(m.rows[1][0]), "unsupported");
  EXPECT_EQ(value_text(m.rows[1][1]), "cuDNN: CUDNN_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(value_text(m.rows[2][0]), "failed");
  EXPECT_EQ(value_text(m.rows[2][1]), "cudnnConvolutionForward: CUDNN_STATUS_EXECUTION_FAILED");
  EXPECT_EQ(value_text(m.rows[3][0]), "failed");
  EXPECT_EQ(value_text(m.rows[3][1]), "std::bad_alloc");
}

}  // namespace
}  // namespace floorline::benchdb::test
