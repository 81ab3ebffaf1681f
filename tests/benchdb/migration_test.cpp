// Upgrading a real schema-3 file (tests/fixtures/schema_v3.db, written by `floorline run` and
// `floorline db import --framework` before schema 4; tests/fixtures/README.md says how) to the
// current schema: what the old file said, read with plain SQLite, must still be there after.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>
#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "floorline/benchdb/merge.hpp"
#include "floorline/model_processor/layer.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

const std::filesystem::path kFixture =
    std::filesystem::path(FLOORLINE_SOURCE_DIR) / "tests/fixtures/schema_v3.db";

// Every value as text: REAL in its shortest exact form (stod gives the same double back), NULL "".
std::string exact_text(const SqlValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  return value_text(v);
}

// The rows of a query on a file, with plain SQLite (no Floorline code between the file and the
// test), every value as exact_text() would write it.
std::vector<std::vector<std::string>> raw_rows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      auto& row = rows.emplace_back();
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        if (sqlite3_column_type(st, i) == SQLITE_FLOAT) {
          row.push_back(exact_text(SqlValue{sqlite3_column_double(st, i)}));
          continue;
        }
        const auto* t = sqlite3_column_text(st, i);
        row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
      }
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

std::string raw_one(const std::string& path, const std::string& sql) {
  const auto rows = raw_rows(path, sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What the schema-3 file holds, read before any upgrade.
struct Before {
  std::map<std::string, std::map<std::string, std::string>> libraries;  // system id → library → version
  std::map<std::string, std::string> fingerprints;                      // system id → fingerprint
  std::vector<std::vector<std::string>>
      replays;  // model, batch, dtype, settings, median, min, max, stddev, reps, source, measured_at
  std::vector<std::vector<std::string>> frameworks;  // model, runtime, runtime_version, settings, median
  std::map<std::string, std::string> case_names;     // case id → the name schema 3's views gave it
  std::vector<std::vector<std::string>> best;        // best_measurements, ordered
  std::map<std::string, std::string> counts;         // table → rows
  // Case name → its layout and params, for the conversion cases (layout "src:abcd>acdb").
  std::map<std::string, std::pair<std::string, std::string>> conversions;
};

const char* const kCountedTables[] = {"systems",      "runs",  "models",       "layer_configs",
                                      "model_layers", "cases", "measurements", "best_measurements",
                                      "system_peaks"};
const char* const kBestSql =
    "SELECT system_id, config_id, dtype, math_mode, fusion, case_id, measurement_id, median_us FROM "
    "best_measurements "
    "ORDER BY system_id, config_id, dtype, math_mode, fusion";

Before read_before(const std::string& path) {
  Before b;
  EXPECT_EQ(raw_one(path, "PRAGMA user_version"), "3");
  for (const auto& r :
       raw_rows(path,
                "SELECT id, fingerprint, cuda_runtime_version, cudnn_version, cublas_version, "
                "onednn_version FROM systems")) {
    b.fingerprints[r[0]] = r[1];
    auto& libs = b.libraries[r[0]];
    const char* names[] = {"cuda_runtime", "cudnn", "cublas", "onednn"};
    for (int k = 0; k < 4; ++k)
      if (!r[2 + k].empty()) libs[names[k]] = r[2 + k];
  }
  b.replays = raw_rows(path,
                       "SELECT model_name, batch, dtype, settings, median_us, min_us, max_us, stddev_us, "
                       "repetitions, source, measured_at FROM framework_latencies "
                       "WHERE runtime = 'floorline-replay' ORDER BY model_name, batch");
  b.frameworks =
      raw_rows(path,
               "SELECT model_name, runtime, runtime_version, settings, median_us FROM framework_latencies "
               "WHERE runtime <> 'floorline-replay' ORDER BY model_name, runtime, settings");
  // Schema 3's views computed the name in SQL (its kCaseNameSql); every case of the fixture has a
  // current measurement, so current_measurements names them all.
  for (const auto& r : raw_rows(path, "SELECT DISTINCT case_id, case_name FROM current_measurements"))
    b.case_names[r[0]] = r[1];
  b.best = raw_rows(path, kBestSql);
  for (const char* t : kCountedTables) b.counts[t] = raw_one(path, std::string("SELECT count(*) FROM ") + t);
  for (const auto& r : raw_rows(path,
                                "SELECT m.case_name, c.layout, c.params FROM current_measurements m "
                                "JOIN cases c ON c.id = m.case_id WHERE c.algorithm = 'reorder'"))
    b.conversions[r[0]] = {r[1], r[2]};
  return b;
}

// The cases of `db` (the schema-3 file upgraded, or merged from it): each of the old file's
// `conversions` has the conversion its layout text named and the algorithm its params fed in the
// schema-8 columns, and no other case has any of them.
void expect_links_typed(Database& db,
                        const std::map<std::string, std::pair<std::string, std::string>>& texts) {
  auto rows =
      must(db.query("SELECT name, algorithm, conversion_tensor, conversion_from, conversion_to, "
                    "feeds_algorithm, feeds_layout FROM cases"));
  int64_t typed = 0;
  for (const auto& r : rows.rows) {
    const std::string name = value_text(r[0]);
    std::vector<std::string> v;
    for (size_t k = 2; k < 7; ++k) v.push_back(value_text(r[k]));
    if (value_text(r[1]) != "reorder") {
      EXPECT_EQ(v, std::vector<std::string>(5)) << name;
      continue;
    }
    ++typed;
    ASSERT_EQ(texts.count(name), 1u) << name;
    const auto& [layout, params] = texts.at(name);
    EXPECT_EQ(v[0] + ":" + v[1] + ">" + v[2], layout) << name;
    EXPECT_TRUE(v[0] == "src" || v[0] == "dst") << name;
    EXPECT_EQ(v[3], nlohmann::json::parse(params).at("feeds").get<std::string>()) << name;
    EXPECT_EQ(v[4], "") << name;  // oneDNN's reorders feed one algorithm, in whatever layout
  }
  EXPECT_EQ(typed, static_cast<int64_t>(texts.size()));
  EXPECT_EQ(texts.size(), 75u);  // tests/fixtures/README.md
}

class Migration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kFixture)) << kFixture;
    path_ = dir_.file("v3.db");
    std::filesystem::copy_file(kFixture, path_);
    before_ = read_before(path_);
  }
  TempDir dir_;
  std::string path_;
  Before before_;
};

