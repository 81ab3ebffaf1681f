// Plain reference computations of the ONNX semantics of each layer kind, for verification before
// timing (benchdnn and the CUTLASS profiler check results the same way). Deliberately naive:
// loops over output elements, double accumulation, no blocking, no library calls. Only small
// problems are verified, so speed does not matter; clarity does.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "floorline/kernels/reference.hpp"
#include "reference_internal.hpp"

namespace floorline::kernels {

int64_t elements(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (int64_t k = static_cast<int64_t>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
  return st;
}

AxisSplit split_at_axis(const Shape& s, int64_t axis) {
  AxisSplit a;
  for (int64_t k = 0; k < static_cast<int64_t>(s.size()); ++k) {
    if (k < axis) a.outer *= s[k];
    if (k == axis) a.n = s[k];
    if (k > axis) a.inner *= s[k];
  }
  return a;
}

namespace {

// Epsilon of the normalizations. ONNX's epsilon does not change the work, so it is not part of the
// canonical key; kernels and references both use the ONNX default.
constexpr double kEps = 1e-5;

// Multi-index iteration over a shape.
bool next_index(Shape& idx, const Shape& shape) {
  for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
    if (++idx[k] < shape[k]) return true;
    idx[k] = 0;
  }
  return false;
}

// Offset of `idx` (indices of an output of rank r) into a tensor broadcast to it (NumPy rules).
int64_t broadcast_offset(const Shape& idx, const Shape& shape) {
  const size_t r = idx.size(), n = shape.size();
  const Shape st = strides_of(shape);
  int64_t off = 0;
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = idx[r - n + k];
    off += (shape[k] == 1 ? 0 : i) * st[k];
  }
  return off;
}

HostTensor zeros(const Shape& s) {
  return HostTensor{s, std::vector<float>(static_cast<size_t>(elements(s)), 0.f)};
}

// Pads a spatial shape (dims from 2 on) to three dims, for the 1-D/2-D/3-D loops.
std::array<int64_t, 3> spatial3(const Shape& s) {
  std::array<int64_t, 3> r{1, 1, 1};
  const size_t n = s.size() - 2;
  for (size_t k = 0; k < n; ++k) r[3 - n + k] = s[k + 2];
  return r;
}
std::array<int64_t, 3> attr3(const std::vector<int64_t>& v, size_t n, size_t from, int64_t fill) {
  std::array<int64_t, 3> r{fill, fill, fill};
  for (size_t k = 0; k < n && from + k < v.size(); ++k) r[3 - n + k] = v[from + k];
  return r;
}

Result<std::vector<HostTensor>> conv(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const auto& w = in[1];
  const HostTensor* bias = in.size() > 2 ? &in[2] : nullptr;
  HostTensor y = zeros(p.outputs[0].shape);
  const size_t n = x.shape.size() - 2;
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], G = p.int_attr("group", 1);
  const int64_t Cg = C / G, Mg = M / G;
  const auto is = spatial3(x.shape), os = spatial3(y.shape), ks = spatial3(w.shape);
  const auto pads = p.ints_attr("pads");
  const auto pb = attr3(pads, n, 0, 0), st = attr3(p.ints_attr("strides"), n, 0, 1),
             dl = attr3(p.ints_attr("dil"), n, 0, 1);
  int64_t o = 0;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t od = 0; od < os[0]; ++od)
        for (int64_t oh = 0; oh < os[1]; ++oh)
          for (int64_t ow = 0; ow < os[2]; ++ow, ++o) {
            const int64_t g = m / Mg;
            double acc = bias ? bias->data[m] : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t kd = 0; kd < ks[0]; ++kd)
                for (int64_t kh = 0; kh < ks[1]; ++kh)
                  for (int64_t kw = 0; kw < ks[2]; ++kw) {
                    const int64_t id = od * st[0] - pb[0] + kd * dl[0];
                    const int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
                    const int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
                    if (id < 0 || id >= is[0] || ih < 0 || ih >= is[1] || iw < 0 || iw >= is[2]) continue;
                    const int64_t xi = (((b * C + g * Cg + c) * is[0] + id) * is[1] + ih) * is[2] + iw;
                    const int64_t wi = (((m * Cg + c) * ks[0] + kd) * ks[1] + kh) * ks[2] + kw;
                    acc += static_cast<double>(x.data[xi]) * w.data[wi];
                  }
            y.data[o] = static_cast<float>(acc);
          }
  return std::vector<HostTensor>{std::move(y)};
}

