#include "const_eval.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

namespace floorline::mp {
namespace {

using Values = std::vector<const ConstTensor*>;

int64_t attr_i(const onnx::NodeProto& n, const char* name, int64_t fallback) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

std::optional<std::vector<int64_t>> attr_ints(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
  return std::nullopt;
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Element count of a shape; -1 when a dimension is negative or the count overflows int64 (a
// hostile model's dims must never turn into a small or negative allocation).
int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

// Wrapping int64 arithmetic: the result of an overflow is some value (checked where it becomes a
// shape), never undefined behaviour.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
// Integer division as ONNX Div (truncating); x / 0 is 0 and INT64_MIN / -1 wraps (x86 traps on both).
int64_t safe_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);
  return a / b;
}
int64_t safe_mod(int64_t a, int64_t b) {
  return b == 0 || b == -1 ? 0 : a % b;
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int k = static_cast<int>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
  return st;
}

// A tensor of the given type and dims, zero-filled; nullopt when its element count is invalid or
// above `max_elements` (the folding budget: no allocation follows from an unchecked count).
std::optional<ConstTensor> make_like(DataType t, Shape dims, int64_t max_elements) {
  const int64_t n = product(dims);
  if (n < 0 || n > max_elements) return std::nullopt;
  ConstTensor c;
  c.dtype = t;
  c.dims = std::move(dims);
  if (c.is_integer())
    c.i.resize(static_cast<size_t>(n));
  else
    c.f.resize(static_cast<size_t>(n));
  return c;
}

void set_value(ConstTensor& c, int64_t k, double v) {
  if (c.is_integer())
    c.i[k] = saturate_to_int64(v);
  else
    c.f[k] = v;
}

std::optional<Shape> broadcast(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] < 0) return std::nullopt;
      int64_t& o = out[rank - s.size() + k];
      if (s[k] == o || s[k] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[k];
    }
  }
  return out;
}

// Offset into `in` (shape `in_shape`) of the output multi-index `idx`, NumPy broadcasting.
int64_t broadcast_offset(const std::vector<int64_t>& idx, const Shape& in_shape,
                         const std::vector<int64_t>& in_strides) {
  int64_t off = 0;
  const size_t shift = idx.size() - in_shape.size();
  for (size_t k = 0; k < in_shape.size(); ++k)
    if (in_shape[k] != 1) off += idx[k + shift] * in_strides[k];
  return off;
}

