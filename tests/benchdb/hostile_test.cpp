// Hostile input on the database side: read-only opens that create, upgrade and change
// nothing; SQL with more than one statement; queries that would return without bound; imports of
// devices, FIFOs and oversized files.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/framework_io.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

OpenOptions read_only() {
  OpenOptions o;
  o.read_only = true;
  return o;
}

TEST(ReadOnlyOpen, AReaderLeavesNoWalOrShmFileAndCannotTurnItselfIntoAWriter) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  { auto db = must(Database::open(path)); }
  ASSERT_FALSE(std::filesystem::exists(path + "-wal"));
  {
    auto db = must(Database::open(path, read_only()));
    EXPECT_EQ(std::get<int64_t>(must(db.query("SELECT count(*) FROM systems")).rows[0][0]), 0);
    auto off = db.query("PRAGMA query_only = OFF");
    ASSERT_FALSE(off.ok());
    EXPECT_NE(off.error().message.find("not authorized"), std::string::npos) << off.error().message;
    EXPECT_FALSE(db.query("DELETE FROM systems").ok());
  }
  // What `floorline db merge` does to each input: nothing beside the file afterwards.
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
}

TEST(ReadOnlyOpen, AMissingFileIsNoSuchDatabaseAndIsNotCreated) {
  TempDir dir;
  const std::string path = dir.file("missing.db");
  auto db = Database::open(path, read_only());
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.error().message, path + ": no such database");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(ReadOnlyOpen, EmptyAndForeignFilesAreRefusedAndLeftByteIdentical) {
  TempDir dir;
  const std::string empty = dir.file("empty.db"), text = dir.file("notes.txt");
  std::ofstream(empty).close();
  std::ofstream(text) << "model,runtime\nresnet50,pytorch\n";
  const std::string text_before = file_bytes(text);
  auto e = Database::open(empty, read_only());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message, empty + ": an empty file, not a Floorline database");
  EXPECT_EQ(std::filesystem::file_size(empty), 0u);
  auto t = Database::open(text, read_only());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, text + ": not a SQLite database (not a Floorline results file)");
  EXPECT_EQ(file_bytes(text), text_before);
  // Nothing beside them either (no -wal, -shm or -journal).
  EXPECT_EQ(
      std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()),
      2);
}

TEST(ReadOnlyOpen, ACurrentFileIsReadAndNotWritten) {
  TempDir dir;
  const std::string path = dir.file("r.db");
  {
    auto db = must(Database::open(path));
    seed_cases(db, 3, 2);
  }
  const std::string before = file_bytes(path);
  {
    auto db = must(Database::open(path, read_only()));
    EXPECT_EQ(must(db.count("cases")), 6);
    EXPECT_TRUE(must(db.mark_dead_runs()).empty());  // a read-only connection marks nothing
  }
  EXPECT_EQ(file_bytes(path), before);
}

class Query : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("q.db");
    {
      auto db = must(Database::open(path_));
      seed_cases(db, 4, 3);
    }
    db_.emplace(must(Database::open(path_, read_only())));
  }
  TempDir dir_;
  std::string path_;
  std::optional<Database> db_;
};

TEST_F(Query, MoreThanOneStatementIsRefusedNotTruncated) {
  auto r = db_->query("SELECT count(*) FROM cases; SELECT count(*) FROM systems");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, path_ +
                                   ": the SQL holds more than one statement (the second begins \"SELECT "
                                   "count(*) FROM systems\"); give one");
  // A trailing semicolon, white space and comments are one statement.
  auto one = must(db_->query("SELECT count(*) FROM cases ;  -- all of them\n /* done */ ;"));
  EXPECT_EQ(std::get<int64_t>(one.rows[0][0]), 12);
}

TEST_F(Query, RowsBeyondTheCapAreAnErrorNotAPartialResult) {
  QueryLimits limits;
  limits.max_rows = 12;
  EXPECT_EQ(must(db_->query("SELECT id FROM cases", {}, limits)).rows.size(), 12u);
  limits.max_rows = 11;
  auto r = db_->query("SELECT id FROM cases", {}, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            path_ + ": the query returned more than 11 rows (--max-rows); add a LIMIT or raise --max-rows");
  // An endless recursive CTE stops at the cap instead of growing until memory runs out.
  limits.max_rows = 100000;
  auto endless = db_->query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
                            {}, limits);
  ASSERT_FALSE(endless.ok());
  EXPECT_NE(endless.error().message.find("more than 100000 rows"), std::string::npos);
}

TEST_F(Query, BytesAndTimeAreCapped) {
  QueryLimits limits;
  limits.max_bytes = 1 << 20;
  auto big = db_->query(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100) SELECT printf('%.*c', "
      "100000, "
      "'x') FROM c",
      {}, limits);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message,
            path_ + ": the query's result is larger than 1 MiB; add a LIMIT or select fewer columns");
  QueryLimits quick;
  quick.timeout_seconds = 0.2;
  auto slow = db_->query(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", {}, quick);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().message, path_ + ": the query ran longer than 0.2 s (--timeout); narrow it");
}

TEST(Import, DevicesFifosAndOversizedFilesAreRefusedBeforeReading) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  auto zero = import_framework_latencies(db, "/dev/zero", "json");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "/dev/zero: not a regular file (a device, FIFO or folder)");
  const std::string fifo = dir.file("pipe.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto f = import_benchmark_json(db, fifo, {});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().message, fifo + ": not a regular file (a device, FIFO or folder)");
  // A sparse file of 300 MiB: its size is refused before a byte is read.
  const std::string huge = dir.file("huge.json");
  { std::ofstream(huge) << "["; }
  std::filesystem::resize_file(huge, uint64_t{300} << 20);
  auto h = import_framework_latencies(db, huge);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().message, huge + ": 300.0 MiB is more than an import reads (256 MiB)");
  EXPECT_EQ(must(db.count("framework_latencies")), 0);
}

TEST(Import, AValueOfTheWrongTypeIsAnErrorNamingTheFile) {
  TempDir dir;
  auto db = must(Database::open(dir.file("r.db")));
  const std::string path = dir.file("gbench.json");
  std::ofstream(path) << R"({"context": {"num_cpus": "many"}, "benchmarks": []})";
  auto r = import_benchmark_json(db, path, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind(path + ": unexpected content: ", 0), 0u) << r.error().message;
}

}  // namespace
}  // namespace floorline::benchdb::test
