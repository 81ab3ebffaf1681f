// `floorline db info|query|merge|import`: look into, combine and feed results databases.
#pragma once

#include <CLI/CLI.hpp>

namespace floorline::cli {

void add_db_command(CLI::App& app, int& exit_code);

}  // namespace floorline::cli
