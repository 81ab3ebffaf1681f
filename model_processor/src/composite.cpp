// Operators read as their decomposition (composite.hpp). Each rule follows the operator's
// definition: ONNX's function bodies for Gelu-20, RMSNormalization-23, RotaryEmbedding-23 and
// Attention-23 (onnx/defs), ONNX Runtime's docs/ContribOperators.md for the com.microsoft ones.
#include "composite.hpp"

#include <fmt/format.h>

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "model_stages.hpp"
#include "validate.hpp"

namespace floorline::mp {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

const AttributeProto* find_attr(const NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t attr_i(const NodeProto& n, const char* name, int64_t fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}
float attr_f(const NodeProto& n, const char* name, float fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}
std::string attr_s(const NodeProto& n, const char* name, const std::string& fallback) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : fallback;
}

AttributeProto int_attr(const std::string& name, int64_t v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INT);
  a.set_i(v);
  return a;
}
AttributeProto float_attr(const std::string& name, float v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}
AttributeProto ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

// IEEE half (round to nearest even) and bfloat16 (round to nearest even) bits of a float.
uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // the constants used here are never subnormal
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}
uint16_t bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

bool is_float_type(int t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 ||
         t == TensorProto::BFLOAT16;
}

// The element types and ranks the model declares (graph inputs, outputs, value_info,
// initializers). Shape inference is not run here: it runs only where a crash is contained
// (inference_worker.cpp).
class GraphFacts {
 public:
  explicit GraphFacts(const onnx::ModelProto& m) {
    const auto& g = m.graph();
    for (const auto& t : g.initializer()) {
      ranks_[t.name()] = t.dims_size();
      types_[t.name()] = t.data_type();
      if (is_float_type(t.data_type())) ++float_counts_[t.data_type()];
    }
    for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
      for (const auto& v : *list)
        if (v.type().has_tensor_type()) {
          types_.emplace(v.name(), v.type().tensor_type().elem_type());
          if (v.type().tensor_type().has_shape()) {
            const auto& shape = v.type().tensor_type().shape();
            ranks_.emplace(v.name(), shape.dim_size());
            if (shape.dim_size() > 0 && shape.dim(shape.dim_size() - 1).has_dim_value())
              last_dims_.emplace(v.name(), shape.dim(shape.dim_size() - 1).dim_value());
          }
        }
    for (const auto& t : g.initializer())
      if (t.dims_size() > 0) last_dims_[t.name()] = t.dims(t.dims_size() - 1);
  }
  // The model's float type: its most common float initializer type (f32 where it has none).
  int float_type() const {
    int best = TensorProto::FLOAT, count = 0;
    for (const auto& [t, c] : float_counts_)
      if (c > count) best = t, count = c;
    return best;
  }
  std::optional<int> rank(const std::string& name) const {
    auto it = ranks_.find(name);
    return it == ranks_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  // The last dim of a value where the model gives it as a number (an initializer's, a declared shape's).
  std::optional<int64_t> last_dim(const std::string& name) const {
    auto it = last_dims_.find(name);
    return it == last_dims_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  // The element type the model declares for a value (0 where it declares none).
  int elem_type(const std::string& name) const {
    auto it = types_.find(name);
    return it == types_.end() ? 0 : it->second;
  }

 private:
  std::map<int, int> float_counts_;
  std::map<std::string, int> ranks_;
  std::map<std::string, int> types_;
  std::map<std::string, int64_t> last_dims_;
};

// Writes one node's decomposition: nodes named "<base>/<part>", values "<base>/<part>[:k]",
// constants as initializers "<base>/c<k>".
class Builder {
 public:
  Builder(std::string base, int float_type) : base_(std::move(base)), float_type_(float_type) {}

  std::vector<std::string> add(const std::string& op, const std::vector<std::string>& in,
                               const std::string& part, int outputs = 1,
                               const std::vector<AttributeProto>& attrs = {},
                               const std::vector<std::string>& out_names = {}) {
    NodeProto n;
    n.set_op_type(op);
    n.set_name(fmt::format("{}/{}", base_, unique(part)));
    for (const auto& i : in) n.add_input(i);
    std::vector<std::string> outs;
    for (int k = 0; k < outputs; ++k) {
      std::string name = k < static_cast<int>(out_names.size()) && !out_names[static_cast<size_t>(k)].empty()
                             ? out_names[static_cast<size_t>(k)]
                             : (outputs == 1 ? n.name() : fmt::format("{}:{}", n.name(), k));
      n.add_output(name);
      outs.push_back(std::move(name));
    }
    for (const auto& a : attrs) *n.add_attribute() = a;
    nodes.push_back(std::move(n));
    return outs;
  }
  std::string one(const std::string& op, const std::vector<std::string>& in, const std::string& part,
                  const std::vector<AttributeProto>& attrs = {}, const std::string& out = "") {
    return add(op, in, part, 1, attrs, {out})[0];
  }
  // A scalar of the model's float type.
  std::string scalar(float v) {
    TensorProto t;
    t.set_name(fmt::format("{}/c{}", base_, inits.size()));
    t.set_data_type(float_type_);
    switch (float_type_) {
      case TensorProto::DOUBLE:
        t.add_double_data(v);
        break;
      case TensorProto::FLOAT16:
        t.add_int32_data(half_bits(v));
        break;
      case TensorProto::BFLOAT16:
        t.add_int32_data(bf16_bits(v));
        break;
      default:
        t.add_float_data(v);
    }
    inits.push_back(t);
    return t.name();
  }
  std::string ints(const std::vector<int64_t>& v, bool scalar_shape = false) {
    TensorProto t;
    t.set_name(fmt::format("{}/c{}", base_, inits.size()));
    t.set_data_type(TensorProto::INT64);
    if (!scalar_shape) t.add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t.add_int64_data(x);
    inits.push_back(t);
    return t.name();
  }

  // Common pieces.
  std::string transpose(const std::string& x, const std::vector<int64_t>& perm, const std::string& part) {
    return one("Transpose", {x}, part, {ints_attr("perm", perm)});
  }
  std::string reshape(const std::string& x, const std::vector<int64_t>& shape, const std::string& part,
                      const std::string& out = "") {
    return one("Reshape", {x, ints(shape)}, part, {}, out);
  }
  // y = x / sqrt(mean(x², axes) + eps) · scale, as PyTorch writes RMSNorm (x·rsqrt(...)·w).
  std::string rms_norm(const std::string& x, const std::string& scale, int64_t axis, float eps,
                       const std::string& out) {
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < 0; ++a) axes.push_back(a);
    const std::string sq = one("Pow", {x, scalar(2.0f)}, "square");
    const std::string mean =
        one("ReduceMean", {sq}, "mean_square", {ints_attr("axes", axes), int_attr("keepdims", 1)});
    const std::string var = one("Add", {mean, scalar(eps)}, "add_epsilon");
    const std::string rms = one("Sqrt", {var}, "rms");
    const std::string inv = one("Reciprocal", {rms}, "inverse_rms");
    const std::string normed = one("Mul", {x, inv}, "normalize");
    return one("Mul", {normed, scale}, "scale", {}, out);
  }
  // GELU as PyTorch 1.13 writes it (the chains gelu.hpp collapses into one Gelu layer).
  std::string gelu(const std::string& x, bool tanh_form, const std::string& out) {
    std::string v;
    if (tanh_form) {
      const std::string cube = one("Pow", {x, scalar(3.0f)}, "cube");
      const std::string cubic = one("Mul", {scalar(0.044715f), cube}, "cubic_term");
      const std::string inner = one("Add", {x, cubic}, "inner");
      const std::string scaled = one("Mul", {scalar(0.7978845608028654f), inner}, "scale_sqrt_2_over_pi");
      const std::string t = one("Tanh", {scaled}, "tanh");
      v = one("Add", {t, scalar(1.0f)}, "one_plus");
    } else {
      const std::string t = one("Div", {x, scalar(1.4142135623730951f)}, "div_sqrt2");
      const std::string e = one("Erf", {t}, "erf");
      v = one("Add", {e, scalar(1.0f)}, "one_plus");
    }
    const std::string xv = one("Mul", {x, v}, "mul_x");
    return one("Mul", {xv, scalar(0.5f)}, "half", {}, out);
  }
  // Rotation of `x` (its last axis the head size, rotated over its first `rot` entries, or all of
  // it where rot is 0) by the angle tables `cos`, `sin` (last axis rot / 2, broadcast against x's
  // leading axes): halves (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin), or, interleaved, the
  // pairs (x[2i], x[2i+1]) alike. `rank` is x's rank.
  std::string rotate(const std::string& x, const std::string& cos, const std::string& sin, bool interleaved,
                     int64_t rot, int rank, const std::string& out) {
    std::string part = x, pass;
    if (rot > 0) {
      part = one("Slice", {x, ints({0}), ints({rot}), ints({-1})}, "rotary_part");
      pass = one("Slice", {x, ints({rot}), ints({INT64_MAX}), ints({-1})}, "pass_part");
    }
    std::string c = cos, s = sin, a, b;
    if (interleaved) {
      std::vector<int64_t> pairs(static_cast<size_t>(rank - 1), 0);
      pairs.push_back(-1);
      pairs.push_back(2);
      const std::string p = reshape(part, pairs, "pairs");
      const auto ab = add("Split", {p}, "split_pairs", 2, {int_attr("axis", -1)});
      a = ab[0], b = ab[1];
      c = one("Unsqueeze", {cos, ints({-1})}, "cos_pairs");
      s = one("Unsqueeze", {sin, ints({-1})}, "sin_pairs");
    } else {
      const auto ab = add("Split", {part}, "split_halves", 2, {int_attr("axis", -1)});
      a = ab[0], b = ab[1];
    }
    const std::string r1 = one("Sub", {one("Mul", {a, c}, "a_cos"), one("Mul", {b, s}, "b_sin")}, "first");
    const std::string r2 = one("Add", {one("Mul", {b, c}, "b_cos"), one("Mul", {a, s}, "a_sin")}, "second");
    const bool last = rot == 0 && !interleaved;
    std::string y = one("Concat", {r1, r2}, "rotated", {int_attr("axis", -1)}, last ? out : "");
    if (interleaved) {
      std::vector<int64_t> back(static_cast<size_t>(rank - 1), 0);
      back.push_back(-1);
      y = reshape(y, back, "unpair", rot == 0 ? out : "");
    }
    if (rot > 0) y = one("Concat", {y, pass}, "with_pass", {int_attr("axis", -1)}, out);
    return y;
  }
  // The angle tables for positions `pos` ([B, S] int64) from caches [max positions, rot / 2].
  std::pair<std::string, std::string> angles(const std::string& cos_cache, const std::string& sin_cache,
                                             const std::string& pos) {
    return {one("Gather", {cos_cache, pos}, "cos", {int_attr("axis", 0)}),
            one("Gather", {sin_cache, pos}, "sin", {int_attr("axis", 0)})};
  }
  // Positions 0 .. S − 1 as [1, S], S being axis `axis` of `x`: the shapes of the tables the
  // positions of the new tokens select (which positions they are does not change the work).
  std::string positions(const std::string& x, int64_t axis) {
    const std::string shape = one("Shape", {x}, "shape");
    const std::string len =
        one("Gather", {shape, ints({axis}, true)}, "sequence_length", {int_attr("axis", 0)});
    const std::string range = one("Range", {ints({0}, true), len, ints({1}, true)}, "positions");
    return one("Unsqueeze", {range, ints({0})}, "positions_row");
  }
  // 1/√(head size), head size the last axis of `x`, as a constant once shapes are known.
  std::string inverse_sqrt_head(const std::string& x) {
    const std::string shape = one("Shape", {x}, "head_shape");
    const std::string h = one("Gather", {shape, ints({-1}, true)}, "head_size", {int_attr("axis", 0)});
    const std::string hf = one("Cast", {h}, "head_size_float", {int_attr("to", float_type_)});
    return one("Reciprocal", {one("Sqrt", {hf}, "sqrt_head_size")}, "inverse_sqrt_head_size");
  }
  // Axes [from, to) of the shape of `x`, a constant once shapes are known.
  std::string dims(const std::string& shape, int64_t from, int64_t to) {
    return one("Slice", {shape, ints({from}), ints({to}), ints({0})}, "dims");
  }
  std::string concat_dims(const std::vector<std::string>& parts, const std::string& part) {
    return one("Concat", parts, part, {int_attr("axis", 0)});
  }
  // Scaled dot-product attention of q [B, Nq, S, H] over k [B, Nkv, T, H] and v [B, Nkv, T, Hv],
  // Nq a multiple g of Nkv (g = 1: one key/value head per query head). The queries of the g heads
  // that share a key/value head are stacked, as grouped-query kernels do: q (scaled) viewed as
  // [B, Nkv, g·S, H]; scores = q·kᵀ [B, Nkv, g·S, T]; an optional softcap (c·tanh(scores / c));
  // `bias` ("" for none), broadcast to [B, Nq, S, T], added to the scores viewed per query head;
  // softmax over T; ·v, viewed back as [B, Nq, S, Hv]. The views' shapes are computed from the
  // operands' (folded to constants once shapes are known), so no head count is needed. A causal
  // or padding mask that a runtime applies inside its kernel adds no pass here.
  std::string attend(const std::string& q, const std::string& k, const std::string& v, float scale,
                     float softcap, const std::string& bias, const std::string& out = "") {
    const std::string s = scale != 0.0f ? scalar(scale) : inverse_sqrt_head(q);
    const std::string qs = one("Shape", {q}, "query_shape");
    const std::string ks = one("Shape", {k}, "key_shape");
    const std::string vs = one("Shape", {v}, "value_shape");
    const std::string grouped =
        concat_dims({dims(qs, 0, 1), dims(ks, 1, 2), ints({-1}), dims(qs, 3, 4)}, "grouped_shape");
    const std::string qg = one("Reshape", {one("Mul", {q, s}, "scale_q"), grouped}, "group_queries");
    const std::string kt = transpose(k, {0, 1, 3, 2}, "key_transposed");
    std::string scores = one("MatMul", {qg, kt}, "scores");
    if (softcap != 0.0f) {
      const std::string d = one("Div", {scores, scalar(softcap)}, "softcap_div");
      scores = one("Mul", {one("Tanh", {d}, "softcap_tanh"), scalar(softcap)}, "softcap_mul");
    }
    if (!bias.empty()) {
      const std::string per_head =
          one("Reshape", {scores, concat_dims({dims(qs, 0, 3), ints({-1})}, "per_head_shape")},
              "scores_per_head");
      const std::string biased = one("Add", {per_head, bias}, "attention_bias");
      const std::string regroup =
          concat_dims({dims(qs, 0, 1), dims(ks, 1, 2), ints({-1}), dims(ks, 2, 3)}, "regrouped_shape");
      scores = one("Reshape", {biased, regroup}, "regroup_scores");
    }
    const std::string probs = one("Softmax", {scores}, "softmax", {int_attr("axis", -1)});
    const std::string ctx = one("MatMul", {probs, v}, "context");
    return one("Reshape", {ctx, concat_dims({dims(qs, 0, 3), dims(vs, 3, 4)}, "output_shape")},
               "ungroup_heads", {}, out);
  }

  std::vector<NodeProto> nodes;
  std::vector<TensorProto> inits;

 private:
  std::string unique(const std::string& part) {
    const int k = used_[part]++;
    return k == 0 ? part : fmt::format("{}_{}", part, k);
  }
  std::string base_;
  int float_type_;
  std::map<std::string, int> used_;
};

std::string input(const NodeProto& n, int k) {
  return k < n.input_size() ? n.input(k) : std::string();
}
std::string output(const NodeProto& n, int k) {
  return k < n.output_size() ? n.output(k) : std::string();
}

// Outputs at positions `from` on that the decomposition does not write, named: the node stays.
std::optional<std::string> unwritten_outputs(const NodeProto& n, std::initializer_list<int> not_written) {
  for (int k : not_written)
    if (!output(n, k).empty())
      return fmt::format("its output {} ('{}') is not written by the decomposition", k, output(n, k));
  return std::nullopt;
}

struct Rule {
  std::string op;
  // Fills `b` with the node's decomposition, or returns why it cannot.
  std::optional<std::string> (*expand)(const NodeProto&, Builder&, GraphFacts&);
};

std::optional<std::string> simplified_layer_norm(const NodeProto& n, Builder& b, GraphFacts&) {
  if (auto why = unwritten_outputs(n, {1})) return why;
  const int64_t axis = attr_i(n, "axis", -1);
  if (axis >= 0) return fmt::format("axis {} is not counted from the end", axis);
  b.rms_norm(input(n, 0), input(n, 1), axis, attr_f(n, "epsilon", 1e-5f), output(n, 0));
  return std::nullopt;
}

// sum = input + skip (+ bias); then the normalization. Output 3 is the sum.
std::string skip_sum(const NodeProto& n, Builder& b, int bias_input) {
  const bool bias = !input(n, bias_input).empty();
  std::string sum = b.one("Add", {input(n, 0), input(n, 1)}, "skip_add", {}, bias ? "" : output(n, 3));
  if (bias) sum = b.one("Add", {sum, input(n, bias_input)}, "bias_add", {}, output(n, 3));
  return sum;
}

std::optional<std::string> skip_simplified_layer_norm(const NodeProto& n, Builder& b, GraphFacts&) {
  if (auto why = unwritten_outputs(n, {1, 2})) return why;
  const std::string sum = skip_sum(n, b, 3);
  b.rms_norm(sum, input(n, 2), -1, attr_f(n, "epsilon", 1e-5f), output(n, 0));
  return std::nullopt;
}

std::optional<std::string> skip_layer_norm(const NodeProto& n, Builder& b, GraphFacts&) {
  if (auto why = unwritten_outputs(n, {1, 2})) return why;
  const std::string sum = skip_sum(n, b, 4);
  std::vector<std::string> in = {sum, input(n, 2)};
  if (!input(n, 3).empty()) in.push_back(input(n, 3));
  b.one("LayerNormalization", in, "layer_norm",
        {int_attr("axis", -1), float_attr("epsilon", attr_f(n, "epsilon", 1e-12f))}, output(n, 0));
  return std::nullopt;
}

std::optional<std::string> rms_normalization(const NodeProto& n, Builder& b, GraphFacts&) {
  if (attr_i(n, "axis", -1) >= 0)
    return fmt::format("axis {} is not counted from the end", attr_i(n, "axis", -1));
  b.rms_norm(input(n, 0), input(n, 1), attr_i(n, "axis", -1), attr_f(n, "epsilon", 1e-5f), output(n, 0));
  return std::nullopt;
}

std::optional<std::string> fast_gelu(const NodeProto& n, Builder& b, GraphFacts&) {
  std::string x = input(n, 0);
  if (!input(n, 1).empty()) x = b.one("Add", {x, input(n, 1)}, "bias_add");
  b.gelu(x, true, output(n, 0));
  return std::nullopt;
}

std::optional<std::string> bias_gelu(const NodeProto& n, Builder& b, GraphFacts&) {
  b.gelu(b.one("Add", {input(n, 0), input(n, 1)}, "bias_add"), false, output(n, 0));
  return std::nullopt;
}

std::optional<std::string> gelu(const NodeProto& n, Builder& b, GraphFacts&) {
  const std::string approximate = attr_s(n, "approximate", "none");
  if (approximate != "none" && approximate != "tanh") return fmt::format("approximate '{}'", approximate);
  b.gelu(input(n, 0), approximate == "tanh", output(n, 0));
  return std::nullopt;
}

// Rotary embedding of x, 3-D [B, S, N·H] (viewed as [B, S, N, H]) or 4-D [B, N, S, H], by the
// caches [max positions, rot / 2] at `pos` ([B, S]; "" or a one-element offset: the positions of
// the new tokens, whose values do not change the work).
std::optional<std::string> rotary(const NodeProto& n, Builder& b, GraphFacts& facts, const std::string& x,
                                  const std::string& pos_in, const std::string& cos_cache,
                                  const std::string& sin_cache) {
  const int64_t heads = attr_i(n, "num_heads", 0);
  const int64_t rot = attr_i(n, "rotary_embedding_dim", 0);
  const bool interleaved = attr_i(n, "interleaved", 0) != 0;
  if (attr_i(n, "is_packed_batching", 0) != 0) return std::string("is_packed_batching is set");
  auto rank = facts.rank(x);
  if (!rank) rank = heads > 0 ? 3 : 4;
  if (*rank != 3 && *rank != 4) return fmt::format("its input has rank {}", *rank);
  if (*rank == 3 && heads <= 0) return std::string("a 3-D input without num_heads");
  const int64_t seq_axis = *rank == 3 ? 1 : 2;
  std::string pos = pos_in;
  auto pos_rank = pos.empty() ? std::nullopt : facts.rank(pos);
  if (pos.empty() || (pos_rank && *pos_rank < 2)) pos = b.positions(x, seq_axis);
  auto [c, s] = b.angles(cos_cache, sin_cache, pos);  // [B, S, rot / 2]
  if (*rank == 3) {
    const std::string heads4 = b.reshape(x, {0, 0, heads, -1}, "split_heads");  // [B, S, N, H]
    c = b.one("Unsqueeze", {c, b.ints({2})}, "cos_heads");
    s = b.one("Unsqueeze", {s, b.ints({2})}, "sin_heads");
    const std::string y = b.rotate(heads4, c, s, interleaved, rot, 4, "");
    b.reshape(y, {0, 0, -1}, "merge_heads", output(n, 0));
  } else {
    c = b.one("Unsqueeze", {c, b.ints({1})}, "cos_heads");
    s = b.one("Unsqueeze", {s, b.ints({1})}, "sin_heads");
    b.rotate(x, c, s, interleaved, rot, 4, output(n, 0));
  }
  return std::nullopt;
}

std::optional<std::string> rotary_ms(const NodeProto& n, Builder& b, GraphFacts& facts) {
  return rotary(n, b, facts, input(n, 0), input(n, 1), input(n, 2), input(n, 3));
}

std::optional<std::string> rotary_23(const NodeProto& n, Builder& b, GraphFacts& facts) {
  if (input(n, 3).empty()) return std::string("no position_ids (caches per token)");
  return rotary(n, b, facts, input(n, 0), input(n, 3), input(n, 1), input(n, 2));
}

// [B, S, n·H] → [B, n, S, H].
std::string heads_first(Builder& b, const std::string& x, int64_t heads, const std::string& part) {
  return b.transpose(b.reshape(x, {0, 0, heads, -1}, part + "_split_heads"), {0, 2, 1, 3},
                     part + "_heads_first");
}
// [B, n, S, H] → [B, S, n·H].
std::string heads_merged(Builder& b, const std::string& x, const std::string& out) {
  return b.reshape(b.transpose(x, {0, 2, 1, 3}, "heads_last"), {0, 0, -1}, "merge_heads", out);
}
// A past [B, n, P, H] and the new keys or values: the present, written to `present` where named.
std::string with_past(Builder& b, const std::string& past, const std::string& now, const std::string& present,
                      const std::string& part) {
  if (past.empty()) return present.empty() ? now : b.one("Identity", {now}, part + "_present", {}, present);
  return b.one("Concat", {past, now}, part + "_present", {int_attr("axis", 2)}, present);
}

std::optional<std::string> multi_head_attention(const NodeProto& n, Builder& b, GraphFacts& facts) {
  const int64_t heads = attr_i(n, "num_heads", 0);
  if (heads <= 0) return std::string("num_heads is not set");
  if (input(n, 1).empty() || input(n, 2).empty())
    return std::string("packed Q/K/V (no separate key and value)");
  // unidirectional: the causal mask is applied inside the kernel (attend).
  if (auto why = unwritten_outputs(n, {3})) return why;
  auto q_rank = facts.rank(input(n, 0));
  if (q_rank && *q_rank != 3) return fmt::format("a query of rank {} (packed)", *q_rank);
  std::string q = input(n, 0), k = input(n, 1), v = input(n, 2);
  if (!input(n, 3).empty()) {  // bias [3·D]: Q, K and V biases, in that order
    const auto parts = b.add("Split", {input(n, 3)}, "split_bias", 3, {int_attr("axis", 0)});
    q = b.one("Add", {q, parts[0]}, "q_bias");
    k = b.one("Add", {k, parts[1]}, "k_bias");
    v = b.one("Add", {v, parts[2]}, "v_bias");
  }
  q = heads_first(b, q, heads, "q");
  const auto k_rank = facts.rank(input(n, 1));
  if (!k_rank || *k_rank == 3) {
    k = heads_first(b, k, heads, "k");
    v = heads_first(b, v, heads, "v");
  } else if (*k_rank != 4) {
    return fmt::format("a key of rank {}", *k_rank);
  }
  k = with_past(b, input(n, 6), k, output(n, 1), "key");
  v = with_past(b, input(n, 7), v, output(n, 2), "value");
  const std::string y = b.attend(q, k, v, attr_f(n, "scale", 0.0f), 0.0f, input(n, 5));
  heads_merged(b, y, output(n, 0));
  return std::nullopt;
}

std::optional<std::string> group_query_attention(const NodeProto& n, Builder& b, GraphFacts& facts) {
  const int64_t heads = attr_i(n, "num_heads", 0), kv_heads = attr_i(n, "kv_num_heads", 0);
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return fmt::format("num_heads {} is not a multiple of kv_num_heads {}", heads, kv_heads);
  // local_window_size: the sliding window masks scores inside the kernel (attend).
  std::string q, k, v;
  if (input(n, 1).empty()) {  // packed [B, S, (N + 2·Nkv)·H]
    const std::string all = b.reshape(input(n, 0), {0, 0, heads + 2 * kv_heads, -1}, "split_packed_heads");
    const auto parts =
        b.add("Split", {all, b.ints({heads, kv_heads, kv_heads})}, "split_qkv", 3, {int_attr("axis", 2)});
    q = parts[0], k = parts[1], v = parts[2];  // [B, S, n, H]
  } else {
    q = b.reshape(input(n, 0), {0, 0, heads, -1}, "q_split_heads");
    k = b.reshape(input(n, 1), {0, 0, kv_heads, -1}, "k_split_heads");
    v = b.reshape(input(n, 2), {0, 0, kv_heads, -1}, "v_split_heads");
  }
  if (attr_i(n, "do_rotary", 0) != 0) {
    if (input(n, 7).empty() || input(n, 8).empty())
      return std::string("do_rotary without cos_cache and sin_cache");
    const std::string pos = b.positions(q, 1);
    auto [c, s] = b.angles(input(n, 7), input(n, 8), pos);  // [1, S, rot / 2]
    c = b.one("Unsqueeze", {c, b.ints({2})}, "cos_heads");
    s = b.one("Unsqueeze", {s, b.ints({2})}, "sin_heads");
    const bool interleaved = attr_i(n, "rotary_interleaved", 0) != 0;
    // ONNX Runtime rotates the first 2 × (cos_cache's last dim) entries of each head, and passes
    // the rest (a partial rotary, as GPT-NeoX and Phi write): the head size from Q's last dim.
    int64_t rot = 0;
    const auto half = facts.last_dim(input(n, 7));
    const auto width = facts.last_dim(input(n, 0));
    const int64_t per_token = input(n, 1).empty() ? heads + 2 * kv_heads : heads;
    if (half && width && *width % per_token == 0) {
      const int64_t head = *width / per_token;
      if (2 * *half > head) return fmt::format("cos_cache rotates {} of a head of {}", 2 * *half, head);
      if (2 * *half < head) rot = 2 * *half;
    }
    q = b.rotate(q, c, s, interleaved, rot, 4, "");
    k = b.rotate(k, c, s, interleaved, rot, 4, "");
  }
  q = b.transpose(q, {0, 2, 1, 3}, "q_heads_first");
  k = b.transpose(k, {0, 2, 1, 3}, "k_heads_first");
  v = b.transpose(v, {0, 2, 1, 3}, "v_heads_first");
  k = with_past(b, input(n, 3), k, output(n, 1), "key");
  v = with_past(b, input(n, 4), v, output(n, 2), "value");
  const std::string y = b.attend(q, k, v, attr_f(n, "scale", 0.0f), attr_f(n, "softcap", 0.0f), "");
  heads_merged(b, y, output(n, 0));
  return std::nullopt;
}

std::optional<std::string> attention_23(const NodeProto& n, Builder& b, GraphFacts& facts) {
  if (auto why = unwritten_outputs(n, {3})) return why;
  if (attr_i(n, "qk_matmul_output_mode", 0) != 0) return std::string("qk_matmul_output_mode is set");
  const int64_t qn = attr_i(n, "q_num_heads", 0), kvn = attr_i(n, "kv_num_heads", 0);
  auto rank = facts.rank(input(n, 0));
  if (!rank) rank = qn > 0 && kvn > 0 ? 3 : 4;
  std::string q = input(n, 0), k = input(n, 1), v = input(n, 2);
  if (*rank == 3) {
    if (qn <= 0 || kvn <= 0) return std::string("3-D inputs without q_num_heads and kv_num_heads");
    q = heads_first(b, q, qn, "q");
    k = heads_first(b, k, kvn, "k");
    v = heads_first(b, v, kvn, "v");
  } else if (*rank != 4) {
    return fmt::format("a query of rank {}", *rank);
  }
  k = with_past(b, input(n, 4), k, output(n, 1), "key");
  v = with_past(b, input(n, 5), v, output(n, 2), "value");
  // is_causal: the causal mask is applied inside the kernel (attend). A boolean attn_mask selects
  // scores there too; a float one is added.
  std::string mask = input(n, 3);
  if (!mask.empty() && facts.elem_type(mask) == TensorProto::BOOL) mask.clear();
  const std::string y = b.attend(q, k, v, attr_f(n, "scale", 0.0f), attr_f(n, "softcap", 0.0f), mask,
                                 *rank == 3 ? "" : output(n, 0));
  if (*rank == 3) heads_merged(b, y, output(n, 0));
  return std::nullopt;
}

// Which rule reads a node, or null.
const Rule* rule_for(const NodeProto& n, int64_t opset) {
  static const std::vector<Rule> microsoft = {
      {"SimplifiedLayerNormalization", simplified_layer_norm},
      {"SkipSimplifiedLayerNormalization", skip_simplified_layer_norm},
      {"SkipLayerNormalization", skip_layer_norm},
      {"FastGelu", fast_gelu},
      {"BiasGelu", bias_gelu},
      {"Gelu", gelu},
      {"RotaryEmbedding", rotary_ms},
      {"MultiHeadAttention", multi_head_attention},
      {"GroupQueryAttention", group_query_attention},
  };
  static const Rule simplified = {"SimplifiedLayerNormalization", simplified_layer_norm};
  static const Rule gelu20 = {"Gelu", gelu};
  static const std::vector<Rule> onnx23 = {
      {"RMSNormalization", rms_normalization},
      {"RotaryEmbedding", rotary_23},
      {"Attention", attention_23},
  };
  if (n.domain() == "com.microsoft") {
    for (const auto& r : microsoft)
      if (r.op == n.op_type()) return &r;
    return nullptr;
  }
  if (!default_domain(n.domain())) return nullptr;
  if (n.op_type() == simplified.op) return &simplified;
  if (opset >= 20 && n.op_type() == gelu20.op) return &gelu20;
  if (opset >= 23)
    for (const auto& r : onnx23)
      if (r.op == n.op_type()) return &r;
  return nullptr;
}

}  // namespace

