// The HTML report: one self-contained page, charts as inline SVG, no scripts, no network.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "floorline/analyzer/report.hpp"
#include "floorline/analyzer/throughput.hpp"
#include "floorline/common/output.hpp"
#include "html_text.hpp"
#include "report_parts.hpp"

namespace floorline::analyzer {

// html_text.hpp
std::string html_text(std::string_view s) {
  std::string o;
  for (char c : output::valid_utf8(s)) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      o += ' ';
      continue;
    }
    switch (c) {
      case '\'':
        o += "&#39;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string us_text(double us) {
  if (us >= 1e6) return fmt::format("{:.2f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.2f} ms", us / 1e3);
  return fmt::format("{:.1f} µs", us);
}

namespace {

std::string esc(const std::string& s) {
  return html_text(s);
}

const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr size_t kPaletteSize = std::size(kPalette);

}  // namespace

std::vector<std::string> distinct_colors(size_t n) {
  std::vector<std::string> given;
  std::set<std::string> seen;
  for (size_t k = 0; given.size() < n; ++k) {
    std::string c;
    if (k < kPaletteSize) {
      c = kPalette[k];
    } else {
      const size_t j = k - kPaletteSize;
      const double h = std::fmod(20.0 + 137.50776 * static_cast<double>(j), 360.0) / 60.0;
      const double sat = (j / 2) % 2 ? 0.45 : 0.7, light = j % 2 ? 0.62 : 0.4;
      const double chroma = (1 - std::fabs(2 * light - 1)) * sat;
      const double x = chroma * (1 - std::fabs(std::fmod(h, 2.0) - 1)), m = light - chroma / 2;
      const int sector = static_cast<int>(h);
      double rgb[3] = {0, 0, 0};
      const int hi = sector == 0 || sector == 5 ? 0 : sector <= 2 ? 1 : 2;  // the largest channel
      const int mid = sector == 0 || sector == 3 ? 1 : sector == 1 || sector == 4 ? 0 : 2;
      rgb[hi] = chroma;
      rgb[mid] = x;
      auto byte = [m](double v) { return static_cast<int>(std::lround(std::clamp(v + m, 0.0, 1.0) * 255)); };
      c = fmt::format("#{:02x}{:02x}{:02x}", byte(rgb[0]), byte(rgb[1]), byte(rgb[2]));
    }
    if (seen.insert(c).second) given.push_back(std::move(c));
  }
  return given;
}

namespace {

// Marker shapes beside the colours: every further ten categories change shape, so that points of
// categories whose generated colours are close still read apart.
struct Marker {
  const char* legend;  // the HTML entity of the shape
  int shape;           // 0 circle, 1 square, 2 triangle, 3 diamond
};
Marker marker(size_t i) {
  static const Marker kMarkers[] = {{"&#9679;", 0}, {"&#9632;", 1}, {"&#9650;", 2}, {"&#9670;", 3}};
  return kMarkers[(i / kPaletteSize) % std::size(kMarkers)];
}

// A marker of `shape` centred on (x, y), radius r, with the given fill and a tooltip.
std::string marker_svg(int shape, double x, double y, double r, const std::string& fill,
                       const std::string& title) {
  const std::string common = fmt::format("fill=\"{}\" fill-opacity=\"0.75\"", fill);
  std::string el;
  switch (shape) {
    case 1:
      el = fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" {}>", x - r, y - r,
                       2 * r, 2 * r, common);
      return el + "<title>" + title + "</title></rect>\n";
    case 2:
      el = fmt::format("<polygon points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" {}>", x, y - 1.2 * r,
                       x - 1.1 * r, y + 0.9 * r, x + 1.1 * r, y + 0.9 * r, common);
      return el + "<title>" + title + "</title></polygon>\n";
    case 3:
      el = fmt::format("<polygon points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" {}>", x,
                       y - 1.3 * r, x + 1.3 * r, y, x, y + 1.3 * r, x - 1.3 * r, y, common);
      return el + "<title>" + title + "</title></polygon>\n";
    default:
      el = fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" {}>", x, y, r, common);
      return el + "<title>" + title + "</title></circle>\n";
  }
}

// A log10 axis over [lo, hi] mapped to [x0, x1] pixels, decade ticks.
struct LogAxis {
  double lo, hi, x0, x1;
  LogAxis(double lo_, double hi_, double a, double b) : x0(a), x1(b) {
    lo = std::pow(10.0, std::floor(std::log10(std::max(lo_, 1e-9))));
    hi = std::pow(10.0, std::ceil(std::log10(std::max(hi_, lo * 10))));
  }
  double at(double v) const {
    v = std::clamp(v, lo, hi);
    return x0 + (x1 - x0) * (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    for (double v = lo; v <= hi * 1.0001; v *= 10) t.push_back(v);
    return t;
  }
};

std::string tick_label(double v) {
  if (v >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

// Decade grid lines, tick labels and axis titles of a log-log chart plotted in [left, right] × [top, bottom].
std::string log_log_grid(const LogAxis& xa, const LogAxis& ya, double left, double right, double top,
                         double bottom, const char* x_title, const char* y_title) {
  std::string s;
  for (double t : xa.ticks())
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e4e4e4\"/><text x=\"{0:.1f}\" "
        "y=\"{3}\" font-size=\"10\" "
        "text-anchor=\"middle\">{4}</text>\n",
        xa.at(t), top, bottom, bottom + 14, tick_label(t));
  for (double t : ya.ticks())
    s += fmt::format(
        "<line x1=\"{1}\" x2=\"{2}\" y1=\"{0:.1f}\" y2=\"{0:.1f}\" stroke=\"#e4e4e4\"/><text x=\"{3}\" "
        "y=\"{0:.1f}\" font-size=\"10\" "
        "text-anchor=\"end\">{4}</text>\n",
        ya.at(t), left, right, left - 4, tick_label(t));
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>"
      "<text x=\"14\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 14 {})\" "
      "text-anchor=\"middle\">{}</text>\n",
      (left + right) / 2, bottom + 32, x_title, (top + bottom) / 2, (top + bottom) / 2, y_title);
  return s;
}

// The "model bN" label at the left of a chart row starting at y.
std::string row_label(const ModelBounds& b, double left, double y) {
  return fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{} b{}</text>\n",
                     left - 8, y + 12, esc(b.model), b.batch);
}