// ConvTranspose: every input element scatters into the outputs its kernel covers.
Result<std::vector<HostTensor>> conv_transpose(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const auto& w = in[1];  // (Cin, Cout/group, k...)
  const HostTensor* bias = in.size() > 2 ? &in[2] : nullptr;
  const Shape& ys = p.outputs[0].shape;
  std::vector<double> acc(static_cast<size_t>(elements(ys)), 0.0);
  const size_t n = x.shape.size() - 2;
  const int64_t N = x.shape[0], Cin = x.shape[1], G = p.int_attr("group", 1);
  const int64_t Cing = Cin / G, Coutg = w.shape[1], Cout = Coutg * G;
  const auto is = spatial3(x.shape), os = spatial3(ys), ks = spatial3(w.shape);
  const auto pb = attr3(p.ints_attr("pads"), n, 0, 0), st = attr3(p.ints_attr("strides"), n, 0, 1),
             dl = attr3(p.ints_attr("dil"), n, 0, 1);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t ci = 0; ci < Cin; ++ci) {
      const int64_t g = ci / Cing;
      for (int64_t id = 0; id < is[0]; ++id)
        for (int64_t ih = 0; ih < is[1]; ++ih)
          for (int64_t iw = 0; iw < is[2]; ++iw) {
            const double xv = x.data[(((b * Cin + ci) * is[0] + id) * is[1] + ih) * is[2] + iw];
            for (int64_t oc = 0; oc < Coutg; ++oc)
              for (int64_t kd = 0; kd < ks[0]; ++kd)
                for (int64_t kh = 0; kh < ks[1]; ++kh)
                  for (int64_t kw = 0; kw < ks[2]; ++kw) {
                    const int64_t od = id * st[0] - pb[0] + kd * dl[0];
                    const int64_t oh = ih * st[1] - pb[1] + kh * dl[1];
                    const int64_t ow = iw * st[2] - pb[2] + kw * dl[2];
                    if (od < 0 || od >= os[0] || oh < 0 || oh >= os[1] || ow < 0 || ow >= os[2]) continue;
                    const int64_t co = g * Coutg + oc;
                    const double wv = w.data[(((ci * Coutg + oc) * ks[0] + kd) * ks[1] + kh) * ks[2] + kw];
                    acc[(((b * Cout + co) * os[0] + od) * os[1] + oh) * os[2] + ow] += xv * wv;
                  }
          }
    }
  HostTensor y = zeros(ys);
  const int64_t spatial = os[0] * os[1] * os[2];
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t co = (static_cast<int64_t>(i) / spatial) % Cout;
    y.data[i] = static_cast<float>(acc[i] + (bias ? bias->data[co] : 0.0));
  }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> gemm(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& a = in[0];
  const auto& b = in[1];
  const bool ta = p.int_attr("transA") != 0, tb = p.int_attr("transB") != 0;
  const double alpha = p.float_attr("alpha"), beta = p.float_attr("beta");
  const int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  const int64_t N = tb ? b.shape[0] : b.shape[1];
  HostTensor y = zeros({M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(a.data[ta ? k * M + i : i * K + k]) * b.data[tb ? j * K + k : k * N + j];
      double v = alpha * acc;
      if (in.size() > 2) v += beta * in[2].data[broadcast_offset({i, j}, in[2].shape)];
      y.data[i * N + j] = static_cast<float>(v);
    }
  y.shape = p.outputs[0].shape;
  return std::vector<HostTensor>{std::move(y)};
}

// MatMul with NumPy semantics: 1-D operands promoted, batch dimensions broadcast.
Result<std::vector<HostTensor>> matmul(const Problem& p, const std::vector<HostTensor>& in) {
  Shape as = in[0].shape, bs = in[1].shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const size_t r = std::max(as.size(), bs.size());
  while (as.size() < r) as.insert(as.begin(), 1);
  while (bs.size() < r) bs.insert(bs.begin(), 1);
  // transB (the Transpose-into-MatMul collapse): b is stored (…, N, K).
  const bool tb = p.int_attr("transB", 0) != 0;
  const int64_t M = as[r - 2], K = as[r - 1], N = tb ? bs[r - 2] : bs[r - 1];
  Shape batch(r - 2);
  for (size_t k = 0; k + 2 < r; ++k) batch[k] = std::max(as[k], bs[k]);
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  HostTensor y = zeros(p.outputs[0].shape);
  Shape idx(batch.size(), 0);
  int64_t bi = 0;
  do {
    const int64_t ao = batch.empty() ? 0 : broadcast_offset(idx, a_batch);
    const int64_t bo = batch.empty() ? 0 : broadcast_offset(idx, b_batch);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(in[0].data[ao * M * K + i * K + k]) *
                 in[1].data[bo * K * N + (tb ? j * K + k : k * N + j)];
        y.data[(bi * M + i) * N + j] = static_cast<float>(acc);
      }
    ++bi;
  } while (!batch.empty() && next_index(idx, batch));
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> batch_norm(const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(x.shape);
  const int64_t N = x.shape[0], C = x.shape[1], S = elements(x.shape) / (N * C);
  for (int64_t i = 0; i < elements(x.shape); ++i) {
    const int64_t c = (i / S) % C;
    const double inv = 1.0 / std::sqrt(in[4].data[c] + kEps);
    y.data[i] = static_cast<float>(in[1].data[c] * (x.data[i] - in[3].data[c]) * inv + in[2].data[c]);
  }
  return std::vector<HostTensor>{std::move(y)};
}

// Normalizes `x` over groups of `inner` consecutive elements; scale/shift indexed by `param_of`.
template <class ParamIndex>
HostTensor normalize_groups(const HostTensor& x, int64_t inner, const HostTensor* scale,
                            const HostTensor* shift, ParamIndex param_of) {
  HostTensor y = zeros(x.shape);
  const int64_t groups = elements(x.shape) / inner;
  for (int64_t g = 0; g < groups; ++g) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x.data[g * inner + i];
    mean /= static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) var += std::pow(x.data[g * inner + i] - mean, 2);
    var /= static_cast<double>(inner);
    const double inv = 1.0 / std::sqrt(var + kEps);
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t pi = param_of(g, i);
      double v = (x.data[g * inner + i] - mean) * inv;
      if (scale) v *= scale->data[pi];
      if (shift) v += shift->data[pi];
      y.data[g * inner + i] = static_cast<float>(v);
    }
  }
  return y;
}

Result<std::vector<HostTensor>> layer_norm(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const int64_t axis = p.int_attr("axis");
  const int64_t inner = elements(Shape(x.shape.begin() + axis, x.shape.end()));
  return std::vector<HostTensor>{normalize_groups(x, inner, &in[1], in.size() > 2 ? &in[2] : nullptr,
                                                  [](int64_t, int64_t i) { return i; })};
}

Result<std::vector<HostTensor>> instance_norm(const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const int64_t C = x.shape[1], S = elements(x.shape) / (x.shape[0] * C);
  return std::vector<HostTensor>{
      normalize_groups(x, S, &in[1], &in[2], [C](int64_t g, int64_t) { return g % C; })};
}

