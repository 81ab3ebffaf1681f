#include "floorline/benchdb/database.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "database_impl.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/model_processor/model.hpp"
#include "schema_internal.hpp"

namespace floorline::benchdb {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

std::string random_uuid() {
  std::random_device rd;
  std::array<uint8_t, 16> b{};
  for (size_t i = 0; i < b.size(); i += 4) {
    const uint32_t r = rd();
    std::memcpy(&b[i], &r, 4);
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);
  std::string s;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", b[i]);
  }
  return s;
}

namespace {

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Checks the 100-byte SQLite header before SQLite sees the file, so that a text file or a
// truncated copy gets a precise message instead of "file is not a database" at some later query.
Status check_file_header(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return {};  // missing or empty: a new database
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot read the file", path.string());
  std::array<unsigned char, 100> h{};
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  static constexpr char kMagic[] = "SQLite format 3";  // followed by NUL
  if (in.gcount() < 100 || std::memcmp(h.data(), kMagic, sizeof kMagic) != 0)
    return make_error("{}: not a SQLite database (not a Floorline results file)", path.string());
  uint32_t page_size = (uint32_t{h[16]} << 8) | h[17];
  if (page_size == 1) page_size = 65536;
  const uint32_t change_counter = be32(&h[24]);
  const uint32_t pages = be32(&h[28]);
  const uint32_t valid_for = be32(&h[92]);
  // With a WAL file present the main file may legitimately lag behind; only a quiet file is checked.
  std::filesystem::path wal = path;
  wal += "-wal";
  if (pages != 0 && change_counter == valid_for && !std::filesystem::exists(wal, ec) &&
      size < uint64_t{pages} * page_size)
    return make_error("{}: truncated SQLite database: the header says {} bytes, the file has {}",
                      path.string(), uint64_t{pages} * page_size, size);
  return {};
}

}  // namespace

Database::Database() : impl_(std::make_unique<Impl>()) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

const std::string& Database::path() const {
  return impl_->path;
}
int Database::schema_version() const {
  return impl_->version;
}
int Database::opened_at_version() const {
  return impl_->opened_version;
}

namespace {

// Replays are matched by (system, model, batch, dtype): a later replay replaces the figures (of
// two measured in the same second, the faster), so that merging in any order gives the same rows.
const std::string& upsert_replay_sql() {
  static const std::string s = insert_sql(
      replays_table(),
      "ON CONFLICT (system_id, model_name, batch, dtype) DO UPDATE SET run_id = excluded.run_id, "
      "median_us = excluded.median_us, min_us = excluded.min_us, max_us = excluded.max_us, "
      "stddev_us = excluded.stddev_us, repetitions = excluded.repetitions, makeup = excluded.makeup, "
      "measured_at = excluded.measured_at WHERE excluded.measured_at > replays.measured_at OR "
      "(excluded.measured_at = replays.measured_at AND excluded.median_us < replays.median_us)");
  return s;
}

}  // namespace

void name_case(CaseRow& row, std::string_view key) {
  row.identity.key = std::string(key);
  row.name = case_name(row.identity);
  if (row.uid.empty()) row.uid = mp::key_hash_hex(row.name);
}

