// Shape inference at one batch size, with constant folding (model_stages.hpp).
#include <unordered_map>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "einsum.hpp"
#include "model_stages.hpp"
#include "validate.hpp"

namespace floorline::mp {
namespace {

// Comparisons that ONNX defines as functions (no inference function in ONNX 1.12).
bool comparison_function(const std::string& op) {
  return op == "GreaterOrEqual" || op == "LessOrEqual";
}
// NumPy broadcasting of two known shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t y = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[k] = x == 1 ? y : x;
  }
  return out;
}

void read_type(const onnx::TypeProto& t, ShapeInfo& info) {
  if (!t.has_tensor_type()) return;
  info.dtype = static_cast<DataType>(t.tensor_type().elem_type());
  if (!t.tensor_type().has_shape()) return;
  Shape s;
  for (const auto& d : t.tensor_type().shape().dim()) s.push_back(d.has_dim_value() ? d.dim_value() : -1);
  info.shape = s;
}

void collect_shapes(const onnx::GraphProto& g, ShapeMap& out) {
  for (const auto& t : g.initializer()) {
    ShapeInfo info;
    info.dtype = static_cast<DataType>(t.data_type());
    info.shape = Shape(t.dims().begin(), t.dims().end());
    out[t.name()] = info;
  }
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& v : *list) {
      ShapeInfo info;
      read_type(v.type(), info);
      auto& slot = out[v.name()];
      if (info.shape || slot.dtype == DataType::kUndefined) slot = info;
    }
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_shapes(a.g(), out);
      for (const auto& sub : a.graphs()) collect_shapes(sub, out);
    }
}

// The model at batch size `batch` and the scenario's named dims (L.dims), on `arena`: a named
// symbolic dim takes its value at every axis, graph inputs take the batch as their first dim
// otherwise, and outputs and value_info lose the shapes ONNX is to infer again.
onnx::ModelProto* batched_model(const Loaded& L, int64_t batch, google::protobuf::Arena& arena) {
  onnx::ModelProto* copy = google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
  copy->CopyFrom(*L.model);
  onnx::ModelProto& m = *copy;
  auto* bg = m.mutable_graph();
  auto named = [&](const onnx::TensorShapeProto::Dimension& d) -> std::optional<int64_t> {
    if (!d.has_dim_param() || d.has_dim_value()) return std::nullopt;
    for (const auto& [name, value] : L.dims)
      if (name == d.dim_param()) return value;
    return std::nullopt;
  };
  for (auto& in : *bg->mutable_input()) {
    if (L.initializers.count(in.name())) continue;  // IR < 4 lists initializers as inputs
    auto* tt = in.mutable_type()->mutable_tensor_type();
    if (!tt->has_shape() || tt->shape().dim_size() == 0) continue;
    for (auto& d : *tt->mutable_shape()->mutable_dim())
      if (auto v = named(d)) d.set_dim_value(*v);
    auto* d0 = tt->mutable_shape()->mutable_dim(0);
    if (d0->has_dim_param() || !d0->has_dim_value() || d0->dim_value() == 1) d0->set_dim_value(batch);
  }
  for (auto& out : *bg->mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  bg->clear_value_info();
  return copy;
}

// Replaces the nodes of `work` (a fresh batched copy) by those not evaluated, and adds the evaluated
// nodes' outputs as initializers holding their folded values.
void feed_back_folded(const onnx::GraphProto& graph, const std::vector<bool>& evaluated, Inference& inf,
                      onnx::ModelProto& work) {
  const int node_count = graph.node_size();
  auto* wg = work.mutable_graph();
  wg->clear_node();
  for (int idx = 0; idx < node_count; ++idx)
    if (!evaluated[idx]) *wg->add_node() = graph.node(idx);
  for (int idx = 0; idx < node_count; ++idx)
    if (evaluated[idx])
      for (const auto& name : graph.node(idx).output())
        *wg->add_initializer() = to_tensor_proto(inf.values[name], name);
}

// Folded outputs that ONNX typed only through initializers keep their dims from the values.
void shapes_from_values(Inference& inf) {
  for (const auto& [name, v] : inf.values) {
    auto& slot = inf.shapes[name];
    slot.dtype = v.dtype;
    slot.shape = v.dims;
  }
}

// ONNX 1.12 takes a literal Reshape target as given; the element counts must still agree.
Status check_reshape_counts(const onnx::GraphProto& graph, const Inference& inf) {
  for (int idx = 0; idx < graph.node_size(); ++idx) {
    const auto& node = graph.node(idx);
    if (node.op_type() != "Reshape" || inf.folded[idx] || node.input_size() < 1) continue;
    auto in = inf.shapes.find(node.input(0)), out = inf.shapes.find(node.output(0));
    if (in == inf.shapes.end() || out == inf.shapes.end() || !in->second.shape || !out->second.shape)
      continue;
    const int64_t a = numel(*in->second.shape), b = numel(*out->second.shape);
    if (a >= 0 && b >= 0 && a != b)
      return make_error("node {} (Reshape) reshapes {} ({} elements) to {} ({} elements)",
                        node_label(node, idx), shape_string(*in->second.shape), a,
                        shape_string(*out->second.shape), b);
  }
  return {};
}

}  // namespace

