// floorline/benchdb/value.hpp — SQLite values and generic query results.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace floorline::benchdb {

// The storage classes of a STRICT table (BLOB is not used by Floorline).
enum class SqlType { kInteger, kReal, kText };
std::string_view sql_type_name(SqlType t);

// NULL, INTEGER, REAL or TEXT.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string>;

bool is_null(const SqlValue& v);
// Text for tables and CSV: "" for NULL, integers as is, reals with up to 6 significant digits
// after the point trimmed ("12.5", "0.000123").
std::string value_text(const SqlValue& v);
// JSON: null, number or string.
nlohmann::json value_json(const SqlValue& v);

// The rows of a query, column names in SELECT order.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<SqlValue>> rows;
};

}  // namespace floorline::benchdb
