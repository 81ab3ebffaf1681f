// floorline/benchdb/writer.hpp — write measurements as they arrive, in batched transactions.
//
// A run's results are committed in batches (every `batch_rows` rows or `batch_seconds` seconds,
// whichever comes first, and on flush()). A process killed at any point (Ctrl-C, kill -9, power
// loss) keeps every committed batch, and the file passes PRAGMA integrity_check. A case has at
// most one current measurement per system: by default (resume) a case whose current measurement
// passed or is unsupported is left alone (the new row is not written and `skipped_existing`
// counts it); failed and skipped cases are measured again and the old row is marked superseded.
// With `force`, every new measurement supersedes the current one; with `keep_lower` as well, a
// passed measurement is superseded only by one whose min_us (median_us where it has none) is lower,
// and the other new row is not written (a re-measurement that keeps the lower of the two, as the
// runner's best placement does). Nothing is deleted.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "floorline/benchdb/database.hpp"

namespace floorline::benchdb {

struct WriterOptions {
  int batch_rows = 1000;
  double batch_seconds = 1.0;
  bool force = false;
  bool keep_lower = false;  // with force: a passed measurement yields only to a lower min_us
};

class MeasurementWriter {
 public:
  // Rows get `system_id` and `run_id` from here; `measured_at` is set when empty.
  MeasurementWriter(Database& db, int64_t system_id, int64_t run_id, WriterOptions options = {});
  MeasurementWriter(const MeasurementWriter&) = delete;
  MeasurementWriter& operator=(const MeasurementWriter&) = delete;
  // Flushes what is buffered; an error there is lost, so call flush() to see it.
  ~MeasurementWriter();

  Status add(MeasurementRow row);
  Status flush();

  int64_t committed() const { return committed_; }                // rows written and committed
  int64_t skipped_existing() const { return skipped_existing_; }  // rows not written: already measured
  int64_t batches() const { return batches_; }

 private:
  Database& db_;
  int64_t system_id_;
  int64_t run_id_;
  WriterOptions options_;
  std::vector<MeasurementRow> pending_;
  std::chrono::steady_clock::time_point last_commit_;
  int64_t committed_ = 0;
  int64_t skipped_existing_ = 0;
  int64_t batches_ = 0;
  int64_t stamp_time_ = 0;  // measured_at is formatted once per second
  std::string stamp_;
};

}  // namespace floorline::benchdb
