// floorline/generator/plugin.hpp — the entry point of a backend plugin, and the tag both sides of
// dlopen must agree on.
//
// Each backend is a shared library, libfloorline-backend-<name>.so, that exports one C function,
// floorline_backend_v2 (FLOORLINE_BACKEND_ENTRY), returning a BackendPluginEntry. The registry
// (generator/src/registry.cpp) loads it at the first use of the backend and refuses it, saying why,
// when its abi tag differs from the executable's: Backend and the types crossing it (CaseSpec,
// PlannedCase, SystemRow...) are C++ types passed by reference, so both sides must be built from
// the same headers with the same compiler and standard library. A plugin is written as:
//
//   FLOORLINE_BACKEND_ENTRY_POINT(OnednnBackend)   // in its backend.cpp, after the class
#pragma once

#include <string>

#include <fmt/format.h>

#include "floorline/benchdb/schema.hpp"
#include "floorline/generator/backend.hpp"
#include "floorline/generator/plan.hpp"
#include "floorline/kernels/problem.hpp"

#ifndef FLOORLINE_VERSION
#error "FLOORLINE_VERSION must be defined (generator/CMakeLists.txt does) for the plugin ABI tag"
#endif

namespace floorline::gen {

// Bumped whenever Backend, or a type crossing it, changes in a way the sizes in the tag do not show
// (a virtual function added or reordered, a member's type changed for one of the same size).
inline constexpr int kBackendInterfaceVersion = 2;

// The entry point's name; its suffix is kBackendInterfaceVersion.
#define FLOORLINE_BACKEND_ENTRY floorline_backend_v2
inline constexpr const char* kBackendEntrySymbol = "floorline_backend_v2";

// "backend-v2 floorline-0.1.0 gcc-12.2 libstdc++-<date> cxx11abi-1 sizes-<bytes of each type>": what
// a plugin must have been built with. The sizes catch a header edited between two builds.
inline std::string backend_abi_tag() {
#if defined(__clang__)
  const std::string compiler = fmt::format("clang-{}.{}", __clang_major__, __clang_minor__);
#elif defined(__GNUC__)
  const std::string compiler = fmt::format("gcc-{}.{}", __GNUC__, __GNUC_MINOR__);
#else
  const std::string compiler = "unknown-compiler";
#endif
#if defined(__GLIBCXX__)
  const std::string stdlib = fmt::format("libstdc++-{} cxx11abi-{}", __GLIBCXX__, _GLIBCXX_USE_CXX11_ABI);
#else
  const std::string stdlib = "unknown-stdlib";
#endif
  return fmt::format("backend-v{} floorline-{} {} {} sizes-{},{},{},{},{},{}", kBackendInterfaceVersion,
                     FLOORLINE_VERSION, compiler, stdlib, sizeof(Backend), sizeof(kernels::Problem),
                     sizeof(kernels::CaseSpec), sizeof(kernels::Work), sizeof(PlannedCase),
                     sizeof(benchdb::SystemRow));
}

// What the entry point returns: a static object of the plugin.
struct BackendPluginEntry {
  const char* abi_tag;   // backend_abi_tag() as the plugin was built
  Backend* (*create)();  // a new backend, owned by the caller; called once, after the tag matched
};

}  // namespace floorline::gen

// Defines the plugin's entry point for the Backend subclass `Class` (default-constructible).
#define FLOORLINE_BACKEND_ENTRY_POINT(Class)                                                    \
  extern "C" __attribute__((visibility("default"))) const ::floorline::gen::BackendPluginEntry* \
  FLOORLINE_BACKEND_ENTRY() {                                                                   \
    static const std::string tag = ::floorline::gen::backend_abi_tag();                         \
    static const ::floorline::gen::BackendPluginEntry entry{                                    \
        tag.c_str(), []() -> ::floorline::gen::Backend* { return new Class(); }};               \
    return &entry;                                                                              \
  }
