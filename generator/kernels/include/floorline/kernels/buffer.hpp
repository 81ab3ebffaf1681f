// floorline/kernels/buffer.hpp — where a built case's host buffers land: transparent huge pages and
// buffer placements (docs/MEASUREMENT.md).
//
// A memory-bound case's time depends on where its buffers land in physically indexed caches. On
// 4 KiB pages the physical frames are whatever the kernel hands out, so the same case lands
// differently in every process (here: a Clip on 2.4 MB ranged 1.7× between processes, steady
// within each). On a 2 MiB transparent huge page the low 21 address bits are the same virtually and
// physically, so the cache sets a buffer maps to (L1, L2, and the L3 sets below 2 MiB) are set by
// its offset within the page. The placement is a choice of offsets, one per buffer, that Floorline
// makes: placement p puts the k-th large buffer of a build at offset_in_page(p, k), so that two
// placements differ (and two buffers of one build do not alias at 4 KiB, which stalls loads behind
// stores on x86). In a virtual machine that is not the whole story: the host may back a guest's
// huge page with 4 KiB frames of its own, so which frames a buffer gets still matters. Released
// large buffers are therefore kept mapped for a while (kRetiredBytes), so that the next builds get
// other frames: the runner times a case in several placements, on different frames, and keeps the
// best. (Measured on a 2-core EPYC VM: a ReLU on 2 × 401 KB took 3.16–3.36 µs in every placement
// of a process when each build reused the last one's frames, 3.14–5.75 µs across placements on
// fresh frames, and the best of eight was within 5% in six processes of six.)
//
// Buffers of at least kHugePageMinBytes are mapped on their own, 2 MiB-aligned and advised
// madvise(MADV_HUGEPAGE), when huge pages are asked for and /sys/kernel/mm/transparent_hugepage/
// enabled says `always` or `madvise`; elsewhere (asked not to, `never`, no such file, madvise
// failing) they get 4 KiB pages at the same in-page offset: a fallback, never an error. Smaller
// buffers come from the heap, shifted by whole cache lines by placement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace floorline::kernels {

// How a build lays out its host buffers (CaseSpec::placement). The defaults are the plain
// allocations of a framework: 4 KiB pages, placement 0.
struct BufferPlacement {
  int index = 0;            // the placement, 0-based (offset_in_page)
  bool huge_pages = false;  // large buffers on transparent huge pages where the system allows it
  // Large buffers take a released mapping back when one fits (as large, at most twice as large, the
  // same page size) instead of a fresh one: no page faults and no clearing by the kernel at build
  // time (the buffer is still zeroed), but the frames of the last builds. For a single visit per
  // case (`run --quick`), where placements are not compared.
  bool reuse_frames = false;
  bool operator==(const BufferPlacement&) const = default;
};

// Buffers below this size (bytes) come from the heap, never from their own huge page: 2 MiB of
// memory and a 2 MiB clear at build time for a few cache lines would buy nothing.
inline constexpr size_t kHugePageMinBytes = size_t{64} << 10;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Large buffers, once released, stay mapped until the released ones total more than this (bytes);
// then the oldest are unmapped. The kernel hands a new mapping the frames it freed last, so without
// this every build of a process would reuse the same few physical pages, and placements would
// differ only by their offsets. The limit holds per copy of this library (each backend plugin has
// its own).
inline constexpr size_t kRetiredBytes = size_t{64} << 20;

// The system's transparent huge page mode, from `path` (the kernel's sysfs file, whose selected
// mode is bracketed: "always [madvise] never"): "always", "madvise", "never", or "" when the file is
// missing or unreadable.
std::string transparent_huge_pages(const std::string& path = "/sys/kernel/mm/transparent_hugepage/enabled");

// Whether madvise(MADV_HUGEPAGE) can give a buffer huge pages here: the mode is always or madvise.
bool huge_pages_allowed(const std::string& mode);

