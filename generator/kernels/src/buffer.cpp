// Host buffers on transparent huge pages, placed by placement (buffer.hpp).
#include "floorline/kernels/buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "floorline/kernels/kernel.hpp"

namespace floorline::kernels {
namespace {

thread_local BufferPlacement t_placement;
thread_local int t_large_count = 0;  // large buffers allocated in the current scope

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

// Released mappings, kept mapped (retired) until their total passes kRetiredBytes, then unmapped
// oldest first (buffer.hpp). Never destroyed: a buffer may be released during static destruction.
struct RetiredMap {
  void* map;
  size_t bytes;
  bool huge;  // 2 MiB-aligned and advised MADV_HUGEPAGE
};
struct Retired {
  std::mutex mutex;
  std::deque<RetiredMap> maps;
  size_t bytes = 0;
};
Retired& retired() {
  static auto* r = new Retired;
  return *r;
}

void retire(void* map, size_t bytes, bool huge) {
  if (bytes > kRetiredBytes) {
    munmap(map, bytes);
    return;
  }
  Retired& r = retired();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.maps.push_back({map, bytes, huge});
  r.bytes += bytes;
  while (r.bytes > kRetiredBytes) {
    munmap(r.maps.front().map, r.maps.front().bytes);
    r.bytes -= r.maps.front().bytes;
    r.maps.pop_front();
  }
}

// BufferPlacement::reuse_frames: the most recently retired mapping of `len` to 2 × `len` bytes with
// the same page size, taken out of the retired ones; nullopt when none fits.
std::optional<RetiredMap> take_retired(size_t len, bool huge) {
  Retired& r = retired();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.maps.rbegin(); it != r.maps.rend(); ++it)
    if (it->huge == huge && it->bytes >= len && it->bytes <= 2 * len) {
      const RetiredMap m = *it;
      r.bytes -= m.bytes;
      r.maps.erase(std::next(it).base());
      return m;
    }
  return std::nullopt;
}

// The system's mode, read once per process (per copy of this library).
const std::string& system_mode() {
  static const std::string mode = transparent_huge_pages();
  return mode;
}

}  // namespace

std::string transparent_huge_pages(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t open = text.find('[');
  const size_t close = open == std::string::npos ? std::string::npos : text.find(']', open);
  if (close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

bool huge_pages_allowed(const std::string& mode) {
  return mode == "always" || mode == "madvise";
}

std::string page_policy(bool huge_pages_asked, const std::string& mode) {
  if (!huge_pages_asked) return "4 KiB pages (huge pages not asked)";
  if (huge_pages_allowed(mode)) return "huge pages (madvise)";
  return fmt::format("4 KiB pages (transparent huge pages: {})", mode.empty() ? "unavailable" : mode);
}

size_t offset_in_page(int placement, int k) {
  const auto p = static_cast<size_t>(placement < 0 ? 0 : placement);
  const auto b = static_cast<size_t>(k < 0 ? 0 : k);
  return (p * 7 + b * 17) % 64 * 64 + (p + b * 3) % 32 * 4096;
}

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      try {
        return std::stoll(line.substr(13)) * 1024;
      } catch (const std::exception&) {
        return -1;
      }
    }
  return -1;
}

