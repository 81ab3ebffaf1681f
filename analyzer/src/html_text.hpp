// Text for the HTML report (html.cpp and the report sections other files write): valid UTF-8,
// markup characters as entities, no control characters. Names come from model files, runtime
// profiles and databases and may hold any bytes.
#pragma once

#include <string>
#include <string_view>

namespace floorline::analyzer {

std::string html_text(std::string_view s);

}  // namespace floorline::analyzer
