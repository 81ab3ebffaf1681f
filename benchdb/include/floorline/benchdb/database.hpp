// floorline/benchdb/database.hpp — open, upgrade and write a Floorline results database.
//
// One SQLite file holds every measurement with the stack it was made on (docs/DATABASE.md).
// Opening to write (the default):
//   - a missing or empty file is created at the current schema (kSchemaVersion);
//   - an older Floorline file is upgraded in one transaction (its data kept);
//   - a newer one, a non-SQLite or truncated file, or another application's SQLite file is
//     refused with a one-line error that names the file.
// Opening read-only (the read commands: db info, db query, analyze, system --db) creates, upgrades
// and writes nothing: a missing file, an empty file and an older schema are refused too (the
// message names `floorline db migrate`), and every refused file is left byte-identical.
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
  bool read_only = false;  // no creation, no upgrade; the connection cannot write (query_only)
  // With read_only: read a file of an older schema as it is (merge reads its inputs so) instead of
  // refusing it.
  bool allow_older_schema = false;
  int busy_timeout_ms = 60000;  // how long a writer waits for another writer's transaction
  // Create or upgrade only up to this version (tests of the migrations create older files).
  int target_schema_version = kSchemaVersion;
};

// Bounds on what one query may return or take (0: no bound), for SQL from the command line:
// exceeding one is an error that names the bound, never a partial result.
struct QueryLimits {
  int64_t max_rows = 0;
  int64_t max_bytes = 0;       // text and blob bytes of the result, plus 16 per value
  double timeout_seconds = 0;  // wall time of the whole query
};

// A run whose process is gone (Database::mark_dead_runs).
struct DeadRun {
  int64_t run_id = 0;
  int64_t pid = 0;
  std::string started_at;
};

// One system of a thread budget (Database::thread_budget).
struct BudgetSystem {
  int64_t system_id = 0;
  int64_t threads = 1;
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
  // Marks 'died' every run still 'running' whose process is gone: recorded on this host (runs of
  // other hosts cannot be checked from here) and either of an earlier boot or with no process of
  // its pid and start time. Runs without a pid (before schema 5) are left as they are. The write
  // commands call it when they open a database; returns the runs marked.
  Result<std::vector<DeadRun>> mark_dead_runs();

  // Framework latencies: equal (model, runtime, version, device, batch, dtype, settings, threads)
  // replace the earlier figures. Returns 1 when a row was inserted or changed, else 0.
  Result<int> upsert_framework_latency(const FrameworkLatencyRow& row);
  Status upsert_system_peak(const SystemPeakRow& row);
  // (v6) One runtime profile's per-node rows, which must all share one framework_latencies
  // identity (model, runtime, version, device, batch, dtype, settings, threads): they replace the
  // rows of that identity unless those were measured later (measured_at). Returns the rows
  // written (0 when the stored profile is newer). Errors: rows of several identities; a schema
  // older than 5.
  Result<int64_t> replace_framework_layer_times(const std::vector<FrameworkLayerTimeRow>& rows);
  // A replay: the row of an equal (system, model, batch, dtype) is replaced by a replay measured
  // later (or in the same second and faster). Returns 1 when a row was inserted or changed, else 0.
  Result<int> upsert_replay(const ReplayRow& row);
  // (v10) A case's time in a cache state: the row of an equal (system, case, state) is replaced by
  // one measured later, or at the same time with other times (an identical row changes nothing).
  // Error on a schema older than 10.
  Status upsert_cache_time(const CacheTimeRow& row);

  // Resume: ids of the cases with a current measurement on this system whose status is final
  // (passed, unsupported, or skipped as raced out: generator/runner.hpp). Other skipped and failed
  // cases are measured again.
  Result<std::unordered_set<int64_t>> settled_cases(int64_t system_id);
  // The current (status, reason) of every case measured on this system: a case the plan decides
  // without timing (skipped by the --max-impls cap, unsupported) is not written again when its
  // current row already says the same.
  Result<std::unordered_map<int64_t, std::pair<std::string, std::string>>> current_outcomes(
      int64_t system_id);

  // The thread budget of a system: the systems of its host (host_fingerprint) measured with at
  // most its thread count, itself included, by thread count ascending. Error for an unknown id.
  Result<std::vector<BudgetSystem>> thread_budget(int64_t system_id);

  // --- reading --------------------------------------------------------------------------------
  // A query with bound parameters (?1, ?2 ... or ?). Use read_only connections for untrusted SQL.
  // SQL holding more than one statement is refused (SQLite would run the first alone).
  Result<QueryResult> query(std::string_view sql, const std::vector<SqlValue>& params = {});
  // The same within `limits`; errors: "FILE: the query returned more than N rows (--max-rows)",
  // "... more than N bytes ...", "... ran longer than S s ...".
  Result<QueryResult> query(std::string_view sql, const std::vector<SqlValue>& params,
                            const QueryLimits& limits);
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
