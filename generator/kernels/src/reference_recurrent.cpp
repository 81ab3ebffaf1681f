// Reference LSTM, GRU and RNN: the equations of the ONNX operator documentation, one time step
// and one hidden unit at a time, double accumulation. Gate order as ONNX stores them: LSTM
// i, o, f, c (W [D, 4H, I], B [D, 8H] = Wb then Rb, P [D, 3H] = i, o, f); GRU z, r, h; RNN one.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "reference_internal.hpp"

namespace floorline::kernels::reference_detail {
namespace {

const HostTensor* operand(const Problem& p, const std::vector<HostTensor>& in, const std::string& role) {
  for (size_t k = 0; k < p.inputs.size() && k < in.size(); ++k)
    if (p.inputs[k].role == role) return in[k].data.empty() ? nullptr : &in[k];
  return nullptr;
}

double activate(const std::string& f, double x) {
  if (f == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (f == "Tanh") return std::tanh(x);
  if (f == "Relu") return std::max(0.0, x);
  return std::nan("");
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

Result<std::vector<HostTensor>> recurrent(const Problem& p, const std::vector<HostTensor>& in) {
  const bool lstm = p.kind == LayerKind::kLSTM, gru = p.kind == LayerKind::kGRU;
  const int64_t gates = lstm ? 4 : gru ? 3 : 1;
  const HostTensor *x = operand(p, in, "x"), *w = operand(p, in, "w"), *r = operand(p, in, "r");
  if (!x || !w || !r || x->shape.size() != 3 || r->shape.size() != 3)
    return make_error("{}: X, W and R must be given, 3-D", p.op);
  const HostTensor *b = operand(p, in, "b"), *lens = operand(p, in, "sequence_lens"),
                   *h0 = operand(p, in, "initial_h"), *c0 = operand(p, in, "initial_c"),
                   *peep = operand(p, in, "p");
  const bool batch_first = p.int_attr("layout") != 0;
  const int64_t T = batch_first ? x->shape[1] : x->shape[0], N = batch_first ? x->shape[0] : x->shape[1];
  const int64_t I = x->shape[2], D = r->shape[0], H = r->shape[2];
  const std::string direction = p.string_attr("direction");
  const double clip = p.float_attr("clip", 0.0);
  const bool input_forget = lstm && p.int_attr("input_forget") != 0;
  const bool lbr = gru && p.int_attr("linear_before_reset") != 0;
  std::vector<std::string> acts = split_names(p.string_attr("activations", ""));
  const std::vector<std::string> one = lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                       : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                             : std::vector<std::string>{"Tanh"};
  if (acts.empty())
    for (int64_t d = 0; d < D; ++d) acts.insert(acts.end(), one.begin(), one.end());
  if (acts.size() == one.size() && D == 2) {
    const std::vector<std::string> first = acts;  // (inserting a vector's own range moves it first)
    acts.insert(acts.end(), first.begin(), first.end());
  }
  if (acts.size() == 2 * one.size() && D == 1) acts.resize(one.size());  // a list for two directions
  if (static_cast<int64_t>(acts.size()) != D * static_cast<int64_t>(one.size()))
    return make_error("{}: {} activations for {} direction(s)", p.op, acts.size(), D);
  for (const auto& a : acts)
    if (std::isnan(activate(a, 0.5))) return make_error("{}: no reference for activation {}", p.op, a);

  // Output tensors, layout 0: Y [T, D, N, H], Y_h/Y_c [D, N, H]; layout 1: Y [N, T, D, H], [N, D, H].
  const Shape y_shape = batch_first ? Shape{N, T, D, H} : Shape{T, D, N, H};
  const Shape s_shape = batch_first ? Shape{N, D, H} : Shape{D, N, H};
  HostTensor Y{y_shape, std::vector<float>(static_cast<size_t>(elements(y_shape)), 0.f)};
  HostTensor Yh{s_shape, std::vector<float>(static_cast<size_t>(elements(s_shape)), 0.f)};
  HostTensor Yc = Yh;
  auto y_at = [&](int64_t t, int64_t d, int64_t n, int64_t h) -> float& {
    return Y.data[batch_first ? ((n * T + t) * D + d) * H + h : ((t * D + d) * N + n) * H + h];
  };
  auto s_at = [&](int64_t d, int64_t n, int64_t h) {
    return batch_first ? (n * D + d) * H + h : (d * N + n) * H + h;
  };
  auto x_at = [&](int64_t t, int64_t n, int64_t i) {
    return x->data[batch_first ? (n * T + t) * I + i : (t * N + n) * I + i];
  };
  auto clipped = [&](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };

  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
    const std::string* f = &acts[static_cast<size_t>(d) * one.size()];
    const float* Wd = w->data.data() + d * gates * H * I;
    const float* Rd = r->data.data() + d * gates * H * H;
    const float* Bd = b ? b->data.data() + d * 2 * gates * H : nullptr;
    const float* Pd = peep ? peep->data.data() + d * 3 * H : nullptr;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = lens ? std::clamp<int64_t>(static_cast<int64_t>(lens->data[n]), 0, T) : T;
      std::vector<double> h(H, 0.0), c(H, 0.0);
      for (int64_t j = 0; j < H; ++j) {
        if (h0) h[j] = h0->data[s_at(d, n, j)];
        if (c0) c[j] = c0->data[s_at(d, n, j)];
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        // Xt·Wᵀ + Wb and Ht-1·Rᵀ + Rb for every gate row.
        std::vector<double> xw(gates * H), hr(gates * H);
        for (int64_t g = 0; g < gates * H; ++g) {
          double a = Bd ? Bd[g] : 0.0, z = Bd ? Bd[gates * H + g] : 0.0;
          for (int64_t i = 0; i < I; ++i) a += static_cast<double>(Wd[g * I + i]) * x_at(t, n, i);
          for (int64_t k = 0; k < H; ++k) z += static_cast<double>(Rd[g * H + k]) * h[k];
          xw[g] = a;
          hr[g] = z;
        }
        std::vector<double> hn(H), cn(H);
        for (int64_t j = 0; j < H; ++j) {
          if (lstm) {
            const double pi = Pd ? Pd[j] : 0, po = Pd ? Pd[H + j] : 0, pf = Pd ? Pd[2 * H + j] : 0;
            const double it = activate(f[0], clipped(xw[j] + hr[j] + pi * c[j]));
            const double ft =
                input_forget ? 1.0 - it : activate(f[0], clipped(xw[2 * H + j] + hr[2 * H + j] + pf * c[j]));
            const double ct = activate(f[1], clipped(xw[3 * H + j] + hr[3 * H + j]));
            cn[j] = ft * c[j] + it * ct;
            const double ot = activate(f[0], clipped(xw[H + j] + hr[H + j] + po * cn[j]));
            hn[j] = ot * activate(f[2], cn[j]);
          } else if (gru) {
            const double zt = activate(f[0], clipped(xw[j] + hr[j]));
            const double rt = activate(f[0], clipped(xw[H + j] + hr[H + j]));
            double pre;
            if (lbr) {
              pre = xw[2 * H + j] + rt * hr[2 * H + j];
            } else {  // (rt ⊙ Ht-1)·Rhᵀ + Rbh
              double z = Bd ? Bd[gates * H + 2 * H + j] : 0.0;
              for (int64_t k = 0; k < H; ++k) {
                const double rk = activate(f[0], clipped(xw[H + k] + hr[H + k]));
                z += static_cast<double>(Rd[(2 * H + j) * H + k]) * rk * h[k];
              }
              pre = xw[2 * H + j] + z;
            }
            const double ht = activate(f[1], clipped(pre));
            hn[j] = (1.0 - zt) * ht + zt * h[j];
          } else {
            hn[j] = activate(f[0], clipped(xw[j] + hr[j]));
          }
        }
        h = hn;
        if (lstm) c = cn;
        for (int64_t j = 0; j < H; ++j) y_at(t, d, n, j) = static_cast<float>(h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        Yh.data[s_at(d, n, j)] = static_cast<float>(h[j]);
        Yc.data[s_at(d, n, j)] = static_cast<float>(c[j]);
      }
    }
  }
  std::vector<HostTensor> out;
  for (const auto& o : p.outputs) {
    if (o.role == "y" || o.role == "y0")
      out.push_back(Y);
    else if (o.role == "y1")
      out.push_back(Yh);
    else if (o.role == "y2")
      out.push_back(Yc);
    else
      return make_error("{}: unknown output role {}", p.op, o.role);
  }
  return out;
}

}  // namespace floorline::kernels::reference_detail
