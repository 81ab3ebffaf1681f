#include "sqlite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <fmt/format.h>

namespace floorline::benchdb {

std::string_view sql_type_name(SqlType t) {
  switch (t) {
    case SqlType::kInteger:
      return "INTEGER";
    case SqlType::kReal:
      return "REAL";
    case SqlType::kText:
      return "TEXT";
  }
  return "ANY";
}

bool is_null(const SqlValue& v) {
  return std::holds_alternative<std::monostate>(v);
}

std::string value_text(const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d) && *d == std::floor(*d) && std::fabs(*d) < 1e15) return fmt::format("{:.1f}", *d);
    return fmt::format("{:.6g}", *d);
  }
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return "";
}

nlohmann::json value_json(const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return nullptr;
}

namespace sql {

Error sqlite_error(sqlite3* db, int rc, std::string_view what) {
  const int primary = rc & 0xff;
  std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (primary) {
    case SQLITE_BUSY:
      detail += " (another process held the write lock for longer than the busy timeout)";
      break;
    case SQLITE_NOTADB:
      detail = "not a SQLite database";
      break;
    case SQLITE_CORRUPT:
      detail += " (truncated or corrupt file; `PRAGMA integrity_check` tells more)";
      break;
    case SQLITE_READONLY:
      detail += " (read-only file or location)";
      break;
    case SQLITE_CANTOPEN:
      detail += " (does the directory exist, and may this user write there?)";
      break;
    case SQLITE_FULL:
      detail += " (disk full)";
      break;
    default:
      break;
  }
  return make_error("{}: {}", what, detail);
}

namespace {
std::string first_words(std::string_view sql) {
  std::string s(sql.substr(0, 60));
  for (char& c : s)
    if (c == '\n') c = ' ';
  return sql.size() > 60 ? s + "…" : s;
}
}  // namespace

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = o.stmt_;
    db_ = o.db_;
    o.stmt_ = nullptr;
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Error Statement::error(int rc, std::string_view what) const {
  return sqlite_error(db_, rc, fmt::format("{} \"{}\"", what, first_words(sqlite3_sql(stmt_))));
}

Status Statement::bind(int index, const SqlValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return bind(index, *i);
  if (const auto* d = std::get_if<double>(&v)) return bind(index, *d);
  if (const auto* s = std::get_if<std::string>(&v)) return bind(index, std::string_view(*s));
  return bind_null(index);
}

Status Statement::bind(int index, int64_t v) {
  const int rc = sqlite3_bind_int64(stmt_, index, v);
  if (rc != SQLITE_OK) return error(rc, "bind");
  return {};
}

Status Statement::bind(int index, double v) {
  // NaN is stored by SQLite as NULL; say so explicitly rather than relying on it.
  const int rc = std::isnan(v) ? sqlite3_bind_null(stmt_, index) : sqlite3_bind_double(stmt_, index, v);
  if (rc != SQLITE_OK) return error(rc, "bind");
  return {};
}

Status Statement::bind(int index, std::string_view v) {
  const int rc = sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) return error(rc, "bind");
  return {};
}

Status Statement::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) return error(rc, "bind");
  return {};
}

namespace {
// SQLite returns SQLITE_BUSY without consulting the busy handler in a few cases (a stale read
// snapshot upgrading to a write, a file changing journal mode, WAL recovery). Outside an explicit
// transaction a statement can simply be tried again; this bounds how long.
constexpr auto kBusyRetryFor = std::chrono::seconds(60);
void busy_pause(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2 + 2 * std::min(attempt, 25)));
}
}  // namespace

Result<bool> Statement::step() {
  const auto deadline = std::chrono::steady_clock::now() + kBusyRetryFor;
  for (int attempt = 0;; ++attempt) {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if ((rc & 0xff) == SQLITE_BUSY && sqlite3_get_autocommit(db_) &&
        std::chrono::steady_clock::now() < deadline) {
      sqlite3_reset(stmt_);  // keeps the bindings
      busy_pause(attempt);
      continue;
    }
    return error(rc, "step");
  }
}

Status Statement::run() {
  for (;;) {
    FL_ASSIGN_OR_RETURN(const bool row, step());
    if (!row) return {};
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

SqlValue Statement::column(int i) const {
  switch (sqlite3_column_type(stmt_, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(stmt_, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt_, i);
    case SQLITE_NULL:
      return std::monostate{};
    default:
      return column_text(i);
  }
}

std::string Statement::column_text(int i) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, i))) : std::string();
}

