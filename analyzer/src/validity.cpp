// The validity check (validity.hpp) and its parts of the reports (report.hpp).
#include "floorline/analyzer/validity.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/analyzer/report.hpp"
#include "floorline/analyzer/runtime_layers.hpp"
#include "floorline/common/case_id.hpp"
#include "floorline/common/output.hpp"
#include "html_text.hpp"
#include "report_parts.hpp"

namespace floorline::analyzer {

std::string BoundViolation::source() const {
  if (replay) return "replay";
  std::string s = runtime;
  if (!runtime_version.empty()) s += " " + runtime_version;
  if (!settings.empty()) s += " " + settings;
  if (threads > 0) s += fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s");
  return s;
}

BoundCheck check_bound(const ModelBounds& b, const CostTable& costs) {
  BoundCheck check;
  if (b.S <= 0) return check;
  auto violation = [&](double us) {
    BoundViolation v;
    v.model = b.model;
    v.batch = b.batch;
    v.dtype = b.dtype;
    v.latency_us = us;
    v.S_us = b.S;
    v.S_complete = b.complete;
    return v;
  };
  for (const auto& f : b.framework) {
    ++check.latencies;
    if (!(f.us < b.S)) continue;
    BoundViolation v = violation(f.us);
    v.runtime = f.runtime;
    v.runtime_version = f.runtime_version;
    v.settings = f.settings;
    v.threads = f.threads;
    if (const auto c =
            compare_runtime_profile(b, costs, f.runtime, f.runtime_version, f.settings, f.threads)) {
      v.profiled = true;
      // S is the sum of the best cases (unfused but for the activation epilogues): every node below them (a
      // violation or a fusion win) lowers the latency under S. Largest gap first.
      std::vector<size_t> below(c->violations);
      below.insert(below.end(), c->fusion_wins.begin(), c->fusion_wins.end());
      auto gap = [&](size_t k) { return *c->nodes[k].best_us - c->nodes[k].runtime_us; };
      std::stable_sort(below.begin(), below.end(), [&](size_t x, size_t y) { return gap(x) > gap(y); });
      for (size_t k : below) {
        const RuntimeNodeCompare& n = c->nodes[k];
        v.nodes.push_back({n.node, n.op, n.kinds, n.layers, n.runtime_us, *n.best_us, n.best_cases});
        v.nodes_gap_us += gap(k);
      }
    }
    check.violations.push_back(std::move(v));
  }
  if (b.replay) {
    check.replay = true;
    if (*b.replay < b.S) {
      BoundViolation v = violation(*b.replay);
      v.replay = true;
      // The layers faster inside the replayed graph than their case alone (their share of S).
      v.profiled = !b.replay_layers.empty();
      for (const auto& l : b.replay_layers) {
        if (!(l.replay_us < l.case_us)) continue;
        ViolatingNode n{l.layer, l.op, l.op, {l.layer}, l.replay_us, l.case_us, {}};
        const auto cost = std::find_if(b.layers.begin(), b.layers.end(),
                                       [&](const LayerCost& c) { return c.name == l.layer; });
        if (cost != b.layers.end()) {
          n.kinds = cost->kind;
          if (!cost->best_case.empty()) n.best_cases.push_back(cost->best_case);
        }
        v.nodes_gap_us += l.case_us - l.replay_us;
        v.nodes.push_back(std::move(n));
      }
      std::stable_sort(v.nodes.begin(), v.nodes.end(), [](const ViolatingNode& a, const ViolatingNode& c) {
        return a.best_us - a.runtime_us > c.best_us - c.runtime_us;
      });
      check.violations.push_back(std::move(v));
    }
  }
  return check;
}

ValiditySummary validity_summary(const Report& r) {
  ValiditySummary s;
  for (const auto& m : r.models) {
    if (m.bounds.S <= 0) continue;
    ++s.model_batches;
    s.latencies += m.bound_check.latencies;
    s.replays += m.bound_check.replay ? 1 : 0;
    s.violations += static_cast<int64_t>(m.bound_check.violations.size());
    s.violating += m.bound_check.violations.empty() ? 0 : 1;
  }
  return s;
}

namespace {

std::string best_libraries(const ViolatingNode& n) {
  std::vector<std::string> seen;
  for (const auto& c : n.best_cases)
    if (std::find(seen.begin(), seen.end(), backend_and_algorithm(c)) == seen.end())
      seen.push_back(backend_and_algorithm(c));
  std::string s;
  for (const auto& l : seen) s += (s.empty() ? "" : ", ") + l;
  return s;
}

std::string layer_list(const std::vector<std::string>& layers, size_t max = 3) {
  std::string s;
  for (size_t k = 0; k < layers.size() && k < max; ++k) s += (k ? ", " : "") + layers[k];
  if (layers.size() > max) s += fmt::format(" (+{} more)", layers.size() - max);
  return s;
}

std::vector<const BoundViolation*> all_violations(const Report& r) {
  std::vector<const BoundViolation*> out;
  for (const auto& m : r.models)
    for (const auto& v : m.bound_check.violations) out.push_back(&v);
  return out;
}

// Why a violation names no layers.
std::string no_layers_note(const BoundViolation& v) {
  if (v.replay && !v.profiled)
    return "the replay recorded no per-layer times (a replay from before they were kept): some case's time "
           "alone overstates its time in the graph";
  if (v.replay)
    return "no layer is faster in the replayed graph than its case alone: the gap is spread over many "
           "layers, below the profile passes' resolution";
  if (!v.profiled) return "no per-layer profile of this runtime was imported";
  return "no runtime node is faster than the best cases of its layers: the gap is in nodes computing no "
         "timed layer, or spread over many";
}

}  // namespace

std::string validity_line(const Report& r) {
  const ValiditySummary s = validity_summary(r);
  if (s.latencies + s.replays == 0)
    return fmt::format("bound check: no framework latency or replay to compare with S ({} model/batch(es))",
                       s.model_batches);
  if (s.violations == 0)
    return fmt::format(
        "bound check: S holds: no latency below S ({} framework latencies, {} replays, {} model/batch(es))",
        s.latencies, s.replays, s.model_batches);
  std::string worst;
  auto v = all_violations(r);
  std::stable_sort(v.begin(), v.end(),
                   [](const BoundViolation* a, const BoundViolation* b) { return a->ratio() < b->ratio(); });
  for (size_t k = 0; k < v.size() && k < 3; ++k)
    worst += fmt::format("{}{} b{} {} {:.2f}", k ? ", " : "", v[k]->model, v[k]->batch, v[k]->source(),
                         v[k]->ratio());
  return fmt::format(
      "bound check: {} BOUND VIOLATION(S) in {} of {} model/batch(es): a latency below S ({} framework "
      "latencies, "
      "{} replays compared); lowest latency/S: {}{}",
      s.violations, s.violating, s.model_batches, s.latencies, s.replays, worst, v.size() > 3 ? ", ..." : "");
}

std::string validity_table(const Report& r, size_t top) {
  const auto v = all_violations(r);
  if (v.empty()) return "";
  std::string out =
      "\nbound violations (a framework latency or the replay below S: S is no lower bound there; the runtime "
      "nodes faster than the best cases of their layers follow each, and under the replay the layers faster "
      "in the graph than their case alone):\n";
  std::vector<std::string> header = {"model", "batch",  "dtype",        "latency",     "latency_us",
                                     "S_us",  "over_S", "nodes_faster", "nodes_gap_us"};
  std::vector<std::vector<output::Cell>> rows;
  for (const auto* x : v)
    rows.push_back(
        {output::text_cell(x->model), output::int_cell(x->batch), output::text_cell(x->dtype),
         output::text_cell(x->source()), output::float_cell(x->latency_us, 1), output::float_cell(x->S_us, 1),
         output::float_cell(x->ratio(), 2),
         x->profiled ? output::int_cell(static_cast<int64_t>(x->nodes.size())) : output::missing_cell(),
         x->profiled ? output::float_cell(x->nodes_gap_us, 1) : output::missing_cell()});
  out += output::table(header, rows);
  for (const auto* x : v) {
    out += fmt::format("  {} b{} {}: {} vs S {} ({:.2f}){}\n", x->model, x->batch, x->source(),
                       us_text(x->latency_us), us_text(x->S_us), x->ratio(),
                       x->S_complete ? "" : " (S is incomplete: some layers have no time)");
    if (x->nodes.empty()) {
      out += "      " + no_layers_note(*x) + "\n";
      continue;
    }
    for (size_t k = 0; k < x->nodes.size() && k < top; ++k) {
      const auto& n = x->nodes[k];
      out += fmt::format("      {:>10.1f} µs vs best {:>10.1f} µs ({:.2f}x)  {} [{}] {}: {}; best: {}\n",
                         n.runtime_us, n.best_us, n.runtime_us / n.best_us, n.node, n.op, n.kinds,
                         layer_list(n.layers), best_libraries(n));
    }
    if (x->nodes.size() > top) out += fmt::format("      ... {} more node(s)\n", x->nodes.size() - top);
  }
  return out;
}

nlohmann::json validity_json(const Report& r) {
  const ValiditySummary s = validity_summary(r);
  nlohmann::json violations = nlohmann::json::array();
  for (const auto* x : all_violations(r)) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : x->nodes)
      nodes.push_back({{"node", n.node},
                       {"op", n.op},
                       {"kinds", n.kinds},
                       {"layers", n.layers},
                       {"runtime_us", n.runtime_us},
                       {"best_us", n.best_us},
                       {"best_cases", n.best_cases}});
    nlohmann::json o = {
        {"model", x->model},
        {"batch", x->batch},
        {"dtype", x->dtype},
        {"source", x->replay ? "replay" : "framework"},
        {"runtime", x->runtime},
        {"runtime_version", x->runtime_version},
        {"settings", x->settings},
        {"threads", x->threads},
        {"latency_us", x->latency_us},
        {"S_us", x->S_us},
        {"latency_over_S", x->ratio()},
        {"S_complete", x->S_complete},
        {"profiled", x->profiled},
        {"nodes_gap_us", x->profiled ? nlohmann::json(x->nodes_gap_us) : nlohmann::json(nullptr)},
        {"nodes", nodes}};
    violations.push_back(std::move(o));
  }
  return {{"model_batches", s.model_batches},
          {"latencies", s.latencies},
          {"replays", s.replays},
          {"violating", s.violating},
          {"violations", violations}};
}