TEST_F(Migration, TheFixtureIsARealSchema3File) {
  // What the migration has to move: a measured system with its oneDNN version, one replay per
  // model, an imported framework latency, and measured cases.
  ASSERT_EQ(before_.libraries.size(), 1u);
  EXPECT_EQ(before_.libraries.begin()->second.count("onednn"), 1u);
  EXPECT_GE(before_.replays.size(), 1u);
  EXPECT_EQ(before_.frameworks.size(), 1u);
  EXPECT_EQ(before_.case_names.size(), static_cast<size_t>(std::stoll(before_.counts["cases"])));
  EXPECT_GT(std::stoll(before_.counts["measurements"]), 0);
  EXPECT_GT(std::stoll(before_.counts["best_measurements"]), 0);
}

TEST_F(Migration, Schema3FileIsUpgradedWithEverythingItHeld) {
  {
    auto db = must(Database::open(path_));
    EXPECT_EQ(db.opened_at_version(), 3);
    EXPECT_EQ(db.schema_version(), kSchemaVersion);  // 3 → 4 → 5 → 6 (schema 6 adds framework_layer_times)
    EXPECT_EQ(scalar(db, "PRAGMA user_version"), kSchemaVersion);
    EXPECT_TRUE(must(db.has_column("framework_layer_times", "layers")));
    EXPECT_EQ(must(db.integrity_check()), "ok");

    // systems: the library columns are gone, their values are in `libraries`; the fingerprint is
    // recomputed, so that the same stack written again finds the row instead of adding one.
    for (const char* c : {"cuda_runtime_version", "cudnn_version", "cublas_version", "onednn_version"})
      EXPECT_FALSE(must(db.has_column("systems", c))) << c;
    std::vector<SystemRow> systems;
    ASSERT_OK(for_each_row<SystemRow>(db, systems_table(), "", {}, [&](SystemRow& s) {
      systems.push_back(s);
      return Status{};
    }));
    ASSERT_EQ(systems.size(), before_.libraries.size());
    for (const auto& s : systems) {
      const std::string id = std::to_string(s.id);
      EXPECT_EQ(s.libraries, before_.libraries.at(id)) << id;
      EXPECT_EQ(s.fingerprint, system_fingerprint(s));
      EXPECT_NE(s.fingerprint, before_.fingerprints.at(id));  // the identity fields changed
      SystemRow again = s;
      again.id = 0;
      again.created_at.clear();
      EXPECT_EQ(must(db.upsert_system(again)), s.id);
    }
    EXPECT_EQ(must(db.count("systems")), std::stoll(before_.counts["systems"]));

    // Replays: moved, with their figures, out of framework_latencies; the framework row stays.
    auto replays = must(
        db.query("SELECT system_id, model_name, batch, dtype, median_us, min_us, max_us, stddev_us, "
                 "repetitions, makeup, measured_at, run_id IS NULL FROM replays ORDER BY model_name, batch"));
    ASSERT_EQ(replays.rows.size(), before_.replays.size());
    for (size_t i = 0; i < replays.rows.size(); ++i) {
      const auto& now = replays.rows[i];
      const auto& old = before_.replays[i];
      EXPECT_EQ("system=" + value_text(now[0]), old[3]);
      EXPECT_EQ(value_text(now[1]), old[0]);
      EXPECT_EQ(value_text(now[2]), old[1]);
      EXPECT_EQ(value_text(now[3]), old[2]);
      EXPECT_DOUBLE_EQ(std::get<double>(now[4]), std::stod(old[4]));
      EXPECT_DOUBLE_EQ(std::get<double>(now[5]), std::stod(old[5]));
      EXPECT_DOUBLE_EQ(std::get<double>(now[6]), std::stod(old[6]));
      EXPECT_DOUBLE_EQ(std::get<double>(now[7]), std::stod(old[7]));
      EXPECT_EQ(value_text(now[8]), old[8]);
      EXPECT_EQ(nlohmann::json::parse(value_text(now[9])), nlohmann::json::parse(old[9]));
      EXPECT_TRUE(nlohmann::json::parse(value_text(now[9])).contains("conversions_us"));
      EXPECT_EQ(value_text(now[10]), old[10]);
      EXPECT_EQ(std::get<int64_t>(now[11]), 1);  // schema 3 did not record the run
    }
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM framework_latencies WHERE runtime = 'floorline-replay'"), 0);
    auto fw = must(db.query(
        "SELECT model_name, runtime, runtime_version, settings, median_us FROM framework_latencies"));
    ASSERT_EQ(fw.rows.size(), 1u);
    for (size_t k = 0; k < 4; ++k) EXPECT_EQ(value_text(fw.rows[0][k]), before_.frameworks[0][k]);
    EXPECT_DOUBLE_EQ(std::get<double>(fw.rows[0][4]), std::stod(before_.frameworks[0][4]));

    // Nothing else gained or lost a row.
    for (const char* t : kCountedTables) EXPECT_EQ(must(db.count(t)), std::stoll(before_.counts[t])) << t;

    // Case names: stored, and what schema 3's SQL gave; the views read them; uids unchanged.
    auto cases =
        must(db.query("SELECT c.id, c.name, c.uid, lc.key, c.backend, c.algorithm, c.dtype, c.math_mode, "
                      "c.layout, c.fusion FROM cases c JOIN layer_configs lc ON lc.id = c.config_id"));
    ASSERT_EQ(cases.rows.size(), before_.case_names.size());
    for (const auto& r : cases.rows) {
      const std::string name = value_text(r[1]);
      EXPECT_EQ(name, before_.case_names.at(value_text(r[0])));
      const floorline::CaseId c{value_text(r[4]), value_text(r[5]), value_text(r[6]), value_text(r[7]),
                                value_text(r[8]), value_text(r[9]), value_text(r[3])};
      EXPECT_EQ(name, case_name(c));
      EXPECT_EQ(value_text(r[2]), mp::key_hash_hex(name));
    }
    EXPECT_EQ(scalar(db,
                     "SELECT count(*) FROM current_measurements m JOIN cases c ON c.id = m.case_id "
                     "WHERE m.case_name IS NOT c.name"),
              0);
    EXPECT_EQ(scalar(db,
                     "SELECT count(*) FROM best_cases b JOIN cases c ON c.id = b.case_id WHERE b.case_name "
                     "IS NOT c.name"),
              0);
    // Schema 8: every conversion case has the conversion its layout named and the algorithm its
    // params fed (schema 3 knew only oneDNN's form) as columns; no other case has either.
    expect_links_typed(db, before_.conversions);

    // model_layer_times, which read a case_name that schema 3's best_cases lacked, works now.
    EXPECT_GT(scalar(db, "SELECT count(best_case) FROM model_layer_times"), 0);

    // best_measurements: rebuilt by the upgrade, one row per group as before, each still the
    // fastest current passed non-conversion case of its group, by the per-case time schema 7 chooses
    // by (min_us, the lowest repetition mean). Where the case with the lowest minimum is the one
    // with the lowest median (schema 3's choice), the row is the same as before.
    auto best = must(db.query(kBestSql));
    ASSERT_EQ(best.rows.size(), before_.best.size());
    int same = 0;
    for (size_t i = 0; i < best.rows.size(); ++i) {
      for (size_t k = 0; k < 5; ++k)
        EXPECT_EQ(exact_text(best.rows[i][k]), before_.best[i][k]) << i << "," << k;
      auto chosen_min = must(db.query("SELECT coalesce(min_us, median_us) FROM measurements WHERE id = ?1",
                                      {std::stoll(exact_text(best.rows[i][6]))}));
      auto earlier_min = must(db.query("SELECT coalesce(min_us, median_us) FROM measurements WHERE id = ?1",
                                       {std::stoll(before_.best[i][6])}));
      EXPECT_LE(std::get<double>(chosen_min.rows.at(0)[0]), std::get<double>(earlier_min.rows.at(0)[0])) << i;
      if (exact_text(best.rows[i][6]) == before_.best[i][6]) {
        ++same;
        for (size_t k = 5; k < best.rows[i].size(); ++k)
          EXPECT_EQ(exact_text(best.rows[i][k]), before_.best[i][k]) << i << "," << k;
      }
    }
    EXPECT_GT(same, 0);
    EXPECT_EQ(scalar(db,
                     "SELECT count(*) FROM best_measurements b WHERE b.min_us IS NOT (SELECT "
                     "min(coalesce(m.min_us, m.median_us)) "
                     "FROM measurements m JOIN cases c ON c.id = m.case_id WHERE m.system_id = b.system_id "
                     "AND c.config_id = b.config_id AND c.dtype = b.dtype AND c.math_mode = b.math_mode "
                     "AND c.fusion = b.fusion AND m.status = 'passed' AND m.superseded = 0 "
                     "AND c.conversion_tensor = '')"),
              0);
  }
  // The upgraded file has the tables, columns, indexes and views of a new one.
  { auto fresh = must(Database::open(dir_.file("fresh.db"))); }
  const std::string shape_sql =
      "SELECT s.type, s.name, p.cid, p.name, p.type, p.\"notnull\", p.dflt_value IS NOT NULL FROM "
      "sqlite_schema s "
      "LEFT JOIN pragma_table_info(s.name) p WHERE s.name NOT LIKE 'sqlite_%' ORDER BY s.type, s.name, p.cid";
  const auto upgraded_shape = raw_rows(path_, shape_sql);
  EXPECT_GT(upgraded_shape.size(), 100u);
  EXPECT_EQ(upgraded_shape, raw_rows(dir_.file("fresh.db"), shape_sql));
  // Opening the upgraded file again changes nothing, not a byte.
  const std::string upgraded = file_bytes(path_);
  {
    auto db = must(Database::open(path_));
    EXPECT_EQ(db.opened_at_version(), kSchemaVersion);
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
  }
  EXPECT_EQ(file_bytes(path_), upgraded);
}

