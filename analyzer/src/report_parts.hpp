// Parts of the reports that several formats' files share (report.cpp, html.cpp); private to the analyzer.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "floorline/analyzer/report.hpp"

namespace floorline::analyzer {

// The validity check (validity.hpp) in each format: the table's "bound violations" section ("" when
// there is none; each violation's first `top` runtime nodes), the JSON "bound_check" object, and the
// HTML "Bound check" section (always present: it also says when S holds).
std::string validity_table(const Report& report, size_t top);
nlohmann::json validity_json(const Report& report);
std::string validity_html(const Report& report);

}  // namespace floorline::analyzer
