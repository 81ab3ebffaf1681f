#include "db_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coverage_command.hpp"
#include "floorline/benchdb/benchmark_io.hpp"
#include "floorline/benchdb/campaign.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/benchdb/framework_io.hpp"
#include "floorline/benchdb/merge.hpp"
#include "floorline/common/output.hpp"
#include "reference_stage.hpp"
#include "validate.hpp"

namespace floorline::cli {

using namespace floorline::output;  // NOLINT: the output helpers are this layer's vocabulary
namespace {

namespace bd = benchdb;

struct DbOptions {
  std::string file;
  std::string format = "table";
  std::string out = "-";
  // query
  std::string sql;
  bool best = false, unique = false, framework_table = false, runs = false, algorithms = false, raced = false;
  std::string model;
  int64_t batch = 1;
  int64_t system = 0;
  int64_t max_rows = 100000;
  double timeout = 300;
  // merge
  std::vector<std::string> inputs;
  // import
  std::string framework;
  std::string benchmark_json;
  std::string framework_profile;  // (v6) measure.js output: per-node profiles mapped to layers
  std::string input_format;
  bool force = false;
};

int fail(const std::string& what, const std::string& message) {
  std::fprintf(stderr, "floorline db %s: %s\n", what.c_str(), message.c_str());
  return 1;
}

// The output, every write checked; --out naming the database itself is refused.
int write_output(const char* what, const DbOptions& o, const std::string& text) {
  if (auto st = check_out_not_input(o.out, {o.file}); !st) {
    fail(what, st.error().message);
    return 2;
  }
  if (auto st = write_checked(o.out, text); !st) return fail(what, st.error().message);
  return 0;
}

// Values from the database may hold any bytes: invalid UTF-8 becomes U+FFFD, never an exception.
std::string json_text(const nlohmann::json& j) {
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string render(const bd::QueryResult& r, const std::string& format) {
  if (format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& row : r.rows) {
      nlohmann::json obj = nlohmann::json::object();
      for (size_t k = 0; k < r.columns.size(); ++k) obj[r.columns[k]] = bd::value_json(row[k]);
      arr.push_back(std::move(obj));
    }
    return json_text(arr);
  }
  if (format == "csv") {
    std::string out;
    for (size_t k = 0; k < r.columns.size(); ++k) out += (k ? "," : "") + csv_escape(r.columns[k]);
    out += '\n';
    for (const auto& row : r.rows) {
      for (size_t k = 0; k < row.size(); ++k) out += (k ? "," : "") + csv_escape(bd::value_text(row[k]));
      out += '\n';
    }
    return out;
  }
  std::vector<std::vector<Cell>> cells;
  for (const auto& row : r.rows) {
    std::vector<Cell> line;
    for (const auto& v : row) {
      const bool num = std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
      line.push_back(Cell{bd::value_text(v), bd::value_json(v), num});
    }
    cells.push_back(std::move(line));
  }
  return table(r.columns, cells);
}

// The read commands open read-only: nothing created, upgraded or written (an older schema is
// refused with a message naming `floorline db migrate`).
Result<bd::Database> open_for_reading(const std::string& path) {
  bd::OpenOptions ro;
  ro.read_only = true;
  return bd::Database::open(path, ro);
}

int run_info(const DbOptions& o) {
  auto db = open_for_reading(o.file);
  if (!db) return fail("info", db.error().message);
  std::string text;
  auto q = [&](const char* title, const std::string& sql) -> bool {
    auto r = db->query(sql);
    if (!r) {
      fail("info", r.error().message);
      return false;
    }
    if (o.format == "table") text += fmt::format("\n{}\n{}", title, render(*r, "table"));
    return true;
  };
  nlohmann::json j;
  j["path"] = o.file;
  j["schema_version"] = db->schema_version();
  j["opened_at_version"] = db->opened_at_version();
  std::error_code ec;
  j["file_bytes"] = std::filesystem::file_size(o.file, ec);
  const std::string counts_sql =
      "SELECT (SELECT count(*) FROM systems) AS systems, (SELECT count(*) FROM runs) AS runs, "
      "(SELECT count(*) FROM models) AS models, (SELECT count(*) FROM layer_configs) AS configs, "
      "(SELECT count(*) FROM model_layers) AS model_layers, (SELECT count(*) FROM cases) AS cases, "
      "(SELECT count(*) FROM measurements) AS measurements, "
      "(SELECT count(*) FROM framework_latencies) AS framework_latencies, (SELECT count(*) FROM replays) AS "
      "replays, (SELECT count(*) FROM framework_layer_times) AS framework_layer_times";
  // The ISA cap ('' for none) from schema 9 on; an older file opened as it is has no column.
  const std::string systems_sql = fmt::format(
      "SELECT id, device_kind, device_name, threads, {} AS isa, cpu_flags, libraries, driver_version, "
      "floorline_version, fingerprint FROM systems ORDER BY id",
      db->schema_version() >= 9 ? "isa" : "''");
  const std::string runs_sql =
      "SELECT run_id, system_id, host_name, started_at, status, measurements, passed, skipped, unsupported, "
      "failed "
      "FROM run_summary ORDER BY run_id";
  const std::string status_sql =
      "SELECT system_id, status, SUM(superseded = 0) AS current, SUM(superseded = 1) AS superseded "
      "FROM measurements GROUP BY system_id, status ORDER BY system_id, status";
  if (o.format == "table") {
    text +=
        fmt::format("{}: Floorline results database, schema {}{}, {:.1f} MiB\n", o.file, db->schema_version(),
                    db->opened_at_version() < db->schema_version()
                        ? fmt::format(" (upgraded from {})", db->opened_at_version())
                        : "",
                    static_cast<double>(j["file_bytes"].get<uint64_t>()) / 1048576.0);
    if (!q("Counts", counts_sql) || !q("Systems", systems_sql) || !q("Runs", runs_sql) ||
        !q("Measurements by status", status_sql))
      return 1;
  } else if (o.format == "csv") {
    auto r = db->query(counts_sql);
    if (!r) return fail("info", r.error().message);
    text = render(*r, "csv");
  } else {
    for (const auto& [name, sql] : {std::pair{"counts", counts_sql},
                                    {"systems", systems_sql},
                                    {"runs", runs_sql},
                                    {"measurements_by_status", status_sql}}) {
      auto r = db->query(sql);
      if (!r) return fail("info", r.error().message);
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& row : r->rows) {
        nlohmann::json obj = nlohmann::json::object();
        for (size_t k = 0; k < r->columns.size(); ++k) obj[r->columns[k]] = bd::value_json(row[k]);
        rows.push_back(std::move(obj));
      }
      j[name] = std::move(rows);
    }
    text = json_text(j);
  }
  return write_output("info", o, text);
}

int run_query(const DbOptions& o) {
  const int canned = (o.best ? 1 : 0) + (o.unique ? 1 : 0) + (o.framework_table ? 1 : 0) + (o.runs ? 1 : 0) +
                     (o.algorithms ? 1 : 0) + (o.raced ? 1 : 0) + (o.model.empty() ? 0 : 1) +
                     (o.sql.empty() ? 0 : 1);
  if (canned != 1) {
    std::fprintf(stderr,
                 "floorline db query: give exactly one of SQL, --best, --model, --unique, --runs, "
                 "--algorithms, --raced, --framework\n");
    return 2;
  }
  auto db = open_for_reading(o.file);
  if (!db) return fail("query", db.error().message);
  std::string sql = o.sql;
  std::vector<bd::SqlValue> params;
  const std::string system_filter = o.system ? " WHERE system_id = ?1" : "";
  if (o.system) params.push_back(o.system);
  if (o.best) {
    sql =
        "SELECT system_id, kind, key, dtype, math_mode, fusion, backend, algorithm, layout, median_us, "
        "gflops, "
        "case_uid FROM best_cases" +
        system_filter + " ORDER BY system_id, kind, key, math_mode, fusion";
  } else if (o.algorithms) {
    // Algorithm selection per kind: which algorithm is fastest how often, and what the library's
    // default (its heuristic's choice) costs against the best, unfused cases only; both by the
    // per-case time S takes (the lowest repetition mean, the best case's criterion).
    sql =
        "WITH best AS (SELECT system_id, config_id, kind, dtype, math_mode, backend, algorithm, "
        "  coalesce(min_us, median_us) AS median_us FROM best_cases WHERE fusion = ''), "
        "dflt AS (SELECT system_id, config_id, dtype, math_mode, min(coalesce(min_us, median_us)) AS us "
        "FROM default_cases "
        "  WHERE fusion = '' AND status = 'passed' GROUP BY system_id, config_id, dtype, math_mode) "
        "SELECT best.system_id, best.backend, best.kind, best.dtype, best.math_mode, best.algorithm AS "
        "best_algorithm, "
        "  count(*) AS configs, round(sum(best.median_us), 1) AS best_us, round(sum(dflt.us), 1) AS "
        "default_us, "
        "  sum(dflt.us > 1.05 * best.median_us) AS default_slower, "
        "  round(100.0 * (sum(dflt.us) / sum(CASE WHEN dflt.us IS NOT NULL THEN best.median_us END) - 1), 1) "
        "AS default_gap_pct "
        "FROM best LEFT JOIN dflt USING (system_id, config_id, dtype, math_mode)" +
        std::string(o.system ? " WHERE best.system_id = ?1" : "") +
        " GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, configs DESC";
  } else if (o.raced) {
    // How close each raced-out candidate came (docs/MEASUREMENT.md, "Racing"): the reading it was
    // dropped on against its group's best case now, closest first.
    sql =
        "SELECT m.system_id, lc.kind, lc.key, c.dtype, c.math_mode, c.fusion, c.backend, c.algorithm, "
        "c.layout, "
        "  m.min_us AS raced_us, coalesce(b.min_us, b.median_us) AS best_us, "
        "  round(m.min_us / coalesce(b.min_us, b.median_us), 3) AS over_best, "
        "  b.backend AS best_backend, b.algorithm AS best_algorithm, m.reason "
        "FROM measurements m JOIN cases c ON c.id = m.case_id JOIN layer_configs lc ON lc.id = c.config_id "
        "LEFT JOIN best_cases b ON b.config_id = c.config_id AND b.system_id = m.system_id "
        "  AND b.dtype = c.dtype AND b.math_mode = c.math_mode AND b.fusion = c.fusion "
        "WHERE m.superseded = 0 AND m.status = 'skipped' AND m.reason LIKE 'raced out:%'" +
        std::string(o.system ? " AND m.system_id = ?1" : "") +
        " ORDER BY m.system_id, over_best IS NULL, over_best, lc.kind, lc.key";
  } else if (o.unique) {
    sql =
        "SELECT kind, key, dtype, flops, bytes, multiplicity, models, model_names FROM unique_configs "
        "ORDER BY kind, key";
  } else if (o.runs) {
    sql = "SELECT * FROM run_summary" + system_filter + " ORDER BY run_id";
  } else if (o.framework_table) {
    sql =
        "SELECT model_name, runtime, runtime_version, device, batch, dtype, settings, threads, median_us, "
        "min_us, max_us, stddev_us, repetitions, measured_at FROM framework_latencies "
        "ORDER BY model_name, runtime, batch";
  } else if (!o.model.empty()) {
    // The per-layer table of one model at one batch size, with the best case of each layer on
    // one system (the only one, or --system).
    int64_t system = o.system;
    if (!system) {
      auto s = db->query("SELECT DISTINCT system_id FROM measurements");
      if (!s) return fail("query", s.error().message);
      if (s->rows.size() > 1) {
        std::fprintf(stderr,
                     "floorline db query: %s has measurements from %zu systems; pick one with --system\n",
                     o.file.c_str(), s->rows.size());
        return 2;
      }
      if (s->rows.size() == 1) system = std::get<int64_t>(s->rows[0][0]);
    }
    sql =
        "SELECT ml.node_index, ml.node_name, ml.cost_class, lc.kind, lc.key, lc.flops, lc.bytes, ml.preds, "
        "b.algorithm AS best_algorithm, b.median_us AS best_us "
        "FROM model_layers ml JOIN models mo ON mo.id = ml.model_id "
        "JOIN layer_configs lc ON lc.id = ml.config_id "
        "LEFT JOIN best_cases b ON b.config_id = ml.config_id AND b.system_id = ?3 AND b.dtype = lc.dtype "
        "AND b.math_mode = 'fp32' AND b.fusion = '' "
        "WHERE mo.name = ?1 AND ml.batch = ?2 ORDER BY ml.node_index";
    params = {o.model, o.batch, system};
    auto exists = db->query(
        "SELECT count(*) FROM model_layers ml JOIN models mo ON mo.id = ml.model_id "
        "WHERE mo.name = ?1 AND ml.batch = ?2",
        {o.model, o.batch});
    if (!exists) return fail("query", exists.error().message);
    if (std::get<int64_t>(exists->rows[0][0]) == 0)
      return fail("query", fmt::format("{}: no model named {} at batch {} (record it with `floorline layers "
                                       "MODEL --batch {} --db {}`)",
                                       o.file, o.model, o.batch, o.batch, o.file));
  }
  bd::QueryLimits limits;
  limits.max_rows = o.max_rows;
  limits.max_bytes = int64_t{1} << 30;
  limits.timeout_seconds = o.timeout;
  auto r = db->query(sql, params, limits);
  if (!r) return fail("query", r.error().message);
  return write_output("query", o, render(*r, o.format));
}

int merge_inputs(const std::vector<std::string>& inputs, bd::Database& out);

// The inputs are merged into a temporary file beside OUT (a copy of OUT when it exists), renamed
// over OUT only when every input merged: a failed merge leaves OUT as it was, and creates nothing
// where there was nothing.
int run_merge(const DbOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Folders and globs stand for the shard files of a campaign (benchdb/campaign.hpp).
  auto inputs = bd::expand_merge_inputs(o.inputs, o.file);
  if (!inputs) return fail("merge", inputs.error().message);
  for (const auto& in : *inputs)
    if (fs::equivalent(o.file, in, ec)) {
      fail("merge", fmt::format("{}: cannot merge a database into itself", in));
      return 2;
    }
  const fs::path out_path(o.file);
  if (fs::is_directory(out_path, ec)) {
    fail("merge", fmt::format("{}: is a directory, not a database file", o.file));
    return 2;
  }
  const fs::path tmp =
      out_path.parent_path() / fmt::format(".{}.merging-{}", out_path.filename().string(), ::getpid());
  auto remove_tmp = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(tmp.string() + suffix, ec);
  };
  int failed = 0;
  {
    if (fs::exists(out_path, ec)) {
      auto current = open_for_writing("db merge", o.file);  // a write command: an older OUT is upgraded
      if (!current) return fail("merge", current.error().message);
      if (auto st = current->query("VACUUM INTO ?1", {tmp.string()}); !st) {
        remove_tmp();
        return fail("merge",
                    fmt::format("cannot copy {} to {}: {}", o.file, tmp.string(), st.error().message));
      }
    }
    auto out = bd::Database::open(tmp);
    if (!out) {
      remove_tmp();
      return fail("merge", out.error().message);
    }
    failed = merge_inputs(*inputs, *out);
  }
  if (failed) {
    remove_tmp();
    return fail("merge", fmt::format("{} of {} input(s) could not be merged; {} is left as it was", failed,
                                     inputs->size(), o.file));
  }
  fs::rename(tmp, out_path, ec);
  if (ec) {
    remove_tmp();
    return fail("merge", fmt::format("cannot rename {} to {}: {}", tmp.string(), o.file, ec.message()));
  }
  if (inputs->size() > 1)
    std::printf("merged %zu of %zu databases into %s\n", inputs->size(), inputs->size(), o.file.c_str());
  return 0;
}

