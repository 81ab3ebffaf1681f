// libFuzzer target for the model loader: bytes → a file → process_model at batches 1
// and 8, as `floorline layers` runs it. Beyond "does not crash" it checks what the loader promises:
// an error is one line that starts with the file's path and is valid UTF-8; a success has valid
// UTF-8 names and keys and no negative FLOPs or bytes. docs/SECURITY.md says how to run it longer.
//
// FLOORLINE_FUZZ_IN_PROCESS=1 runs shape inference in-process (ProcessOptions::isolate = false):
// then crashes inside ONNX 1.12 itself are found too, where Floorline's own checks could stop them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "floorline/common/utf8.hpp"
#include "floorline/model_processor/model.hpp"

namespace {

// The folder of this process's input file, removed when libFuzzer exits (it calls exit() at the
// end of a bounded run, so the atexit handler runs).
const std::filesystem::path& input_dir() {
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("floorline_fuzz_" + std::to_string(::getpid()));
  return dir;
}

const std::string& input_path() {
  static const std::string path = [] {
    std::filesystem::create_directories(input_dir());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(input_dir(), ec);
    });
    return (input_dir() / "input.onnx").string();
  }();
  return path;
}

[[noreturn]] void broken(const char* what, const std::string& detail) {
  std::fprintf(stderr, "loader contract broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  floorline::mp::ProcessOptions o;
  o.batches = {1, 8};
  o.inference_timeout_s = 20;
  o.isolate = std::getenv("FLOORLINE_FUZZ_IN_PROCESS") == nullptr;
  auto r = floorline::mp::process_model(path, o);
  if (!r) {
    const std::string& msg = r.error().message;
    if (msg.find('\n') != std::string::npos) broken("multi-line error", msg);
    if (msg.rfind(path + ": ", 0) != 0) broken("error without the file name", msg);
    if (!floorline::is_valid_utf8(msg)) broken("error not valid UTF-8", msg);
    return 0;
  }
  for (const auto& m : *r)
    for (const auto& l : m.layers) {
      if (!floorline::is_valid_utf8(l.name) || !floorline::is_valid_utf8(l.key))
        broken("invalid UTF-8", l.name);
      if (l.flops < 0 || l.bytes < 0) broken("negative cost", l.name);
    }
  return 0;
}
