// floorline/kernels/standard_recurrent.hpp — LSTM, GRU and RNN in the formulation CPU runtimes use
// (ONNX Runtime's DeepCPU LSTM and GRU, cuDNN's CUDNN_RNN_ALGO_STANDARD): the input projection X·Wᵀ
// of every time step (and both directions) as one matrix product, then per time step the recurrent
// product H(t-1)·Rᵀ and the gate math. The skeleton (shapes and attributes, the gate math, the
// outputs) is shared; a backend supplies the two products (OpenBLAS: cblas_sgemm and cblas_sgemv;
// oneDNN: matmul primitives on weights packed once).
//
// Equations, gate order and storage are the ONNX operator documentation's (LSTM i, o, f, c; GRU z,
// r, h), as in the reference (generator/kernels/src/reference_recurrent.cpp). Done once when the
// case is built, outside the timed call (frameworks do it when they load the weights): the bias sum
// Wb + Rb per gate (GRU with linear_before_reset keeps Rb of the h gate apart, it is scaled by r).
// sequence_lens is not mapped (per-sequence lengths break the one recurrent product per step over
// the whole batch). Throws KernelError (unsupported) for what it does not map.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "floorline/kernels/plain_kernel.hpp"

namespace floorline::kernels {

// The kinds the skeleton runs: LSTM, GRU and RNN.
inline bool standard_recurrent_kind(LayerKind k) {
  return k == LayerKind::kLSTM || k == LayerKind::kGRU || k == LayerKind::kRNN;
}

// The gate activations mapped (ONNX names Sigmoid, Tanh, Relu).
enum class GateActivation { kSigmoid, kTanh, kRelu };

class StandardRecurrent : public PlainKernel {
 public:
  explicit StandardRecurrent(Problem p);
  void run() final;

  // One recurrent product of a step, for every direction at once (the directions run in lockstep):
  // y[d] (N rows, G·H apart) = h[d] [N, H] · R_d[row0, row0 + rows)ᵀ for d < D, h being [D, N, H] and
  // y [D, N, G·H] (from its first column), R_d [G·H, H] row-major direction d's recurrent weights.
  struct Product {
    int64_t row0 = 0, rows = 0;
  };

 protected:
  // The products run() asks multiply() for, by index: LSTM and RNN one (all gates); GRU one of z and
  // r (all three gates with linear_before_reset), and without linear_before_reset one of the h gate
  // on rt ⊙ H.
  const std::vector<Product>& products() const { return products_; }
  // X·Wᵀ of every (t, n) row and both directions: xw [T·N, D·G·H] = x [T·N, I] · W [D·G·H, I]ᵀ.
  virtual void project(const float* x, float* xw) = 0;
  // products()[k] on this step's h, into y (written, not accumulated).
  virtual void multiply(size_t k, const float* h, float* y) = 0;

  // Direction d's recurrent weights R_d [G·H, H] (constant: a backend may pack them once).
  const float* recurrent_weights(int64_t d) const { return in_[ri_].data + d * G_ * H_ * H_; }
  const float* input_weights() const { return in_[wi_].data; }
  // "<projection> X·Wᵀ TNxDGHxI once, then T steps × D of <product> H·Rᵀ NxGHxH and the gates".
  std::string describe(const std::string& projection, const std::string& product) const;

  int64_t T_ = 0, N_ = 0, I_ = 0, D_ = 1, H_ = 0, G_ = 1;

 private:
  bool is_port(size_t k) const override {
    const int i = static_cast<int>(k);
    return i == xi_ || i == h0_ || i == c0_;
  }
  // Row of (t, n) in X (and xw_): layout 0 [T, N, ·], layout 1 [N, T, ·].
  int64_t xw_row(int64_t t, int64_t n) const { return batch_first_ ? n * T_ + t : t * N_ + n; }
  // Offset of (d, n) in initial_h/initial_c/Y_h/Y_c: layout 0 [D, N, H], layout 1 [N, D, H].
  int64_t state_offset(int64_t d, int64_t n) const { return (batch_first_ ? n * D_ + d : d * N_ + n) * H_; }
  // Offset of (t, d, n) in Y: layout 0 [T, D, N, H], layout 1 [N, T, D, H].
  int64_t y_offset(int64_t t, int64_t d, int64_t n) const {
    return (batch_first_ ? (n * T_ + t) * D_ + d : (t * D_ + d) * N_ + n) * H_;
  }
  static GateActivation act_of(const std::string& name);
  // The gates of (t, n = 0) of direction d inside xw_ (batch rows ldg() apart).
  float* gates(int64_t t, int64_t d) const { return xw_.data + xw_row(t, 0) * D_ * G_ * H_ + d * G_ * H_; }
  int64_t ldg() const { return (batch_first_ ? T_ : 1) * D_ * G_ * H_; }
  void lstm_cell(int64_t d, float* g, const float* hr, float* h, float* c) const;
  void gru_step(const int64_t* t);

  bool lstm_ = false, gru_ = false, batch_first_ = false, reverse_ = false, input_forget_ = false,
       lbr_ = false;
  int xi_ = -1, wi_ = -1, ri_ = -1, bi_ = -1, pi_ = -1, h0_ = -1, c0_ = -1;
  int y_ = -1, yh_ = -1, yc_ = -1, other_ = -1;
  float clip_ = 0;
  std::vector<GateActivation> acts_;
  std::vector<Product> products_;
  PlainBuffer bias_, rbh_, xw_, hr_, rh_, h_, c_;
};

}  // namespace floorline::kernels