// Bounds per model: one row per model × batch, a marker per bound on a log time axis.
std::string bounds_chart(const Report& r) {
  struct Mark {
    const char* name;
    const char* color;
    std::optional<double> v;
  };
  const double row = 18, left = 210, right = 900, top = 30;
  double lo = 1e300, hi = 0;
  auto marks = [](const ModelBounds& b) {
    return std::vector<Mark>{{"R", "#59a14f", b.R}, {"P", "#76b7b2", b.P}, {"F", "#4e79a7", b.F},
                             {"S", "#000000", b.S}, {"H", "#f28e2b", b.H}, {"M", "#e15759", b.M}};
  };
  for (const auto& m : r.models)
    for (const auto& k : marks(m.bounds))
      if (k.v && *k.v > 0) lo = std::min(lo, *k.v), hi = std::max(hi, *k.v);
  if (hi <= 0) return "<p>No bounds to chart.</p>";
  const LogAxis ax(lo, hi, left, right);
  const double h = top + row * static_cast<double>(r.models.size()) + 40;
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-bounds\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" "
      "role=\"img\" aria-label=\"bounds per model\">\n",
      right + 30, h);
  for (double t : ax.ticks())
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0:.1f}\" "
        "y=\"{3}\" "
        "font-size=\"10\" text-anchor=\"middle\">{4}</text>\n",
        ax.at(t), top - 5, h - 35, h - 22, tick_label(t));
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">latency (µs, log scale)</text>\n",
      (left + right) / 2, h - 8);
  double y = top;
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    s += row_label(b, left, y);
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#f0f0f0\"/>\n", left,
                     right, y + 8, y + 8);
    for (const auto& k : marks(b))
      if (k.v && *k.v > 0)
        s += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\" fill-opacity=\"0.85\"><title>{} b{}: "
            "{} = {}</title></circle>\n",
            ax.at(*k.v), y + 8, k.color, esc(b.model), b.batch, k.name, us_text(*k.v));
    y += row;
  }
  s += "</svg>\n<p class=\"legend\">";
  for (const auto& k : marks(ModelBounds{}))
    s += fmt::format("<span style=\"color:{}\">&#9679;</span> {} ", k.color, k.name);
  return s + "</p>\n";
}

// S (and F, P) against batch size, one line per model; only models analyzed at several batches.
std::string batch_chart(const Report& r) {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> series;
  for (const auto& m : r.models) series[m.bounds.model].push_back({m.bounds.batch, m.bounds.S});
  for (auto it = series.begin(); it != series.end();)
    it = it->second.size() < 2 ? series.erase(it) : std::next(it);
  if (series.empty())
    return "<p class=\"note\" id=\"chart-batch\">Every model was analyzed at one batch size: analyze with "
           "several "
           "(<code>--batch 1,8,32</code>, measured with <code>floorline bench --batch 1,8,32</code>) to see "
           "latency vs "
           "batch size.</p>\n";
  double tlo = 1e300, thi = 0, blo = 1e300, bhi = 0;
  for (const auto& [_, pts] : series)
    for (auto [bt, t] : pts) {
      tlo = std::min(tlo, t), thi = std::max(thi, t);
      blo = std::min(blo, static_cast<double>(bt)), bhi = std::max(bhi, static_cast<double>(bt));
    }
  const double left = 70, right = 640, top = 20, bottom = 360;
  const LogAxis xa(blo, bhi, left, right), ya(tlo, thi, bottom, top);
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-batch\" xmlns=\"http://www.w3.org/2000/svg\" width=\"860\" "
      "height=\"{}\">\n",
      bottom + 40);
  s += log_log_grid(xa, ya, left, right, top, bottom, "batch size", "S (µs)");
  size_t i = 0;
  const auto colors = distinct_colors(series.size());
  // Each name beside the end of its line, moved apart where lines end close together.
  std::vector<std::tuple<double, std::string, std::string>> labels;  // (y, name, colour)
  for (auto& [name, pts] : series) {
    std::sort(pts.begin(), pts.end());
    const std::string& color = colors[i++];
    std::string d;
    for (auto [bt, t] : pts) {
      d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L", xa.at(static_cast<double>(bt)), ya.at(t));
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>{} b{}: S {}</title></circle>\n",
          xa.at(static_cast<double>(bt)), ya.at(t), color, esc(name), bt, us_text(t));
    }
    s += fmt::format(
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></path>\n", d,
        color, esc(name));
    labels.emplace_back(ya.at(pts.back().second) + 3, name, color);
  }
  std::sort(labels.begin(), labels.end());
  for (size_t k = 1; k < labels.size(); ++k)
    std::get<0>(labels[k]) = std::max(std::get<0>(labels[k]), std::get<0>(labels[k - 1]) + 11);
  for (const auto& [y, name, color] : labels)
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" fill=\"{}\">{}</text>\n", right + 12, y,
                     color, esc(name));
  return s + "</svg>\n";
}