Connection::Connection(Connection&& o) noexcept
    : db_(o.db_), path_(std::move(o.path_)), cache_(std::move(o.cache_)) {
  o.db_ = nullptr;
}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    cache_.clear();
    if (db_) sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    cache_ = std::move(o.cache_);
    o.db_ = nullptr;
  }
  return *this;
}

Connection::~Connection() {
  cache_.clear();  // statements first: sqlite3_close_v2 would otherwise defer the close
  if (db_) sqlite3_close_v2(db_);
}

Result<Connection> Connection::open(const std::string& path, int flags) {
  Connection c;
  c.path_ = path;
  const int rc = sqlite3_open_v2(path.c_str(), &c.db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Error e = sqlite_error(c.db_, rc, fmt::format("cannot open {}", path));
    return e;
  }
  sqlite3_extended_result_codes(c.db_, 1);
  return c;
}

Status Connection::exec(const std::string& fixed_sql) {
  char* msg = nullptr;
  const int rc = sqlite3_exec(db_, fixed_sql.c_str(), nullptr, nullptr, &msg);
  if (rc != SQLITE_OK) {
    if (msg) sqlite3_free(msg);
    return sqlite_error(db_, rc, fmt::format("{}: \"{}\"", path_, first_words(fixed_sql)));
  }
  return {};
}

Result<Statement> Connection::prepare(std::string_view sql) {
  if (sql.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return make_error("{}: SQL text of {} bytes is too long", path_, sql.size());
  sqlite3_stmt* s = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, &tail);
  if (rc != SQLITE_OK)
    return sqlite_error(db_, rc, fmt::format("{}: prepare \"{}\"", path_, first_words(sql)));
  if (!s) return make_error("{}: empty SQL statement", path_);
  Statement st(s, db_);
  // sqlite3_prepare compiles the first statement only: a second one would be dropped without a
  // word. What follows must be nothing, semicolons, white space or comments (which compile to no
  // statement).
  const std::string_view rest = sql.substr(static_cast<size_t>(tail - sql.data()));
  if (rest.find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    sqlite3_stmt* next = nullptr;
    const int rc2 = sqlite3_prepare_v2(db_, rest.data(), static_cast<int>(rest.size()), &next, nullptr);
    if (next) sqlite3_finalize(next);
    if (rc2 != SQLITE_OK || next)
      return make_error("{}: the SQL holds more than one statement (the second begins \"{}\"); give one",
                        path_, first_words(rest.substr(rest.find_first_not_of(" \t\r\n;"))));
  }
  return st;
}

Result<Cached> Connection::cached(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    FL_ASSIGN_OR_RETURN(Statement s, prepare(sql));
    it = cache_.emplace(sql, std::make_unique<Statement>(std::move(s))).first;
  }
  return Cached(it->second.get());
}

Result<int64_t> Connection::scalar_int(const std::string& sql) {
  FL_ASSIGN_OR_RETURN(Statement s, prepare(sql));
  FL_ASSIGN_OR_RETURN(const bool row, s.step());
  if (!row) return make_error("{}: \"{}\" returned no row", path_, sql);
  return s.column_int(0);
}

Result<QueryResult> Connection::query(std::string_view sql) {
  FL_ASSIGN_OR_RETURN(Statement s, prepare(sql));
  QueryResult r;
  for (int i = 0; i < s.column_count(); ++i) r.columns.push_back(s.column_name(i));
  for (;;) {
    FL_ASSIGN_OR_RETURN(const bool row, s.step());
    if (!row) break;
    std::vector<SqlValue> line;
    line.reserve(r.columns.size());
    for (int i = 0; i < s.column_count(); ++i) line.push_back(s.column(i));
    r.rows.push_back(std::move(line));
  }
  return r;
}

Result<Transaction> Transaction::begin(Connection& c) {
  const auto deadline = std::chrono::steady_clock::now() + kBusyRetryFor;
  for (int attempt = 0;; ++attempt) {
    auto st = c.exec("BEGIN IMMEDIATE");
    if (st) return Transaction(&c);
    if ((sqlite3_extended_errcode(c.handle()) & 0xff) != SQLITE_BUSY ||
        std::chrono::steady_clock::now() > deadline)
      return st.error();
    busy_pause(attempt);
  }
}

Transaction::~Transaction() {
  if (c_) (void)c_->exec("ROLLBACK");
}

Status Transaction::commit() {
  Connection* c = c_;
  c_ = nullptr;
  auto st = c->exec("COMMIT");
  if (!st) (void)c->exec("ROLLBACK");
  return st;
}

}  // namespace sql
}  // namespace floorline::benchdb
