// `floorline analyze`: bounds, advisors and reports from the layer IR and a results database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "floorline/analyzer/report.hpp"

namespace floorline::cli {

// Renders a report in one format ("table", "json", "csv", "html", "dot").
std::string render_report(const analyzer::Report& report, const std::string& format, bool layers, size_t top);

void add_analyze_command(CLI::App& app, int& exit_code);

}  // namespace floorline::cli
