// A real runtime against the bound, layer by layer (runtime_layers.hpp).
#include "floorline/analyzer/runtime_layers.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "floorline/common/case_id.hpp"
#include "html_text.hpp"

namespace floorline::analyzer {

namespace {

using Identity =
    std::tuple<std::string, std::string, std::string, int64_t>;  // runtime, version, settings, threads

Identity identity_of(const benchdb::FrameworkLayerTimeRow& r) {
  return {r.runtime, r.runtime_version, r.settings, r.threads};
}

bool comparable(const CostTable& costs, int64_t threads) {
  return costs.device_kind != "cpu" || threads <= 0 || threads == costs.threads;
}

std::string html_escape(const std::string& s) {
  return html_text(s);
}

std::string us(double v) {
  return v >= 1e4 ? fmt::format("{:.2f} ms", v / 1e3) : fmt::format("{:.1f} µs", v);
}

std::string opt_us(const std::optional<double>& v) {
  return v ? us(*v) : std::string("–");
}

std::string joined(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string libraries(const std::vector<std::string>& cases) {
  std::vector<std::string> out;
  for (const auto& c : cases)
    if (std::find(out.begin(), out.end(), backend_and_algorithm(c)) == out.end())
      out.push_back(backend_and_algorithm(c));
  return joined(out);
}

// How the violations split: nodes of one cost-bearing layer (an implementation no measured case
// matches), fused nodes faster than the measured fused case inside them, and fused nodes with no
// measured fused case inside (a fusion F does not have); "" when none.
std::string violations_split(const RuntimeComparison& c) {
  if (c.violations.empty()) return "";
  size_t single = 0, below_fused = 0;
  for (size_t k : c.violations) {
    const auto& n = c.nodes[k];
    if (n.cost_layers.size() == 1)
      ++single;
    else if (!n.fusions.empty() || !n.epilogues.empty())
      ++below_fused;
  }
  return fmt::format("; {} of one layer, {} fused below a measured fused case, {} fused with none measured",
                     single, below_fused, c.violations.size() - single - below_fused);
}

std::string layers_text(const RuntimeNodeCompare& n, size_t max = 4) {
  std::string s;
  for (size_t k = 0; k < n.layers.size() && k < max; ++k) s += (k ? ", " : "") + n.layers[k];
  if (n.layers.size() > max) s += fmt::format(" (+{} more)", n.layers.size() - max);
  return s;
}

}  // namespace

namespace {

using Profiles = std::map<Identity, std::vector<const benchdb::FrameworkLayerTimeRow*>>;

// The profiles of this model, batch and dtype that compare with the measurements, by identity.
Profiles profiles_of(const ModelBounds& b, const CostTable& costs) {
  Profiles profiles;
  for (const auto& r : costs.layer_times)
    if (r.model_name == b.model && r.batch == b.batch && r.dtype == b.dtype && comparable(costs, r.threads))
      profiles[identity_of(r)].push_back(&r);
  return profiles;
}

RuntimeComparison compare_profile(const ModelBounds& b,
                                  const std::vector<const benchdb::FrameworkLayerTimeRow*>* chosen);

// The fused chains F considers (b.fusions) with a measured fused case faster than their layers'
// t(v), by the Layer::index of each of their layers.
std::unordered_map<int, std::vector<const FusionUse*>> fused_chains_by_layer(const ModelBounds& b) {
  std::unordered_map<int, std::vector<const FusionUse*>> by_layer;
  for (const auto& u : b.fusions)
    if (u.fused_us && *u.fused_us < u.unfused_us)
      for (int v : u.layers) by_layer[v].push_back(&u);
  return by_layer;
}

// Of the chains in `chains` (each inside the node), the disjoint set with the largest saving
// (unfused_us − fused_us). Exhaustive: a runtime node holds a few chains; past kMax the first kMax.
std::vector<const FusionUse*> best_disjoint(const std::vector<const FusionUse*>& chains) {
  constexpr size_t kMax = 16;
  const size_t n = std::min(chains.size(), kMax);
  std::vector<const FusionUse*> best, pick;
  double best_saving = 0;
  std::set<int> used;
  auto go = [&](auto&& self, size_t i, double saving) -> void {
    if (i == n) {
      if (saving > best_saving) best_saving = saving, best = pick;
      return;
    }
    self(self, i + 1, saving);
    const FusionUse& u = *chains[i];
    if (std::any_of(u.layers.begin(), u.layers.end(), [&](int v) { return used.count(v) > 0; })) return;
    used.insert(u.layers.begin(), u.layers.end());
    pick.push_back(&u);
    self(self, i + 1, saving + (u.unfused_us - *u.fused_us));
    pick.pop_back();
    for (int v : u.layers) used.erase(v);
  };
  go(go, 0, 0.0);
  return best;
}

// best_fused_us, best_fused_cases and fusions of a node whose best_us is set.
void cover_with_fused_cases(RuntimeNodeCompare& n,
                            const std::unordered_map<int, std::vector<const FusionUse*>>& chains_by_layer) {
  const std::set<int> inside(n.cost_layers.begin(), n.cost_layers.end());
  std::vector<const FusionUse*> chains;
  for (int v : n.cost_layers) {
    const auto it = chains_by_layer.find(v);
    if (it == chains_by_layer.end()) continue;
    for (const FusionUse* u : it->second)
      if (std::find(chains.begin(), chains.end(), u) == chains.end() &&
          std::all_of(u->layers.begin(), u->layers.end(), [&](int x) { return inside.count(x) > 0; }))
        chains.push_back(u);
  }
  const auto picked = best_disjoint(chains);
  std::unordered_map<int, const FusionUse*> fused_at;  // layer → the picked chain covering it
  double saving = 0;
  for (const FusionUse* u : picked) {
    saving += u->unfused_us - *u->fused_us;
    for (int v : u->layers) fused_at[v] = u;
  }
  n.best_fused_us = *n.best_us - saving;
  for (size_t k = 0; k < n.cost_layers.size(); ++k) {
    const auto it = fused_at.find(n.cost_layers[k]);
    if (it == fused_at.end()) {
      n.best_fused_cases.push_back(n.best_cases[k]);
    } else if (it->second->layers.front() == n.cost_layers[k]) {  // the head: the chain's case, once
      n.best_fused_cases.push_back(it->second->fused_case);
      n.fusions.push_back(it->second->pattern);
    }
  }
}

}  // namespace

std::optional<RuntimeComparison> compare_runtime_layers(const ModelBounds& b, const CostTable& costs) {
  // The profiles of this model: pick the identity whose end-to-end latency is M (the fastest).
  const Profiles profiles = profiles_of(b, costs);
  if (profiles.empty()) return std::nullopt;
  const std::vector<const benchdb::FrameworkLayerTimeRow*>* chosen = &profiles.begin()->second;
  std::optional<double> fastest;
  for (const auto& f : costs.framework) {
    if (f.model_name != b.model || f.batch != b.batch || f.dtype != b.dtype || !comparable(costs, f.threads))
      continue;
    const auto it = profiles.find({f.runtime, f.runtime_version, f.settings, f.threads});
    if (it != profiles.end() && (!fastest || f.median_us < *fastest)) {
      fastest = f.median_us;
      chosen = &it->second;
    }
  }
  return compare_profile(b, chosen);
}

std::optional<RuntimeComparison> compare_runtime_profile(const ModelBounds& b, const CostTable& costs,
                                                         const std::string& runtime,
                                                         const std::string& runtime_version,
                                                         const std::string& settings, int64_t threads) {
  const Profiles profiles = profiles_of(b, costs);
  const auto it = profiles.find({runtime, runtime_version, settings, threads});
  if (it == profiles.end()) return std::nullopt;
  return compare_profile(b, &it->second);
}

namespace {

// The runtime's nodes in execution order, each with its layers; the nodes that run one chain S
// takes at a fused case (an activation or an attention in its producer's epilogue:
// LayerCost::epilogue_head) but the runtime runs as several nodes, merged into one at the first of
// them: their layers, their names and ops joined, their times summed. The chain's absorbed layers
// carry what the fused case adds to the producer, not their own time, so a node of them alone
// compares with nothing the runtime ran (an attention's Softmax node against the whole fused case).
std::vector<RuntimeNodeCompare> merged_epilogue_nodes(
    const std::vector<const benchdb::FrameworkLayerTimeRow*>& rows, const ModelBounds& b) {
  std::vector<RuntimeNodeCompare> nodes;
  std::unordered_map<std::string, size_t> node_of;  // layer name → its node
  for (const auto* r : rows) {
    RuntimeNodeCompare n;
    n.order = r->node_order;
    n.node = r->node_name;
    n.op = r->op;
    n.runtime_us = r->median_us;
    const auto names = nlohmann::json::parse(r->layers, nullptr, false);
    if (names.is_array())
      for (const auto& x : names)
        if (x.is_string()) {
          n.layers.push_back(x.get<std::string>());
          node_of.emplace(n.layers.back(), nodes.size());
        }
    nodes.push_back(std::move(n));
  }
  std::vector<size_t> root(nodes.size());
  for (size_t k = 0; k < root.size(); ++k) root[k] = k;
  auto find = [&](size_t k) {
    while (root[k] != k) k = root[k] = root[root[k]];
    return k;
  };
  std::unordered_map<int, const LayerCost*> by_index;
  for (const auto& l : b.layers) by_index.emplace(l.index, &l);
  bool any = false;
  for (const auto& l : b.layers) {
    if (l.epilogue_head < 0) continue;
    const auto head = by_index.find(l.epilogue_head);
    if (head == by_index.end()) continue;
    const auto a = node_of.find(l.name), h = node_of.find(head->second->name);
    if (a == node_of.end() || h == node_of.end()) continue;
    const size_t x = find(a->second), y = find(h->second);
    if (x == y) continue;
    root[std::max(x, y)] = std::min(x, y);  // the group's first node in execution order
    any = true;
  }
  if (!any) return nodes;
  std::vector<RuntimeNodeCompare> out;
  std::unordered_map<size_t, size_t> at;  // group root → position in out
  for (size_t k = 0; k < nodes.size(); ++k) {
    const size_t g = find(k);
    const auto it = at.find(g);
    if (it == at.end()) {
      at.emplace(g, out.size());
      out.push_back(std::move(nodes[k]));
      continue;
    }
    RuntimeNodeCompare& m = out[it->second];
    m.node += " + " + nodes[k].node;
    m.op += "+" + nodes[k].op;
    m.runtime_us += nodes[k].runtime_us;
    for (auto& name : nodes[k].layers)  // a layer once, should two nodes name it
      if (std::find(m.layers.begin(), m.layers.end(), name) == m.layers.end())
        m.layers.push_back(std::move(name));
  }
  return out;
}

RuntimeComparison compare_profile(const ModelBounds& b,
                                  const std::vector<const benchdb::FrameworkLayerTimeRow*>* chosen) {
  RuntimeComparison c;
  const auto& first = *chosen->front();
  std::tie(c.runtime, c.runtime_version, c.settings, c.threads) = identity_of(first);
  std::unordered_map<std::string, const LayerCost*> by_name;
  for (const auto& l : b.layers) by_name.emplace(l.name, &l);
  std::set<int> computed;
  const auto chains_by_layer = fused_chains_by_layer(b);
  auto rows = *chosen;
  std::sort(rows.begin(), rows.end(), [](auto* x, auto* y) { return x->node_order < y->node_order; });
  for (RuntimeNodeCompare& n : merged_epilogue_nodes(rows, b)) {
    double best = 0;
    bool timed = true;
    for (const auto& name : n.layers) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) continue;  // a view or host layer: costs 0
      const LayerCost& l = *it->second;
      n.cost_layers.push_back(l.index);
      computed.insert(l.index);
      n.kinds += (n.kinds.empty() ? "" : "+") + l.kind;
      if (l.source == CostSource::kNone) timed = false;
      best += l.us;
      // An activation S counts in its producer's epilogue: the fused case that applies it.
      if (!l.epilogue_case.empty()) n.epilogues.push_back(l.kind);
      n.best_cases.push_back(!l.epilogue_case.empty() ? l.epilogue_case
                             : l.best_case.empty()    ? std::string(cost_source_name(l.source))
                                                      : l.best_case);
    }
    if (!n.cost_layers.empty() && timed) {
      n.best_us = best;
      cover_with_fused_cases(n, chains_by_layer);
    }
    c.runtime_us += n.runtime_us;
    if (n.layers.empty()) c.runtime_only_us += n.runtime_us;
    if (n.best_us) {
      c.compared_runtime_us += n.runtime_us;
      c.compared_best_us += *n.best_us;
      c.compared_best_fused_us += *n.best_fused_us;
    }
    c.nodes.push_back(std::move(n));
  }
  for (const auto& l : b.layers)
    if (!computed.count(l.index)) ++c.layers_not_run;
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const auto& n = c.nodes[k];
    if (!n.best_us) continue;
    if (n.violation()) c.violations.push_back(k);
    if (n.fusion_win()) c.fusion_wins.push_back(k);
    if (n.runtime_us > *n.best_us) c.losses.push_back(k);
  }
  std::stable_sort(c.violations.begin(), c.violations.end(), [&](size_t x, size_t y) {
    return *c.nodes[x].best_fused_us - c.nodes[x].runtime_us >
           *c.nodes[y].best_fused_us - c.nodes[y].runtime_us;
  });
  std::stable_sort(c.fusion_wins.begin(), c.fusion_wins.end(), [&](size_t x, size_t y) {
    return *c.nodes[x].best_us - c.nodes[x].runtime_us > *c.nodes[y].best_us - c.nodes[y].runtime_us;
  });
  std::stable_sort(c.losses.begin(), c.losses.end(), [&](size_t x, size_t y) {
    return c.nodes[x].runtime_us - *c.nodes[x].best_us > c.nodes[y].runtime_us - *c.nodes[y].best_us;
  });
  return c;
}

}  // namespace

