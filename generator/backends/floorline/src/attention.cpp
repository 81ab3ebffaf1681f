// Scaled dot-product attention in one pass (internal.hpp: attention_desc, make_attention_kernel):
//
//   O = softmax(scale · Q·Kᵀ + Σ biases) · V,   per leading index (batch × heads)
//
// the chain mp::fusion_matches finds (MatMul → [Mul/Div by a scalar] → [Add]... → Softmax along
// the last axis → MatMul), as ONNX Runtime's Attention/MultiHeadAttention and FlashAttention (Dao
// et al., NeurIPS 2022) compute it: the scores of a block of queries stay in cache between the
// two products and are never written to memory. Per batch·head:
//   - Kᵀ and V read as panels of kGemmNr columns by sgemm_packed's micro-kernel (gemm.cpp): in place
//     where they are whole and K is stored [D, Sk]; packed where K is transposed ([Sk, D]) and for
//     a last, partial panel;
//   - per block of about kRows queries: scores = Q_blk · Kᵀ by sgemm_packed's micro-kernel; per row
//     the scale, the biases and the softmax in one function (AVX2, masked tails); then
//     O_blk = P · V, the micro-kernel again.
//   - Fewer than kPackMin queries (a decode step: one token, or a group's few stacked queries):
//     nothing is packed; each score is a dot product of the query with a key row (an axpy of K's
//     rows where K is [D, Sk]), and O an axpy of V's rows. Packing would read K and V twice.
// The softmax takes the whole row of Sk scores at once (no online rescaling): a row of 8,192 keys is
// 32 KiB, and a block's scores (about kRows rows) stay in L2.
// Threads: the (batch·head, query block) items split in contiguous ranges (static), each thread
// packing what the batch·heads of its range need into its own scratch.
#include <cmath>
#include <cstring>

#include "floorline/kernels/dispatch.hpp"
#include "internal.hpp"

namespace floorline::kernels::floorline_detail {
namespace {

constexpr int64_t kRows = 8 * kGemmMr;  // queries per block: the micro-kernel's rows, 8 times
constexpr int64_t kPackMin = 8;         // fewer queries per batch·head: no packing
constexpr size_t kMaxBiases = 8;        // biases per chain at most

// One bias row of a query: `along` the keys (b[0..n)) or one value broadcast (*b).
struct BiasRow {
  const float* b = nullptr;
  bool along = true;
};

// scale · y[j..j+8) + Σ biases' lanes j..j+8.
[[gnu::target("avx2,fma")]] inline __m256 biased(const float* y, int64_t j, float scale,
                                                 const BiasRow* biases, size_t nb) {
  __m256 v = _mm256_loadu_ps(y + j);
  if (scale != 1.f) v = _mm256_mul_ps(v, _mm256_set1_ps(scale));
  for (size_t k = 0; k < nb; ++k)
    v = _mm256_add_ps(v, biases[k].along ? _mm256_loadu_ps(biases[k].b + j) : _mm256_set1_ps(*biases[k].b));
  return v;
}

// y[0..n) = softmax(scale · y + Σ biases), in place, in three passes over the row (in L1): the scale,
// the biases and the maximum; e^(x − max) and its sum; the division by the sum. The row has room for
// n rounded up to 8 (the scores' rows are kGemmNr-padded): the tail's scale and biases are added
// element by element (a bias row ends at n), its padding set to −∞, and from there on whole
// vectors run over the padding too (e^−87 each there, 1.6e-38, against a sum of at least 1). No
// masked loads or stores (slow on AMD's cores), no element read twice.
[[gnu::target("avx2,fma")]] void softmax_row(float* y, int64_t n, float scale, const BiasRow* biases,
                                             size_t nb) {
  const int64_t whole = n - n % 8, padded = (n + 7) / 8 * 8;
  for (int64_t j = whole; j < n; ++j) {
    float v = y[j] * scale;
    for (size_t k = 0; k < nb; ++k) v += biases[k].along ? biases[k].b[j] : *biases[k].b;
    y[j] = v;
  }
  for (int64_t j = n; j < padded; ++j) y[j] = -INFINITY;
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t j = 0; j < whole; j += 8) {
    const __m256 v = biased(y, j, scale, biases, nb);
    _mm256_storeu_ps(y + j, v);
    mx = _mm256_max_ps(v, mx);
  }
  if (whole < padded) mx = _mm256_max_ps(_mm256_loadu_ps(y + whole), mx);
  const __m256 vm = _mm256_set1_ps(hmax8(mx));
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= padded; j += 16) {  // two polynomials' chains overlap
    const __m256 e0 = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(y + j)));
    const __m256 e1 = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(y + j + 8)));
    _mm256_storeu_ps(y + j, e0);
    _mm256_storeu_ps(y + j + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  if (j < padded) {
    const __m256 e = exp_neg8(_mm256_sub_ps(vm, _mm256_loadu_ps(y + j)));
    _mm256_storeu_ps(y + j, e);
    s0 = _mm256_add_ps(s0, e);
  }
  const __m256 inv = _mm256_set1_ps(1.f / hsum8(_mm256_add_ps(s0, s1)));
  for (j = 0; j < padded; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
}

[[gnu::target("avx2,fma")]] float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), acc1);
  }
  for (; j + 8 <= n; j += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc0);
  float s = hsum8(_mm256_add_ps(acc0, acc1));
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// y[0..n) += c · x[0..n)
[[gnu::target("avx2,fma")]] void axpy(float* y, float c, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] += c * x[j];
}

