// The oneDNN cases of recurrent layers in every direction and form (with the comparisons, Mean,
// CumSum and ArgMax of the same model) and of real zoo layers (lstm_lm's LSTMs, gru_kws's
// bidirectional GRUs, maxvit_t's Einsum attention read as MatMul), verified against the oracle.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "floorline/generator/plan.hpp"
#include "floorline/kernels/onednn.hpp"

namespace floorline::gen {
namespace {

constexpr const char* kRecurrentModel = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
rec (float[6,2,5] x, float[1,12,5] w, float[1,12,3] r, float[1,24] b, float[1,2,3] h0, float[1,2,3] c0,
     float[2,12,5] w2, float[2,12,3] r2, float[2,24] b2, float[2,9] p2, float[2,2,3] h02,
     float[1,9,5] gw, float[1,9,3] gr, float[1,18] gb, float[2,9,5] gw2, float[2,9,3] gr2, float[2,18] gb2,
     float[1,3,5] rw, float[1,3,3] rr, float[1,6] rb, float[2,6,5] xb,
     float[2,4,6] a, float[2,4,6] a2, float[2,4,6] a3)
    => (float y1, float yh1, float yc1, float y2, float y3, float yh3, float y4, float y5, float y6,
        float y7, float y8, float y9, float y10, float y11, bool ge, bool le, float mean, float cs, int64 am)
{
  y1, yh1, yc1 = LSTM <hidden_size = 3> (x, w, r, b, , h0, c0)
  y2 = LSTM <hidden_size = 3, direction = "reverse"> (x, w, r)
  y3, yh3 = LSTM <hidden_size = 3, direction = "bidirectional"> (x, w2, r2, b2, , h02, , p2)
  y4 = GRU <hidden_size = 3> (x, gw, gr, gb)
  y5 = GRU <hidden_size = 3, linear_before_reset = 1, direction = "bidirectional"> (x, gw2, gr2, gb2)
  y6 = RNN <hidden_size = 3> (x, rw, rr, rb)
  y7 = RNN <hidden_size = 3, activations = ["Relu"]> (x, rw, rr, rb)
  y8 = LSTM <hidden_size = 3, layout = 1> (xb, w, r, b)
  y9 = GRU <hidden_size = 3, linear_before_reset = 1> (x, gw, gr)
  y10 = LSTM <hidden_size = 3, direction = "reverse", clip = 0.5> (x, w, r)
  y11 = LSTM <hidden_size = 3, input_forget = 1> (x, w, r, b)
  ge = GreaterOrEqual (a, a2)
  le = LessOrEqual (a, a2)
  mean = Mean (a, a2, a3)
  ax = Constant <value = int64[1] {1}> ()
  cs = CumSum (a, ax)
  am = ArgMax <axis = 2, keepdims = 0> (a)
}
)onnx";

struct Verified {
  std::set<std::string> ops, proxies;
  // "LSTM matmul_standard": the op and the algorithm's variant (the name before the first ':')
  std::set<std::string> algorithms;
  int cases = 0;
};

// Verifies every planned oneDNN and floorline case whose layer op is in `ops` (all when empty).
Verified verify_all(const std::vector<mp::ModelIR>& models, const std::set<std::string>& ops = {}) {
  PlanOptions o;
  const Plan plan = make_plan(models, {find_backend("onednn"), find_backend("floorline")}, o);
  Verified v;
  for (const auto& c : plan.cases) {
    if (c.status || !c.spec.feeds.empty()) continue;
    if (!ops.empty() && !ops.count(c.spec.problem.op)) continue;
    auto k = find_backend(c.spec.variant.backend)->factory()(c.spec);
    EXPECT_TRUE(k.ok()) << c.spec.name << ": " << (k.ok() ? "" : k.error().message);
    if (!k.ok()) continue;
    const Status s = (*k)->verify();
    if (!s.ok() && s.error().code == Disposition::kNotVerifiable) {
      v.proxies.insert(c.spec.problem.op);
      continue;
    }
    EXPECT_TRUE(s.ok()) << c.spec.name << ": " << (s.ok() ? "" : s.error().message);
    v.ops.insert(c.spec.problem.op);
    const std::string& a = c.spec.variant.algorithm;
    if (s.ok()) v.algorithms.insert(c.spec.problem.op + " " + split_algorithm(a).family);
    ++v.cases;
  }
  return v;
}

TEST(OnednnRecurrent, EveryFormMatchesTheReference) {
  auto m = mp::process_model_text(kRecurrentModel, "rec.onnx", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Verified v = verify_all(*m);
  // CumSum and ArgMax run Floorline's own kernels (the floorline backend): verified, not proxies.
  EXPECT_EQ(v.ops, (std::set<std::string>{"LSTM", "GRU", "RNN", "GreaterOrEqual", "LessOrEqual", "Mean",
                                          "CumSum", "ArgMax"}));
  EXPECT_TRUE(v.proxies.empty());
  EXPECT_GE(v.cases, 14);  // 9 recurrent layers, 3 element-wise, CumSum, ArgMax
  // Every form also as the standard formulation on oneDNN matmul (the shared skeleton), and clip
  // and input_forget, which the RNN primitive does not map, only so; bidirectional layers also with
  // both directions' products as one batched matmul. And the RNN primitive itself, at every ISA:
  // its "ref" (the cell loop around oneDNN's jit GEMMs) is timed, not skipped as a plain-loop
  // reference (is_reference_implementation).
  for (const char* a :
       {"LSTM matmul_standard", "GRU matmul_standard", "RNN matmul_standard", "LSTM matmul_standard_batched",
        "GRU matmul_standard_batched", "LSTM rnn", "GRU rnn", "RNN rnn"})
    EXPECT_TRUE(v.algorithms.count(a)) << a << " in " << ::testing::PrintToString(v.algorithms);
}

TEST(OnednnRecurrent, ZooRecurrentAndEinsumLayersMatchTheReference) {
  std::vector<mp::ModelIR> models;
  for (const char* name : {"lstm_lm", "gru_kws", "maxvit_t"}) {
    auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx", {});
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().message;
    for (auto& ir : *r) models.push_back(std::move(ir));
  }
  const Verified v = verify_all(models, {"LSTM", "GRU", "Einsum"});
  EXPECT_EQ(v.ops, (std::set<std::string>{"LSTM", "GRU", "Einsum"}));
  EXPECT_TRUE(v.proxies.empty());
  EXPECT_GE(v.cases, 4);
  // lstm_lm's LSTMs and gru_kws's bidirectional GRUs (linear_before_reset; per direction and
  // batched over both) as the standard formulation on oneDNN matmul, and as oneDNN's RNN primitive
  // (for these GRUs, and below AVX-512 for the LSTMs too, its "ref": jit GEMMs in a C++ cell loop).
  for (const char* a :
       {"LSTM matmul_standard", "GRU matmul_standard", "GRU matmul_standard_batched", "LSTM rnn", "GRU rnn"})
    EXPECT_TRUE(v.algorithms.count(a)) << a << " in " << ::testing::PrintToString(v.algorithms);
}

}  // namespace
}  // namespace floorline::gen
