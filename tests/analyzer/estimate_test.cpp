// The composed estimate E (docs/ANALYZER.md, "The estimate E"): each layer's case with its weights
// from the last-level cache and from memory in the shares a pass over the model leaves them, from
// recorded cache_times rows, with hand-computed sums; the share follows the pass's footprint against
// the last-level cache; within a thread budget each layer reads the cache times of the case S took,
// on that case's system; without cache times there is no E.
#include <algorithm>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "floorline/analyzer/analyzer.hpp"
#include "floorline/analyzer/bounds.hpp"
#include "floorline/analyzer/report.hpp"
#include "floorline/model_processor/model.hpp"
#include "recorded_db.hpp"

namespace floorline::analyzer {
namespace {

// The chain (recorded::kReluSigmoidTanh): each layer reads 16 KiB and writes 16 KiB, so a pass
// keeps 32 KiB live (pass_footprint).
using recorded::value;

struct EstimateDb : recorded::RecordedDb {
  EstimateDb() : RecordedDb("estimate", recorded::kReluSigmoidTanh, "estimate_chain") {}
  const LayerCost& layer(const ModelBounds& b, const std::string& kind) {
    return recorded::layer_of_kind(b, kind);
  }
  // A system with the chain's cases timed alone: Relu 10 µs, Sigmoid 20, Tanh 40 (S = 70).
  int64_t timed_chain() {
    const int64_t one = system("Test CPU", 1);
    time(one, "Relu", 10);
    time(one, "Sigmoid", 20);
    time(one, "Tanh", 40);
    return one;
  }
  // Relu's and Sigmoid's cases from memory (16, 30 µs) and from the LLC (12, 22 µs), each after a
  // flush of 16 KiB (an L2 of 8 KiB); Tanh without cache times.
  void cached_chain(int64_t one) {
    cache(one, "Relu", "memory", 16, 16384);
    cache(one, "Relu", "llc", 12, 16384);
    cache(one, "Sigmoid", "memory", 30, 16384);
    cache(one, "Sigmoid", "llc", 22, 16384);
  }
};

TEST(Estimate, EachLayerTakesItsCaseInTheCacheStateThePassLeavesItsWeightsIn) {
  EstimateDb t;
  const int64_t one = t.timed_chain();
  {
    const auto b = analyze_model(t.model, value(load_costs(*t.db, one)));
    EXPECT_DOUBLE_EQ(b.S, 70);
    EXPECT_FALSE(b.E.has_value());  // no cache times: no estimate
    EXPECT_FALSE(t.layer(b, "Relu").e_us.has_value());
  }
  // An L2 of 8 KiB (an llc flush of twice that): the pass's 32 KiB exceed it, and a quarter of them
  // fit: three quarters of the weights come from memory. Tanh has no cache time and counts its t(v).
  t.cached_chain(one);
  const auto costs = value(load_costs(*t.db, one));
  EXPECT_EQ(costs.private_cache_bytes, 8192);
  EXPECT_EQ(pass_footprint(t.model), 32768);
  EXPECT_DOUBLE_EQ(memory_share(t.model, 8192), 0.75);
  const auto b = analyze_model(t.model, costs);
  ASSERT_TRUE(b.E.has_value());
  EXPECT_DOUBLE_EQ(b.E_memory_share, 0.75);
  EXPECT_DOUBLE_EQ(*b.E, 15 + 28 + 40);  // 0.25·12 + 0.75·16, 0.25·22 + 0.75·30, Tanh's t(v)
  EXPECT_EQ(b.E_layers, 2);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Sigmoid").e_us, 28);
  EXPECT_FALSE(t.layer(b, "Tanh").e_us.has_value());
  EXPECT_DOUBLE_EQ(b.S, 70);  // S is untouched

  // The same cases on a machine whose L2 holds the pass (32 KiB or more): the weights from the LLC.
  ModelBounds in_llc = b;
  CostTable big = costs;
  big.private_cache_bytes = 32768;
  estimate_E(in_llc, t.model, big);
  EXPECT_DOUBLE_EQ(in_llc.E_memory_share, 0);
  EXPECT_DOUBLE_EQ(*in_llc.E, 74);  // 12 + 22 + 40
  EXPECT_DOUBLE_EQ(memory_share(t.model, 32767), 1 - 32767.0 / 32768);

  // A warm single-call reading changes nothing: e(v) is the cold single calls themselves, as a pass
  // makes them (a case whose repeated calls settle is slower in single calls, warm or not).
  t.cache(one, "Relu", "warm", 8, 0);
  const auto with_warm = analyze_model(t.model, value(load_costs(*t.db, one)));
  EXPECT_DOUBLE_EQ(*t.layer(with_warm, "Relu").e_us, 15);
  EXPECT_DOUBLE_EQ(*with_warm.E, 15 + 28 + 40);

  // A cold mix below t(v) is the host's noise: e(v) stays at t(v). Sigmoid from memory at 15 µs and
  // from the LLC at 12: a mix of 14.25 against its 20.
  t.cache(one, "Sigmoid", "memory", 15, 16384);
  t.cache(one, "Sigmoid", "llc", 12, 16384);
  const auto noisy = analyze_model(t.model, value(load_costs(*t.db, one)));
  EXPECT_DOUBLE_EQ(*t.layer(noisy, "Sigmoid").e_us, 20);
  EXPECT_DOUBLE_EQ(*noisy.E, 15 + 20 + 40);
  EXPECT_GE(*noisy.E, noisy.S);
}

// On a device (a GPU: its L2 is its last level), the cache stage's llc state flushes nothing and its
// memory state writes over twice the L2 (generator/cache_state.hpp, time_on_device): the private
// cache is half the memory flush, and E is what it is on a CPU with that L2.
TEST(Estimate, OnADeviceThePrivateCacheIsHalfItsColdCacheFlush) {
  EstimateDb t;
  const int64_t gpu = t.system("Test GPU", 1, "", "gpu");
  t.time(gpu, "Relu", 10);
  t.time(gpu, "Sigmoid", 20);
  t.time(gpu, "Tanh", 40);
  t.cache(gpu, "Relu", "memory", 16, 16384);
  t.cache(gpu, "Relu", "llc", 12, 0);
  t.cache(gpu, "Sigmoid", "memory", 30, 16384);
  t.cache(gpu, "Sigmoid", "llc", 22, 0);
  CostTable costs = value(load_costs(*t.db, gpu));
  EXPECT_EQ(costs.device_kind, "gpu");
  EXPECT_EQ(costs.private_cache_bytes, 8192);
  costs.memory_bandwidth.clear();
  const auto b = analyze_model(t.model, costs);
  EXPECT_DOUBLE_EQ(b.E_memory_share, 0.75);
  EXPECT_DOUBLE_EQ(*b.E, 15 + 28 + 40);  // as on the CPU above
}

// The activations a pass finds beyond the private cache: with an L2 of 8 KiB, the chain's 16 KiB
// values cannot stay there. The replay's memory planner (activation_traffic) puts Relu's output in a
// new buffer, Sigmoid's in another (Relu's is still live while Sigmoid reads it), and Tanh's in
// Relu's, freed after Sigmoid. Relu reads a graph input (where its case alone read it) and writes its
// buffer 16 KiB after Tanh last touched it in the pass before (half beyond the cache: 1 − 8 / 16);
// Sigmoid and Tanh read their producer's output right after it was written (half beyond); Sigmoid
// writes a buffer Tanh last read at the end of the pass before (Relu's 32 KiB between, plus its own
// 16 KiB: 1 − 8 / 48 beyond), Tanh one Sigmoid last read 16 KiB back (half). A layer
// takes at least its compulsory bytes' time with those from memory: at 0.1 GB/s from memory and
// 16.384 GB/s from the cache, Relu's 8 KiB from memory take 81.92 µs, more than its weights' term.
TEST(Estimate, ActivationsBeyondThePrivateCacheStreamFromMemory) {
  EstimateDb t;
  const int64_t one = t.timed_chain();
  t.cached_chain(one);
  CostTable costs = value(load_costs(*t.db, one));
  ASSERT_EQ(costs.private_cache_bytes, 8192);
  {
    // No calibrated memory bandwidth: the weights' term alone (the test above).
    costs.memory_bandwidth.clear();
    const auto b = analyze_model(t.model, costs);
    EXPECT_DOUBLE_EQ(*b.E, 15 + 28 + 40);
    EXPECT_DOUBLE_EQ(b.E_activations_us, 0);
  }
  const auto base = analyze_model(t.model, costs);
  const auto traffic = activation_traffic(t.model, base.layers, costs.private_cache_bytes);
  auto cold = [&](int index) {
    const ActivationTraffic& a = traffic.at(index);
    return a.cold_input_bytes + a.cold_output_bytes;
  };
  const LayerCost& relu = t.layer(base, "Relu");
  const LayerCost& sigmoid = t.layer(base, "Sigmoid");
  const LayerCost& tanh = t.layer(base, "Tanh");
  const double sigmoid_out = 16384 * (1 - 8.0 / 48);  // 13,653 bytes
  EXPECT_DOUBLE_EQ(cold(relu.index), 8192);           // its output only
  EXPECT_DOUBLE_EQ(cold(sigmoid.index), 8192 + sigmoid_out);
  EXPECT_DOUBLE_EQ(cold(tanh.index), 16384);  // half its input, half its output
  // An L2 that holds a value: each read right after its write, Relu's and Tanh's writes into a
  // buffer touched 16 KiB back, are in it; Sigmoid's buffer, touched 48 KiB back, is not (a 16 KiB
  // output the cache could hold, evicted since: the replay's "cold output").
  {
    const auto held = activation_traffic(t.model, base.layers, 16384);
    EXPECT_DOUBLE_EQ(held.at(relu.index).cold_output_bytes, 0);
    EXPECT_DOUBLE_EQ(held.at(sigmoid.index).cold_input_bytes, 0);
    EXPECT_DOUBLE_EQ(held.at(sigmoid.index).cold_output_bytes, 16384 * (1 - 16.0 / 48));
    EXPECT_DOUBLE_EQ(held.at(tanh.index).cold_output_bytes, 0);
    EXPECT_DOUBLE_EQ(held.at(tanh.index).output_bytes, 16384);
  }
  // One that holds the whole pass (96 KiB): nothing beyond it.
  for (const auto& [index, a] : activation_traffic(t.model, base.layers, 96 * 1024))
    EXPECT_DOUBLE_EQ(a.cold_input_bytes + a.cold_output_bytes, 0) << index;

  costs.memory_bandwidth["f32"] = 1e8;
  costs.calibrated_peaks[{"bytes", "f32"}] = 16.384e9;
  const auto b = analyze_model(t.model, costs);
  ASSERT_EQ(relu.bytes, 32768);
  const double relu_floor = 8192 / 1e8 * 1e6 + (32768 - 8192) / 16.384e9 * 1e6;  // 83.42 µs
  const double sigmoid_cold = 8192 + sigmoid_out;
  const double sigmoid_floor =
      sigmoid_cold / 1e8 * 1e6 + (32768 - sigmoid_cold) / 16.384e9 * 1e6;  // 219.1 µs
  EXPECT_DOUBLE_EQ(*t.layer(b, "Relu").e_us, relu_floor);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Sigmoid").e_us, sigmoid_floor);
  EXPECT_FALSE(t.layer(b, "Tanh").e_us.has_value());  // no cache time: its t(v), as before
  EXPECT_DOUBLE_EQ(b.E_activations_us, relu_floor - 15 + sigmoid_floor - 28);
  EXPECT_DOUBLE_EQ(*b.E, relu_floor + sigmoid_floor + 40);
  EXPECT_DOUBLE_EQ(b.S, 70);  // S is untouched
  // A memory fast enough that the weights' term is the longer: E as without.
  costs.memory_bandwidth["f32"] = 1e12;
  const auto fast = analyze_model(t.model, costs);
  EXPECT_DOUBLE_EQ(*fast.E, 15 + 28 + 40);
  EXPECT_DOUBLE_EQ(fast.E_activations_us, 0);
}

// The output buffers: each layer of the chain writes 16 KiB; Relu's buffer was last touched 16 KiB
// back (the test above), of which a private cache of 8 KiB keeps half (output share 0.5). Relu's case from
// memory with its dst evicted too takes 24 µs against 16 without: its cold mix 0.25·12 + 0.75·16 gains 0.5
// × 8. Sigmoid's dst reading is its memory reading (a flush that left the output in memory already): nothing
// added.
TEST(Estimate, TheShareOfAnOutputBeyondThePrivateCacheCostsWhatItsDstFromMemoryDoes) {
  EstimateDb t;
  const int64_t one = t.timed_chain();
  t.cache(one, "Relu", "memory", 16, 16384, 24);
  t.cache(one, "Relu", "llc", 12, 16384);
  t.cache(one, "Sigmoid", "memory", 30, 16384, 30);
  t.cache(one, "Sigmoid", "llc", 22, 16384);
  const CostTable costs = value(load_costs(*t.db, one));
  ASSERT_EQ(costs.private_cache_bytes, 8192);
  const auto b = analyze_model(t.model, costs);
  const int relu = t.layer(b, "Relu").index;
  EXPECT_DOUBLE_EQ(activation_traffic(t.model, b.layers, 8192).at(relu).output_share(), 0.5);
  EXPECT_DOUBLE_EQ(activation_traffic(t.model, b.layers, 16384).at(relu).output_share(), 0);  // held
  EXPECT_DOUBLE_EQ(activation_traffic(t.model, b.layers, 4096).at(relu).output_share(), 0.75);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Relu").e_us, 19);  // 3 + 12 + 4
  EXPECT_DOUBLE_EQ(*t.layer(b, "Sigmoid").e_us, 28);
  EXPECT_DOUBLE_EQ(*b.E, 19 + 28 + 40);
  // A dst reading below the memory one (noise) adds nothing.
  t.cache(one, "Relu", "memory", 16, 16384, 14);
  const auto lower = analyze_model(t.model, value(load_costs(*t.db, one)));
  EXPECT_DOUBLE_EQ(*t.layer(lower, "Relu").e_us, 15);
}

// From memory among dirty lines (schema 12): a pass writes its activations, and its weights come
// into caches full of written lines. Where the stage took that reading, it is the weights' time from
// memory: Relu's 20 µs (16 with the caches clean) makes its mix 0.25·12 + 0.75·20 = 18, and with its
// dst reading 24 it gains 0.5 × (24 − 16), the output's term still against the clean reading.
// Sigmoid without one keeps its clean 30.
TEST(Estimate, WeightsFromMemoryReadAmongDirtyLinesWhereTheStageTookThatReading) {
  EstimateDb t;
  const int64_t one = t.timed_chain();
  t.cached_chain(one);
  t.cache(one, "Relu", "memory", 16, 16384, std::nullopt, 20);
  CostTable costs = value(load_costs(*t.db, one));
  costs.memory_bandwidth.clear();
  const auto b = analyze_model(t.model, costs);
  EXPECT_DOUBLE_EQ(b.E_memory_share, 0.75);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Relu").e_us, 18);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Sigmoid").e_us, 28);
  EXPECT_DOUBLE_EQ(*b.E, 18 + 28 + 40);
  t.cache(one, "Relu", "memory", 16, 16384, 24, 20);
  costs = value(load_costs(*t.db, one));
  costs.memory_bandwidth.clear();
  EXPECT_DOUBLE_EQ(*t.layer(analyze_model(t.model, costs), "Relu").e_us, 18 + 4);
  // All in the last-level cache (an L2 that holds the pass): the dirty reading plays no part.
  ModelBounds held = b;
  costs.private_cache_bytes = 32768;
  estimate_E(held, t.model, costs);
  EXPECT_DOUBLE_EQ(*held.E, 12 + 22 + 40);
}

