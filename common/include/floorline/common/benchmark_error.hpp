// floorline/common/benchmark_error.hpp — a coded Error through Google Benchmark's error string.
//
// A case that cannot be timed reports benchmark::State::SkipWithError(text), and the text is all
// that reaches a reporter or a `--benchmark_out` JSON file (written, perhaps, by a generated folder
// on another machine and imported later). This is the one place where an error's code becomes
// text and text becomes a code again: "<disposition name>: <message>", except that a failed
// error is its message alone (as files written before codes existed have it, and as a reader
// expects a library's error to look). A message without a known prefix (an exception's what(), an
// older file) is failed; a failed message that itself starts with a known prefix gets "failed: ",
// so that every error survives the round trip.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "floorline/common/result.hpp"

namespace floorline {

namespace detail {
// The code whose "<name>: " starts `text` (passed never does).
inline std::optional<Disposition> benchmark_error_prefix(std::string_view text) {
  for (const auto& [code, name] : kDispositionNames) {
    if (code == Disposition::kPassed) continue;
    if (text.size() >= name.size() + 2 && text.substr(0, name.size()) == name &&
        text.substr(name.size(), 2) == ": ")
      return code;
  }
  return std::nullopt;
}
}  // namespace detail

// "unsupported: oneDNN has no reorder ...", or a failed error's message — the string for
// SkipWithError.
inline std::string benchmark_error_text(const Error& e) {
  if (e.code == Disposition::kFailed && !detail::benchmark_error_prefix(e.message)) return e.message;
  return fmt::format("{}: {}", disposition_name(e.code), e.message);
}

// The inverse of benchmark_error_text: the code named by the prefix, the rest as message; any
// other text (no prefix, or "passed: ") is a failed error with the whole text; an empty text is
// failed with "error without a message".
inline Error error_from_benchmark_text(std::string_view text) {
  if (const auto code = detail::benchmark_error_prefix(text))
    return Error{std::string(text.substr(disposition_name(*code).size() + 2)), *code};
  if (text.empty()) return Error{"error without a message"};
  return Error{std::string(text)};
}

}  // namespace floorline
