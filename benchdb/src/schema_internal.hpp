// Type-erased table schemas: what the DDL and migrations need, without the row types.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floorline/benchdb/schema.hpp"

namespace floorline::benchdb {

struct ColumnSchema {
  std::string name;
  SqlType type;
  bool nullable;
  std::string constraint;
  int since;
  int until = 0;              // the version that dropped it (RetiredColumn); 0 while it exists
  std::string added_default;  // Column::added_default
};

struct TableSchema {
  std::string name;
  int since;
  std::vector<ColumnSchema> columns;
  std::vector<std::string> constraints;
  std::vector<IndexDef> indexes;
};

// Every table, in creation order (parents before children).
const std::vector<TableSchema>& all_tables();
// The statements that take a database from schema version-1 to `version`: CREATE TABLE for the
// tables introduced at `version` (with their columns as of `version`), ALTER TABLE ADD COLUMN for
// the columns introduced at `version` into older tables, and the indexes introduced at `version`.
std::vector<std::string> migration_statements(int version);
// The statements that drop the columns retired at `version` (after their data has been moved).
std::vector<std::string> retirement_statements(int version);

// The statuses a run may have. Schema 5 added 'died'; its upgrade rewrites the CHECK of an older
// runs table from kRunStatusCheckV1 to this (database.cpp, Impl::upgrade_rows).
inline constexpr const char* kRunStatusCheck =
    "CHECK (status IN ('running', 'finished', 'interrupted', 'died'))";
inline constexpr const char* kRunStatusCheckV1 = "CHECK (status IN ('running', 'finished', 'interrupted'))";

// --- what schemas 1-3 wrote differently (read by the upgrade, merge and import of older files) --

// The per-library version columns of systems and their keys in systems.libraries.
inline constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kLegacyLibraryColumns = {{
    {"cuda_runtime_version", "cuda_runtime"},
    {"cudnn_version", "cudnn"},
    {"cublas_version", "cublas"},
    {"onednn_version", "onednn"},
}};
// When `column` is one of them, its non-empty value goes into s.libraries.
void add_legacy_library(SystemRow& s, std::string_view column, const SqlValue& value);
// Replays were framework_latencies rows of this runtime, with settings "system=<id>" and the
// make-up JSON in `source`.
inline constexpr std::string_view kLegacyReplayRuntime = "floorline-replay";
// Such a row as a ReplayRow (system_id as its settings name it, no run_id); nullopt for any other row.
std::optional<ReplayRow> replay_from_legacy(const FrameworkLatencyRow& f);

// Before schema 8 the links of a case were text: the conversion it is only its layout
// ("src:abcd>aBcd16b"), the cases it feeds params.feeds, an algorithm (oneDNN) or "layout:nhwc"
// (every case in that layout: XNNPACK, CUDA). Sets c.conversion and c.feeds from them (the upgrade
// to schema 8 and the merge of an older file; nothing else reads those texts).
void case_links_from_legacy(CaseRow& c);
// Views: re-created on every upgrade, after which best_measurements is rebuilt.
struct DerivedObject {
  std::string kind;  // "VIEW"
  std::string name;
  std::string body;  // what follows "CREATE TRIGGER name" / "CREATE VIEW name AS"
};
const std::vector<DerivedObject>& derived_objects();
// Recomputes best_measurements from measurements (all of it; after an upgrade or a merge).
extern const char* const kRebuildBest;
// Recomputes one group: ?1 system_id, ?2 case_id (any case of the group).
extern const char* const kDeleteBestGroup;
extern const char* const kRebuildBestGroup;
// Offers a candidate: ?1..?8 = config_id, system_id, dtype, math_mode, fusion, measurement_id,
// case_id, median_us; kept if faster than the group's best.
extern const char* const kOfferBest;

}  // namespace floorline::benchdb
