// The private state of a Database, shared by the files of this library.
#pragma once

#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"
#include "floorline/model_processor/layer.hpp"
#include "sqlite.hpp"

namespace floorline::benchdb {

struct Database::Impl {
  sql::Connection conn;
  std::string path;
  int version = 0;
  int opened_version = 0;
  bool read_only = false;

  Status migrate(int target);
  // The rows an upgrade to `version` moves between what it adds and what it drops.
  Status upgrade_rows(int version);
  Status bind_all(sql::Statement& s, const std::vector<SqlValue>& values);
  // Runs `insert` (an INSERT ... ON CONFLICT DO NOTHING); on a conflict returns the id `find` selects.
  Result<int64_t> insert_or_find(const std::string& insert, const std::vector<SqlValue>& values,
                                 const std::string& find, const std::vector<SqlValue>& key);
};
using Impl = Database::Impl;

LayerConfigRow config_row(const mp::Layer& l);
// Sets a case's identity key to its config's `key`, its name (case_name() of the identity) and, when
// empty, its uid.
void name_case(CaseRow& row, std::string_view key);

}  // namespace floorline::benchdb
