// The oracle's TopK, GatherND, NonZero and NonMaxSuppression (the detection heads), as the
// ONNX operator documentation (onnx/docs/Operators.md) defines them: plain loops, no shortcuts.
// Integer outputs (indices) are written as floats, as every reference tensor is.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference_internal.hpp"

namespace floorline::kernels::reference_detail {
namespace {

// A parameter that is an attribute when the model holds it as a constant and an operand (a
// one-element tensor) when it is computed at run time; `fallback` when it is neither (the ONNX
// default of an omitted optional input).
double scalar_param(const Problem& p, const std::vector<HostTensor>& in, const std::string& role,
                    double fallback) {
  for (size_t k = 0; k < p.inputs.size() && k < in.size(); ++k)
    if (p.inputs[k].role == role && !in[k].data.empty()) return in[k].data[0];
  if (p.ints.count(role)) return static_cast<double>(p.int_attr(role, 0));
  return p.float_attr(role, fallback);
}

}  // namespace

// TopK (opset 11): the K largest (largest = 1) or smallest elements of each slice along `axis`,
// outputs Values then Indices. sorted = 1 orders them best first; of equal values the one with the
// lower index comes first (the operator's tie rule). sorted = 0 leaves the order unspecified: the
// reference returns them sorted, which every valid order is a permutation of (kernels sort too).
// K is the output's extent along the axis.
Result<std::vector<HostTensor>> topk(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = p.int_attr("axis");
  const bool largest = p.int_attr("largest") != 0;
  if (axis < 0 || axis >= rank) return make_error("TopK: axis {} out of range for rank {}", axis, rank);
  const Shape& ys = p.outputs.at(0).shape;
  if (static_cast<int64_t>(ys.size()) != rank) return make_error("TopK: output rank differs from input's");
  const int64_t k = ys[static_cast<size_t>(axis)], n = x.shape[static_cast<size_t>(axis)];
  if (k > n) return make_error("TopK: K = {} exceeds the axis's {} elements", k, n);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[static_cast<size_t>(d)];
  HostTensor values{ys, std::vector<float>(static_cast<size_t>(elements(ys)))};
  HostTensor indices{ys, std::vector<float>(static_cast<size_t>(elements(ys)))};
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x.data[static_cast<size_t>((o * n + j) * inner + i)]; };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return largest ? at(a) > at(b) : at(a) < at(b); });
      for (int64_t j = 0; j < k; ++j) {
        const size_t out = static_cast<size_t>((o * k + j) * inner + i);
        values.data[out] = at(order[static_cast<size_t>(j)]);
        indices.data[out] = static_cast<float>(order[static_cast<size_t>(j)]);
      }
    }
  return std::vector<HostTensor>{std::move(values), std::move(indices)};
}

// GatherND (opset 12): with b = batch_dims, indices of shape [i_0..i_{q-2}, m], each index tuple
// picks data[batch…, t_0..t_{m-1}, :], the slice of data's remaining dimensions. A negative index
// counts from the end; one out of range is an error (the operator's "out of bounds").
Result<std::vector<HostTensor>> gather_nd(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& data = in.at(0);
  const auto& idx = in.at(1);
  const int64_t b = p.int_attr("batch_dims");
  const int64_t r = static_cast<int64_t>(data.shape.size()), q = static_cast<int64_t>(idx.shape.size());
  if (q < 1 || b < 0 || b >= std::min(r, q)) return make_error("GatherND: batch_dims {} out of range", b);
  const int64_t m = idx.shape.back();
  if (m < 1 || b + m > r) return make_error("GatherND: index tuples of {} exceed data's rank {}", m, r);
  int64_t batch = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d) batch *= data.shape[static_cast<size_t>(d)];
  for (int64_t d = b + m; d < r; ++d) slice *= data.shape[static_cast<size_t>(d)];
  const int64_t tuples = elements(idx.shape) / m;        // over every batch
  const int64_t per_batch = batch ? tuples / batch : 0;  // tuples in one batch
  const Shape ds = strides_of(data.shape);
  const int64_t data_batch_stride = b ? ds[static_cast<size_t>(b - 1)] : elements(data.shape);
  const Shape& ys = p.outputs.at(0).shape;
  if (elements(ys) != tuples * slice) return make_error("GatherND: output has not tuples × slice elements");
  HostTensor y{ys, std::vector<float>(static_cast<size_t>(elements(ys)))};
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (per_batch ? t / per_batch : 0) * data_batch_stride;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t dim = data.shape[static_cast<size_t>(b + j)];
      int64_t v = static_cast<int64_t>(idx.data[static_cast<size_t>(t * m + j)]);
      if (v < 0) v += dim;
      if (v < 0 || v >= dim)
        return make_error("GatherND: index {} out of range for a dimension of {}", v, dim);
      off += v * ds[static_cast<size_t>(b + j)];
    }
    for (int64_t s = 0; s < slice; ++s)
      y.data[static_cast<size_t>(t * slice + s)] = data.data[static_cast<size_t>(off + s)];
  }
  return std::vector<HostTensor>{std::move(y)};
}

