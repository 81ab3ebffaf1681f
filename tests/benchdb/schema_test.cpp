// Opening, creating and upgrading databases; the schema follows the field lists; bad files.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <sqlite3.h>

#include "floorline/benchdb/merge.hpp"
#include "floorline/benchdb/schema.hpp"
#include "floorline/benchdb/system.hpp"
#include "floorline/model_processor/layer.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

// Raw SQLite access, to build files Floorline would never write.
void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

// Inserts `row` with the columns a file of schema `version` has (the retired ones given in
// `retired`), as that version wrote it; returns the new id.
template <class Row>
int64_t insert_as_of(Database& db, const TableDef<Row>& t, const Row& row, int version,
                     const std::vector<std::pair<std::string, SqlValue>>& retired = {}) {
  std::string names, params;
  std::vector<SqlValue> values;
  auto add = [&](const std::string& name, SqlValue v) {
    names += (values.empty() ? "" : ", ") + name;
    values.push_back(std::move(v));
    params += (values.size() == 1 ? "?" : ", ?") + std::to_string(values.size());
  };
  for (const auto& c : t.columns)
    if (c.since <= version) add(c.name, c.get(row));
  for (const auto& [name, v] : retired) add(name, v);
  auto r = must(
      db.query("INSERT INTO " + t.name + " (" + names + ") VALUES (" + params + ") RETURNING id", values));
  return std::get<int64_t>(r.rows.at(0).at(0));
}

template <class Row>
void expect_columns_match(Database& db, const TableDef<Row>& t) {
  auto r = must(db.query("SELECT name, type, \"notnull\" FROM pragma_table_info(?1)", {t.name}));
  ASSERT_EQ(r.rows.size(), t.columns.size() + 1) << t.name;
  EXPECT_EQ(value_text(r.rows[0][0]), "id");
  for (size_t i = 0; i < t.columns.size(); ++i) {
    EXPECT_EQ(value_text(r.rows[i + 1][0]), t.columns[i].name) << t.name;
    EXPECT_EQ(value_text(r.rows[i + 1][1]), sql_type_name(t.columns[i].type)) << t.columns[i].name;
    EXPECT_EQ(std::get<int64_t>(r.rows[i + 1][2]), t.columns[i].nullable ? 0 : 1) << t.columns[i].name;
  }
}

TEST(Schema, NewFileHasCurrentSchemaAndTablesFollowTheFieldLists) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_EQ(db.opened_at_version(), 0);
  EXPECT_EQ(scalar(db, "PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(value_text(must(db.query("PRAGMA journal_mode")).rows[0][0]), "wal");
  EXPECT_EQ(scalar(db, "PRAGMA foreign_keys"), 1);
  expect_columns_match(db, systems_table());
  expect_columns_match(db, runs_table());
  expect_columns_match(db, models_table());
  expect_columns_match(db, layer_configs_table());
  expect_columns_match(db, model_layers_table());
  expect_columns_match(db, cases_table());
  expect_columns_match(db, measurements_table());
  expect_columns_match(db, best_measurements_table());
  expect_columns_match(db, framework_latencies_table());
  expect_columns_match(db, system_peaks_table());
  expect_columns_match(db, replays_table());
  expect_columns_match(db, framework_layer_times_table());
  expect_columns_match(db, cache_times_table());
  // Every table is STRICT.
  auto strict =
      must(db.query("SELECT name, strict FROM pragma_table_list WHERE schema = 'main' "
                    "AND type = 'table' AND name NOT LIKE 'sqlite_%'"));
  EXPECT_EQ(strict.rows.size(), 13u);  // schema 6 adds framework_layer_times, 10 cache_times
  for (const auto& row : strict.rows) EXPECT_EQ(std::get<int64_t>(row[1]), 1) << value_text(row[0]);
  for (const char* view : {"current_measurements", "best_cases", "default_cases", "unique_configs",
                           "model_layer_times", "run_summary"}) {
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name = ?1", {view}), 1)
        << view;
    EXPECT_TRUE(db.query(std::string("SELECT * FROM ") + view).ok()) << view;  // every column it names exists
  }
}

TEST(Schema, StrictTypesChecksAndForeignKeysAreEnforced) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const auto cases = seed_cases(db, 1, 1);
  const int64_t sys = must(db.upsert_system(test_system("a")));
  RunRow run;
  run.system_id = sys;
  const int64_t run_id = must(db.begin_run(run));
  MeasurementWriter w(db, sys, run_id);
  // A measurement of a case that does not exist violates the foreign key: the batch fails whole.
  ASSERT_OK(w.add(passed(cases[0], 5.0)));
  ASSERT_OK(w.add(passed(9999, 5.0)));
  auto st = w.flush();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("FOREIGN KEY"), std::string::npos) << st.error().message;
  EXPECT_EQ(must(db.count("measurements")), 0);
  // A status outside the four is refused by the CHECK constraint: "not verifiable" is what a
  // verification reports, never a measurement's outcome.
  MeasurementWriter w2(db, sys, run_id);
  MeasurementRow bad = passed(cases[0], 1.0);
  bad.status = Disposition::kNotVerifiable;
  ASSERT_OK(w2.add(bad));
  EXPECT_FALSE(w2.flush().ok());
  // Raw SQL connections are read-only.
  OpenOptions ro;
  ro.read_only = true;
  auto rodb = must(Database::open(dir.file("r.db"), ro));
  auto del = rodb.query("DELETE FROM systems");
  ASSERT_FALSE(del.ok());
  EXPECT_NE(del.error().message.find("read-only"), std::string::npos) << del.error().message;
}

