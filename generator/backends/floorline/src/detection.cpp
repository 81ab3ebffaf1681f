// Floorline's own CPU kernels for kinds that neither oneDNN 2.6 nor XNNPACK nor OpenBLAS has a
// primitive for: TopK, GatherND, NonZero, NonMaxSuppression, CumSum, ArgMax and ArgMin; RoiAlign,
// GridSample and ScatterElements are in sampling.cpp. Plain C++ over plain row-major buffers on the
// case's placed host buffers, OpenMP over the independent slices (set_floorline_threads), f32 data
// and int64 indices as ONNX Runtime holds them.
//
// Inputs are generated so that the data-dependent kinds select the count the model processor
// assumed (--max-detections, docs/LAYERS.md): NonZero gets exactly that many non-zero elements,
// NonMaxSuppression boxes in that many disjoint clusters (each cluster one box after suppression).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

// A tensor: floats, or int64 (indices), on a placed host buffer.
struct Buf {
  Shape shape;
  bool integer = false;
  Placed<float> f;
  Placed<int64_t> i;
  int64_t size() const { return elements(shape); }
};

class OwnKernel final : public Kernel {
 public:
  OwnKernel(Problem p, std::string name, uint64_t seed)
      : p_(std::move(p)), name_(std::move(name)), seed_(seed) {
    for (const auto& op : p_.inputs) in_.push_back({op.shape, integer_input(op.role), {}, {}});
    for (size_t k = 0; k < p_.outputs.size(); ++k)
      out_.push_back({p_.outputs[k].shape, integer_output(k), {}, {}});
    check();
    for (auto* list : {&in_, &out_})
      for (auto& b : *list) {
        if (b.integer)
          b.i = Placed<int64_t>(b.size());
        else
          b.f = Placed<float>(b.size());
      }
    fill(seed_);
  }

  std::string implementation() const override { return "floorline " + name_; }
  int64_t workspace_bytes() const override { return 0; }

  // The f32 operands, plain (replay wires them); int64 indices keep their own buffers.
  std::optional<Port> port(bool output, size_t k) const override {
    const auto& list = output ? out_ : in_;
    if (k >= list.size() || list[k].integer) return std::nullopt;
    return Port{list[k].f.data(), list[k].f.bytes(), "plain"};
  }
  Status bind(bool output, size_t k, void* data) override {
    if (!port(output, k))
      return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    (output ? out_ : in_)[k].f.bind(data);
    return {};
  }

  void run() override {
    switch (p_.kind) {
      case LayerKind::kTopK:
        topk();
        break;
      case LayerKind::kGatherND:
        gather_nd();
        break;
      case LayerKind::kNonZero:
        nonzero();
        break;
      case LayerKind::kNonMaxSuppression:
        nms();
        break;
      case LayerKind::kCumSum:
        cumsum();
        break;
      case LayerKind::kArgMax:
      case LayerKind::kArgMin:
        arg_extreme();
        break;
      default:
        unsupported(fmt::format("no floorline kernel for {}", p_.op));
    }
  }

