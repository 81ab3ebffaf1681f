#include "floorline/benchdb/merge.hpp"

#include <unordered_map>
#include <unordered_set>

#include "database_impl.hpp"
#include "schema_internal.hpp"

namespace floorline::benchdb {

namespace {

struct RunOrder {
  std::string started_at;
  std::string uuid;
  bool operator<(const RunOrder& o) const {
    return std::tie(started_at, uuid) < std::tie(o.started_at, o.uuid);
  }
};

class Merger {
 public:
  Merger(Database& out, Database& in) : out_(out), in_(in), o_(out.impl()) {}

  Status run() {
    FL_TRY(systems());
    FL_TRY(runs());
    FL_TRY(models_and_configs());
    FL_TRY(cases());
    FL_TRY(measurements());
    FL_TRY(framework_latencies());
    FL_TRY(replays());
    FL_TRY(system_peaks());
    FL_TRY(framework_layer_times());
    FL_TRY(cache_times());
    // Derived data: recomputed over the merged measurements.
    FL_TRY(o_.conn.exec("DELETE FROM best_measurements"));
    FL_TRY(o_.conn.exec(kRebuildBest));
    return {};
  }

  MergeSummary summary;

 private:
  Result<bool> in_has(std::string_view table) {
    FL_ASSIGN_OR_RETURN(auto r,
                        in_.query("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                                  {std::string(table)}));
    return std::get<int64_t>(r.rows[0][0]) > 0;
  }

  Status systems() {
    // An input of schema 1-3 has one column per library version: they become the libraries map.
    return in_.for_each(
        "SELECT * FROM systems ORDER BY id", {},
        [&](const std::vector<std::string>& columns, const std::vector<SqlValue>& values) -> Status {
          SystemRow s = row_from(systems_table(), columns, values);
          for (size_t i = 0; i < columns.size(); ++i) add_legacy_library(s, columns[i], values[i]);
          FL_ASSIGN_OR_RETURN(system_[s.id], out_.upsert_system(s));
          summary.systems_added += o_.conn.changes();  // 1 when inserted, 0 when found
          return {};
        });
  }

  Status runs() {
    return for_each_row<RunRow>(in_, runs_table(), "", {}, [&](RunRow& r) -> Status {
      const int64_t in_id = r.id;
      r.system_id = system_.at(r.system_id);
      FL_ASSIGN_OR_RETURN(auto found, out_.query("SELECT id FROM runs WHERE uuid = ?1", {r.uuid}));
      if (!found.rows.empty()) {
        run_[in_id] = std::get<int64_t>(found.rows[0][0]);
        preexisting_runs_.insert(run_[in_id]);
      } else {
        FL_ASSIGN_OR_RETURN(run_[in_id], out_.begin_run(r));
        ++summary.runs_added;
      }
      run_order_[run_[in_id]] = {r.started_at, r.uuid};
      return {};
    });
  }

  Status models_and_configs() {
    FL_TRY(for_each_row<ModelRow>(in_, models_table(), "", {}, [&](ModelRow& m) -> Status {
      FL_ASSIGN_OR_RETURN(model_[m.id], out_.upsert_model(m));
      return {};
    }));
    FL_TRY(for_each_row<LayerConfigRow>(in_, layer_configs_table(), "", {}, [&](LayerConfigRow& c) -> Status {
      FL_ASSIGN_OR_RETURN(config_[c.id], out_.upsert_config(c));
      summary.configs_added += o_.conn.changes();  // 1 when the upsert inserted, 0 when it found the row
      return {};
    }));
    static const std::string ins =
        insert_sql(model_layers_table(), "ON CONFLICT (model_id, batch, node_index) DO NOTHING");
    return for_each_row<ModelLayerRow>(in_, model_layers_table(), "", {}, [&](ModelLayerRow& l) -> Status {
      l.model_id = model_.at(l.model_id);
      l.config_id = config_.at(l.config_id);
      FL_ASSIGN_OR_RETURN(sql::Cached s, o_.conn.cached(ins));
      FL_TRY(o_.bind_all(*s, row_values(model_layers_table(), l)));
      return s->run();
    });
  }

  Status cases() {
    return for_each_row<CaseRow>(in_, cases_table(), "", {}, [&](CaseRow& c) -> Status {
      const int64_t in_id = c.id;
      c.config_id = config_.at(c.config_id);
      if (in_.schema_version() < 8) case_links_from_legacy(c);  // its links were text
      FL_ASSIGN_OR_RETURN(case_[in_id], out_.upsert_case(c));
      summary.cases_added += o_.conn.changes();  // 1 when the upsert inserted, 0 when it found the row
      return {};
    });
  }

  // The cases a run that was already in the output has measurements of (built on first use).
  Result<std::unordered_set<int64_t>*> run_cases(int64_t run_id) {
    auto it = run_cases_.find(run_id);
    if (it != run_cases_.end()) return &it->second;
    auto& set = run_cases_[run_id];
    if (preexisting_runs_.count(run_id))
      FL_TRY(out_.for_each("SELECT case_id FROM measurements WHERE run_id = ?1", {run_id},
                           [&](const auto&, const std::vector<SqlValue>& v) -> Status {
                             set.insert(std::get<int64_t>(v[0]));
                             return {};
                           }));
    return &set;
  }

  Status measurements() {
    static const std::string ins = insert_sql(measurements_table());
    static const std::string current =
        "SELECT id, run_id FROM measurements WHERE system_id = ?1 AND case_id = ?2 AND superseded = 0";
    static const std::string demote = "UPDATE measurements SET superseded = 1 WHERE id = ?1";
    return for_each_row<MeasurementRow>(in_, measurements_table(), "", {}, [&](MeasurementRow& m) -> Status {
      m.case_id = case_.at(m.case_id);
      m.system_id = system_.at(m.system_id);
      m.run_id = run_.at(m.run_id);
      FL_ASSIGN_OR_RETURN(auto* seen, run_cases(m.run_id));
      if (!seen->insert(m.case_id).second) {
        ++summary.measurements_present;
        return {};
      }
      if (m.superseded == 0) {
        FL_ASSIGN_OR_RETURN(sql::Cached q, o_.conn.cached(current));
        FL_TRY(q->bind(1, m.system_id));
        FL_TRY(q->bind(2, m.case_id));
        FL_ASSIGN_OR_RETURN(const bool has_current, q->step());
        if (has_current) {
          const int64_t other_id = q->column_int(0);
          const int64_t other_run = q->column_int(1);
          q->reset();
          if (run_order_.at(m.run_id) < order_of(other_run)) {
            m.superseded = 1;  // the output's measurement is from a later run
          } else {
            FL_ASSIGN_OR_RETURN(sql::Cached d, o_.conn.cached(demote));
            FL_TRY(d->bind(1, other_id));
            FL_TRY(d->run());
          }
        }
      }
      FL_ASSIGN_OR_RETURN(sql::Cached s, o_.conn.cached(ins));
      FL_TRY(o_.bind_all(*s, row_values(measurements_table(), m)));
      FL_TRY(s->run());
      ++summary.measurements_added;
      return {};
    });
  }

  RunOrder order_of(int64_t out_run_id) {
    auto it = run_order_.find(out_run_id);
    if (it != run_order_.end()) return it->second;
    RunOrder o;
    if (auto r = out_.query("SELECT started_at, uuid FROM runs WHERE id = ?1", {out_run_id});
        r && !r->rows.empty())
      o = {value_text(r->rows[0][0]), value_text(r->rows[0][1])};
    run_order_[out_run_id] = o;
    return o;
  }

  Status framework_latencies() {
    FL_ASSIGN_OR_RETURN(const bool has, in_has("framework_latencies"));
    if (!has) return {};
    return for_each_row<FrameworkLatencyRow>(
        in_, framework_latencies_table(), "", {}, [&](FrameworkLatencyRow& f) -> Status {
          // An input of schema 1-3 keeps its replays here.
          if (auto r = replay_from_legacy(f)) return replay(*r);
          FL_ASSIGN_OR_RETURN(const int c, out_.upsert_framework_latency(f));
          summary.framework_latencies_changed += c;
          return {};
        });
  }

  // (v6) Per-layer runtime profiles, one identity at a time: a newer profile replaces an older one.
  Status framework_layer_times() {
    FL_ASSIGN_OR_RETURN(const bool has, in_has("framework_layer_times"));
    if (!has) return {};
    std::vector<FrameworkLayerTimeRow> group;
    auto flush = [&]() -> Status {
      FL_ASSIGN_OR_RETURN(const int64_t n, out_.replace_framework_layer_times(group));
      summary.framework_layer_times_changed += n;
      group.clear();
      return {};
    };
    auto same = [](const FrameworkLayerTimeRow& a, const FrameworkLayerTimeRow& b) {
      return std::tie(a.model_name, a.runtime, a.runtime_version, a.device, a.batch, a.dtype, a.settings,
                      a.threads) == std::tie(b.model_name, b.runtime, b.runtime_version, b.device, b.batch,
                                             b.dtype, b.settings, b.threads);
    };
    std::vector<FrameworkLayerTimeRow> all;
    FL_TRY(for_each_row<FrameworkLayerTimeRow>(in_, framework_layer_times_table(), "", {},
                                               [&](FrameworkLayerTimeRow& r) -> Status {
                                                 all.push_back(std::move(r));
                                                 return {};
                                               }));
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      return std::tie(a.model_name, a.runtime, a.runtime_version, a.device, a.batch, a.dtype, a.settings,
                      a.threads) < std::tie(b.model_name, b.runtime, b.runtime_version, b.device, b.batch,
                                            b.dtype, b.settings, b.threads);
    });
    for (auto& r : all) {
      if (!group.empty() && !same(group.front(), r)) FL_TRY(flush());
      group.push_back(std::move(r));
    }
    return group.empty() ? Status{} : flush();
  }