TEST(Schema, OlderFileIsUpgradedWithItsData) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  {
    OpenOptions v1;
    v1.target_schema_version = 1;
    auto db = must(Database::open(path, v1));
    EXPECT_EQ(db.schema_version(), 1);
    EXPECT_FALSE(must(db.has_column("measurements", "throttled")));
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'system_peaks'"), 0);
    EXPECT_TRUE(must(db.has_column("systems", "onednn_version")));
    EXPECT_FALSE(must(db.has_column("systems", "libraries")));
    EXPECT_FALSE(must(db.has_column("cases", "name")));
    // A version-1 file has no cases.name and one column per library version: write those rows
    // the way version 1 did.
    std::vector<int64_t> cases;
    for (int k = 0; k < 2; ++k) {
      LayerConfigRow lc;
      lc.key = fmt::format("Conv|x=1x{}x8x8|w=8x{}x3x3|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32", k + 1,
                           k + 1);
      lc.kind = lc.op_type = "Conv";
      lc.dtype = "f32";
      const int64_t config = must(db.upsert_config(lc));
      for (const char* algorithm : {"impl0", "impl1"}) {
        CaseRow c;
        c.config_id = config;
        c.identity = {"onednn", algorithm, "f32", "fp32", "", "", lc.key};
        c.uid = mp::key_hash_hex(case_name(c.identity));
        cases.push_back(insert_as_of(db, cases_table(), c, 1));
      }
    }
    SystemRow old = test_system("old");
    old.fingerprint = "0123456789abcdef";  // version 1's hash of its identity columns
    const int64_t sys = insert_as_of(db, systems_table(), old, 1,
                                     {{"cuda_runtime_version", ""},
                                      {"cudnn_version", ""},
                                      {"cublas_version", ""},
                                      {"onednn_version", "2.6.3"}});
    SystemRow gpu = test_system("gpu");
    gpu.device_kind = "gpu";
    gpu.fingerprint = "fedcba9876543210";
    insert_as_of(db, systems_table(), gpu, 1,
                 {{"cuda_runtime_version", "13.0"},
                  {"cudnn_version", "9.19.0"},
                  {"cublas_version", "13.1.0"},
                  {"onednn_version", ""}});
    // Versions 1-3 stored replays as framework latencies: one of system 1 with a make-up in plain
    // text, one naming a system the file does not have; and a real framework's latency.
    FrameworkLatencyRow f;
    f.model_name = "resnet50";
    f.runtime = "floorline-replay";
    f.settings = "system=1";
    f.median_us = 120;
    f.source = "replay of 4 layers";
    f.measured_at = "2026-01-01T00:00:00Z";
    ASSERT_OK(db.upsert_framework_latency(f));
    f.settings = "system=99";
    ASSERT_OK(db.upsert_framework_latency(f));
    f.runtime = "pytorch";
    f.settings = "eager";
    f.median_us = 150;
    ASSERT_OK(db.upsert_framework_latency(f));
    RunRow run;
    run.system_id = sys;
    const int64_t run_id = must(db.begin_run(run));
    // A version-1 file has no throttled column: write the rows the way version 1 did.
    for (size_t i = 0; i < cases.size(); ++i)
      ASSERT_OK(
          db.query("INSERT INTO measurements (case_id, system_id, run_id, status, reason, is_default, "
                   "iterations, repetitions, median_us, measured_at, superseded) "
                   "VALUES (?1, ?2, ?3, 'passed', '', 0, 1, 1, ?4, '2026-01-01T00:00:00Z', 0)",
                   {cases[i], sys, run_id, 10.0 - static_cast<double>(i)}));
  }
  auto db = must(Database::open(path));
  EXPECT_EQ(db.opened_at_version(), 1);
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_EQ(scalar(db, "PRAGMA user_version"), kSchemaVersion);
  EXPECT_TRUE(must(db.has_column("measurements", "throttled")));
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM measurements WHERE throttled = 0"), 4);
  expect_columns_match(db, system_peaks_table());
  // best_measurements was rebuilt from the old rows: config 1's best is 9 µs, config 2's 7 µs.
  auto best = must(db.query("SELECT median_us FROM best_cases ORDER BY config_id"));
  ASSERT_EQ(best.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(std::get<double>(best.rows[0][0]), 9.0);
  EXPECT_DOUBLE_EQ(std::get<double>(best.rows[1][0]), 7.0);
  ASSERT_OK(db.upsert_system_peak({0, 1, "flops", "f32", "fp32", 1e11, "test", "2026-01-01T00:00:00Z"}));
  // Version 4: the library column became libraries, the fingerprint is the current one (so the
  // same stack finds its row again), the cases have their names, and the file has the columns
  // and tables of a new one.
  EXPECT_FALSE(must(db.has_column("systems", "onednn_version")));
  auto libraries = must(db.query("SELECT libraries FROM systems ORDER BY id"));
  ASSERT_EQ(libraries.rows.size(), 2u);
  EXPECT_EQ(value_text(libraries.rows[0][0]), R"({"onednn":"2.6.3"})");
  EXPECT_EQ(value_text(libraries.rows[1][0]),
            R"({"cublas":"13.1.0","cuda_runtime":"13.0","cudnn":"9.19.0"})");
  EXPECT_EQ(must(db.upsert_system(test_system("old"))), 1);
  EXPECT_EQ(must(db.count("systems")), 2);
  // The replay of system 1 moved (its plain-text make-up kept as a JSON string); the one of a
  // system the file lacks, which nothing could read, is gone; the framework latency stayed.
  auto replay = must(db.query("SELECT system_id, model_name, median_us, makeup, run_id FROM replays"));
  ASSERT_EQ(replay.rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(replay.rows[0][0]), 1);
  EXPECT_EQ(value_text(replay.rows[0][1]), "resnet50");
  EXPECT_DOUBLE_EQ(std::get<double>(replay.rows[0][2]), 120.0);
  EXPECT_EQ(value_text(replay.rows[0][3]), R"("replay of 4 layers")");
  EXPECT_TRUE(is_null(replay.rows[0][4]));
  auto fw = must(db.query("SELECT runtime, median_us FROM framework_latencies"));
  ASSERT_EQ(fw.rows.size(), 1u);
  EXPECT_EQ(value_text(fw.rows[0][0]), "pytorch");
  auto names = must(db.query(
      "SELECT c.name, lc.key FROM cases c JOIN layer_configs lc ON lc.id = c.config_id ORDER BY c.id"));
  ASSERT_EQ(names.rows.size(), 4u);
  EXPECT_EQ(value_text(names.rows[1][0]), "onednn/impl1/f32/fp32/" + value_text(names.rows[1][1]));
  expect_columns_match(db, systems_table());
  expect_columns_match(db, cases_table());
  expect_columns_match(db, replays_table());
}