std::string runtime_layers_table(const ModelBounds& b, const RuntimeComparison& c, size_t top) {
  std::string out = fmt::format(
      "  [runtime per layer] {} {} ({}, {} thread(s)): {} nodes, {:.1f} µs in nodes; where comparable {:.1f} "
      "µs vs best cases (S) {:.1f} µs, fused where measured {:.1f} µs; {:.1f} µs runtime-only "
      "(reorders); "
      "{} layer(s) folded or removed\n",
      c.runtime, c.runtime_version, c.settings, c.threads, c.nodes.size(), c.runtime_us,
      c.compared_runtime_us, c.compared_best_us, c.compared_best_fused_us, c.runtime_only_us,
      c.layers_not_run);
  (void)b;
  auto line = [&](const RuntimeNodeCompare& n) {
    return fmt::format("      {:>10.1f} µs vs {:>10.1f} µs ({:.2f}x)  {} [{}] {}: {}; best: {}\n",
                       n.runtime_us, *n.best_us, *n.ratio(), n.node, n.op, n.kinds, layers_text(n),
                       libraries(n.best_cases));
  };
  // A violation against the best covering, fused cases included: its cases' libraries and, where a
  // fused case lowered it, the unfused sum too.
  auto violation_line = [&](const RuntimeNodeCompare& n) {
    return fmt::format("      {:>10.1f} µs vs {:>10.1f} µs ({:.2f}x)  {} [{}] {}: {}; best: {}{}\n",
                       n.runtime_us, *n.best_fused_us, *n.fused_ratio(), n.node, n.op, n.kinds,
                       layers_text(n), libraries(n.best_fused_cases),
                       n.fusions.empty() ? "" : fmt::format(" (unfused {:.1f} µs)", *n.best_us));
  };
  auto fusion_line = [&](const RuntimeNodeCompare& n) {
    return fmt::format(
        "      {:>10.1f} µs vs unfused {:.1f} µs, fused {:.1f} µs  {} [{}] {}: {}; F fuses {} ({})\n",
        n.runtime_us, *n.best_us, *n.best_fused_us, n.node, n.op, n.kinds, layers_text(n), joined(n.fusions),
        libraries(n.best_fused_cases));
  };
  out += fmt::format(
      "    {} bound violation(s) (the runtime faster than every measured case, fused ones included{}){}\n",
      c.violations.size(), violations_split(c), c.violations.empty() ? "" : ":");
  for (size_t k = 0; k < c.violations.size() && k < top; ++k) out += violation_line(c.nodes[c.violations[k]]);
  out += fmt::format(
      "    {} fusion win(s) (the runtime fuses these layers, faster than their unfused cases; Floorline's "
      "fused cases are as fast and F accounts for them){}\n",
      c.fusion_wins.size(), c.fusion_wins.empty() ? "" : ":");
  for (size_t k = 0; k < c.fusion_wins.size() && k < top; ++k) out += fusion_line(c.nodes[c.fusion_wins[k]]);
  if (!c.losses.empty()) out += "    where the runtime loses most:\n";
  for (size_t k = 0; k < c.losses.size() && k < top; ++k) out += line(c.nodes[c.losses[k]]);
  return out;
}

