// Crash and concurrency: real processes writing to one file.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "test_util.hpp"

extern char** environ;

namespace floorline::benchdb::test {
namespace {

// A child process running the writer helper with its stdout on a pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<char*> argv;
    std::vector<std::string> all = {helper_path()};
    all.insert(all.end(), args.begin(), args.end());
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) std::abort();
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~Child() {
    if (out_) fclose(out_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The next line of output, "" at end of file.
  std::string line() {
    char buf[256];
    if (!fgets(buf, sizeof buf, out_)) return "";
    return buf;
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  pid_t pid() const { return pid_; }
  void kill9() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

int64_t committed_in(const std::string& line) {
  if (line.rfind("committed ", 0) != 0) return -1;
  return std::stoll(line.substr(10));
}

TEST(Process, KillNineKeepsEveryCommittedBatchAndRerunCompletesWithoutDuplicates) {
  TempDir dir;
  const std::string db_path = dir.file("crash.db");
  constexpr int kConfigs = 400, kPer = 50, kBatch = 500;  // 20000 measurements in batches of 500
  int64_t last_committed = 0;
  {
    Child writer(
        {db_path, "crash-cpu", std::to_string(kConfigs), std::to_string(kPer), std::to_string(kBatch), "20"});
    // Wait for a few commits, then kill it in the middle of a batch.
    for (std::string l = writer.line(); !l.empty(); l = writer.line()) {
      const int64_t c = committed_in(l);
      if (c > 0) last_committed = c;
      if (last_committed >= 4 * kBatch) break;
    }
    ASSERT_GE(last_committed, 4 * kBatch);
    writer.kill9();
  }
  {
    auto db = must(Database::open(db_path));
    EXPECT_EQ(must(db.integrity_check()), "ok");
    const int64_t rows = must(db.count("measurements"));
    // Every reported batch is there, and only whole batches are.
    EXPECT_GE(rows, last_committed);
    EXPECT_EQ(rows % kBatch, 0) << rows;
    EXPECT_LT(rows, int64_t{kConfigs} * kPer);
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'running'"), 1);  // the killed run
  }
  // The same command again resumes: it writes only what is missing.
  Child rerun({db_path, "crash-cpu", std::to_string(kConfigs), std::to_string(kPer), std::to_string(kBatch)});
  std::string last;
  for (std::string l = rerun.line(); !l.empty(); l = rerun.line()) last = l;
  ASSERT_EQ(rerun.wait(), 0);
  EXPECT_EQ(last, "done\n");
  auto db = must(Database::open(db_path));
  EXPECT_EQ(must(db.integrity_check()), "ok");
  EXPECT_EQ(must(db.count("measurements")), int64_t{kConfigs} * kPer);
  EXPECT_EQ(scalar(db, "SELECT count(DISTINCT case_id) FROM measurements"), int64_t{kConfigs} * kPer);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM measurements WHERE superseded = 1"), 0);
  EXPECT_EQ(must(db.count("best_measurements")), kConfigs);
}

TEST(Process, ARunWhoseProcessWasKilledIsMarkedDiedByTheNextWriter) {
  TempDir dir;
  const std::string db_path = dir.file("died.db");
  Child writer({db_path, "died-cpu", "50", "20", "100", "2000"});
  const int64_t writer_pid = writer.pid();
  for (std::string l = writer.line(); !l.empty(); l = writer.line())
    if (committed_in(l) > 0) break;
  {
    // While its process lives, the run is left running.
    auto db = must(Database::open(db_path));
    EXPECT_TRUE(must(db.mark_dead_runs()).empty());
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'running' AND pid = ?1", {writer_pid}), 1);
  }
  writer.kill9();
  auto db = must(Database::open(db_path));
  const auto dead = must(db.mark_dead_runs());
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].pid, writer_pid);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'died' AND finished_at IS NULL AND id = ?1",
                   {dead[0].run_id}),
            1);
  EXPECT_TRUE(must(db.mark_dead_runs()).empty());  // marked once
  // This process's own run is alive; a run recorded before a reboot (another boot id) is dead; a
  // run of another host cannot be checked from here and is left alone.
  RunRow r;
  r.system_id = 1;
  const int64_t mine = must(db.begin_run(r));
  const int64_t rebooted = must(db.begin_run(r));
  const int64_t elsewhere = must(db.begin_run(r));
  ASSERT_OK(db.query("UPDATE runs SET boot_id = 'an-earlier-boot' WHERE id = ?1", {rebooted}));
  ASSERT_OK(db.query("UPDATE runs SET host_name = 'another-host', pid = 1 WHERE id = ?1", {elsewhere}));
  const auto dead2 = must(db.mark_dead_runs());
  ASSERT_EQ(dead2.size(), 1u);
  EXPECT_EQ(dead2[0].run_id, rebooted);
  EXPECT_EQ(
      scalar(db, "SELECT count(*) FROM runs WHERE status = 'running' AND id IN (?1, ?2)", {mine, elsewhere}),
      2);
  EXPECT_EQ(must(db.integrity_check()), "ok");
}

TEST(Process, TwoWritersAtOnceBothFinishWithNoLostRows) {
  TempDir dir;
  const std::string db_path = dir.file("shared.db");
  constexpr int kConfigs = 100, kPer = 40, kBatch = 100;
  // Two machines' worth of results (different systems) and a third writer repeating the first's
  // work on the same system (the same cases: no duplicates may appear).
  Child a({db_path, "cpu-a", std::to_string(kConfigs), std::to_string(kPer), std::to_string(kBatch)});
  Child b({db_path, "cpu-b", std::to_string(kConfigs), std::to_string(kPer), std::to_string(kBatch)});
  Child c({db_path, "cpu-a", std::to_string(kConfigs), std::to_string(kPer), std::to_string(kBatch)});
  EXPECT_EQ(a.wait(), 0);
  EXPECT_EQ(b.wait(), 0);
  EXPECT_EQ(c.wait(), 0);
  auto db = must(Database::open(db_path));
  EXPECT_EQ(must(db.integrity_check()), "ok");
  EXPECT_EQ(must(db.count("systems")), 2);
  EXPECT_EQ(must(db.count("cases")), kConfigs * kPer);
  EXPECT_EQ(must(db.count("measurements")), 2 * kConfigs * kPer);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM (SELECT 1 FROM measurements GROUP BY system_id, case_id)"),
            2 * kConfigs * kPer);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 3);
}

}  // namespace
}  // namespace floorline::benchdb::test