// Schema 8: the links between cases, text until schema 7 (a conversion's layout "src:abcd>aBcd16b",
// params.feeds an algorithm for oneDNN or "layout:nhwc" for XNNPACK and CUDA), become columns on
// upgrade, and a merge of the schema-7 file gives the same columns.
TEST(Schema, Schema7LinksBetweenCasesBecomeColumns) {
  TempDir dir;
  const std::string path = dir.file("v7.db");
  struct Old {
    const char* backend;
    const char* algorithm;
    const char* layout;
    const char* params;
    double us;
  };
  // The conversions are the fastest cases of their config: not its best once they are known.
  const Old olds[] = {
      {"onednn", "direct:blocked", "", "{}", 50},
      {"onednn", "reorder", "src:abcd>aBcd16b", R"({"feeds":"direct:blocked","library":"onednn"})", 2},
      {"xnnpack", "xnn_convolution_nhwc", "nhwc", "{}", 40},
      {"xnnpack", "floorline-kernel:transpose", "src:nchw>nhwc", R"({"feeds":"layout:nhwc"})", 1},
  };
  {
    OpenOptions v7;
    v7.target_schema_version = 7;
    auto db = must(Database::open(path, v7));
    EXPECT_FALSE(must(db.has_column("cases", "feeds_algorithm")));
    LayerConfigRow lc;
    lc.key = "Conv|x=1x8x8x8|w=8x8x3x3|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32";
    lc.kind = lc.op_type = "Conv";
    lc.dtype = "f32";
    const int64_t config = must(db.upsert_config(lc));
    const int64_t sys = insert_as_of(db, systems_table(), test_system("old"), 7);
    RunRow run;
    run.system_id = sys;
    run.uuid = "00000000-0000-4000-8000-000000000007";
    run.started_at = "2026-01-01T00:00:00Z";
    const int64_t run_id = insert_as_of(db, runs_table(), run, 7);
    for (const Old& o : olds) {
      CaseRow c;
      c.config_id = config;
      c.identity = {o.backend, o.algorithm, "f32", "fp32", o.layout, "", lc.key};
      c.params = o.params;
      c.name = case_name(c.identity);
      c.uid = mp::key_hash_hex(c.name);
      MeasurementRow m = passed(insert_as_of(db, cases_table(), c, 7), o.us);
      m.system_id = sys;
      m.run_id = run_id;
      m.measured_at = "2026-01-01T00:00:00Z";
      insert_as_of(db, measurements_table(), m, 7);
    }
  }
  const char* const links =
      "SELECT algorithm, conversion_tensor, conversion_from, conversion_to, feeds_algorithm, feeds_layout "
      "FROM cases ORDER BY id";
  const std::vector<std::vector<std::string>> want = {
      {"direct:blocked", "", "", "", "", ""},
      {"reorder", "src", "abcd", "aBcd16b", "direct:blocked", ""},
      {"xnn_convolution_nhwc", "", "", "", "", ""},
      {"floorline-kernel:transpose", "src", "nchw", "nhwc", "", "nhwc"},
  };
  auto texts = [](const QueryResult& r) {
    std::vector<std::vector<std::string>> out;
    for (const auto& row : r.rows) {
      auto& o = out.emplace_back();
      for (const auto& v : row) o.push_back(value_text(v));
    }
    return out;
  };
  // merge reads the schema-7 file as it is.
  auto merged = must(Database::open(dir.file("merged.db")));
  must(merge_into(merged, path));
  EXPECT_EQ(texts(must(merged.query(links))), want);
  auto db = must(Database::open(path));
  EXPECT_EQ(db.opened_at_version(), 7);
  EXPECT_EQ(texts(must(db.query(links))), want);
  // The rows read back typed, and best_measurements was rebuilt without the conversions.
  std::vector<CaseRow> cases;
  ASSERT_OK(for_each_row<CaseRow>(db, cases_table(), "", {}, [&](CaseRow& c) {
    cases.push_back(c);
    return Status{};
  }));
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_FALSE(is_conversion(cases[0]));
  ASSERT_TRUE(is_conversion(cases[3]));
  EXPECT_EQ(*cases[3].conversion, (LayoutConversion{"src", "nchw", "nhwc"}));
  EXPECT_EQ(cases[3].feeds, (CaseFeeds{"", "nhwc"}));
  EXPECT_TRUE(cases[3].feeds.feeds("xnn_convolution_nhwc", "nhwc"));
  EXPECT_EQ(cases[1].feeds, (CaseFeeds{"direct:blocked", ""}));
  for (Database* d : {&db, &merged}) {
    auto best = must(
        d->query("SELECT c.algorithm, b.min_us FROM best_measurements b JOIN cases c ON c.id = b.case_id"));
    ASSERT_EQ(best.rows.size(), 1u);
    EXPECT_EQ(value_text(best.rows[0][0]), "xnn_convolution_nhwc");
    EXPECT_DOUBLE_EQ(std::get<double>(best.rows[0][1]), 40.0);
  }
  expect_columns_match(db, cases_table());
}