// Share of S by layer kind, one 100% bar per model × batch; the 9 largest kinds overall, then "other".
std::string kind_chart(const Report& r) {
  std::map<std::string, double> total;
  for (const auto& m : r.models)
    for (const auto& l : m.bounds.layers) total[l.kind] += m.bounds.S > 0 ? l.us / m.bounds.S : 0;
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [k, v] : total) order.push_back({-v, k});
  std::sort(order.begin(), order.end());
  std::map<std::string, size_t> color_of;
  for (size_t i = 0; i < order.size() && i < 9; ++i) color_of[order[i].second] = i;
  const double row = 18, left = 210, right = 900, top = 10;
  const double h = top + row * static_cast<double>(r.models.size()) + 20;
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-kinds\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\">\n",
      right + 30, h);
  double y = top;
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    s += row_label(b, left, y);
    std::map<size_t, std::pair<std::string, double>> parts;  // color index → (kind, µs)
    for (const auto& l : b.layers) {
      auto it = color_of.find(l.kind);
      const size_t c = it == color_of.end() ? 9 : it->second;
      parts[c].first = it == color_of.end() ? "other" : l.kind;
      parts[c].second += l.us;
    }
    double x = left;
    for (const auto& [c, p] : parts) {
      const double w = b.S > 0 ? (right - left) * p.second / b.S : 0;
      if (w <= 0) continue;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{} b{}: {} {} "
          "({:.1f}%)</title></rect>\n",
          x, y + 2, w, row - 4, kPalette[c], esc(b.model), b.batch, esc(p.first), us_text(p.second),
          100.0 * p.second / b.S);
      x += w;
    }
    y += row;
  }
  s += "</svg>\n<p class=\"legend\">";
  for (size_t i = 0; i < order.size() && i < 9; ++i)
    s += fmt::format("<span style=\"color:{}\">&#9632;</span> {} ", kPalette[i], esc(order[i].second));
  if (order.size() > 9) s += fmt::format("<span style=\"color:{}\">&#9632;</span> other", kPalette[9]);
  return s + "</p>\n";
}

// Roofline: achieved GFLOP/s against arithmetic intensity for every distinct measured layer config,
// under the calibrated peaks.
std::string roofline_chart(const Report& r) {
  if (!r.costs.system_id) return "";
  auto fp = r.costs.peaks.find({"flops", "f32"});
  auto bp = r.costs.peaks.find({"bytes", "f32"});
  if (fp == r.costs.peaks.end() || bp == r.costs.peaks.end())
    return "<p class=\"note\" id=\"chart-roofline\">No calibrated peaks for this system: no roofline chart "
           "(<code>floorline bench</code> calibrates them).</p>\n";
  struct Pt {
    double ai, gflops;
    std::string kind, label;
  };
  std::map<std::string, Pt> pts;  // by config key
  std::map<std::string, std::set<std::string>> models_of;
  for (const auto& m : r.models)
    for (const auto& l : m.bounds.layers) {
      if (l.source != CostSource::kMeasured || l.roofline_flops <= 0 || l.bytes <= 0 || l.us <= 0) continue;
      models_of[l.key].insert(m.bounds.model);
      pts[l.key] = {static_cast<double>(l.roofline_flops) / static_cast<double>(l.bytes),
                    static_cast<double>(l.roofline_flops) / l.us / 1e3, l.kind, l.key};
    }
  if (pts.empty()) return "<p class=\"note\" id=\"chart-roofline\">No measured layer with FLOPs.</p>\n";
  const double peak_g = fp->second / 1e9, bw_g = bp->second / 1e9;
  double alo = 1e300, ahi = 0, glo = 1e300;
  for (const auto& [_, p] : pts)
    alo = std::min(alo, p.ai), ahi = std::max(ahi, p.ai), glo = std::min(glo, p.gflops);
  const double left = 70, right = 820, top = 20, bottom = 420;
  const LogAxis xa(alo, ahi, left, right), ya(glo, peak_g * 2, bottom, top);
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" "
      "height=\"{}\">\n",
      bottom + 40);
  s += log_log_grid(xa, ya, left, right, top, bottom, "arithmetic intensity (FLOP/byte)", "GFLOP/s");
  // The roof: min(peak, AI × bandwidth), sampled along the axis.
  std::string d;
  for (int i = 0; i <= 200; ++i) {
    const double ai = xa.lo * std::pow(xa.hi / xa.lo, i / 200.0);
    d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", xa.at(ai), ya.at(std::min(peak_g, ai * bw_g)));
  }
  s += fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"#333\" stroke-width=\"2\"><title>roofline: {:.1f} GFLOP/s, "
      "{:.1f} GB/s</title></path>\n",
      d, peak_g, bw_g);
  s += fmt::format(
      "<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">peak {:.0f} GFLOP/s, {:.1f} GB/s "
      "(calibrated)</text>\n",
      right, ya.at(peak_g) - 5, peak_g, bw_g);
  // One colour per kind present, never repeated: the kinds with most configs get the palette's
  // first colours (ties by name), so the common kinds are the easiest to tell apart.
  std::map<std::string, size_t> configs_of;
  for (const auto& [_, p] : pts) ++configs_of[p.kind];
  std::vector<std::pair<size_t, std::string>> by_count;
  for (const auto& [k, n] : configs_of) by_count.push_back({n, k});
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::map<std::string, size_t> kinds;
  for (const auto& [_, k] : by_count) kinds.emplace(k, kinds.size());
  const auto colors = distinct_colors(kinds.size());
  for (const auto& [key, p] : pts) {
    const size_t c = kinds[p.kind];
    std::string ms;
    for (const auto& m : models_of[key]) ms += (ms.empty() ? "" : ", ") + m;
    s += marker_svg(
        marker(c).shape, xa.at(p.ai), ya.at(p.gflops), 3.2, colors[c],
        fmt::format("{} ({:.2f} FLOP/B, {:.1f} GFLOP/s) in {}", esc(p.label), p.ai, p.gflops, esc(ms)));
  }
  s += "</svg>\n<p class=\"legend\" id=\"legend-roofline\">";
  for (const auto& [_, k] : by_count)
    s += fmt::format("<span style=\"color:{}\">{}</span> {} ", colors[kinds[k]], marker(kinds[k]).legend,
                     esc(k));
  return s + "</p>\n";
}

