#include "floorline/kernels/problem.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "floorline/kernels/reference.hpp"

namespace floorline::kernels {

const Operand* Problem::input(const std::string& role) const {
  const int k = input_index(role);
  return k < 0 ? nullptr : &inputs[static_cast<size_t>(k)];
}
int Problem::input_index(const std::string& role) const {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].role == role) return static_cast<int>(k);
  return -1;
}
int Problem::output_index(std::initializer_list<const char*> roles) const {
  for (size_t k = 0; k < outputs.size(); ++k)
    for (const char* r : roles)
      if (outputs[k].role == r) return static_cast<int>(k);
  return -1;
}
int64_t Problem::int_attr(const std::string& name, int64_t fallback) const {
  auto it = ints.find(name);
  return it == ints.end() || it->second.empty() ? fallback : it->second[0];
}
std::vector<int64_t> Problem::ints_attr(const std::string& name) const {
  auto it = ints.find(name);
  return it == ints.end() ? std::vector<int64_t>{} : it->second;
}
double Problem::float_attr(const std::string& name, double fallback) const {
  if (auto it = floats.find(name); it != floats.end() && !it->second.empty()) return it->second[0];
  if (auto it = ints.find(name); it != ints.end() && !it->second.empty())
    return static_cast<double>(it->second[0]);
  return fallback;
}
std::string Problem::string_attr(const std::string& name, const std::string& fallback) const {
  auto it = strings.find(name);
  return it == strings.end() ? fallback : it->second;
}

namespace {
[[noreturn]] void missing(const Problem& p, const std::string& name) {
  throw MissingAttribute(fmt::format("{}: attribute '{}' is missing (the IR always fills it)",
                                     p.key.empty() ? p.op : p.key, name));
}
}  // namespace

int64_t Problem::int_attr(const std::string& name) const {
  auto it = ints.find(name);
  if (it == ints.end() || it->second.empty()) missing(*this, name);
  return it->second[0];
}
double Problem::float_attr(const std::string& name) const {
  if (auto it = floats.find(name); it != floats.end() && !it->second.empty()) return it->second[0];
  if (auto it = ints.find(name); it != ints.end() && !it->second.empty())
    return static_cast<double>(it->second[0]);
  missing(*this, name);
}
std::string Problem::string_attr(const std::string& name) const {
  auto it = strings.find(name);
  if (it == strings.end()) missing(*this, name);
  return it->second;
}

// --- quantization ------------------------------------------------------------------------------

std::optional<Quantization> quantization(const Problem& p) {
  Quantization q;
  const std::string types = p.string_attr("qtypes", "");
  if (types.empty()) {
    if (p.kind != LayerKind::kConv && p.kind != LayerKind::kGemm && p.kind != LayerKind::kMatMul)
      return std::nullopt;
    q.inputs = {"u8", "i8"};
    q.output = "u8";
    q.zero_points = {1, 0, 1};
    q.per_channel = true;
    return q;
  }
  const auto arrow = types.find('>');
  if (arrow == std::string::npos) return std::nullopt;
  q.output = types.substr(arrow + 1);
  for (size_t at = 0; at < arrow;) {
    const size_t comma = std::min(types.find(',', at), arrow);
    q.inputs.push_back(types.substr(at, comma - at));
    at = comma + 1;
  }
  auto valid = [](const std::string& t) { return t == "u8" || t == "i8"; };
  if (!valid(q.output) || !std::all_of(q.inputs.begin(), q.inputs.end(), valid)) return std::nullopt;
  q.zero_points = p.ints_attr("zero_points");
  q.zero_points.resize(q.inputs.size() + 1, 0);
  q.per_channel = p.int_attr("per_channel", 0) != 0;
  return q;
}

Problem with_quantization(Problem p) {
  if (!p.string_attr("qtypes", "").empty()) return p;
  const auto q = quantization(p);
  if (!q) return p;
  p.strings["qtypes"] = fmt::format("{}>{}", fmt::join(q->inputs, ","), q->output);
  p.ints["zero_points"] = q->zero_points;
  p.ints["per_channel"] = {q->per_channel ? 1 : 0};
  return p;
}