// The footprint counts every parameter once and the largest layer's activations: the Conv's weights
// and bias (8x4x3x3 and 8 floats: 1,184 bytes), and the Relu's input and output (2 x 2,048 bytes),
// more than the Conv's (1x4x8x8 and 1x8x8x8 floats: 3,072 bytes).
TEST(Estimate, ThePassFootprintIsTheParametersAndTheLargestLayersActivations) {
  auto m = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
conv_relu (float[1,4,8,8] x, float[8,4,3,3] w, float[8] b) => (float y) {
  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  y = Relu (c)
}
)onnx",
                                  "conv_relu", {});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(pass_footprint(m->front()), 1184 + 4096);
}

TEST(Estimate, WithinAThreadBudgetALayerReadsTheCacheTimeOfTheCaseSTook) {
  EstimateDb t;
  const int64_t one = t.system("Test CPU", 1), two = t.system("Test CPU", 2);
  t.time(one, "Relu", 10);
  t.time(one, "Sigmoid", 20);
  t.time(one, "Tanh", 40);
  t.time(two, "Relu", 6);
  t.time(two, "Sigmoid", 25);
  t.time(two, "Tanh", 30);
  // An L2 of 16 KiB (half the pass): E takes half of each layer from memory.
  for (const int64_t s : {one, two}) {
    t.cache(s, "Relu", "memory", s == one ? 15 : 9, 32768);
    t.cache(s, "Relu", "llc", s == one ? 13 : 7, 32768);
    t.cache(s, "Sigmoid", "memory", s == one ? 30 : 33, 32768);
    t.cache(s, "Sigmoid", "llc", s == one ? 26 : 27, 32768);
    t.cache(s, "Tanh", "memory", s == one ? 44 : 36, 32768);
    t.cache(s, "Tanh", "llc", s == one ? 42 : 34, 32768);
  }
  // S at 2 threads: Relu and Tanh at 2 threads, Sigmoid at 1; E reads those cases' cold times.
  const auto b = analyze_model(t.model, value(load_costs(*t.db, two)));
  EXPECT_DOUBLE_EQ(b.S, 56);
  ASSERT_TRUE(b.E.has_value());
  EXPECT_DOUBLE_EQ(b.E_memory_share, 0.5);
  EXPECT_DOUBLE_EQ(*b.E, 8 + 28 + 35);  // (7 + 9) / 2, (26 + 30) / 2, (34 + 36) / 2
  EXPECT_EQ(t.layer(b, "Sigmoid").threads, 1);
  EXPECT_DOUBLE_EQ(*t.layer(b, "Sigmoid").e_us, 28);

  // The report's columns: E, its memory share, E/S and replay/E (with a replay row of 80 µs, and the
  // paired measure's 63 µs: its pass 1.125 × its layers alone, whose cases S times at 56 µs).
  benchdb::ReplayRow r;
  r.makeup = R"({"layers":3,"conversions":0,"conversions_us":0,"paired_ratio":1.125,"steps_alone_us":56,)"
             R"("paired_us":63})";
  r.system_id = two;
  r.model_name = t.model.name;
  r.batch = 1;
  r.median_us = 80;
  r.min_us = 80;
  r.repetitions = 3;
  r.measured_at = "2026-11-28T00:00:00Z";
  value(t.db->upsert_replay(r));
  const Report report = value(build_report(*t.db, {t.model}, two));
  const std::string csv = format_csv(report, false);
  const auto header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find("E_us,E_memory_share"), std::string::npos) << header;
  EXPECT_NE(header.find("E_over_S,replay_over_E"), std::string::npos) << header;
  EXPECT_NE(csv.find(",71.0,0.50,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",1.27,1.127,"), std::string::npos) << csv;  // 71 / 56; 80 / 71
  EXPECT_NE(header.find("replay_paired_over_S,replay_paired_over_E"), std::string::npos) << header;
  EXPECT_NE(csv.find(",1.12,0.887,"), std::string::npos) << csv;               // 63 / 56 (1.125); 63 / 71
  EXPECT_NE(format_html(report).find("<td>63.0 µs</td>"), std::string::npos);  // the summary's paired column
}

// Blocked oneDNN convolutions, an XNNPACK one (NHWC), and the plain cases between them:
//   a = Conv(x)      blocked in and out: x is a graph input, so no conversion (the case reads its
//                    own buffer there, as in the replay)
//   r = Relu(a)      element-wise, its case plain: runs on a's blocked layout
//   b = Conv(r)      blocked: reads r as it is
//   n = Conv(r)      NHWC: r straight from the blocked layout into NHWC, the shorter of a's 3.0
//                    out of it and n's 1.0 into NHWC (one reorder, as the replay's)
//   f = Flatten(b)   a view: passes b's blocked layout on
//   y = MatMul(f)    plain: f out of the blocked layout (b's 3.5)
//   z = Add(n, b)    element-wise, its case plain: keeps n's NHWC; b is brought into it (the
//                    shorter of b's 3.5 out of the blocked layout and n's 1.5 for a tensor of that
//                    size)
//   s = Sigmoid(b)   plain: b's buffer is in the plain layout already (converted for f, its view)
constexpr const char* kLayouts = R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
layouts (float[1,8,8,8] x, float[8,8,1,1] w1, float[8,8,1,1] w2, float[8,8,1,1] w3, float[512,10] wg)
    => (float[1,10] y, float[1,8,8,8] z, float[1,8,8,8] s) {
  a = Conv (x, w1)
  r = Relu (a)
  b = Conv (r, w2)
  n = Conv (r, w3)
  f = Flatten (b)
  y = MatMul (f, wg)
  z = Add (n, b)
  s = Sigmoid (b)
}
)onnx";

