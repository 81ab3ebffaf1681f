#include "floorline/common/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace floorline {

Result<std::string> read_input_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error("{}: cannot read the file: {}", path, std::strerror(errno));
  // stat() first: opening a FIFO would block, and a device has no size to check.
  if (!S_ISREG(st.st_mode)) return make_error("{}: not a regular file (a device, FIFO or folder)", path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return make_error("{}: {:.1f} MiB is more than an import reads ({} MiB)", path,
                      static_cast<double>(st.st_size) / 1048576.0, max_bytes >> 20);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error("{}: cannot read the file: {}", path, std::strerror(errno));
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the file shrank while being read: what is there is parsed
    got += static_cast<size_t>(n);
  }
  const int read_errno = errno;
  ::close(fd);
  if (got < text.size() && read_errno != 0 && read_errno != EAGAIN)
    return make_error("{}: cannot read the file: {}", path, std::strerror(read_errno));
  text.resize(got);
  return text;
}

}  // namespace floorline
