// floorline: the executable only wires the stages together (docs/ARCHITECTURE.md).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "floorline/common/isa.hpp"

#include "analyze_command.hpp"
#include "bench_command.hpp"
#include "compare_command.hpp"
#include "db_command.hpp"
#include "layers_command.hpp"
#include "materialize_command.hpp"
#include "run_command.hpp"
#include "system_command.hpp"

#ifndef FLOORLINE_VERSION
#define FLOORLINE_VERSION "unknown"
#endif
#ifndef FLOORLINE_GIT_REVISION
#define FLOORLINE_GIT_REVISION "unknown"
#endif

namespace {

// "floorline db query": the subcommands parsed so far, for error messages.
std::string command_name(const CLI::App& app) {
  std::string name = "floorline";
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) return name;
    at = subs.front();
    name += " " + at->get_name();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // GOMP_SPINCOUNT (unless the user set it or OMP_WAIT_POLICY) and OPENBLAS_THREAD_TIMEOUT are set
  // by the backend registry just before it loads the plugins, whose runtimes read them when they
  // load (generator/src/registry.cpp).
  std::string command_line;
  for (int k = 0; k < argc; ++k) command_line += (k ? " " : "") + std::string(argv[k]);
  // A cap set by hand (FLOORLINE_MAX_CPU_ISA, as --isa sets it) is checked before any backend
  // loads (every reader spells it through isa_cap() and isa_name()).
  if (const char* isa = std::getenv(floorline::kIsaCapVariable); isa && *isa) {
    if (const auto level = floorline::check_isa_cap(isa); !level) {
      std::fprintf(stderr, "floorline: %s: %s\n", floorline::kIsaCapVariable, level.error().message.c_str());
      return 2;
    }
  }
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
  floorline::cli::add_compare_command(app, exit_code);
  floorline::cli::add_materialize_command(app, exit_code);
  floorline::cli::add_run_command(app, exit_code, command_line);
  floorline::cli::add_system_command(app, exit_code);
  // Not CLI11_PARSE: its usage errors exit 104-109 and end with a "Run with --help" line after the
  // reason. Here a usage error is one line, "floorline SUBCOMMAND: REASON", and exit status 2; and
  // an exception escaping a subcommand (a bug, or memory running out) says which subcommand failed
  // instead of terminating with the bare exception text.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "%s: %s\n", command_name(app).c_str(), e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory\n", command_name(app).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error (a bug; please report it): %s\n", command_name(app).c_str(),
                 e.what());
    return 1;
  }
  return exit_code;
}
