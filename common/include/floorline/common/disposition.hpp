// floorline/common/disposition.hpp — how a benchmark case ended, and the code an Error carries.
//
// One enum for both (CUTLASS's Disposition, benchdnn's statuses): a case is passed, skipped (the
// policy declined it: beyond --max-impls, workspace over the limit, the planned implementation no
// longer offered), unsupported (the library or Floorline's mapping has no implementation), not
// verifiable (it ran, but its result is not the layer's: a proxy; only verify() reports it) or
// failed. An Error's code is one of the last four; a plain error is failed.
//
// The names below are the one table of their text: the `status` column of the database holds
// "passed", "skipped", "unsupported" or "failed", and "not verifiable" is what verify() reports.
// Text is turned back into a code at two boundaries only: Google Benchmark's (benchmark_error.hpp),
// where an error travels as SkipWithError's string, and the database's (parse_disposition, for
// the `status` column of the measurements read back).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace floorline {

enum class Disposition : uint8_t { kPassed, kSkipped, kUnsupported, kNotVerifiable, kFailed };

inline constexpr std::array<std::pair<Disposition, std::string_view>, 5> kDispositionNames = {{
    {Disposition::kPassed, "passed"},
    {Disposition::kSkipped, "skipped"},
    {Disposition::kUnsupported, "unsupported"},
    {Disposition::kNotVerifiable, "not verifiable"},
    {Disposition::kFailed, "failed"},
}};

// "passed", "skipped", "unsupported", "not verifiable", "failed".
constexpr std::string_view disposition_name(Disposition d) {
  for (const auto& [code, name] : kDispositionNames)
    if (code == d) return name;
  return "failed";
}

// The inverse of disposition_name(); nullopt for any other text.
constexpr std::optional<Disposition> parse_disposition(std::string_view name) {
  for (const auto& [code, text] : kDispositionNames)
    if (text == name) return code;
  return std::nullopt;
}

}  // namespace floorline