// Element-wise op over broadcast inputs. `fn` receives the input values as doubles
// (exact for the integers that shapes are made of); the result type is `out_type`.
std::optional<ConstTensor> elementwise(const Values& in, DataType out_type, int64_t max_elements,
                                       const std::function<double(const std::vector<double>&)>& fn,
                                       const std::function<int64_t(const std::vector<int64_t>&)>& ifn = {}) {
  std::vector<Shape> shapes;
  for (const auto* t : in) {
    if (!t) return std::nullopt;
    shapes.push_back(t->dims);
  }
  auto out_shape = broadcast(shapes);
  if (!out_shape) return std::nullopt;
  auto made = make_like(out_type, *out_shape, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  const int64_t n = product(*out_shape);
  std::vector<std::vector<int64_t>> in_strides;
  for (const auto* t : in) in_strides.push_back(strides_of(t->dims));
  std::vector<int64_t> idx(out_shape->size(), 0);
  std::vector<double> args(in.size());
  std::vector<int64_t> iargs(in.size());
  const bool all_int = ifn && std::all_of(in.begin(), in.end(), [](auto* t) { return t->is_integer(); });
  for (int64_t e = 0; e < n; ++e) {
    for (size_t a = 0; a < in.size(); ++a) {
      const int64_t off = broadcast_offset(idx, in[a]->dims, in_strides[a]);
      if (all_int)
        iargs[a] = in[a]->i[off];
      else
        args[a] = in[a]->as_double(off);
    }
    if (all_int && out.is_integer())
      out.i[e] = ifn(iargs);
    else
      set_value(out, e, all_int ? static_cast<double>(ifn(iargs)) : fn(args));
    for (int k = static_cast<int>(idx.size()) - 1; k >= 0; --k) {
      if (++idx[k] < (*out_shape)[k]) break;
      idx[k] = 0;
    }
  }
  return std::move(out);
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

std::optional<ConstTensor> gather(const ConstTensor& data, const ConstTensor& indices, int64_t axis,
                                  int64_t max_elements) {
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  axis = normalize_axis(axis, rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  Shape out_dims(data.dims.begin(), data.dims.begin() + axis);
  out_dims.insert(out_dims.end(), indices.dims.begin(), indices.dims.end());
  out_dims.insert(out_dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  auto made = make_like(data.dtype, out_dims, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  const int64_t outer = product(Shape(data.dims.begin(), data.dims.begin() + axis));
  const int64_t inner = product(Shape(data.dims.begin() + axis + 1, data.dims.end()));
  const int64_t n_idx = indices.size();
  const int64_t dim = data.dims[axis];
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n_idx; ++j) {
      int64_t ix = indices.as_int(j);
      if (ix < 0) ix += dim;
      if (ix < 0 || ix >= dim) return std::nullopt;
      for (int64_t q = 0; q < inner; ++q, ++e) {
        const int64_t src = (o * dim + ix) * inner + q;
        if (out.is_integer())
          out.i[e] = data.i[src];
        else
          out.f[e] = data.f[src];
      }
    }
  return std::move(out);
}

std::optional<ConstTensor> slice(const ConstTensor& data, std::vector<int64_t> starts,
                                 std::vector<int64_t> ends, std::vector<int64_t> axes,
                                 std::vector<int64_t> steps, int64_t max_elements) {
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  std::vector<int64_t> st(rank, 0), sp(rank, 1);
  Shape out_dims = data.dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t ax = normalize_axis(axes[k], rank);
    // INT64_MIN has no negation; a step that large selects one element at most anyway.
    if (ax < 0 || ax >= rank || steps[k] == 0 || steps[k] == INT64_MIN) return std::nullopt;
    const int64_t dim = data.dims[ax];
    // Starts and ends are clamped into [-1, dim] before any arithmetic, so nothing overflows.
    int64_t s = std::clamp<int64_t>(starts[k], -dim - 1, dim),
            e = std::clamp<int64_t>(ends[k], -dim - 1, dim);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (steps[k] > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out_dims[ax] = e > s ? (e - s - 1) / steps[k] + 1 : 0;
    } else if (dim == 0) {
      out_dims[ax] = 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out_dims[ax] = s > e ? (s - e - 1) / (-steps[k]) + 1 : 0;
    }
    st[ax] = s;
    sp[ax] = steps[k];
  }
  auto made = make_like(data.dtype, out_dims, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  const auto in_strides = strides_of(data.dims);
  std::vector<int64_t> idx(rank, 0);
  const int64_t n = product(out_dims);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int64_t k = 0; k < rank; ++k) off += (st[k] + idx[k] * sp[k]) * in_strides[k];
    if (out.is_integer())
      out.i[e] = data.i[off];
    else
      out.f[e] = data.f[off];
    for (int64_t k = rank - 1; k >= 0; --k) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
  }
  return std::move(out);
}

std::optional<ConstTensor> concat(const Values& in, int64_t axis, int64_t max_elements) {
  const int64_t rank = static_cast<int64_t>(in[0]->dims.size());
  axis = normalize_axis(axis, rank);
  if (axis < 0 || axis >= rank) return std::nullopt;
  Shape out_dims = in[0]->dims;
  out_dims[axis] = 0;
  for (const auto* t : in) {
    if (static_cast<int64_t>(t->dims.size()) != rank) return std::nullopt;
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && t->dims[k] != in[0]->dims[k]) return std::nullopt;  // the parts must line up
    if (__builtin_add_overflow(out_dims[axis], t->dims[axis], &out_dims[axis])) return std::nullopt;
  }
  auto made = make_like(in[0]->dtype, out_dims, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  const int64_t outer = product(Shape(out_dims.begin(), out_dims.begin() + axis));
  int64_t e = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const auto* t : in) {
      const int64_t chunk = product(Shape(t->dims.begin() + axis, t->dims.end()));
      for (int64_t q = 0; q < chunk; ++q, ++e) {
        const int64_t src = o * chunk + q;
        if (out.is_integer())
          out.i[e] = t->as_int(src);
        else
          out.f[e] = t->as_double(src);
      }
    }
  return std::move(out);
}

std::optional<ConstTensor> transpose(const ConstTensor& x, std::vector<int64_t> perm, int64_t max_elements) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (perm.empty())
    for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<bool> used(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || used[static_cast<size_t>(p)]) return std::nullopt;  // not a permutation
    used[static_cast<size_t>(p)] = true;
  }
  Shape out_dims(rank);
  for (int64_t k = 0; k < rank; ++k) out_dims[k] = x.dims[perm[k]];
  if (product(out_dims) != x.size()) return std::nullopt;
  auto made = make_like(x.dtype, out_dims, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  const auto in_strides = strides_of(x.dims);
  std::vector<int64_t> idx(rank, 0);
  const int64_t n = product(out_dims);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (int64_t k = 0; k < rank; ++k) off += idx[k] * in_strides[perm[k]];
    if (out.is_integer())
      out.i[e] = x.i[off];
    else
      out.f[e] = x.f[off];
    for (int64_t k = rank - 1; k >= 0; --k) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
  }
  return std::move(out);
}

