#include "isolate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace floorline::mp {
namespace {

// Exit statuses of the child (the work itself never exits).
constexpr int kChildOutOfMemory = 86;
constexpr int kChildException = 87;

// The child's current address-space size in bytes (first field of /proc/self/statm, in pages).
uint64_t address_space_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  uint64_t pages = 0;
  for (const char* p = buf; *p >= '0' && *p <= '9'; ++p) pages = pages * 10 + static_cast<uint64_t>(*p - '0');
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// What every isolated process does first. Returns the address-space size the memory cap is counted
// from.
uint64_t prepare_child(const IsolationLimits& limits) {
  // A crash must end the child with its signal, not run a handler the parent installed (a sanitizer's
  // or libFuzzer's would report the contained crash as its own), and must leave no core file.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) ::signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  // Libraries print to stdout/stderr while they fail ("terminate called ..."); the parent's report
  // is the one line it makes of the child's end.
  if (const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  const uint64_t base = address_space_bytes();
  if (limits.memory_mib > 0) {
    const uint64_t cap = base + static_cast<uint64_t>(limits.memory_mib) * (uint64_t{1} << 20);
    const rlimit as{cap, cap};
    ::setrlimit(RLIMIT_AS, &as);
  }
  return base;
}

// The worker's wire: frames of a little-endian u64 length and that many bytes, both ways. Two
// lengths no frame can have end an answer: kDone (the worker waits for the next request) and
// kDoneExiting (it exits now, its address space having grown: see IsolatedWorker).
constexpr uint64_t kDone = UINT64_MAX;
constexpr uint64_t kDoneExiting = UINT64_MAX - 1;

bool send_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // MSG_NOSIGNAL: a peer that is gone is an error here, not a SIGPIPE that ends the process.
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool send_frame(int fd, uint64_t len, const std::string* payload) {
  unsigned char head[8];
  for (int k = 0; k < 8; ++k) head[k] = static_cast<unsigned char>(len >> (8 * k));
  if (!send_all(fd, head, 8)) return false;
  return !payload || send_all(fd, payload->data(), payload->size());
}

bool recv_all(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

[[noreturn]] void run_worker(int fd, const IsolatedWorker::Handler& handler, const IsolationLimits& limits,
                             pid_t parent) {
  // The worker outlives no parent: killed with it (also mid-inference on a model that hangs), and
  // ended by the signals that end a command, not by a handler it inherited (bench's SIGTERM handler
  // only sets a flag).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
  const uint64_t base = prepare_child(limits);
  const uint64_t grown = static_cast<uint64_t>(limits.memory_mib) * (uint64_t{1} << 19);  // half the cap
  auto send = [fd](const std::string& chunk) { return send_frame(fd, chunk.size(), &chunk); };
  std::string request;
  for (;;) {
    unsigned char head[8];
    if (!recv_all(fd, head, 8)) ::_exit(0);  // the parent closed its end (or exited)
    uint64_t len = 0;
    for (int k = 0; k < 8; ++k) len |= static_cast<uint64_t>(head[k]) << (8 * k);
    int status = 0;
    try {
      request.resize(static_cast<size_t>(len));
      if (!recv_all(fd, request.data(), request.size())) ::_exit(0);
      handler(request, send);
    } catch (const std::bad_alloc&) {
      status = kChildOutOfMemory;
    } catch (...) {
      status = kChildException;
    }
    if (status != 0) ::_exit(status);
    const bool exiting = limits.memory_mib > 0 && address_space_bytes() > base + grown;
    if (!send_frame(fd, exiting ? kDoneExiting : kDone, nullptr) || exiting) ::_exit(0);
  }
}

// How a child that ended on its own ended.
void classify_exit(int status, IsolatedRun& run) {
  if (WIFSIGNALED(status)) {
    run.end = IsolatedRun::End::kCrashed;
    run.signal = WTERMSIG(status);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kChildOutOfMemory) {
    run.end = IsolatedRun::End::kOutOfMemory;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    run.end = IsolatedRun::End::kCrashed;
  }
}

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds to wait in one poll: at most a second, so that the deadline is checked often.
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1000)));
}

// The parent's ends of the sockets of every running worker. A worker forked while another runs
// inherits a copy of the other's end and closes it first thing: otherwise that copy would keep the
// other worker from seeing the parent close its end (its signal to exit), and stop() would wait for
// it forever.
// Both outlive every worker: a worker held in a static (model.cpp's inference_worker) is destroyed
// at exit, after statics constructed later than it, and its stop() still closes its end here. So
// they are never destroyed.
std::mutex& ends_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<int>& parent_ends() {
  static auto* ends = new std::vector<int>;
  return *ends;
}
void close_end(int fd) {
  {
    std::lock_guard<std::mutex> lock(ends_mutex());
    auto& ends = parent_ends();
    ends.erase(std::remove(ends.begin(), ends.end(), fd), ends.end());
  }
  ::close(fd);
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 0;
  return status;
}

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

IsolatedWorker::~IsolatedWorker() {
  stop(busy_);
}