// Each model's critical path as a strip of its layers, widths proportional to time.
std::string critical_path_chart(const Report& r) {
  const double row = 18, left = 210, right = 900, top = 10;
  const double h = top + row * static_cast<double>(r.models.size()) + 10;
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-critical-path\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\">\n",
      right + 190, h);
  double y = top;
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    s += row_label(b, left, y);
    // Scaled to S: the strip's length shows P / S.
    double x = left;
    size_t i = 0;
    for (const auto& l : b.layers) {
      if (!l.on_critical_path || b.S <= 0) continue;
      const double w = (right - left) * l.us / b.S;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{} {} "
          "{}</title></rect>\n",
          x, y + 2, w, row - 4, i++ % 2 ? "#e15759" : "#f1a3a4", esc(l.name), esc(l.kind), us_text(l.us));
      x += w;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">P {} ({:.0f}% of S)</text>\n", x + 4,
                     y + 12, us_text(b.P), b.S > 0 ? 100.0 * b.P / b.S : 0.0);
    y += row;
  }
  return s + "</svg>\n";
}

// --- throughput view (throughput.hpp) ----------------------------------------------------------

// 1, 2, 5 × 10^k: the smallest such step that cuts [0, hi] into at most `n` intervals.
double nice_step(double hi, int n) {
  const double raw = hi / n, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string per_s_text(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  if (v >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:.1f}", v);
}

// One model's panel: inferences/s (linear, from 0) against batch size (log2 spaced, a tick at each
// batch analyzed), the bound as a solid black line, each runtime dashed in its colour; the offline
// point of each series ringed.
std::string throughput_panel(const ModelThroughput& t, const std::map<std::string, std::string>& color_of) {
  const double w = 360, h = 262, left = 58, right = w - 14, top = 42, bottom = h - 42;
  std::set<int64_t> batches;
  double hi = 0;
  auto all = [&t]() {
    std::vector<const ThroughputSeries*> v = {&t.bound};
    for (const auto& s : t.runtimes) v.push_back(&s);
    return v;
  };
  for (const auto* s : all())
    for (const auto& p : s->points) batches.insert(p.batch), hi = std::max(hi, p.inferences_per_s);
  const double lb = std::log2(static_cast<double>(*batches.begin())),
               ub = std::log2(static_cast<double>(*batches.rbegin()));
  auto x_at = [&](int64_t b) {
    if (ub <= lb) return (left + right) / 2;
    return left + 12 + (right - left - 24) * (std::log2(static_cast<double>(b)) - lb) / (ub - lb);
  };
  const double step = nice_step(hi > 0 ? hi * 1.08 : 1, 4),
               ymax = step * std::ceil((hi > 0 ? hi * 1.08 : 1) / step);
  auto y_at = [&](double v) { return bottom - (bottom - top) * v / ymax; };
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-throughput-{}-{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" role=\"img\" aria-label=\"throughput of {} against batch size\">\n",
      esc(t.model), esc(t.dtype), w, h, esc(t.model));
  s += fmt::format(
      "<text x=\"{}\" y=\"14\" font-size=\"12\" font-weight=\"bold\" text-anchor=\"middle\">{} ({})</text>\n",
      (left + right) / 2, esc(t.model), esc(t.dtype));
  for (double v = 0; v <= ymax * 1.0001; v += step)
    s += fmt::format(
        "<line x1=\"{1}\" x2=\"{2}\" y1=\"{0:.1f}\" y2=\"{0:.1f}\" stroke=\"#e4e4e4\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" font-size=\"10\" text-anchor=\"end\">{5}</text>\n",
        y_at(v), left, right, left - 4, y_at(v) + 3, tick_label(v));
  for (int64_t b : batches)
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e4e4e4\"/><text x=\"{0:.1f}\" "
        "y=\"{3}\" font-size=\"10\" text-anchor=\"middle\">{4}</text>\n",
        x_at(b), top, bottom, bottom + 14, b);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">batch size</text>"
      "<text x=\"13\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 13 {})\" "
      "text-anchor=\"middle\">inferences/s</text>\n",
      (left + right) / 2, bottom + 32, (top + bottom) / 2, (top + bottom) / 2);
  // Runtimes first, so that the bound is drawn on top.
  auto all_series = all();
  std::rotate(all_series.begin(), all_series.begin() + 1, all_series.end());
  for (const auto* series : all_series) {
    const std::string color = series->bound ? "#000000" : color_of.at(series->name);
    std::string d;
    for (const auto& p : series->points)
      d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L", x_at(p.batch), y_at(p.inferences_per_s));
    s += fmt::format(
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}><title>{}</title></path>\n", d,
        color, series->bound ? 2 : 1.5, series->bound ? "" : " stroke-dasharray=\"5,3\"", esc(series->name));
    for (const auto& p : series->points) {
      const bool best = p.batch == series->offline.batch;
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"{}><title>{} {}, batch {}: {} "
          "inferences/s ({} per batch){}</title></circle>\n",
          x_at(p.batch), y_at(p.inferences_per_s), best ? 4.5 : 3, best ? "white" : color,
          best ? fmt::format(" stroke=\"{}\" stroke-width=\"2\"", color) : "", esc(t.model),
          esc(series->name), p.batch, per_s_text(p.inferences_per_s), us_text(p.latency_us),
          best ? ", the most" : "");
    }
  }
  const auto& o = t.bound.offline;
  s += fmt::format(
      "<text x=\"{}\" y=\"29\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\">S: {} at batch {}; best "
      "{}/s at batch {}</text>\n",
      w / 2, us_text(t.bound.single_stream.latency_us), t.bound.single_stream.batch,
      per_s_text(o.inferences_per_s), o.batch);
  return s + "</svg>\n";
}