TEST_F(Migration, ReadOnlyOpenRefusesTheOlderFileAndLeavesItByteIdentical) {
  const std::string before = file_bytes(path_);
  OpenOptions ro;
  ro.read_only = true;
  auto db = Database::open(path_, ro);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(
      db.error().message,
      fmt::format("{}: schema 3 is older than this build's {}; `floorline db migrate {}` upgrades it (so "
                  "does any command that writes to it)",
                  path_, kSchemaVersion, path_));
  EXPECT_EQ(file_bytes(path_), before);
  EXPECT_FALSE(std::filesystem::exists(path_ + "-wal"));
}

TEST_F(Migration, Schema5LetsARunBeMarkedDied) {
  // Schema 5 loosens the CHECK of runs.status (by editing the table's SQL) and adds the process
  // columns; the runs of the old file keep their status and get no pid.
  const auto statuses = raw_rows(path_, "SELECT id, status FROM runs ORDER BY id");
  ASSERT_FALSE(statuses.empty());
  {
    auto db = must(Database::open(path_));
    EXPECT_EQ(must(db.integrity_check()), "ok");
    auto now = must(db.query("SELECT id, status, pid IS NULL, boot_id FROM runs ORDER BY id"));
    ASSERT_EQ(now.rows.size(), statuses.size());
    for (size_t i = 0; i < statuses.size(); ++i) {
      EXPECT_EQ(value_text(now.rows[i][1]), statuses[i][1]);
      EXPECT_EQ(std::get<int64_t>(now.rows[i][2]), 1);
      EXPECT_EQ(value_text(now.rows[i][3]), "");
    }
    // Runs without a pid cannot be judged: none is marked.
    EXPECT_TRUE(must(db.mark_dead_runs()).empty());
    ASSERT_OK(db.query("UPDATE runs SET status = 'died' WHERE id = ?1", {now.rows[0][0]}));
    auto bad = db.query("UPDATE runs SET status = 'lost' WHERE id = ?1", {now.rows[0][0]});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("CHECK constraint failed"), std::string::npos) << bad.error().message;
  }
  EXPECT_EQ(raw_one(path_, "SELECT status FROM runs ORDER BY id LIMIT 1"), "died");
  EXPECT_NE(raw_one(path_, "SELECT sql FROM sqlite_schema WHERE name = 'runs'").find("'died'"),
            std::string::npos);
}

