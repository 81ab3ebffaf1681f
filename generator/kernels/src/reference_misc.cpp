// Reference CumSum, ArgMax/ArgMin and Mean, as the ONNX operator documentation defines them.
#include <limits>

#include "reference_internal.hpp"

namespace floorline::kernels::reference_detail {

Result<std::vector<HostTensor>> cumsum(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const int64_t axis = p.int_attr("axis");
  const bool exclusive = p.int_attr("exclusive") != 0, reverse = p.int_attr("reverse") != 0;
  if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
    return make_error("CumSum: axis out of range");
  const AxisSplit a = split_at_axis(x.shape, axis);
  HostTensor y{x.shape, std::vector<float>(x.data.size(), 0.f)};
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      double acc = 0;
      for (int64_t s = 0; s < a.n; ++s) {
        const int64_t k = reverse ? a.n - 1 - s : s;
        const int64_t at = (o * a.n + k) * a.inner + i;
        if (!exclusive) acc += x.data[at];
        y.data[at] = static_cast<float>(acc);
        if (exclusive) acc += x.data[at];
      }
    }
  return std::vector<HostTensor>{std::move(y)};
}

// The index (as a float) of the first (select_last_index: last) largest / smallest element along
// the axis; the output keeps the axis as 1 or drops it (keepdims): the same elements either way.
Result<std::vector<HostTensor>> arg_extreme(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const int64_t axis = p.int_attr("axis");
  const bool last = p.int_attr("select_last_index") != 0, is_max = p.kind == LayerKind::kArgMax;
  if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
    return make_error("{}: axis out of range", p.op);
  const AxisSplit a = split_at_axis(x.shape, axis);
  HostTensor y{p.outputs.at(0).shape, std::vector<float>(static_cast<size_t>(a.outer * a.inner), 0.f)};
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      int64_t best = 0;
      double bv = x.data[o * a.n * a.inner + i];
      for (int64_t k = 1; k < a.n; ++k) {
        const double v = x.data[(o * a.n + k) * a.inner + i];
        const bool better = is_max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
        if (better) {
          bv = v;
          best = k;
        }
      }
      y.data[o * a.inner + i] = static_cast<float>(best);
    }
  return std::vector<HostTensor>{std::move(y)};
}

Result<std::vector<HostTensor>> mean(const Problem& p, const std::vector<HostTensor>& in) {
  const Shape& ys = p.outputs.at(0).shape;
  HostTensor y{ys, std::vector<float>(static_cast<size_t>(elements(ys)), 0.f)};
  Shape idx(ys.size(), 0);
  int64_t o = 0;
  do {
    double v = 0;
    for (const auto& t : in) {
      // NumPy broadcasting: t's dims align with the output's last ones; size-1 dims repeat.
      int64_t off = 0, stride = 1;
      for (int64_t k = static_cast<int64_t>(t.shape.size()) - 1, j = static_cast<int64_t>(ys.size()) - 1;
           k >= 0; --k, --j) {
        off += (t.shape[k] == 1 ? 0 : idx[j]) * stride;
        stride *= t.shape[k];
      }
      v += t.data[off];
    }
    y.data[o++] = static_cast<float>(v / static_cast<double>(in.size()));
    bool more = false;
    for (int64_t k = static_cast<int64_t>(ys.size()) - 1; k >= 0; --k) {
      if (++idx[k] < ys[k]) {
        more = true;
        break;
      }
      idx[k] = 0;
    }
    if (!more) break;
  } while (true);
  return std::vector<HostTensor>{std::move(y)};
}

}  // namespace floorline::kernels::reference_detail
