// A writer process for the crash and concurrency tests:
//   benchdb_writer_helper DB SYSTEM_NAME CONFIGS CASES_PER_CONFIG BATCH_ROWS [DELAY_US]
// Seeds (or finds) the configs and cases, starts a run on the system, and writes one passed
// measurement per case not yet measured on that system (resume), committing every BATCH_ROWS
// rows; after each commit it prints "committed <total>" and flushes stdout. Exit 0 when done.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"
#include "floorline/model_processor/layer.hpp"

namespace bd = floorline::benchdb;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s DB SYSTEM CONFIGS CASES_PER_CONFIG BATCH_ROWS [DELAY_US]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1], system = argv[2];
  const int configs = std::atoi(argv[3]), per = std::atoi(argv[4]), batch = std::atoi(argv[5]);
  const int delay_us = argc > 6 ? std::atoi(argv[6]) : 0;
  auto fail = [](const floorline::Error& e) {
    std::fprintf(stderr, "helper: %s\n", e.message.c_str());
    return 1;
  };
  auto db = bd::Database::open(path);
  if (!db) return fail(db.error());
  bd::SystemRow s;
  s.device_kind = "cpu";
  s.device_name = system;
  s.cpu_model = system;
  s.floorline_version = "test";
  auto system_id = db->upsert_system(s);
  if (!system_id) return fail(system_id.error());
  std::vector<int64_t> cases;
  auto st = db->transaction([&]() -> floorline::Status {
    for (int c = 0; c < configs; ++c) {
      bd::LayerConfigRow lc;
      lc.key = fmt::format("Relu|x=1x{}|f32", c + 1);
      lc.key_hash = floorline::mp::key_hash_hex(lc.key);
      lc.kind = lc.op_type = "Relu";
      lc.dtype = "f32";
      FL_ASSIGN_OR_RETURN(const int64_t cid, db->upsert_config(lc));
      for (int k = 0; k < per; ++k) {
        bd::CaseRow cr;
        cr.config_id = cid;
        cr.identity = {"onednn", fmt::format("impl{}", k), "f32", "fp32", "", "", lc.key};
        FL_ASSIGN_OR_RETURN(const int64_t id, db->upsert_case(cr));
        cases.push_back(id);
      }
    }
    return {};
  });
  if (!st) return fail(st.error());
  auto settled = db->settled_cases(*system_id);
  if (!settled) return fail(settled.error());
  bd::RunRow run;
  run.system_id = *system_id;
  run.command = "writer_helper";
  auto run_id = db->begin_run(run);
  if (!run_id) return fail(run_id.error());
  bd::MeasurementWriter w(*db, *system_id, *run_id, {.batch_rows = batch, .batch_seconds = 1e9});
  int64_t last = 0;
  for (int64_t id : cases) {
    if (settled->count(id)) continue;
    bd::MeasurementRow m;
    m.case_id = id;
    m.status = floorline::Disposition::kPassed;
    m.iterations = 1;
    m.repetitions = 1;
    m.median_us = m.min_us = m.mean_us = 1.0 + static_cast<double>(id % 97);
    if (auto a = w.add(std::move(m)); !a) return fail(a.error());
    if (w.committed() != last) {
      last = w.committed();
      std::printf("committed %lld\n", static_cast<long long>(last));
      std::fflush(stdout);
    }
    if (delay_us) usleep(static_cast<useconds_t>(delay_us));
  }
  if (auto f = w.flush(); !f) return fail(f.error());
  if (auto f = db->finish_run(*run_id, "finished"); !f) return fail(f.error());
  std::printf("committed %lld\ndone\n", static_cast<long long>(w.committed()));
  return 0;
}
