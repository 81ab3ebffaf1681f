#include "floorline/benchdb/campaign.hpp"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>

namespace floorline::benchdb {

namespace fs = std::filesystem;

namespace {

bool is_pattern(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

Result<std::vector<std::string>> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t k = 0; k < g.gl_pathc; ++k) out.emplace_back(g.gl_pathv[k]);
  globfree(&g);
  if (rc == GLOB_NOMATCH) return make_error("{}: matches no file", pattern);
  if (rc != 0) return make_error("{}: cannot be expanded (glob error {})", pattern, rc);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<std::vector<std::string>> expand_merge_inputs(const std::vector<std::string>& inputs,
                                                     const std::string& out) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path out_path = fs::weakly_canonical(out, ec);
  // A file named twice is merged twice, which adds nothing the second time.
  auto add = [&](const std::string& f) {
    std::error_code e;
    fs::path p = fs::weakly_canonical(f, e);
    if (e) p = fs::absolute(f, e);
    if (p != out_path) files.push_back(f);  // OUT into itself: never meant by a folder or a glob
  };
  for (const auto& in : inputs) {
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in, ec))
        if (e.is_regular_file() && e.path().extension() == ".db") found.push_back(e.path().string());
      if (ec) return make_error("{}: cannot list the folder: {}", in, ec.message());
      if (found.empty()) return make_error("{}: the folder has no .db file", in);
      std::sort(found.begin(), found.end());
      for (const auto& f : found) add(f);
    } else if (!fs::exists(in, ec) && is_pattern(in)) {
      FL_ASSIGN_OR_RETURN(auto found, glob_files(in));
      for (const auto& f : found) add(f);
    } else {
      add(in);
    }
  }
  return files;
}

Result<Coverage> coverage(Database& db, const std::vector<std::string>& planned,
                          std::optional<int64_t> system) {
  // name → (status of each current measurement), over the chosen systems.
  std::unordered_map<std::string, std::vector<std::string>> current;
  const std::string sql =
      "SELECT c.name, m.status FROM measurements m JOIN cases c ON c.id = m.case_id WHERE m.superseded = 0" +
      std::string(system ? " AND m.system_id = ?1" : "");
  std::vector<SqlValue> params;
  if (system) params.emplace_back(*system);
  FL_TRY(db.for_each(sql, params, [&](const auto&, const std::vector<SqlValue>& v) -> Status {
    current[value_text(v[0])].push_back(value_text(v[1]));
    return {};
  }));
  Coverage out;
  out.planned = static_cast<int64_t>(planned.size());
  for (const auto& name : planned) {
    auto it = current.find(name);
    if (it == current.end()) {
      out.missing.push_back(name);
      continue;
    }
    for (const auto& s : it->second) ++out.by_status[s];
    if (it->second.size() > 1) ++out.on_several_systems;
  }
  return out;
}

Result<std::vector<ShardRun>> shard_runs(Database& db) {
  std::vector<ShardRun> out;
  std::unordered_map<int64_t, size_t> index;
  FL_TRY(
      db.for_each("SELECT id, json_extract(options, '$.shard'), status, host_name, options FROM runs "
                  "WHERE json_extract(options, '$.shard') IS NOT NULL ORDER BY id",
                  {}, [&](const auto&, const std::vector<SqlValue>& v) -> Status {
                    ShardRun r;
                    r.run_id = std::get<int64_t>(v[0]);
                    r.shard = value_text(v[1]);
                    r.status = value_text(v[2]);
                    r.host_name = value_text(v[3]);
                    r.options = value_text(v[4]);
                    index[r.run_id] = out.size();
                    out.push_back(std::move(r));
                    return {};
                  }));
  if (out.empty()) return out;
  FL_TRY(
      db.for_each("SELECT m.run_id, c.name FROM measurements m JOIN cases c ON c.id = m.case_id "
                  "JOIN runs r ON r.id = m.run_id WHERE json_extract(r.options, '$.shard') IS NOT NULL "
                  "ORDER BY m.id",
                  {}, [&](const auto&, const std::vector<SqlValue>& v) -> Status {
                    auto it = index.find(std::get<int64_t>(v[0]));
                    if (it != index.end()) out[it->second].measured.push_back(value_text(v[1]));
                    return {};
                  }));
  return out;
}

}  // namespace floorline::benchdb