TEST(Schema, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.file("new.db");
  { auto db = must(Database::open(path)); }
  raw_exec(path, "PRAGMA user_version = 99");
  auto r = Database::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(path), std::string::npos);
  EXPECT_NE(r.error().message.find("newer Floorline (schema 99"), std::string::npos) << r.error().message;
}

TEST(Schema, NonSqliteTruncatedForeignAndUnwritableFilesGetClearErrors) {
  TempDir dir;
  const std::string text = dir.file("notes.db");
  std::ofstream(text) << "model,latency\nresnet50,1.0\n";
  auto r1 = Database::open(text);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().message, text + ": not a SQLite database (not a Floorline results file)");

  // A real database cut in half, as a copy interrupted mid-way leaves it.
  const std::string full = dir.file("full.db");
  {
    auto db = must(Database::open(full));
    seed_cases(db, 200, 5);
  }
  ASSERT_FALSE(std::filesystem::exists(full + "-wal"));
  const auto size = std::filesystem::file_size(full);
  const std::string cut = dir.file("cut.db");
  std::filesystem::copy_file(full, cut);
  std::filesystem::resize_file(cut, size / 2);
  auto r2 = Database::open(cut);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find(cut + ": truncated SQLite database"), std::string::npos)
      << r2.error().message;

  // Another application's SQLite file is not taken over.
  const std::string other = dir.file("other.db");
  raw_exec(other, "CREATE TABLE songs (title TEXT)");
  auto r3 = Database::open(other);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.error().message, other + ": not a Floorline database (a SQLite file of another application)");
  EXPECT_EQ(std::filesystem::file_size(other) > 0, true);

  // A location nobody can create files in (procfs refuses even root).
  auto r4 = Database::open("/proc/floorline-test.db");
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.error().message.find("cannot open /proc/floorline-test.db"), std::string::npos)
      << r4.error().message;
  auto r5 = Database::open(dir.file("no/such/dir/r.db"));
  ASSERT_FALSE(r5.ok());
  EXPECT_NE(r5.error().message.find("does the directory exist"), std::string::npos) << r5.error().message;
  auto r6 = Database::open(dir.path());
  ASSERT_FALSE(r6.ok());
  EXPECT_NE(r6.error().message.find("is a directory"), std::string::npos);
}

