#include "isolate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

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

[[noreturn]] void run_child(int fd, const std::function<void(int)>& work, const IsolationLimits& limits) {
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
  if (limits.memory_mib > 0) {
    const uint64_t cap =
        address_space_bytes() + static_cast<uint64_t>(limits.memory_mib) * (uint64_t{1} << 20);
    const rlimit as{cap, cap};
    ::setrlimit(RLIMIT_AS, &as);
  }
  int status = 0;
  try {
    work(fd);
  } catch (const std::bad_alloc&) {
    status = kChildOutOfMemory;
  } catch (...) {
    status = kChildException;
  }
  // The pipe closes with the process: the parent's end-of-file then means the child is exiting.
  ::_exit(status);
}

}  // namespace

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

Result<IsolatedRun> run_isolated(const std::function<void(int fd)>& work, const IsolationLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return make_error("cannot create a pipe: {}", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return make_error("cannot fork: {}", std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], work, limits);
  }
  ::close(fds[1]);

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limits.timeout_s));
  auto ms_left = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1000)));
  };
  IsolatedRun run;
  bool timed_out = false, eof = false;
  char buf[1 << 16];
  while (!eof) {
    if (Clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, ms_left());
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    run.output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  // End of file comes with the child's exit (its end of the pipe is only closed by exiting), so
  // a blocking wait is short; after a time-out or a read error the child is killed first.
  if (!eof) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return make_error("cannot wait for the child process: {}", std::strerror(errno));
  if (timed_out) {
    run.end = IsolatedRun::End::kTimedOut;
  } else if (WIFSIGNALED(status)) {
    run.end = IsolatedRun::End::kCrashed;
    run.signal = WTERMSIG(status);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kChildOutOfMemory) {
    run.end = IsolatedRun::End::kOutOfMemory;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    run.end = IsolatedRun::End::kCrashed;
  }
  return run;
}

}  // namespace floorline::mp