std::string validity_html(const Report& r) {
  std::string out = "<h2 id=\"bound-check\">Bound check</h2>\n";
  out += fmt::format("<p>{}.</p>\n", html_text(validity_line(r)));
  const auto v = all_violations(r);
  if (v.empty()) return out;
  out +=
      "<p>Each latency below S breaks the validity rule (S ≤ every real execution): the benchmarks miss an "
      "implementation, fusion or formulation the runtime has, or a case time overstates its layer. The "
      "runtime nodes faster than the best cases of their layers are listed under each (under the replay, the "
      "layers faster in the replayed graph than their case alone).</p>\n"
      "<table id=\"bound-violations\"><tr><th>model</th><th>batch</th><th>latency</th><th>time</th>"
      "<th>S</th><th>latency / S</th><th>nodes faster than their best cases</th></tr>\n";
  for (const auto* x : v)
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{:.2f}</b></td><td>{}</td></tr>\n",
        html_text(x->model), x->batch, html_text(x->source()), us_text(x->latency_us), us_text(x->S_us),
        x->ratio(),
        x->profiled ? fmt::format("{} ({} below)", x->nodes.size(), us_text(x->nodes_gap_us)) : "–");
  out += "</table>\n";
  for (const auto* x : v) {
    out += fmt::format(
        "<details class=\"bound-violation\"><summary>{} (batch {}), {}: {} vs S {} ({:.2f})</summary>\n",
        html_text(x->model), x->batch, html_text(x->source()), us_text(x->latency_us), us_text(x->S_us),
        x->ratio());
    if (x->nodes.empty()) {
      out += fmt::format("<p class=\"note\">{}.</p></details>\n", html_text(no_layers_note(*x)));
      continue;
    }
    out +=
        "<table><tr><th>runtime node</th><th>runtime op</th><th>layers</th><th>kinds</th><th>runtime</th>"
        "<th>best cases</th><th>runtime / best</th><th>best case library</th></tr>\n";
    for (const auto& n : x->nodes)
      out += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{}</td></"
          "tr>\n",
          html_text(n.node), html_text(n.op), html_text(layer_list(n.layers)), html_text(n.kinds),
          us_text(n.runtime_us), us_text(n.best_us), n.runtime_us / n.best_us, html_text(best_libraries(n)));
    out += "</table></details>\n";
  }
  return out;
}

}  // namespace floorline::analyzer
