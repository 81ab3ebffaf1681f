// Opset-18 forms read as opset 17 (opset18.hpp).
#include "opset18.hpp"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace floorline::mp {
namespace {

const std::set<std::string> kReduceWithAxesInput18 = {"ReduceMean",   "ReduceMax",       "ReduceMin",
                                                      "ReduceProd",   "ReduceL1",        "ReduceL2",
                                                      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

struct Graph {
  onnx::GraphProto& g;
  ExternalDataScope* external;
  std::map<std::string, const onnx::TensorProto*> constants;  // initializers and Constant outputs

  explicit Graph(onnx::GraphProto& graph, ExternalDataScope* ext) : g(graph), external(ext) {
    for (const auto& t : g.initializer()) constants[t.name()] = &t;
    for (const auto& n : g.node())
      if (n.op_type() == "Constant" && n.output_size() == 1)
        for (const auto& a : n.attribute())
          if (a.name() == "value" && a.has_t()) constants[n.output(0)] = &a.t();
  }
  std::optional<ConstTensor> value(const std::string& name) const {
    auto it = constants.find(name);
    if (name.empty() || it == constants.end()) return std::nullopt;
    auto v = read_tensor(*it->second, external);
    if (!v) return std::nullopt;
    return std::move(*v);
  }
};

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
void drop_attr(onnx::NodeProto& n, const std::string& name) {
  auto* attrs = n.mutable_attribute();
  for (int k = 0; k < attrs->size(); ++k)
    if (attrs->Get(k).name() == name) {
      attrs->DeleteSubrange(k, 1);
      return;
    }
}
void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  drop_attr(n, name);
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
// Drops inputs from position k on.
void truncate_inputs(onnx::NodeProto& n, int k) {
  while (n.input_size() > k) n.mutable_input()->RemoveLast();
}

// Ranks of every value ONNX 1.12 can infer on the model read as opset 17 (errors tolerated).
std::map<std::string, int> ranks_of(const onnx::ModelProto& m) {
  onnx::ModelProto copy = m;
  std::map<std::string, int> out;
  try {
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, false));
  } catch (const std::exception&) {
    return out;
  }
  const auto& g = copy.graph();
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
        out[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const auto& t : g.initializer()) out[t.name()] = t.dims_size();
  return out;
}

}  // namespace

std::set<int> rewrite_opset18(onnx::ModelProto& model, ExternalDataScope* external,
                              std::vector<std::string>& warnings) {
  std::set<int> read_as_17;
  Graph G(*model.mutable_graph(), external);
  std::vector<int> need_rank;  // Pad and Resize nodes with axes, done once ranks are known
  int rewritten = 0;
  for (int i = 0; i < G.g.node_size(); ++i) {
    auto& n = *G.g.mutable_node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    const std::string& op = n.op_type();
    if (kReduceWithAxesInput18.count(op)) {
      const auto* noop = attr(n, "noop_with_empty_axes");
      const bool has_axes = n.input_size() > 1 && !n.input(1).empty();
      if (!has_axes) {
        if (noop && noop->i() != 0) continue;  // an identity in opset 18; opset 17 would reduce all
        drop_attr(n, "noop_with_empty_axes");
        read_as_17.insert(i);
        continue;
      }
      auto axes = G.value(n.input(1));
      if (!axes || !axes->is_integer()) continue;
      set_ints(n, "axes", axes->ints());
      truncate_inputs(n, 1);
      drop_attr(n, "noop_with_empty_axes");
      read_as_17.insert(i);
      ++rewritten;
    } else if (op == "ScatterElements") {
      // Opset 18 adds the reductions max and min; the signature and the shapes are opset 16's.
      read_as_17.insert(i);
    } else if (op == "Split") {
      if (attr(n, "num_outputs")) {
        drop_attr(n, "num_outputs");
        ++rewritten;
      }
      read_as_17.insert(i);
    } else if (op == "Pad") {
      if (n.input_size() > 3 && !n.input(3).empty())
        need_rank.push_back(i);
      else
        read_as_17.insert(i);
    } else if (op == "Resize") {
      const auto* aa = attr(n, "antialias");
      const auto* policy = attr(n, "keep_aspect_ratio_policy");
      if ((aa && aa->i() != 0) || (policy && policy->s() != "stretch")) continue;
      drop_attr(n, "antialias");
      drop_attr(n, "keep_aspect_ratio_policy");
      if (attr(n, "axes"))
        need_rank.push_back(i);
      else
        read_as_17.insert(i);
    }
  }
  if (!need_rank.empty()) {
    const auto ranks = ranks_of(model);
    for (int i : need_rank) {
      auto& n = *G.g.mutable_node(i);
      auto r = ranks.find(n.input(0));
      if (r == ranks.end()) continue;
      const int64_t rank = r->second;
      std::vector<int64_t> axes;
      if (n.op_type() == "Pad") {
        auto av = G.value(n.input(3));
        auto pv = G.value(n.input(1));
        if (!av || !pv || !av->is_integer() || !pv->is_integer()) continue;
        axes = av->ints();
      } else if (const auto* a = attr(n, "axes")) {
        axes.assign(a->ints().begin(), a->ints().end());
      }
      for (auto& a : axes) a = a < 0 ? a + rank : a;
      if (std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return a < 0 || a >= rank; })) continue;
      const size_t k = axes.size();
      if (n.op_type() == "Pad") {
        const auto pads = G.value(n.input(1))->ints();
        if (pads.size() != 2 * k) continue;
        std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
        for (size_t j = 0; j < k; ++j) {
          full[static_cast<size_t>(axes[j])] = pads[j];
          full[static_cast<size_t>(axes[j] + rank)] = pads[j + k];
        }
        ConstTensor t;
        t.dtype = DataType::kI64;
        t.dims = {2 * rank};
        t.i = full;
        const std::string name = n.output(0) + "__floorline_pads";
        *G.g.add_initializer() = to_tensor_proto(t, name);
        n.set_input(1, name);
        truncate_inputs(n, 3);
      } else {  // Resize: constant scales over the axes → over every axis
        auto sv = n.input_size() > 2 ? G.value(n.input(2)) : std::nullopt;
        if (!sv || sv->is_integer() || sv->f.size() != k) continue;
        std::vector<double> full(static_cast<size_t>(rank), 1.0);
        for (size_t j = 0; j < k; ++j) full[static_cast<size_t>(axes[j])] = sv->f[j];
        ConstTensor t;
        t.dtype = DataType::kF32;
        t.dims = {rank};
        t.f = full;
        const std::string name = n.output(0) + "__floorline_scales";
        *G.g.add_initializer() = to_tensor_proto(t, name);
        n.set_input(2, name);
        drop_attr(n, "axes");
      }
      read_as_17.insert(i);
      ++rewritten;
    }
  }
  if (rewritten > 0)
    warnings.push_back(
        fmt::format("{} node(s) in their opset-18 form read as their opset-17 equivalent "
                    "(Floorline's own rules: ReduceX axes input, Split num_outputs, Pad axes, "
                    "Resize axes/antialias)",
                    rewritten));
  return read_as_17;
}

}  // namespace floorline::mp