Result<GemmDesc> gemm_desc(const Problem& p) {
  if (p.inputs.size() < 2 || p.outputs.empty())
    return make_error("{} needs two operands and an output", p.op);
  const Shape& a = p.inputs[0].shape;
  const Shape& b = p.inputs[1].shape;
  const Shape& y = p.outputs[0].shape;
  GemmDesc g;
  if (p.kind == LayerKind::kGemm) {
    if (a.size() != 2 || b.size() != 2) return make_error("Gemm operands must be 2-D");
    g.ta = p.int_attr("transA") != 0;
    g.tb = p.int_attr("transB") != 0;
    g.m = g.ta ? a[1] : a[0];
    g.k = g.ta ? a[0] : a[1];
    g.n = g.tb ? b[0] : b[1];
    g.alpha = static_cast<float>(p.float_attr("alpha"));
    g.has_c = p.inputs.size() > 2;
    g.beta = g.has_c ? static_cast<float>(p.float_attr("beta")) : 0.f;
    return g;
  }
  if (p.kind != LayerKind::kMatMul) return make_error("{} is no GEMM", p.op);
  if (a.size() < 2 || b.size() < 2 || y.size() < 2) return make_error("MatMul with a 1-D operand");
  // transB (the Transpose-into-MatMul collapse, docs/LAYERS.md): b holds B's last two dims swapped.
  g.tb = p.int_attr("transB", 0) != 0;
  g.m = a[a.size() - 2];
  g.k = a.back();
  g.n = g.tb ? b[b.size() - 2] : b.back();
  g.a_batch = elements(Shape(a.begin(), a.end() - 2));
  g.b_batch = elements(Shape(b.begin(), b.end() - 2));
  if (g.b_batch == 1) {
    g.m *= g.a_batch;
    return g;
  }
  g.folded = false;
  g.batch = elements(Shape(y.begin(), y.end() - 2));
  return g;
}

bool ConvDesc::pointwise() const {
  auto all = [](const Shape& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t d) { return d == x; });
  };
  return all(kernel, 1) && all(strides, 1) && all(pads_begin, 0) && all(pads_end, 0);
}

Result<ConvDesc> conv_desc(const Problem& p) {
  if (p.kind != LayerKind::kConv && p.kind != LayerKind::kConvTranspose)
    return make_error("{} is no convolution", p.op);
  if (p.inputs.size() < 2 || p.outputs.empty()) return make_error("{} needs x, w and y", p.op);
  const Shape& x = p.inputs[0].shape;
  const Shape& w = p.inputs[1].shape;
  const Shape& y = p.outputs[0].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || y.size() != x.size())
    return make_error("{}: x, w and y must be of one rank, 3 to 5 (x is rank {}, w {}, y {})", p.op, x.size(),
                      w.size(), y.size());
  ConvDesc d;
  const size_t n = x.size() - 2;
  d.transposed = p.kind == LayerKind::kConvTranspose;
  d.n = x[0];
  d.c = x[1];
  d.group = p.int_attr("group");
  d.k = d.transposed ? w[1] * d.group : w[0];
  d.in.assign(x.begin() + 2, x.end());
  d.out.assign(y.begin() + 2, y.end());
  d.kernel.assign(w.begin() + 2, w.end());
  d.has_bias = p.inputs.size() > 2;
  auto attr = [&](const char* name, int64_t fallback, size_t count) -> Result<Shape> {
    Shape v = p.ints_attr(name);
    if (v.empty()) v.assign(count, fallback);
    if (v.size() != count)
      return make_error("{}: {} has {} values for {} spatial dim(s)", p.op, name, v.size(), n);
    return v;
  };
  FL_ASSIGN_OR_RETURN(d.strides, attr("strides", 1, n));
  FL_ASSIGN_OR_RETURN(d.dilations, attr("dil", 1, n));
  FL_ASSIGN_OR_RETURN(const Shape pads, attr("pads", 0, 2 * n));
  d.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  d.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  if (d.transposed) {
    Shape op = p.ints_attr("output_padding");
    op.resize(n, 0);
    d.output_padding = op;
  } else {
    d.output_padding.assign(n, 0);
  }
  if (d.group < 1 || d.c % d.group != 0 || d.k % d.group != 0)
    return make_error("{}: group {} does not divide {} input and {} output channels", p.op, d.group, d.c,
                      d.k);
  if (y[1] != d.k) return make_error("{}: y has {} channels, the weights {}", p.op, y[1], d.k);
  return d;
}

float fill_half_width(const Problem& p, size_t k) try {
  if (k != 1) return 1.f;
  double fan_in = 0;
  if (p.kind == LayerKind::kConv || p.kind == LayerKind::kConvTranspose) {
    const auto d = conv_desc(p);
    if (!d) return 1.f;
    fan_in = static_cast<double>(d->c_per_group());
    for (size_t i = 0; i < d->kernel.size(); ++i) {
      fan_in *= static_cast<double>(d->kernel[i]);
      if (d->transposed) fan_in /= static_cast<double>(std::max<int64_t>(1, d->strides[i]));
    }
  } else if (p.kind == LayerKind::kGemm || p.kind == LayerKind::kMatMul) {
    const auto g = gemm_desc(p);
    if (!g) return 1.f;
    fan_in = static_cast<double>(g->k);
  } else {
    return 1.f;
  }
  return fan_in > 3 ? static_cast<float>(std::sqrt(3.0 / fan_in)) : 1.f;
} catch (const MissingAttribute&) {
  return 1.f;  // a Problem built by hand: the case's build reports it
}

bool weight_operand(const Problem& p, size_t k) {
  return k > 0 && k < p.inputs.size() && parameter_input(p.kind, p.inputs[k].role, p.inputs[k].shape.size());
}

}  // namespace floorline::kernels
