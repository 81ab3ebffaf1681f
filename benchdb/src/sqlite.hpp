// A thin RAII layer over the SQLite C API: every statement is prepared and bound, never built
// from values (SQL only through prepared statements). Errors carry the SQLite message
// and the SQL text's first words, so a failure names the call that failed.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include <sqlite3.h>

#include "floorline/benchdb/value.hpp"
#include "floorline/common/result.hpp"

namespace floorline::benchdb::sql {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3_stmt* s, sqlite3* db) : stmt_(s), db_(db) {}
  Statement(Statement&& o) noexcept : stmt_(o.stmt_), db_(o.db_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameter `index` (1-based) to a value; text is copied (SQLITE_TRANSIENT).
  Status bind(int index, const SqlValue& v);
  Status bind(int index, int64_t v);
  Status bind(int index, double v);
  Status bind(int index, std::string_view v);
  Status bind_null(int index);
  // true: a row is available; false: done. Errors name the statement.
  Result<bool> step();
  // Runs to completion, ignoring rows.
  Status run();
  void reset();  // reset and clear bindings, ready for reuse

  int column_count() const { return sqlite3_column_count(stmt_); }
  std::string column_name(int i) const { return sqlite3_column_name(stmt_, i); }
  SqlValue column(int i) const;
  int64_t column_int(int i) const { return sqlite3_column_int64(stmt_, i); }
  double column_double(int i) const { return sqlite3_column_double(stmt_, i); }
  std::string column_text(int i) const;
  bool column_is_null(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  bool read_only() const { return sqlite3_stmt_readonly(stmt_) != 0; }
  std::string sql() const { return sqlite3_sql(stmt_); }

 private:
  Error error(int rc, std::string_view what) const;
  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
};

// A statement borrowed from a connection's cache; reset when the borrow ends. An SQLite statement
// left mid-step keeps its read transaction (and its snapshot) open, and a connection holding a
// stale snapshot can never take the write lock: every borrow must end in a reset.
class Cached {
 public:
  explicit Cached(Statement* s) : s_(s) {}
  Cached(Cached&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Cached(const Cached&) = delete;
  Cached& operator=(const Cached&) = delete;
  Cached& operator=(Cached&&) = delete;
  ~Cached() {
    if (s_) s_->reset();
  }
  Statement* operator->() const { return s_; }
  Statement& operator*() const { return *s_; }

 private:
  Statement* s_;
};

class Connection {
 public:
  Connection() = default;
  Connection(Connection&& o) noexcept;
  Connection& operator=(Connection&& o) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE.
  static Result<Connection> open(const std::string& path, int flags);

  // Runs fixed SQL (DDL, pragmas, BEGIN/COMMIT); never used with values from outside.
  Status exec(const std::string& fixed_sql);
  // A new statement; errors name the SQL.
  Result<Statement> prepare(std::string_view sql);
  // A statement from this connection's cache, ready to bind (prepared once per connection: the
  // insert statements of a batch are not re-prepared); reset when the returned borrow ends.
  Result<Cached> cached(const std::string& sql);
  // One integer from a query such as "PRAGMA user_version".
  Result<int64_t> scalar_int(const std::string& sql);
  // Rows of a query with no parameters.
  Result<QueryResult> query(std::string_view sql);

  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  int changes() const { return sqlite3_changes(db_); }
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
};

// An error from an SQLite result code, worded for people: "database is locked (another process
// held it for longer than busy_timeout)", "not a SQLite database", and so on.
Error sqlite_error(sqlite3* db, int rc, std::string_view what);

// RAII transaction: BEGIN IMMEDIATE on construction (takes the write lock at once, so two writers
// queue on busy_timeout instead of deadlocking), ROLLBACK unless commit() was called.
class Transaction {
 public:
  static Result<Transaction> begin(Connection& c);
  Transaction(Transaction&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Connection* c) : c_(c) {}
  Connection* c_ = nullptr;
};

}  // namespace floorline::benchdb::sql
