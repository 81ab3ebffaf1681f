#include "validate.hpp"

#include <algorithm>
#include <set>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "floorline/common/utf8.hpp"

namespace floorline::mp {
namespace {

// Ops with the convolution/pooling attributes (kernel_shape, strides, dilations, pads, group).
bool spatial_op(const std::string& op) {
  static const std::set<std::string> kOps = {"Conv",        "ConvTranspose", "ConvInteger",
                                             "QLinearConv", "MaxPool",       "AveragePool",
                                             "LpPool",      "MaxUnpool",     "DeformConv"};
  return kOps.count(op) != 0;
}
bool conv_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "ConvInteger";
}

void sanitize_graph(onnx::GraphProto& g);

void sanitize_attribute(onnx::AttributeProto& a) {
  make_valid_utf8(*a.mutable_name());
  make_valid_utf8(*a.mutable_ref_attr_name());
  if (a.has_s()) make_valid_utf8(*a.mutable_s());
  for (auto& s : *a.mutable_strings()) make_valid_utf8(s);
  if (a.has_t()) make_valid_utf8(*a.mutable_t()->mutable_name());
  if (a.has_g()) sanitize_graph(*a.mutable_g());
  for (auto& g : *a.mutable_graphs()) sanitize_graph(g);
}

void sanitize_graph(onnx::GraphProto& g) {
  make_valid_utf8(*g.mutable_name());
  for (auto& n : *g.mutable_node()) {
    make_valid_utf8(*n.mutable_name());
    make_valid_utf8(*n.mutable_op_type());
    make_valid_utf8(*n.mutable_domain());
    for (auto& s : *n.mutable_input()) make_valid_utf8(s);
    for (auto& s : *n.mutable_output()) make_valid_utf8(s);
    for (auto& a : *n.mutable_attribute()) sanitize_attribute(a);
  }
  for (auto& t : *g.mutable_initializer()) make_valid_utf8(*t.mutable_name());
  for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
    for (auto& v : *list) make_valid_utf8(*v.mutable_name());
}

// Rank, dimensions and element count of a tensor's dims. `min_dim` is 0: empty tensors are legal.
template <class Dims>
Status check_dims(const Dims& dims, int64_t min_dim, const std::string& what) {
  if (dims.size() > kMaxRank)
    return make_error("{} has rank {}; Floorline accepts ranks up to {}", what, dims.size(), kMaxRank);
  int64_t count = 1;
  for (int k = 0; k < static_cast<int>(dims.size()); ++k) {
    const int64_t d = dims[k];
    if (d < min_dim || d > kMaxDim)
      return make_error("{} has dimension {} at axis {}; dimensions must be {}..{}", what, d, k, min_dim,
                        kMaxDim);
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxElements)
      return make_error("{} has more than {} elements", what, kMaxElements);
  }
  return {};
}

