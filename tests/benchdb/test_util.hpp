// Helpers for the benchdb tests: temporary files and a small seeded database.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/writer.hpp"

namespace floorline::benchdb::test {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

#define ASSERT_OK(expr)                           \
  do {                                            \
    auto&& ok_ = (expr);                          \
    ASSERT_TRUE(ok_.ok()) << ok_.error().message; \
  } while (0)

template <class T>
T must(Result<T> r) {
  if (!r) {
    ADD_FAILURE() << r.error().message;
    std::abort();
  }
  return std::move(r).value();
}

// A CPU system row that differs by `name`.
SystemRow test_system(const std::string& name);
// `configs` Conv configs with `cases_per_config` onednn cases each; returns the case ids in order.
std::vector<int64_t> seed_cases(Database& db, int configs, int cases_per_config);
// A passed measurement of `case_id` with the given median.
MeasurementRow passed(int64_t case_id, double median_us);
// A failed measurement of `case_id` with the given reason.
MeasurementRow failed(int64_t case_id, const std::string& reason);
int64_t scalar(Database& db, const std::string& sql, const std::vector<SqlValue>& params = {});

// Path of the helper executable (tests/benchdb/writer_helper.cpp).
std::string helper_path();

}  // namespace floorline::benchdb::test
