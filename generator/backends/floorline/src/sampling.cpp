// Floorline's own CPU kernels for RoiAlign, GridSample and ScatterElements, which neither oneDNN
// 2.6 nor XNNPACK nor OpenBLAS has: plain C++ on row-major tensors in the case's placed host
// buffers, OpenMP over independent work, f32 data and int64 indices.
//
// The sampling kernels split each sample point's work as ONNX Runtime's and torchvision's CPU
// kernels do: the neighbours' offsets and bilinear (or cubic) weights once per point, then one
// pass per channel that only multiplies and adds. Inputs are realistic: RoiAlign's boxes lie inside
// the image (with sampling_ratio 0, each spans between 1 and 2 bins per axis, so the adaptive grid
// is the 2 × 2 that docs/LAYERS.md assumes), GridSample's grid is uniform in [-1, 1], indices are
// in range.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// Reflects x into [lo, hi] (GridSample's reflection padding), as the reference does.
float reflect(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const float d = lo - x;
    const auto n = static_cast<int64_t>(d / range);
    const float r = d - static_cast<float>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const float d = x - hi;
    const auto n = static_cast<int64_t>(d / range);
    const float r = d - static_cast<float>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_weights(float t, float w[4]) {
  constexpr float a = -0.75f;
  auto near = [&](float d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
  auto far = [&](float d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// One axis of a RoiAlign sample: the two neighbours (offsets along the axis, already scaled by the
// row stride for y) and their weights; an invalid sample has weights 0 (its value is 0).
struct AxisSample {
  int64_t lo, hi;
  float wlo, whi;
};

// One RoiAlign sample point: its 4 neighbours' offsets in the plane and bilinear weights.
struct Corners {
  int64_t o[4];
  float w[4];
};

enum class Red { kNone, kAdd, kMul, kMax, kMin };

class SamplingKernel final : public Kernel {
 public:
  SamplingKernel(Problem p, std::string name, uint64_t seed)
      : p_(std::move(p)), name_(std::move(name)), seed_(seed) {
    check();
    x_ = Placed<float>(elements(p_.inputs[0].shape));
    y_ = Placed<float>(elements(p_.outputs[0].shape));
    switch (p_.kind) {
      case LayerKind::kRoiAlign:
        f1_ = Placed<float>(elements(p_.inputs[1].shape));
        i2_ = Placed<int64_t>(elements(p_.inputs[2].shape));
        break;
      case LayerKind::kGridSample:
        f1_ = Placed<float>(elements(p_.inputs[1].shape));
        prepare_grid();
        break;
      case LayerKind::kScatterElements:
        i1_ = Placed<int64_t>(elements(p_.inputs[1].shape));
        f2_ = Placed<float>(elements(p_.inputs[2].shape));
        prepare_scatter();
        break;
      default:
        unsupported(fmt::format("no floorline kernel for {}", p_.op));
    }
    fill(seed_);
  }

  std::string implementation() const override { return "floorline " + name_; }
  int64_t workspace_bytes() const override { return 0; }

  // The image or data (input 0) and the output, plain (replay wires them).
  std::optional<Port> port(bool output, size_t k) const override {
    if (k != 0) return std::nullopt;
    const Placed<float>& t = output ? y_ : x_;
    return Port{t.data(), t.bytes(), "plain"};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (k != 0) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? y_ : x_).bind(data);
    return {};
  }

  void run() override {
    if (p_.kind == LayerKind::kRoiAlign)
      roi_align();
    else if (p_.kind == LayerKind::kGridSample)
      grid_sample();
    else
      scatter_elements();
  }

  // The output on fresh inputs against the reference: ScatterElements exactly (the same f32
  // operations in the same order), the interpolations per element (verify_tolerance's interpolating class):
  // f32 sample positions here, double there, and on a 200-pixel map an f32 position is off by ~1e-5 pixel.
  Status verify() override {
    fill(seed_ + 7);
    run();
    std::vector<HostTensor> ins;
    auto floats = [](const Shape& s, const Placed<float>& v) { return HostTensor{s, {v.begin(), v.end()}}; };
    ins.push_back(floats(p_.inputs[0].shape, x_));
    auto ints = [](const Shape& s, const Placed<int64_t>& v) {
      HostTensor h{s, {}};
      for (int64_t e : v) h.data.push_back(static_cast<float>(e));
      return h;
    };
    if (p_.kind == LayerKind::kRoiAlign) {
      ins.push_back(floats(p_.inputs[1].shape, f1_));
      ins.push_back(ints(p_.inputs[2].shape, i2_));
    } else if (p_.kind == LayerKind::kGridSample) {
      ins.push_back(floats(p_.inputs[1].shape, f1_));
    } else {
      ins.push_back(ints(p_.inputs[1].shape, i1_));
      ins.push_back(floats(p_.inputs[2].shape, f2_));
    }
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, {}));
    if (ref.empty()) return make_error("the reference has no output");
    if (ref[0].shape != p_.outputs[0].shape)
      return make_error("the reference's shape {} differs from {}", fmt::join(ref[0].shape, "x"),
                        fmt::join(p_.outputs[0].shape, "x"));
    if (p_.kind != LayerKind::kScatterElements)
      return compare_output(y_.data(), ref[0], verify_tolerance(p_));
    for (size_t e = 0; e < y_.size(); ++e)
      if (y_[e] != ref[0].data[e])
        return make_error("element {}: {} vs the reference's {}", e, y_[e], ref[0].data[e]);
    return {};
  }

 private:
  // Shapes and attributes the kernel relies on (unsupported otherwise: a case never reads out of
  // bounds).
  void check() const {
    const size_t want = p_.kind == LayerKind::kGridSample ? 2 : 3;
    if (p_.inputs.size() != want || p_.outputs.size() != 1) unsupported(p_.op + ": unexpected operands");
    for (const auto* list : {&p_.inputs, &p_.outputs})
      for (const auto& o : *list)
        if (std::any_of(o.shape.begin(), o.shape.end(), [](int64_t d) { return d < 0; }))
          unsupported("a shape is unknown");
    const Shape& x = p_.inputs[0].shape;
    const Shape& y = p_.outputs[0].shape;
    if (p_.kind == LayerKind::kRoiAlign) {
      const Shape& rois = p_.inputs[1].shape;
      if (x.size() != 4 || rois.size() != 2 || rois[1] != 4 || elements(p_.inputs[2].shape) != rois[0] ||
          y != Shape{rois[0], x[1], p_.int_attr("output_height"), p_.int_attr("output_width")})
        unsupported("RoiAlign: X [N, C, H, W], rois [R, 4], batch_indices [R] and y [R, C, oh, ow] expected");
      if (p_.int_attr("sampling_ratio") < 0 || x[0] < 1 || x[2] < 1 || x[3] < 1 ||
          !(p_.float_attr("spatial_scale") > 0))
        unsupported("RoiAlign: a negative sampling_ratio, an empty image or a scale not above 0");
      const std::string mode = p_.string_attr("mode"), ctm = p_.string_attr("coordinate_transformation_mode");
      if ((mode != "avg" && mode != "max") || (ctm != "half_pixel" && ctm != "output_half_pixel"))
        unsupported(fmt::format("RoiAlign: mode {}, coordinate_transformation_mode {}", mode, ctm));
    } else if (p_.kind == LayerKind::kGridSample) {
      const Shape& g = p_.inputs[1].shape;
      if (x.size() != 4 || g.size() != 4 || g[3] != 2 || g[0] != x[0] || y != Shape{x[0], x[1], g[1], g[2]})
        unsupported("GridSample: X [N, C, H, W], grid [N, Ho, Wo, 2] and y [N, C, Ho, Wo] expected (4-D)");
      if (x[2] < 1 || x[3] < 1 || x[2] * x[3] > (int64_t{1} << 31) - 1)
        unsupported("GridSample: an image of 0 or more than 2³¹ pixels");
      const std::string mode = p_.string_attr("mode"), pad = p_.string_attr("padding_mode");
      if ((mode != "bilinear" && mode != "nearest" && mode != "bicubic") ||
          (pad != "zeros" && pad != "border" && pad != "reflection"))
        unsupported(fmt::format("GridSample: mode {}, padding_mode {} (opset 16's)", mode, pad));
    } else {
      const Shape& idx = p_.inputs[1].shape;
      const int64_t axis = p_.int_attr("axis");
      if (idx.size() != x.size() || p_.inputs[2].shape != idx || y != x || axis < 0 ||
          axis >= static_cast<int64_t>(x.size()))
        unsupported("ScatterElements: indices and updates of data's rank and one shape expected");
      for (size_t d = 0; d < x.size(); ++d)
        if (static_cast<int64_t>(d) == axis ? x[d] < 1 && idx[d] > 0 : idx[d] > x[d])
          unsupported("ScatterElements: updates exceed data");
      const std::string r = p_.string_attr("reduction");
      if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
        unsupported("ScatterElements: reduction " + r);
    }
  }

  // --- inputs ---------------------------------------------------------------------------------
  void fill(uint64_t seed) {
    RandomStream s(seed);
    for (auto& v : x_) v = s.uniform(-1.f, 2.f);
    if (p_.kind == LayerKind::kRoiAlign) {
      fill_rois(s);
    } else if (p_.kind == LayerKind::kGridSample) {
      for (auto& v : f1_) v = s.uniform(-1.f, 2.f);
    } else {
      const int64_t len = p_.inputs[0].shape[static_cast<size_t>(p_.int_attr("axis"))];
      for (auto& v : i1_) v = s.below(len);
      for (auto& v : f2_) v = s.uniform(-1.f, 2.f);
    }
  }
  // Boxes inside the image (the feature map's extent divided by spatial_scale), in the images of
  // random batch indices. Each spans between 1 pixel and the whole map per axis on the feature
  // map; with sampling_ratio 0 between 1.05 and 1.95 bins where the map has room for 2, so that
  // the adaptive grid is 2 × 2 (docs/LAYERS.md's assumption).
  void fill_rois(RandomStream& s) {
    const Shape& x = p_.inputs[0].shape;
    const int64_t n = x[0], h = x[2], w = x[3];
    const int64_t oh = p_.int_attr("output_height"), ow = p_.int_attr("output_width");
    const bool adaptive = p_.int_attr("sampling_ratio") == 0;
    const auto scale = static_cast<float>(p_.float_attr("spatial_scale"));
    auto extent = [&](int64_t map, int64_t bins) {
      const auto m = static_cast<float>(map), b = static_cast<float>(bins);
      if (adaptive && 2 * bins <= map) return b * (1.05f + 0.9f * s.unit());
      return 1.f + (m - 1.f) * s.unit();
    };
    for (size_t r = 0; r < i2_.size(); ++r) {
      i2_[r] = s.below(n);
      const float eh = extent(h, oh), ew = extent(w, ow);
      const float y1 = (static_cast<float>(h) - eh) * s.unit(), x1 = (static_cast<float>(w) - ew) * s.unit();
      float* box = &f1_[r * 4];
      box[0] = x1 / scale, box[1] = y1 / scale, box[2] = (x1 + ew) / scale, box[3] = (y1 + eh) / scale;
    }
  }

  // --- RoiAlign --------------------------------------------------------------------------------
  // One axis's samples of one roi: bins × grid entries, in bin then sub-grid order.
  static void axis_samples(std::vector<AxisSample>& out, float start, float bin, int64_t bins, int64_t grid,
                           int64_t len, int64_t stride) {
    out.resize(static_cast<size_t>(bins * grid));
    const auto flen = static_cast<float>(len);
    for (int64_t b = 0; b < bins; ++b)
      for (int64_t g = 0; g < grid; ++g) {
        float v = start + static_cast<float>(b) * bin +
                  (static_cast<float>(g) + 0.5f) * bin / static_cast<float>(grid);
        AxisSample& a = out[static_cast<size_t>(b * grid + g)];
        if (v < -1.f || v > flen) {
          a = {0, 0, 0.f, 0.f};
          continue;
        }
        v = std::max(v, 0.f);
        auto lo = static_cast<int64_t>(v), hi = lo + 1;
        if (lo >= len - 1) lo = hi = len - 1, v = static_cast<float>(lo);
        const float l = v - static_cast<float>(lo);
        a = {lo * stride, hi * stride, 1.f - l, l};
      }
  }

  // Per (roi, block of 16 channels), in parallel: the roi's y and x samples (offsets and weights),
  // then per channel and bin the sum (or maximum) over the sub-grid of the 4 weighted neighbours.
  void roi_align() {
    const Shape& dims = p_.inputs[0].shape;
    const int64_t ch = dims[1], h = dims[2], w = dims[3], nr = p_.inputs[1].shape[0];
    const int64_t oh = p_.int_attr("output_height"), ow = p_.int_attr("output_width");
    const int64_t ratio = p_.int_attr("sampling_ratio");
    const auto scale = static_cast<float>(p_.float_attr("spatial_scale"));
    const bool avg = p_.string_attr("mode") == "avg";
    const bool half_pixel = p_.string_attr("coordinate_transformation_mode") == "half_pixel";
    constexpr int64_t kBlock = 16;
    const int64_t blocks = (ch + kBlock - 1) / kBlock, tasks = nr * blocks;
    const float* x = x_.data();
    float* y = y_.data();
#pragma omp parallel
    {
      std::vector<AxisSample> ys, xs;  // this thread's samples of its current roi
      std::vector<Corners> pre;
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t r = t / blocks, c0 = (t % blocks) * kBlock, c1 = std::min(ch, c0 + kBlock);
        const float* box = &f1_[static_cast<size_t>(r * 4)];
        const float off = half_pixel ? 0.5f : 0.f;
        const float x1 = box[0] * scale - off, y1 = box[1] * scale - off;
        float rw = box[2] * scale - off - x1, rh = box[3] * scale - off - y1;
        if (!half_pixel) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);
        const float bh = rh / static_cast<float>(oh), bw = rw / static_cast<float>(ow);
        const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<float>(oh)));
        const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<float>(ow)));
        const float inv_count = 1.f / static_cast<float>(std::max<int64_t>(gh * gw, 1));
        axis_samples(ys, y1, bh, oh, gh, h, w);
        axis_samples(xs, x1, bw, ow, gw, w, 1);
        const int64_t b = std::clamp<int64_t>(i2_[static_cast<size_t>(r)], 0, dims[0] - 1);
        // The bins' samples in order, each with its 4 corner offsets and weights: the channels'
        // loop reads them contiguously and only gathers, multiplies and adds.
        const int64_t per_bin = gh * gw;
        pre.resize(static_cast<size_t>(oh * ow * per_bin));
        for (int64_t ph = 0; ph < oh; ++ph)
          for (int64_t pw = 0; pw < ow; ++pw)
            for (int64_t iy = 0; iy < gh; ++iy)
              for (int64_t ix = 0; ix < gw; ++ix) {
                const AxisSample& a = ys[static_cast<size_t>(ph * gh + iy)];
                const AxisSample& q = xs[static_cast<size_t>(pw * gw + ix)];
                pre[static_cast<size_t>(((ph * ow + pw) * gh + iy) * gw + ix)] = {
                    {a.lo + q.lo, a.lo + q.hi, a.hi + q.lo, a.hi + q.hi},
                    {a.wlo * q.wlo, a.wlo * q.whi, a.whi * q.wlo, a.whi * q.whi}};
              }
        for (int64_t c = c0; c < c1; ++c) {
          const float* plane = x + (b * ch + c) * h * w;
          float* out = y + (r * ch + c) * oh * ow;
          const Corners* k = pre.data();
          for (int64_t bin = 0; bin < oh * ow; ++bin, k += per_bin) {
            float acc = 0.f;
            if (avg) {
              for (int64_t e = 0; e < per_bin; ++e)
                acc += k[e].w[0] * plane[k[e].o[0]] + k[e].w[1] * plane[k[e].o[1]] +
                       k[e].w[2] * plane[k[e].o[2]] + k[e].w[3] * plane[k[e].o[3]];
              out[bin] = acc * inv_count;
            } else {
              for (int64_t e = 0; e < per_bin; ++e) {
                const float v =
                    std::max(std::max(k[e].w[0] * plane[k[e].o[0]], k[e].w[1] * plane[k[e].o[1]]),
                             std::max(k[e].w[2] * plane[k[e].o[2]], k[e].w[3] * plane[k[e].o[3]]));
                acc = e == 0 ? v : std::max(acc, v);
              }
              out[bin] = acc;
            }
          }
        }
      }
    }
  }

  // --- GridSample ------------------------------------------------------------------------------
  // Per grid point, `taps_` neighbour offsets in the plane and their weights (0 for a neighbour
  // outside the image with zeros padding); one table per thread when images are the parallel
  // work (N at least the threads), else one shared table built in parallel per image.
  void prepare_grid() {
    const std::string mode = p_.string_attr("mode");
    taps_ = mode == "nearest" ? 1 : mode == "bilinear" ? 4 : 16;
    const Shape& g = p_.inputs[1].shape;
    points_ = g[1] * g[2];
    threads_ = std::max(1, omp_get_max_threads());
    per_image_ = g[0] >= threads_;
    const size_t size =
        static_cast<size_t>(points_ * taps_) * (per_image_ ? static_cast<size_t>(threads_) : 1);
    mode_ = p_.string_attr("mode");
    pad_ = p_.string_attr("padding_mode")[0];
    corners_ = p_.int_attr("align_corners") != 0;
    offsets_.resize(size);
    weights_.resize(size);
  }

  // The taps of grid point p of image n: their offsets in the plane and weights.
  void grid_point(int64_t n, int64_t p, int32_t* off, float* wt) const {
    const Shape& xs = p_.inputs[0].shape;
    const int64_t h = xs[2], w = xs[3];
    const std::string& mode = mode_;
    const bool corners = corners_;
    const float xlo = corners ? 0.f : -0.5f,
                xhi = corners ? static_cast<float>(w - 1) : static_cast<float>(w) - 0.5f;
    const float ylo = corners ? 0.f : -0.5f,
                yhi = corners ? static_cast<float>(h - 1) : static_cast<float>(h) - 0.5f;
    const float* g = &f1_[static_cast<size_t>((n * points_ + p) * 2)];
    auto denorm = [corners](float v, int64_t len) {
      return corners ? (v + 1) / 2 * static_cast<float>(len - 1)
                     : ((v + 1) * static_cast<float>(len) - 1) / 2;
    };
    float gx = denorm(g[0], w), gy = denorm(g[1], h);
    if (mode[0] == 'n') gx = std::nearbyint(gx), gy = std::nearbyint(gy);
    if (gx < xlo || gx > xhi || gy < ylo || gy > yhi) {
      if (pad_ == 'b') {
        gx = std::clamp(gx, 0.f, static_cast<float>(w - 1)),
        gy = std::clamp(gy, 0.f, static_cast<float>(h - 1));
      } else if (pad_ == 'r') {
        gx = reflect(gx, xlo, xhi), gy = reflect(gy, ylo, yhi);
      }
    }
    // One neighbour: its offset and whether it is read (zeros padding: a neighbour outside is 0).
    auto tap = [&](int64_t r, int64_t q, float weight, int k) {
      if (pad_ == 'z') {
        if (r < 0 || r >= h || q < 0 || q >= w) {
          off[k] = 0, wt[k] = 0.f;
          return;
        }
      } else {
        if (pad_ == 'r') {
          r = static_cast<int64_t>(reflect(static_cast<float>(r), ylo, yhi));
          q = static_cast<int64_t>(reflect(static_cast<float>(q), xlo, xhi));
        }
        r = std::clamp<int64_t>(r, 0, h - 1), q = std::clamp<int64_t>(q, 0, w - 1);
      }
      off[k] = static_cast<int32_t>(r * w + q), wt[k] = weight;
    };
    if (taps_ == 1) {
      tap(static_cast<int64_t>(std::nearbyint(gy)), static_cast<int64_t>(std::nearbyint(gx)), 1.f, 0);
    } else if (taps_ == 4) {
      const float fx = std::floor(gx), fy = std::floor(gy);
      const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      const float dx1 = gx - fx, dx2 = 1 - dx1, dy1 = gy - fy, dy2 = 1 - dy1;
      tap(y0, x0, dy2 * dx2, 0), tap(y0, x0 + 1, dy2 * dx1, 1);
      tap(y0 + 1, x0, dy1 * dx2, 2), tap(y0 + 1, x0 + 1, dy1 * dx1, 3);
    } else {
      const float fx = std::floor(gx), fy = std::floor(gy);
      const auto x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
      float wx[4], wy[4];
      cubic_weights(gx - fx, wx);
      cubic_weights(gy - fy, wy);
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q) tap(y0 + r, x0 + q, wy[r] * wx[q], r * 4 + q);
    }
  }

  // One image's channels from its table.
  void grid_channels(int64_t n, int64_t c0, int64_t c1, const int32_t* off, const float* wt) {
    const Shape& xs = p_.inputs[0].shape;
    const int64_t ch = xs[1], hw = xs[2] * xs[3];
    for (int64_t c = c0; c < c1; ++c) {
      const float* plane = x_.data() + (n * ch + c) * hw;
      float* out = y_.data() + (n * ch + c) * points_;
      if (taps_ == 4) {
        for (int64_t p = 0; p < points_; ++p) {
          const int32_t* o = off + p * 4;
          const float* k = wt + p * 4;
          out[p] = k[0] * plane[o[0]] + k[1] * plane[o[1]] + k[2] * plane[o[2]] + k[3] * plane[o[3]];
        }
      } else {
        for (int64_t p = 0; p < points_; ++p) {
          float v = 0.f;
          for (int64_t k = 0; k < taps_; ++k) v += wt[p * taps_ + k] * plane[off[p * taps_ + k]];
          out[p] = v;
        }
      }
    }
  }

  void grid_sample() {
    const int64_t n = p_.inputs[0].shape[0], ch = p_.inputs[0].shape[1];
    if (per_image_) {  // (the team the tables were sized for)
#pragma omp parallel num_threads(threads_)
      {
        const size_t at = static_cast<size_t>(omp_get_thread_num()) * static_cast<size_t>(points_ * taps_);
        int32_t* off = offsets_.data() + at;
        float* wt = weights_.data() + at;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t p = 0; p < points_; ++p) grid_point(b, p, off + p * taps_, wt + p * taps_);
          grid_channels(b, 0, ch, off, wt);
        }
      }
      return;
    }
    int32_t* off = offsets_.data();
    float* wt = weights_.data();
    for (int64_t b = 0; b < n; ++b) {
#pragma omp parallel
      {
#pragma omp for schedule(static)
        for (int64_t p = 0; p < points_; ++p) grid_point(b, p, off + p * taps_, wt + p * taps_);
        // Channels split among the threads; one channel's points when there are fewer channels.
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        if (ch >= nt) {
#pragma omp for schedule(static)
          for (int64_t c = 0; c < ch; ++c) grid_channels(b, c, c + 1, off, wt);
        } else {
          const int64_t p0 = points_ * t / nt, p1 = points_ * (t + 1) / nt;
          for (int64_t c = 0; c < ch; ++c) {
            const float* plane = x_.data() + (b * ch + c) * p_.inputs[0].shape[2] * p_.inputs[0].shape[3];
            float* out = y_.data() + (b * ch + c) * points_;
            for (int64_t p = p0; p < p1; ++p) {
              float v = 0.f;
              for (int64_t k = 0; k < taps_; ++k) v += wt[p * taps_ + k] * plane[off[p * taps_ + k]];
              out[p] = v;
            }
          }
        }
      }
    }
  }

  // --- ScatterElements ---------------------------------------------------------------------------
  // The updates' dimensions before the axis (outer), along it, and after it (inner), with the data
  // offset of every outer and inner position (they differ from the updates' where updates are
  // smaller than data); the line of one (outer, inner) position is updated in order along the axis,
  // so lines are independent and run in parallel, and duplicates resolve as in the reference.
  void prepare_scatter() {
    const Shape& ds = p_.inputs[0].shape;
    const Shape& us = p_.inputs[1].shape;
    const auto axis = static_cast<size_t>(p_.int_attr("axis"));
    Shape st(ds.size(), 1);
    for (int64_t k = static_cast<int64_t>(ds.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * ds[k + 1];
    auto offsets = [&](size_t from, size_t to) {
      std::vector<int64_t> out{0};
      for (size_t d = from; d < to; ++d) {
        std::vector<int64_t> grown;
        grown.reserve(out.size() * static_cast<size_t>(us[d]));
        for (int64_t o : out)
          for (int64_t i = 0; i < us[d]; ++i) grown.push_back(o + i * st[d]);
        out = std::move(grown);
      }
      return out;
    };
    outer_ = offsets(0, axis);
    inner_ = offsets(axis + 1, ds.size());
    axis_len_ = ds[axis];
    axis_stride_ = st[axis];
    axis_updates_ = us[axis];
    const std::string r = p_.string_attr("reduction");
    red_ = r == "add"   ? Red::kAdd
           : r == "mul" ? Red::kMul
           : r == "max" ? Red::kMax
           : r == "min" ? Red::kMin
                        : Red::kNone;
  }

  template <Red R>
  void scatter_lines(int64_t o, int64_t q0, int64_t q1) {
    const int64_t ni = static_cast<int64_t>(inner_.size());
    float* y = y_.data() + outer_[static_cast<size_t>(o)];
    for (int64_t j = 0; j < axis_updates_; ++j) {
      const int64_t* idx = i1_.data() + (o * axis_updates_ + j) * ni;
      const float* upd = f2_.data() + (o * axis_updates_ + j) * ni;
      for (int64_t q = q0; q < q1; ++q) {
        int64_t k = idx[q];
        if (k < 0) k += axis_len_;
        k = std::clamp<int64_t>(k, 0, axis_len_ - 1);  // (the generated indices are valid)
        float& t = y[k * axis_stride_ + inner_[static_cast<size_t>(q)]];
        const float u = upd[q];
        if constexpr (R == Red::kNone) t = u;
        if constexpr (R == Red::kAdd) t = t + u;
        if constexpr (R == Red::kMul) t = t * u;
        if constexpr (R == Red::kMax) t = std::max(t, u);
        if constexpr (R == Red::kMin) t = std::min(t, u);
      }
    }
  }

  void scatter_elements() {
    const auto n = static_cast<int64_t>(x_.size());
    const float* src = x_.data();
    float* dst = y_.data();
    constexpr int64_t kChunk = int64_t{1} << 16;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c)
      std::memcpy(dst + c * kChunk, src + c * kChunk,
                  static_cast<size_t>(std::min(kChunk, n - c * kChunk)) * 4);
    if (axis_len_ < 1) return;
    const auto no = static_cast<int64_t>(outer_.size()), ni = static_cast<int64_t>(inner_.size());
    constexpr int64_t kLines = 256;  // inner positions per task
    const int64_t blocks = (ni + kLines - 1) / kLines, tasks = no * blocks;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / blocks, q0 = (t % blocks) * kLines, q1 = std::min(ni, q0 + kLines);
      switch (red_) {
        case Red::kNone:
          scatter_lines<Red::kNone>(o, q0, q1);
          break;
        case Red::kAdd:
          scatter_lines<Red::kAdd>(o, q0, q1);
          break;
        case Red::kMul:
          scatter_lines<Red::kMul>(o, q0, q1);
          break;
        case Red::kMax:
          scatter_lines<Red::kMax>(o, q0, q1);
          break;
        case Red::kMin:
          scatter_lines<Red::kMin>(o, q0, q1);
          break;
      }
    }
  }

  Problem p_;
  std::string name_;
  uint64_t seed_;
  Placed<float> x_, f1_, f2_, y_;  // the operands, on placed host buffers
  Placed<int64_t> i1_, i2_;
  // GridSample
  int64_t taps_ = 0, points_ = 0;
  int threads_ = 1;
  bool per_image_ = false, corners_ = false;
  std::string mode_;
  char pad_ = 'z';
  std::vector<int32_t> offsets_;
  std::vector<float> weights_;
  // ScatterElements
  std::vector<int64_t> outer_, inner_;
  int64_t axis_len_ = 0, axis_stride_ = 1, axis_updates_ = 0;
  Red red_ = Red::kNone;
};

}  // namespace

std::unique_ptr<Kernel> make_sampling_kernel(const Problem& p, const std::string& name, uint64_t seed) {
  return std::make_unique<SamplingKernel>(p, name, seed);
}

}  // namespace floorline::kernels::floorline_detail