TEST(Schema, CaseNamesRoundTrip) {
  const std::string key = "Conv|x=1x64x56x56|w=64x64x3x3|bias|pads=1,1,1,1|strides=1,1|dil=1,1|group=1|f32";
  CaseRow c;
  c.identity = {
      "cuda", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM", "f16", "fp16", "nhwc", "bias_relu", key};
  const std::string name = case_name(c.identity);
  EXPECT_EQ(name, "cuda/CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM/f16/fp16.nhwc+bias_relu/" + key);
  auto p = parse_case_name(name);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->backend, "cuda");
  EXPECT_EQ(p->algorithm, c.identity.algorithm);
  EXPECT_EQ(p->dtype, "f16");
  EXPECT_EQ(p->math_mode, "fp16");
  EXPECT_EQ(p->layout, "nhwc");
  EXPECT_EQ(p->fusion, "bias_relu");
  EXPECT_EQ(p->key, key);
  CaseId plain = c.identity;
  plain.layout = plain.fusion = "";
  EXPECT_EQ(parse_case_name(case_name(plain))->math_mode, "fp16");
  // A math mode this build's types do not name ("fp16" of older files) stays text: there is no
  // typed variant of it, and the typed form of a known identity gives the same name back.
  EXPECT_FALSE(case_variant(c.identity));
  floorline::CaseId known = c.identity;
  known.math_mode = "f16";
  const auto typed = case_variant(known);
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->dtype, DType::kF16);
  EXPECT_EQ(typed->math_mode, MathMode::kF16);
  EXPECT_EQ(case_name(case_id(*typed, key)), case_name(known));
  EXPECT_FALSE(parse_case_name("BM_memcpy/64"));
  // The database stores that name with the case, and the views show it.
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  LayerConfigRow lc;
  lc.key = key;
  lc.kind = lc.op_type = "Conv";
  lc.dtype = "f32";
  c.config_id = must(db.upsert_config(lc));
  c.name = "a name the caller made up";  // derived by upsert_case, whatever it is given
  const int64_t id = must(db.upsert_case(c));
  auto r = must(db.query("SELECT c.name, c.uid FROM cases c WHERE c.id = ?1", {id}));
  EXPECT_EQ(value_text(r.rows[0][0]), name);
  EXPECT_EQ(value_text(r.rows[0][1]), mp::key_hash_hex(name));
  const int64_t sys = must(db.upsert_system(test_system("x")));
  RunRow run;
  run.system_id = sys;
  MeasurementWriter w(db, sys, must(db.begin_run(run)));
  ASSERT_OK(w.add(passed(id, 3.0)));
  ASSERT_OK(w.flush());
  for (const char* view : {"current_measurements", "best_cases"})
    EXPECT_EQ(value_text(must(db.query(std::string("SELECT case_name FROM ") + view)).rows.at(0).at(0)), name)
        << view;
}

