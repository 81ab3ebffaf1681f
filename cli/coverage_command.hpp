// `floorline db coverage`: the planned cases a results database lacks, by shard.
#pragma once

#include <CLI/CLI.hpp>

namespace floorline::cli {

// Adds `coverage` under the `db` subcommand. Exit status: 0 every planned case has a result, 1 some
// are missing, 2 the database or the models cannot be read.
void add_coverage_command(CLI::App& db, int& exit_code);

}  // namespace floorline::cli
