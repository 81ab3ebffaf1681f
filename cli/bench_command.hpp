// `floorline plan`, `floorline generate` and `floorline bench`: the generator and runner.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace floorline::cli {

// `command_line` is recorded with each run (runs.command).
void add_bench_commands(CLI::App& app, int& exit_code, const std::string& command_line);

}  // namespace floorline::cli