  // The outputs on fresh inputs against the reference: integer outputs (indices) and gathered
  // values exactly; CumSum's sums (f32 here, double there) per element (verify_tolerance, reference.hpp).
  Status verify() override {
    fill(seed_ + 7);
    run();
    const int64_t assumed = p_.kind == LayerKind::kNonZero ? out_[0].shape[1] : out_[0].shape[0];
    if (produced_ >= 0 && produced_ != assumed)
      return make_error("{}: the inputs select {}, the output holds {}", p_.op, produced_, assumed);
    std::vector<HostTensor> ins;
    for (const auto& b : in_) ins.push_back(as_host(b));
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, {}));
    if (ref.size() < out_.size()) return make_error("the reference has {} outputs", ref.size());
    for (size_t k = 0; k < out_.size(); ++k) {
      const HostTensor got = as_host(out_[k]);
      if (ref[k].shape != got.shape)
        return make_error("output {}: the reference's shape {} differs from {}", k,
                          fmt::join(ref[k].shape, "x"), fmt::join(got.shape, "x"));
      if (p_.kind == LayerKind::kCumSum) {
        if (auto st = compare_output(got.data.data(), ref[k], verify_tolerance(p_)); !st)
          return st.error().with_context(fmt::format("output {}", k));
        continue;
      }
      for (size_t e = 0; e < got.data.size(); ++e)
        if (got.data[e] != ref[k].data[e])
          return make_error("output {} element {}: {} vs the reference's {}", k, e, got.data[e],
                            ref[k].data[e]);
    }
    return {};
  }

 private:
  bool integer_input(const std::string& role) const {
    return p_.kind == LayerKind::kGatherND && role == "indices";
  }
  bool integer_output(size_t k) const {
    switch (p_.kind) {
      case LayerKind::kTopK:
        return k == 1;
      case LayerKind::kNonZero:
      case LayerKind::kNonMaxSuppression:
      case LayerKind::kArgMax:
      case LayerKind::kArgMin:
        return true;
      default:
        return false;
    }
  }
  static HostTensor as_host(const Buf& b) {
    HostTensor h{b.shape, {}};
    if (b.integer)
      for (int64_t v : b.i) h.data.push_back(static_cast<float>(v));
    else
      h.data.assign(b.f.begin(), b.f.end());
    return h;
  }
  double scalar(const std::string& role, double fallback) const {
    for (size_t k = 0; k < p_.inputs.size(); ++k)
      if (p_.inputs[k].role == role && !in_[k].f.empty()) return in_[k].f[0];
    if (p_.ints.count(role)) return static_cast<double>(p_.int_attr(role, 0));
    return p_.float_attr(role, fallback);
  }
  int64_t axis() const { return p_.int_attr("axis"); }

  // Shapes the kernel relies on (unsupported otherwise: a case never reads out of bounds).
  void check() const {
    for (const auto* list : {&in_, &out_})
      for (const auto& b : *list)
        if (std::any_of(b.shape.begin(), b.shape.end(), [](int64_t d) { return d < 0; }))
          unsupported("a shape is unknown");
    if (out_.empty()) unsupported(p_.op + " has no output");
    switch (p_.kind) {
      case LayerKind::kTopK:
      case LayerKind::kCumSum:
      case LayerKind::kArgMax:
      case LayerKind::kArgMin:
        if (axis() < 0 || axis() >= static_cast<int64_t>(in_.at(0).shape.size()))
          unsupported(fmt::format("{}: axis {} out of range", p_.op, axis()));
        if (p_.kind == LayerKind::kTopK &&
            (out_.size() != 2 || out_[0].shape.size() != in_[0].shape.size() ||
             out_[0].shape[static_cast<size_t>(axis())] > in_[0].shape[static_cast<size_t>(axis())]))
          unsupported("TopK: outputs are not Values and Indices of K ≤ n along the axis");
        break;
      case LayerKind::kGatherND: {
        if (in_.size() < 2 || in_[1].shape.empty()) unsupported("GatherND: no indices");
        const int64_t b = p_.int_attr("batch_dims"), m = in_[1].shape.back();
        const int64_t r = static_cast<int64_t>(in_[0].shape.size());
        const int64_t q = static_cast<int64_t>(in_[1].shape.size());
        if (b < 0 || b >= std::min(r, q) || m < 1 || b + m > r)
          unsupported(fmt::format("GatherND: batch_dims {} with tuples of {} in data of rank {}", b, m, r));
        for (int64_t d = 0; d < b; ++d)
          if (in_[1].shape[static_cast<size_t>(d)] != in_[0].shape[static_cast<size_t>(d)])
            unsupported("GatherND: the batch dimensions of data and indices differ");
        int64_t slice = 1;
        for (int64_t d = b + m; d < r; ++d) slice *= in_[0].shape[static_cast<size_t>(d)];
        if (out_[0].size() != in_[1].size() / m * slice)
          unsupported("GatherND: the output has not tuples × slice elements");
        break;
      }
      case LayerKind::kNonZero:
        if (out_[0].shape.size() != 2 || out_[0].shape[0] != static_cast<int64_t>(in_[0].shape.size()))
          unsupported("NonZero: output is not [rank, count]");
        break;
      case LayerKind::kNonMaxSuppression:
        if (in_.size() < 2 || in_[0].shape.size() != 3 || in_[1].shape.size() != 3 || in_[0].shape[2] != 4 ||
            out_[0].shape.size() != 2 || out_[0].shape[1] != 3)
          unsupported("NonMaxSuppression: boxes [B, S, 4], scores [B, C, S] and [count, 3] expected");
        break;
      default:
        unsupported(fmt::format("no floorline kernel for {}", p_.op));
    }
  }

  // --- inputs ---------------------------------------------------------------------------------
  void fill(uint64_t seed) {
    RandomStream s(seed);
    for (auto& b : in_)
      for (auto& v : b.f) v = s.uniform(-1.f, 2.f);
    if (p_.kind == LayerKind::kGatherND) {  // valid index tuples
      const int64_t m = in_[1].shape.back(), b = p_.int_attr("batch_dims");
      for (size_t e = 0; e < in_[1].i.size(); ++e) {
        const int64_t dim = in_[0].shape[static_cast<size_t>(b) + e % static_cast<size_t>(m)];
        in_[1].i[e] = s.below(dim);
      }
    } else if (p_.kind == LayerKind::kNonZero) {
      fill_nonzero(s);
    } else if (p_.kind == LayerKind::kNonMaxSuppression) {
      fill_nms(s);
    }
  }
  // Exactly `count` non-zero elements (the assumption), spread evenly with a random offset.
  void fill_nonzero(RandomStream& s) {
    auto& x = in_[0].f;
    const int64_t n = static_cast<int64_t>(x.size()), count = out_[0].shape[1];
    if (count > n) unsupported(fmt::format("NonZero: {} selected of {} elements", count, n));
    x.fill(0.f);
    if (count == 0) return;
    const int64_t step = n / count, offset = s.below(step);
    for (int64_t c = 0; c < count; ++c) x[static_cast<size_t>(c * step + offset)] = 1.f + s.unit();
  }
  // B·C classes each select count / (B·C) boxes: box j of a batch belongs to cluster j mod m, the
  // boxes of a cluster are the same unit square (IoU 1 > iou_threshold: suppressed by its first),
  // clusters are disjoint (IoU 0: never suppress each other); scores are random and above
  // score_threshold. The greedy pass so visits every candidate as a real head does.
  void fill_nms(RandomStream& s) {
    const int64_t nb = in_[1].shape[0], nc = in_[1].shape[1], ns = in_[1].shape[2], count = out_[0].shape[0];
    const int64_t classes = nb * nc;
    if (classes == 0 || count % classes != 0)
      unsupported(
          fmt::format("NonMaxSuppression: {} selected boxes over {} batch × class pairs", count, classes));
    const int64_t m = count / classes;
    for (size_t k = 2; k < p_.inputs.size(); ++k) {  // run-time scalar parameters
      const std::string& role = p_.inputs[k].role;
      in_[k].f.fill(role == "max_output_boxes_per_class" ? static_cast<float>(m)
                    : role == "iou_threshold"            ? 0.5f
                                                         : 0.f);
    }
    const double max_out = scalar("max_output_boxes_per_class", 0), iou_t = scalar("iou_threshold", 0);
    const double score_t = scalar("score_threshold", -1);
    if (static_cast<double>(m) > max_out || m > ns || (m < ns && !(iou_t < 1.0)))
      unsupported(
          fmt::format("NonMaxSuppression: {} boxes per class cannot be selected (max_output_boxes_per_class "
                      "{}, {} boxes, "
                      "iou_threshold {})",
                      m, max_out, ns, iou_t));
    auto& boxes = in_[0].f;
    const bool center = p_.int_attr("center_point_box") != 0;
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t j = 0; j < ns; ++j) {
        const float at = m ? 2.f * static_cast<float>(j % m) : 0.f;
        float* v = &boxes[static_cast<size_t>((b * ns + j) * 4)];
        if (center) {
          v[0] = at + 0.5f, v[1] = 0.5f, v[2] = 1.f, v[3] = 1.f;
        } else {
          v[0] = 0.f, v[1] = at, v[2] = 1.f, v[3] = at + 1.f;
        }
      }
    for (auto& v : in_[1].f) v = static_cast<float>(std::max(score_t, 0.0)) + 0.01f + 0.98f * s.unit();
  }

  // --- the kernels --------------------------------------------------------------------------------
  // TopK: per slice, nth_element then a sort of the K kept, on (value, index) with the operator's
  // order (best first, lower index first among equals): O(n + K log K) per slice.
  void topk() {
    const AxisSplit a = split_at_axis(in_[0].shape, axis());
    const int64_t k = out_[0].shape[static_cast<size_t>(axis())];
    const bool largest = p_.int_attr("largest") != 0;
    const float* x = in_[0].f.data();
    float* values = out_[0].f.data();
    int64_t* indices = out_[1].i.data();
    const int64_t slices = a.outer * a.inner;
#pragma omp parallel
    {
      std::vector<std::pair<float, int64_t>> buf(static_cast<size_t>(a.n));
#pragma omp for schedule(static)
      for (int64_t sl = 0; sl < slices; ++sl) {
        const int64_t o = sl / a.inner, i = sl % a.inner;
        const float* src = x + o * a.n * a.inner + i;
        for (int64_t j = 0; j < a.n; ++j) buf[static_cast<size_t>(j)] = {src[j * a.inner], j};
        auto better = [largest](const std::pair<float, int64_t>& l, const std::pair<float, int64_t>& r) {
          if (l.first != r.first) return largest ? l.first > r.first : l.first < r.first;
          return l.second < r.second;
        };
        if (k < a.n) std::nth_element(buf.begin(), buf.begin() + k, buf.end(), better);
        std::sort(buf.begin(), buf.begin() + k, better);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t at = (o * k + j) * a.inner + i;
          values[at] = buf[static_cast<size_t>(j)].first;
          indices[at] = buf[static_cast<size_t>(j)].second;
        }
      }
    }
  }

  // GatherND: one contiguous slice copied per index tuple; with batch_dims b, the tuples of batch
  // position k (the first b dimensions, shared by data and indices) index data's k-th block.
  void gather_nd() {
    const Shape& ds = in_[0].shape;
    const Shape st = strides_of(ds);
    const int64_t b = p_.int_attr("batch_dims");
    const int64_t m = in_[1].shape.back(), tuples = in_[1].size() / m;
    const int64_t last = b + m;  // the first dimension of the slice
    const int64_t slice = last < static_cast<int64_t>(ds.size()) ? st[static_cast<size_t>(last - 1)] : 1;
    int64_t batch = 1;
    for (int64_t d = 0; d < b; ++d) batch *= ds[static_cast<size_t>(d)];
    const int64_t per_batch = batch ? tuples / batch : 0;
    const int64_t batch_stride = b ? st[static_cast<size_t>(b - 1)] : 0;
    const float* data = in_[0].f.data();
    const int64_t* idx = in_[1].i.data();
    float* y = out_[0].f.data();
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = per_batch ? t / per_batch * batch_stride : 0;
      for (int64_t j = 0; j < m; ++j) {
        int64_t v = idx[t * m + j];
        const int64_t dim = ds[static_cast<size_t>(b + j)];
        if (v < 0) v += dim;
        v = std::clamp<int64_t>(v, 0, dim - 1);  // (the generated indices are valid)
        off += v * st[static_cast<size_t>(b + j)];
      }
      std::memcpy(y + t * slice, data + off, static_cast<size_t>(slice) * sizeof(float));
    }
  }

  // NonZero: each thread counts its chunk, a prefix sum places the chunks, each writes its
  // coordinates; produced_ is the count found (verify() checks it is the assumed one).
  void nonzero() {
    const Shape& xs = in_[0].shape;
    const int64_t n = in_[0].size(), rank = static_cast<int64_t>(xs.size()), cap = out_[0].shape[1];
    const float* x = in_[0].f.data();
    int64_t* y = out_[0].i.data();
    const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(n / 4096 + 1)));
    if (threads == 1) {  // no parallel region for one thread (its start costs about a microsecond)
      int64_t at = 0;
      for (int64_t e = 0; e < n; ++e) {
        if (x[e] == 0.f) continue;
        if (at < cap) {
          int64_t rest = e;
          for (int64_t d = rank - 1; d >= 0; --d) {
            const int64_t dim = xs[static_cast<size_t>(d)];
            y[d * cap + at] = rest % dim;
            rest /= dim;
          }
        }
        ++at;
      }
      produced_ = at;
      return;
    }
    std::vector<int64_t> counts(static_cast<size_t>(threads) + 1, 0);
    int used = 1;  // the threads the runtime gave (at most `threads`)
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
      int64_t c = 0;
      for (int64_t e = lo; e < hi; ++e) c += x[e] != 0.f;
      counts[static_cast<size_t>(t) + 1] = c;
