// floorline/benchdb/database.hpp — open, upgrade and write a Floorline results database.
//
// One SQLite file holds every measurement with the stack it was made on (shared/DESIGN.md,
// Database; docs/DATABASE.md). Opening:
//   - a missing or empty file is created at the current schema (kSchemaVersion);
//   - an older Floorline file is upgraded in one transaction (its data kept);
//   - a newer one, a non-SQLite or truncated file, or another application's SQLite file is
//     refused with a one-line error that names the file.
// Connections use WAL, foreign keys, a busy timeout (two writers queue rather than fail), and
// synchronous=FULL (a committed transaction survives power loss). Every statement is prepared.
// Writes happen in transactions: BEGIN IMMEDIATE ... COMMIT.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "floorline/benchdb/schema.hpp"
#include "floorline/benchdb/value.hpp"
#include "floorline/common/result.hpp"

namespace floorline::mp {
struct ModelIR;
}

namespace floorline::benchdb {

struct OpenOptions {
  bool read_only = false;       // no creation, no upgrade; the connection cannot write (query_only)
  int busy_timeout_ms = 60000;  // how long a writer waits for another writer's transaction
  // Create or upgrade only up to this version (tests of the migrations create older files).
  int target_schema_version = kSchemaVersion;
};

class Database {
 public:
  static Result<Database> open(const std::filesystem::path& path, const OpenOptions& options = {});
  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  const std::string& path() const;
  int schema_version() const;
  // The version the file had when opened: 0 for a new file; < schema_version() after an upgrade.
  int opened_at_version() const;

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back if it returns an error.
  Status transaction(const std::function<Status()>& body);

  // --- content-matched rows (return the id of the existing equal row, or insert) --------------
  Result<int64_t> upsert_system(SystemRow row);              // matched by system_fingerprint(row)
  Result<int64_t> upsert_model(const ModelRow& row);         // by (name, fingerprint)
  Result<int64_t> upsert_config(const LayerConfigRow& row);  // by key
  // By content (config, backend, algorithm, dtype, math mode, layout, fusion); fills the name
  // (case_name(), always) and the uid (when empty).
  Result<int64_t> upsert_case(CaseRow row);
  // Model rows, configs and model_layers for processed models (each ModelIR is one batch size);
  // one transaction. Layers already recorded are left as they are.
  Status record_models(const std::vector<mp::ModelIR>& irs);

  // --- runs ---------------------------------------------------------------------------------
  // Inserts a run (uuid and started_at filled in when empty) and returns its id.
  Result<int64_t> begin_run(RunRow row);
  Status finish_run(int64_t run_id, std::string_view status);  // "finished" or "interrupted"

  // Framework latencies: equal (model, runtime, version, device, batch, dtype, settings, threads)
  // replace the earlier figures. Returns 1 when a row was inserted or changed, else 0.
  Result<int> upsert_framework_latency(const FrameworkLatencyRow& row);
  Status upsert_system_peak(const SystemPeakRow& row);
  // A replay: the row of an equal (system, model, batch, dtype) is replaced by a replay measured
  // later (or in the same second and faster). Returns 1 when a row was inserted or changed, else 0.
  Result<int> upsert_replay(const ReplayRow& row);

  // Resume: ids of the cases with a current measurement on this system whose status is final
  // (passed or unsupported). Skipped and failed cases are measured again.
  Result<std::unordered_set<int64_t>> settled_cases(int64_t system_id);
  // The current (status, reason) of every case measured on this system: a case the plan decides
  // without timing (skipped by the --max-impls cap, unsupported) is not written again when its
  // current row already says the same.
  Result<std::unordered_map<int64_t, std::pair<std::string, std::string>>> current_outcomes(
      int64_t system_id);

  // --- reading --------------------------------------------------------------------------------
  // A query with bound parameters (?1, ?2 ... or ?). Use read_only connections for untrusted SQL.
  Result<QueryResult> query(std::string_view sql, const std::vector<SqlValue>& params = {});
  // Streams the rows of a query; `fn` returning an error stops and returns it.
  Status for_each(std::string_view sql, const std::vector<SqlValue>& params,
                  const std::function<Status(const std::vector<std::string>& columns,
                                             const std::vector<SqlValue>& row)>& fn);
  Result<int64_t> count(std::string_view table);
  // Whether `table` has `column` (inputs of older schemas lack the newer columns).
  Result<bool> has_column(std::string_view table, std::string_view column);
  // "ok", or the problems PRAGMA integrity_check lists, joined by "; ".
  Result<std::string> integrity_check();

  // Low-level access for the writer and merge in this library.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Database();
  std::unique_ptr<Impl> impl_;
};

// --- rows through the field lists --------------------------------------------------------------

// The INSERT statement of a table, columns in field-list order ("?1".."?N"); `tail` is appended
// (an ON CONFLICT clause).
template <class Row>
std::string insert_sql(const TableDef<Row>& t, std::string_view tail = "") {
  std::string cols, params;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    cols += (i ? ", " : "") + t.columns[i].name;
    params += (i ? ", ?" : "?") + std::to_string(i + 1);
  }
  std::string s = "INSERT INTO " + t.name + " (" + cols + ") VALUES (" + params + ")";
  if (!tail.empty()) s += " " + std::string(tail);
  return s;
}

template <class Row>
std::vector<SqlValue> row_values(const TableDef<Row>& t, const Row& r) {
  std::vector<SqlValue> v;
  v.reserve(t.columns.size());
  for (const auto& c : t.columns) v.push_back(c.get(r));
  return v;
}

// Fills a row from a result row by column name ("id" included); columns the result lacks keep
// their defaults (an input file of an older schema).
template <class Row>
Row row_from(const TableDef<Row>& t, const std::vector<std::string>& columns,
             const std::vector<SqlValue>& values) {
  Row r;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == "id") {
      r.id = detail::SqlTraits<int64_t>::from(values[i]);
      continue;
    }
    for (const auto& c : t.columns)
      if (c.name == columns[i]) {
        c.set(r, values[i]);
        break;
      }
  }
  return r;
}

// Reads every row of a table (optionally `WHERE ...` with params) through its field list.
template <class Row>
Status for_each_row(Database& db, const TableDef<Row>& t, std::string_view where,
                    const std::vector<SqlValue>& params, const std::function<Status(Row&)>& fn) {
  std::string sql = "SELECT * FROM " + t.name;
  if (!where.empty()) sql += " WHERE " + std::string(where);
  sql += " ORDER BY id";
  return db.for_each(sql, params, [&](const std::vector<std::string>& cols, const std::vector<SqlValue>& v) {
    Row r = row_from(t, cols, v);
    return fn(r);
  });
}

// ISO-8601 UTC now, "2026-11-21T10:00:00Z".
std::string utc_now();
// A random RFC 4122 version-4 UUID.
std::string random_uuid();

}  // namespace floorline::benchdb
