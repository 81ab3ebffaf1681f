// ONNX Runtime profiles mapped to the model's nodes (runtime_profile.hpp).
#include "floorline/model_processor/runtime_profile.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "floorline/common/input_file.hpp"

namespace floorline::mp {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kKernelSuffix = "_kernel_time";
constexpr std::string_view kNchwcSuffix = "_nchwc";
constexpr std::string_view kBnSuffix = "_bn";

Result<onnx::GraphProto> read_graph(const fs::path& path) {
  // 2 GiB: protobuf's own limit on one message.
  FL_ASSIGN_OR_RETURN(const std::string bytes, read_input_file(path.string(), uint64_t{2} << 30));
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes) || m.ir_version() <= 0 || !m.has_graph())
    return make_error("{}: not an ONNX model", path.string());
  return std::move(*m.mutable_graph());
}

std::string label(const onnx::NodeProto& n, size_t index) {
  return n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The model's graph as the mapping needs it.
struct ModelGraph {
  std::vector<std::string> names;                 // label per node
  std::vector<std::vector<std::string>> inputs;   // per node
  std::vector<std::vector<std::string>> outputs;  // per node
  std::unordered_map<std::string, int> producer;  // value → node
  std::unordered_map<std::string, std::vector<int>> consumers;
  std::unordered_map<std::string, int> by_name;  // label → node
  std::unordered_set<std::string> sources;       // graph inputs and initializers
  std::vector<std::string> op;
};

ModelGraph model_graph(const onnx::GraphProto& g) {
  ModelGraph m;
  for (const auto& i : g.input()) m.sources.insert(i.name());
  for (const auto& t : g.initializer()) m.sources.insert(t.name());
  for (int k = 0; k < g.node_size(); ++k) {
    const auto& n = g.node(k);
    m.names.push_back(label(n, static_cast<size_t>(k)));
    m.op.push_back(n.op_type());
    m.by_name.emplace(m.names.back(), k);
    m.inputs.emplace_back(n.input().begin(), n.input().end());
    m.outputs.emplace_back(n.output().begin(), n.output().end());
    for (const auto& i : n.input())
      if (!i.empty()) m.consumers[i].push_back(k);
    for (const auto& o : n.output())
      if (!o.empty()) m.producer.emplace(o, k);
  }
  return m;
}

bool is_activation(const std::string& op) {
  static const std::set<std::string> kOps = {"Relu", "Clip",      "Sigmoid",  "HardSigmoid",
                                             "Tanh", "LeakyRelu", "HardSwish"};
  return kOps.count(op) > 0;
}

// Runtime node name → the model nodes it computes (see the header for the rules).
std::unordered_map<std::string, std::vector<int>> map_optimized(const ModelGraph& m,
                                                                const onnx::GraphProto& opt) {
  std::unordered_set<std::string> boundary = m.sources;
  std::vector<std::vector<std::string>> anchors(opt.node_size());
  for (int k = 0; k < opt.node_size(); ++k) {
    const auto& n = opt.node(k);
    for (const auto& o : n.output())
      if (m.producer.count(o)) anchors[k].push_back(o);
    if (ends_with(n.name(), kNchwcSuffix)) {
      std::string v = n.name().substr(0, n.name().size() - kNchwcSuffix.size());
      // A BatchNormalization run as an NCHWc convolution: "<its output>_bn_nchwc".
      if (!m.producer.count(v) && ends_with(v, kBnSuffix)) v.resize(v.size() - kBnSuffix.size());
      if (m.producer.count(v)) anchors[k].push_back(v);
    }
    // A node named as the model node it runs, writing no model value (densenet's Concat inside the
    // NCHWc domain): that node's outputs.
    if (anchors[k].empty())
      if (const auto named = m.by_name.find(n.name()); named != m.by_name.end())
        for (const auto& o : m.outputs[static_cast<size_t>(named->second)])
          if (!o.empty()) anchors[k].push_back(o);
    // A fused node that writes no model value (inside the NCHWc domain, between two convolutions)
    // but is named after the model node it replaces ("<node>/QuickGeluFusion/": efficientnet's
    // x·sigmoid(x) after its Mul): that node's outputs.
    if (anchors[k].empty() && !n.name().empty() && n.name().back() == '/')
      for (size_t slash = n.name().size() - 1; slash-- > 0;) {
        if (n.name()[slash] != '/') continue;
        const auto named = m.by_name.find(n.name().substr(0, slash));
        if (named == m.by_name.end()) continue;
        for (const auto& o : m.outputs[static_cast<size_t>(named->second)])
          if (!o.empty()) anchors[k].push_back(o);
        break;
      }
    for (const auto& a : anchors[k]) boundary.insert(a);
    for (const auto& i : n.input())
      if (m.producer.count(i)) boundary.insert(i);
  }
  std::vector<int> owner(m.names.size(), -1);
  // A fused node that writes no model value and is named after none ("Gelu_token_20": ONNX Runtime's
  // Gelu in the NCHWc domain, between reorders) computes the element-wise chain of the model fed by
  // the value it reads, traced back through reorders to the node that writes it (its anchor): the
  // model nodes whose inputs are that value, constants and the chain's own outputs. Without this the
  // next convolution or a reorder took maxvit's Gelu chains (Div, Erf, Add, Mul, Mul).
  std::unordered_map<std::string, int> runtime_producer;
  for (int k = 0; k < opt.node_size(); ++k)
    for (const auto& o : opt.node(k).output())
      if (!o.empty()) runtime_producer[o] = k;
  static const std::set<std::string> kFusedActivations = {"Gelu", "FastGelu", "QuickGelu", "BiasGelu"};
  static const std::set<std::string> kElementwise = {"Div",     "Mul",  "Add", "Sub", "Erf",
                                                     "Sigmoid", "Tanh", "Pow", "Sqrt"};
  for (int k = 0; k < opt.node_size(); ++k) {
    const auto& n = opt.node(k);
    // ONNX Runtime's fused element-wise activations only (a Cast or Transpose it inserts is not one).
    if (!anchors[k].empty() || n.input_size() == 0 || !kFusedActivations.count(n.op_type())) continue;
    int p = -1;
    std::string value = n.input(0);
    for (int hops = 0; hops < 64; ++hops) {  // a chain of reorders; a cyclic graph stops here
      const auto it = runtime_producer.find(value);
      if (it == runtime_producer.end()) break;
      const auto& producer = opt.node(it->second);
      if (producer.op_type().rfind("Reorder", 0) != 0 || producer.input_size() == 0) {
        p = it->second;
        break;
      }
      value = producer.input(0);
    }
    if (p < 0 || p == k || anchors[p].empty()) continue;
    std::unordered_set<std::string> values = {anchors[p].front()};
    std::vector<int> chain;
    for (bool grew = true; grew && chain.size() < 16;) {
      grew = false;
      for (const auto& v : std::vector<std::string>(values.begin(), values.end())) {
        const auto c = m.consumers.find(v);
        if (c == m.consumers.end()) continue;
        for (const int node : c->second) {
          if (chain.size() >= 16 || owner[node] != -1 || !kElementwise.count(m.op[node])) continue;
          bool inside = true;
          std::vector<int> constants;
          for (const auto& i : m.inputs[node]) {
            if (i.empty() || values.count(i) || m.sources.count(i)) continue;
            const auto q = m.producer.find(i);
            if (q != m.producer.end() && m.op[q->second] == "Constant" && owner[q->second] == -1)
              constants.push_back(q->second);
            else
              inside = false;
          }
          if (!inside) continue;
          owner[node] = k;
          chain.push_back(node);
          for (const int q : constants) owner[q] = k;
          for (const auto& o : m.outputs[node]) values.insert(o);
          grew = true;
        }
      }
    }
    for (const int node : chain)
      for (const auto& o : m.outputs[node]) boundary.insert(o);
  }
  // NCHWc convolutions with a sum input: the residual Add (and its activation) are fused forward.
  for (int k = 0; k < opt.node_size(); ++k) {
    const auto& n = opt.node(k);
    if (n.domain() != "com.microsoft.nchwc" || n.op_type() != "Conv" || anchors[k].empty()) continue;
    bool has_activation = false;
    for (const auto& a : n.attribute()) has_activation |= a.name() == "activation";
    if (n.input_size() < 4 || n.input(3).empty()) {
      // No sum: an activation fused into a conv that is named after the conv's own output.
      const auto c = m.consumers.find(anchors[k].front());
      if (!has_activation || c == m.consumers.end() || c->second.size() != 1 ||
          !is_activation(m.op[c->second.front()]) || owner[c->second.front()] != -1)
        continue;
      bool kept = false;  // the activation's output is a value of the optimized graph: it ran apart
      for (const auto& v : m.outputs[c->second.front()]) kept |= boundary.count(v) > 0;
      if (kept) continue;
      owner[c->second.front()] = k;
      for (const auto& v : m.outputs[c->second.front()]) boundary.insert(v);
      continue;
    }
    const auto c = m.consumers.find(anchors[k].front());
    if (c == m.consumers.end() || c->second.size() != 1 || m.op[c->second.front()] != "Add") continue;
    const int add = c->second.front();
    owner[add] = k;
    bool activation = false;
    for (const auto& a : n.attribute()) activation |= a.name() == "activation";
    for (const auto& value : m.outputs[add]) {
      boundary.insert(value);
      const auto d = m.consumers.find(value);
      if (!activation || d == m.consumers.end() || d->second.size() != 1 ||
          !is_activation(m.op[d->second.front()]))
        continue;
      owner[d->second.front()] = k;
      for (const auto& v : m.outputs[d->second.front()]) boundary.insert(v);
    }
  }
  for (int k = 0; k < opt.node_size(); ++k) {
    std::vector<int> stack;
    for (const auto& a : anchors[k]) stack.push_back(m.producer.at(a));
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      if (owner[n] != -1) continue;
      owner[n] = k;
      for (const auto& i : m.inputs[n]) {
        if (i.empty() || boundary.count(i)) continue;
        const auto p = m.producer.find(i);
        if (p != m.producer.end()) stack.push_back(p->second);
      }
    }
  }
  std::unordered_map<std::string, std::vector<int>> out;
  for (int k = 0; k < opt.node_size(); ++k) out[opt.node(k).name()];
  for (size_t n = 0; n < owner.size(); ++n)
    if (owner[n] >= 0) out[opt.node(owner[n]).name()].push_back(static_cast<int>(n));
  return out;
}

}  // namespace