// Schemas 4, 5 and 8 move data into the columns and tables they add (from the ones schema 4
// retires, from text for schema 8); the statements that add and drop them come from the field
// lists (migration_statements and retirement_statements), this only moves the rows in between.
Status Impl::upgrade_rows(int version) {
  if (version == 8) {
    // cases: the conversion a case is and the cases it feeds, from the layout and params texts
    // that held them before (case_links_from_legacy); only conversion cases had either.
    FL_ASSIGN_OR_RETURN(const QueryResult cases, conn.query("SELECT * FROM cases"));
    for (const auto& values : cases.rows) {
      CaseRow c = row_from(cases_table(), cases.columns, values);
      case_links_from_legacy(c);
      if (!c.conversion && c.feeds.empty()) continue;
      const LayoutConversion none;
      const LayoutConversion& conv = c.conversion ? *c.conversion : none;
      FL_ASSIGN_OR_RETURN(sql::Cached u,
                          conn.cached("UPDATE cases SET conversion_tensor = ?1, conversion_from = ?2, "
                                      "conversion_to = ?3, feeds_algorithm = ?4, feeds_layout = ?5 "
                                      "WHERE id = ?6"));
      FL_TRY(u->bind(1, std::string_view(conv.tensor)));
      FL_TRY(u->bind(2, std::string_view(conv.from)));
      FL_TRY(u->bind(3, std::string_view(conv.to)));
      FL_TRY(u->bind(4, std::string_view(c.feeds.algorithm)));
      FL_TRY(u->bind(5, std::string_view(c.feeds.layout)));
      FL_TRY(u->bind(6, c.id));
      FL_TRY(u->run());
    }
    return {};
  }
  if (version == 5) {
    // runs.status may be 'died' from schema 5. SQLite cannot ALTER a CHECK constraint; loosening
    // one changes no stored row, which SQLite's documentation allows through writable_schema
    // (lang_altertable.html, "Making Other Kinds Of Table Schema Changes"): the table's SQL is
    // edited and the schema cookie bumped so that every connection reloads it.
    FL_ASSIGN_OR_RETURN(const int64_t cookie, conn.scalar_int("PRAGMA schema_version"));
    FL_TRY(conn.exec("PRAGMA writable_schema = ON"));
    Status edit = [&]() -> Status {
      FL_ASSIGN_OR_RETURN(sql::Statement u,
                          conn.prepare("UPDATE sqlite_schema SET sql = replace(sql, ?1, ?2) "
                                       "WHERE type = 'table' AND name = 'runs'"));
      FL_TRY(u.bind(1, std::string_view(kRunStatusCheckV1)));
      FL_TRY(u.bind(2, std::string_view(kRunStatusCheck)));
      FL_TRY(u.run());
      return conn.exec(fmt::format("PRAGMA schema_version = {}", cookie + 1));
    }();
    FL_TRY(conn.exec("PRAGMA writable_schema = OFF"));
    return edit;
  }
  if (version != 4) return {};
  // systems: the per-library columns become one map; the fingerprint is recomputed because the
  // identity fields changed, so that the same stack measured again finds its old row.
  FL_ASSIGN_OR_RETURN(const QueryResult systems, conn.query("SELECT * FROM systems"));
  std::set<int64_t> system_ids;
  for (const auto& values : systems.rows) {
    SystemRow s = row_from(systems_table(), systems.columns, values);
    for (size_t i = 0; i < systems.columns.size(); ++i) add_legacy_library(s, systems.columns[i], values[i]);
    FL_ASSIGN_OR_RETURN(sql::Cached u,
                        conn.cached("UPDATE systems SET libraries = ?1, fingerprint = ?2 WHERE id = ?3"));
    FL_TRY(u->bind(1, std::string_view(string_map_json(s.libraries))));
    FL_TRY(u->bind(2, std::string_view(system_fingerprint(s))));
    FL_TRY(u->bind(3, s.id));
    FL_TRY(u->run());
    system_ids.insert(s.id);
  }
  // Replays leave framework_latencies for their own table. A replay of a system the file does
  // not have (its settings named the id of another file, before a merge) was never read by
  // anything, since the analyzer only read a system's own; it is dropped, not moved.
  FL_ASSIGN_OR_RETURN(const QueryResult latencies, conn.query("SELECT * FROM framework_latencies"));
  for (const auto& values : latencies.rows) {
    const auto f = row_from(framework_latencies_table(), latencies.columns, values);
    const auto replay = replay_from_legacy(f);
    if (!replay) continue;
    if (system_ids.count(replay->system_id)) {
      FL_ASSIGN_OR_RETURN(sql::Cached ins, conn.cached(upsert_replay_sql()));
      FL_TRY(bind_all(*ins, row_values(replays_table(), *replay)));
      FL_TRY(ins->run());
    }
    FL_ASSIGN_OR_RETURN(sql::Cached del, conn.cached("DELETE FROM framework_latencies WHERE id = ?1"));
    FL_TRY(del->bind(1, f.id));
    FL_TRY(del->run());
  }
  // cases: the name, from case_name() (the views read it from now on).
  FL_ASSIGN_OR_RETURN(
      const QueryResult cases,
      conn.query("SELECT c.*, lc.key FROM cases c JOIN layer_configs lc ON lc.id = c.config_id"));
  for (const auto& values : cases.rows) {
    CaseRow c = row_from(cases_table(), cases.columns, values);
    name_case(c, value_text(values.back()));
    FL_ASSIGN_OR_RETURN(sql::Cached u, conn.cached("UPDATE cases SET name = ?1 WHERE id = ?2"));
    FL_TRY(u->bind(1, std::string_view(c.name)));
    FL_TRY(u->bind(2, c.id));
    FL_TRY(u->run());
  }
  return {};
}

Status Impl::migrate(int target) {
  FL_ASSIGN_OR_RETURN(auto txn, sql::Transaction::begin(conn));
  FL_ASSIGN_OR_RETURN(int64_t v,
                      conn.scalar_int("PRAGMA user_version"));  // another process may have just done it
  if (v == 0) {
    FL_ASSIGN_OR_RETURN(int64_t tables, conn.scalar_int("SELECT count(*) FROM sqlite_schema"));
    if (tables > 0)
      return make_error("{}: not a Floorline database (a SQLite file of another application)", path);
    FL_TRY(conn.exec(fmt::format("PRAGMA application_id = {}", kApplicationId)));
  }
  // Views belong to the current schema and may read columns an upgrade drops: they go first and
  // are re-created at the end. Files created at an older version for tests get none.
  for (const auto& o : derived_objects())
    FL_TRY(conn.exec(fmt::format("DROP {} IF EXISTS {}", o.kind, o.name)));
  for (int s = static_cast<int>(v) + 1; s <= target; ++s) {
    const auto in_step = [s](const Error& e) {
      return e.with_context(fmt::format("upgrading to schema {}", s));
    };
    for (const auto& stmt : migration_statements(s))
      if (auto st = conn.exec(stmt); !st) return in_step(st.error());
    if (auto st = upgrade_rows(s); !st) return in_step(st.error());
    for (const auto& stmt : retirement_statements(s))
      if (auto st = conn.exec(stmt); !st) return in_step(st.error());
  }
  // An upgrade rebuilds what the views and best_measurements derive.
  if (target == kSchemaVersion) {
    for (const auto& o : derived_objects())
      FL_TRY(conn.exec(fmt::format("CREATE {} {} AS {}", o.kind, o.name, o.body)));
    FL_TRY(conn.exec("DELETE FROM best_measurements"));
    FL_TRY(conn.exec(kRebuildBest));
  }
  if (target > v) FL_TRY(conn.exec(fmt::format("PRAGMA user_version = {}", target)));
  FL_TRY(txn.commit());
  version = std::max<int>(static_cast<int>(v), target);
  return {};
}

