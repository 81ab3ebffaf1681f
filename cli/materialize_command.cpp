#include "materialize_command.hpp"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "floorline/common/output.hpp"
#include "floorline/model_processor/materialize.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary

namespace {

struct MaterializeCmd {
  std::vector<std::string> models;
  std::string out;
};

int run_materialize(const MaterializeCmd& o) {
  const bool color = use_color(stderr);
  auto files = find_model_files(o.models);
  if (!files) {
    std::fprintf(stderr, "floorline materialize: %s\n", files.error().message.c_str());
    return 2;
  }
  int failures = 0;
  for (const auto& path : *files) {
    auto r = mp::materialize_model(path, o.out);
    if (!r) {
      std::fprintf(stderr, "%s %s\n", red("error:", color).c_str(), r.error().message.c_str());
      ++failures;
      continue;
    }
    std::fprintf(stdout, "%s: %lld tensor(s) generated, %lld copied, %.1f MB in %s\n",
                 r->model.string().c_str(), static_cast<long long>(r->generated),
                 static_cast<long long>(r->copied), static_cast<double>(r->data_bytes) / 1e6,
                 r->data.filename().string().c_str());
  }
  return failures ? 1 : 0;
}

}  // namespace

void add_materialize_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<MaterializeCmd>();
  auto* m = app.add_subcommand(
      "materialize",
      "Copies of models with their missing external-data weights filled with deterministic random values");
  m->add_option("models", o->models, "ONNX files or folders (searched recursively)")->required();
  m->add_option("--out", o->out, "Folder for the copies (<name>.onnx and <name>.onnx.data)")->required();
  m->callback([o, &exit_code] { exit_code = run_materialize(*o); });
}

}  // namespace floorline::cli
