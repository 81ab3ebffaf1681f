// floorline db coverage: which planned cases a (merged) database lacks, and which shard they
// belong to.
#include "coverage_command.hpp"

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "bench_command.hpp"
#include "floorline/benchdb/campaign.hpp"
#include "floorline/benchdb/database.hpp"
#include "floorline/generator/shard.hpp"

namespace floorline::cli {

namespace {

namespace fs = std::filesystem;

struct CoverageCmd {
  std::string db;
  CommonOptions c;
  std::optional<int64_t> system;
  int shards = 0;  // 0: the count the database's shard runs name
  bool list = false;
};

std::string shard_costs_of(const benchdb::ShardRun& r) {
  const auto j = nlohmann::json::parse(r.options, nullptr, false);
  return j.is_object() ? j.value("shard_costs", std::string()) : std::string();
}

int run_coverage(CoverageCmd o) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "floorline db coverage: %s\n", msg.c_str());
    return 2;
  };
  std::error_code ec;
  if (!fs::exists(o.db, ec)) return fail(o.db + ": no such file");
  benchdb::OpenOptions ro;
  ro.read_only = true;
  auto db = benchdb::Database::open(o.db, ro);
  if (!db) return fail(db.error().message);
  auto loaded = plan_models(o.c);
  if (!loaded) return fail(loaded.error().message);
  const Loaded& l = *loaded;
  std::vector<std::string> names;
  for (const auto& c : l.plan.cases) names.push_back(c.spec.name);
  auto cov = benchdb::coverage(*db, names, o.system);
  if (!cov) return fail(cov.error().message);
  auto runs = benchdb::shard_runs(*db);
  if (!runs) return fail(runs.error().message);

  std::string statuses;
  for (const auto& [s, n] : cov->by_status)
    statuses += fmt::format("{}{} {}", statuses.empty() ? "" : ", ", n, s);
  std::printf("%s: %lld of %lld planned cases have a result (%s); %zu missing\n", o.db.c_str(),
              static_cast<long long>(cov->planned - static_cast<int64_t>(cov->missing.size())),
              static_cast<long long>(cov->planned), statuses.empty() ? "none" : statuses.c_str(),
              cov->missing.size());
  if (cov->on_several_systems)
    std::printf("%lld cases have results on more than one system (pick one with --system)\n",
                static_cast<long long>(cov->on_several_systems));

  // The shard layout: N from --shards or from the shard runs, the earlier database from the runs.
  std::set<int> counts;
  for (const auto& r : *runs)
    if (auto s = gen::parse_shard(r.shard)) counts.insert(s->count);
  int count = o.shards;
  if (count == 0 && counts.size() == 1) count = *counts.begin();
  if (count == 0 && counts.size() > 1)
    std::printf("the shard runs name %zu different shard counts: give --shards N for a per-shard report\n",
                counts.size());
  // The earlier database the shards' costs came from: --shard-costs, else the one their runs name.
  std::string costs_file = o.c.shard_costs;
  for (const auto& r : *runs)
    if (auto s = gen::parse_shard(r.shard); s && s->count == count && costs_file.empty())
      costs_file = shard_costs_of(r);
  std::error_code missing_ec;
  if (count > 0 && o.c.shard_costs.empty() && !costs_file.empty() && !fs::exists(costs_file, missing_ec)) {
    // Not on this machine: the shards' layout cannot be recomputed.
    std::printf("no per-shard report: the shards' --shard-costs %s is not here (give --shard-costs FILE)\n",
                costs_file.c_str());
    count = 0;
  }
  if (count > 0) {
    auto layout = shard_layout(l, count, costs_file);
    if (!layout) return fail(layout.error().message);
    std::map<std::string, int> shard_of;
    for (size_t k = 0; k < names.size(); ++k) shard_of[names[k]] = layout->partition.shard_of[k];
    std::vector<int64_t> missing(static_cast<size_t>(count), 0);
    for (const auto& n : cov->missing) ++missing[static_cast<size_t>(shard_of.at(n))];
    // The runs of each shard, and whether their cases are where this layout puts them (they are
    // not when the shards were planned with other settings).
    std::map<int, std::vector<const benchdb::ShardRun*>> by_shard;
    int64_t misplaced = 0;
    for (const auto& r : *runs) {
      auto s = gen::parse_shard(r.shard);
      if (!s || s->count != count) continue;
      by_shard[s->index].push_back(&r);
      for (const auto& n : r.measured)
        if (auto it = shard_of.find(n); it != shard_of.end() && it->second != s->index) ++misplaced;
    }
    for (int s = 0; s < count; ++s) {
      const gen::ShardSpec spec{s, count};
      const int64_t planned = layout->partition.cases[static_cast<size_t>(s)];
      const int64_t lacking = missing[static_cast<size_t>(s)];
      std::string how;
      for (const auto* r : by_shard[s])
        how += fmt::format("{}run {} on {} {}", how.empty() ? "" : ", ", r->run_id, r->host_name, r->status);
      if (lacking == 0) {
        std::printf("shard %s: complete, %lld cases (%s)\n", gen::shard_label(spec).c_str(),
                    static_cast<long long>(planned), how.empty() ? "no shard run recorded" : how.c_str());
      } else if (by_shard[s].empty()) {
        std::printf(
            "shard %s: %lld of %lld cases missing: no run of this shard in %s (its database is missing "
            "or was not merged)\n",
            gen::shard_label(spec).c_str(), static_cast<long long>(lacking), static_cast<long long>(planned),
            o.db.c_str());
      } else {
        std::printf("shard %s: %lld of %lld cases missing (%s): rerun the shard, it resumes\n",
                    gen::shard_label(spec).c_str(), static_cast<long long>(lacking),
                    static_cast<long long>(planned), how.c_str());
      }
    }
    if (misplaced)
      std::printf(
          "warning: %lld measured cases lie in another shard than this layout puts them: the shards were "
          "planned with other options (give the same --batch, --dtype, --max-impls... and --shard-costs)\n",
          static_cast<long long>(misplaced));
  }
  if (o.list)
    for (const auto& n : cov->missing) std::printf("missing %s\n", n.c_str());
  return cov->complete() ? 0 : 1;
}

}  // namespace

void add_coverage_command(CLI::App& db, int& exit_code) {
  auto o = std::make_shared<CoverageCmd>();
  auto* c =
      db.add_subcommand("coverage",
                        "Which cases of the plan of MODELS have no result in DB (exit status 1 when any), "
                        "by shard when the database holds shard runs");
  c->add_option("db", o->db, "Results database (e.g. merged from the shards)")->required();
  c->add_option("models", o->c.models, "ONNX files or folders, as given to bench")->required();
  add_plan_options(c, o->c);
  c->add_option("--system", o->system, "Only results on this system id (default: any system)");
  c->add_option("--shards", o->shards,
                "The shard count N of the campaign (default: the one its shard runs recorded)")
      ->check(CLI::PositiveNumber);
  c->add_option("--shard-costs", o->c.shard_costs,
                "The earlier database the shards' costs came from (default: the one their runs recorded)");
  c->add_flag("--list", o->list, "Name every missing case");
  c->callback([o, &exit_code] { exit_code = run_coverage(*o); });
}

}  // namespace floorline::cli