TEST_F(Migration, ASchema3FileIsReadByMerge) {
  // merge reads its input as it is (read-only, no upgrade): the old library columns and replay
  // rows arrive where schema 4 keeps them, under the output's ids.
  auto out = must(Database::open(dir_.file("out.db")));
  const auto s = must(merge_into(out, path_));
  EXPECT_EQ(s.systems_added, 1);
  EXPECT_EQ(s.replays_changed, static_cast<int64_t>(before_.replays.size()));
  EXPECT_EQ(s.framework_latencies_changed, 1);
  EXPECT_EQ(s.measurements_added, std::stoll(before_.counts["measurements"]));
  EXPECT_EQ(raw_one(path_, "PRAGMA user_version"), "3");  // the input is left as it was
  auto sys = must(out.query("SELECT id, libraries FROM systems"));
  ASSERT_EQ(sys.rows.size(), 1u);
  EXPECT_EQ(parse_string_map(value_text(sys.rows[0][1])), before_.libraries.begin()->second);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM replays WHERE system_id = ?1", {sys.rows[0][0]}),
            static_cast<int64_t>(before_.replays.size()));
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM framework_latencies WHERE runtime = 'floorline-replay'"), 0);
  // The links between its cases arrive as the columns of schema 8.
  expect_links_typed(out, before_.conversions);
  // The same file upgraded in place and merged gives the same system: one row, not two.
  { auto upgraded = must(Database::open(path_)); }
  const auto again = must(merge_into(out, path_));
  EXPECT_EQ(again.systems_added, 0);
  EXPECT_EQ(again.measurements_added, 0);
  EXPECT_EQ(again.replays_changed, 0);
  EXPECT_EQ(must(out.count("replays")), static_cast<int64_t>(before_.replays.size()));
}

}  // namespace
}  // namespace floorline::benchdb::test