TEST(Schema, SameStackSameSystemRow) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const int64_t a = must(db.upsert_system(test_system("x")));
  SystemRow again = test_system("x");
  again.created_at = "2030-01-01T00:00:00Z";  // not part of the identity
  EXPECT_EQ(must(db.upsert_system(again)), a);
  SystemRow more_threads = test_system("x");
  more_threads.threads = 2;
  EXPECT_NE(must(db.upsert_system(more_threads)), a);
  EXPECT_EQ(system_fingerprint(test_system("x")), system_fingerprint(again));
}

// A system's fingerprint is what every file written so far stores and what resume and merge match
// on: pinned to the value the schema-8 build computed for this row (FNV-1a of its identity text).
TEST(Schema, SystemFingerprintIsStable) {
  EXPECT_EQ(system_fingerprint(test_system("x")), "9a76f4dc94ee4f20");
}

// An ISA-capped system is another system, and another host for the thread budget: the budget of
// the capped system never borrows the uncapped one's cases, nor the other way round.
TEST(Schema, IsaCappedSystemsAreDistinct) {
  SystemRow capped = test_system("x");
  capped.isa = "avx2";
  SystemRow other_cap = capped;
  other_cap.isa = "avx512_core";
  EXPECT_EQ(system_fingerprint(test_system("x")), "9a76f4dc94ee4f20");  // uncapped: as before v9
  EXPECT_NE(system_fingerprint(capped), system_fingerprint(test_system("x")));
  EXPECT_NE(system_fingerprint(capped), system_fingerprint(other_cap));
  EXPECT_NE(host_fingerprint(capped), host_fingerprint(test_system("x")));
  EXPECT_NE(host_fingerprint(capped), host_fingerprint(other_cap));
  // Threads still share a host under one cap.
  SystemRow capped_two_threads = capped;
  capped_two_threads.threads = 2;
  EXPECT_EQ(host_fingerprint(capped_two_threads), host_fingerprint(capped));
  EXPECT_NE(system_fingerprint(capped_two_threads), system_fingerprint(capped));

  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const int64_t plain = must(db.upsert_system(test_system("x")));
  const int64_t avx2 = must(db.upsert_system(capped));
  EXPECT_NE(plain, avx2);
  EXPECT_EQ(must(db.upsert_system(capped)), avx2);
  auto r = must(db.query("SELECT isa FROM systems ORDER BY id"));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(value_text(r.rows[0][0]), "");
  EXPECT_EQ(value_text(r.rows[1][0]), "avx2");
}