Result<std::vector<HostTensor>> lrn(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const int64_t size = p.int_attr("size");
  const double alpha = 1e-4, beta = 0.75, bias = 1.0;  // ONNX defaults (not in the key)
  const int64_t N = x.shape[0], C = x.shape[1], S = elements(x.shape) / (N * C);
  HostTensor y = zeros(x.shape);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        double sum = 0;
        const int64_t lo = std::max<int64_t>(0, c - (size - 1) / 2), hi = std::min(C - 1, c + size / 2);
        for (int64_t j = lo; j <= hi; ++j) sum += std::pow(x.data[(b * C + j) * S + s], 2);
        const int64_t i = (b * C + c) * S + s;
        y.data[i] =
            static_cast<float>(x.data[i] / std::pow(bias + alpha / static_cast<double>(size) * sum, beta));
      }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> binary(const Problem& p, const std::vector<HostTensor>& in) {
  HostTensor y = zeros(p.outputs[0].shape);
  Shape idx(y.shape.size(), 0);
  int64_t o = 0;
  do {
    const double a = in[0].data[broadcast_offset(idx, in[0].shape)];
    const double b = in[1].data[broadcast_offset(idx, in[1].shape)];
    double v = 0;
    switch (p.kind) {
      case LayerKind::kAdd:
        v = a + b;
        break;
      case LayerKind::kSub:
        v = a - b;
        break;
      case LayerKind::kMul:
        v = a * b;
        break;
      case LayerKind::kDiv:
        v = a / b;
        break;
      case LayerKind::kMax:
        v = std::max(a, b);
        break;
      case LayerKind::kMin:
        v = std::min(a, b);
        break;
      case LayerKind::kEqual:
        v = a == b;
        break;
      case LayerKind::kLess:
        v = a < b;
        break;
      case LayerKind::kGreater:
        v = a > b;
        break;
      case LayerKind::kPRelu:
        v = a < 0 ? a * b : a;
        break;
      case LayerKind::kGreaterOrEqual:
        v = a >= b;
        break;
      case LayerKind::kLessOrEqual:
        v = a <= b;
        break;
      case LayerKind::kXor:  // booleans: nonzero is true
        v = (a != 0) != (b != 0);
        break;
      default:
        return make_error("no binary reference for {}", p.op);
    }
    y.data[o++] = static_cast<float>(v);
  } while (!y.shape.empty() && next_index(idx, y.shape));
  return std::vector<HostTensor>{std::move(y)};
}

// Sum: every input, broadcast to the output (NumPy rules), added.
Result<std::vector<HostTensor>> sum(const Problem& p, const std::vector<HostTensor>& in) {
  HostTensor y = zeros(p.outputs[0].shape);
  Shape idx(y.shape.size(), 0);
  int64_t o = 0;
  do {
    double v = 0;
    for (const auto& t : in) v += t.data[broadcast_offset(idx, t.shape)];
    y.data[o++] = static_cast<float>(v);
  } while (!y.shape.empty() && next_index(idx, y.shape));
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> softmax(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const int64_t axis = p.int_attr("axis");
  const bool coerce = p.int_attr("coerce_2d", 0) != 0;
  // Softmax over `len` elements spaced `stride` apart, for every outer × inner position.
  const int64_t outer = elements(Shape(x.shape.begin(), x.shape.begin() + axis));
  const int64_t len = coerce ? elements(Shape(x.shape.begin() + axis, x.shape.end())) : x.shape[axis];
  const int64_t inner = coerce ? 1 : elements(Shape(x.shape.begin() + axis + 1, x.shape.end()));
  HostTensor y = zeros(x.shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, static_cast<double>(x.data[base + k * inner]));
      for (int64_t k = 0; k < len; ++k) sum += std::exp(x.data[base + k * inner] - mx);
      for (int64_t k = 0; k < len; ++k) {
        const double e = x.data[base + k * inner] - mx;
        y.data[base + k * inner] =
            static_cast<float>(p.kind == LayerKind::kLogSoftmax ? e - std::log(sum) : std::exp(e) / sum);
      }
    }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> pool(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);
  const bool global = p.kind == LayerKind::kGlobalAveragePool || p.kind == LayerKind::kGlobalMaxPool;
  const bool is_max = p.kind == LayerKind::kMaxPool || p.kind == LayerKind::kGlobalMaxPool;
  const size_t n = x.shape.size() - 2;
  const auto is = spatial3(x.shape), os = spatial3(y.shape);
  std::array<int64_t, 3> ks = is, pb{0, 0, 0}, st{1, 1, 1}, dl{1, 1, 1};
  if (!global) {
    ks = attr3(p.ints_attr("kernel"), n, 0, 1);
    pb = attr3(p.ints_attr("pads"), n, 0, 0);
    st = attr3(p.ints_attr("strides"), n, 0, 1);
    dl = attr3(p.ints_attr("dil"), n, 0, 1);
  }
  const auto pads = p.ints_attr("pads");
  const auto pe = global ? std::array<int64_t, 3>{0, 0, 0} : attr3(pads, n, n, 0);
  const bool include_pad = !is_max && !global && p.int_attr("count_include_pad") != 0;
  const int64_t NC = x.shape[0] * x.shape[1];
  int64_t o = 0;
  for (int64_t c = 0; c < NC; ++c)
    for (int64_t od = 0; od < os[0]; ++od)
      for (int64_t oh = 0; oh < os[1]; ++oh)
        for (int64_t ow = 0; ow < os[2]; ++ow, ++o) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t count = 0, padded_count = 0;
          for (int64_t kd = 0; kd < ks[0]; ++kd)
            for (int64_t kh = 0; kh < ks[1]; ++kh)
              for (int64_t kw = 0; kw < ks[2]; ++kw) {
                const int64_t id = od * st[0] - pb[0] + kd * dl[0], ih = oh * st[1] - pb[1] + kh * dl[1],
                              iw = ow * st[2] - pb[2] + kw * dl[2];
                // Positions inside the padded input count for count_include_pad.
                if (id < is[0] + pe[0] && ih < is[1] + pe[1] && iw < is[2] + pe[2]) ++padded_count;
                if (id < 0 || id >= is[0] || ih < 0 || ih >= is[1] || iw < 0 || iw >= is[2]) continue;
                const double v = x.data[((c * is[0] + id) * is[1] + ih) * is[2] + iw];
                acc = is_max ? std::max(acc, v) : acc + v;
                ++count;
              }
          if (!is_max) acc /= static_cast<double>(include_pad ? padded_count : count);
          y.data[o] = static_cast<float>(acc);
        }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> reduce(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  const auto axes = p.ints_attr("axes");
  Shape kept = x.shape;  // output shape with reduced dims kept as 1
  for (auto a : axes) kept[a] = 1;
  const int64_t out_n = elements(kept);
  std::vector<double> acc(static_cast<size_t>(out_n));
  const bool is_max = p.kind == LayerKind::kReduceMax, is_min = p.kind == LayerKind::kReduceMin,
             is_prod = p.kind == LayerKind::kReduceProd;
  std::fill(acc.begin(), acc.end(),
            is_max    ? -std::numeric_limits<double>::infinity()
            : is_min  ? std::numeric_limits<double>::infinity()
            : is_prod ? 1.0
                      : 0.0);
  Shape idx(x.shape.size(), 0);
  int64_t i = 0;
  do {
    const int64_t o = broadcast_offset(idx, kept);
    const double v = x.data[i++];
    if (is_max)
      acc[o] = std::max(acc[o], v);
    else if (is_min)
      acc[o] = std::min(acc[o], v);
    else if (is_prod)
      acc[o] *= v;
    else
      acc[o] += v;
  } while (next_index(idx, x.shape));
  HostTensor y = zeros(p.outputs[0].shape);
  const double n = static_cast<double>(elements(x.shape) / out_n);
  for (int64_t k = 0; k < out_n; ++k)
    y.data[k] = static_cast<float>(p.kind == LayerKind::kReduceMean ? acc[k] / n : acc[k]);
  return std::vector<HostTensor>{std::move(y)};
}

