#include "floorline/common/output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

namespace floorline::output {

Cell text_cell(std::string s) {
  return Cell{s, s, false};
}
Cell int_cell(int64_t v) {
  return Cell{std::to_string(v), v, true};
}
Cell float_cell(double v, int precision) {
  return Cell{fmt::format("{:.{}f}", v, precision), v, true};
}
Cell missing_cell() {
  return Cell{"-", nullptr, true};
}
Cell float_cell(const std::optional<double>& v, int precision) {
  return v ? float_cell(*v, precision) : missing_cell();
}

namespace {

// The length of the valid UTF-8 sequence at the start of `s` (1-4), or 0 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t n = utf8_sequence(s);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      s.remove_prefix(1);
    } else {
      out.append(s.substr(0, n));
      s.remove_prefix(n);
    }
  }
  return out;
}

std::string terminal_safe(std::string_view s) {
  const std::string v = valid_utf8(s);
  std::string out;
  out.reserve(v.size());
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F)
      out += fmt::format("\\x{:02x}", c);
    else
      out += ch;
  }
  return out;
}

std::string table(const std::vector<std::string>& header_in, const std::vector<std::vector<Cell>>& rows_in) {
  // Every text one line of printable characters, so that the columns stay aligned.
  const auto cell_text = [](const std::string& t) {
    std::string s = terminal_safe(t);
    std::string out;
    for (const char ch : s)
      out += ch == '\n' ? std::string("\\n") : ch == '\t' ? std::string("\\t") : std::string(1, ch);
    return out;
  };
  std::vector<std::string> header;
  for (const auto& h : header_in) header.push_back(cell_text(h));
  std::vector<std::vector<Cell>> rows = rows_in;
  for (auto& r : rows)
    for (auto& c : r) c.text = cell_text(c.text);
  std::vector<size_t> width(header.size(), 0);
  for (size_t k = 0; k < header.size(); ++k) width[k] = header[k].size();
  for (const auto& r : rows)
    for (size_t k = 0; k < r.size() && k < width.size(); ++k) width[k] = std::max(width[k], r[k].text.size());
  std::vector<bool> numeric(header.size(), !rows.empty());
  for (const auto& r : rows)
    for (size_t k = 0; k < r.size() && k < numeric.size(); ++k) numeric[k] = numeric[k] && r[k].numeric;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t k = 0; k < cells.size(); ++k) {
      if (k) out += "  ";
      const size_t pad = width[k] - cells[k].size();
      if (numeric[k])
        out += std::string(pad, ' ') + cells[k];
      else
        out += cells[k] + (k + 1 < cells.size() ? std::string(pad, ' ') : "");
    }
    return out + "\n";
  };
  std::string out = line(header);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& r : rows) {
    std::vector<std::string> t;
    for (const auto& c : r) t.push_back(c.text);
    out += line(t);
  }
  return out;
}

std::string csv_escape(const std::string& in) {
  const std::string s = valid_utf8(in);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

bool use_color(FILE* stream) {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return isatty(fileno(stream)) != 0;
}
std::string bold(const std::string& s, bool color) {
  return color ? "\033[1m" + s + "\033[0m" : s;
}
std::string red(const std::string& s, bool color) {
  return color ? "\033[31m" + s + "\033[0m" : s;
}
std::string yellow(const std::string& s, bool color) {
  return color ? "\033[33m" + s + "\033[0m" : s;
}

}  // namespace floorline::output