Result<Database> Database::open(const std::filesystem::path& path, const OpenOptions& options) {
  const std::string p = path.string();
  if (options.target_schema_version < 1 || options.target_schema_version > kSchemaVersion)
    return make_error("{}: schema version {} is not one this build can write (1..{})", p,
                      options.target_schema_version, kSchemaVersion);
  std::error_code ec;
  if (options.read_only && !std::filesystem::exists(path, ec)) return make_error("{}: no such database", p);
  if (std::filesystem::is_directory(path, ec))
    return make_error("{}: is a directory, not a database file", p);
  if (options.read_only && std::filesystem::file_size(path, ec) == 0 && !ec)
    return make_error("{}: an empty file, not a Floorline database", p);
  FL_TRY(check_file_header(path));

  Database db;
  Impl& d = *db.impl_;
  d.path = p;
  d.read_only = options.read_only;
  // A reader opens read-write all the same (without SQLITE_OPEN_CREATE), and query_only below keeps
  // it from writing: SQLite lets only a connection that may write remove a WAL database's -wal and
  // -shm files when it closes last, so a SQLITE_OPEN_READONLY reader left them beside every file it
  // read (each input of `floorline db merge`). A file this user may not write is opened read-only
  // by SQLite itself.
  const int flags = options.read_only ? SQLITE_OPEN_READWRITE : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  FL_ASSIGN_OR_RETURN(d.conn, sql::Connection::open(p, flags));
  FL_TRY(d.conn.exec(fmt::format("PRAGMA busy_timeout = {}", options.busy_timeout_ms)));
  FL_TRY(d.conn.exec("PRAGMA foreign_keys = ON"));
  // Index pages of a large measurements table are touched all over during inserts (one system's
  // cases after another's); a 64 MiB page cache keeps that off the disk.
  FL_TRY(d.conn.exec("PRAGMA cache_size = -65536"));

  // The first read of the file (SQLite reports a damaged header here). One statement, so one
  // snapshot: another process may be creating the schema at this very moment.
  auto head = d.conn.query(
      "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM "
      "pragma_user_version), "
      "(SELECT count(*) FROM sqlite_schema)");
  if (!head) return make_error("{}: {}", p, head.error().message);
  const int64_t app_id = std::get<int64_t>(head->rows[0][0]);
  const int64_t version = std::get<int64_t>(head->rows[0][1]);
  const int64_t tables = std::get<int64_t>(head->rows[0][2]);
  if (app_id != kApplicationId && tables > 0)
    return make_error("{}: not a Floorline database (a SQLite file of another application)", p);
  if (version > kSchemaVersion)
    return make_error(
        "{}: written by a newer Floorline (schema {}; this build reads schemas up to {}); "
        "upgrade Floorline to open it",
        p, version, kSchemaVersion);
  d.opened_version = static_cast<int>(version);
  d.version = static_cast<int>(version);

  if (options.read_only) {
    if (version == 0) return make_error("{}: an empty file, not a Floorline database", p);
    if (version < kSchemaVersion && !options.allow_older_schema)
      return make_error(
          "{}: schema {} is older than this build's {}; `floorline db migrate {}` upgrades it (so does "
          "any command that writes to it)",
          p, version, kSchemaVersion, p);
    FL_TRY(d.conn.exec("PRAGMA query_only = ON"));
    // No statement may set a pragma from here on (query_only = OFF would make the reader a writer).
    sqlite3_set_authorizer(
        d.conn.handle(),
        [](void*, int action, const char*, const char* value, const char*, const char*) {
          return action == SQLITE_PRAGMA && value ? SQLITE_DENY : SQLITE_OK;
        },
        nullptr);
    return db;
  }
  // WAL: readers never block the writer; synchronous=FULL: a committed batch survives power loss.
  // While a new file is still in rollback-journal mode, SQLite returns SQLITE_BUSY at once
  // (without the busy handler) to a second process that races to set it up: retry until the
  // busy timeout.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  auto busy = [&] { return (sqlite3_extended_errcode(d.conn.handle()) & 0xff) == SQLITE_BUSY; };
  for (int attempt = 0;; ++attempt) {
    Status st = [&]() -> Status {
      FL_ASSIGN_OR_RETURN(auto mode, d.conn.query("PRAGMA journal_mode = WAL"));
      if (mode.rows.empty() || value_text(mode.rows[0][0]) != "wal")
        return make_error("{}: cannot switch to WAL journaling (journal_mode is {})", p,
                          mode.rows.empty() ? "unknown" : value_text(mode.rows[0][0]));
      FL_TRY(d.conn.exec("PRAGMA synchronous = FULL"));
      if (version < options.target_schema_version || (version == 0 && tables == 0))
        FL_TRY(d.migrate(options.target_schema_version));
      return {};
    }();
    if (st) break;
    if (!busy() || std::chrono::steady_clock::now() > deadline) return st.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 5 * std::min(attempt, 20)));
  }
  return db;
}

