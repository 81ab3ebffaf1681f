// floorline: the executable only wires the stages together (shared/DESIGN.md).
#include <string>

#include <CLI/CLI.hpp>

#include "analyze_command.hpp"
#include "bench_command.hpp"
#include "db_command.hpp"
#include "layers_command.hpp"
#include "run_command.hpp"
#include "system_command.hpp"

#ifndef FLOORLINE_VERSION
#define FLOORLINE_VERSION "unknown"
#endif
#ifndef FLOORLINE_GIT_REVISION
#define FLOORLINE_GIT_REVISION "unknown"
#endif

int main(int argc, char** argv) {
  // OMP_WAIT_POLICY (passive unless the user set it) is set by the backend registry just before it
  // loads the oneDNN plugin, whose OpenMP runtime reads it when it loads (generator/src/registry.cpp).
  std::string command_line;
  for (int k = 0; k < argc; ++k) command_line += (k ? " " : "") + std::string(argv[k]);
  CLI::App app{
      "Floorline: lower-bound latencies of deep-learning models from vendor-library microbenchmarks"};
  app.set_version_flag("--version",
                       std::string("floorline ") + FLOORLINE_VERSION + " (" + FLOORLINE_GIT_REVISION + ")");
  app.require_subcommand(1);
  int exit_code = 0;
  floorline::cli::LayersOptions layers;
  floorline::cli::add_layers_command(app, layers, exit_code);
  floorline::cli::add_bench_commands(app, exit_code, command_line);
  floorline::cli::add_db_command(app, exit_code);
  floorline::cli::add_analyze_command(app, exit_code);
  floorline::cli::add_run_command(app, exit_code, command_line);
  floorline::cli::add_system_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