// NonZero (opset 13): the indices of the non-zero elements, [rank, count], in row-major order of
// the elements. The output has the count the data gives (Floorline's kernels are fed data that
// gives the assumed count).
Result<std::vector<HostTensor>> nonzero(const Problem&, const std::vector<HostTensor>& in) {
  const auto& x = in.at(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < elements(x.shape); ++i)
    if (x.data[static_cast<size_t>(i)] != 0.f) hits.push_back(i);
  const int64_t count = static_cast<int64_t>(hits.size());
  HostTensor y{{rank, count}, std::vector<float>(static_cast<size_t>(rank * count))};
  for (int64_t c = 0; c < count; ++c) {
    int64_t rest = hits[static_cast<size_t>(c)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t dim = x.shape[static_cast<size_t>(d)];
      y.data[static_cast<size_t>(d * count + c)] = static_cast<float>(rest % dim);
      rest /= dim;
    }
  }
  return std::vector<HostTensor>{std::move(y)};
}

// NonMaxSuppression (opset 11): for each batch and class, the boxes whose score exceeds
// score_threshold (when given), taken greedily by descending score (equal scores: lower index
// first); a box is selected unless its IoU with a box already selected for that class exceeds
// iou_threshold, until max_output_boxes_per_class are selected (0, the default, selects none).
// Boxes are [y1, x1, y2, x2] with either corner first (center_point_box = 0) or [x_c, y_c, w, h]
// (1). Output [count, 3]: (batch, class, box) rows, batches then classes then selection order.
Result<std::vector<HostTensor>> non_max_suppression(const Problem& p, const std::vector<HostTensor>& in) {
  const auto& boxes = in.at(0);
  const auto& scores = in.at(1);
  if (boxes.shape.size() != 3 || scores.shape.size() != 3 || boxes.shape[2] != 4 ||
      boxes.shape[0] != scores.shape[0] || boxes.shape[1] != scores.shape[2])
    return make_error("NonMaxSuppression: boxes [B, S, 4] and scores [B, C, S] expected");
  const int64_t nb = scores.shape[0], nc = scores.shape[1], ns = scores.shape[2];
  const double max_out = scalar_param(p, in, "max_output_boxes_per_class", 0);
  const double iou_t = scalar_param(p, in, "iou_threshold", 0);
  const bool has_score_t =
      p.ints.count("score_threshold") || p.floats.count("score_threshold") || p.input("score_threshold");
  const double score_t = scalar_param(p, in, "score_threshold", 0);
  const bool center = p.int_attr("center_point_box") != 0;
  struct Box {
    double y1, x1, y2, x2;
  };
  std::vector<float> rows;
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<Box> bx(static_cast<size_t>(ns));
    for (int64_t s = 0; s < ns; ++s) {
      const float* v = &boxes.data[static_cast<size_t>((b * ns + s) * 4)];
      if (center)
        bx[static_cast<size_t>(s)] = {v[1] - v[3] / 2.0, v[0] - v[2] / 2.0, v[1] + v[3] / 2.0,
                                      v[0] + v[2] / 2.0};
      else
        bx[static_cast<size_t>(s)] = {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
                                      std::max(v[1], v[3])};
    }
    auto iou = [&](int64_t i, int64_t j) {
      const Box &a = bx[static_cast<size_t>(i)], &c = bx[static_cast<size_t>(j)];
      const double ih = std::max(0.0, std::min(a.y2, c.y2) - std::max(a.y1, c.y1));
      const double iw = std::max(0.0, std::min(a.x2, c.x2) - std::max(a.x1, c.x1));
      const double inter = ih * iw;
      const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (c.y2 - c.y1) * (c.x2 - c.x1) - inter;
      return inter <= 0 || uni <= 0 ? 0.0 : inter / uni;
    };
    for (int64_t c = 0; c < nc; ++c) {
      const float* sc = &scores.data[static_cast<size_t>((b * nc + c) * ns)];
      std::vector<int64_t> cand;
      for (int64_t s = 0; s < ns; ++s)
        if (!has_score_t || sc[s] > score_t) cand.push_back(s);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return sc[i] > sc[j]; });
      std::vector<int64_t> kept;
      for (int64_t s : cand) {
        if (static_cast<double>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (iou(k, s) > iou_t) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(s);
        rows.insert(rows.end(), {static_cast<float>(b), static_cast<float>(c), static_cast<float>(s)});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(rows.size() / 3);
  return std::vector<HostTensor>{HostTensor{{count, 3}, std::move(rows)}};
}

}  // namespace floorline::kernels::reference_detail