// The same values under new dims; nullopt unless the element count is unchanged.
std::optional<ConstTensor> reshaped(const ConstTensor& x, Shape dims) {
  if (product(dims) != x.size()) return std::nullopt;
  ConstTensor out = x;
  out.dims = std::move(dims);
  return out;
}

std::optional<ConstTensor> cast(const ConstTensor& x, DataType to, int64_t max_elements) {
  auto made = make_like(to, x.dims, max_elements);
  if (!made) return std::nullopt;
  ConstTensor& out = *made;
  for (int64_t k = 0; k < x.size(); ++k) {
    if (out.is_integer()) {
      int64_t v = x.as_int(k);
      if (to == DataType::kBool) v = x.as_double(k) != 0.0;
      out.i[k] = v;
    } else {
      out.f[k] = x.as_double(k);
    }
  }
  return std::move(out);
}

// Resolve a Reshape target (0 copies the input dim unless allowzero, -1 is inferred).
std::optional<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.size());
  int64_t known = 1, infer = -1;
  const int64_t count = product(in);
  if (count < 0) return std::nullopt;
  for (size_t k = 0; k < target.size(); ++k) {
    int64_t d = target[k];
    if (d == 0 && !allowzero) {
      if (k >= in.size()) return std::nullopt;
      d = in[k];
    }
    if (d == -1) {
      if (infer >= 0) return std::nullopt;
      infer = static_cast<int64_t>(k);
      continue;
    }
    if (d < 0 || __builtin_mul_overflow(known, d, &known)) return std::nullopt;
    out[k] = d;
  }
  if (infer >= 0) {
    if (known == 0) return std::nullopt;
    out[infer] = count / known;
  }
  if (product(out) != count) return std::nullopt;
  return out;
}

// ReduceMax/Min/Sum/Prod of a constant over `axes` (all axes when empty and noop_with_empty_axes is
// 0). Detection models compute their padded image size as ReduceMax over constant sizes.
std::optional<ConstTensor> reduce(const ConstTensor& x, const std::string& op, std::vector<int64_t> axes,
                                  bool keepdims, int64_t max_elements) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  Shape dims, kept;
  for (int64_t k = 0; k < rank; ++k) {
    if (reduced[k] && keepdims) dims.push_back(1);
    if (!reduced[k]) dims.push_back(x.dims[k]);
    kept.push_back(reduced[k] ? 1 : x.dims[k]);
  }
  if (x.size() == 0) return std::nullopt;  // the identity of Max/Min over nothing is not a value
  auto out = make_like(x.dtype, dims, max_elements);
  if (!out) return std::nullopt;
  const int64_t n = out->size();
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t rest = k, o = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % x.dims[d];
      rest /= x.dims[d];
      if (!reduced[d]) o += c * stride;
      stride *= kept[d];
    }
    auto fold = [&](auto& vec, auto v) {
      using T = std::decay_t<decltype(vec[0])>;
      if (!seen[o]) {
        vec[o] = static_cast<T>(v);
      } else if (op == "ReduceMax") {
        vec[o] = std::max<T>(vec[o], static_cast<T>(v));
      } else if (op == "ReduceMin") {
        vec[o] = std::min<T>(vec[o], static_cast<T>(v));
      } else if (op == "ReduceSum") {
        vec[o] += static_cast<T>(v);
      } else {
        vec[o] *= static_cast<T>(v);
      }
    };
    if (out->is_integer())
      fold(out->i, x.as_int(k));
    else
      fold(out->f, x.as_double(k));
    seen[o] = true;
  }
  return out;
}

