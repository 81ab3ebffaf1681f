// The oracle's RoiAlign, GridSample and ScatterElements (detection heads, optical flow), as
// the ONNX operator documentation (onnx/docs/Operators.md) defines them, in plain loops and double
// arithmetic. Where the text leaves a detail open, the choice of ONNX Runtime's CPU kernels (the
// runtime the operator tests are written against) is followed and named below.
#include <algorithm>
#include <cmath>

#include "reference_internal.hpp"

namespace floorline::kernels::reference_detail {
namespace {

// Reflects x into [lo, hi] by folding it at the borders as many times as needed (GridSample's
// reflection padding).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double d = lo - x;
    const auto n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double d = x - hi;
    const auto n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys' cubic convolution weights (A = -0.75, as ONNX Resize and GridSample use) of the 4 taps at
// distances 1 + t, t, 1 - t, 2 - t from the point, t in [0, 1).
void cubic_weights(double t, double w[4]) {
  constexpr double a = -0.75;
  auto near = [&](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  auto far = [&](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

}  // namespace

// RoiAlign (opset 10 and 16). Each roi [x1, y1, x2, y2] (input coordinates) is scaled by
// spatial_scale, shifted by -0.5 with half_pixel (opset 16's default; output_half_pixel, opset 10's
// behaviour, does not shift but makes the roi at least 1 × 1), and divided into oh × ow bins; each
// bin averages (mode avg) or takes the maximum (mode max) of grid_h × grid_w bilinear samples at the
// centres of a regular sub-grid (sampling_ratio per axis; 0: ⌈roi extent / bins⌉). A sample outside
// [-1, H] × [-1, W] is 0; one inside is clamped to the map. Max mode takes, per sample, the largest
// of the 4 weighted corner values, and the largest over the samples (ONNX Runtime's definition,
// which onnx's reference implementation copies; the average divides by the sample count).
Result<std::vector<HostTensor>> roi_align(const Problem& p, const std::vector<HostTensor>& in) {
  if (in.size() < 3) return make_error("RoiAlign: X, rois and batch_indices expected");
  const auto& x = in[0];
  const auto& rois = in[1];
  const auto& bidx = in[2];
  if (x.shape.size() != 4 || rois.shape.size() != 2 || rois.shape[1] != 4)
    return make_error("RoiAlign: X [N, C, H, W] and rois [R, 4] expected");
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3], nr = rois.shape[0];
  if (elements(bidx.shape) != nr) return make_error("RoiAlign: batch_indices has not R elements");
  const int64_t oh = p.int_attr("output_height"), ow = p.int_attr("output_width");
  const int64_t ratio = p.int_attr("sampling_ratio");
  const double scale = p.float_attr("spatial_scale");
  const bool avg = p.string_attr("mode") == "avg";
  const bool half_pixel = p.string_attr("coordinate_transformation_mode") == "half_pixel";
  const Shape ys = {nr, ch, oh, ow};
  HostTensor y{ys, std::vector<float>(static_cast<size_t>(elements(ys)))};
  for (int64_t r = 0; r < nr; ++r) {
    const auto b = static_cast<int64_t>(bidx.data[static_cast<size_t>(r)]);
    if (b < 0 || b >= n) return make_error("RoiAlign: batch index {} out of range for {} images", b, n);
    const float* box = &rois.data[static_cast<size_t>(r * 4)];
    const double off = half_pixel ? 0.5 : 0.0;
    const double x1 = box[0] * scale - off, y1 = box[1] * scale - off;
    double rw = box[2] * scale - off - x1, rh = box[3] * scale - off - y1;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < ch; ++c) {
      const float* plane = &x.data[static_cast<size_t>((b * ch + c) * h * w)];
      auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(plane[yy * w + xx]); };
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double sy = y1 + static_cast<double>(ph) * bh +
                          (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
              double sx = x1 + static_cast<double>(pw) * bw +
                          (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
              double v = 0;
              if (!(sy < -1.0 || sy > static_cast<double>(h) || sx < -1.0 || sx > static_cast<double>(w))) {
                sy = std::max(sy, 0.0), sx = std::max(sx, 0.0);
                int64_t ylo = static_cast<int64_t>(sy), xlo = static_cast<int64_t>(sx), yhi, xhi;
                if (ylo >= h - 1)
                  ylo = yhi = h - 1, sy = static_cast<double>(ylo);
                else
                  yhi = ylo + 1;
                if (xlo >= w - 1)
                  xlo = xhi = w - 1, sx = static_cast<double>(xlo);
                else
                  xhi = xlo + 1;
                const double ly = sy - static_cast<double>(ylo), lx = sx - static_cast<double>(xlo);
                const double hy = 1 - ly, hx = 1 - lx;
                const double v1 = hy * hx * at(ylo, xlo), v2 = hy * lx * at(ylo, xhi);
                const double v3 = ly * hx * at(yhi, xlo), v4 = ly * lx * at(yhi, xhi);
                v = avg ? v1 + v2 + v3 + v4 : std::max(std::max(v1, v2), std::max(v3, v4));
              }
              acc = avg ? acc + v : (first ? v : std::max(acc, v));
              first = false;
            }
          y.data[static_cast<size_t>(((r * ch + c) * oh + ph) * ow + pw)] =
              static_cast<float>(avg ? acc / count : acc);
        }
    }
  }
  return std::vector<HostTensor>{std::move(y)};
}

// GridSample (opset 16, 4-D). The grid's (x, y) in [-1, 1] map to pixel centres 0 and W-1
// (align_corners = 1) or to the outer edges -0.5 and W-0.5 (0). nearest rounds half to even;
// bilinear and bicubic (Keys, A = -0.75) weight the 4 or 16 pixels around the point. Padding:
// zeros reads 0 outside the image; border clamps an outside point to [0, W-1]; reflection folds it
// back into the range the corners span (ONNX Runtime's GridSample-16: a point is moved only when
// it lies outside that range, and border/reflection then also clamp or fold each neighbour read).
Result<std::vector<HostTensor>> grid_sample(const Problem& p, const std::vector<HostTensor>& in) {
  if (in.size() < 2) return make_error("GridSample: X and grid expected");
  const auto& x = in[0];
  const auto& grid = in[1];
  if (x.shape.size() != 4 || grid.shape.size() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0])
    return make_error("GridSample: X [N, C, H, W] and grid [N, Ho, Wo, 2] expected");
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t ho = grid.shape[1], wo = grid.shape[2];
  const std::string mode = p.string_attr("mode"), pad = p.string_attr("padding_mode");
  const bool corners = p.int_attr("align_corners") != 0;
  const double xlo = corners ? 0 : -0.5,
               xhi = corners ? static_cast<double>(w - 1) : static_cast<double>(w) - 0.5;
  const double ylo = corners ? 0 : -0.5,
               yhi = corners ? static_cast<double>(h - 1) : static_cast<double>(h) - 0.5;
  auto denorm = [corners](double g, int64_t len) {
    return corners ? (g + 1) / 2 * static_cast<double>(len - 1)
                   : ((g + 1) * static_cast<double>(len) - 1) / 2;
  };
  const Shape ys = {n, ch, ho, wo};
  HostTensor y{ys, std::vector<float>(static_cast<size_t>(elements(ys)))};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < ch; ++c) {
      const float* plane = &x.data[static_cast<size_t>((b * ch + c) * h * w)];
      auto pixel = [&](int64_t r, int64_t q) -> double {
        if (pad == "zeros") return r < 0 || r >= h || q < 0 || q >= w ? 0.0 : plane[r * w + q];
        if (pad == "border") {
          r = std::clamp<int64_t>(r, 0, h - 1), q = std::clamp<int64_t>(q, 0, w - 1);
        } else {  // reflection
          r = static_cast<int64_t>(reflect(static_cast<double>(r), ylo, yhi));
          q = static_cast<int64_t>(reflect(static_cast<double>(q), xlo, xhi));
          r = std::clamp<int64_t>(r, 0, h - 1), q = std::clamp<int64_t>(q, 0, w - 1);
        }
        return plane[r * w + q];
      };
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          const float* g = &grid.data[static_cast<size_t>(((b * ho + i) * wo + j) * 2)];
          double gx = denorm(g[0], w), gy = denorm(g[1], h);
          if (mode == "nearest") gx = std::nearbyint(gx), gy = std::nearbyint(gy);
          if (gx < xlo || gx > xhi || gy < ylo || gy > yhi) {
            if (pad == "border") {
              gx = std::clamp(gx, 0.0, static_cast<double>(w - 1));
              gy = std::clamp(gy, 0.0, static_cast<double>(h - 1));
            } else if (pad == "reflection") {
              gx = reflect(gx, xlo, xhi), gy = reflect(gy, ylo, yhi);
            }
          }
          double v = 0;
          if (mode == "nearest") {
            v = pixel(static_cast<int64_t>(std::nearbyint(gy)), static_cast<int64_t>(std::nearbyint(gx)));
          } else if (mode == "bilinear") {
            const double fx = std::floor(gx), fy = std::floor(gy);
            const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            const double dx1 = gx - fx, dx2 = 1 - dx1, dy1 = gy - fy, dy2 = 1 - dy1;
            v = dy2 * (dx2 * pixel(y0, x0) + dx1 * pixel(y0, x0 + 1)) +
                dy1 * (dx2 * pixel(y0 + 1, x0) + dx1 * pixel(y0 + 1, x0 + 1));
          } else if (mode == "bicubic") {
            const double fx = std::floor(gx), fy = std::floor(gy);
            const auto x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
            double wx[4], wy[4];
            cubic_weights(gx - fx, wx);
            cubic_weights(gy - fy, wy);
            for (int64_t r = 0; r < 4; ++r) {
              double row = 0;
              for (int64_t q = 0; q < 4; ++q) row += wx[q] * pixel(y0 + r, x0 + q);
              v += wy[r] * row;
            }
          } else {
            return make_error("GridSample: mode {} (opset 16 has bilinear, nearest, bicubic)", mode);
          }
          y.data[static_cast<size_t>(((b * ch + c) * ho + i) * wo + j)] = static_cast<float>(v);
        }
    }
  return std::vector<HostTensor>{std::move(y)};
}