void register_contrib_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& domains = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!domains.Map().count("com.microsoft")) domains.AddDomainToVersion("com.microsoft", 1, 1);
    onnx::OpSchema s;
    s.SetName("MatMulNBits")
        .SetDomain("com.microsoft")
        .SinceVersion(1)
        .SetDoc(
            "Y = A · dequantize(B)ᵀ (+ bias), B quantized to `bits` bits in blocks of `block_size` along K")
        .Attr("K", "the input features (A's last dim)", onnx::AttributeProto::INT)
        .Attr("N", "the output features", onnx::AttributeProto::INT)
        .Attr("bits", "bits per quantized weight", onnx::AttributeProto::INT, static_cast<int64_t>(4))
        .Attr("block_size", "weights per quantization block along K (a power of 2, at least 16)",
              onnx::AttributeProto::INT)
        .Attr("accuracy_level", "the compute type ONNX Runtime may use (0: A's type)",
              onnx::AttributeProto::INT, static_cast<int64_t>(0))
        .Input(0, "A", "[..., K]", "T1")
        .Input(1, "B", "[N, ceil(K / block_size), block_size · bits / 8], packed", "T2")
        .Input(2, "scales", "[N · ceil(K / block_size)]", "T1")
        .Input(3, "zero_points", "packed like B, or of A's type", "T3", onnx::OpSchema::Optional)
        .Input(4, "g_idx", "[K], the block of each input feature", "T4", onnx::OpSchema::Optional)
        .Input(5, "bias", "[N]", "T1", onnx::OpSchema::Optional)
        .Output(0, "Y", "[..., N]", "T1")
        .TypeConstraint("T1", {"tensor(float)", "tensor(float16)"}, "A's type")
        .TypeConstraint("T2", {"tensor(uint8)", "tensor(int32)"}, "the packed weights")
        .TypeConstraint("T3", {"tensor(uint8)", "tensor(int32)", "tensor(float16)", "tensor(float)"},
                        "the zero points")
        .TypeConstraint("T4", {"tensor(int32)"}, "block indices")
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext& ctx) {
          onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
          if (!onnx::hasInputShape(ctx, 0)) return;
          const auto* n = ctx.getAttribute("N");
          const auto& a = onnx::getInputShape(ctx, 0);
          if (!n || a.dim_size() < 1) return;
          onnx::TensorShapeProto y;
          for (int i = 0; i + 1 < a.dim_size(); ++i) *y.add_dim() = a.dim(i);
          y.add_dim()->set_dim_value(n->i());
          onnx::updateOutputShape(ctx, 0, y);
        });
    onnx::RegisterSchema(std::move(s));
  });
}