Result<Inference> infer_at_batch(const Loaded& L, int64_t batch, const ProcessOptions& opts) {
  Inference inf;
  inf.batch = batch;
  const auto& graph = L.model->graph();
  const int node_count = graph.node_size();
  inf.folded.assign(node_count, false);
  std::vector<bool> evaluated(node_count, false);

  // The working copies of the model live on one arena, freed at once at the end (as Loaded::model).
  google::protobuf::Arena arena(reused_arena_options(ArenaSlot::kInference));
  // The model at this batch size. Built again only for a second whole-graph round (rare): a copy of
  // a large graph costs about as much as ONNX's inference of it.
  auto batched = [&] { return batched_model(L, batch, arena); };
  for (const auto& t : graph.initializer()) inf.constant.insert(t.name());

  std::unordered_map<std::string, ConstTensor> init_values;  // lazily read initializer values
  auto value_of = [&](const std::string& name) -> const ConstTensor* {
    if (auto it = inf.values.find(name); it != inf.values.end()) return &it->second;
    if (auto it = init_values.find(name); it != init_values.end()) return &it->second;
    auto t = L.initializers.find(name);
    if (t == L.initializers.end()) return nullptr;
    const auto& proto = *t->second;
    if (tensor_numel(proto) > opts.max_folded_elements || payload_dropped(proto)) return nullptr;
    auto v = read_tensor(proto, &L.external);
    if (!v) {
      inf.missing_values.push_back(v.error().message);
      return nullptr;
    }
    return &init_values.emplace(name, std::move(*v)).first->second;
  };

  const auto* registry = onnx::OpSchemaRegistry::Instance();
  onnx::ModelProto* work = batched();
  int64_t folded_total = 0;
  for (int iteration = 0; iteration < 200; ++iteration) {
    try {
      onnx::shape_inference::InferShapes(*work, registry, onnx::ShapeInferenceOptions(false, 1, true));
    } catch (const std::bad_alloc&) {
      throw;  // the memory budget of the isolated child: reported by the parent
    } catch (const std::exception& e) {
      std::string msg = clean_onnx_message(e.what());
      if (msg.find("external tensors") != std::string::npos && !L.unreadable_external.empty())
        return make_error("shape inference needs values stored as external data: {}",
                          L.unreadable_external.front());
      return make_error("shape inference failed at batch {}: {}", batch, msg);
    }
    FL_TRY(check_inferred_dims(graph, work->graph()));
    inf.shapes.clear();
    collect_shapes(work->graph(), inf.shapes);

    // One topological sweep: fold what is constant; for the rest run the node's own ONNX inference
    // function on the types known so far, so that a Shape further down folds in this same sweep
    // instead of waiting for another whole-graph round.
    // The types ONNX's per-node functions see. An entry is made from inf.shapes when a node that is
    // typed first reads it (most tensors are never read: see `typed` below), and replaced when the
    // sweep types, folds or assumes the tensor.
    std::unordered_map<std::string, onnx::TypeProto> types;
    std::unordered_map<std::string, onnx::TypeProto*> type_ptrs;
    std::unordered_map<std::string, onnx::TensorProto> data;
    std::unordered_map<std::string, const onnx::TensorProto*> data_ptrs;
    auto type_of = [&](const std::string& name) -> const onnx::TypeProto* {
      if (auto it = type_ptrs.find(name); it != type_ptrs.end()) return it->second;
      auto s = inf.shapes.find(name);
      if (s == inf.shapes.end() || s->second.dtype == DataType::kUndefined) return nullptr;
      auto& t = types[name];
      auto* tt = t.mutable_tensor_type();
      tt->set_elem_type(static_cast<int32_t>(s->second.dtype));
      if (s->second.shape) {
        auto* shape = tt->mutable_shape();
        for (int64_t d : *s->second.shape) {
          auto* dim = shape->add_dim();
          if (d >= 0) dim->set_dim_value(d);
        }
      }
      type_ptrs[name] = &t;
      return &t;
    };
    // Whether every output of the node already has a type and fully known dims: then the node's own
    // inference function could only find them again (the whole-graph round typed it), and the sweep
    // passes it by.
    auto typed = [&](const onnx::NodeProto& n) {
      for (const auto& name : n.output()) {
        if (name.empty()) continue;
        auto it = inf.shapes.find(name);
        if (it == inf.shapes.end() || it->second.dtype == DataType::kUndefined || !it->second.shape ||
            !shape_known(*it->second.shape))
          return false;
      }
      return true;
    };
    for (const auto& t : work->graph().initializer()) data_ptrs[t.name()] = &t;
    auto set_shape = [&](const std::string& name, DataType dtype, const std::optional<Shape>& shape) {
      auto& slot = inf.shapes[name];
      slot.dtype = dtype;
      slot.shape = shape;
    };

    bool progress = false;
    // Whether this sweep typed every node it did not fold with fully known shapes, and folded every
    // node it tried to: then another whole-graph round would only repeat what the sweep found.
    bool complete = true;
    for (int idx = 0; idx < node_count; ++idx) {
      const auto& node = graph.node(idx);
      if (inf.folded[idx]) continue;
      // NonZero and NonMaxSuppression: how many elements they select depends on the data. Their
      // count is taken to be opts.max_detections (smaller where the input bounds it), so that the
      // detection heads downstream get concrete shapes; the report states the assumption.
      auto assume_data_dependent = [&](const onnx::NodeProto& n) {
        if (!data_dependent(n.op_type())) return;
        const bool nonzero = n.op_type() == "NonZero", nms = !nonzero;
        if (n.output_size() < 1 || n.input_size() < (nms ? 2 : 1)) return;
        auto in = inf.shapes.find(n.input(nonzero ? 0 : 1));
        if (in == inf.shapes.end() || !in->second.shape || !shape_known(*in->second.shape) ||
            (nms && in->second.shape->size() != 3)) {
          complete = false;
          return;
        }
        const Shape& x = *in->second.shape;
        const int64_t bound = numel(x);  // NonZero: every element; NMS: every (batch, class, box)
        const int64_t count = bound < 0 ? opts.max_detections : std::min(bound, opts.max_detections);
        const Shape out = nonzero ? Shape{static_cast<int64_t>(x.size()), count} : Shape{count, 3};
        auto& t = types[n.output(0)];
        t.Clear();
        t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(DataType::kI64));
        for (int64_t d : out) t.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
        type_ptrs[n.output(0)] = &t;
        set_shape(n.output(0), DataType::kI64, out);
      };
      // Types the node's outputs with ONNX's own inference function for this op, on the types
      // known so far.
      auto type_node = [&](const onnx::NodeProto& target) {
        if (typed(target)) return;
        for (const auto& name : target.input()) type_of(name);
        const auto* schema = registry->GetSchema(target.op_type(), static_cast<int>(L.opset), "");
        if (schema && !schema->has_type_and_shape_inference_function() &&
            comparison_function(target.op_type()) && target.input_size() == 2 && target.output_size() == 1 &&
            !target.output(0).empty()) {
          // GreaterOrEqual/LessOrEqual (opset 12 and 16) are ONNX functions with no inference
          // function of their own in ONNX 1.12: bool of the inputs' NumPy-broadcast shape. Without
          // this rule a detection head's comparison on a --max-detections count loses its shape.
          std::vector<Shape> shapes;
          for (const auto& name : target.input()) {
            auto it = inf.shapes.find(name);
            if (it == inf.shapes.end() || !it->second.shape || !shape_known(*it->second.shape)) break;
            shapes.push_back(*it->second.shape);
          }
          const auto out = shapes.size() == 2 ? broadcast_shapes(shapes[0], shapes[1]) : std::nullopt;
          if (!out) {
            complete = false;
            return;
          }
          auto& t = types[target.output(0)];
          t.Clear();
          t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(DataType::kBool));
          for (int64_t d : *out) t.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
          type_ptrs[target.output(0)] = &t;
          set_shape(target.output(0), DataType::kBool, *out);
          return;
        }
        if (!schema || !schema->has_type_and_shape_inference_function()) {
          complete = false;
          return;
        }
        onnx::NodeProto copy = target;
        try {
          onnx::shape_inference::InferenceContextImpl ctx(copy, type_ptrs, data_ptrs, {});
          schema->GetTypeAndShapeInferenceFunction()(ctx);
          for (int k = 0; k < target.output_size(); ++k) {
            if (target.output(k).empty()) continue;
            const auto* out = ctx.getOutputType(static_cast<size_t>(k));
            if (!out || !out->has_tensor_type()) {
              complete = false;
              continue;
            }
            types[target.output(k)] = *out;
            type_ptrs[target.output(k)] = &types[target.output(k)];
            ShapeInfo info;
            read_type(*out, info);
            if (info.shape) set_shape(target.output(k), info.dtype, info.shape);
            // (NonZero's and NonMaxSuppression's sizes are assumed below.)
            if ((!info.shape || !shape_known(*info.shape) || info.dtype == DataType::kUndefined) &&
                !(k == 0 && data_dependent(target.op_type())))
              complete = false;
          }
        } catch (const std::bad_alloc&) {
          throw;
        } catch (const std::exception&) {
          // The whole-graph inference below is the authority and reports errors.
          complete = false;
        }
        // ONNX 1.12 infers an Einsum's rank only: Floorline's own rule gives its dims.
        if (target.op_type() == "Einsum" && target.output_size() == 1 && !target.output(0).empty() &&
            types.count(target.output(0))) {
          std::string equation;
          for (const auto& a : target.attribute())
            if (a.name() == "equation") equation = a.s();
          std::vector<Shape> operands;
          for (const auto& name : target.input()) {
            auto it = inf.shapes.find(name);
            operands.push_back(it != inf.shapes.end() && it->second.shape ? *it->second.shape : Shape{-1});
          }
          if (auto y = einsum_output_shape(equation, operands)) {
            auto& t = types[target.output(0)];
            auto* shape = t.mutable_tensor_type()->mutable_shape();
            shape->clear_dim();
            for (int64_t d : *y) shape->add_dim()->set_dim_value(d);
            set_shape(target.output(0), static_cast<DataType>(t.tensor_type().elem_type()), *y);
          }
        }
        assume_data_dependent(target);
      };
      // A branch's Constant is folded (Unsqueeze's inference needs its axes' values), the rest typed.
      auto type_branch_node = [&](const onnx::NodeProto& sub) {
        if (sub.op_type() != "Constant" || sub.output_size() != 1) {
          type_node(sub);
          return;
        }
        auto outs = evaluate_node(sub, L.opset, {}, {}, opts.max_folded_elements);
        if (!outs || outs->size() != 1 || (*outs)[0].size() > 64) {
          type_node(sub);
          return;
        }
        const std::string& name = sub.output(0);
        const ConstTensor& v = (*outs)[0];
        set_shape(name, v.dtype, v.dims);
        data[name] = to_tensor_proto(v, name);
        data_ptrs[name] = &data[name];
        auto& t = types[name];
        t.Clear();
        t.mutable_tensor_type()->set_elem_type(static_cast<int32_t>(v.dtype));
        auto* shape = t.mutable_tensor_type()->mutable_shape();
        for (int64_t d : v.dims) shape->add_dim()->set_dim_value(d);
        type_ptrs[name] = &t;
      };
      // If: type the branches' nodes too (detection heads run NonMaxSuppression in a branch), so
      // that their layers get shapes; the If itself stays for the whole-graph inference.
      if (node.op_type() == "If") {
        for (const auto& a : node.attribute())
          if (a.has_g())
            for (const auto& sub : a.g().node())
              if (default_domain(sub.domain()) && sub.op_type() != "If" && sub.op_type() != "Loop" &&
                  sub.op_type() != "Scan")
                type_branch_node(sub);
        // A condition known at load time picks the branch, and the If's outputs take its types.
        auto cond = inf.values.find(node.input_size() > 0 ? node.input(0) : "");
        if (cond != inf.values.end() && cond->second.size() == 1) {
          const char* branch = cond->second.as_double(0) != 0 ? "then_branch" : "else_branch";
          for (const auto& a : node.attribute()) {
            if (a.name() != branch || !a.has_g()) continue;
            for (int k = 0; k < node.output_size() && k < a.g().output_size(); ++k) {
              const onnx::TypeProto* branch_type = type_of(a.g().output(k).name());
              if (!branch_type || node.output(k).empty()) continue;
              const onnx::TypeProto copy = *branch_type;
              types[node.output(k)] = copy;
              type_ptrs[node.output(k)] = &types[node.output(k)];
              ShapeInfo info;
              read_type(copy, info);
              if (info.shape) set_shape(node.output(k), info.dtype, info.shape);
            }
          }
        }
      }
      if (!default_domain(node.domain()) || is_nondeterministic_op(node.op_type()) ||
          node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan") {
        complete = false;
        continue;
      }
      const bool shape_op = node.op_type() == "Shape" || node.op_type() == "Size";
      std::vector<std::optional<Shape>> in_shapes;
      bool all_const = true;
      for (const auto& name : node.input()) {
        auto s = inf.shapes.find(name);
        in_shapes.push_back(s == inf.shapes.end() ? std::nullopt : s->second.shape);
        if (!name.empty() && !inf.constant.count(name)) all_const = false;
      }
      if (shape_op) all_const = !in_shapes.empty() && in_shapes[0] && shape_known(*in_shapes[0]);
      if (!all_const) {
        type_node(node);  // not constant
        continue;
      }

      std::vector<const ConstTensor*> ins;
      for (const auto& name : node.input())
        ins.push_back(name.empty() || shape_op ? nullptr : value_of(name));
      auto outs = evaluate_node(node, L.opset, ins, in_shapes, opts.max_folded_elements);
      inf.folded[idx] = true;
      for (const auto& name : node.output()) inf.constant.insert(name);
      // Not folded (a value not stored, an op the folder lacks, over the budget): a later round can
      // still type its outputs if this one has not. Typing them now with the op's own inference
      // function (Swin's ScatterND on constant masks) spares that whole-graph round.
      auto not_folded = [&] {
        for (const auto& name : node.output()) {
          auto it = inf.shapes.find(name);
          if (!name.empty() &&
              (it == inf.shapes.end() || !it->second.shape || !shape_known(*it->second.shape))) {
            type_node(node);
            return;
          }
        }
      };
      if (!outs || outs->size() != static_cast<size_t>(node.output_size())) {
        not_folded();
        continue;
      }
      // All folded values of one inference together stay within a budget too: a chain of
      // ConstantOfShape nodes each under the per-tensor cap must not add up without bound.
      int64_t size = 0;
      for (const auto& v : *outs) size += v.size();
      if (size > opts.max_folded_total - folded_total) {
        not_folded();
        continue;
      }
      folded_total += size;
      evaluated[idx] = true;
      progress = true;
      for (int k = 0; k < node.output_size(); ++k) {
        const std::string& name = node.output(k);
        auto& v = inf.values[name] = std::move((*outs)[k]);
        set_shape(name, v.dtype, v.dims);
        data[name] = to_tensor_proto(v, name);
        data_ptrs[name] = &data[name];
        auto& t = types[name];
        t.Clear();
        auto* tt = t.mutable_tensor_type();
        tt->set_elem_type(static_cast<int32_t>(v.dtype));
        auto* shape = tt->mutable_shape();
        for (int64_t d : v.dims) shape->add_dim()->set_dim_value(d);
        type_ptrs[name] = &t;
      }
    }
    // Nothing folded: the round's shapes are final. All typed by the sweep: so are they (a second
    // whole-graph round, the costliest step on shape-heavy graphs such as Swin's, would find the
    // same shapes).
    if (!progress || complete) break;

    // Feed the folded values back as initializers and infer again: shapes that hung on them resolve.
    work = batched();
    feed_back_folded(graph, evaluated, inf, *work);
  }
  shapes_from_values(inf);
  FL_TRY(check_reshape_counts(graph, inf));
  FL_TRY(check_conv_channels(graph, inf.shapes));
  return inf;
}

}  // namespace floorline::mp