#pragma omp barrier
#pragma omp single
      {
        used = nt;
        for (int u = 0; u < nt; ++u) counts[static_cast<size_t>(u) + 1] += counts[static_cast<size_t>(u)];
      }
      int64_t at = counts[static_cast<size_t>(t)];
      for (int64_t e = lo; e < hi && at < cap; ++e) {
        if (x[e] == 0.f) continue;
        int64_t rest = e;
        for (int64_t d = rank - 1; d >= 0; --d) {
          const int64_t dim = xs[static_cast<size_t>(d)];
          y[d * cap + at] = rest % dim;
          rest /= dim;
        }
        ++at;
      }
    }
    produced_ = counts[static_cast<size_t>(used)];
  }

  // NonMaxSuppression: per batch and class, the candidates above score_threshold sorted by score
  // (lower index first among equals), areas once, then the greedy pass: each box not suppressed
  // is selected and suppresses the later candidates whose IoU with it exceeds iou_threshold.
  void nms() {
    const int64_t nb = in_[1].shape[0], nc = in_[1].shape[1], ns = in_[1].shape[2], cap = out_[0].shape[0];
    const double max_out = scalar("max_output_boxes_per_class", 0), iou_t = scalar("iou_threshold", 0);
    const bool has_score_t =
        p_.ints.count("score_threshold") || p_.floats.count("score_threshold") || p_.input("score_threshold");
    const float score_t = static_cast<float>(scalar("score_threshold", 0));
    const bool center = p_.int_attr("center_point_box") != 0;
    const float* boxes = in_[0].f.data();
    const float* scores = in_[1].f.data();
    int64_t* y = out_[0].i.data();
    int64_t selected = 0;
    std::vector<float> y1(static_cast<size_t>(ns)), x1(y1), y2(y1), x2(y1), area(y1);
    // The candidates' corners and areas in score order: the inner loop reads them contiguously
    // and has no branch, so the compiler vectorizes it.
    std::vector<float> sy1(y1), sx1(y1), sy2(y1), sx2(y1), sarea(y1);
    std::vector<int64_t> cand;
    std::vector<uint8_t> gone;
    cand.reserve(static_cast<size_t>(ns));
    const float t = static_cast<float>(iou_t);
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t j = 0; j < ns; ++j) {
        const float* v = boxes + (b * ns + j) * 4;
        const size_t u = static_cast<size_t>(j);
        if (center) {
          y1[u] = v[1] - v[3] / 2, x1[u] = v[0] - v[2] / 2, y2[u] = v[1] + v[3] / 2, x2[u] = v[0] + v[2] / 2;
        } else {
          y1[u] = std::min(v[0], v[2]), x1[u] = std::min(v[1], v[3]);
          y2[u] = std::max(v[0], v[2]), x2[u] = std::max(v[1], v[3]);
        }
        area[u] = (y2[u] - y1[u]) * (x2[u] - x1[u]);
      }
      for (int64_t c = 0; c < nc; ++c) {
        const float* sc = scores + (b * nc + c) * ns;
        cand.clear();
        for (int64_t j = 0; j < ns; ++j)
          if (!has_score_t || sc[j] > score_t) cand.push_back(j);
        std::sort(cand.begin(), cand.end(),
                  [sc](int64_t l, int64_t r) { return sc[l] != sc[r] ? sc[l] > sc[r] : l < r; });
        const size_t n = cand.size();
        for (size_t i = 0; i < n; ++i) {
          const size_t u = static_cast<size_t>(cand[i]);
          sy1[i] = y1[u], sx1[i] = x1[u], sy2[i] = y2[u], sx2[i] = x2[u], sarea[i] = area[u];
        }
        gone.assign(n, 0);
        int64_t kept = 0;
        for (size_t i = 0; i < n && static_cast<double>(kept) < max_out; ++i) {
          if (gone[i]) continue;
          if (selected < cap) {
            y[selected * 3] = b, y[selected * 3 + 1] = c, y[selected * 3 + 2] = cand[i];
          }
          ++selected, ++kept;
          const float ay1 = sy1[i], ax1 = sx1[i], ay2 = sy2[i], ax2 = sx2[i], aa = sarea[i];
          for (size_t j = i + 1; j < n; ++j) {
            const float ih = std::max(0.f, std::min(ay2, sy2[j]) - std::max(ay1, sy1[j]));
            const float iw = std::max(0.f, std::min(ax2, sx2[j]) - std::max(ax1, sx1[j]));
            const float inter = ih * iw, uni = aa + sarea[j] - inter;
            gone[j] |= static_cast<uint8_t>((inter > 0.f) & (uni > 0.f) & (inter > t * uni));
          }
        }
      }
    }
    produced_ = selected;
  }

  // CumSum: along the axis, row by row (each row of `inner` contiguous elements added to the
  // previous row's sums), slices of the outer dimension in parallel.
  void cumsum() {
    const AxisSplit a = split_at_axis(in_[0].shape, axis());
    const bool exclusive = p_.int_attr("exclusive") != 0, reverse = p_.int_attr("reverse") != 0;
    const float* x = in_[0].f.data();
    float* y = out_[0].f.data();
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < a.outer; ++o) {
      const float* xs = x + o * a.n * a.inner;
      float* ys = y + o * a.n * a.inner;
      for (int64_t s = 0; s < a.n; ++s) {
        const int64_t k = reverse ? a.n - 1 - s : s, prev = reverse ? k + 1 : k - 1;
        float* row = ys + k * a.inner;
        if (s == 0) {
          for (int64_t i = 0; i < a.inner; ++i) row[i] = exclusive ? 0.f : xs[k * a.inner + i];
          continue;
        }
        const float* last = ys + prev * a.inner;
        const float* add = xs + (exclusive ? prev : k) * a.inner;
        for (int64_t i = 0; i < a.inner; ++i) row[i] = last[i] + add[i];
      }
    }
  }

  // ArgMax/ArgMin: row by row along the axis, the best value and its index per inner element.
  void arg_extreme() {
    const AxisSplit a = split_at_axis(in_[0].shape, axis());
    const bool last = p_.int_attr("select_last_index") != 0, is_max = p_.kind == LayerKind::kArgMax;
    const float* x = in_[0].f.data();
    int64_t* y = out_[0].i.data();
#pragma omp parallel
    {
      std::vector<float> best(static_cast<size_t>(a.inner));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < a.outer; ++o) {
        const float* xs = x + o * a.n * a.inner;
        int64_t* ys = y + o * a.inner;
        for (int64_t i = 0; i < a.inner; ++i) best[static_cast<size_t>(i)] = xs[i], ys[i] = 0;
        for (int64_t k = 1; k < a.n; ++k) {
          const float* row = xs + k * a.inner;
          for (int64_t i = 0; i < a.inner; ++i) {
            const float v = row[i], b = best[static_cast<size_t>(i)];
            const bool better = is_max ? (v > b || (last && v == b)) : (v < b || (last && v == b));
            if (better) best[static_cast<size_t>(i)] = v, ys[i] = k;
          }
        }
      }
    }
  }

  Problem p_;
  std::string name_;
  uint64_t seed_;
  std::vector<Buf> in_, out_;
  int64_t produced_ = -1;  // NonZero/NMS: the count the last run found
};

}  // namespace

std::unique_ptr<Kernel> make_detection_kernel(const Problem& p, const std::string& name, uint64_t seed) {
  return std::make_unique<OwnKernel>(p, name, seed);
}

}  // namespace floorline::kernels::floorline_detail
