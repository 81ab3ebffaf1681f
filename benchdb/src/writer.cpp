#include "floorline/benchdb/writer.hpp"

#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "database_impl.hpp"
#include "schema_internal.hpp"

namespace floorline::benchdb {

MeasurementWriter::MeasurementWriter(Database& db, int64_t system_id, int64_t run_id, WriterOptions options)
    : db_(db),
      system_id_(system_id),
      run_id_(run_id),
      options_(options),
      last_commit_(std::chrono::steady_clock::now()) {
  pending_.reserve(static_cast<size_t>(std::max(1, options_.batch_rows)));
}

MeasurementWriter::~MeasurementWriter() {
  (void)flush();
}

Status MeasurementWriter::add(MeasurementRow row) {
  row.system_id = system_id_;
  row.run_id = run_id_;
  row.superseded = 0;
  if (row.measured_at.empty()) {
    const std::time_t now = std::time(nullptr);
    if (now != stamp_time_) {
      stamp_time_ = now;
      stamp_ = utc_now();
    }
    row.measured_at = stamp_;
  }
  pending_.push_back(std::move(row));
  const auto now = std::chrono::steady_clock::now();
  if (static_cast<int>(pending_.size()) >= options_.batch_rows ||
      std::chrono::duration<double>(now - last_commit_).count() >= options_.batch_seconds)
    return flush();
  return {};
}

namespace {

// What best_measurements groups by, besides the system.
struct Group {
  int64_t config_id = 0;
  std::string dtype, math_mode, fusion;
  bool conversion = false;  // a layout-conversion case: never a config's best (is_conversion)
  bool operator<(const Group& o) const {
    return std::tie(config_id, dtype, math_mode, fusion) <
           std::tie(o.config_id, o.dtype, o.math_mode, o.fusion);
  }
};

struct Candidate {
  double min_us;  // what the best case is chosen by (schema.cpp, kOfferBest)
  double median_us;
  int64_t measurement_id;
  int64_t case_id;
};

}  // namespace

Status MeasurementWriter::flush() {
  if (pending_.empty()) return {};
  Impl& d = db_.impl();
  // Supersede the current measurement unless it is final and this is not a forced re-measurement
  // (keep_lower: nor a passed one at least as low as the new row's ?4).
  static const std::string supersede =
      "UPDATE measurements SET superseded = 1 WHERE system_id = ?1 AND case_id = ?2 AND superseded = 0 "
      "AND (?3 OR status NOT IN ('passed', 'unsupported')) "
      "AND (?4 IS NULL OR status <> 'passed' OR coalesce(min_us, median_us) IS NULL "
      "OR coalesce(min_us, median_us) > ?4) RETURNING status";
  static const std::string insert = insert_sql(measurements_table(), "ON CONFLICT DO NOTHING");
  static const std::string case_group =
      "SELECT config_id, dtype, math_mode, fusion, conversion_tensor FROM cases WHERE id = ?1";
  int64_t written = 0;
  auto st = db_.transaction([&]() -> Status {
    written = 0;
    std::map<Group, Candidate> best;   // the batch's fastest passed row per group
    std::map<Group, int64_t> rebuild;  // groups whose best row may have been superseded -> a case id
    FL_ASSIGN_OR_RETURN(sql::Cached q, d.conn.cached(case_group));
    FL_ASSIGN_OR_RETURN(sql::Cached up, d.conn.cached(supersede));
    auto group_of = [&](int64_t case_id) -> Result<Group> {
      q->reset();
      FL_TRY(q->bind(1, case_id));
      FL_ASSIGN_OR_RETURN(const bool row, q->step());
      if (!row) return make_error("measurement of case {}, which is not in the cases table", case_id);
      return Group{q->column_int(0), q->column_text(1), q->column_text(2), q->column_text(3),
                   !q->column_text(4).empty()};
    };
    FL_ASSIGN_OR_RETURN(sql::Cached ins, d.conn.cached(insert));
    const auto& cols = measurements_table().columns;
    auto try_insert = [&](const MeasurementRow& row) -> Status {
      ins->reset();
      for (size_t i = 0; i < cols.size(); ++i) FL_TRY(ins->bind(static_cast<int>(i + 1), cols[i].get(row)));
      return ins->run();
    };
    for (const auto& row : pending_) {
      FL_TRY(try_insert(row));
      bool inserted = d.conn.changes() == 1;
      if (!inserted) {
        // A current measurement of the case exists (or this run already measured it).
        up->reset();
        FL_TRY(up->bind(1, row.system_id));
        FL_TRY(up->bind(2, row.case_id));
        FL_TRY(up->bind(3, int64_t{options_.force ? 1 : 0}));
        // keep_lower: the new row's time; a row without one (failed, skipped) is above every time,
        // so that it never replaces a passed measurement.
        if (options_.keep_lower) {
          const bool passed = row.status == Disposition::kPassed;
          const std::optional<double> t = row.min_us ? row.min_us : row.median_us;
          FL_TRY(up->bind(4, passed && t ? *t : std::numeric_limits<double>::max()));
        } else {
          FL_TRY(up->bind_null(4));
        }
        FL_ASSIGN_OR_RETURN(const bool superseded, up->step());
        if (superseded) {
          const bool was_passed = up->column_text(0) == disposition_name(Disposition::kPassed);
          FL_TRY(up->run());
          if (was_passed) {
            FL_ASSIGN_OR_RETURN(Group g, group_of(row.case_id));
            rebuild.emplace(std::move(g), row.case_id);
          }
          FL_TRY(try_insert(row));
          inserted = d.conn.changes() == 1;
        }
      }
      if (!inserted) continue;
      ++written;
      if (row.status != Disposition::kPassed || !row.median_us) continue;
      FL_ASSIGN_OR_RETURN(Group g, group_of(row.case_id));
      if (g.conversion) continue;
      const Candidate c{row.min_us.value_or(*row.median_us), *row.median_us, d.conn.last_insert_rowid(),
                        row.case_id};
      auto [it, fresh] = best.emplace(std::move(g), c);
      if (!fresh && c.min_us < it->second.min_us) it->second = c;
    }
    for (const auto& [g, case_id] : rebuild) {
      for (const char* q : {kDeleteBestGroup, kRebuildBestGroup}) {
        FL_ASSIGN_OR_RETURN(sql::Cached s, d.conn.cached(q));
        FL_TRY(s->bind(1, system_id_));
        FL_TRY(s->bind(2, case_id));
        FL_TRY(s->run());
      }
    }
    FL_ASSIGN_OR_RETURN(sql::Cached offer, d.conn.cached(kOfferBest));
    for (const auto& [g, c] : best) {
      offer->reset();
      FL_TRY(offer->bind(1, g.config_id));
      FL_TRY(offer->bind(2, system_id_));
      FL_TRY(offer->bind(3, std::string_view(g.dtype)));
      FL_TRY(offer->bind(4, std::string_view(g.math_mode)));
      FL_TRY(offer->bind(5, std::string_view(g.fusion)));
      FL_TRY(offer->bind(6, c.measurement_id));
      FL_TRY(offer->bind(7, c.case_id));
      FL_TRY(offer->bind(8, c.median_us));
      FL_TRY(offer->bind(9, c.min_us));
      FL_TRY(offer->run());
    }
    return {};
  });
  if (!st) return st.error().with_context(d.path);
  committed_ += written;
  skipped_existing_ += static_cast<int64_t>(pending_.size()) - written;
  ++batches_;
  pending_.clear();
  last_commit_ = std::chrono::steady_clock::now();
  return {};
}

}  // namespace floorline::benchdb