Status Database::transaction(const std::function<Status()>& body) {
  FL_ASSIGN_OR_RETURN(auto txn, sql::Transaction::begin(impl_->conn));
  FL_TRY(body());
  return txn.commit();
}

Status Impl::bind_all(sql::Statement& s, const std::vector<SqlValue>& values) {
  for (size_t i = 0; i < values.size(); ++i) FL_TRY(s.bind(static_cast<int>(i + 1), values[i]));
  return {};
}

Result<int64_t> Impl::insert_or_find(const std::string& insert, const std::vector<SqlValue>& values,
                                     const std::string& find, const std::vector<SqlValue>& key) {
  FL_ASSIGN_OR_RETURN(sql::Cached ins, conn.cached(insert));
  FL_TRY(bind_all(*ins, values));
  FL_TRY(ins->run());
  if (conn.changes() == 1) return conn.last_insert_rowid();
  FL_ASSIGN_OR_RETURN(sql::Cached sel, conn.cached(find));
  FL_TRY(bind_all(*sel, key));
  FL_ASSIGN_OR_RETURN(const bool row, sel->step());
  if (!row) return make_error("{}: row vanished after a conflicting insert ({})", path, find);
  return sel->column_int(0);
}

Result<int64_t> Database::upsert_system(SystemRow row) {
  row.fingerprint = system_fingerprint(row);
  if (row.created_at.empty()) row.created_at = utc_now();
  static const std::string ins = insert_sql(systems_table(), "ON CONFLICT (fingerprint) DO NOTHING");
  return impl_->insert_or_find(ins, row_values(systems_table(), row),
                               "SELECT id FROM systems WHERE fingerprint = ?1", {row.fingerprint});
}

Result<int64_t> Database::upsert_model(const ModelRow& row) {
  static const std::string ins = insert_sql(models_table(), "ON CONFLICT (name, fingerprint) DO NOTHING");
  return impl_->insert_or_find(ins, row_values(models_table(), row),
                               "SELECT id FROM models WHERE name = ?1 AND fingerprint = ?2",
                               {row.name, row.fingerprint});
}

Result<int64_t> Database::upsert_config(const LayerConfigRow& row) {
  static const std::string ins = insert_sql(layer_configs_table(), "ON CONFLICT (key) DO NOTHING");
  return impl_->insert_or_find(ins, row_values(layer_configs_table(), row),
                               "SELECT id FROM layer_configs WHERE key = ?1", {row.key});
}

Result<int64_t> Database::upsert_case(CaseRow row) {
  {
    FL_ASSIGN_OR_RETURN(sql::Cached k, impl_->conn.cached("SELECT key FROM layer_configs WHERE id = ?1"));
    FL_TRY(k->bind(1, row.config_id));
    FL_ASSIGN_OR_RETURN(const bool found, k->step());
    if (!found)
      return make_error("{}: case of config {}, which is not in layer_configs", impl_->path, row.config_id);
    name_case(row, k->column_text(0));  // the name is derived, whatever the caller had in it
  }
  static const std::string ins =
      insert_sql(cases_table(),
                 "ON CONFLICT (config_id, backend, algorithm, dtype, math_mode, layout, fusion) DO NOTHING");
  return impl_->insert_or_find(
      ins, row_values(cases_table(), row),
      "SELECT id FROM cases WHERE config_id = ?1 AND backend = ?2 AND algorithm = ?3 AND dtype = ?4 "
      "AND math_mode = ?5 AND layout = ?6 AND fusion = ?7",
      {row.config_id, row.identity.backend, row.identity.algorithm, row.identity.dtype,
       row.identity.math_mode, row.identity.layout, row.identity.fusion});
}

namespace {

nlohmann::json tensor_json(const mp::TensorArg& t) {
  return {{"role", t.role}, {"shape", t.shape}, {"dtype", std::string(mp::dtype_name(t.dtype))}};
}

}  // namespace