// Copies `src` (shape s) into `dst` (shape d) at per-dim offsets `at`, with per-dim steps.
void copy_box(const HostTensor& src, const Shape& src_start, const Shape& steps, HostTensor& dst,
              const Shape& dst_start, const Shape& box) {
  if (elements(box) == 0) return;
  const Shape ss = strides_of(src.shape), ds = strides_of(dst.shape);
  Shape idx(box.size(), 0);
  do {
    int64_t so = 0, dof = 0;
    for (size_t k = 0; k < box.size(); ++k) {
      so += (src_start[k] + idx[k] * steps[k]) * ss[k];
      dof += (dst_start[k] + idx[k]) * ds[k];
    }
    dst.data[dof] = src.data[so];
  } while (!box.empty() && next_index(idx, box));
}

Result<std::vector<HostTensor>> concat(const Problem& p, const std::vector<HostTensor>& in) {
  HostTensor y = zeros(p.outputs[0].shape);
  const int64_t axis = p.int_attr("axis");
  int64_t at = 0;
  for (const auto& t : in) {
    Shape dst_start(y.shape.size(), 0);
    dst_start[axis] = at;
    copy_box(t, Shape(t.shape.size(), 0), Shape(t.shape.size(), 1), y, dst_start, t.shape);
    at += t.shape[axis];
  }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> split(const Problem& p, const std::vector<HostTensor>& in) {
  const int64_t axis = p.int_attr("axis");
  std::vector<HostTensor> out;
  int64_t at = 0;
  for (const auto& o : p.outputs) {
    HostTensor y = zeros(o.shape);
    Shape src_start(y.shape.size(), 0);
    src_start[axis] = at;
    copy_box(in[0], src_start, Shape(y.shape.size(), 1), y, Shape(y.shape.size(), 0), y.shape);
    at += o.shape[axis];
    out.push_back(std::move(y));
  }
  return out;
}

Result<std::vector<HostTensor>> transpose(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  auto perm = p.ints_attr("perm");
  const size_t rank = x.shape.size();
  if (perm.empty())  // ONNX's default: the dims reversed
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  // A permutation of x's axes that gives y's shape: no index reads past x.
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank && p.outputs[0].shape.size() == rank;
  for (size_t k = 0; valid && k < rank; ++k) {
    valid = perm[k] >= 0 && perm[k] < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(perm[k])] &&
            p.outputs[0].shape[k] == x.shape[static_cast<size_t>(perm[k])];
    if (valid) seen[static_cast<size_t>(perm[k])] = true;
  }
  if (!valid)
    return make_error("Transpose: perm {} does not map a {} input to the output", fmt::join(perm, ","), rank);
  HostTensor y = zeros(p.outputs[0].shape);
  if (y.data.empty()) return std::vector<HostTensor>{std::move(y)};
  const Shape xs = strides_of(x.shape);
  Shape idx(y.shape.size(), 0);
  int64_t o = 0;
  do {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * xs[perm[k]];
    y.data[o++] = x.data[off];
  } while (next_index(idx, y.shape));
  return std::vector<HostTensor>{std::move(y)};
}

// Expand: x broadcast to the output shape (NumPy rules; ONNX Expand).
Result<std::vector<HostTensor>> expand(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);
  if (y.data.empty()) return std::vector<HostTensor>{std::move(y)};
  Shape idx(y.shape.size(), 0);
  int64_t o = 0;
  do {
    y.data[o++] = x.data[broadcast_offset(idx, x.shape)];
  } while (next_index(idx, y.shape));
  return std::vector<HostTensor>{std::move(y)};
}

// Tile: y[i_0, ..., i_r] = x[i_0 mod x_0, ..., i_r mod x_r] (ONNX Tile).
Result<std::vector<HostTensor>> tile(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);
  if (y.data.empty()) return std::vector<HostTensor>{std::move(y)};
  if (x.shape.size() != y.shape.size()) return make_error("Tile: the input's rank differs from the output's");
  const Shape xs = strides_of(x.shape);
  Shape idx(y.shape.size(), 0);
  int64_t o = 0;
  do {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += (idx[k] % x.shape[k]) * xs[k];
    y.data[o++] = x.data[off];
  } while (next_index(idx, y.shape));
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> slice(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  Shape start(x.shape.size(), 0), steps(x.shape.size(), 1);
  const auto starts = p.ints_attr("starts"), axes = p.ints_attr("axes"), st = p.ints_attr("steps");
  if (y.shape.size() != x.shape.size())
    return make_error("Slice: a rank-{} output of a rank-{} input", y.shape.size(), x.shape.size());
  if (starts.size() != axes.size())
    return make_error("Slice: {} starts for {} axes", starts.size(), axes.size());
  // ONNX's rules: a negative axis or start counts from the end; a start is clamped to the dim
  // ([0, dim − 1] for a negative step).
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a < 0 || a >= rank) return make_error("Slice: axis {} of a rank-{} tensor", axes[k], rank);
    const int64_t dim = x.shape[static_cast<size_t>(a)], step = k < st.size() ? st[k] : 1;
    if (step == 0) return make_error("Slice: a step of 0");
    const int64_t s0 = starts[k] < 0 ? starts[k] + dim : starts[k];
    start[static_cast<size_t>(a)] =
        std::clamp<int64_t>(s0, 0, step > 0 ? dim : std::max<int64_t>(0, dim - 1));
    steps[static_cast<size_t>(a)] = step;
  }
  for (size_t d = 0; d < y.shape.size(); ++d) {  // the last element y reads lies in x
    int64_t span = 0;
    if (y.shape[d] <= 0) continue;
    if (__builtin_mul_overflow(y.shape[d] - 1, steps[d], &span) ||
        __builtin_add_overflow(start[d], span, &span) || span < 0 || span >= x.shape[d])
      return make_error("Slice: output dim {} of {} reads past the input's {}", d, y.shape[d], x.shape[d]);
  }
  copy_box(x, start, steps, y, Shape(y.shape.size(), 0), y.shape);
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> pad(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);  // constant 0: the value is not part of the key
  const auto pads = p.ints_attr("pads");
  const size_t r = x.shape.size();
  Shape dst_start(r), src_start(r, 0), box(r);
  for (size_t k = 0; k < r; ++k) {
    dst_start[k] = std::max<int64_t>(0, pads[k]);
    src_start[k] = std::max<int64_t>(0, -pads[k]);
    box[k] = std::min(x.shape[k] - src_start[k], y.shape[k] - dst_start[k]);
  }
  copy_box(x, src_start, Shape(r, 1), y, dst_start, box);
  return std::vector<HostTensor>{std::move(y)};
}