// The throughput section: a table of the MLPerf single-stream and offline figures per model and
// series, and the chart of inferences/s against batch size, one panel per model.
std::string throughput_section(const Report& r) {
  const auto view = throughput_view(r.models);
  if (view.empty()) return "";
  const auto batches = throughput_batches(view);
  // A runtime keeps its colour in every panel.
  std::vector<std::string> names;
  for (const auto& t : view)
    for (const auto& s : t.runtimes)
      if (std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
  const auto colors = distinct_colors(names.size() + 1);
  std::map<std::string, std::string> color_of;
  for (size_t i = 0; i < names.size(); ++i) color_of[names[i]] = colors[i + 1];  // [0] is S's blue elsewhere

  std::string s =
      "<p class=\"note\">MLPerf scenarios from the bounds: <b>single stream</b> is the latency of one "
      "inference at batch 1 (or the smallest batch analyzed); <b>offline</b> is the throughput batch / "
      "latency at each batch analyzed, best batch in bold. The same for each imported runtime; "
      "<i>over bound</i> is its best throughput over the bound's (above 1: the runtime beats S, which "
      "then is no lower bound).</p>\n<table id=\"throughput\"><tr><th>model</th><th "
      "style=\"text-align:left\">series</th>"
      "<th>single stream</th>";
  for (int64_t b : batches) s += fmt::format("<th>batch {} (/s)</th>", b);
  s += "<th>offline best (/s)</th><th>best batch</th><th>over bound</th></tr>\n";
  for (const auto& t : view) {
    auto row = [&](const ThroughputSeries& x) {
      std::string line =
          fmt::format("<tr><td>{}</td><td style=\"text-align:left\">{}</td><td>{}{}</td>", esc(t.model),
                      esc(x.name), us_text(x.single_stream.latency_us),
                      x.single_stream.batch == 1 ? "" : fmt::format(" (batch {})", x.single_stream.batch));
      for (int64_t b : batches) {
        auto p = std::find_if(x.points.begin(), x.points.end(),
                              [b](const ThroughputPoint& q) { return q.batch == b; });
        if (p == x.points.end())
          line += "<td>–</td>";
        else
          line += p->batch == x.offline.batch ? "<td><b>" + per_s_text(p->inferences_per_s) + "</b></td>"
                                              : "<td>" + per_s_text(p->inferences_per_s) + "</td>";
      }
      line += fmt::format(
          "<td>{}</td><td>{}</td><td>{}</td></tr>\n", per_s_text(x.offline.inferences_per_s), x.offline.batch,
          x.offline_over_bound ? fmt::format("{:.2f}", *x.offline_over_bound) : std::string("–"));
      return line;
    };
    s += row(t.bound);
    for (const auto& x : t.runtimes) s += row(x);
  }
  s += "</table>\n";
  if (batches.size() < 2) {
    s += "<p class=\"note\" id=\"chart-throughput\">Every model was analyzed at one batch size: analyze with "
         "several (<code>--batch 1,8,32</code>) to see throughput against batch size.</p>\n";
    return s;
  }
  s += "<div id=\"chart-throughput\" style=\"display:flex;flex-wrap:wrap;gap:8px;margin-top:16px\">\n";
  for (const auto& t : view) s += throughput_panel(t, color_of);
  s += "</div>\n<p class=\"legend\" id=\"legend-throughput\"><span style=\"color:#000\">&#9644;</span> bound "
       "S (batch / S) ";
  for (const auto& n : names)
    s += fmt::format("<span style=\"color:{}\">&#9644;</span> {} ", color_of[n], esc(n));
  return s + "&#9675; best batch</p>\n";
}

std::string opt_us(const std::optional<double>& v) {
  return v ? us_text(*v) : "–";
}

// --- language-model view (llm.hpp) -------------------------------------------------------------

// The file stem of a scenario name: "llama_1b_decode[past_sequence_length=512]" -> "llama_1b_decode".
std::string scenario_stem(const std::string& name) {
  const auto at = name.find('[');
  return at == std::string::npos ? name : name.substr(0, at);
}

// One decoder's panel (one file stem, batch and new-token count): time per output token (µs, linear
// from 0) against the past tokens in the cache, the bound S solid black, the memory floor dotted
// grey, the fastest runtime (M) dashed red.
std::string decoder_panel(const std::string& title, std::vector<const ModelBounds*> steps) {
  std::sort(steps.begin(), steps.end(), [](const ModelBounds* a, const ModelBounds* b) {
    return a->decoder->past_tokens < b->decoder->past_tokens;
  });
  const double w = 360, h = 262, left = 58, right = w - 14, top = 42, bottom = h - 42;
  const double lo = static_cast<double>(steps.front()->decoder->past_tokens),
               hi_x = static_cast<double>(steps.back()->decoder->past_tokens);
  double hi = 0;
  for (const auto* b : steps) {
    hi = std::max({hi, b->S, b->M.value_or(0), b->decoder->memory_floor_us.value_or(0)});
  }
  auto x_at = [&](double t) {
    return hi_x <= lo ? (left + right) / 2 : left + 12 + (right - left - 24) * (t - lo) / (hi_x - lo);
  };
  const double step = nice_step(hi > 0 ? hi * 1.08 : 1, 4),
               ymax = step * std::ceil((hi > 0 ? hi * 1.08 : 1) / step);
  auto y_at = [&](double v) { return bottom - (bottom - top) * v / ymax; };
  std::string s = fmt::format(
      "<svg class=\"chart\" id=\"chart-tpot-{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" "
      "role=\"img\" aria-label=\"time per output token of {} against context length\">\n",
      esc(title), w, h, esc(title));
  s += fmt::format(
      "<text x=\"{}\" y=\"14\" font-size=\"12\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
      (left + right) / 2, esc(title));
  for (double v = 0; v <= ymax * 1.0001; v += step)
    s += fmt::format(
        "<line x1=\"{1}\" x2=\"{2}\" y1=\"{0:.1f}\" y2=\"{0:.1f}\" stroke=\"#e4e4e4\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" font-size=\"10\" text-anchor=\"end\">{5}</text>\n",
        y_at(v), left, right, left - 4, y_at(v) + 3, tick_label(v));
  for (const auto* b : steps)
    s += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e4e4e4\"/><text x=\"{0:.1f}\" "
        "y=\"{3}\" font-size=\"10\" text-anchor=\"middle\">{4}</text>\n",
        x_at(static_cast<double>(b->decoder->past_tokens)), top, bottom, bottom + 14,
        b->decoder->past_tokens);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">past tokens in the KV cache</text>"
      "<text x=\"13\" y=\"{}\" font-size=\"11\" transform=\"rotate(-90 13 {})\" "
      "text-anchor=\"middle\">µs per step</text>\n",
      (left + right) / 2, bottom + 32, (top + bottom) / 2, (top + bottom) / 2);
  struct Series {
    const char* name;
    const char* color;
    const char* dash;
    std::optional<double> (*value)(const ModelBounds&);
  };
  const Series series[] = {
      {"memory floor", "#888888", " stroke-dasharray=\"2,3\"",
       [](const ModelBounds& b) { return b.decoder->memory_floor_us; }},
      {"fastest runtime (M)", "#d62728", " stroke-dasharray=\"5,3\"",
       [](const ModelBounds& b) { return b.M; }},
      {"bound S", "#000000", "", [](const ModelBounds& b) { return std::optional<double>(b.S); }},
  };
  for (const auto& x : series) {
    std::string d;
    for (const auto* b : steps)
      if (auto v = x.value(*b))
        d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L",
                         x_at(static_cast<double>(b->decoder->past_tokens)), y_at(*v));
    if (d.empty()) continue;
    s += fmt::format(
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}><title>{}</title></path>\n", d,
        x.color, x.dash, x.name);
    for (const auto* b : steps)
      if (auto v = x.value(*b))
        s += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}, {} past tokens: "
            "{}</title></circle>\n",
            x_at(static_cast<double>(b->decoder->past_tokens)), y_at(*v), x.color, x.name,
            b->decoder->past_tokens, us_text(*v));
  }
  return s + "</svg>\n";
}