TEST(Estimate, ConversionsAreChargedWhereANeighboursLayoutDiffers) {
  auto models = mp::process_model_text(kLayouts, "layouts.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const mp::ModelIR& m = models->front();
  ModelBounds b;
  b.layers = layer_costs(m, CostTable{}, "f32");
  std::map<std::string, LayerCost*> by_output;
  for (auto& c : b.layers) {
    c.source = CostSource::kMeasured;
    for (const auto& l : m.layers)
      if (l.index == c.index && !l.output_names.empty()) by_output[l.output_names[0]] = &c;
  }
  auto set = [&](const std::string& out, const std::string& layout, double in_us, double out_us) {
    LayerCost& c = *by_output.at(out);
    c.in_layout = c.out_layout = layout;
    c.in_conversion_us = in_us;
    c.out_conversion_us = out_us;
  };
  set("a", "aBcd8b", 2.0, 3.0);
  set("b", "aBcd8b", 2.0, 3.5);
  set("n", "nhwc", 1.0, 1.5);
  const ConversionWalk walk(b, m);
  estimate_conversions(b, m);
  EXPECT_DOUBLE_EQ(walk.us(), b.E_conversions_us);  // the compiled walk agrees
  EXPECT_DOUBLE_EQ(by_output.at("a")->e_conversion_us, 0);
  EXPECT_DOUBLE_EQ(by_output.at("r")->e_conversion_us, 0);
  EXPECT_DOUBLE_EQ(by_output.at("b")->e_conversion_us, 0);
  EXPECT_DOUBLE_EQ(by_output.at("n")->e_conversion_us, 1.0);
  EXPECT_DOUBLE_EQ(by_output.at("y")->e_conversion_us, 3.5);
  EXPECT_DOUBLE_EQ(by_output.at("z")->e_conversion_us, 1.5);
  EXPECT_DOUBLE_EQ(by_output.at("s")->e_conversion_us, 0);
  EXPECT_EQ(b.E_conversions, 3);
  EXPECT_DOUBLE_EQ(b.E_conversions_us, 1.0 + 3.5 + 1.5);

  // The walk reads the layouts as they are when it runs: "r" and "b" in nhwc now.
  set("r", "nhwc", 1.0, 1.5);
  set("b", "nhwc", 1.0, 1.5);
  estimate_conversions(b, m);
  EXPECT_GT(b.E_conversions_us, 0);
  EXPECT_DOUBLE_EQ(walk.us(), b.E_conversions_us);

  // Every case plain: nothing to convert.
  for (auto& c : b.layers) c.in_layout = c.out_layout = "";
  EXPECT_DOUBLE_EQ(walk.us(), 0);
  estimate_conversions(b, m);
  EXPECT_EQ(b.E_conversions, 0);
  EXPECT_DOUBLE_EQ(b.E_conversions_us, 0);
  for (const auto& c : b.layers) EXPECT_DOUBLE_EQ(c.e_conversion_us, 0);
}

// Every layer of `m` measured, its case reading and writing `layout`, a conversion into it 2 µs and
// out of it 3 µs.
ModelBounds measured_in(const mp::ModelIR& m, const std::string& layout) {
  ModelBounds b;
  b.layers = layer_costs(m, CostTable{}, "f32");
  for (auto& c : b.layers) {
    c.source = CostSource::kMeasured;
    c.in_layout = c.out_layout = layout;
    c.in_conversion_us = 2.0;
    c.out_conversion_us = 3.0;
  }
  return b;
}

// An SE block's scale · x, the per-channel operand first (torchvision's `scale * input`): the case
// reads the operand of the output's shape in its layout (binary@nhwc holds it acdb), not the first.
// Before 2026-12-07 the walk converted the convolution's NHWC output to plain for it.
TEST(Estimate, ABinaryReadsItsFullSizeOperandInItsLayoutWhereverItComes) {
  auto models = mp::process_model_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8,4,4] x, float[8,8,1,1] w, float[1,8,1,1] q) => (float[1,8,4,4] y) {
  a = Conv (x, w)
  y = Mul (q, a)
})",
                                       "se.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const mp::ModelIR& m = models->front();
  ModelBounds b = measured_in(m, "acdb");
  estimate_conversions(b, m);
  EXPECT_EQ(b.E_conversions, 0);
  EXPECT_DOUBLE_EQ(b.E_conversions_us, 0);
  // The Mul on plain: the convolution's output converted once, out of acdb.
  for (auto& c : b.layers)
    if (c.kind == "Mul") c.in_layout = c.out_layout = "";
  estimate_conversions(b, m);
  EXPECT_EQ(b.E_conversions, 1);
  EXPECT_DOUBLE_EQ(b.E_conversions_us, 3.0);
}