// Whether a bias of shape `b` broadcasts to scores of shape `s` (NumPy rules, rank at most s's).
bool broadcasts(const Shape& b, const Shape& s) {
  if (b.size() > s.size()) return false;
  for (size_t i = 0; i < b.size(); ++i)
    if (b[i] != 1 && b[i] != s[s.size() - b.size() + i]) return false;
  return true;
}

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(Problem p, uint64_t seed) : p_(std::move(p)), a_(attention_desc(p_)), seed_(seed) {
    q_ = Placed<float>(elements(a_.q));
    k_ = Placed<float>(elements(a_.k));
    v_ = Placed<float>(elements(a_.v));
    o_ = Placed<float>(elements(a_.o));
    for (const auto& b : a_.biases) bias_.emplace_back(elements(b));
    // Q and K on [-1, 1): the scores of a head size D spread by about √D / 3, over the softmax's
    // real range once scaled by 1/√D; the biases on [-1, 1) as a relative position table's.
    fill_uniform(q_.data(), elements(a_.q), seed_);
    fill_uniform(k_.data(), elements(a_.k), seed_ + 1);
    fill_uniform(v_.data(), elements(a_.v), seed_ + 2);
    for (size_t b = 0; b < bias_.size(); ++b) fill_uniform(bias_[b].data(), bias_[b].size(), seed_ + 3 + b);
    // Each bias' offset per batch·head and its strides along the queries and the keys.
    Shape scores = a_.q;
    scores.back() = a_.sk;
    const size_t r = scores.size();
    for (const auto& b : a_.biases) {
      Shape full(r, 1);
      std::copy(b.begin(), b.end(), full.end() - static_cast<std::ptrdiff_t>(b.size()));
      const Shape st = strides_of(full);
      BiasIndex ix;
      ix.row = full[r - 2] == 1 ? 0 : st[r - 2];
      ix.along = full[r - 1] != 1;
      Shape idx(r - 2, 0);
      for (int64_t h = 0; h < a_.bh; ++h) {
        int64_t off = 0;
        for (size_t k = 0; k + 2 < r; ++k) off += (full[k] == 1 ? 0 : idx[k]) * st[k];
        ix.head.push_back(off);
        for (int k = static_cast<int>(r) - 3; k >= 0; --k) {
          if (++idx[static_cast<size_t>(k)] < scores[static_cast<size_t>(k)]) break;
          idx[static_cast<size_t>(k)] = 0;
        }
      }
      index_.push_back(std::move(ix));
    }
    packed_ = a_.sq >= kPackMin;
    k_panels_ = (a_.sk + kGemmNr - 1) / kGemmNr;
    v_panels_ = (a_.dv + kGemmNr - 1) / kGemmNr;
    ld_ = k_panels_ * kGemmNr;
    // Blocks of about kRows queries, as many as the rounded quotient (at least one), of equal size
    // in whole micro-kernel rows: Swin's 49 queries are one block, not 48 and a block of 1.
    blocks_ = packed_ ? std::max<int64_t>(1, (a_.sq + kRows / 2) / kRows) : a_.sq;
    rows_ = packed_ ? (a_.sq + blocks_ - 1) / blocks_ : 1;
    rows_ = (rows_ + kGemmMr - 1) / kGemmMr * kGemmMr;
    blocks_ = packed_ ? (a_.sq + rows_ - 1) / rows_ : a_.sq;
    const int threads = std::max(1, omp_get_max_threads());
    const int64_t per_thread =
        packed_ ? k_panels_ * a_.d * kGemmNr + v_panels_ * a_.sk * kGemmNr + rows_ * ld_ : ld_;
    scratch_ = Placed<float>(per_thread * threads);
    per_thread_ = per_thread;
  }

  void run() override {
    const int64_t items = a_.bh * blocks_;
    const int threads = std::max(1, omp_get_max_threads());
    const int used = static_cast<int>(std::min<int64_t>({threads, items, scratch_threads()}));
    if (used <= 1) {
      range(0, items, scratch_.data());
      return;
    }
#pragma omp parallel num_threads(used)
    {
      const int64_t t = omp_get_thread_num();
      range(items * t / used, items * (t + 1) / used, scratch_.data() + t * per_thread_);
    }
  }

  std::string implementation() const override {
    return fmt::format("attention:{}", packed_ ? "packed" : "rows");
  }
  int64_t workspace_bytes() const override {
    return 0;
  }

  Status verify() override {
    fill_uniform(q_.data(), elements(a_.q), seed_ + 7);
    run();
    std::vector<HostTensor> ins, extras;
    ins.push_back({a_.q, std::vector<float>(q_.begin(), q_.end())});
    ins.push_back({a_.k, std::vector<float>(k_.begin(), k_.end())});
    for (size_t b = 0; b < bias_.size(); ++b)
      extras.push_back({a_.biases[b], std::vector<float>(bias_[b].begin(), bias_[b].end())});
    extras.push_back({a_.v, std::vector<float>(v_.begin(), v_.end())});
    FL_ASSIGN_OR_RETURN(auto ref, reference(p_, ins, extras));
    if (ref.empty() || ref[0].shape != a_.o)
      return make_error("the reference's output is not of shape {}", fmt::join(a_.o, "x"));
    // The products' rounding: both accumulations, D and Sk terms, one after the other (the
    // tolerance of a MatMul over D + Sk terms; the softmax's exp is within its 16 u).
    Problem tol;
    tol.kind = LayerKind::kMatMul;
    tol.op = "MatMul";
    tol.inputs = {{"a", {a_.sq, a_.d + a_.sk}}, {"b", {a_.d + a_.sk, a_.dv}}};
    tol.outputs = {{"y", {a_.sq, a_.dv}}};
    return compare_output(o_.data(), ref[0], verify_tolerance(tol));
  }

  // Input 0 Q, 1 K, then each bias, then V; output 0 O: plain.
  std::optional<Port> port(bool output, size_t k) const override {
    const Placed<float>* t = operand(output, k);
    if (!t) return std::nullopt;
    return Port{t->data(), t->bytes(), "plain"};
  }
  Status bind(bool output, size_t k, void* data) override {
    Placed<float>* t = operand(output, k);
    if (!t) return make_error("{} {} of this case cannot be wired", output ? "output" : "input", k);
    t->bind(data);
    return {};
  }

 private:
  struct BiasIndex {
    std::vector<int64_t> head;  // offset per batch·head
    int64_t row = 0;            // stride along the queries (0: broadcast)
    bool along = true;          // one value per key (else one per row, broadcast along the keys)
  };

  Placed<float>* operand(bool output, size_t k) const {
    auto* self = const_cast<AttentionKernel*>(this);
    if (output) return k == 0 ? &self->o_ : nullptr;
    if (k == 0) return &self->q_;
    if (k == 1) return &self->k_;
    if (k - 2 < bias_.size()) return &self->bias_[k - 2];
    if (k - 2 == bias_.size()) return &self->v_;
    return nullptr;
  }

  int64_t scratch_threads() const {
    return scratch_.size() / static_cast<size_t>(std::max<int64_t>(per_thread_, 1));
  }

  // Items [i0, i1): (batch·head, query block) in row-major order, on one thread's scratch.
  void range(int64_t i0, int64_t i1, float* scratch) const {
    int64_t packed_head = -1;
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t h = it / blocks_, blk = it % blocks_;
      if (!packed_) {
        row(h, blk, scratch);
        continue;
      }
      if (h != packed_head) {
        pack(h, scratch);
        packed_head = h;
      }
      block(h, blk * rows_, std::min(a_.sq, (blk + 1) * rows_), scratch);
    }
  }

  // The scale and the biases of query i of batch·head h, then its softmax, on its row of scores.
  void normalize(int64_t h, int64_t i, float* y) const {
    BiasRow rows[kMaxBiases];
    for (size_t b = 0; b < bias_.size(); ++b) {
      const BiasIndex& ix = index_[b];
      rows[b] = {bias_[b].data() + ix.head[static_cast<size_t>(h)] + i * ix.row, ix.along};
    }
    softmax_row(y, a_.sk, a_.scale, rows, bias_.size());
  }

  // Whether Kᵀ's panel p (keys [16p, 16p + 16) as columns, D rows) is read in place: K stored
  // [D, Sk], the panel whole. V's panel p (its columns [16p, 16p + 16), Sk rows): whole.
  bool k_in_place(int64_t p) const {
    return !a_.k_transposed && (p + 1) * kGemmNr <= a_.sk;
  }
  bool v_in_place(int64_t p) const {
    return (p + 1) * kGemmNr <= a_.dv;
  }

  // The panels of h that are not read in place, packed into `scratch` (sgemm_packed's layout: row
  // by row, 16 floats each, zeros past the keys or V's columns).
  void pack(int64_t h, float* scratch) const {
    const int64_t d = a_.d, sk = a_.sk, dv = a_.dv;
    const float* k = k_.data() + h * sk * d;
    const float* v = v_.data() + h * sk * dv;
    float* kp = scratch;
    float* vp = scratch + k_panels_ * d * kGemmNr;
    for (int64_t p = 0; p < k_panels_; ++p) {
      if (k_in_place(p)) continue;
      const int64_t k0 = p * kGemmNr, n = std::min(kGemmNr, sk - k0);
      float* panel = kp + p * d * kGemmNr;
      if (a_.k_transposed) {
        // Key by key: its row read whole, written down the panel's column (the panel, D × 16
        // floats, stays in L1).
        if (n < kGemmNr) std::fill(panel, panel + d * kGemmNr, 0.f);
        for (int64_t j = 0; j < n; ++j) {
          const float* row = k + (k0 + j) * d;
          for (int64_t r = 0; r < d; ++r) panel[r * kGemmNr + j] = row[r];
        }
        continue;
      }
      for (int64_t r = 0; r < d; ++r) {
        float* out = panel + r * kGemmNr;
        std::memcpy(out, k + r * sk + k0, static_cast<size_t>(n) * sizeof(float));
        std::fill(out + n, out + kGemmNr, 0.f);
      }
    }
    for (int64_t p = 0; p < v_panels_; ++p) {
      if (v_in_place(p)) continue;
      const int64_t c0 = p * kGemmNr, n = std::min(kGemmNr, dv - c0);
      for (int64_t r = 0; r < sk; ++r) {
        float* out = vp + (p * sk + r) * kGemmNr;
        std::memcpy(out, v + r * dv + c0, static_cast<size_t>(n) * sizeof(float));
        std::fill(out + n, out + kGemmNr, 0.f);
      }
    }
  }

  // Queries [r0, r1) of h, its other panels packed in `scratch`.
  void block(int64_t h, int64_t r0, int64_t r1, float* scratch) const {
    const int64_t d = a_.d, sk = a_.sk, dv = a_.dv;
    const float* kp = scratch;
    const float* vp = scratch + k_panels_ * d * kGemmNr;
    float* s = scratch + k_panels_ * d * kGemmNr + v_panels_ * sk * kGemmNr;
    const float* q = q_.data() + h * a_.sq * d;
    const float* k = k_.data() + h * sk * d;
    const float* v = v_.data() + h * sk * dv;
    float* o = o_.data() + h * a_.sq * dv;
    // Panel by panel, the block's queries through each (the panel stays in L1 across them).
    for (int64_t p = 0; p < k_panels_; ++p) {
      const bool in_place = k_in_place(p);
      const float* b = in_place ? k + p * kGemmNr : kp + p * d * kGemmNr;
      const int64_t ldb = in_place ? sk : kGemmNr;
      for (int64_t i = r0; i < r1; i += kGemmMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kGemmMr, r1 - i));
        gemm_micro_kernel(mr, d, q + i * d, d, b, s + (i - r0) * ld_ + p * kGemmNr, ld_, false, nullptr,
                          kGemmNr, ldb);
      }
    }
    for (int64_t i = r0; i < r1; ++i) normalize(h, i, s + (i - r0) * ld_);
    for (int64_t p = 0; p < v_panels_; ++p) {
      const bool in_place = v_in_place(p);
      const float* b = in_place ? v + p * kGemmNr : vp + p * sk * kGemmNr;
      const int64_t ldb = in_place ? dv : kGemmNr;
      for (int64_t i = r0; i < r1; i += kGemmMr) {
        const int mr = static_cast<int>(std::min<int64_t>(kGemmMr, r1 - i));
        gemm_micro_kernel(mr, sk, s + (i - r0) * ld_, ld_, b, o + i * dv + p * kGemmNr, dv, false, nullptr,
                          std::min(kGemmNr, dv - p * kGemmNr), ldb);
      }
    }
  }

  // Query i of h without packing: the scores in `scratch` (Sk floats).
  void row(int64_t h, int64_t i, float* s) const {
    const int64_t d = a_.d, sk = a_.sk, dv = a_.dv;
    const float* q = q_.data() + (h * a_.sq + i) * d;
    const float* k = k_.data() + h * sk * d;
    const float* v = v_.data() + h * sk * dv;
    if (a_.k_transposed) {
      for (int64_t j = 0; j < sk; ++j) s[j] = dot(q, k + j * d, d);
    } else {
      std::fill(s, s + sk, 0.f);
      for (int64_t r = 0; r < d; ++r) axpy(s, q[r], k + r * sk, sk);
    }
    normalize(h, i, s);
    float* o = o_.data() + (h * a_.sq + i) * dv;
    std::fill(o, o + dv, 0.f);
    for (int64_t j = 0; j < sk; ++j) axpy(o, s[j], v + j * dv, dv);
  }

  Problem p_;
  AttentionDesc a_;
  uint64_t seed_;
  Placed<float> q_, k_, v_, o_, scratch_;
  std::vector<Placed<float>> bias_;
  std::vector<BiasIndex> index_;
  bool packed_ = false;
  int64_t k_panels_ = 0, v_panels_ = 0, ld_ = 0, per_thread_ = 0, blocks_ = 0, rows_ = 1;
};

}  // namespace