// The language-model section: a table of every decoder step (TTFT and TPOT bounds, tokens/s, KV
// cache, memory floor) and, per decoder with decode steps at two or more past lengths, the chart of
// time per output token against the context.
std::string decoder_section(const Report& r) {
  std::vector<const ModelBounds*> steps;
  for (const auto& m : r.models)
    if (m.bounds.decoder) steps.push_back(&m.bounds);
  if (steps.empty()) return "";
  std::string s =
      "<p class=\"note\">A decoder's prefill step bounds the <b>time to first token</b> (TTFT), its decode "
      "step the <b>time per output token</b> (TPOT) at each length of the KV cache; tokens/s = batch × new "
      "tokens / time. The memory floor is (weights + the cache read) / the memory bandwidth (a copy of 4× "
      "the "
      "largest cache): a decode step whose weights exceed the caches streams them at least once. It is a "
      "reference, not a bound: S times each layer with its weights warm in the caches.</p>\n<table "
      "id=\"decoders\"><tr><th>model</th><th>batch</th><th>phase</th>"
      "<th>new tokens</th><th>past tokens</th><th>S</th><th>tokens/s</th><th>M</th><th>M tokens/s</th>"
      "<th>KV cache (MiB)</th><th>weights (MiB)</th><th>memory floor</th><th>S / floor</th></tr>\n";
  for (const auto* b : steps) {
    const auto& d = *b->decoder;
    const double tokens = static_cast<double>(b->batch * d.new_tokens);
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td>"
        "<td>{:.1f}</td><td>{:.1f}</td><td>{}</td><td>{}</td></tr>\n",
        esc(b->model), b->batch,
        d.if_branch.empty() ? d.phase : fmt::format("{}<br><small>If: {}</small>", d.phase, esc(d.if_branch)),
        d.new_tokens, d.past_tokens, us_text(b->S), per_s_text(d.tokens_per_s), opt_us(b->M),
        b->M && *b->M > 0 ? per_s_text(tokens * 1e6 / *b->M) : std::string("–"),
        static_cast<double>(d.kv_cache_bytes) / (1 << 20), static_cast<double>(d.weight_bytes) / (1 << 20),
        opt_us(d.memory_floor_us),
        d.S_over_floor ? fmt::format("{:.2f}", *d.S_over_floor) : std::string("–"));
  }
  s += "</table>\n";
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<const ModelBounds*>> groups;
  for (const auto* b : steps)
    if (b->decoder->phase == "decode")
      groups[{scenario_stem(b->model), b->batch, b->decoder->new_tokens}].push_back(b);
  std::string panels;
  for (const auto& [key, group] : groups)
    if (group.size() >= 2)
      panels += decoder_panel(fmt::format("{} batch {}", std::get<0>(key), std::get<1>(key)), group);
  if (panels.empty())
    return s +
           "<p class=\"note\" id=\"chart-tpot\">No decoder was analyzed at two or more past lengths: sweep "
           "them (<code>--dim past_sequence_length=0,512,2048</code>) for the chart of time per output token "
           "against the context.</p>\n";
  return s + "<div id=\"chart-tpot\" style=\"display:flex;flex-wrap:wrap;gap:8px;margin-top:16px\">\n" +
         panels +
         "</div>\n<p class=\"legend\"><span style=\"color:#000\">&#9644;</span> bound S (TPOT) <span "
         "style=\"color:#d62728\">&#9644;</span> fastest runtime (M) <span "
         "style=\"color:#888\">&#9644;</span> "
         "memory floor</p>\n";
}

