// `floorline system`: this machine as the backends see it: devices, library versions, which
// backend `auto` picks and why, and (with --db) the roofline peaks measured here.
#pragma once

#include <CLI/CLI.hpp>

namespace floorline::cli {

void add_system_command(CLI::App& app, int& exit_code);

}  // namespace floorline::cli