// The known dimensions of a graph input's type (-1 for a symbolic one); nullopt without a shape.
std::optional<std::vector<int64_t>> input_dims(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

struct Scope {
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  std::unordered_map<std::string, std::vector<int64_t>> input_dims;  // graph inputs with a shape
};

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// The rank of operand k when the graph says it before inference (an initializer or a graph
// input), else -1.
int64_t operand_rank(const onnx::NodeProto& n, int k, const Scope& s) {
  if (n.input_size() <= k || n.input(k).empty()) return -1;
  if (auto it = s.initializers.find(n.input(k)); it != s.initializers.end()) return it->second->dims_size();
  if (auto it = s.input_dims.find(n.input(k)); it != s.input_dims.end())
    return static_cast<int64_t>(it->second.size());
  return -1;
}

Status check_spatial_node(const onnx::NodeProto& n, const std::string& label, const Scope& s) {
  const std::string& op = n.op_type();
  auto bad = [&](const onnx::AttributeProto& a, int64_t v, int64_t lo) {
    return make_error("node {} ({}) has {} = {}; each must be {}..{}", label, op, a.name(), v, lo, kMaxDim);
  };
  int64_t spatial = -1;  // number of spatial dimensions, where known
  for (const auto& a : n.attribute()) {
    const std::string& name = a.name();
    int64_t lo;
    if (name == "kernel_shape" || name == "strides" || name == "dilations" || name == "output_shape")
      lo = 1;
    else if (name == "pads" || name == "output_padding")
      lo = 0;
    else if (name == "group")
      lo = 1;
    else
      continue;
    if (name == "group") {
      if (a.i() < lo || a.i() > kMaxDim) return bad(a, a.i(), lo);
      continue;
    }
    for (int64_t v : a.ints())
      if (v < lo || v > kMaxDim) return bad(a, v, lo);
    if (name == "kernel_shape") spatial = a.ints_size();
  }
  // Operand ranks: X (and W for a convolution) carry N and C before the spatial dimensions.
  const int64_t x_rank = operand_rank(n, 0, s);
  const int64_t w_rank = conv_op(op) ? operand_rank(n, 1, s) : -1;
  if (x_rank >= 0 && x_rank < 3)
    return make_error("node {} ({}) input '{}' has rank {}; {} needs rank 3 or more", label, op, n.input(0),
                      x_rank, op);
  if (w_rank >= 0 && w_rank < 3)
    return make_error("node {} ({}) weights '{}' have rank {}; {} needs rank 3 or more", label, op,
                      n.input(1), w_rank, op);
  if (x_rank >= 0 && w_rank >= 0 && x_rank != w_rank)
    return make_error("node {} ({}) input '{}' has rank {} but its weights '{}' have rank {}", label, op,
                      n.input(0), x_rank, n.input(1), w_rank);
  if (spatial < 0 && w_rank >= 0) spatial = w_rank - 2;
  if (spatial < 0 && x_rank >= 0) spatial = x_rank - 2;
  if (spatial >= 0) {
    if (x_rank >= 0 && x_rank != spatial + 2)
      return make_error("node {} ({}) has a {}-D kernel but input '{}' has rank {}", label, op, spatial,
                        n.input(0), x_rank);
    for (const char* name : {"strides", "dilations", "pads"}) {
      const auto* a = attribute(n, name);
      const int64_t want = std::string_view(name) == "pads" ? 2 * spatial : spatial;
      if (a && a->ints_size() != want)
        return make_error("node {} ({}) has {} values in {}; its {}-D kernel needs {}", label, op,
                          a->ints_size(), name, spatial, want);
    }
  }
  // group divides the weights' channels: output channels for Conv, input channels for ConvTranspose.
  if (conv_op(op) && n.input_size() > 1) {
    const auto* g = attribute(n, "group");
    const int64_t group = g ? g->i() : 1;
    if (auto w = s.initializers.find(n.input(1)); w != s.initializers.end() && w->second->dims_size() >= 1) {
      const int64_t ch = w->second->dims(0);
      if (ch % group != 0)
        return make_error(
            "node {} ({}) has group {}, which does not divide the {} {} channels of weights '{}'", label, op,
            group, ch, op == "ConvTranspose" ? "input" : "output", n.input(1));
    }
  }
  return {};
}

Status check_tensor_attributes(const onnx::NodeProto& n, const std::string& label) {
  for (const auto& a : n.attribute()) {
    if (a.has_t())
      FL_TRY(check_dims(a.t().dims(), 0,
                        fmt::format("node {} ({}) attribute {}", label, n.op_type(), a.name())));
    for (const auto& t : a.tensors())
      FL_TRY(check_dims(t.dims(), 0, fmt::format("node {} ({}) attribute {}", label, n.op_type(), a.name())));
  }
  if (n.op_type() == "LRN")
    if (const auto* size = attribute(n, "size"); size && (size->i() < 1 || size->i() > kMaxDim))
      return make_error("node {} (LRN) has size = {}; it must be 1..{}", label, size->i(), kMaxDim);
  return {};
}

Status validate_graph_impl(const onnx::GraphProto& g, bool main) {
  Scope scope;
  // Where each value comes from: -1 for graph inputs and initializers, else the node's index.
  std::unordered_map<std::string, int> producer;
  for (const auto& t : g.initializer()) {
    FL_TRY(check_dims(t.dims(), 0, fmt::format("initializer '{}'", t.name())));
    scope.initializers[t.name()] = &t;
    producer[t.name()] = -1;
  }
  for (const auto& in : g.input()) {
    producer[in.name()] = -1;
    if (scope.initializers.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    if (auto dims = input_dims(in)) {
      if (dims->size() > kMaxRank)
        return make_error("graph input '{}' has rank {}; Floorline accepts ranks up to {}", in.name(),
                          dims->size(), kMaxRank);
      for (size_t k = 0; k < dims->size(); ++k) {
        const auto& dim = in.type().tensor_type().shape().dim(static_cast<int>(k));
        // Zero is legal (an empty tensor: detection exports' unused inputs, an empty past), as a
        // named dim's value 0 is; shape inference runs where a crash is contained.
        if (dim.has_dim_value() && (dim.dim_value() < 0 || dim.dim_value() > kMaxDim))
          return make_error("graph input '{}' has dimension {} at axis {}; dimensions must be 0..{}",
                            in.name(), dim.dim_value(), k, kMaxDim);
      }
      scope.input_dims[in.name()] = *dims;
    }
  }
  const int n = g.node_size();
  for (int i = 0; i < n; ++i) {
    const auto& node = g.node(i);
    for (const auto& out : node.output()) {
      if (out.empty()) continue;
      auto [it, fresh] = producer.emplace(out, i);
      if (fresh) continue;
      const std::string label = node_label(node, static_cast<size_t>(i));
      if (it->second < 0)
        return make_error("node {} ({}) output '{}' overwrites a graph input or initializer of that name",
                          label, node.op_type(), out);
      const auto& first = g.node(it->second);
      return make_error(
          "node {} ({}) output '{}' is already the output of node {} ({}); a value may be "
          "produced once",
          label, node.op_type(), out, node_label(first, static_cast<size_t>(it->second)), first.op_type());
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto& node = g.node(i);
    const std::string label = node_label(node, static_cast<size_t>(i));
    for (const auto& in : node.input()) {
      if (in.empty()) continue;
      const auto it = producer.find(in);
      if (it != producer.end() && it->second == i)
        return make_error("node {} ({}) consumes its own output '{}'", label, node.op_type(), in);
      if (main && it == producer.end())
        return make_error("node {} ({}) reads '{}', which no node, graph input or initializer provides",
                          label, node.op_type(), in);
    }
    if (spatial_op(node.op_type())) FL_TRY(check_spatial_node(node, label, scope));
    FL_TRY(check_tensor_attributes(node, label));
    for (const auto& a : node.attribute()) {
      if (a.has_g()) FL_TRY(validate_graph_impl(a.g(), false));
      for (const auto& sub : a.graphs()) FL_TRY(validate_graph_impl(sub, false));
    }
  }
  if (!main) return {};
  // Cycles: Kahn's algorithm; what it cannot order lies on or behind a cycle.
  std::vector<std::vector<int>> users(static_cast<size_t>(n));
  std::vector<int> indegree(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> preds(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::set<int> deps;
    for (const auto& in : g.node(i).input())
      if (auto it = producer.find(in); !in.empty() && it != producer.end() && it->second >= 0)
        deps.insert(it->second);
    for (int d : deps) {
      users[static_cast<size_t>(d)].push_back(i);
      preds[static_cast<size_t>(i)].push_back(d);
      ++indegree[static_cast<size_t>(i)];
    }
  }
  std::vector<int> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[static_cast<size_t>(i)] == 0) ready.push_back(i);
  int ordered = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    ++ordered;
    for (int u : users[static_cast<size_t>(i)])
      if (--indegree[static_cast<size_t>(u)] == 0) ready.push_back(u);
  }
  if (ordered == n) return {};
  // Walk back through unordered predecessors until a node repeats: that node is on a cycle.
  int at = 0;
  while (indegree[static_cast<size_t>(at)] == 0) ++at;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  while (!seen[static_cast<size_t>(at)]) {
    seen[static_cast<size_t>(at)] = true;
    for (int p : preds[static_cast<size_t>(at)])
      if (indegree[static_cast<size_t>(p)] > 0) {
        at = p;
        break;
      }
  }
  return make_error("graph has a cycle through node {} ({})", node_label(g.node(at), static_cast<size_t>(at)),
                    g.node(at).op_type());
}

}  // namespace

std::string node_label(const onnx::NodeProto& n, size_t index) {
  return n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name();
}

void sanitize_names(onnx::ModelProto& model) {
  for (auto& o : *model.mutable_opset_import()) make_valid_utf8(*o.mutable_domain());
  if (model.has_graph()) sanitize_graph(*model.mutable_graph());
}

Status validate_graph(const onnx::GraphProto& graph) {
  return validate_graph_impl(graph, true);
}

Status check_inferred_dims(const onnx::GraphProto& graph, const onnx::GraphProto& inferred) {
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto& o : graph.node(i).output()) producer[o] = i;
  auto who = [&](const std::string& value) {
    auto it = producer.find(value);
    if (it == producer.end()) return fmt::format("value '{}'", value);
    const auto& node = graph.node(it->second);
    return fmt::format("node {} ({}) output '{}'", node_label(node, static_cast<size_t>(it->second)),
                       node.op_type(), value);
  };
  // Graph inputs last: with the batch set, an input may overflow too, but its consumer names it better.
  for (const auto* list : {&inferred.value_info(), &inferred.output(), &inferred.input()})
    for (const auto& v : *list) {
      if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
      const auto& dims = v.type().tensor_type().shape().dim();
      if (dims.size() > kMaxRank)
        return make_error("{} has rank {}; Floorline accepts ranks up to {}", who(v.name()), dims.size(),
                          kMaxRank);
      Shape all;
      for (const auto& d : dims) all.push_back(d.has_dim_value() ? d.dim_value() : -1);
      int64_t count = 1;
      for (int k = 0; k < static_cast<int>(all.size()); ++k)
        if (all[k] < 0 && dims[k].has_dim_value())
          return make_error("{} has dimension {} at axis {} (an attribute or input makes it negative)",
                            who(v.name()), all[k], k);
      if (!shape_known(all)) continue;
      for (int64_t d : all)
        if (__builtin_mul_overflow(count, d, &count) || count > kMaxElements)
          return make_error("{} has shape {}, more than {} elements", who(v.name()), shape_string(all),
                            kMaxElements);
    }
  return {};
}