// The per-layer table's candidates cell: the cases timed for the layer's best, how many of them were
// raced out, and how close the runner-up came ("7 (2 raced out); runner-up 1.04×"); "–" unmeasured.
std::string candidates_text(const LayerCost& l) {
  if (l.candidates == 0) return "–";
  std::string s = fmt::format("{}", l.candidates);
  if (l.raced_out > 0) s += fmt::format(" ({} raced out)", l.raced_out);
  if (l.runner_up_us && l.us > 0 && l.epilogue_case.empty())
    s += fmt::format("; runner-up {:.2f}×", *l.runner_up_us / l.us);
  return s;
}

// The runtime against the bound per layer, per model (runtime_layers.hpp); "" when no profile was imported.
std::string runtime_layers_section(const Report& r) {
  std::string s;
  for (const auto& m : r.models)
    if (m.runtime_layers) s += runtime_layers_html(m.bounds, *m.runtime_layers);
  return s.empty() ? s : "<h2>Runtime vs bound per layer</h2>\n" + s;
}

// A bootstrap interval (confidence_intervals): "lo–hi".
std::string ci_text(const std::optional<Interval>& i) {
  return i ? us_text(i->lo) + "–" + us_text(i->hi) : "–";
}

// How the cases were measured, and a line when the sentinel saw the machine slow down.
std::string method_html(const MethodSummary& m) {
  if (m.cases == 0) return "";
  std::string s = fmt::format(
      "<p class=\"note\" id=\"method\">Measurement: {} passed cases, {} pass(es) each (a fresh buffer "
      "placement per pass), median spread {:.1f}% between a best case's passes; S takes each case's lowest "
      "repetition mean.</p>\n",
      m.cases,
      m.min_passes == m.max_passes ? fmt::format("{}", m.min_passes)
                                   : fmt::format("{}-{}", m.min_passes, m.max_passes),
      100 * m.median_spread);
  if (m.slowed_cases)
    s += fmt::format(
        "<p class=\"note\" id=\"sentinel\">Sentinel: the machine slowed down while {} case(s) were timed; "
        "{}.</p>\n",
        m.slowed_cases, esc(slowed_text(m)));
  if (m.noisy_cases)
    s += fmt::format(
        "<p class=\"note\">Noisy: {} case(s) whose lowest repetitions disagree by more than 5% (after a "
        "re-measurement, but for <code>run --quick</code>).</p>\n",
        m.noisy_cases);
  return s;
}

}  // namespace