int expand_composite_ops(onnx::ModelProto& model, int64_t opset, std::set<int>& read_as_17,
                         std::vector<std::string>& warnings) {
  auto& g = *model.mutable_graph();
  bool any = false;
  for (const auto& n : g.node()) any = any || rule_for(n, opset) != nullptr;
  if (!any) return 0;
  GraphFacts facts(model);
  const int float_type = facts.float_type();
  google::protobuf::RepeatedPtrField<NodeProto> out;
  std::set<int> renumbered;
  std::map<std::string, int> expanded;  // per "domain.op"
  std::vector<TensorProto> constants;
  int count = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const NodeProto& n = g.node(i);
    const Rule* rule = rule_for(n, opset);
    if (rule) {
      Builder b(node_label(n, static_cast<size_t>(i)), float_type);
      auto why = rule->expand(n, b, facts);
      if (!why) {
        for (auto& m : b.nodes) {
          renumbered.insert(out.size());  // written in their opset-17 forms
          *out.Add() = std::move(m);
        }
        for (auto& t : b.inits) constants.push_back(std::move(t));
        ++expanded[fmt::format("{}{}", n.domain().empty() ? "" : n.domain() + ".", n.op_type())];
        ++count;
        continue;
      }
      warnings.push_back(fmt::format("node '{}' ({}{}): {}; kept as Unsupported",
                                     node_label(n, static_cast<size_t>(i)),
                                     n.domain().empty() ? "" : n.domain() + ".", n.op_type(), *why));
    }
    if (read_as_17.count(i)) renumbered.insert(out.size());
    *out.Add() = n;
  }
  g.mutable_node()->Swap(&out);
  for (auto& t : constants) *g.add_initializer() = std::move(t);
  read_as_17 = std::move(renumbered);
  for (const auto& [op, k] : expanded)
    warnings.push_back(
        fmt::format("{} {} node(s) read as their decomposition (docs/LAYERS.md, \"Operators read "
                    "as their decomposition\")",
                    k, op));
  return count;
}