// A Concat's case holds every input in its layout (concat@blocked16c), whatever their channels:
// DenseNet's growth concat of a 16- and an 8-channel convolution output, both blocked, converts
// nothing; until 2026-12-07 the walk converted every input but the first's shape to plain.
TEST(Estimate, AConcatReadsEveryInputInItsLayout) {
  auto models = mp::process_model_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8,4,4] x, float[16,8,1,1] w, float[8,8,1,1] v) => (float[1,24,4,4] y) {
  a = Conv (x, w)
  b = Conv (x, v)
  y = Concat <axis = 1> (a, b)
})",
                                       "concat.onnx", {});
  ASSERT_TRUE(models.ok()) << models.error().message;
  const mp::ModelIR& m = models->front();
  ModelBounds b = measured_in(m, "aBcd16b");
  estimate_conversions(b, m);
  EXPECT_EQ(b.E_conversions, 0);
  EXPECT_DOUBLE_EQ(b.E_conversions_us, 0);
}

// The layout-choice tests' model: x → Conv a (8 → 8 channels) → Conv b (8 → 16) → Sigmoid y.
struct ConvChain {
  std::vector<mp::ModelIR> models;
  const mp::Layer *a = nullptr, *b = nullptr, *y = nullptr;
  std::string error;
  ConvChain() {
    auto parsed = mp::process_model_text(R"onnx(
<ir_version: 8, opset_import: ["" : 17]>
chain (float[1,8,8,8] x, float[8,8,1,1] w1, float[16,8,1,1] w2) => (float[1,16,8,8] y) {
  a = Conv (x, w1)
  b = Conv (a, w2)
  y = Sigmoid (b)
}
)onnx",
                                         "chain.onnx", {});
    if (!parsed.ok()) {
      error = parsed.error().message;
      return;
    }
    models = std::move(*parsed);
    for (const auto& l : models.front().layers)
      (l.output_names.at(0) == "a" ? a : l.output_names.at(0) == "b" ? b : y) = &l;
    if (!a || !b || !y) error = "the chain's layers a, b and y not found";
  }
  ConvChain(const ConvChain&) = delete;  // a, b and y point into `models`
  ConvChain& operator=(const ConvChain&) = delete;
};

