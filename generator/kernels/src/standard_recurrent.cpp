// The recurrent skeleton both CPU backends share (floorline/kernels/standard_recurrent.hpp): shapes
// and attributes, the bias sum, the gate math and the outputs; the two matrix products are the
// backend's (project(), multiply()).
#include "floorline/kernels/standard_recurrent.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "floorline/kernels/dispatch.hpp"

namespace floorline::kernels {
namespace {

// tanh(x) as x·p(x²)/q(x²) on x clamped to ±7.905 (where the float result is ±1): Eigen's
// generic_fast_tanh_float (Eigen/src/Core/MathFunctionsImpl.h), the rational form ONNX Runtime's MLAS
// uses too; 4.2e-7 from std::tanh at most. A branch-free loop the compiler vectorizes.
[[gnu::always_inline]] inline float rational_tanh(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  x = x < -kClamp ? -kClamp : x;
  x = x > kClamp ? kClamp : x;
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}

// The activation in place over n values; σ(x) = (1 + tanh(x/2)) / 2 (2.4e-7 from 1/(1+e^-x) at most).
// Built for AVX-512, AVX2 and the baseline, one chosen under the ISA cap (floorline/kernels/
// dispatch.hpp): the gate math of a step is then a few vector passes, as in ONNX Runtime's MLAS.
[[gnu::always_inline]] inline void activate_body(GateActivation a, float* v, int64_t n) {
  switch (a) {
    case GateActivation::kSigmoid:
      for (int64_t j = 0; j < n; ++j) v[j] = 0.5f + 0.5f * rational_tanh(0.5f * v[j]);
      return;
    case GateActivation::kTanh:
      for (int64_t j = 0; j < n; ++j) v[j] = rational_tanh(v[j]);
      return;
    case GateActivation::kRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > 0.f ? v[j] : 0.f;
      return;
  }
}
void activate(GateActivation a, float* v, int64_t n) {
  ByTarget<activate_body>::call(a, v, n);
}

void clip(float* v, int64_t n, float c) {
  if (c <= 0) return;
  for (int64_t j = 0; j < n; ++j) v[j] = v[j] < -c ? -c : (v[j] > c ? c : v[j]);
}

}  // namespace

GateActivation StandardRecurrent::act_of(const std::string& name) {
  if (name == "Sigmoid") return GateActivation::kSigmoid;
  if (name == "Tanh") return GateActivation::kTanh;
  if (name == "Relu") return GateActivation::kRelu;
  unsupported(fmt::format("activation {} (mapped: Sigmoid, Tanh, Relu)", name));
}

StandardRecurrent::StandardRecurrent(Problem p) : PlainKernel(std::move(p)) {
  const LayerKind kind = p_.kind;
  lstm_ = kind == LayerKind::kLSTM;
  gru_ = kind == LayerKind::kGRU;
  if (!lstm_ && !gru_ && kind != LayerKind::kRNN)
    unsupported(fmt::format("{} is not a recurrent layer", p_.op));
  G_ = lstm_ ? 4 : gru_ ? 3 : 1;
  xi_ = p_.input_index("x");
  wi_ = p_.input_index("w");
  ri_ = p_.input_index("r");
  bi_ = p_.input_index("b");
  pi_ = lstm_ ? p_.input_index("p") : -1;
  h0_ = p_.input_index("initial_h");
  c0_ = lstm_ ? p_.input_index("initial_c") : -1;
  if (xi_ < 0 || wi_ < 0 || ri_ < 0) unsupported(fmt::format("{} needs X, W and R", p_.op));
  if (p_.input_index("sequence_lens") >= 0)
    unsupported("sequence_lens (per-sequence lengths) is not mapped: every sequence runs T steps");
  const Shape &xs = p_.inputs[xi_].shape, &rs = p_.inputs[ri_].shape;
  if (xs.size() != 3 || rs.size() != 3) unsupported("X and R must be 3-D");
  batch_first_ = p_.int_attr("layout") != 0;
  T_ = batch_first_ ? xs[1] : xs[0];
  N_ = batch_first_ ? xs[0] : xs[1];
  I_ = xs[2];
  D_ = rs[0];
  H_ = rs[2];
  const std::string direction = p_.string_attr("direction");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    unsupported("direction " + direction);
  if ((direction == "bidirectional") != (D_ == 2)) unsupported("direction and R's first dim disagree");
  reverse_ = direction == "reverse";
  clip_ = static_cast<float>(p_.float_attr("clip", 0.0));
  input_forget_ = lstm_ && p_.int_attr("input_forget") != 0;
  lbr_ = gru_ && p_.int_attr("linear_before_reset") != 0;
  // Activations, per direction (a list for one direction serves both).
  std::vector<std::string> names;
  {
    std::stringstream ss(p_.string_attr("activations", ""));
    std::string item;
    while (std::getline(ss, item, ',')) names.push_back(item);
  }
  const std::vector<std::string> one = lstm_  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                       : gru_ ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                              : std::vector<std::string>{"Tanh"};
  if (names.empty()) names = one;
  if (names.size() == one.size() && D_ == 2) {
    const std::vector<std::string> first = names;  // (inserting a vector's own range moves it first)
    names.insert(names.end(), first.begin(), first.end());
  }
  if (names.size() == 2 * one.size() && D_ == 1) names.resize(one.size());
  if (static_cast<int64_t>(names.size()) != D_ * static_cast<int64_t>(one.size()))
    unsupported(fmt::format("{} activations for {} direction(s)", names.size(), D_));
  for (const auto& n : names) acts_.push_back(act_of(n));

  // Weights as PyTorch initializes them, U(-1/√H, 1/√H): gates neither saturated nor flat, so
  // verify() compares values that depend on every term.
  const float scale = 1.f / std::sqrt(static_cast<float>(H_));
  for (int k : {wi_, ri_, bi_, pi_})
    if (k >= 0)
      for (int64_t e = 0; e < in_[k].elements; ++e) in_[k].data[e] *= scale;
  // Bias per direction and gate, summed once: Wb + Rb (GRU linear_before_reset: Wb alone for the
  // h gate, its Rb in rbh_).
  const int64_t GH = G_ * H_;
  bias_ = PlainBuffer(D_ * GH);
  rbh_ = PlainBuffer(lbr_ ? D_ * H_ : 0);
  if (bi_ >= 0) {
    const float* b = in_[bi_].data;
    for (int64_t d = 0; d < D_; ++d)
      for (int64_t g = 0; g < GH; ++g) {
        const float wb = b[d * 2 * GH + g], rb = b[d * 2 * GH + GH + g];
        const bool apart = lbr_ && g >= 2 * H_;
        bias_.data[d * GH + g] = apart ? wb : wb + rb;
        if (apart) rbh_.data[d * H_ + g - 2 * H_] = rb;
      }
  }
  xw_ = PlainBuffer(T_ * N_ * D_ * GH);
  hr_ = PlainBuffer(D_ * N_ * GH);
  rh_ = PlainBuffer(gru_ && !lbr_ ? D_ * N_ * H_ : 0);
  h_ = PlainBuffer(D_ * N_ * H_);
  c_ = PlainBuffer(lstm_ ? D_ * N_ * H_ : 0);
  workspace_ = (xw_.elements + hr_.elements + rh_.elements + h_.elements + c_.elements) *
               static_cast<int64_t>(sizeof(float));
  for (size_t k = 0; k < p_.outputs.size(); ++k) {
    const std::string& role = p_.outputs[k].role;
    (role == "y" || role == "y0" ? y_
     : role == "y1"              ? yh_
     : role == "y2"              ? yc_
                                 : other_) = static_cast<int>(k);
  }
  if (other_ >= 0) unsupported(fmt::format("output role {}", p_.outputs[other_].role));
  // The products of a step, in run()'s order.
  if (!gru_) {
    products_.push_back({0, GH});
  } else {
    products_.push_back({0, lbr_ ? GH : 2 * H_});
    if (!lbr_) products_.push_back({2 * H_, H_});
  }
}

std::string StandardRecurrent::describe(const std::string& projection, const std::string& product) const {
  return fmt::format("{} X·Wᵀ {}x{}x{} once, then {} steps × {} of {} H·Rᵀ {}x{}x{} and the gates",
                     projection, T_ * N_, D_ * G_ * H_, I_, T_, D_, product, N_, G_ * H_, H_);
}

// The directions run in lockstep (forward at t, backward at T-1-t), so that a step's recurrent
// products of both directions are one call.
void StandardRecurrent::run() {
  const int64_t GH = G_ * H_;
  project(in_[xi_].data, xw_.data);
  for (int64_t d = 0; d < D_; ++d) {
    float* h = h_.data + d * N_ * H_;
    float* c = lstm_ ? c_.data + d * N_ * H_ : nullptr;
    for (int64_t n = 0; n < N_; ++n) {
      if (h0_ >= 0)
        std::memcpy(h + n * H_, in_[h0_].data + state_offset(d, n), sizeof(float) * static_cast<size_t>(H_));
      else
        std::fill_n(h + n * H_, H_, 0.f);
      if (!lstm_) continue;
      if (c0_ >= 0)
        std::memcpy(c + n * H_, in_[c0_].data + state_offset(d, n), sizeof(float) * static_cast<size_t>(H_));
      else
        std::fill_n(c + n * H_, H_, 0.f);
    }
  }
  int64_t t[2] = {0, 0};  // this step's time index per direction
  for (int64_t step = 0; step < T_; ++step) {
    for (int64_t d = 0; d < D_; ++d) t[d] = reverse_ || d == 1 ? T_ - 1 - step : step;
    if (gru_) {
      gru_step(t);
    } else {
      multiply(0, h_.data, hr_.data);
      for (int64_t d = 0; d < D_; ++d)
        for (int64_t n = 0; n < N_; ++n) {
          float* g = gates(t[d], d) + n * ldg();
          const float* hr = hr_.data + (d * N_ + n) * GH;
          float* h = h_.data + (d * N_ + n) * H_;
          if (lstm_) {
            lstm_cell(d, g, hr, h, c_.data + (d * N_ + n) * H_);
            continue;
          }
          const float* b = bias_.data + d * GH;
          for (int64_t j = 0; j < H_; ++j) g[j] += hr[j] + b[j];
          clip(g, H_, clip_);
          activate(acts_[d], g, H_);
          std::memcpy(h, g, sizeof(float) * static_cast<size_t>(H_));
        }
    }
    if (y_ >= 0)
      for (int64_t d = 0; d < D_; ++d)
        for (int64_t n = 0; n < N_; ++n)
          std::memcpy(out_[y_].data + y_offset(t[d], d, n), h_.data + (d * N_ + n) * H_,
                      sizeof(float) * static_cast<size_t>(H_));
  }
  for (int64_t d = 0; d < D_; ++d)
    for (int64_t n = 0; n < N_; ++n) {
      if (yh_ >= 0)
        std::memcpy(out_[yh_].data + state_offset(d, n), h_.data + (d * N_ + n) * H_,
                    sizeof(float) * static_cast<size_t>(H_));
      if (yc_ >= 0 && lstm_)
        std::memcpy(out_[yc_].data + state_offset(d, n), c_.data + (d * N_ + n) * H_,
                    sizeof(float) * static_cast<size_t>(H_));
    }
}

// One LSTM cell on one batch row: g holds X·Wᵀ and hr H·Rᵀ of the gates i, o, f, c; h and c are
// updated in place (ONNX: Ct = ft ⊙ Ct-1 + it ⊙ ct, Ht = ot ⊙ h(Ct), with peepholes P i, o, f).
void StandardRecurrent::lstm_cell(int64_t d, float* g, const float* hr, float* h, float* c) const {
  const int64_t H = H_;
  float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
  const float* b = bias_.data + d * 4 * H;
  const GateActivation f = acts_[d * 3], gact = acts_[d * 3 + 1], hact = acts_[d * 3 + 2];
  const float* P = pi_ >= 0 ? in_[pi_].data + d * 3 * H : nullptr;
  for (int64_t j = 0; j < 4 * H; ++j) g[j] += hr[j] + b[j];
  if (P)
    for (int64_t j = 0; j < H; ++j) {
      gi[j] += P[j] * c[j];
      gf[j] += P[2 * H + j] * c[j];
    }
  clip(gi, H, clip_);
  clip(gc, H, clip_);
  activate(f, gi, H);
  if (input_forget_) {
    for (int64_t j = 0; j < H; ++j) gf[j] = 1.f - gi[j];
  } else {
    clip(gf, H, clip_);
    activate(f, gf, H);
  }
  activate(gact, gc, H);
  for (int64_t j = 0; j < H; ++j) c[j] = gf[j] * c[j] + gi[j] * gc[j];
  if (P)
    for (int64_t j = 0; j < H; ++j) go[j] += P[H + j] * c[j];
  clip(go, H, clip_);
  activate(f, go, H);
  // h(Ct) into h, then ⊙ ot.
  std::memcpy(h, c, sizeof(float) * static_cast<size_t>(H));
  activate(hact, h, H);
  for (int64_t j = 0; j < H; ++j) h[j] *= go[j];
}

// One GRU step over the batch and the directions (gates z, r, h; direction d at time t[d]).
// linear_before_reset: ht = g(Xh + Wbh + rt ⊙ (H·Rhᵀ + Rbh)), one recurrent product of the three
// gates; otherwise ht = g(Xh + (rt ⊙ H)·Rhᵀ + Wbh + Rbh), the product of z and r first, then that of
// h on rt ⊙ H.
void StandardRecurrent::gru_step(const int64_t* t) {
  const int64_t H = H_, GH = 3 * H;
  multiply(0, h_.data, hr_.data);
  for (int64_t d = 0; d < D_; ++d)
    for (int64_t n = 0; n < N_; ++n) {
      float* g = gates(t[d], d) + n * ldg();
      const float* hr = hr_.data + (d * N_ + n) * GH;
      const float* b = bias_.data + d * GH;
      for (int64_t j = 0; j < 2 * H; ++j) g[j] += hr[j] + b[j];
      clip(g, 2 * H, clip_);
      activate(acts_[d * 2], g, 2 * H);  // zt, rt
      if (!lbr_)
        for (int64_t j = 0; j < H; ++j)
          rh_.data[(d * N_ + n) * H + j] = g[H + j] * h_.data[(d * N_ + n) * H + j];
    }
  if (!lbr_) multiply(1, rh_.data, hr_.data + 2 * H);
  for (int64_t d = 0; d < D_; ++d)
    for (int64_t n = 0; n < N_; ++n) {
      float* g = gates(t[d], d) + n * ldg();
      const float *z = g, *r = g + H, *hr = hr_.data + (d * N_ + n) * GH + 2 * H;
      const float* b = bias_.data + d * GH;
      float* gh = g + 2 * H;
      if (lbr_) {
        const float* rb = rbh_.data + d * H;
        for (int64_t j = 0; j < H; ++j) gh[j] += b[2 * H + j] + r[j] * (hr[j] + rb[j]);
      } else {
        for (int64_t j = 0; j < H; ++j) gh[j] += b[2 * H + j] + hr[j];
      }
      clip(gh, H, clip_);
      activate(acts_[d * 2 + 1], gh, H);
      float* hn = h_.data + (d * N_ + n) * H;
      for (int64_t j = 0; j < H; ++j) hn[j] = (1.f - z[j]) * gh[j] + z[j] * hn[j];
    }
}

}  // namespace floorline::kernels
