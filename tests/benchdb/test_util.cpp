#include "test_util.hpp"

#include <unistd.h>

#include <random>

#include <fmt/format.h>

#include "floorline/model_processor/layer.hpp"

namespace floorline::benchdb::test {

TempDir::TempDir() {
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() / fmt::format("floorline-test-{}-{:08x}", getpid(), rd());
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

SystemRow test_system(const std::string& name) {
  SystemRow s;
  s.device_kind = "cpu";
  s.device_name = name;
  s.cpu_model = name;
  s.cpu_cores = 2;
  s.compute_units = 2;
  s.threads = 1;
  s.libraries = {{"onednn", "2.6.3"}};
  s.floorline_version = "test";
  return s;
}

std::vector<int64_t> seed_cases(Database& db, int configs, int cases_per_config) {
  std::vector<int64_t> ids;
  auto st = db.transaction([&]() -> Status {
    for (int c = 0; c < configs; ++c) {
      LayerConfigRow lc;
      lc.key = fmt::format("Conv|x=1x{}x8x8|w=8x{}x3x3|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32", c + 1,
                           c + 1);
      lc.key_hash = mp::key_hash_hex(lc.key);
      lc.kind = "Conv";
      lc.op_type = "Conv";
      lc.dtype = "f32";
      lc.flops = 1000 * (c + 1);
      lc.bytes = 100 * (c + 1);
      FL_ASSIGN_OR_RETURN(const int64_t cid, db.upsert_config(lc));
      for (int k = 0; k < cases_per_config; ++k) {
        CaseRow cr;
        cr.config_id = cid;
        cr.identity = {"onednn", fmt::format("impl{}", k), "f32", "fp32", "", "", lc.key};
        FL_ASSIGN_OR_RETURN(const int64_t id, db.upsert_case(cr));
        ids.push_back(id);
      }
    }
    return {};
  });
  if (!st) ADD_FAILURE() << st.error().message;
  return ids;
}

MeasurementRow passed(int64_t case_id, double median_us) {
  MeasurementRow m;
  m.case_id = case_id;
  m.status = Disposition::kPassed;
  m.iterations = 10;
  m.repetitions = 1;
  m.min_us = median_us;
  m.median_us = median_us;
  m.mean_us = median_us;
  return m;
}

MeasurementRow failed(int64_t case_id, const std::string& reason) {
  MeasurementRow m;
  m.case_id = case_id;
  m.status = Disposition::kFailed;
  m.reason = reason;
  return m;
}

int64_t scalar(Database& db, const std::string& sql, const std::vector<SqlValue>& params) {
  auto r = db.query(sql, params);
  if (!r) {
    ADD_FAILURE() << r.error().message;
    return -1;
  }
  if (r->rows.empty() || is_null(r->rows[0][0])) return 0;
  return std::get<int64_t>(r->rows[0][0]);
}

std::string helper_path() {
  return FLOORLINE_WRITER_HELPER;
}

}  // namespace floorline::benchdb::test
