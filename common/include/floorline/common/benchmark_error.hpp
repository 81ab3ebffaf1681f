// floorline/common/benchmark_error.hpp — a coded Error through Google Benchmark's error string.
//
// A case that cannot be timed reports benchmark::State::SkipWithError(text), and the text is all
// that reaches a reporter or a `--benchmark_out` JSON file (written, perhaps, by a generated folder
// on another machine and imported later). This is the one place where an error's code becomes
// text and text becomes a code again: "<disposition name>: <message>". A message without a known
// prefix (an exception's what(), files written before codes existed) is failed.
#pragma once

#include <string>
#include <string_view>

#include "floorline/common/result.hpp"

namespace floorline {

// "unsupported: oneDNN has no reorder ..." — the string for SkipWithError.
inline std::string benchmark_error_text(const Error& e) {
  return fmt::format("{}: {}", disposition_name(e.code), e.message);
}

// The inverse of benchmark_error_text: the code named by the prefix, the rest as message; any
// other text (no prefix, or "passed: ") is a failed error with the whole text; an empty text is
// failed with "error without a message".
inline Error error_from_benchmark_text(std::string_view text) {
  for (const auto& [code, name] : kDispositionNames) {
    if (code == Disposition::kPassed) continue;
    if (text.size() > name.size() + 1 && text.substr(0, name.size()) == name && text.substr(name.size(), 2) == ": ")
      return Error{std::string(text.substr(name.size() + 2)), code};
  }
  if (text.empty()) return Error{"error without a message"};
  return Error{std::string(text)};
}

}  // namespace floorline
