// Running code that may crash, hang or exhaust memory (ONNX 1.12's shape inference on untrusted
// models) in a forked child process. Internal to model_processor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "floorline/common/result.hpp"

namespace floorline::mp {

struct IsolationLimits {
  double timeout_s = 60;      // wall time of the child; killed with SIGKILL past it
  int64_t memory_mib = 1024;  // address space the child may add to what it inherits (RLIMIT_AS)
};

// What the child did. `output` holds every byte the child wrote, also when it died.
struct IsolatedRun {
  std::string output;
  enum class End { kExited, kCrashed, kTimedOut, kOutOfMemory } end = End::kExited;
  int signal = 0;  // for kCrashed
};

// Forks; the child runs `work(fd)`, which writes its result to the pipe `fd` (use write_all), and
// exits with _exit (no destructors, no atexit handlers, no stdio flush: the parent's buffers are not
// written twice). The child's std::bad_alloc is reported as kOutOfMemory. The parent reads the pipe
// while it waits, so the child never blocks on a full pipe. The fork happens after the model is in
// memory: the child shares its pages copy-on-write and copies nothing up front.
// Errors: fork or pipe failure (the caller may run the work in-process instead).
Result<IsolatedRun> run_isolated(const std::function<void(int fd)>& work, const IsolationLimits& limits);

// Writes all of `data` to `fd` (retrying on EINTR and short writes); false on error.
bool write_all(int fd, const std::string& data);

// "SIGSEGV", "SIGFPE", ...; "signal N" for one without an abbreviation.
std::string signal_name(int sig);

}  // namespace floorline::mp