nlohmann::json runtime_layers_json(const RuntimeComparison& c) {
  nlohmann::json nodes = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& n : c.nodes)
    nodes.push_back({{"order", n.order},
                     {"node", n.node},
                     {"op", n.op},
                     {"layers", n.layers},
                     {"kinds", n.kinds},
                     {"runtime_us", n.runtime_us},
                     {"best_us", opt(n.best_us)},
                     {"ratio", opt(n.ratio())},
                     {"best_cases", n.best_cases},
                     {"best_fused_us", opt(n.best_fused_us)},
                     {"fused_ratio", opt(n.fused_ratio())},
                     {"best_fused_cases", n.best_fused_cases},
                     {"fusions", n.fusions},
                     {"epilogues", n.epilogues},
                     {"violation", n.violation()},
                     {"fusion_win", n.fusion_win()}});
  auto orders = [&](const std::vector<size_t>& which) {
    nlohmann::json a = nlohmann::json::array();
    for (auto k : which) a.push_back(c.nodes[k].order);
    return a;
  };
  return {{"runtime", c.runtime},
          {"runtime_version", c.runtime_version},
          {"settings", c.settings},
          {"threads", c.threads},
          {"runtime_us", c.runtime_us},
          {"compared_runtime_us", c.compared_runtime_us},
          {"compared_best_us", c.compared_best_us},
          {"compared_best_fused_us", c.compared_best_fused_us},
          {"runtime_only_us", c.runtime_only_us},
          {"layers_not_run", c.layers_not_run},
          {"violations", orders(c.violations)},
          {"fusion_wins", orders(c.fusion_wins)},
          {"losses", orders(c.losses)},
          {"nodes", nodes}};
}

