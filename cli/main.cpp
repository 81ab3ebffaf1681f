// floorline: the executable only wires the stages together (shared/DESIGN.md).
#include <string>

#include <CLI/CLI.hpp>

#include "db_command.hpp"
#include "layers_command.hpp"

#ifndef FLOORLINE_VERSION
#define FLOORLINE_VERSION "unknown"
#endif
#ifndef FLOORLINE_GIT_REVISION
#define FLOORLINE_GIT_REVISION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"Floorline: lower-bound latencies of deep-learning models from vendor-library microbenchmarks"};
  app.set_version_flag("--version", std::string("floorline ") + FLOORLINE_VERSION + " (" + FLOORLINE_GIT_REVISION + ")");
  app.require_subcommand(1);
  int exit_code = 0;
  floorline::cli::LayersOptions layers;
  floorline::cli::add_layers_command(app, layers, exit_code);
  floorline::cli::add_db_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