  Status replays() {
    FL_ASSIGN_OR_RETURN(const bool has, in_has("replays"));
    if (!has) return {};
    return for_each_row<ReplayRow>(in_, replays_table(), "", {}, [&](ReplayRow& r) { return replay(r); });
  }

  // A replay of the input's system `r.system_id` (of its run, when known), in the output's ids; a
  // replay naming a system the input does not have is not merged.
  Status replay(ReplayRow r) {
    const auto sys = system_.find(r.system_id);
    if (sys == system_.end()) return {};
    r.system_id = sys->second;
    if (r.run_id) {
      const auto run = run_.find(*r.run_id);
      r.run_id = run == run_.end() ? std::nullopt : std::optional<int64_t>(run->second);
    }
    FL_ASSIGN_OR_RETURN(const int c, out_.upsert_replay(r));
    summary.replays_changed += c;
    return {};
  }

  Status system_peaks() {
    FL_ASSIGN_OR_RETURN(const bool has, in_has("system_peaks"));
    if (!has) return {};
    return for_each_row<SystemPeakRow>(in_, system_peaks_table(), "", {}, [&](SystemPeakRow& p) -> Status {
      p.system_id = system_.at(p.system_id);
      return out_.upsert_system_peak(p);
    });
  }

  // (v10) A case's cache-state times, in the output's ids; a row whose system or case the input
  // does not have is not merged.
  Status cache_times() {
    FL_ASSIGN_OR_RETURN(const bool has, in_has("cache_times"));
    if (!has) return {};
    return for_each_row<CacheTimeRow>(in_, cache_times_table(), "", {}, [&](CacheTimeRow& r) -> Status {
      const auto sys = system_.find(r.system_id);
      const auto c = case_.find(r.case_id);
      if (sys == system_.end() || c == case_.end()) return {};
      r.system_id = sys->second;
      r.case_id = c->second;
      FL_TRY(out_.upsert_cache_time(r));
      summary.cache_times_changed += o_.conn.changes();
      return {};
    });
  }

  Database& out_;
  Database& in_;
  Database::Impl& o_;
  std::unordered_map<int64_t, int64_t> system_, run_, model_, config_, case_;
  std::unordered_set<int64_t> preexisting_runs_;
  std::unordered_map<int64_t, std::unordered_set<int64_t>> run_cases_;
  std::unordered_map<int64_t, RunOrder> run_order_;
};

}  // namespace

Result<MergeSummary> merge_into(Database& out, const std::string& input) {
  std::error_code ec;
  if (std::filesystem::equivalent(out.path(), input, ec))
    return make_error("{}: cannot merge a database into itself", input);
  OpenOptions ro;
  ro.read_only = true;
  ro.allow_older_schema = true;  // an input is read as it is, never upgraded
  FL_ASSIGN_OR_RETURN(Database in, Database::open(input, ro));
  Merger m(out, in);
  auto st = out.transaction([&]() { return m.run(); });
  if (!st) return st.error().with_context(fmt::format("merging {}", input));
  return m.summary;
}

}  // namespace floorline::benchdb