size_t release_pages(void* data, size_t bytes) {
  if (!data || bytes == 0) return 0;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (at + page - 1) / page * page, end = (at + bytes) / page * page;
  if (end <= first) return 0;
  if (madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED) != 0) return 0;
  return end - first;
}

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  const size_t want = bytes == 0 ? 1 : bytes;
  if (want < kHugePageMinBytes) {
    // The heap, shifted by whole cache lines so that placements differ for small buffers too.
    offset_ = static_cast<size_t>(t_placement.index < 0 ? 0 : t_placement.index) % 16 * 64;
    const size_t total = round_up(want + offset_, 64);
    heap_ = std::aligned_alloc(64, total);
    if (!heap_) throw KernelError(Disposition::kSkipped, fmt::format("cannot allocate {} bytes", total));
    std::memset(heap_, 0, total);
    data_ = static_cast<char*>(heap_) + offset_;
    return;
  }
  offset_ = offset_in_page(t_placement.index, t_large_count++);
  const bool huge = t_placement.huge_pages && huge_pages_allowed(system_mode());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t align = huge ? kHugePageBytes : page;
  const size_t len = round_up(offset_ + want, align);
  if (t_placement.reuse_frames) {
    if (auto m = take_retired(len, huge)) {
      map_ = m->map;
      map_bytes_ = m->bytes;
      huge_ = m->huge;
      data_ = static_cast<char*>(map_) + offset_;
      std::memset(data_, 0, want);  // zeroed, as a fresh mapping is
      return;
    }
  }
  if (want >= kGuardedBytes)
    if (const int64_t left = available_memory_bytes();
        left >= 0 && static_cast<int64_t>(want) > left - kKeptFreeBytes)
      throw KernelError(
          Disposition::kSkipped,
          fmt::format("needs a buffer of {:.2f} GiB, and the machine has {:.2f} GiB of memory "
                      "available ({:.0f} GiB kept free)",
                      static_cast<double>(want) / (1 << 30), static_cast<double>(left) / (1 << 30),
                      static_cast<double>(kKeptFreeBytes) / (1 << 30)));
  // Over-map by the alignment and trim both ends: an mmap is page-aligned only.
  const size_t over = len + (huge ? align : 0);
  void* raw = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw KernelError(Disposition::kSkipped, fmt::format("cannot map {} bytes", over));
  auto* start = static_cast<char*>(raw);
  if (huge) {
    const auto addr = reinterpret_cast<uintptr_t>(raw);
    start = reinterpret_cast<char*>(round_up(addr, align));
    const size_t head = static_cast<size_t>(start - static_cast<char*>(raw));
    if (head) munmap(raw, head);
    if (over - head > len) munmap(start + len, over - head - len);
    // A request: refused (an old kernel, a seccomp filter), the buffer keeps 4 KiB pages.
    huge_ = madvise(start, len, MADV_HUGEPAGE) == 0;
  }
  map_ = start;
  map_bytes_ = len;
  data_ = start + offset_;
  // Fresh anonymous pages are zero already; touching them now faults them in outside timing.
  std::memset(data_, 0, want);
}

HostBuffer::~HostBuffer() {
  release();
}

void HostBuffer::release() {
  if (map_) retire(map_, map_bytes_, huge_);
  std::free(heap_);
  map_ = heap_ = data_ = nullptr;
  map_bytes_ = bytes_ = offset_ = 0;
  huge_ = false;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(o.data_),
      bytes_(o.bytes_),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      heap_(o.heap_),
      offset_(o.offset_),
      huge_(o.huge_) {
  o.map_ = o.heap_ = o.data_ = nullptr;
  o.map_bytes_ = o.bytes_ = o.offset_ = 0;
  o.huge_ = false;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    heap_ = o.heap_;
    offset_ = o.offset_;
    huge_ = o.huge_;
    o.map_ = o.heap_ = o.data_ = nullptr;
    o.map_bytes_ = o.bytes_ = o.offset_ = 0;
    o.huge_ = false;
  }
  return *this;
}

PlacementScope::PlacementScope(BufferPlacement placement) : saved_(t_placement), saved_count_(t_large_count) {
  t_placement = placement;
  t_large_count = 0;
}

PlacementScope::~PlacementScope() {
  t_placement = saved_;
  t_large_count = saved_count_;
}

std::vector<std::pair<uintptr_t, uintptr_t>> huge_page_advised_ranges(const std::string& smaps) {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  std::ifstream in(smaps);
  std::string line;
  std::optional<std::pair<uintptr_t, uintptr_t>> current;
  while (std::getline(in, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]", in hexadecimal.
    unsigned long long a = 0, b = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> a >> dash >> b && dash == '-' && b > a) {
      current = std::make_pair(static_cast<uintptr_t>(a), static_cast<uintptr_t>(b));
      continue;
    }
    if (!current || line.rfind("VmFlags:", 0) != 0) continue;
    std::istringstream flags(line.substr(8));
    std::string flag;
    while (flags >> flag)
      if (flag == "hg") {
        ranges.push_back(*current);
        break;
      }
    current.reset();
  }
  return ranges;
}

}  // namespace floorline::kernels
