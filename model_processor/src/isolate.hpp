// Running code that may crash, hang or exhaust memory (ONNX 1.12's shape inference on untrusted
// models) in a forked child process. Internal to model_processor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// A long-lived worker process that serves many requests (one per model), so that a zoo costs one
// fork, not one per model: the worker's heap is reused, and the parent's pages are not copied on
// write again for every model. Per request, a crash (signal),
// an exception, a time-out (the parent kills the worker) or the memory cap ends the worker, the
// request gets that end, and the next request starts a new worker. The memory cap (RLIMIT_AS) is
// on what the worker adds to what it inherited when it was forked; a worker whose address space
// has grown past half of the cap after a request exits after answering, so that a model never
// inherits most of its budget used by an earlier one. Several workers may run at once (each its
// own process). Not thread-safe: one caller at a time per worker.
class IsolatedWorker {
 public:
  // Runs in the worker for each request: `send` writes one chunk of the answer to the parent
  // (false once the parent is gone). Everything sent before a crash reaches the parent.
  using Handler =
      std::function<void(std::string_view request, const std::function<bool(const std::string&)>& send)>;
  explicit IsolatedWorker(Handler handler) : handler_(std::move(handler)) {}
  ~IsolatedWorker();
  IsolatedWorker(const IsolatedWorker&) = delete;
  IsolatedWorker& operator=(const IsolatedWorker&) = delete;

  // Sends `request` to the worker (forking one first if none is running, or if `limits` changed
  // the memory cap) and collects the chunks it sends until it reports the request done.
  // Errors: socketpair or fork failure.
  Result<IsolatedRun> call(const std::string& request, const IsolationLimits& limits);
  // call() in two halves, so that the caller can work while the worker does: submit sends the
  // request (its time limit starts now), collect waits for the answer. One request at a time.
  Status submit(const std::string& request, const IsolationLimits& limits);
  Result<IsolatedRun> collect();
  // The index of the first of `workers` (each with a request submitted) whose collect() would not
  // wait long: its answer has begun to arrive, it is gone, or it is out of time. For a caller that
  // keeps several workers busy at once.
  static size_t wait_any(const std::vector<IsolatedWorker*>& workers);

  // Whether the next submit() with `limits` forks a worker: none is running (a worker that ended
  // between requests is reaped here), or `limits` changes the memory cap. A caller with other
  // threads keeps them out of libraries while it forks: the child has only the forking thread, and
  // any lock another thread held stays held there.
  bool needs_fork(const IsolationLimits& limits);
  // Forks the worker that the next submit() with `limits` would, now (a caller forks before it
  // starts other threads). Errors: as submit's.
  Status prepare(const IsolationLimits& limits);

  // Lets the worker go when no request is waiting: closes this end of its socket (the worker exits
  // on its own, tearing its address space down while the caller goes on) and leaves reaping it to
  // the next start or to the destructor. The next submit forks a new worker.
  void release();

  // Forks of workers so far (for tests: one per zoo unless a model crashed one).
  int forks() const { return forks_; }

 private:
  Status start(const IsolationLimits& limits);
  void stop(bool kill_it);
  void reap();  // waits for a released worker
  Handler handler_;
  pid_t pid_ = -1;
  pid_t released_ = -1;  // a released worker not yet reaped
  int fd_ = -1;
  int64_t memory_mib_ = 0;
  std::chrono::steady_clock::time_point deadline_;  // of the request submitted last
  bool busy_ = false;                               // a request is submitted and not collected
  int forks_ = 0;
};

// "SIGSEGV", "SIGFPE", ...; "signal N" for one without an abbreviation.
std::string signal_name(int sig);

}  // namespace floorline::mp