int run_migrate(const DbOptions& o) {
  std::error_code ec;
  if (!std::filesystem::exists(o.file, ec)) {
    fail("migrate", fmt::format("{}: no such database", o.file));
    return 2;
  }
  auto db = open_for_writing("db migrate", o.file);
  if (!db) return fail("migrate", db.error().message);
  if (db->opened_at_version() < db->schema_version())
    std::printf("%s: upgraded from schema %d to %d\n", o.file.c_str(), db->opened_at_version(),
                db->schema_version());
  else
    std::printf("%s: already at schema %d\n", o.file.c_str(), db->schema_version());
  return 0;
}

// Merges every input into `out`; returns how many failed (each reported on stderr).
int merge_inputs(const std::vector<std::string>& inputs, bd::Database& out) {
  int failed = 0;
  for (const auto& in : inputs) {
    auto s = bd::merge_into(out, in);
    if (!s) {
      fail("merge", s.error().message);
      ++failed;
      continue;
    }
    std::printf(
        "%s: +%lld systems, +%lld runs, +%lld configs, +%lld cases, +%lld measurements "
        "(%lld already present), %lld framework latencies changed, %lld replays changed, %lld cache "
        "times changed\n",
        in.c_str(), static_cast<long long>(s->systems_added), static_cast<long long>(s->runs_added),
        static_cast<long long>(s->configs_added), static_cast<long long>(s->cases_added),
        static_cast<long long>(s->measurements_added), static_cast<long long>(s->measurements_present),
        static_cast<long long>(s->framework_latencies_changed), static_cast<long long>(s->replays_changed),
        static_cast<long long>(s->cache_times_changed));
  }
  return failed;
}

