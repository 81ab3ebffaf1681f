// floorline/benchdb/campaign.hpp — a campaign measured in shards (`bench --shard I/N` on many
// machines): the shard databases named for one merge, and the check that the merged database has a
// result for every planned case.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"

namespace floorline::benchdb {

// The files `floorline db merge OUT INPUTS...` merges, in order: a folder stands for its *.db files
// (not recursive), a glob pattern (*, ?, [...]; for when the shell did not expand it) for the files
// it matches, anything else for itself. Each sorted by name; `out` itself is left out, and a file
// named twice is listed twice (merging it again adds nothing). Error (naming the argument): a folder
// with no .db file, a pattern matching nothing.
Result<std::vector<std::string>> expand_merge_inputs(const std::vector<std::string>& inputs,
                                                     const std::string& out);

// The planned cases' results in a database.
struct Coverage {
  int64_t planned = 0;
  // Planned cases (by case name) with no current measurement, in the order given.
  std::vector<std::string> missing;
  // The current measurements of the planned cases, by status (passed, skipped, unsupported,
  // failed); a case measured on two systems counts twice.
  std::map<std::string, int64_t> by_status;
  // Planned cases with current measurements on more than one system (when no system is chosen).
  int64_t on_several_systems = 0;
  bool complete() const { return missing.empty(); }
};

// Which of `planned` (case names, cases.name) have a current measurement of any status on
// `system` (every system when nullopt). Error: the database cannot be read.
Result<Coverage> coverage(Database& db, const std::vector<std::string>& planned,
                          std::optional<int64_t> system);

// A run of one shard (runs.options "shard", written by `bench --shard`).
struct ShardRun {
  int64_t run_id = 0;
  std::string shard;   // "I/N"
  std::string status;  // running, finished, interrupted
  std::string host_name;
  std::string options;                // runs.options, JSON
  std::vector<std::string> measured;  // case names of its measurements
};

// Every shard run in the database, by run id. Error: the database cannot be read.
Result<std::vector<ShardRun>> shard_runs(Database& db);

}  // namespace floorline::benchdb