// Resize over the spatial dims (N and C unchanged): nearest with oneDNN's rounding
// (in = round((out + 0.5)·in_size/out_size − 0.5), equal to ONNX asymmetric/floor for integer
// upscales) and linear with half-pixel centres (ONNX half_pixel, PyTorch align_corners=False).
Result<std::vector<HostTensor>> resize(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in[0];
  HostTensor y = zeros(p.outputs[0].shape);
  const bool linear = p.string_attr("mode") == "linear";
  const auto is = spatial3(x.shape), os = spatial3(y.shape);
  const int64_t NC = x.shape[0] * x.shape[1];
  auto src_coord = [](int64_t o, int64_t out, int64_t in) {
    return (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
  };
  int64_t o = 0;
  for (int64_t c = 0; c < NC; ++c)
    for (int64_t od = 0; od < os[0]; ++od)
      for (int64_t oh = 0; oh < os[1]; ++oh)
        for (int64_t ow = 0; ow < os[2]; ++ow, ++o) {
          const std::array<int64_t, 3> oi{od, oh, ow};
          if (!linear) {
            std::array<int64_t, 3> ii{};
            for (int d = 0; d < 3; ++d)
              ii[d] = std::clamp<int64_t>(std::llround(src_coord(oi[d], os[d], is[d])), 0, is[d] - 1);
            y.data[o] = x.data[((c * is[0] + ii[0]) * is[1] + ii[1]) * is[2] + ii[2]];
            continue;
          }
          std::array<int64_t, 3> lo{}, hi{};
          std::array<double, 3> wgt{};
          for (int d = 0; d < 3; ++d) {
            const double s = std::max(0.0, src_coord(oi[d], os[d], is[d]));
            lo[d] = std::min<int64_t>(static_cast<int64_t>(std::floor(s)), is[d] - 1);
            hi[d] = std::min<int64_t>(lo[d] + 1, is[d] - 1);
            wgt[d] = s - static_cast<double>(lo[d]);
          }
          double acc = 0;
          for (int corner = 0; corner < 8; ++corner) {
            double wc = 1;
            std::array<int64_t, 3> ii{};
            for (int d = 0; d < 3; ++d) {
              const bool up = (corner >> d) & 1;
              ii[d] = up ? hi[d] : lo[d];
              wc *= up ? wgt[d] : 1.0 - wgt[d];
            }
            acc += wc * x.data[((c * is[0] + ii[0]) * is[1] + ii[1]) * is[2] + ii[2]];
          }
          y.data[o] = static_cast<float>(acc);
        }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> cast(const Problem& p, const std::vector<HostTensor>& in) {
  return std::vector<HostTensor>{HostTensor{p.outputs[0].shape, in[0].data}};
}
Result<std::vector<HostTensor>> batch_norm_of(const Problem&, const std::vector<HostTensor>& in) {
  return batch_norm(in);
}
Result<std::vector<HostTensor>> instance_norm_of(const Problem&, const std::vector<HostTensor>& in) {
  return instance_norm(in);
}

// Element-wise unary ops. Alpha and beta are the ONNX attributes of the kinds that have them
// (the IR fills their defaults); Clip's bounds are absent when unbounded; Pow's exponent is `y`.
Result<std::vector<HostTensor>> unary(const Problem& p, const std::vector<HostTensor>& in) {
  HostTensor y = zeros(p.outputs[0].shape);
  double alpha = 0, beta = 0;
  switch (p.kind) {
    case LayerKind::kLeakyRelu:
    case LayerKind::kElu:
      alpha = p.float_attr("alpha");
      break;
    case LayerKind::kHardSigmoid:
      alpha = p.float_attr("alpha"), beta = p.float_attr("beta");
      break;
    case LayerKind::kClip:
      alpha = p.float_attr("min", -std::numeric_limits<double>::infinity());
      beta = p.float_attr("max", std::numeric_limits<double>::infinity());
      break;
    case LayerKind::kPow:
      beta = p.float_attr("y", 1.0);
      break;
    case LayerKind::kGelu:
      alpha = p.string_attr("approximate", "none") == "tanh" ? 1 : 0;
      break;
    default:
      break;
  }
  if (std::isnan(eltwise_reference(p.kind, 0.5f, alpha, beta)))
    return make_error("no reference computation for {}", p.op);
  for (size_t i = 0; i < y.data.size(); ++i)
    y.data[i] = eltwise_reference(p.kind, in[0].data[i], alpha, beta);
  return std::vector<HostTensor>{std::move(y)};
}

// --- quantization ----------------------------------------------------------------------------------

double saturate(double v, const std::string& type) {
  return type == "u8" ? std::clamp(v, 0.0, 255.0) : std::clamp(v, -128.0, 127.0);
}
// The scale (and zero point) element of flat index i: per-tensor, or per index along `axis`.
int64_t channel_of(int64_t i, const Shape& shape, int64_t axis, int64_t count) {
  if (count <= 1) return 0;
  int64_t inner = 1;
  for (size_t k = static_cast<size_t>(axis) + 1; k < shape.size(); ++k) inner *= shape[k];
  return i / inner % count;
}
// QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point) (ONNX operator docs).
Result<std::vector<HostTensor>> quantize_linear(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const auto& scale = in.at(1);
  const HostTensor* zp = in.size() > 2 ? &in[2] : nullptr;
  const int64_t n = elements(scale.shape), axis = p.int_attr("axis", 1);
  const std::string to = p.string_attr("to", "u8");
  HostTensor y = zeros(x.shape);
  for (int64_t i = 0; i < elements(x.shape); ++i) {
    const int64_t c = channel_of(i, x.shape, axis, n);
    const double z = zp ? zp->data[zp->data.size() > 1 ? c : 0] : 0.0;
    y.data[i] =
        static_cast<float>(saturate(std::nearbyint(x.data[i] / static_cast<double>(scale.data[c])) + z, to));
  }
  return std::vector<HostTensor>{std::move(y)};
}
// DequantizeLinear: y = (x − zero_point) · scale.
Result<std::vector<HostTensor>> dequantize_linear(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const auto& scale = in.at(1);
  const HostTensor* zp = in.size() > 2 ? &in[2] : nullptr;
  const int64_t n = elements(scale.shape), axis = p.int_attr("axis", 1);
  HostTensor y = zeros(x.shape);
  for (int64_t i = 0; i < elements(x.shape); ++i) {
    const int64_t c = channel_of(i, x.shape, axis, n);
    const double z = zp ? zp->data[zp->data.size() > 1 ? c : 0] : 0.0;
    y.data[i] = static_cast<float>((x.data[i] - z) * scale.data[c]);
  }
  return std::vector<HostTensor>{std::move(y)};
}

// MatMulNBits (ONNX Runtime's com.microsoft operator, docs/ContribOperators.md): B [N, blocks,
// block_size·bits/8] bytes holds row n's weights, weight k in block k / block_size at bit offset
// (k mod block_size)·bits, low bits first; w = (q − z) · scales[n·blocks + block], z read from
// zero_points packed the same way, ceil(blocks·bits / 8) bytes per row (2^(bits−1) without them);
// y = A · wᵀ (+ bias). Bytes arrive as floats holding 0..255.
Result<std::vector<HostTensor>> matmul_nbits(const Problem& p, const std::vector<HostTensor>& in) {
  const int64_t K = p.int_attr("K"), N = p.int_attr("N"), bits = p.int_attr("bits"),
                bs = p.int_attr("block_size");
  if (bits != 4 && bits != 8) return make_error("MatMulNBits: {} bits (the reference reads 4 and 8)", bits);
  if (K <= 0 || N <= 0 || bs <= 0) return make_error("MatMulNBits: K {}, N {}, block_size {}", K, N, bs);
  const int64_t blocks = (K + bs - 1) / bs, blob = bs * bits / 8, zbytes = (blocks * bits + 7) / 8;
  const auto& a = in.at(0);
  const auto& b = in.at(1);
  const auto& scales = in.at(2);
  const int zi = p.input_index("zero_points"), bi = p.input_index("bias");
  auto nibble = [bits](float byte_value, int64_t index) {
    const auto byte = static_cast<uint32_t>(byte_value);
    return static_cast<double>(bits == 8 ? byte : (index % 2 != 0 ? byte >> 4 : byte & 0xFu));
  };
  const int64_t M = elements(a.shape) / K;
  HostTensor y = zeros(p.outputs[0].shape);
  std::vector<double> w(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t block = k / bs, within = k % bs;
      const double q =
          nibble(b.data[static_cast<size_t>((n * blocks + block) * blob + within * bits / 8)], within);
      const double z =
          zi >= 0
              ? nibble(
                    in.at(static_cast<size_t>(zi)).data[static_cast<size_t>(n * zbytes + block * bits / 8)],
                    block)
              : static_cast<double>(1 << (bits - 1));
      w[static_cast<size_t>(k)] = (q - z) * scales.data[static_cast<size_t>(n * blocks + block)];
    }
    for (int64_t m = 0; m < M; ++m) {
      double acc = bi >= 0 ? in.at(static_cast<size_t>(bi)).data[static_cast<size_t>(n)] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        acc += a.data[static_cast<size_t>(m * K + k)] * w[static_cast<size_t>(k)];
      y.data[static_cast<size_t>(m * N + n)] = static_cast<float>(acc);
    }
  }
  return std::vector<HostTensor>{std::move(y)};
}

using ReferenceFn = Result<std::vector<HostTensor>> (*)(const Problem&, const std::vector<HostTensor>&);
struct ReferenceRow {
  ReferenceFn fn = nullptr;
  std::string_view reason;  // when fn is null: why there is no reference
};

// The reference's kind table: a computation for every compute kind, or why there is none. A
// switch with no default: a kind added to layer_kind.hpp and left out here does not compile.
ReferenceRow reference_row(LayerKind k) {
  using K = LayerKind;
  switch (k) {
    case K::kConv:
      return {conv, {}};
    case K::kConvTranspose:
      return {conv_transpose, {}};
    case K::kGemm:
      return {gemm, {}};
    case K::kMatMul:
      return {matmul, {}};
    case K::kBatchNormalization:
      return {batch_norm_of, {}};
    case K::kLayerNormalization:
      return {layer_norm, {}};
    case K::kInstanceNormalization:
      return {instance_norm_of, {}};
    case K::kLRN:
      return {lrn, {}};
    case K::kRelu:
    case K::kLeakyRelu:
    case K::kElu:
    case K::kSelu:
    case K::kClip:
    case K::kSigmoid:
    case K::kTanh:
    case K::kHardSigmoid:
    case K::kHardSwish:
    case K::kSoftplus:
    case K::kErf:
    case K::kExp:
    case K::kLog:
    case K::kSqrt:
    case K::kReciprocal:
    case K::kNeg:
    case K::kAbs:
    case K::kPow:
    case K::kGelu:
      return {unary, {}};
    case K::kFloor:
    case K::kCeil:
    case K::kNot:
      return {nullptr, "no reference: no backend maps it to a kernel that needs checking"};
    case K::kCast:
      return {cast, {}};  // every tensor is float here: a cast is a copy
    case K::kAdd:
    case K::kSub:
    case K::kMul:
    case K::kDiv:
    case K::kMax:
    case K::kMin:
    case K::kEqual:
    case K::kLess:
    case K::kGreater:
    case K::kPRelu:
      return {binary, {}};
    // --- comparisons, logic and reductions
    case K::kGreaterOrEqual:
    case K::kLessOrEqual:
    case K::kXor:
      return {binary, {}};
    case K::kMean:
      return {reference_detail::mean, {}};
    case K::kCumSum:
      return {reference_detail::cumsum, {}};
    case K::kArgMax:
    case K::kArgMin:
      return {reference_detail::arg_extreme, {}};
    case K::kTopK:  // detection heads
      return {reference_detail::topk, {}};
    case K::kGatherND:
      return {reference_detail::gather_nd, {}};
    case K::kNonZero:
      return {reference_detail::nonzero, {}};
    case K::kNonMaxSuppression:
      return {reference_detail::non_max_suppression, {}};
    case K::kRoiAlign:  // sampling and scatter
      return {reference_detail::roi_align, {}};
    case K::kScatterElements:
      return {reference_detail::scatter_elements, {}};
    case K::kGridSample:
      return {reference_detail::grid_sample, {}};
    case K::kLSTM:
    case K::kGRU:
    case K::kRNN:
      return {reference_detail::recurrent, {}};
    // ---
    case K::kMod:
    case K::kAnd:
    case K::kOr:
      return {nullptr, "no reference: no backend maps it to a kernel that needs checking"};
    case K::kWhere:
      return {nullptr, "no reference: backends time it as a copy of its output"};
    case K::kSum:
      return {sum, {}};
    case K::kSoftmax:
    case K::kLogSoftmax:
      return {softmax, {}};
    case K::kMaxPool:
    case K::kAveragePool:
    case K::kGlobalAveragePool:
    case K::kGlobalMaxPool:
      return {pool, {}};
    case K::kReduceMean:
    case K::kReduceSum:
    case K::kReduceMax:
    case K::kReduceMin:
    case K::kReduceProd:
      return {reduce, {}};
    case K::kConcat:
      return {concat, {}};
    case K::kSplit:
      return {split, {}};
    case K::kSlice:
      return {slice, {}};
    case K::kTranspose:
      return {transpose, {}};
    case K::kPad:
      return {pad, {}};
    case K::kResize:
      return {resize, {}};
    case K::kGather:
      return {nullptr, "no reference: its indices are random, so its output is not checked"};
    case K::kExpand:
      return {expand, {}};
    case K::kTile:
      return {tile, {}};
    case K::kScatterND:
      return {nullptr, "no reference: backends time it as a copy of its output"};
    case K::kRange:
      return {nullptr, "no reference: no backend maps it"};
    /* quantization */
    case K::kQuantizeLinear:
      return {quantize_linear, {}};
    case K::kDequantizeLinear:
      return {dequantize_linear, {}};
    case K::kMatMulNBits:
      return {matmul_nbits, {}};
    case K::kReshape:
    case K::kFlatten:
    case K::kSqueeze:
    case K::kUnsqueeze:
    case K::kIdentity:
    case K::kDropout:
      return {nullptr, "a view: moves no data, never benchmarked"};
    case K::kShape:
    case K::kSize:
    case K::kConstant:
    case K::kConstantOfShape:
      return {nullptr, "a host op: runs before inference, never benchmarked"};
    case K::kIf:
    case K::kLoop:
      return {nullptr, "control flow: the layers of its subgraphs are benchmarked"};
    case K::kUnsupported:
      return {nullptr, "not a kind Floorline knows"};
  }
  return {nullptr, {}};  // not a kind: an empty reason, which kind_support_test rejects
}

Result<std::vector<HostTensor>> main_op(const Problem& p, const std::vector<HostTensor>& in) {
  const ReferenceRow row = reference_row(p.kind);
  if (!row.fn) return make_error("no reference computation for {}: {}", p.op, row.reason);
  try {
    return row.fn(p, in);
  } catch (const MissingAttribute& e) {
    return make_error("{}", e.what());
  }
}

}  // namespace