std::optional<std::vector<int64_t>> axes_of(const onnx::NodeProto& node, int64_t opset, const Values& in,
                                            size_t input_index, int64_t input_opset) {
  if (opset >= input_opset) {
    if (in.size() > input_index && in[input_index]) return in[input_index]->ints();
    return std::vector<int64_t>{};
  }
  auto a = attr_ints(node, "axes");
  return a ? *a : std::vector<int64_t>{};
}

}  // namespace

bool is_nondeterministic_op(const std::string& op) {
  return op == "RandomNormal" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomUniformLike" || op == "Multinomial" || op == "Bernoulli";
}

std::optional<std::vector<ConstTensor>> evaluate_node(const onnx::NodeProto& node, int64_t opset,
                                                      const Values& in,
                                                      const std::vector<std::optional<Shape>>& in_shapes,
                                                      int64_t max_elements) {
  const std::string& op = node.op_type();
  auto one = [](std::optional<ConstTensor> t) -> std::optional<std::vector<ConstTensor>> {
    if (!t) return std::nullopt;
    std::vector<ConstTensor> v;
    v.push_back(std::move(*t));
    return v;
  };
  auto have = [&](size_t k) { return in.size() > k && in[k] != nullptr; };

  if (op == "Shape" || op == "Size") {
    if (in_shapes.empty() || !in_shapes[0] || !shape_known(*in_shapes[0])) return std::nullopt;
    const Shape& s = *in_shapes[0];
    ConstTensor out;
    out.dtype = DataType::kI64;
    if (op == "Size") {
      out.i = {product(s)};
      return one(out);
    }
    const int64_t rank = static_cast<int64_t>(s.size());
    int64_t start = std::clamp<int64_t>(normalize_axis(attr_i(node, "start", 0), rank), 0, rank);
    int64_t end = std::clamp<int64_t>(normalize_axis(attr_i(node, "end", rank), rank), 0, rank);
    out.i.assign(s.begin() + start, s.begin() + std::max(start, end));
    out.dims = {static_cast<int64_t>(out.i.size())};
    return one(out);
  }
  if (op == "Constant") {
    if (const auto* a = find_attr(node, "value")) {
      auto t = read_tensor(a->t(), nullptr);
      if (!t || t->size() > max_elements) return std::nullopt;
      return one(*t);
    }
    ConstTensor out;
    if (const auto* a = find_attr(node, "value_int")) {
      out.dtype = DataType::kI64;
      out.i = {a->i()};
      return one(out);
    }
    if (const auto* a = find_attr(node, "value_float")) {
      out.dtype = DataType::kF32;
      out.f = {a->f()};
      return one(out);
    }
    if (const auto* a = find_attr(node, "value_ints")) {
      out.dtype = DataType::kI64;
      out.i.assign(a->ints().begin(), a->ints().end());
      out.dims = {static_cast<int64_t>(out.i.size())};
      return one(out);
    }
    if (const auto* a = find_attr(node, "value_floats")) {
      out.dtype = DataType::kF32;
      out.f.assign(a->floats().begin(), a->floats().end());
      out.dims = {static_cast<int64_t>(out.f.size())};
      return one(out);
    }
    return std::nullopt;
  }
  // Every other op needs all its present inputs constant.
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k] && k < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(k)).empty())
      return std::nullopt;
  if (in.empty() || !in[0]) return std::nullopt;
  const ConstTensor& x = *in[0];

  if (op == "ConstantOfShape") {
    Shape dims = x.ints();
    ConstTensor value;
    value.dtype = DataType::kF32;
    value.f = {0.0};
    if (const auto* a = find_attr(node, "value")) {
      auto t = read_tensor(a->t(), nullptr);
      if (!t || t->size() != 1) return std::nullopt;
      value = *t;
    }
    auto out = make_like(value.dtype, dims, max_elements);
    if (!out) return std::nullopt;
    for (int64_t k = 0; k < out->size(); ++k) set_value(*out, k, value.as_double(0));
    return one(std::move(out));
  }
  if (op == "Identity") return one(x);
  if (op == "Cast") return one(cast(x, static_cast<DataType>(attr_i(node, "to", 1)), max_elements));
  if (op == "Reshape") {
    if (!have(1)) return std::nullopt;
    auto dims = reshape_target(x.dims, in[1]->ints(), attr_i(node, "allowzero", 0) != 0);
    if (!dims) return std::nullopt;
    return one(reshaped(x, *dims));
  }
  if (op == "Flatten") {
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    const int64_t axis = normalize_axis(attr_i(node, "axis", 1), rank);
    if (axis < 0 || axis > rank) return std::nullopt;
    return one(reshaped(x, {product(Shape(x.dims.begin(), x.dims.begin() + axis)),
                            product(Shape(x.dims.begin() + axis, x.dims.end()))}));
  }
  if (op == "Unsqueeze") {
    auto axes = axes_of(node, opset, in, 1, 13);
    if (!axes) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(x.dims.size() + axes->size());
    Shape dims;
    std::vector<bool> is_new(rank, false);
    for (auto a : *axes) {
      a = normalize_axis(a, rank);
      if (a < 0 || a >= rank || is_new[a]) return std::nullopt;  // out of range or repeated
      is_new[a] = true;
    }
    size_t src = 0;
    for (int64_t k = 0; k < rank; ++k) dims.push_back(is_new[k] ? 1 : x.dims[src++]);
    return one(reshaped(x, dims));
  }
  if (op == "Squeeze") {
    auto axes = axes_of(node, opset, in, 1, 13);
    if (!axes) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    Shape dims;
    for (int64_t k = 0; k < rank; ++k) {
      bool drop = axes->empty() ? x.dims[k] == 1 : false;
      for (auto a : *axes) drop = drop || normalize_axis(a, rank) == k;
      if (drop && x.dims[k] != 1) return std::nullopt;  // only a dimension of 1 can be squeezed
      if (!drop) dims.push_back(x.dims[k]);
    }
    return one(reshaped(x, dims));
  }
  if (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceSum" || op == "ReduceProd") {
    auto axes = axes_of(node, opset, in, 1, op == "ReduceSum" ? 13 : 18);
    if (!axes) return std::nullopt;
    if (axes->empty() && attr_i(node, "noop_with_empty_axes", 0) != 0) return one(x);
    return one(reduce(x, op, *axes, attr_i(node, "keepdims", 1) != 0, max_elements));
  }
  if (op == "Concat") {
    Values parts;
    for (const auto* t : in)
      if (t) parts.push_back(t);
    return one(concat(parts, attr_i(node, "axis", 0), max_elements));
  }
  if (op == "Gather") {
    if (!have(1)) return std::nullopt;
    return one(gather(x, *in[1], attr_i(node, "axis", 0), max_elements));
  }
  if (op == "Slice") {
    if (opset < 10) {
      auto starts = attr_ints(node, "starts"), ends = attr_ints(node, "ends");
      if (!starts || !ends) return std::nullopt;
      return one(slice(x, *starts, *ends, attr_ints(node, "axes").value_or(std::vector<int64_t>{}), {},
                       max_elements));
    }
    if (!have(1) || !have(2)) return std::nullopt;
    return one(slice(x, in[1]->ints(), in[2]->ints(), have(3) ? in[3]->ints() : std::vector<int64_t>{},
                     have(4) ? in[4]->ints() : std::vector<int64_t>{}, max_elements));
  }
  if (op == "Transpose")
    return one(transpose(x, attr_ints(node, "perm").value_or(std::vector<int64_t>{}), max_elements));
  if (op == "Range") {
    if (!have(1) || !have(2) || x.size() < 1 || in[1]->size() < 1 || in[2]->size() < 1) return std::nullopt;
    const double start = x.as_double(0), limit = in[1]->as_double(0), delta = in[2]->as_double(0);
    if (delta == 0) return std::nullopt;
    const double count = std::ceil((limit - start) / delta);
    if (!(count <= static_cast<double>(max_elements))) return std::nullopt;  // also NaN
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    auto out = make_like(x.dtype, {n}, max_elements);
    if (!out) return std::nullopt;
    for (int64_t k = 0; k < n; ++k) set_value(*out, k, start + static_cast<double>(k) * delta);
    return one(std::move(out));
  }
  if (op == "Expand") {
    if (!have(1)) return std::nullopt;
    auto dims = broadcast({x.dims, in[1]->ints()});
    if (!dims) return std::nullopt;
    auto shape_holder = make_like(x.dtype, *dims, max_elements);
    if (!shape_holder) return std::nullopt;
    return one(elementwise(
        {&x, &*shape_holder}, x.dtype, max_elements, [](const std::vector<double>& a) { return a[0]; },
        [](const std::vector<int64_t>& a) { return a[0]; }));
  }
  if (op == "Where") {
    if (in.size() != 3 || !have(1) || !have(2)) return std::nullopt;
    return one(elementwise(
        in, in[1]->dtype, max_elements, [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; },
        [](const std::vector<int64_t>& a) { return a[0] != 0 ? a[1] : a[2]; }));
  }

  using F = std::function<double(const std::vector<double>&)>;
  using I = std::function<int64_t(const std::vector<int64_t>&)>;
  struct Binary {
    const char* name;
    F f;
    I i;
    bool boolean;
  };
  static const Binary kBinary[] = {
      {"Add", [](auto& a) { return a[0] + a[1]; }, [](auto& a) { return wrap_add(a[0], a[1]); }, false},
      {"Sub", [](auto& a) { return a[0] - a[1]; }, [](auto& a) { return wrap_sub(a[0], a[1]); }, false},
      {"Mul", [](auto& a) { return a[0] * a[1]; }, [](auto& a) { return wrap_mul(a[0], a[1]); }, false},
      {"Div", [](auto& a) { return a[0] / a[1]; }, [](auto& a) { return safe_div(a[0], a[1]); }, false},
      {"Pow", [](auto& a) { return std::pow(a[0], a[1]); },
       [](auto& a) {
         return saturate_to_int64(std::pow(static_cast<double>(a[0]), static_cast<double>(a[1])));
       },
       false},
      {"Max", [](auto& a) { return std::max(a[0], a[1]); }, [](auto& a) { return std::max(a[0], a[1]); },
       false},
      {"Min", [](auto& a) { return std::min(a[0], a[1]); }, [](auto& a) { return std::min(a[0], a[1]); },
       false},
      {"Equal", [](auto& a) { return double(a[0] == a[1]); }, [](auto& a) { return int64_t(a[0] == a[1]); },
       true},
      {"Less", [](auto& a) { return double(a[0] < a[1]); }, [](auto& a) { return int64_t(a[0] < a[1]); },
       true},
      {"Greater", [](auto& a) { return double(a[0] > a[1]); }, [](auto& a) { return int64_t(a[0] > a[1]); },
       true},
      {"And", [](auto& a) { return double(a[0] != 0 && a[1] != 0); },
       [](auto& a) { return int64_t(a[0] && a[1]); }, true},
      {"Or", [](auto& a) { return double(a[0] != 0 || a[1] != 0); },
       [](auto& a) { return int64_t(a[0] || a[1]); }, true},
  };
  for (const auto& b : kBinary) {
    if (op != b.name) continue;
    if (!have(1)) return std::nullopt;
    if ((op == "Max" || op == "Min") && in.size() != 2) return std::nullopt;
    return one(elementwise({in[0], in[1]}, b.boolean ? DataType::kBool : x.dtype, max_elements, b.f, b.i));
  }
  if (op == "Mod") {
    if (!have(1)) return std::nullopt;
    const bool fmod = attr_i(node, "fmod", 0) != 0;
    return one(elementwise(
        {in[0], in[1]}, x.dtype, max_elements,
        [fmod](const std::vector<double>& a) {
          double r = std::fmod(a[0], a[1]);
          if (!fmod && r != 0 && ((r < 0) != (a[1] < 0))) r += a[1];
          return r;
        },
        [fmod](const std::vector<int64_t>& a) {
          int64_t r = safe_mod(a[0], a[1]);
          if (!fmod && r != 0 && ((r < 0) != (a[1] < 0))) r += a[1];
          return r;
        }));
  }
  struct Unary {
    const char* name;
    F f;
  };
  static const Unary kUnary[] = {
      {"Neg", [](auto& a) { return -a[0]; }},
      {"Abs", [](auto& a) { return std::fabs(a[0]); }},
      {"Sqrt", [](auto& a) { return std::sqrt(a[0]); }},
      {"Floor", [](auto& a) { return std::floor(a[0]); }},
      {"Ceil", [](auto& a) { return std::ceil(a[0]); }},
      {"Reciprocal", [](auto& a) { return 1.0 / a[0]; }},
      {"Not", [](auto& a) { return double(a[0] == 0); }},
  };
  for (const auto& u : kUnary) {
    if (op != u.name) continue;
    return one(elementwise({in[0]}, x.dtype, max_elements, u.f));
  }
  return std::nullopt;
}

}  // namespace floorline::mp
