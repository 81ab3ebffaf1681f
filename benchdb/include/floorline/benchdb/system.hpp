// floorline/benchdb/system.hpp — describe the stack this process runs on.
#pragma once

#include <string>

#include "floorline/benchdb/schema.hpp"

namespace floorline::benchdb {

// The CPU and OS half of a system row, read from /proc/cpuinfo, /proc/meminfo, uname and the
// compiler: device_kind "cpu", device_name and cpu_model (model name), compute_units and
// cpu_cores (logical CPUs online), memory_bytes (MemTotal), clock_mhz (cpuinfo_max_freq when
// the kernel exposes it, else 0), cpu_flags (the vector/matrix ISA extensions kernels dispatch
// on: sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile ...), os, compiler,
// floorline_version, `threads`, and isa: the ISA cap of this process (FLOORLINE_MAX_CPU_ISA,
// floorline/common/isa.hpp), "" where there is none. Backends fill in their own fields (their library
// versions in `libraries`, the GPU fields) before the row is stored.
SystemRow capture_host_system(int threads);

// The machine's host name (runs.host_name).
std::string host_name();

}  // namespace floorline::benchdb
