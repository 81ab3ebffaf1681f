// Model-processor throughput on a zoo of ONNX files (the target: load + shape inference + IR +
// dedup take no more than the time `cat` takes to read the same bytes, page cache warm).
//
//   bench_model_processor DIR [--repeat N] [--batch B]
//
// Prints the median of N runs of (a) reading every file with read(2) into one reused, page-aligned
// 128 KiB buffer, which is what `cat FILES > /dev/null` does (GNU cat's buffer size; a larger one
// no longer fits in L2 and each read's copy goes to L3 or memory: 1 MiB measured ~25% slower than
// cat here), and (b) processing every model and deduplicating the zoo.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "floorline/model_processor/model.hpp"
#include "floorline/model_processor/zoo.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Returns bytes read.
int64_t read_all(const std::vector<std::filesystem::path>& files) {
  constexpr size_t kSize = size_t{128} << 10;
  alignas(4096) static char buf[kSize];
  int64_t total = 0;
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // as cat does
    ssize_t n;
    while ((n = ::read(fd, buf, kSize)) > 0) total += n;
    ::close(fd);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [--repeat N] [--batch B]\n", argv[0]);
    return 2;
  }
  int repeat = 5;
  int64_t batch = 1;
  for (int k = 2; k + 1 < argc; k += 2) {
    const std::string flag = argv[k];
    if (flag == "--repeat")
      repeat = std::max(1, std::atoi(argv[k + 1]));
    else if (flag == "--batch")
      batch = std::max<int64_t>(1, std::atoll(argv[k + 1]));
  }
  auto files = floorline::mp::find_models({argv[1]});
  if (!files) {
    std::fprintf(stderr, "%s\n", files.error().message.c_str());
    return 2;
  }
  const int64_t bytes = read_all(*files);  // warms the page cache
  floorline::mp::ProcessOptions opts;
  opts.batches = {batch};

  std::vector<double> read_s, process_s;
  size_t instances = 0, unique = 0, failed = 0;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = Clock::now();
    read_all(*files);
    read_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());

    t0 = Clock::now();
    std::vector<floorline::mp::ModelIR> models;
    failed = 0;
    // As `floorline layers` does: pipelined with the inference worker (model.hpp).
    floorline::mp::process_models(*files, opts,
                                  [&](size_t, floorline::Result<std::vector<floorline::mp::ModelIR>> m) {
                                    if (!m) {
                                      ++failed;
                                      std::fprintf(stderr, "%s\n", m.error().message.c_str());
                                      return;
                                    }
                                    for (auto& ir : *m) models.push_back(std::move(ir));
                                  });
    const auto configs = floorline::mp::dedup(models);
    process_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    unique = configs.size();
    instances = 0;
    for (const auto& u : configs) instances += static_cast<size_t>(u.count);
  }
  const double rd = median(read_s), pr = median(process_s);
  std::printf("files                 %zu (%zu failed)\n", files->size(), failed);
  std::printf("bytes                 %.3f GB\n", static_cast<double>(bytes) / 1e9);
  std::printf("layer instances       %zu, unique configs %zu (batch %lld)\n", instances, unique,
              static_cast<long long>(batch));
  std::printf("read (cat) median     %.3f s  (%.2f GB/s)  over %d runs\n", rd, bytes / rd / 1e9, repeat);
  std::printf("process median        %.3f s  (%.2f GB/s)\n", pr, bytes / pr / 1e9);
  std::printf("process / read        %.2fx  (target <= 1x)\n", pr / rd);
  return failed ? 1 : 0;
}