Result<RuntimeProfile> read_onnxruntime_profile(const fs::path& profile, const fs::path& model,
                                                const std::optional<fs::path>& optimized_graph) {
  const std::string where = profile.string();
  FL_ASSIGN_OR_RETURN(const std::string text, read_input_file(where));
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error("{}: not valid JSON", where);
  if (!doc.is_array())
    return make_error("{}: not an ONNX Runtime profile (expected a JSON array of events)", where);

  // Runs: the "model_run" events, by start time.
  std::vector<std::pair<double, double>> runs;  // (ts, ts + dur)
  std::vector<double> run_us;
  struct Event {
    std::string node, op, provider;
    double ts = 0, dur = 0;
  };
  std::vector<Event> events;
  for (const auto& e : doc) {
    if (!e.is_object()) continue;
    const std::string cat = e.value("cat", "");
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    if (cat == "Session" && name == "model_run") {
      runs.emplace_back(ts, ts + dur);
      run_us.push_back(dur);
    } else if (cat == "Node" && ends_with(name, kKernelSuffix)) {
      Event ev;
      ev.node = name.substr(0, name.size() - kKernelSuffix.size());
      ev.ts = ts;
      ev.dur = dur;
      if (e.contains("args") && e["args"].is_object()) {
        ev.op = e["args"].value("op_name", "");
        ev.provider = e["args"].value("provider", "");
      }
      events.push_back(std::move(ev));
    }
  }
  if (events.empty())
    return make_error("{}: no node events (was the session created with enableProfiling?)", where);
  std::sort(runs.begin(), runs.end());
  // The first run allocates and packs weights: left out when there are others.
  const size_t first = runs.size() > 1 ? 1 : 0;
  auto run_of = [&](double ts) -> int {
    for (size_t r = 0; r < runs.size(); ++r)
      if (ts >= runs[r].first && ts <= runs[r].second) return static_cast<int>(r);
    return runs.empty() ? 0 : -1;
  };

  RuntimeProfile out;
  out.runs = runs.empty() ? 1 : static_cast<int64_t>(runs.size() - first);
  if (!runs.empty()) out.run_median_us = median(std::vector<double>(run_us.begin() + first, run_us.end()));

  // Per node: time in each run (summed), in order of first execution.
  std::map<std::string, size_t> index;
  std::vector<std::map<int, double>> per_run;
  for (const auto& ev : events) {
    const int r = run_of(ev.ts);
    if (r < 0 || r < static_cast<int>(first)) continue;
    auto [it, added] = index.emplace(ev.node, out.nodes.size());
    if (added) {
      out.nodes.push_back({ev.node, ev.op, ev.provider, 0, 0, 0, {}});
      per_run.emplace_back();
    }
    per_run[it->second][r] += ev.dur;
  }
  for (size_t k = 0; k < out.nodes.size(); ++k) {
    std::vector<double> t;
    for (const auto& [r, us] : per_run[k]) t.push_back(us);
    out.nodes[k].median_us = median(t);
    out.nodes[k].min_us = t.empty() ? 0 : *std::min_element(t.begin(), t.end());
    out.nodes[k].runs = static_cast<int64_t>(t.size());
  }

  FL_ASSIGN_OR_RETURN(const onnx::GraphProto g, read_graph(model));
  const ModelGraph m = model_graph(g);
  std::vector<bool> computed(m.names.size(), false);
  if (optimized_graph) {
    FL_ASSIGN_OR_RETURN(const onnx::GraphProto opt, read_graph(*optimized_graph));
    const auto mapping = map_optimized(m, opt);
    for (auto& n : out.nodes) {
      const auto it = mapping.find(n.node);
      if (it == mapping.end()) continue;
      for (int k : it->second) {
        n.layers.push_back(m.names[k]);
        computed[k] = true;
      }
    }
  } else {
    for (auto& n : out.nodes) {
      const auto it = m.by_name.find(n.node);
      if (it == m.by_name.end()) continue;
      n.layers.push_back(n.node);
      computed[it->second] = true;
    }
  }
  for (size_t k = 0; k < computed.size(); ++k)
    if (!computed[k]) out.not_run.push_back(m.names[k]);
  return out;
}

}  // namespace floorline::mp
