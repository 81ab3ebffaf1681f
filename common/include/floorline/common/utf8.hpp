// floorline/common/utf8.hpp — making untrusted bytes safe for every output format.
//
// Names read from a model (nodes, ops, tensors) are arbitrary bytes; JSON writers refuse invalid
// UTF-8 (nlohmann::json throws type_error.316). Floorline replaces each invalid sequence with U+FFFD
// where the text enters the program, so no output can fail on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace floorline {

namespace utf8_detail {
// Length of the well-formed UTF-8 sequence at s[k] (Unicode 15, table 3-7: no overlong forms, no
// surrogates, nothing past U+10FFFF), or 0 if it is not one.
inline size_t sequence_length(std::string_view s, size_t k) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(k);
  if (c < 0x80) return 1;
  const size_t left = s.size() - k;
  auto cont = [&](size_t i) { return (b(k + i) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(k + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(k + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(k + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(k + 1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}
}  // namespace utf8_detail

inline bool is_valid_utf8(std::string_view s) {
  for (size_t k = 0; k < s.size();) {
    const size_t n = utf8_detail::sequence_length(s, k);
    if (n == 0) return false;
    k += n;
  }
  return true;
}

// `s` with every byte that does not start a well-formed sequence replaced by U+FFFD (one
// replacement per bad byte, so the length of the damage shows). Valid input comes back unchanged.
inline std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    const size_t n = utf8_detail::sequence_length(s, k);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++k;
    } else {
      out.append(s.substr(k, n));
      k += n;
    }
  }
  return out;
}

// Replaces `s` in place only when it needs it (the common case costs one scan, no copy).
inline void make_valid_utf8(std::string& s) {
  if (!is_valid_utf8(s)) s = to_valid_utf8(s);
}

}  // namespace floorline