LayerConfigRow config_row(const mp::Layer& l) {
  LayerConfigRow r;
  r.key = l.key;
  r.key_hash = mp::key_hash_hex(l.key);
  r.kind = std::string(mp::kind_name(l.config.kind));
  r.op_type = l.config.op_type;
  r.dtype = std::string(mp::dtype_name(l.config.dtype));
  nlohmann::json p;
  p["inputs"] = nlohmann::json::array();
  for (const auto& t : l.config.inputs) p["inputs"].push_back(tensor_json(t));
  p["outputs"] = nlohmann::json::array();
  for (const auto& t : l.config.outputs) p["outputs"].push_back(tensor_json(t));
  p["attrs"] = nlohmann::json::object();
  for (const auto& a : l.config.attrs) std::visit([&](const auto& v) { p["attrs"][a.name] = v; }, a.value);
  r.params = p.dump();
  if (l.flops >= 0) r.flops = l.flops;
  if (l.bytes >= 0) r.bytes = l.bytes;
  return r;
}

Status Database::record_models(const std::vector<mp::ModelIR>& irs) {
  return transaction([&]() -> Status {
    std::unordered_map<std::string, int64_t> config_ids;
    static const std::string ins_layer =
        insert_sql(model_layers_table(), "ON CONFLICT (model_id, batch, node_index) DO NOTHING");
    for (const auto& ir : irs) {
      ModelRow m;
      m.name = ir.name;
      m.fingerprint = ir.fingerprint;
      m.path = ir.path.string();
      m.ir_version = ir.ir_version;
      m.opset = ir.opset;
      m.node_count = ir.node_count;
      FL_ASSIGN_OR_RETURN(const int64_t model_id, upsert_model(m));
      for (const auto& l : ir.layers) {
        auto it = config_ids.find(l.key);
        if (it == config_ids.end()) {
          FL_ASSIGN_OR_RETURN(const int64_t cid, upsert_config(config_row(l)));
          it = config_ids.emplace(l.key, cid).first;
        }
        ModelLayerRow row;
        row.model_id = model_id;
        row.batch = ir.batch;
        row.node_index = l.index;
        row.node_name = l.name;
        row.op_type = l.op_type;
        row.cost_class = std::string(mp::cost_class_name(l.cost));
        row.config_id = it->second;
        row.preds = nlohmann::json(l.preds).dump();
        row.subgraph = l.subgraph;
        FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(ins_layer));
        FL_TRY(impl_->bind_all(*s, row_values(model_layers_table(), row)));
        FL_TRY(s->run());
      }
    }
    return {};
  });
}

namespace {

std::string read_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Field 22 of /proc/PID/stat (starttime, clock ticks after boot); nullopt when there is no such
// process. The command name (field 2) may hold spaces and parentheses: count from the last ')'.
std::optional<int64_t> process_start(int64_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string f;
  for (int k = 3; k <= 22; ++k)
    if (!(fields >> f)) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(f.c_str(), &end, 10);
  if (end == f.c_str()) return std::nullopt;
  return v;
}

}  // namespace

Result<int64_t> Database::begin_run(RunRow row) {
  if (row.uuid.empty()) {  // a new run, written by this process (a merged or imported one keeps its own)
    row.pid = static_cast<int64_t>(::getpid());
    row.boot_id = read_boot_id();
    row.pid_start = process_start(*row.pid);
    if (row.host_name.empty()) row.host_name = host_name();
  }
  if (row.uuid.empty()) row.uuid = random_uuid();
  if (row.started_at.empty()) row.started_at = utc_now();
  // The columns of the file's schema (a file kept at an older version for the migration tests has
  // no process columns).
  const auto& t = runs_table();
  std::string cols, params;
  std::vector<SqlValue> values;
  for (const auto& c : t.columns) {
    if (c.since > impl_->version) continue;
    values.push_back(c.get(row));
    cols += (cols.empty() ? "" : ", ") + c.name;
    params += (params.empty() ? "?" : ", ?") + std::to_string(values.size());
  }
  FL_ASSIGN_OR_RETURN(sql::Cached s,
                      impl_->conn.cached("INSERT INTO runs (" + cols + ") VALUES (" + params + ")"));
  FL_TRY(impl_->bind_all(*s, values));
  FL_TRY(s->run());
  return impl_->conn.last_insert_rowid();
}

Status Database::finish_run(int64_t run_id, std::string_view status) {
  FL_ASSIGN_OR_RETURN(sql::Cached s,
                      impl_->conn.cached("UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3"));
  FL_TRY(s->bind(1, status));
  FL_TRY(s->bind(2, std::string_view(utc_now())));
  FL_TRY(s->bind(3, run_id));
  return s->run();
}