Status check_conv_channels(const onnx::GraphProto& graph, const ShapeMap& shapes) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& node = graph.node(i);
    if ((node.op_type() != "Conv" && node.op_type() != "ConvTranspose") || node.input_size() < 2) continue;
    auto xi = shapes.find(node.input(0)), wi = shapes.find(node.input(1));
    if (xi == shapes.end() || wi == shapes.end() || !xi->second.shape || !wi->second.shape) continue;
    const Shape &x = *xi->second.shape, &w = *wi->second.shape;
    if (x.size() < 2 || w.size() < 2) continue;
    int64_t group = 1;
    for (const auto& a : node.attribute())
      if (a.name() == "group") group = a.i();
    if (group < 1) continue;  // validate_graph refused it already
    const int64_t c = x[1];
    const int64_t per_group = node.op_type() == "Conv" ? w[1] : w[0] / group;
    int64_t expected = 0;
    if (c < 0 || per_group < 0 || __builtin_mul_overflow(per_group, group, &expected)) continue;
    if (c != expected)
      return make_error("node {} ({}) input '{}' has {} channels but its weights '{}' and group {} take {}",
                        node_label(node, static_cast<size_t>(i)), node.op_type(), node.input(0), c,
                        node.input(1), group, expected);
  }
  return {};
}

}  // namespace floorline::mp
