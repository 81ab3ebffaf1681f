// Reading a file Floorline is given (an import, a runtime profile, a reference model): bounded, so
// that `--framework /dev/zero` or a huge file is a one-line error instead of std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>

#include "floorline/common/result.hpp"

namespace floorline {

// The most an import reads from one file. Framework latencies and Google Benchmark JSON files of a
// whole zoo are a few MiB.
inline constexpr uint64_t kMaxImportBytes = uint64_t{256} << 20;

// The whole content of the regular file `path`. Errors name the file: not a regular file (a device,
// a FIFO, a folder), larger than `max_bytes`, unreadable.
Result<std::string> read_input_file(const std::string& path, uint64_t max_bytes = kMaxImportBytes);

}  // namespace floorline