bool is_attention_problem(const Problem& p) {
  return p.kind == LayerKind::kMatMul && !p.post_ops.empty() && p.post_ops.back().op == "MatMul";
}

AttentionDesc attention_desc(const Problem& p) {
  if (kernel_target() == KernelTarget::kBaseline || !__builtin_cpu_supports("fma"))
    unsupported("attention needs AVX2 and FMA (this CPU, or the ISA cap, has not)");
  if (!is_attention_problem(p)) unsupported("attention: the post-ops are no attention chain");
  if (p.inputs.size() != 2 || p.outputs.size() != 1) unsupported("attention: a MatMul of Q and K");
  if (p.int_attr("transA", 0) != 0) unsupported("attention reads Q untransposed (transA = 1)");
  AttentionDesc a;
  a.q = p.inputs[0].shape;
  a.k = p.inputs[1].shape;
  const size_t r = a.q.size();
  if (r < 3 || a.k.size() != r || !std::equal(a.q.begin(), a.q.end() - 2, a.k.begin()))
    unsupported("attention: Q and K of one rank (3 or more) and the same leading dims");
  a.k_transposed = p.int_attr("transB", 0) != 0;
  a.sq = a.q[r - 2];
  a.d = a.q[r - 1];
  a.sk = a.k_transposed ? a.k[r - 2] : a.k[r - 1];
  if ((a.k_transposed ? a.k[r - 1] : a.k[r - 2]) != a.d) unsupported("attention: K's head size is not Q's");
  for (size_t i = 0; i + 2 < r; ++i) a.bh *= a.q[i];
  Shape scores = a.q;
  scores.back() = a.sk;
  bool softmax = false;
  for (size_t i = 0; i < p.post_ops.size(); ++i) {
    const PostOp& op = p.post_ops[i];
    if (op.op == "Scale" && i == 0) {
      a.scale = static_cast<float>(op.alpha);
    } else if (op.op == "AttentionBias" && !softmax) {
      if (!broadcasts(op.shape, scores))
        unsupported(fmt::format("attention: a bias of {} does not broadcast to the scores {}",
                                fmt::join(op.shape, "x"), fmt::join(scores, "x")));
      a.biases.push_back(op.shape);
    } else if (op.op == "Softmax" && !softmax) {
      softmax = true;
    } else if (op.op == "MatMul" && softmax && i + 1 == p.post_ops.size()) {
      a.v = op.shape;
    } else {
      unsupported(fmt::format("attention: no post-op {} at position {} of the chain", op.op, i));
    }
  }
  if (a.biases.size() > kMaxBiases)
    unsupported(fmt::format("attention: {} biases, {} at most", a.biases.size(), kMaxBiases));
  if (a.v.size() != r || !std::equal(a.q.begin(), a.q.end() - 2, a.v.begin()) || a.v[r - 2] != a.sk)
    unsupported(
        fmt::format("attention: V of {} after scores {}", fmt::join(a.v, "x"), fmt::join(scores, "x")));
  a.dv = a.v[r - 1];
  a.o = a.q;
  a.o.back() = a.dv;
  if (a.bh <= 0 || a.sq <= 0 || a.sk <= 0 || a.d <= 0 || a.dv <= 0)
    unsupported("attention: an empty product");
  return a;
}

std::unique_ptr<Kernel> make_attention_kernel(const Problem& p, uint64_t seed) {
  return std::make_unique<AttentionKernel>(p, seed);
}

}  // namespace floorline::kernels::floorline_detail