// The page policy in effect for `placement` on this system, as recorded in runs.options
// ("buffers"): "huge pages (madvise)" or "4 KiB pages (transparent huge pages: never | not
// asked | unavailable)".
std::string page_policy(bool huge_pages_asked, const std::string& mode = transparent_huge_pages());

// The address ranges [first, second) of this process's mappings advised MADV_HUGEPAGE (the `hg`
// flag of VmFlags in /proc/self/smaps; Linux 3.8 and later), in address order: where HostBuffer's
// large buffers asked for huge pages, in every copy of this library. Empty where the file cannot
// be read. Whether the kernel then gave huge pages is its own affair (AnonHugePages).
std::vector<std::pair<uintptr_t, uintptr_t>> huge_page_advised_ranges(
    const std::string& smaps = "/proc/self/smaps");

// MemAvailable of /proc/meminfo in bytes (what the kernel estimates can be had without swapping);
// -1 where it cannot be read.
int64_t available_memory_bytes();

// A host buffer of kGuardedBytes or more is not mapped where it would leave the machine less than
// kKeptFreeBytes available (MemAvailable): its case is skipped with a reason naming both sizes,
// instead of the kernel's out-of-memory killer ending the run (a large model at a large batch:
// `bench --batch 256`). The buffers before it are resident (HostBuffer touches every page), so the
// check sees what the case holds so far.
inline constexpr size_t kGuardedBytes = size_t{64} << 20;
inline constexpr int64_t kKeptFreeBytes = int64_t{1} << 30;

// Gives the whole pages inside [data, data + bytes) back to the system (madvise(MADV_DONTNEED)):
// their memory is freed at once, and a later read of them finds zeros, a later write a fresh page.
// For an own buffer that nothing reads any more (replay: a case's operand wired to another buffer)
// whose mapping stays until the buffer is destroyed. Returns the bytes given back: 0 for a range
// holding no whole page (a small heap buffer, usually) or where madvise refuses.
size_t release_pages(void* data, size_t bytes);

// The offset (bytes, a multiple of 64, below 128 KiB) of the k-th large buffer of a build in
// placement p from the start of its (huge or 4 KiB) page run: distinct for every k < 64 in one
// placement and for every p < 64 for one k, with no two buffers of a placement at the same offset
// modulo 4 KiB.
size_t offset_in_page(int placement, int k);

// A zeroed host buffer of at least `bytes` bytes, 64-byte aligned, placed by the current placement
// scope (below): the k-th allocation of at least kHugePageMinBytes in the scope goes to
// offset_in_page(placement, k) of its own mapping; smaller ones to the heap. Throws
// KernelError(Disposition::kSkipped) when the memory cannot be had.
class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // On its own mapping, 2 MiB-aligned and advised MADV_HUGEPAGE (the kernel may still give 4 KiB
  // pages when it has no free huge page: madvise is a request).
  bool huge() const { return huge_; }
  bool mapped() const { return map_ != nullptr; }  // on its own mapping (large), not the heap
  size_t offset() const { return offset_; }        // from the start of its mapping (mapped())

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  void* map_ = nullptr;  // mmap region (large buffers) ...
  size_t map_bytes_ = 0;
  void* heap_ = nullptr;  // ... or heap block (small ones)
  size_t offset_ = 0;
  bool huge_ = false;
};

// While alive, the host buffers built on this thread follow `placement` (HostBuffer counts its
// large buffers from 0). Nested scopes restore the outer one. A backend's factory opens one around
// the build of a case, inside the plugin (each plugin has its own copy of this library). Outside
// any scope: placement 0 on 4 KiB pages.
class PlacementScope {
 public:
  explicit PlacementScope(BufferPlacement placement);
  ~PlacementScope();
  PlacementScope(const PlacementScope&) = delete;
  PlacementScope& operator=(const PlacementScope&) = delete;

 private:
  BufferPlacement saved_;
  int saved_count_ = 0;
};

}  // namespace floorline::kernels
