// Benchmark of the results database itself: insert rate of measurements through the batched
// writer, file size per measurement, and the best-case-per-config query.
//
//   build/bin/bench_benchdb [--rows 1000000] [--systems 5] [--cases-per-config 10] [--repeat 5]
//                           [--batch-rows 10000] [--dir /tmp] [--keep 1]
//
// Rows are spread over `systems` systems × configs × cases; medians of `repeat` query timings.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/layer.hpp"

namespace bd = floorline::benchdb;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class T>
T check(floorline::Result<T> r) {
  if (!r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}
void check(const floorline::Status& s) {
  if (!s) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    std::exit(1);
  }
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 1000000, systems = 5, cases_per_config = 10, repeat = 5, batch_rows = 10000;
  std::string dir = std::filesystem::temp_directory_path().string();
  bool keep = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--rows")
      rows = std::stoll(v);
    else if (a == "--systems")
      systems = std::stoll(v);
    else if (a == "--cases-per-config")
      cases_per_config = std::stoll(v);
    else if (a == "--repeat")
      repeat = std::stoll(v);
    else if (a == "--batch-rows")
      batch_rows = std::stoll(v);
    else if (a == "--dir")
      dir = v;
    else if (a == "--keep")
      keep = std::string(v) == "1";
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string path = dir + "/floorline_bench_benchdb.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  auto db = check(bd::Database::open(path));

  const int64_t cases = rows / systems;
  const int64_t configs = std::max<int64_t>(1, cases / cases_per_config);
  std::vector<int64_t> case_ids;
  const auto t_setup = Clock::now();
  check(db.transaction([&]() -> floorline::Status {
    for (int64_t c = 0; c < configs; ++c) {
      bd::LayerConfigRow lc;
      lc.key = fmt::format("Conv|x=1x{}x56x56|w=64x{}x3x3|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32",
                           c, c);
      lc.key_hash = fmt::format("{:016x}", c);
      lc.kind = "Conv";
      lc.op_type = "Conv";
      lc.dtype = "f32";
      lc.flops = 1000000 + c;
      lc.bytes = 100000 + c;
      FL_ASSIGN_OR_RETURN(const int64_t cid, db.upsert_config(lc));
      for (int64_t k = 0; k < cases_per_config; ++k) {
        bd::CaseRow cr;
        cr.config_id = cid;
        cr.identity = {"onednn", fmt::format("impl{}", k), "f32", "fp32", "", "", lc.key};
        cr.uid = floorline::mp::key_hash_hex(bd::case_name(cr.identity));
        FL_ASSIGN_OR_RETURN(const int64_t id, db.upsert_case(cr));
        case_ids.push_back(id);
      }
    }
    return {};
  }));
  std::printf("setup: %lld configs, %zu cases in %.2f s\n", static_cast<long long>(configs), case_ids.size(),
              seconds_since(t_setup));

  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> us(5.0, 5000.0);
  int64_t inserted = 0;
  const auto t0 = Clock::now();
  for (int64_t s = 0; s < systems && inserted < rows; ++s) {
    bd::SystemRow sys;
    sys.device_kind = "cpu";
    sys.device_name = fmt::format("bench cpu {}", s);
    const int64_t system_id = check(db.upsert_system(sys));
    bd::RunRow run;
    run.system_id = system_id;
    const int64_t run_id = check(db.begin_run(run));
    bd::MeasurementWriter w(db, system_id, run_id,
                            {.batch_rows = static_cast<int>(batch_rows), .batch_seconds = 1e9});
    for (int64_t id : case_ids) {
      if (inserted == rows) break;
      bd::MeasurementRow m;
      m.case_id = id;
      m.status = floorline::Disposition::kPassed;
      m.iterations = 1000;
      m.repetitions = 5;
      const double t = us(rng);
      m.min_us = t * 0.98;
      m.median_us = t;
      m.mean_us = t * 1.01;
      m.stddev_us = t * 0.02;
      m.cv = 0.02;
      m.workspace_bytes = 0;
      check(w.add(std::move(m)));
      ++inserted;
    }
    check(w.flush());
    check(db.finish_run(run_id, "finished"));
  }
  const double insert_s = seconds_since(t0);
  const auto size = std::filesystem::file_size(path) +
                    (std::filesystem::exists(path + "-wal") ? std::filesystem::file_size(path + "-wal") : 0);
  std::printf("insert: %lld measurements in %.2f s = %.0f rows/s (batches of %lld, synchronous=FULL, WAL)\n",
              static_cast<long long>(inserted), insert_s, inserted / insert_s,
              static_cast<long long>(batch_rows));
  std::printf("file: %.1f MiB incl. WAL = %.1f bytes per measurement (with configs and cases)\n",
              size / 1048576.0, static_cast<double>(size) / inserted);

  if (repeat < 1) return 0;
  std::vector<double> all_ms, one_ms;
  int64_t best_rows = 0;
  for (int64_t r = 0; r < repeat; ++r) {
    auto t = Clock::now();
    auto q = check(db.query("SELECT * FROM best_cases"));
    all_ms.push_back(seconds_since(t) * 1e3);
    best_rows = static_cast<int64_t>(q.rows.size());
    t = Clock::now();
    auto q1 = check(db.query("SELECT * FROM best_cases WHERE system_id = ?1", {int64_t{1}}));
    one_ms.push_back(seconds_since(t) * 1e3);
  }
  std::printf("best case per config, all systems (%lld rows): median %.1f ms over %lld runs\n",
              static_cast<long long>(best_rows), median(all_ms), static_cast<long long>(repeat));
  std::printf("best case per config, one system: median %.1f ms\n", median(one_ms));
  std::printf("integrity_check: %s\n", check(db.integrity_check()).c_str());
  if (!keep)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return 0;
}