Status IsolatedWorker::start(const IsolationLimits& limits) {
  reap();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return make_error("cannot create a socket pair: {}", std::strerror(errno));
  // Room in the socket for a whole answer where the system allows it (net.core.wmem_max caps it;
  // best effort): a worker whose answer for one batch size does not fit waits until the parent
  // collects, instead of inferring the next batch size meanwhile.
  const int room = 4 << 20;
  for (int fd : fds) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof room);
  const pid_t parent = ::getpid();
  std::unique_lock<std::mutex> lock(ends_mutex());
  const std::vector<int> others = parent_ends();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return make_error("cannot fork: {}", std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[0]);
    for (int fd : others) ::close(fd);
    run_worker(fds[1], handler_, limits, parent);
  }
  parent_ends().push_back(fds[0]);
  lock.unlock();
  ::close(fds[1]);
  pid_ = pid;
  fd_ = fds[0];
  memory_mib_ = limits.memory_mib;
  ++forks_;
  return {};
}

void IsolatedWorker::release() {
  if (pid_ < 0 || busy_) return;
  reap();
  close_end(fd_);
  released_ = pid_;
  pid_ = -1;
  fd_ = -1;
}

void IsolatedWorker::reap() {
  if (released_ < 0) return;
  wait_child(released_);
  released_ = -1;
}

void IsolatedWorker::stop(bool kill_it) {
  reap();
  if (pid_ < 0) return;
  // Closing our end is the worker's signal to exit; a worker that may be busy is killed.
  if (kill_it) ::kill(pid_, SIGKILL);
  close_end(fd_);
  wait_child(pid_);
  pid_ = -1;
  fd_ = -1;
}

Result<IsolatedRun> IsolatedWorker::call(const std::string& request, const IsolationLimits& limits) {
  FL_TRY(submit(request, limits));
  return collect();
}

bool IsolatedWorker::needs_fork(const IsolationLimits& limits) {
  if (pid_ >= 0 && !busy_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      close_end(fd_);
      pid_ = -1;
      fd_ = -1;
    }
  }
  return pid_ < 0 || memory_mib_ != limits.memory_mib;
}

Status IsolatedWorker::prepare(const IsolationLimits& limits) {
  if (busy_ || !needs_fork(limits)) return {};
  if (pid_ >= 0) stop(true);
  return start(limits);
}

Status IsolatedWorker::submit(const std::string& request, const IsolationLimits& limits) {
  if (pid_ >= 0 && memory_mib_ != limits.memory_mib) stop(true);
  // A worker that exited between requests (it never does on its own, but may be killed from
  // outside) fails the send: start another and send once more.
  bool sent = false;
  for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
    if (pid_ < 0) FL_TRY(start(limits));
    sent = send_frame(fd_, request.size(), &request);
    if (!sent) stop(true);
  }
  if (!sent) return make_error("cannot send a request to the worker process: {}", std::strerror(errno));
  deadline_ = deadline_after(limits.timeout_s);
  busy_ = true;
  return {};
}

size_t IsolatedWorker::wait_any(const std::vector<IsolatedWorker*>& workers) {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    auto first = Clock::time_point::max();
    for (size_t k = 0; k < workers.size(); ++k) {
      const IsolatedWorker& w = *workers[k];
      if (w.pid_ < 0 || !w.busy_ || Clock::now() >= w.deadline_) return k;  // collect() says why
      fds.push_back(pollfd{w.fd_, POLLIN, 0});
      first = std::min(first, w.deadline_);
    }
    if (fds.empty()) return 0;
    const int r = ::poll(fds.data(), fds.size(), ms_left(first));
    if (r < 0 && errno != EINTR) return 0;
    for (size_t k = 0; r > 0 && k < fds.size(); ++k)
      if (fds[k].revents != 0) return k;
  }
}

Result<IsolatedRun> IsolatedWorker::collect() {
  if (pid_ < 0 || !busy_) return make_error("no request is waiting for the worker process");
  busy_ = false;
  const auto deadline = deadline_;
  IsolatedRun run;
  std::string pending;  // bytes received and not yet taken apart into frames
  bool timed_out = false, eof = false, done = false, exiting = false;
  char buf[1 << 16];
  while (!done && !eof) {
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t at = 0;
    while (pending.size() - at >= 8) {
      uint64_t len = 0;
      for (int k = 0; k < 8; ++k)
        len |= static_cast<uint64_t>(static_cast<unsigned char>(pending[at + k])) << (8 * k);
      if (len == kDone || len == kDoneExiting) {
        done = true;
        exiting = len == kDoneExiting;
        at += 8;
        break;
      }
      if (pending.size() - at - 8 < len) break;
      run.output.append(pending, at + 8, static_cast<size_t>(len));
      at += 8 + static_cast<size_t>(len);
    }
    pending.erase(0, at);
  }
  if (done) {
    if (exiting) stop(false);
    return run;
  }
  // The worker is gone, out of time, or its end of the socket failed: its end decides the request's.
  if (!eof) ::kill(pid_, SIGKILL);
  close_end(fd_);
  const int status = wait_child(pid_);
  pid_ = -1;
  fd_ = -1;
  if (timed_out)
    run.end = IsolatedRun::End::kTimedOut;
  else if (eof)
    classify_exit(status, run);
  else
    run.end = IsolatedRun::End::kCrashed;
  return run;
}

}  // namespace floorline::mp
