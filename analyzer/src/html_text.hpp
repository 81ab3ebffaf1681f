// Text for the HTML report (html.cpp and the report sections other files write): valid UTF-8,
// markup characters as entities, no control characters. Names come from model files, runtime
// profiles and databases and may hold any bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace floorline::analyzer {

std::string html_text(std::string_view s);

// A time in µs as people read it: "812.4 µs", "3.47 ms", "1.20 s".
std::string us_text(double us);

// n pairwise distinct colours ("#4e79a7"), for charts whose categories (layer kinds, models,
// runtimes, systems) can outnumber the palette: a ten-colour palette first, then hues a golden
// angle apart (so that neighbours differ most) at alternating lightness and saturation; a colour
// already given is skipped.
std::vector<std::string> distinct_colors(size_t n);

}  // namespace floorline::analyzer
