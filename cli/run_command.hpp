// `floorline run`: the main job in one process (layers → plan → bench → replay → analyze).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace floorline::cli {

// `command_line` is recorded with the bench run (runs.command).
void add_run_command(CLI::App& app, int& exit_code, const std::string& command_line);

}  // namespace floorline::cli
