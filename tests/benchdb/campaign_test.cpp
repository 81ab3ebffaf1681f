// A campaign measured in shards: many shard files merged in one go (a folder, a glob), and the
// coverage check that names the cases, and the shard, a merged database lacks.
#include <fstream>

#include "floorline/benchdb/campaign.hpp"
#include "floorline/benchdb/merge.hpp"
#include "test_util.hpp"

namespace floorline::benchdb::test {
namespace {

// Shard `index` of 3 measured on one machine of one stack: the same 4 configs × 3 cases everywhere
// (every shard records the whole plan's configs), measurements of the cases k with k % 3 == index.
// Returns every case name, in id order.
std::vector<std::string> make_shard_db(const std::string& path, int index, bool finished = true) {
  auto db = must(Database::open(path));
  const auto cases = seed_cases(db, 4, 3);
  RunRow run;
  run.system_id = must(db.upsert_system(test_system("cpu-cluster")));
  run.host_name = "node" + std::to_string(index);
  run.options = nlohmann::json{{"shard", std::to_string(index) + "/3"}, {"repetitions", 2}}.dump();
  const int64_t run_id = must(db.begin_run(run));
  MeasurementWriter w(db, run.system_id, run_id);
  for (size_t k = 0; k < cases.size(); ++k)
    if (static_cast<int>(k % 3) == index)
      if (auto st = w.add(passed(cases[k], 10.0 + static_cast<double>(k))); !st)
        ADD_FAILURE() << st.error().message;
  if (auto st = w.flush(); !st) ADD_FAILURE() << st.error().message;
  if (auto st = db.finish_run(run_id, finished ? "finished" : "interrupted"); !st)
    ADD_FAILURE() << st.error().message;
  std::vector<std::string> names;
  auto r = must(db.query("SELECT name FROM cases ORDER BY id"));
  for (const auto& row : r.rows) names.push_back(value_text(row[0]));
  return names;
}

TEST(Campaign, FolderAndGlobNameTheirFilesInOrderAndNeverTheOutput) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "shards");
  for (int i = 0; i < 3; ++i) make_shard_db(dir.file("shards/shard-" + std::to_string(i) + ".db"), i);
  std::ofstream(dir.file("shards/notes.txt")) << "not a database\n";
  const std::string out = dir.file("shards/merged.db");
  std::ofstream(out) << "";  // an earlier output inside the folder is not an input
  const auto folder = must(expand_merge_inputs({dir.file("shards")}, out));
  ASSERT_EQ(folder.size(), 3u);
  EXPECT_EQ(std::filesystem::path(folder[0]).filename(), "shard-0.db");
  EXPECT_EQ(std::filesystem::path(folder[2]).filename(), "shard-2.db");
  // A glob the shell did not expand, the folder, and a file: each in the order given, expanded.
  const auto mixed = must(expand_merge_inputs(
      {dir.file("shards/shard-[12].db"), dir.file("shards"), dir.file("shards/shard-1.db")}, out));
  std::vector<std::string> names;
  for (const auto& f : mixed) names.push_back(std::filesystem::path(f).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"shard-1.db", "shard-2.db", "shard-0.db", "shard-1.db",
                                             "shard-2.db", "shard-1.db"}));
  // Errors name the argument.
  auto none = expand_merge_inputs({dir.file("shards/nothing-*.db")}, out);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("nothing-*.db: matches no file"), std::string::npos);
  std::filesystem::create_directories(dir.path() / "empty");
  auto empty = expand_merge_inputs({dir.file("empty")}, out);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("no .db file"), std::string::npos);
}

TEST(Campaign, MergedShardsCoverThePlanEachCaseOnce) {
  TempDir dir;
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i) planned = make_shard_db(dir.file("shard-" + std::to_string(i) + ".db"), i);
  ASSERT_EQ(planned.size(), 12u);
  auto merged = must(Database::open(dir.file("merged.db")));
  for (const auto& in : must(expand_merge_inputs({dir.file("shard-*.db")}, dir.file("merged.db"))))
    ASSERT_OK(merge_into(merged, in));
  const auto cov = must(coverage(merged, planned, std::nullopt));
  EXPECT_TRUE(cov.complete());
  EXPECT_EQ(cov.planned, 12);
  EXPECT_EQ(cov.by_status.at("passed"), 12);  // one current measurement per case
  EXPECT_EQ(cov.on_several_systems, 0);
  EXPECT_EQ(scalar(merged, "SELECT count(*) FROM measurements"), 12);
  // The three shards' runs, with what each measured.
  const auto runs = must(shard_runs(merged));
  ASSERT_EQ(runs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[static_cast<size_t>(i)].shard, std::to_string(i) + "/3");
    EXPECT_EQ(runs[static_cast<size_t>(i)].measured.size(), 4u);
    EXPECT_EQ(runs[static_cast<size_t>(i)].host_name, "node" + std::to_string(i));
  }
  // Merging the folder again adds nothing.
  for (const auto& in : must(expand_merge_inputs({dir.path().string()}, dir.file("merged.db")))) {
    auto s = must(merge_into(merged, in));
    EXPECT_EQ(s.measurements_added, 0) << in;
  }
  EXPECT_EQ(must(coverage(merged, planned, std::nullopt)).by_status.at("passed"), 12);
  // Another system's results do not count for this one.
  EXPECT_EQ(must(coverage(merged, planned, int64_t{999})).missing.size(), 12u);
}

TEST(Campaign, AMissingShardDatabaseLeavesItsCasesAndNoRun) {
  TempDir dir;
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i)
    planned = make_shard_db(dir.file("shard-" + std::to_string(i) + ".db"), i, i != 0);
  std::filesystem::remove(dir.file("shard-1.db"));  // lost: the node's copy-back never happened
  auto merged = must(Database::open(dir.file("merged.db")));
  for (const auto& in : must(expand_merge_inputs({dir.path().string()}, dir.file("merged.db"))))
    ASSERT_OK(merge_into(merged, in));
  const auto cov = must(coverage(merged, planned, std::nullopt));
  EXPECT_FALSE(cov.complete());
  ASSERT_EQ(cov.missing.size(), 4u);
  // Exactly shard 1's cases (k % 3 == 1), in plan order.
  EXPECT_EQ(cov.missing[0], planned[1]);
  EXPECT_EQ(cov.missing[3], planned[10]);
  const auto runs = must(shard_runs(merged));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].shard, "0/3");
  EXPECT_EQ(runs[0].status, "interrupted");
  EXPECT_EQ(runs[1].shard, "2/3");
}

}  // namespace
}  // namespace floorline::benchdb::test
