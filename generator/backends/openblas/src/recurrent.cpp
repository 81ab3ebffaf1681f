// LSTM, GRU and RNN over OpenBLAS: the standard formulation (floorline/kernels/standard_recurrent.hpp,
// the skeleton and gate math both CPU backends share) with its two products as OpenBLAS calls: the
// input projection X·Wᵀ of every time step (and both directions) as one cblas_sgemm, the recurrent
// product H(t-1)·Rᵀ of a step as cblas_sgemm with M = the batch (cblas_sgemv at batch 1).
#include "floorline/kernels/standard_recurrent.hpp"
#include "internal.hpp"

namespace floorline::kernels::openblas_detail {
namespace {

class RecurrentKernel final : public StandardRecurrent {
 public:
  explicit RecurrentKernel(Problem p) : StandardRecurrent(std::move(p)) {
    impl_ = describe("cblas_sgemm", N_ == 1 ? "cblas_sgemv" : "cblas_sgemm");
  }

 private:
  void project(const float* x, float* xw) override {
    const int64_t DGH = D_ * G_ * H_;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(T_ * N_), blas_int(DGH), blas_int(I_), 1.f,
                x, blas_int(I_), input_weights(), blas_int(I_), 0.f, xw, blas_int(DGH));
  }

  // At batch 1, cblas_sgemv: OpenBLAS 0.3.21's SGEMM with M = 1 took 2.3 ms for lstm_lm's 35 steps
  // of 1×1024×256 where SGEMV took 0.30-0.55 ms (AMD EPYC with AVX-512, 2026-11-23; an earlier host
  // had SGEMM 5-8% ahead, so the gap is the host's kernels').
  void multiply(size_t k, const float* h, float* y) override {
    const Product& pr = products()[k];
    const int64_t GH = G_ * H_;
    for (int64_t d = 0; d < D_; ++d) {
      const float* R = recurrent_weights(d) + pr.row0 * H_;
      const float* hd = h + d * N_ * H_;
      float* yd = y + d * N_ * GH;
      if (N_ == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, blas_int(pr.rows), blas_int(H_), 1.f, R, blas_int(H_), hd, 1,
                    0.f, yd, 1);
        continue;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(N_), blas_int(pr.rows), blas_int(H_), 1.f,
                  hd, blas_int(H_), R, blas_int(H_), 0.f, yd, blas_int(GH));
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_recurrent_kernel(const Problem& p) {
  return std::make_unique<RecurrentKernel>(p);
}

}  // namespace floorline::kernels::openblas_detail