float eltwise_reference(LayerKind kind, float xf, double alpha, double beta) {
  const double x = xf;
  double v = std::numeric_limits<double>::quiet_NaN();
  switch (kind) {
    case LayerKind::kRelu:
      v = std::max(0.0, x);
      break;
    case LayerKind::kLeakyRelu:
      v = x < 0 ? alpha * x : x;
      break;
    case LayerKind::kElu:
      v = x < 0 ? alpha * (std::exp(x) - 1) : x;
      break;
    case LayerKind::kSelu:
      v = 1.0507009873554805 * (x < 0 ? 1.6732632423543772 * (std::exp(x) - 1) : x);
      break;
    case LayerKind::kClip:
      v = std::clamp(x, alpha, beta);
      break;
    case LayerKind::kSigmoid:
      v = 1 / (1 + std::exp(-x));
      break;
    case LayerKind::kTanh:
      v = std::tanh(x);
      break;
    case LayerKind::kHardSigmoid:
      v = std::clamp(alpha * x + beta, 0.0, 1.0);
      break;
    case LayerKind::kHardSwish:
      v = x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
      break;
    case LayerKind::kSoftplus:
      v = std::log1p(std::exp(x));
      break;
    case LayerKind::kErf:
      v = std::erf(x);
      break;
    case LayerKind::kGelu:  // alpha 1: approximate = "tanh" (ONNX Gelu-20)
      v = alpha != 0
              ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)))
              : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
      break;
    case LayerKind::kExp:
      v = std::exp(x);
      break;
    case LayerKind::kLog:
      v = std::log(x);
      break;
    case LayerKind::kSqrt:
      v = std::sqrt(x);
      break;
    case LayerKind::kReciprocal:
      v = 1 / x;
      break;
    case LayerKind::kNeg:
      v = -x;
      break;
    case LayerKind::kAbs:
      v = std::abs(x);
      break;
    case LayerKind::kPow:
      v = std::pow(x, beta);
      break;
    default:
      break;
  }
  return static_cast<float>(v);
}

