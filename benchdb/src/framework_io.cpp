#include "floorline/benchdb/framework_io.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "floorline/common/input_file.hpp"

namespace floorline::benchdb {

Result<std::vector<std::vector<std::string>>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, field_started = false;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      row.push_back(std::move(field));
      field.clear();
      field_started = false;
      if (!(row.size() == 1 && row[0].empty())) rows.push_back(std::move(row));
      row.clear();
      ++line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) return make_error("unterminated quoted field at line {}", line);
  if (field_started || !row.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// One input record as name -> value (strings from CSV, JSON values from JSON).
using Record = std::map<std::string, nlohmann::json>;

Result<FrameworkLatencyRow> to_row(const Record& rec, const std::string& source) {
  FrameworkLatencyRow r;
  r.source = source;
  for (const auto& c : framework_latencies_table().columns) {
    std::string name = c.name;
    double scale = 1.0;
    auto it = rec.find(name);
    if (it == rec.end() && name == "model_name") it = rec.find("model");
    if (it == rec.end() && name.size() > 3 && name.compare(name.size() - 3, 3, "_us") == 0) {
      it = rec.find(name.substr(0, name.size() - 3) + "_ms");
      scale = 1000.0;
    }
    if (it == rec.end() || it->second.is_null()) continue;
    const nlohmann::json& v = it->second;
    if (v.is_string() && v.get<std::string>().empty() && c.type != SqlType::kText) continue;
    try {
      switch (c.type) {
        case SqlType::kInteger:
          c.set(r, SqlValue{v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>()});
          break;
        case SqlType::kReal:
          c.set(r, SqlValue{(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>()) * scale});
          break;
        case SqlType::kText:
          c.set(r, SqlValue{v.is_string() ? v.get<std::string>() : v.dump()});
          break;
      }
    } catch (const std::exception&) {
      return make_error("{} = {} is not a {}", it->first, v.dump(), sql_type_name(c.type));
    }
  }
  if (r.model_name.empty()) return make_error("no model_name (or model)");
  if (r.runtime.empty()) return make_error("no runtime");
  if (!(r.median_us > 0)) return make_error("no positive median_us (or median_ms)");
  if (r.batch < 1) return make_error("batch {} is not positive", r.batch);
  if (r.measured_at.empty()) r.measured_at = utc_now();
  return r;
}

}  // namespace

namespace {

Result<FrameworkImportSummary> import_framework_latencies_unguarded(Database& db, const std::string& path,
                                                                    std::string format) {
  FL_ASSIGN_OR_RETURN(const std::string text, read_input_file(path));
  if (format.empty()) {
    const auto ext = std::filesystem::path(path).extension().string();
    format = ext == ".csv" ? "csv" : "json";
  }
  std::vector<Record> records;
  if (format == "json") {
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) return make_error("{}: not valid JSON", path);
    if (doc.is_object() && doc.contains("framework_latencies")) doc = doc["framework_latencies"];
    if (!doc.is_array()) return make_error("{}: expected an array of latency records", path);
    for (const auto& o : doc) {
      if (!o.is_object()) return make_error("{}: row {}: not an object", path, records.size() + 1);
      Record rec;
      for (const auto& [k, v] : o.items()) rec[k] = v;
      records.push_back(std::move(rec));
    }
  } else if (format == "csv") {
    auto rows = parse_csv(text);
    if (!rows) return rows.error().with_context(path);
    if (rows->empty()) return make_error("{}: empty CSV file", path);
    const auto& header = (*rows)[0];
    for (size_t i = 1; i < rows->size(); ++i) {
      const auto& row = (*rows)[i];
      if (row.size() != header.size())
        return make_error("{}: row {}: {} fields, the header has {}", path, i, row.size(), header.size());
      Record rec;
      for (size_t k = 0; k < header.size(); ++k) rec[header[k]] = row[k];
      records.push_back(std::move(rec));
    }
  } else {
    return make_error("{}: unknown format '{}' (json or csv)", path, format);
  }
  std::vector<FrameworkLatencyRow> rows;
  for (size_t i = 0; i < records.size(); ++i) {
    auto r = to_row(records[i], path);
    if (!r) return r.error().with_context(fmt::format("{}: row {}", path, i + 1));
    rows.push_back(std::move(r).value());
  }
  FrameworkImportSummary sum;
  sum.rows = static_cast<int64_t>(rows.size());
  FL_TRY(db.transaction([&]() -> Status {
    for (const auto& r : rows) {
      FL_ASSIGN_OR_RETURN(const int changed, db.upsert_framework_latency(r));
      sum.changed += changed;
    }
    return {};
  }));
  return sum;
}

}  // namespace

// A JSON value of an unexpected type (a string where a number belongs) throws inside nlohmann::json:
// it becomes an error naming the file, not an exception out of the command.
Result<FrameworkImportSummary> import_framework_latencies(Database& db, const std::string& path,
                                                          std::string format) {
  try {
    return import_framework_latencies_unguarded(db, path, std::move(format));
  } catch (const nlohmann::json::exception& e) {
    return make_error("{}: unexpected content: {}", path, e.what());
  }
}

}  // namespace floorline::benchdb