Result<std::vector<DeadRun>> Database::mark_dead_runs() {
  std::vector<DeadRun> dead;
  if (impl_->read_only || impl_->version < 5) return dead;
  const std::string boot = read_boot_id();
  if (boot.empty()) return dead;  // no /proc here: no process can be checked
  FL_ASSIGN_OR_RETURN(const QueryResult running, query("SELECT id, pid, boot_id, pid_start, started_at FROM "
                                                       "runs WHERE status = 'running' AND host_name = ?1 "
                                                       "AND pid IS NOT NULL AND boot_id <> ''",
                                                       {host_name()}));
  for (const auto& r : running.rows) {
    const int64_t id = std::get<int64_t>(r[0]);
    const int64_t pid = std::get<int64_t>(r[1]);
    const std::string run_boot = value_text(r[2]);
    const int64_t* start = std::get_if<int64_t>(&r[3]);
    // Alive only when this boot still has a process of that pid that started at the same tick.
    const std::optional<int64_t> now = run_boot == boot ? process_start(pid) : std::nullopt;
    const bool alive = now.has_value() && (start == nullptr || *now == *start);
    if (alive) continue;
    FL_ASSIGN_OR_RETURN(
        sql::Cached u,
        impl_->conn.cached("UPDATE runs SET status = 'died' WHERE id = ?1 AND status = 'running'"));
    FL_TRY(u->bind(1, id));
    FL_TRY(u->run());
    if (impl_->conn.changes() == 1) dead.push_back({id, pid, value_text(r[4])});
  }
  return dead;
}

Result<int> Database::upsert_framework_latency(const FrameworkLatencyRow& row) {
  // Re-importing the same figures changes nothing; new figures for the same setting replace the old.
  static const std::string ins =
      insert_sql(framework_latencies_table(),
                 "ON CONFLICT (model_name, runtime, runtime_version, device, batch, dtype, settings, "
                 "threads) DO UPDATE SET "
                 "median_us = excluded.median_us, min_us = excluded.min_us, max_us = excluded.max_us, "
                 "stddev_us = excluded.stddev_us, repetitions = excluded.repetitions, measured_at = "
                 "excluded.measured_at, "
                 "source = excluded.source "
                 "WHERE (excluded.median_us IS NOT framework_latencies.median_us OR excluded.min_us IS NOT "
                 "framework_latencies.min_us "
                 "OR excluded.max_us IS NOT framework_latencies.max_us OR excluded.stddev_us IS NOT "
                 "framework_latencies.stddev_us "
                 "OR excluded.repetitions IS NOT framework_latencies.repetitions) AND "
                 "(excluded.measured_at > framework_latencies.measured_at OR "
                 "(excluded.measured_at = framework_latencies.measured_at AND excluded.median_us < "
                 "framework_latencies.median_us))");
  FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(ins));
  FL_TRY(impl_->bind_all(*s, row_values(framework_latencies_table(), row)));
  FL_TRY(s->run());
  return impl_->conn.changes();
}

Result<int64_t> Database::replace_framework_layer_times(const std::vector<FrameworkLayerTimeRow>& rows) {
  if (rows.empty()) return int64_t{0};
  if (impl_->version < 5)
    return make_error("{}: schema {} has no framework_layer_times table", impl_->path, impl_->version);
  const auto& f = rows.front();
  const std::vector<SqlValue> identity = {f.model_name, f.runtime, f.runtime_version, f.device,
                                          f.batch,      f.dtype,   f.settings,        f.threads};
  for (const auto& r : rows)
    if (std::tie(r.model_name, r.runtime, r.runtime_version, r.device, r.batch, r.dtype, r.settings,
                 r.threads) != std::tie(f.model_name, f.runtime, f.runtime_version, f.device, f.batch,
                                        f.dtype, f.settings, f.threads))
      return make_error("{}: per-layer rows of {} and {} in one profile", impl_->path, f.model_name,
                        r.model_name);
  constexpr const char* kWhere =
      "model_name = ?1 AND runtime = ?2 AND runtime_version = ?3 AND device = ?4 AND batch = ?5 AND dtype = "
      "?6 "
      "AND settings = ?7 AND threads = ?8";
  FL_ASSIGN_OR_RETURN(
      const QueryResult newest,
      query(std::string("SELECT max(measured_at) FROM framework_layer_times WHERE ") + kWhere, identity));
  if (!newest.rows.empty() && !is_null(newest.rows[0][0]) && value_text(newest.rows[0][0]) > f.measured_at)
    return int64_t{0};
  FL_ASSIGN_OR_RETURN(sql::Cached del,
                      impl_->conn.cached(std::string("DELETE FROM framework_layer_times WHERE ") + kWhere));
  FL_TRY(impl_->bind_all(*del, identity));
  FL_TRY(del->run());
  static const std::string ins = insert_sql(framework_layer_times_table());
  for (const auto& r : rows) {
    FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(ins));
    FL_TRY(impl_->bind_all(*s, row_values(framework_layer_times_table(), r)));
    FL_TRY(s->run());
  }
  return static_cast<int64_t>(rows.size());
}

Result<int> Database::upsert_replay(const ReplayRow& row) {
  if (impl_->version < 4)
    return make_error("{}: schema {} has no replays table", impl_->path, impl_->version);
  FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(upsert_replay_sql()));
  FL_TRY(impl_->bind_all(*s, row_values(replays_table(), row)));
  FL_TRY(s->run());
  return impl_->conn.changes();
}