float eltwise_reference(const std::string& op, float x, double alpha, double beta) {
  if (op == "Swish")
    return static_cast<float>(x / (1.0 + std::exp(-static_cast<double>(x))));  // x·sigmoid(x)
  const auto kind = kind_from_name(op);
  return kind ? eltwise_reference(*kind, x, alpha, beta) : std::numeric_limits<float>::quiet_NaN();
}

KindSupport reference_support(LayerKind kind) {
  const ReferenceRow row = reference_row(kind);
  return row.fn ? KindSupport{"plain loops", {}} : KindSupport{{}, row.reason};
}

namespace {

// An int8 Conv/Gemm/MatMul (`qtypes`, with_quantization): extras are the output scales (one per
// output channel, or one), then the zero point of x and of y where their flags are 1;
// y = saturate(round(scale · (Σ (x − x_zp) · w + bias)) + y_zp), the bias in the accumulator's
// scale (int32 in a QDQ model: ONNX Runtime's QLinearConv, oneDNN 2.x int8 semantics). An int8
// pooling rounds and saturates the plain result (input and output scales equal).
Result<std::vector<HostTensor>> quantized_reference(const Problem& p, const Quantization& q,
                                                    std::vector<HostTensor> inputs,
                                                    const std::vector<HostTensor>& extras) {
  const bool gemm_like =
      p.kind == LayerKind::kConv || p.kind == LayerKind::kGemm || p.kind == LayerKind::kMatMul;
  if (!gemm_like) {
    FL_ASSIGN_OR_RETURN(auto out, main_op(p, inputs));
    for (auto& v : out[0].data) v = static_cast<float>(saturate(std::nearbyint(v), q.output));
    return out;
  }
  if (extras.empty()) return make_error("{}: an int8 case has no output scales", p.key);
  const HostTensor& scales = extras[0];
  size_t e = 1;
  double x_zp = 0, y_zp = 0;
  if (q.zero_points.at(0) != 0) {
    if (e >= extras.size()) return make_error("{}: no zero point of x", p.key);
    x_zp = extras[e++].data.at(0);
  }
  if (q.zero_points.back() != 0) {
    if (e >= extras.size()) return make_error("{}: no zero point of y", p.key);
    y_zp = extras[e++].data.at(0);
  }
  for (auto& v : inputs.at(0).data) v = static_cast<float>(v - x_zp);
  Problem plain = p;
  plain.floats["alpha"] = {1.0};
  plain.floats["beta"] = {1.0};
  FL_ASSIGN_OR_RETURN(auto out, main_op(plain, inputs));
  auto& y = out[0];
  const int64_t n = elements(scales.shape);
  const int64_t axis = p.kind == LayerKind::kConv ? 1 : static_cast<int64_t>(y.shape.size()) - 1;
  for (int64_t i = 0; i < elements(y.shape); ++i) {
    const double s = scales.data[channel_of(i, y.shape, axis, n)];
    y.data[i] = static_cast<float>(saturate(std::nearbyint(s * y.data[i]) + y_zp, q.output));
  }
  return out;
}

}  // namespace

