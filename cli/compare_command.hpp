// `floorline compare`: the bounds of models on several systems of one database, side by side.
#pragma once

#include <CLI/CLI.hpp>

namespace floorline::cli {

void add_compare_command(CLI::App& app, int& exit_code);

}  // namespace floorline::cli