Status Database::upsert_system_peak(const SystemPeakRow& row) {
  if (impl_->version < 2)
    return make_error("{}: schema {} has no system_peaks table", impl_->path, impl_->version);
  static const std::string ins = insert_sql(
      system_peaks_table(),
      "ON CONFLICT (system_id, peak, dtype, math_mode) DO UPDATE SET value_per_s = excluded.value_per_s, "
      "method = excluded.method, measured_at = excluded.measured_at "
      "WHERE excluded.measured_at >= system_peaks.measured_at");
  FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(ins));
  FL_TRY(impl_->bind_all(*s, row_values(system_peaks_table(), row)));
  return s->run();
}

Status Database::upsert_cache_time(const CacheTimeRow& row) {
  if (impl_->version < 10)
    return make_error("{}: schema {} has no cache_times table", impl_->path, impl_->version);
  static const std::string ins = insert_sql(
      cache_times_table(),
      "ON CONFLICT (system_id, case_id, state) DO UPDATE SET median_us = excluded.median_us, "
      "min_us = excluded.min_us, samples = excluded.samples, flush_bytes = excluded.flush_bytes, "
      "measured_at = excluded.measured_at, dst_memory_min_us = CASE WHEN excluded.measured_at = "
      "cache_times.measured_at THEN coalesce(excluded.dst_memory_min_us, cache_times.dst_memory_min_us) ELSE "
      "excluded.dst_memory_min_us END, dirty_memory_min_us = CASE WHEN excluded.measured_at = "
      "cache_times.measured_at THEN coalesce(excluded.dirty_memory_min_us, cache_times.dirty_memory_min_us) "
      "ELSE excluded.dirty_memory_min_us END WHERE "
      "excluded.measured_at > cache_times.measured_at OR (excluded.measured_at = cache_times.measured_at AND "
      "(excluded.min_us, excluded.median_us, excluded.dst_memory_min_us, excluded.dirty_memory_min_us) IS "
      "NOT "
      "(cache_times.min_us, cache_times.median_us, cache_times.dst_memory_min_us, "
      "cache_times.dirty_memory_min_us))");
  FL_ASSIGN_OR_RETURN(sql::Cached s, impl_->conn.cached(ins));
  FL_TRY(impl_->bind_all(*s, row_values(cache_times_table(), row)));
  return s->run();
}

Result<std::vector<BudgetSystem>> Database::thread_budget(int64_t system_id) {
  std::vector<SystemRow> systems;
  FL_TRY(for_each_row<SystemRow>(*this, systems_table(), "", {}, [&](SystemRow& r) -> Status {
    systems.push_back(std::move(r));
    return Status{};
  }));
  const auto self =
      std::find_if(systems.begin(), systems.end(), [&](const SystemRow& r) { return r.id == system_id; });
  if (self == systems.end()) return make_error("{}: no system {}", path(), system_id);
  const std::string host = host_fingerprint(*self);
  std::vector<BudgetSystem> out;
  for (const auto& r : systems)
    if (r.threads <= self->threads && host_fingerprint(r) == host) out.push_back({r.id, r.threads});
  std::sort(out.begin(), out.end(), [](const BudgetSystem& a, const BudgetSystem& b) {
    return std::tie(a.threads, a.system_id) < std::tie(b.threads, b.system_id);
  });
  return out;
}

Result<std::unordered_set<int64_t>> Database::settled_cases(int64_t system_id) {
  std::unordered_set<int64_t> out;
  FL_TRY(for_each(
      "SELECT case_id FROM measurements WHERE system_id = ?1 AND superseded = 0 "
      "AND (status IN ('passed', 'unsupported') OR (status = 'skipped' AND reason LIKE 'raced out:%'))",
      {system_id}, [&](const auto&, const std::vector<SqlValue>& v) -> Status {
        out.insert(std::get<int64_t>(v[0]));
        return {};
      }));
  return out;
}

Result<std::unordered_map<int64_t, std::pair<std::string, std::string>>> Database::current_outcomes(
    int64_t system_id) {
  std::unordered_map<int64_t, std::pair<std::string, std::string>> out;
  FL_TRY(for_each("SELECT case_id, status, reason FROM measurements WHERE system_id = ?1 AND superseded = 0",
                  {system_id}, [&](const auto&, const std::vector<SqlValue>& v) -> Status {
                    const auto* reason = std::get_if<std::string>(&v[2]);
                    out[std::get<int64_t>(v[0])] = {std::get<std::string>(v[1]), reason ? *reason : ""};
                    return {};
                  }));
  return out;
}

Result<QueryResult> Database::query(std::string_view sql, const std::vector<SqlValue>& params) {
  return query(sql, params, QueryLimits{});
}

namespace {

// sqlite3_progress_handler callback: a non-zero return interrupts the statement (SQLITE_INTERRUPT).
int past_deadline(void* deadline) {
  return std::chrono::steady_clock::now() > *static_cast<std::chrono::steady_clock::time_point*>(deadline)
             ? 1
             : 0;
}

}  // namespace