Result<std::vector<HostTensor>> reference(const Problem& p, const std::vector<HostTensor>& inputs,
                                          const std::vector<HostTensor>& extras) {
  if (!p.string_attr("qtypes", "").empty()) {
    const auto q = quantization(p);
    if (!q) return make_error("{}: unreadable quantization '{}'", p.key, p.string_attr("qtypes", ""));
    if (!p.post_ops.empty()) return make_error("{}: no reference for a fused int8 epilogue", p.key);
    return quantized_reference(p, *q, inputs, extras);
  }
  FL_ASSIGN_OR_RETURN(auto out, main_op(p, inputs));
  size_t extra = 0;
  for (const auto& po : p.post_ops) {
    auto& y = out[0];
    // Attention's chain after its scores (mp::fusion_matches): a scale, biases broadcast to the
    // scores, a softmax along the last axis, the product by V (`extras`, in order: biases, V).
    if (po.op == "Scale") {
      for (auto& v : y.data) v = static_cast<float>(v * po.alpha);
      continue;
    }
    if (po.op == "AttentionBias" || po.op == "MatMul") {
      if (extra >= extras.size()) return make_error("post-op {} has no operand", po.op);
      const auto& t = extras[extra++];
      if (po.op == "AttentionBias") {
        Shape idx(y.shape.size(), 0);
        int64_t o = 0;
        do {
          y.data[o] =
              static_cast<float>(static_cast<double>(y.data[o]) + t.data[broadcast_offset(idx, t.shape)]);
          ++o;
        } while (!idx.empty() && next_index(idx, y.shape));
        continue;
      }
      if (y.shape.size() < 2 || t.shape.size() != y.shape.size())
        return make_error("post-op MatMul: V of rank {} after scores of rank {}", t.shape.size(),
                          y.shape.size());
      Problem pv;
      pv.kind = LayerKind::kMatMul;
      pv.op = "MatMul";
      pv.inputs = {{"a", y.shape}, {"b", t.shape}};
      Shape o = y.shape;
      o.back() = t.shape.back();
      pv.outputs = {{"y", o}};
      FL_ASSIGN_OR_RETURN(auto prod, matmul(pv, {y, t}));
      out[0] = std::move(prod[0]);
      continue;
    }
    if (po.op == "Softmax") {
      Problem sm;
      sm.kind = LayerKind::kSoftmax;
      sm.op = "Softmax";
      sm.inputs = {{"x", y.shape}};
      sm.outputs = {{"y", y.shape}};
      sm.ints["axis"] = {static_cast<int64_t>(y.shape.size()) - 1};
      FL_ASSIGN_OR_RETURN(auto soft, softmax(sm, {y}));
      out[0] = std::move(soft[0]);
      continue;
    }
    if (po.op == "MulInput") {  // the head's output times its own input (a Sigmoid's: SiLU)
      if (inputs.empty() || inputs[0].data.size() != y.data.size())
        return make_error("post-op MulInput needs the head's input at its output's shape");
      for (size_t i = 0; i < y.data.size(); ++i)
        y.data[i] = static_cast<float>(static_cast<double>(y.data[i]) * inputs[0].data[i]);
      continue;
    }
    if (po.op == "Add" || po.op == "BiasAdd") {
      if (extra >= extras.size()) return make_error("post-op Add has no operand");
      const auto& t = extras[extra++];
      const int64_t n = elements(t.shape);
      for (size_t i = 0; i < y.data.size(); ++i)
        y.data[i] += t.data[n == elements(y.shape) ? static_cast<int64_t>(i) : static_cast<int64_t>(i) % n];
      continue;
    }
    for (auto& v : y.data) v = eltwise_reference(po.op, v, po.alpha, po.beta);
  }
  return out;
}

}  // namespace floorline::kernels
