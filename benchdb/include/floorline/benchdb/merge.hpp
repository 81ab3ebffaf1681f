// floorline/benchdb/merge.hpp — merge results databases measured on different machines.
//
// Rows are matched by content, never by row id: systems by fingerprint (two machines with the
// same stack share one system row), runs by uuid, models by (name, fingerprint), configs by
// canonical key, cases by (config, backend, algorithm, dtype, math mode, layout, fusion),
// measurements by (run, case), replays by (system, model, batch, dtype), per-layer runtime profiles by
// their framework_latencies identity. Merging an input twice adds nothing;
// merging A then B or B then A gives the same counts. Where both sides have a current measurement of one case
// on one system, the one from the later run (by started_at, then uuid) stays current and the other is kept as
// superseded. Each input is merged in one transaction: a failure leaves the output as it was.
#pragma once

#include <string>

#include "floorline/benchdb/database.hpp"

namespace floorline::benchdb {

struct MergeSummary {
  int64_t systems_added = 0;
  int64_t runs_added = 0;
  int64_t configs_added = 0;
  int64_t cases_added = 0;
  int64_t measurements_added = 0;
  int64_t measurements_present = 0;  // already in the output
  int64_t framework_latencies_changed = 0;
  int64_t replays_changed = 0;                // inserted or replaced by a later replay
  int64_t framework_layer_times_changed = 0;  // (v6) per-layer rows written (a newer profile replaces)
  int64_t cache_times_changed = 0;            // (v10) inserted or replaced by a later measurement
};

// Merges the database at `input` (opened read-only; an older schema is read as it is) into `out`.
Result<MergeSummary> merge_into(Database& out, const std::string& input);

}  // namespace floorline::benchdb