// A oneDNN case of system 1 at one thread, named "algorithm/layout".
CaseTime onednn_time(int64_t id, const std::string& algorithm, double us, const std::string& layout = "") {
  CaseTime t;
  t.us = us;
  t.case_id = id;
  t.id.backend = "onednn";
  t.id.algorithm = algorithm;
  t.id.layout = layout;
  t.name = algorithm + "/" + layout;
  t.system_id = 1;
  t.threads = 1;
  return t;
}

// The replay's layout-aware choice, followed: x → Conv a (8 → 8 channels) → Conv b (8 → 16) →
// Sigmoid. a's best case (10 µs)
// reads and writes aBcd8b, with conversion cases of 3 µs in and 4 µs out; its plain alternative
// takes 12 µs. b and the Sigmoid are plain, so a's blocked output costs 4 µs of conversion at b:
// 14 µs against the alternative's 12, which the choice takes. An alternative of 16 µs is beyond
// kLayoutSlack × 10: a keeps its case and b pays the conversion.
TEST(Estimate, ALayerRunsOnTheCaseWhoseLayoutsCostThePassLeast) {
  const ConvChain chain;
  ASSERT_TRUE(chain.error.empty()) << chain.error;
  const mp::ModelIR& m = chain.models.front();
  const mp::Layer *a = chain.a, *b = chain.b, *y = chain.y;
  auto costs_with = [&](double plain_us) {
    CostTable costs;
    costs.system_id = 1;
    costs.best[{a->key, "f32", "fp32", ""}] = onednn_time(1, "jit:blocked", 10);
    costs.best[{b->key, "f32", "fp32", ""}] = onednn_time(3, "gemm", 10);
    costs.best[{y->key, "f32", "fp32", ""}] = onednn_time(4, "eltwise", 5);
    costs.passed[{a->key, "f32", "fp32", ""}] = {onednn_time(1, "jit:blocked", 10),
                                                 onednn_time(2, "gemm", plain_us)};
    costs.conversions[{a->key, "f32", "fp32", CaseFeeds{"jit:blocked", ""}}] = {
        onednn_time(10, "reorder", 3, "src:abcd>aBcd8b"), onednn_time(11, "reorder", 4, "dst:abcd>aBcd8b")};
    return costs;
  };
  {
    const CostTable costs = costs_with(12);
    ModelBounds bounds;
    bounds.dtype = "f32";
    bounds.layers = layer_costs(m, costs, "f32");
    const LayerCost& conv_a = *std::find_if(bounds.layers.begin(), bounds.layers.end(),
                                            [&](const LayerCost& c) { return c.index == a->index; });
    EXPECT_EQ(conv_a.in_layout, "aBcd8b");
    estimate_conversions(bounds, m);
    EXPECT_DOUBLE_EQ(bounds.E_conversions_us, 4);  // a's output, converted for b
    EXPECT_EQ(choose_layouts(bounds, m, costs), 1);
    EXPECT_EQ(conv_a.e_case, "gemm/");
    EXPECT_DOUBLE_EQ(conv_a.e_case_us, 12);
    EXPECT_EQ(conv_a.in_layout, "");
    EXPECT_EQ(conv_a.out_layout, "");
    estimate_conversions(bounds, m);
    EXPECT_DOUBLE_EQ(bounds.E_conversions_us, 0);
  }
  {
    // An XNNPACK case: its conversions are "src:nchw>nhwc" and "dst:nhwc>nchw", and its layouts
    // NHWC both ways, spelled as oneDNN's channels-last ("acdb": the replay's ports call both so).
    CostTable costs = costs_with(12);
    costs.best[{a->key, "f32", "fp32", ""}] = onednn_time(5, "convolution2d_nhwc_f32", 9, "nhwc");
    costs.conversions[{a->key, "f32", "fp32", CaseFeeds{"", "nhwc"}}] = {
        onednn_time(12, "transpose", 2, "src:nchw>nhwc"), onednn_time(13, "transpose", 2.5, "dst:nhwc>nchw")};
    const auto layers = layer_costs(m, costs, "f32");
    const LayerCost& conv_a =
        *std::find_if(layers.begin(), layers.end(), [&](const LayerCost& c) { return c.index == a->index; });
    EXPECT_EQ(conv_a.in_layout, "acdb");
    EXPECT_EQ(conv_a.out_layout, "acdb");
    EXPECT_DOUBLE_EQ(conv_a.out_conversion_us, 2.5);
  }
  {
    const CostTable costs = costs_with(16);
    ModelBounds bounds;
    bounds.dtype = "f32";
    bounds.layers = layer_costs(m, costs, "f32");
    EXPECT_EQ(choose_layouts(bounds, m, costs), 0);
    estimate_conversions(bounds, m);
    EXPECT_DOUBLE_EQ(bounds.E_conversions_us, 4);
  }
  {
    // A second blocked implementation of a: the conversion cases were planned beside the first
    // (they feed "jit:blocked"), so none names "jit:other"; its formats (cases.params) do, and it is
    // charged the configuration's conversions to those formats. A plain format leaves its side
    // plain; one that no measured conversion writes is still the case's (the replay reads it off
    // the built kernel), charged its bytes at kConversionBytesPerUs: a's output, 1x8x8x8 floats
    // (2,048 bytes), 0.2048 µs. Until 2026-12-07 it was taken as plain, and every reader of the
    // case's output was charged a conversion the replay does not run (squeezenet1_1 at batch 1: 24
    // µs of E's conversions, none in its replay).
    CostTable costs = costs_with(12);
    CaseTime other = onednn_time(6, "jit:other", 9);
    other.formats = "src:aBcd8b wei:ABcd8b8a dst:aBcd8b";
    costs.best[{a->key, "f32", "fp32", ""}] = other;
    auto layers = layer_costs(m, costs, "f32");
    auto conv_a = [&] {
      return *std::find_if(layers.begin(), layers.end(),
                           [&](const LayerCost& c) { return c.index == a->index; });
    };
    EXPECT_EQ(conv_a().in_layout, "aBcd8b");
    EXPECT_EQ(conv_a().out_layout, "aBcd8b");
    EXPECT_DOUBLE_EQ(conv_a().in_conversion_us, 3);
    EXPECT_DOUBLE_EQ(conv_a().out_conversion_us, 4);
    other.formats = "src:abcd wei:ABcd8b8a dst:aBcd16b";  // plain in; no conversion writes aBcd16b
    costs.best[{a->key, "f32", "fp32", ""}] = other;
    layers = layer_costs(m, costs, "f32");
    EXPECT_EQ(conv_a().in_layout, "");
    EXPECT_EQ(conv_a().out_layout, "aBcd16b");
    EXPECT_DOUBLE_EQ(conv_a().in_conversion_us, 0);
    EXPECT_DOUBLE_EQ(conv_a().out_conversion_us, 2048 / kConversionBytesPerUs);
  }
}

