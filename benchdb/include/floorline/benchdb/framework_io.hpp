// floorline/benchdb/framework_io.hpp — import end-to-end latencies measured in a real framework.
//
// Input: JSON (an array of objects, or an object with a "framework_latencies" array) or CSV with a
// header row. Field names are the framework_latencies columns (schema.hpp): model_name (or
// "model"), runtime, runtime_version, device, batch, dtype, settings, threads, median_us, min_us,
// max_us, stddev_us, repetitions, measured_at; any "_us" field may be given in milliseconds as
// "_ms" instead. Required: model_name, runtime, median (> 0). Errors name the file and the row
// (1-based, header not counted); nothing is written when any row is bad.
#pragma once

#include <string>

#include "floorline/benchdb/database.hpp"

namespace floorline::benchdb {

struct FrameworkImportSummary {
  int64_t rows = 0;     // rows in the file
  int64_t changed = 0;  // rows inserted or updated (a re-import of the same file changes none)
};

// `format` is "json", "csv" or "" (from the extension).
Result<FrameworkImportSummary> import_framework_latencies(Database& db, const std::string& path,
                                                          std::string format = "");

// Parses CSV text (RFC 4180: quoted fields, doubled quotes, CRLF) into rows of fields.
Result<std::vector<std::vector<std::string>>> parse_csv(const std::string& text);

}  // namespace floorline::benchdb