// --framework-profile (with or without --framework): the reference runtime's per-layer profiles.
int run_import_profiles(const DbOptions& o) {
  auto db = open_for_writing("db import", o.file);
  if (!db) return fail("import", db.error().message);
  if (!o.framework.empty()) {
    auto s = bd::import_framework_latencies(*db, o.framework, o.input_format);
    if (!s) return fail("import", s.error().message);
    std::printf("%s: %lld framework latencies, %lld inserted or changed\n", o.framework.c_str(),
                static_cast<long long>(s->rows), static_cast<long long>(s->changed));
  }
  auto p = import_framework_profiles(*db, o.framework_profile);
  if (!p) return fail("import", p.error().message);
  std::printf(
      "%s: %lld profile(s), %lld runtime nodes stored, %lld layers mapped, %lld folded or removed by the "
      "runtime\n",
      o.framework_profile.c_str(), static_cast<long long>(p->profiles), static_cast<long long>(p->rows),
      static_cast<long long>(p->mapped_layers), static_cast<long long>(p->not_run_layers));
  return 0;
}

int run_import(const DbOptions& o) {
  if (!o.framework_profile.empty() && o.benchmark_json.empty()) return run_import_profiles(o);
  if (o.framework.empty() == o.benchmark_json.empty()) {
    std::fprintf(stderr, "floorline db import: give one of --framework FILE or --benchmark-json FILE\n");
    return 2;
  }
  auto db = open_for_writing("db import", o.file);
  if (!db) return fail("import", db.error().message);
  if (!o.framework.empty()) {
    auto s = bd::import_framework_latencies(*db, o.framework, o.input_format);
    if (!s) return fail("import", s.error().message);
    std::printf("%s: %lld framework latencies, %lld inserted or changed\n", o.framework.c_str(),
                static_cast<long long>(s->rows), static_cast<long long>(s->changed));
    return 0;
  }
  bd::WriterOptions w;
  w.force = o.force;
  auto s = bd::import_benchmark_json(*db, o.benchmark_json, w);
  if (!s) return fail("import", s.error().message);
  std::printf(
      "%s: %lld benchmarks, %lld measurements stored, %lld already measured, %lld names not "
      "Floorline cases, %lld new configs (system %lld, run %lld)\n",
      o.benchmark_json.c_str(), static_cast<long long>(s->benchmarks), static_cast<long long>(s->stored),
      static_cast<long long>(s->already_measured), static_cast<long long>(s->skipped_names),
      static_cast<long long>(s->new_configs), static_cast<long long>(s->system_id),
      static_cast<long long>(s->run_id));
  return 0;
}

}  // namespace