Result<QueryResult> Database::query(std::string_view sql, const std::vector<SqlValue>& params,
                                    const QueryLimits& limits) {
  FL_ASSIGN_OR_RETURN(sql::Statement s, impl_->conn.prepare(sql));
  if (impl_->read_only && !s.read_only())
    return make_error("{}: the database is open read-only", impl_->path);
  FL_TRY(impl_->bind_all(s, params));
  sqlite3* h = impl_->conn.handle();
  std::chrono::steady_clock::time_point deadline{};
  if (limits.timeout_seconds > 0) {
    deadline =
        std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double>(limits.timeout_seconds));
    sqlite3_progress_handler(h, 10000, past_deadline, &deadline);
  }
  struct Unset {
    sqlite3* h;
    bool on;
    ~Unset() {
      if (on) sqlite3_progress_handler(h, 0, nullptr, nullptr);
    }
  } unset{h, limits.timeout_seconds > 0};
  // What SQLite itself holds while it computes (a recursive CTE under ORDER BY, a GROUP BY over
  // it) is bounded too, through its heap limit; the previous limit is restored afterwards.
  const int64_t heap_limit = limits.max_bytes > 0 ? 2 * limits.max_bytes + (int64_t{256} << 20) : 0;
  struct HeapLimit {
    int64_t previous = -1;
    explicit HeapLimit(int64_t limit) {
      if (limit > 0) previous = sqlite3_hard_heap_limit64(limit);
    }
    ~HeapLimit() {
      if (previous >= 0) sqlite3_hard_heap_limit64(previous);
    }
  } heap{heap_limit};
  QueryResult r;
  const int n = s.column_count();
  for (int i = 0; i < n; ++i) r.columns.push_back(s.column_name(i));
  int64_t bytes = 0;
  for (;;) {
    auto more = s.step();
    if (!more) {
      if ((sqlite3_errcode(h) & 0xff) == SQLITE_INTERRUPT && limits.timeout_seconds > 0)
        return make_error("{}: the query ran longer than {:g} s (--timeout); narrow it", impl_->path,
                          limits.timeout_seconds);
      if ((sqlite3_errcode(h) & 0xff) == SQLITE_NOMEM && heap_limit > 0)
        return make_error("{}: the query needs more than {} MiB of memory inside SQLite; narrow it",
                          impl_->path, heap_limit >> 20);
      return more.error().with_context(impl_->path);
    }
    if (!*more) return r;
    if (limits.max_rows > 0 && static_cast<int64_t>(r.rows.size()) >= limits.max_rows)
      return make_error(
          "{}: the query returned more than {} rows (--max-rows); add a LIMIT or raise --max-rows",
          impl_->path, limits.max_rows);
    auto& row = r.rows.emplace_back();
    row.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      row.push_back(s.column(i));
      if (const auto* t = std::get_if<std::string>(&row.back())) bytes += static_cast<int64_t>(t->size());
      bytes += 16;
    }
    if (limits.max_bytes > 0 && bytes > limits.max_bytes)
      return make_error("{}: the query's result is larger than {} MiB; add a LIMIT or select fewer columns",
                        impl_->path, limits.max_bytes >> 20);
  }
}

Status Database::for_each(
    std::string_view sql, const std::vector<SqlValue>& params,
    const std::function<Status(const std::vector<std::string>&, const std::vector<SqlValue>&)>& fn) {
  FL_ASSIGN_OR_RETURN(sql::Statement s, impl_->conn.prepare(sql));
  if (impl_->read_only && !s.read_only())
    return make_error("{}: the database is open read-only", impl_->path);
  FL_TRY(impl_->bind_all(s, params));
  std::vector<std::string> cols;
  for (int i = 0; i < s.column_count(); ++i) cols.push_back(s.column_name(i));
  std::vector<SqlValue> row(cols.size());
  for (;;) {
    auto more = s.step();
    if (!more) return more.error().with_context(impl_->path);
    if (!*more) return {};
    for (size_t i = 0; i < cols.size(); ++i) row[i] = s.column(static_cast<int>(i));
    FL_TRY(fn(cols, row));
  }
}

Result<int64_t> Database::count(std::string_view table) {
  // Table names cannot be bound; only our own names are accepted.
  for (const auto& t : all_tables())
    if (t.name == table) return impl_->conn.scalar_int(fmt::format("SELECT count(*) FROM {}", t.name));
  return make_error("no table named {}", table);
}

Result<bool> Database::has_column(std::string_view table, std::string_view column) {
  FL_ASSIGN_OR_RETURN(auto r, query("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
                                    {std::string(table), std::string(column)}));
  return !r.rows.empty() && std::get<int64_t>(r.rows[0][0]) > 0;
}

Result<std::string> Database::integrity_check() {
  FL_ASSIGN_OR_RETURN(auto r, impl_->conn.query("PRAGMA integrity_check"));
  std::string out;
  for (const auto& row : r.rows) out += (out.empty() ? "" : "; ") + value_text(row[0]);
  return out;
}

}  // namespace floorline::benchdb