// ScatterElements (opsets 11 to 18): the output is data with, for every element of updates at
// position (u_0 … u_{r-1}), the element at the same position but index[u] along `axis` replaced
// (reduction none) or combined with it (add, mul: opset 16; max, min: opset 18), updates taken in
// row-major order, so that of duplicate indices the last written wins (none) and reductions apply
// in that order. f32 arithmetic, as the operator's output type; a negative index counts from the
// end; one out of range is an error.
Result<std::vector<HostTensor>> scatter_elements(const Problem& p, const std::vector<HostTensor>& in) {
  if (in.size() < 3) return make_error("ScatterElements: data, indices and updates expected");
  const auto& data = in[0];
  const auto& idx = in[1];
  const auto& upd = in[2];
  const int64_t rank = static_cast<int64_t>(data.shape.size()), axis = p.int_attr("axis");
  const std::string red = p.string_attr("reduction");
  if (axis < 0 || axis >= rank || idx.shape.size() != data.shape.size() || upd.shape != idx.shape)
    return make_error("ScatterElements: indices and updates of data's rank and one shape expected");
  HostTensor y = data;
  const Shape ds = strides_of(data.shape);
  const int64_t count = elements(idx.shape);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, off = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t dim = idx.shape[static_cast<size_t>(d)];
      int64_t coord = rest % dim;
      rest /= dim;
      if (d == axis) {
        const int64_t len = data.shape[static_cast<size_t>(d)];
        coord = static_cast<int64_t>(idx.data[static_cast<size_t>(e)]);
        if (coord < 0) coord += len;
        if (coord < 0 || coord >= len)
          return make_error("ScatterElements: index {} out of range for an axis of {}", coord, len);
      } else if (coord >= data.shape[static_cast<size_t>(d)]) {
        return make_error("ScatterElements: updates exceed data along axis {}", d);
      }
      off += coord * ds[static_cast<size_t>(d)];
    }
    float& t = y.data[static_cast<size_t>(off)];
    const float u = upd.data[static_cast<size_t>(e)];
    if (red == "none")
      t = u;
    else if (red == "add")
      t = t + u;
    else if (red == "mul")
      t = t * u;
    else if (red == "max")
      t = std::max(t, u);
    else if (red == "min")
      t = std::min(t, u);
    else
      return make_error("ScatterElements: reduction {}", red);
  }
  return std::vector<HostTensor>{std::move(y)};
}

}  // namespace floorline::kernels::reference_detail
