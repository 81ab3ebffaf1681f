// `floorline materialize MODELS... --out DIR`: full-weight copies of shape-only models
// (model_processor/materialize.hpp), for runtimes that need weights (the reference runtime).
#pragma once

#include <CLI/CLI.hpp>

namespace floorline::cli {

void add_materialize_command(CLI::App& app, int& exit_code);

}  // namespace floorline::cli
