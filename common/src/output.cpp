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

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows) {
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

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
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