// A schema-8 file's systems keep the fingerprints they were stored with: the upgrade adds
// systems.isa (empty) and a run on the same stack resumes on the same system; merged elsewhere,
// the system is matched, not duplicated.
TEST(Schema, Schema8SystemsKeepTheirFingerprints) {
  TempDir dir;
  const std::string path = dir.file("v8.db");
  int64_t old_id = 0;
  {
    OpenOptions v8;
    v8.target_schema_version = 8;
    auto db = must(Database::open(path, v8));
    EXPECT_FALSE(must(db.has_column("systems", "isa")));
    SystemRow s = test_system("x");
    s.fingerprint = "9a76f4dc94ee4f20";  // what the schema-8 build stored for this row
    old_id = insert_as_of(db, systems_table(), s, 8);
  }
  auto merged = must(Database::open(dir.file("merged.db")));
  const int64_t merged_plain = must(merged.upsert_system(test_system("x")));
  SystemRow capped = test_system("x");
  capped.isa = "avx2";
  const int64_t merged_capped = must(merged.upsert_system(capped));
  must(merge_into(merged, path));
  EXPECT_EQ(scalar(merged, "SELECT count(*) FROM systems"), 2);
  EXPECT_EQ(value_text(must(merged.query("SELECT fingerprint FROM systems WHERE id = ?1", {merged_plain}))
                           .rows.at(0)
                           .at(0)),
            "9a76f4dc94ee4f20");

  auto db = must(Database::open(path));
  EXPECT_EQ(db.opened_at_version(), 8);
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  auto r = must(db.query("SELECT id, fingerprint, isa FROM systems"));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(value_text(r.rows[0][1]), "9a76f4dc94ee4f20");
  EXPECT_EQ(value_text(r.rows[0][2]), "");
  EXPECT_EQ(must(db.upsert_system(test_system("x"))), old_id);
  EXPECT_NE(must(db.upsert_system(capped)), old_id);
  EXPECT_NE(merged_capped, merged_plain);
}

}  // namespace
}  // namespace floorline::benchdb::test

namespace floorline::benchdb::test {
namespace {

TEST(System, HostCaptureReadsThisMachine) {
  const SystemRow s = capture_host_system(1);
  EXPECT_EQ(s.device_kind, "cpu");
  EXPECT_FALSE(s.cpu_model.empty());
  EXPECT_EQ(s.device_name, s.cpu_model);
  EXPECT_EQ(s.cpu_cores, sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(s.compute_units, s.cpu_cores);
  EXPECT_GT(s.memory_bytes, int64_t{1} << 28);
  EXPECT_EQ(s.os.rfind("Linux ", 0), 0u) << s.os;
  EXPECT_FALSE(s.compiler.empty());
  EXPECT_EQ(s.threads, 1);
  // The same machine captured twice is the same system; another thread count is not.
  EXPECT_EQ(system_fingerprint(s), system_fingerprint(capture_host_system(1)));
  EXPECT_NE(system_fingerprint(s), system_fingerprint(capture_host_system(2)));
}

TEST(System, HostCaptureRecordsTheIsaCap) {
  ASSERT_EQ(unsetenv("FLOORLINE_MAX_CPU_ISA"), 0);
  const SystemRow plain = capture_host_system(1);
  EXPECT_EQ(plain.isa, "");
  ASSERT_EQ(setenv("FLOORLINE_MAX_CPU_ISA", "avx2", 1), 0);
  const SystemRow capped = capture_host_system(1);
  ASSERT_EQ(unsetenv("FLOORLINE_MAX_CPU_ISA"), 0);
  EXPECT_EQ(capped.isa, "avx2");
  EXPECT_EQ(capped.cpu_flags, plain.cpu_flags);  // the CPU is the same; the cap tells them apart
  EXPECT_NE(system_fingerprint(capped), system_fingerprint(plain));
}

}  // namespace
}  // namespace floorline::benchdb::test