std::string format_html(const Report& r) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Floorline "
      "report</title>\n<style>\n"
      "body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}\n"
      "table{border-collapse:collapse;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid "
      "#ddd;text-align:right}\n"
      "td:first-child,th:first-child{text-align:left}.legend{font-size:12px}.note{color:#555}\n"
      "h2{margin-top:32px;border-bottom:2px solid #4e79a7}summary{cursor:pointer;font-weight:bold}\n"
      "li{margin:4px 0}.saving{font-weight:bold}\n"
      // The per-layer runtime tables are wide (node names, layer lists, case names): they scroll
      // on their own, times stay on one line, and the name columns read left to right.
      ".runtime-layers table,.bound-violation table{display:block;overflow-x:auto;max-width:100%}\n"
      ".runtime-layers td,.runtime-layers th,.bound-violation td{white-space:nowrap}\n"
      ".runtime-layers td:nth-child(n+6){text-align:left}\n"
      ".runtime-layers td:nth-child(8),.runtime-layers td:nth-child(9),.bound-violation td:nth-child(3),"
      ".bound-violation td:last-child{text-align:left;white-space:normal;min-width:220px}\n"
      // A confidence interval is one value: "9.71 ms–10.81 ms" on one line.
      "#summary td{white-space:nowrap}\n</style></head><body>\n<h1>Floorline report</h1>\n";
  if (r.costs.system_id)
    s += fmt::format("<p>System {}: {}. Database <code>{}</code>.</p>\n", r.costs.system_id,
                     esc(r.costs.system), esc(r.database)) +
         method_html(r.costs.method);
  s += "<p class=\"note\">S: sequential lower bound (Σ fastest measured case per layer); S vendor: S over "
       "the vendor libraries' cases only (Floorline's own kernels left out); P: critical path; "
       "H: the libraries' default choices; F: with measured fusions; R: roofline from calibrated peaks; M: "
       "framework "
       "measurement; replay: the best cases executed back to back as the graph, on wired buffers (replay/S "
       "near 1: "
       "S is tight); replay paired: the replay at the host's state when S's cases were timed, its pass "
       "against its layers alone in the same moments (a loaded host's share taken out); E: the composed "
       "estimate, each layer's case timed with its weights from memory or the "
       "last-level cache as the graph leaves them (an estimate, never a bound; replay/E near 1: E predicts "
       "the "
       "graph). Times per inference of the whole batch.</p>\n";
  s += "<h2>Summary</h2>\n<table "
       "id=\"summary\"><tr><th>model</th><th>batch</th><th>S</th><th>S "
       "vendor</th><th>P</th><th>H</th><th>F</th>"
       "<th>R</th><th>M</th><th>replay</th><th>replay paired</th><th>E</th><th>S 95% CI</th><th>P 95% "
       "CI</th><th>F 95% "
       "CI</th><th>S/P</th><th>H/S</th><th>S/F</th><th>M/S</th><th>replay/S</th><th>paired/S</th><th>E/S</"
       "th><th>replay/E</th>"
       "<th>measured share</th></tr>\n";
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    auto over_s = [&](const std::optional<double>& x) {
      return x && b.S > 0 ? fmt::format("{:.2f}", *x / b.S) : std::string("–");
    };
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.2f}</"
        "td><td>{:.2f}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}%</td></tr>\n",
        esc(b.model), b.batch, us_text(b.S), us_text(b.S_vendor), us_text(b.P), us_text(b.H), us_text(b.F),
        opt_us(b.R), opt_us(b.M), opt_us(b.replay), opt_us(b.replay_paired), opt_us(b.E), ci_text(b.S_ci),
        ci_text(b.P_ci), ci_text(b.F_ci), b.P > 0 ? b.S / b.P : 0.0, b.S > 0 ? b.H / b.S : 0.0,
        b.F > 0 ? b.S / b.F : 0.0, over_s(b.M), over_s(b.replay), over_s(b.replay_paired), over_s(b.E),
        b.replay && b.E && *b.E > 0 ? fmt::format("{:.3f}", *b.replay / *b.E) : std::string("–"),
        100.0 * b.measured_fraction);
  }
  s += "</table>\n";
  for (const auto& m : r.models)
    if (!m.bounds.assumption.empty())
      s += fmt::format("<p class=\"note\">Assumption, {} (batch {}): {}</p>\n", esc(m.bounds.model),
                       m.bounds.batch, esc(m.bounds.assumption));
  s += validity_html(r);
  s += "<h2>Bounds per model</h2>\n" + bounds_chart(r);
  s += "<h2>Latency vs batch size</h2>\n" + batch_chart(r);
  s += "<h2>Throughput (MLPerf single stream and offline)</h2>\n" + throughput_section(r);
  if (const std::string llm = decoder_section(r); !llm.empty())
    s += "<h2>Language models (TTFT, TPOT, tokens/s)</h2>\n" + llm;
  s += "<h2>Time by layer kind (share of S)</h2>\n" + kind_chart(r);
  s += "<h2>Roofline</h2>\n" + roofline_chart(r);
  s += "<h2>Critical paths (length relative to S)</h2>\n" + critical_path_chart(r);
  s += "<h2>Findings</h2>\n";
  for (const auto& m : r.models) {
    const auto& b = m.bounds;
    s += fmt::format(
        "<details id=\"model-{}-b{}\"><summary>{} (batch {}): S {}, {} finding(s)</summary>\n<ul>\n",
        esc(b.model), b.batch, esc(b.model), b.batch, us_text(b.S), m.findings.size());
    if (b.roofline_layers)
      s += fmt::format(
          "<li class=\"note\">{} layer(s) with no passed case are costed by their roofline time.</li>\n",
          b.roofline_layers);
    if (b.untimed_layers)
      s += fmt::format("<li class=\"note\">{} layer(s) have no time at all: S is incomplete.</li>\n",
                       b.untimed_layers);
    for (const auto& f : m.findings) {
      s += fmt::format("<li><b>{}</b>: <span class=\"saving\">{} ({:.1f}%)</span>: {}<ul>\n", esc(f.advisor),
                       us_text(f.saving_us), f.saving_pct, esc(f.summary));
      for (const auto& it : f.items)
        s += fmt::format("<li>{}: {} — {}</li>\n", esc(it.label), us_text(it.saving_us), esc(it.detail));
      s += "</ul></li>\n";
    }
    if (b.E)
      s += fmt::format(
          "<p class=\"note\">E {} = S + {}: each layer's case with its weights {:.0f}% from memory and the "
          "rest from the last-level cache, {} of {} layers; the column E − t says where the difference "
          "comes from.</p>\n",
          us_text(*b.E), us_text(*b.E - b.S), 100 * b.E_memory_share, b.E_layers, b.layers.size());
    s += "</ul>\n<table><tr><th>layer</th><th>kind</th><th>time</th><th>% of "
         "S</th><th>E − t</th><th>default</th><th>roofline</th>"
         "<th>critical</th><th>best case</th><th>candidates</th></tr>\n";
    for (const auto& l : b.layers)
      s += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
          "td><td>{}</td><td>{}"
          "</td></tr>\n",
          esc(l.name), esc(l.kind),
          l.source == CostSource::kNone
              ? "–"
              : us_text(l.us) + (l.source == CostSource::kRoofline ? " (roofline)" : "") +
                    (l.epilogue_case.empty()
                         ? std::string()
                         : fmt::format(" (in the producer's epilogue; alone {})", us_text(l.own_us))),
          b.S > 0 ? 100.0 * l.us / b.S : 0.0,
          l.e_us || l.e_conversion_us > 0
              ? us_text(l.e_us.value_or(l.us) + l.e_conversion_us - l.us) +
                    (l.e_case.empty() ? std::string() : " (on " + esc(l.e_case) + " for its layouts)")
              : std::string("–"),
          opt_us(l.heuristic_us), opt_us(l.roofline_us), l.on_critical_path ? "yes" : "",
          esc(l.algorithm) + (r.costs.budget.size() > 1 && l.threads > 0
                                  ? fmt::format(" ({} thread{})", l.threads, l.threads == 1 ? "" : "s")
                                  : std::string()),
          candidates_text(l));
    s += "</table></details>\n";
  }
  s += runtime_layers_section(r);
  return s + "</body></html>\n";
}

}  // namespace floorline::analyzer
