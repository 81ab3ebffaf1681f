// floorline/common/output.hpp — output helpers for the executable and the analyzer's reports: one
// field list per row type drives the table columns, the CSV header and the JSON keys, so the three
// cannot disagree.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace floorline::output {

enum class Format { kTable, kJson, kCsv };

// A cell: text for the table and CSV, and the JSON value (number or string).
struct Cell {
  std::string text;
  nlohmann::json json;
  bool numeric = false;
};
Cell text_cell(std::string s);
Cell int_cell(int64_t v);
Cell float_cell(double v, int precision);
// A number that could not be computed: "-" in tables and CSV, null in JSON (never a 0).
Cell missing_cell();
Cell float_cell(const std::optional<double>& v, int precision);

template <class Row>
struct Field {
  std::string name;  // stable, unit in the name: "flops", "process_ms"
  std::function<Cell(const Row&)> get;
};

// Render rows as an aligned table (header underlined; numbers right-aligned).
template <class Row>
std::string render_table(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows);
template <class Row>
std::string render_csv(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows);
template <class Row>
nlohmann::json render_json(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows);

// Cell texts pass through terminal_safe() (names from model files and databases may hold any bytes).
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows);
// RFC 4180 quoting (a field holding a comma, quote, CR or LF is quoted), after valid_utf8().
std::string csv_escape(const std::string& s);

// Text made safe to print, whatever bytes it came with (names in a model file or a database):
// valid_utf8() replaces each byte that does not start or continue a valid UTF-8 sequence with
// U+FFFD; terminal_safe() does that and writes control characters other than newline and tab as
// \xNN, so that no escape sequence reaches a terminal.
std::string valid_utf8(std::string_view s);
std::string terminal_safe(std::string_view s);

// Colour only on a terminal, never with NO_COLOR set.
bool use_color(FILE* stream);
std::string bold(const std::string& s, bool color);
std::string red(const std::string& s, bool color);
std::string yellow(const std::string& s, bool color);

// --- templates -------------------------------------------------------------------------------
template <class Row>
std::string render_table(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows) {
  std::vector<std::string> header;
  for (const auto& f : fields) header.push_back(f.name);
  std::vector<std::vector<Cell>> cells;
  for (const auto& r : rows) {
    std::vector<Cell> line;
    for (const auto& f : fields) line.push_back(f.get(r));
    cells.push_back(std::move(line));
  }
  return table(header, cells);
}

template <class Row>
std::string render_csv(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows) {
  std::string out;
  for (size_t k = 0; k < fields.size(); ++k) out += (k ? "," : "") + csv_escape(fields[k].name);
  out += '\n';
  for (const auto& r : rows) {
    for (size_t k = 0; k < fields.size(); ++k) out += (k ? "," : "") + csv_escape(fields[k].get(r).text);
    out += '\n';
  }
  return out;
}

template <class Row>
nlohmann::json render_json(const std::vector<Field<Row>>& fields, const std::vector<Row>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& f : fields) o[f.name] = f.get(r).json;
    arr.push_back(std::move(o));
  }
  return arr;
}

}  // namespace floorline::output