std::string runtime_layers_html(const ModelBounds& b, const RuntimeComparison& c) {
  std::string s = fmt::format(
      "<section class=\"runtime-layers\" id=\"runtime-{}-b{}\">\n<h3>{} (batch {}): {} {} per layer against "
      "the best cases</h3>\n<p>{} ({} thread(s)): {} runtime nodes, {} in nodes; where a node computes timed "
      "layers, {} against {} for their best cases as S counts them ({}) and {} with the measured fused cases "
      "({}); {} "
      "in runtime-only nodes (layout reorders); {} layer(s) folded or removed by the runtime.</p>\n",
      html_escape(b.model), b.batch, html_escape(b.model), b.batch, html_escape(c.runtime),
      html_escape(c.runtime_version), html_escape(c.settings), c.threads, c.nodes.size(), us(c.runtime_us),
      us(c.compared_runtime_us), us(c.compared_best_us),
      c.compared_best_us > 0 ? fmt::format("{:.2f}x", c.compared_runtime_us / c.compared_best_us) : "–",
      us(c.compared_best_fused_us),
      c.compared_best_fused_us > 0 ? fmt::format("{:.2f}x", c.compared_runtime_us / c.compared_best_fused_us)
                                   : "–",
      us(c.runtime_only_us), c.layers_not_run);
  // The times first, so that they show without scrolling; the long names (layers, ONNX Runtime's node
  // names of fused nodes) last.
  auto table = [&](const std::vector<size_t>& which, size_t max) {
    std::string t =
        "<table><tr><th>kinds</th><th>runtime</th><th>best unfused</th><th>best with fused cases</th>"
        "<th>runtime / best</th><th>best case library</th><th>runtime op</th><th>layers</th>"
        "<th>runtime node</th><th>fused chains</th></tr>\n";
    for (size_t k = 0; k < which.size() && k < max; ++k) {
      const auto& n = c.nodes[which[k]];
      const auto ratio = n.fused_ratio();
      t += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}"
          "</td><td>{}</td></tr>\n",
          html_escape(n.kinds), us(n.runtime_us), opt_us(n.best_us), opt_us(n.best_fused_us),
          ratio ? fmt::format("{:.2f}", *ratio) : "–", html_escape(libraries(n.best_fused_cases)),
          html_escape(n.op), html_escape(layers_text(n)), html_escape(n.node),
          html_escape(joined(n.fusions)));
    }
    return t + "</table>\n";
  };
  if (c.violations.empty()) {
    s += "<p>No bound violation: no runtime node is faster than the best measured cases of its layers, "
         "fused ones included.</p>\n";
  } else {
    s += fmt::format(
        "<p><b>{} bound violation(s)</b>: runtime nodes faster than every measured case of their layers, "
        "fused cases included (an implementation or fusion the benchmarks miss{}):</p>\n",
        c.violations.size(), html_escape(violations_split(c)));
    s += table(c.violations, c.violations.size());
  }
  if (!c.fusion_wins.empty()) {
    s += fmt::format(
        "<p><b>{} fusion win(s)</b>: the runtime fuses these layers and beats their unfused cases, not "
        "Floorline's measured fused cases; F accounts for them:</p>\n",
        c.fusion_wins.size());
    s += table(c.fusion_wins, c.fusion_wins.size());
  }
  if (!c.losses.empty()) {
    s += "<p>Where the runtime loses most (runtime − best unfused):</p>\n";
    s += table(c.losses, 10);
  }
  std::vector<size_t> all(c.nodes.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  s += fmt::format("<details><summary>All {} runtime nodes</summary>\n{}</details>\n</section>\n",
                   c.nodes.size(), table(all, all.size()));
  return s;
}

}  // namespace floorline::analyzer