int merged_decoder_if(const onnx::GraphProto& g) {
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    if (n.op_type() != "If" || !default_domain(n.domain()) || n.input_size() != 1) continue;
    for (const auto& in : g.input())
      if (in.name() == n.input(0) && in.name().find("use_cache") != std::string::npos &&
          in.type().tensor_type().elem_type() == TensorProto::BOOL)
        return i;
  }
  return -1;
}

Result<std::optional<MergedDecoderBranch>> inline_merged_decoder_if(onnx::ModelProto& model,
                                                                    const DimValues& dims) {
  auto& g = *model.mutable_graph();
  const int at = merged_decoder_if(g);
  if (at < 0) return std::optional<MergedDecoderBranch>();
  const NodeProto node = g.node(at);
  const std::string label = node_label(node, static_cast<size_t>(at));
  // The past length: the symbolic dim on the sequence axis of the first past input.
  std::string dim_name;
  for (const auto& in : g.input()) {
    const std::string& name = in.name();
    if (name.find("past") == std::string::npos || !in.type().has_tensor_type()) continue;
    const auto& shape = in.type().tensor_type().shape();
    const int axis = shape.dim_size() == 4 ? 2 : shape.dim_size() == 3 ? 1 : -1;
    if (axis < 0 || !shape.dim(axis).has_dim_param()) continue;
    dim_name = shape.dim(axis).dim_param();
    break;
  }
  if (dim_name.empty())
    return make_error(
        "If '{}' on '{}' (a merged decoder): no past input with a symbolic length to pick the branch by",
        label, node.input(0));
  auto it = std::find_if(dims.begin(), dims.end(), [&](const auto& d) { return d.first == dim_name; });
  if (it == dims.end())
    return make_error(
        "If '{}' on '{}' (a merged decoder): the branch is picked by the past length '{}'; give it "
        "with --dim {}=N",
        label, node.input(0), dim_name, dim_name);
  const bool cache = it->second > 0;
  const onnx::GraphProto* branch = nullptr;
  for (const auto& a : node.attribute())
    if (a.name() == (cache ? "then_branch" : "else_branch") && a.has_g()) branch = &a.g();
  if (!branch) return make_error("If '{}' has no {}", label, cache ? "then_branch" : "else_branch");
  if (branch->output_size() != node.output_size())
    return make_error("If '{}': its branch has {} outputs for its {}", label, branch->output_size(),
                      node.output_size());
  // The branch's outputs become the If's: renamed where its nodes write them, an Identity where
  // the output is an outer value or an initializer.
  std::map<std::string, std::string> rename;
  for (int k = 0; k < node.output_size(); ++k) rename[branch->output(k).name()] = node.output(k);
  google::protobuf::RepeatedPtrField<NodeProto> nodes;
  for (int i = 0; i < at; ++i) *nodes.Add() = g.node(i);
  std::set<std::string> written;
  for (const auto& sub : branch->node()) {
    NodeProto copy = sub;
    for (auto& o : *copy.mutable_output()) {
      if (auto r = rename.find(o); r != rename.end()) {
        written.insert(o);
        o = r->second;
      }
    }
    // A later node of the branch reading a renamed value reads it under its new name.
    for (auto& in : *copy.mutable_input())
      if (auto r = rename.find(in); r != rename.end() && written.count(in)) in = r->second;
    *nodes.Add() = std::move(copy);
  }
  for (int k = 0; k < node.output_size(); ++k)
    if (!written.count(branch->output(k).name())) {
      NodeProto id;
      id.set_op_type("Identity");
      id.set_name(fmt::format("{}/output_{}", label, k));
      id.add_input(branch->output(k).name());
      id.add_output(node.output(k));
      *nodes.Add() = std::move(id);
    }
  for (int i = at + 1; i < g.node_size(); ++i) *nodes.Add() = g.node(i);
  g.mutable_node()->Swap(&nodes);
  for (const auto& t : branch->initializer()) *g.add_initializer() = t;
  MergedDecoderBranch picked;
  picked.branch = cache ? "then-branch (with the cache)" : "else-branch (without the cache)";
  picked.note = fmt::format("merged decoder: If '{}' on '{}' runs its {} ({} = {})", label, node.input(0),
                            picked.branch, dim_name, it->second);
  return std::optional<MergedDecoderBranch>(std::move(picked));
}

}  // namespace floorline::mp