void add_db_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<DbOptions>();
  auto* db = app.add_subcommand("db", "Inspect, query, merge and import into results databases");
  db->require_subcommand(1);
  auto formats = CLI::IsMember({"table", "json", "csv"});

  auto* info = db->add_subcommand(
      "info", "Schema, systems, runs, and counts of models, configs, cases and measurements");
  info->add_option("file", opts->file, "Results database")->required();
  info->add_option("--format", opts->format, "Output format")->check(formats);
  info->add_option("--out", opts->out, "Write the output to this file ('-' for standard output)");
  info->callback([opts, &exit_code] { exit_code = run_info(*opts); });

  auto* query = db->add_subcommand("query", "Canned queries, or any read-only SQL");
  query->add_option("file", opts->file, "Results database")->required();
  query->add_option("sql", opts->sql, "One SQL statement, run on a read-only connection");
  query->add_flag("--best", opts->best, "The fastest passed case of every config on every system");
  query->add_option("--model", opts->model, "Per-layer table of this model, with each layer's best case");
  query->add_option("--batch", opts->batch, "Batch size for --model")
      ->check(int_in(1, kMaxBatch, "batch size"));
  query
      ->add_option("--system", opts->system,
                   "Only this system id (--best, --runs, --model, --algorithms, --raced)")
      ->check(int_in(1, INT64_MAX, "system id"));
  query
      ->add_option(
          "--max-rows", opts->max_rows,
          "Refuse a result of more rows than this (default 100000); results are also capped at 1 GiB")
      ->check(int_in(1, kMaxQueryRows, "rows"));
  query
      ->add_option("--timeout", opts->timeout,
                   "Stop a query that runs longer than this (seconds, default 300)")
      ->check(real_in(0, 86400, "seconds", true));
  query->add_flag(
      "--algorithms", opts->algorithms,
      "Per kind and math mode: how often each algorithm is the fastest, and the default's gap to the best");
  query->add_flag("--raced", opts->raced,
                  "Every raced-out case: the time it was dropped on against its group's best, closest first");
  query->add_flag("--unique", opts->unique, "Unique layer configs with their multiplicity across models");
  query->add_flag("--runs", opts->runs, "Runs with their measurement counts by status");
  query->add_flag("--framework", opts->framework_table, "Imported framework latencies");
  query->add_option("--format", opts->format, "Output format")->check(formats);
  query->add_option("--out", opts->out, "Write the output to this file ('-' for standard output)");
  query->callback([opts, &exit_code] { exit_code = run_query(*opts); });

  auto* migrate = db->add_subcommand(
      "migrate", "Upgrade a database of an older schema in place (the read commands refuse older files)");
  migrate->add_option("file", opts->file, "Results database")->required();
  migrate->callback([opts, &exit_code] { exit_code = run_migrate(*opts); });

  auto* merge = db->add_subcommand("merge", "Merge databases measured on different machines into OUT");
  merge->add_option("out", opts->file, "Output database (created when missing)")->required();
  merge
      ->add_option("inputs", opts->inputs,
                   "Input databases; a folder stands for its *.db files, a quoted glob for the files it "
                   "matches (e.g. 'results/shard-*.db')")
      ->required();
  merge->callback([opts, &exit_code] { exit_code = run_merge(*opts); });

  add_coverage_command(*db, exit_code);

  auto* import = db->add_subcommand("import", "Import framework latencies or Google Benchmark JSON results");
  import->add_option("file", opts->file, "Results database (created when missing)")->required();
  import->add_option("--framework", opts->framework,
                     "Framework latencies (JSON or CSV) for the latency-gap report");
  import->add_option("--framework-profile", opts->framework_profile,
                     "Per-node runtime profiles listed in a reference/onnxruntime/measure.js output file, "
                     "mapped to the models' layers");
  import->add_option("--benchmark-json", opts->benchmark_json,
                     "Google Benchmark JSON output of Floorline cases");
  import
      ->add_option("--input-format", opts->input_format,
                   "Format of --framework (default: from the extension)")
      ->check(CLI::IsMember({"json", "csv"}));
  import->add_flag("--force", opts->force, "Store benchmark results even for cases already measured");
  import->callback([opts, &exit_code] { exit_code = run_import(*opts);
});
}  // namespace floorline::cli

}  // namespace floorline::cli
