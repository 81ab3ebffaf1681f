#include "floorline/benchdb/system.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "floorline/common/isa.hpp"

#ifndef FLOORLINE_VERSION
#define FLOORLINE_VERSION "unknown"
#endif

namespace floorline::benchdb {

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The ISA extensions that decide which kernels a CPU library dispatches to.
constexpr std::array kFlagsThatMatter = {
    "sse4_1",   "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
    "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd",       "sve",         "sve2"};

}  // namespace

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
  return buf.data();
}

SystemRow capture_host_system(int threads) {
  SystemRow s;
  s.device_kind = "cpu";
  s.threads = threads;
  s.floorline_version = FLOORLINE_VERSION;
  if (const auto cap = isa_cap()) s.isa = isa_name(*cap);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if ((key == "model name" || key == "Model") && s.cpu_model.empty()) s.cpu_model = value;
    if ((key == "flags" || key == "Features") && flags.empty()) {
      std::istringstream in(value);
      for (std::string f; in >> f;) flags.insert(f);
    }
  }
  for (const char* f : kFlagsThatMatter)
    if (flags.count(f)) s.cpu_flags += (s.cpu_flags.empty() ? "" : " ") + std::string(f);
  s.device_name = s.cpu_model;
  s.cpu_cores = sysconf(_SC_NPROCESSORS_ONLN);
  s.compute_units = s.cpu_cores;
  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line))
    if (line.rfind("MemTotal:", 0) == 0) s.memory_bytes = std::stoll(line.substr(9)) * 1024;
  std::ifstream maxfreq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  int64_t khz = 0;
  if (maxfreq >> khz) s.clock_mhz = khz / 1000;
  utsname u{};
  if (uname(&u) == 0) s.os = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
#if defined(__clang__)
  s.compiler = fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  s.compiler = fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  return s;
}

}  // namespace floorline::benchdb