// A layer E's layout choice moves to another case reads that case's own cold readings where the
// cache stage timed it (layout_choice_cases names it for the stage), else its time alone scaled by
// its own case's readings. Until 2026-12-07 always the latter: mobilenet_v2's 1x1 expansion 16 ->
// 96 at 112x112 moved from `jit_1x1` (204.6 µs, 242 in E) to `brgconv_1x1`, whose write into a cold
// 4.8 MB output the replay read at 402 µs in the graph.
TEST(Estimate, AMovedLayerReadsItsOwnCasesColdReadings) {
  const ConvChain chain;
  ASSERT_TRUE(chain.error.empty()) << chain.error;
  const mp::ModelIR& m = chain.models.front();
  const mp::Layer *a = chain.a, *b = chain.b, *y = chain.y;
  CostTable costs;
  costs.system_id = 1;
  // A private cache that holds the whole model: m = 0 and no activation is cold, so a case's cold
  // mix is its reading from the last-level cache.
  costs.private_cache_bytes = int64_t{1} << 30;
  costs.best[{a->key, "f32", "fp32", ""}] = onednn_time(1, "jit:blocked", 10);
  costs.best[{b->key, "f32", "fp32", ""}] = onednn_time(3, "gemm", 10);
  costs.best[{y->key, "f32", "fp32", ""}] = onednn_time(4, "eltwise", 5);
  costs.passed[{a->key, "f32", "fp32", ""}] = {onednn_time(1, "jit:blocked", 10), onednn_time(2, "gemm", 12)};
  costs.conversions[{a->key, "f32", "fp32", CaseFeeds{"jit:blocked", ""}}] = {
      onednn_time(10, "reorder", 3, "src:abcd>aBcd8b"), onednn_time(11, "reorder", 4, "dst:abcd>aBcd8b")};
  costs.cache_times[{1, 1}] = {{"warm", 10}, {"llc", 15}, {"memory", 20}};
  costs.cache_times[{1, 3}] = {{"warm", 10}, {"llc", 10}, {"memory", 10}};
  costs.cache_times[{1, 4}] = {{"warm", 5}, {"llc", 5}, {"memory", 5}};
  // What the cache stage is asked to time besides S's cases: a's move to the plain case.
  EXPECT_EQ(layout_choice_cases(m, costs, "f32"), (std::vector<std::pair<std::string, int>>{{"gemm/", 1}}));
  auto e_of_a = [&] {
    ModelBounds bounds;
    bounds.dtype = "f32";
    bounds.layers = layer_costs(m, costs, "f32");
    estimate_E(bounds, m, costs);
    EXPECT_EQ(bounds.E_alternatives, 1);
    const LayerCost& conv_a = *std::find_if(bounds.layers.begin(), bounds.layers.end(),
                                            [&](const LayerCost& c) { return c.index == a->index; });
    EXPECT_EQ(conv_a.e_case, "gemm/");
    EXPECT_EQ(conv_a.e_case_id, 2);
    return conv_a.e_us.value_or(0);
  };
  // Without the moved case's readings: its 12 µs × a's own 15 / 10.
  EXPECT_DOUBLE_EQ(e_of_a(), 18);
  // With them: its own cold mix, never below its time alone.
  costs.cache_times[{1, 2}] = {{"warm", 12}, {"llc", 30}, {"memory", 40}};
  EXPECT_DOUBLE_EQ(e_of_a(), 30);
  costs.cache_times[{1, 2}] = {{"warm", 12}, {"llc", 11}, {"memory", 11}};
  EXPECT_DOUBLE_EQ(e_of_a(), 12);
}

}  // namespace
}  // namespace floorline::analyzer
