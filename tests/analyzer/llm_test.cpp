// The language-model view (llm.hpp): a decoder's step from its graph values, by hand and on the
// decoders of models/llm processed with named dims.
#include <gtest/gtest.h>

#include "floorline/analyzer/llm.hpp"
#include "floorline/model_processor/model.hpp"

namespace floorline::analyzer {
namespace {

mp::GraphValue value(const std::string& name, mp::Shape shape, mp::DataType t = mp::DataType::kF32) {
  mp::GraphValue v;
  v.name = name;
  v.shape = std::move(shape);
  v.shape_known = true;
  v.dtype = t;
  return v;
}

TEST(DecoderStep, DecodeAddsOneTokenToThePastAndStreamsWeightsAndCache) {
  mp::ModelIR m;
  m.batch = 2;
  m.weight_bytes = 1000000;
  m.inputs = {value("input_ids", {2, 1}, mp::DataType::kI64), value("past_key_values.0.key", {2, 4, 100, 8}),
              value("past_key_values.0.value", {2, 4, 100, 8})};
  m.outputs = {value("logits", {2, 1, 50}), value("present.0.key", {2, 4, 101, 8}),
               value("present.0.value", {2, 4, 101, 8})};
  const auto d = decoder_step(m, /*S_us=*/500, /*bytes_per_s=*/1e10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->phase, "decode");
  EXPECT_EQ(d->new_tokens, 1);
  EXPECT_EQ(d->past_tokens, 100);
  EXPECT_EQ(d->kv_read_bytes, 2 * (2 * 4 * 100 * 8 * 4));
  EXPECT_EQ(d->kv_cache_bytes, 2 * (2 * 4 * 101 * 8 * 4));
  EXPECT_DOUBLE_EQ(d->tokens_per_s, 2 * 1e6 / 500);  // two sequences, one token each, per 500 µs
  ASSERT_TRUE(d->memory_floor_us);
  EXPECT_DOUBLE_EQ(*d->memory_floor_us, (1000000.0 + 51200.0) / 1e10 * 1e6);
  EXPECT_DOUBLE_EQ(*d->S_over_floor, 500 / *d->memory_floor_us);
}

TEST(DecoderStep, APromptWithoutPastIsAPrefill) {
  mp::ModelIR m;
  m.inputs = {value("input_ids", {1, 128}, mp::DataType::kI64)};
  m.outputs = {value("logits", {1, 128, 50}), value("present.0.key", {1, 4, 128, 8})};
  const auto d = decoder_step(m, 1000, std::nullopt);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->phase, "prefill");
  EXPECT_EQ(d->new_tokens, 128);
  EXPECT_EQ(d->past_tokens, 0);
  EXPECT_DOUBLE_EQ(d->tokens_per_s, 128e3);
  EXPECT_FALSE(d->memory_floor_us);  // no calibrated bandwidth: no floor
  // Several new tokens on top of a cache: a prefill (of the next chunk), not a decode step.
  m.inputs.push_back(value("past_key", {1, 4, 16, 8}));
  m.outputs.back().shape = {1, 4, 144, 8};
  EXPECT_EQ(decoder_step(m, 1000, std::nullopt)->phase, "prefill");
}

TEST(DecoderStep, ModelsWithoutAKvCacheAreNoDecoders) {
  mp::ModelIR m;
  m.inputs = {value("input", {1, 3, 224, 224})};
  m.outputs = {value("output", {1, 1000})};
  EXPECT_FALSE(decoder_step(m, 100, 1e10));
  // A cache of unknown shape gives no figures rather than wrong ones.
  m.outputs.push_back(value("present.0.key", {1, 4, 8, 8}));
  m.outputs.back().shape_known = false;
  EXPECT_FALSE(decoder_step(m, 100, 1e10));
}

TEST(DecoderStep, TheZooDecodersWithNamedDims) {
  // GPT-2 small's shapes (12 layers, 12 heads of 64): its decode graph at 512 past tokens.
  mp::ProcessOptions o;
  o.dims = {{"sequence_length", {1}}, {"past_sequence_length", {512}}};
  auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/llm/gpt2_small_decode.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->at(0);
  EXPECT_EQ(m.name, "gpt2_small_decode[past_sequence_length=512;sequence_length=1]");
  const auto d = decoder_step(m, 1000, 1e10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->phase, "decode");
  EXPECT_EQ(d->past_tokens, 512);
  EXPECT_EQ(d->kv_read_bytes, int64_t{12} * 2 * 12 * 512 * 64 * 4);
  EXPECT_EQ(d->kv_cache_bytes, int64_t{12} * 2 * 12 * 513 * 64 * 4);
  // 165,396,480 parameters in f32 (models/llm/MANIFEST.json), less the scales and biases of the 25
  // LayerNorms (all ones, all zeros at initialization), which PyTorch's exporter stores once each:
  // 2 x 24 x 768 floats fewer; plus the graph's small constants.
  const int64_t params = int64_t{165396480} * 4, deduplicated = int64_t{2} * 24 * 768 * 4;
  EXPECT_GE(d->weight_bytes, params - deduplicated);
  EXPECT_LT(d->weight_bytes, params - deduplicated + (1 << 16));
  // Its prefill graph at 128 tokens: no past input.
  o.dims = {{"sequence_length", {128}}};
  auto p = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/llm/gpt2_small_prefill.onnx", o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const auto pd = decoder_step(p->at(0), 1000, 1e10);
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->phase, "prefill");
  EXPECT_EQ(pd->new_tokens, 128);
}

// A decoder not written for Floorline (tests/fixtures/outside_decoder: written from PyTorch
// primitives by someone who had not read Floorline's exporter, its dims named bsz, seq, n_past and
// n_total; multi-query attention broadcast by Expand, parallel attention and MLP blocks, partial
// rotary, a tied LM head): with its own dim names given, every layer shaped and none unsupported.
TEST(DecoderStep, AnOutsideDecoderWithItsOwnDimNames) {
  const std::string dir = std::string(FLOORLINE_SOURCE_DIR) + "/tests/fixtures/outside_decoder/";
  mp::ProcessOptions o;
  o.dims = {{"seq", {1}}, {"n_past", {512}}};
  auto r = mp::process_model(dir + "tp_decode.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->at(0);
  EXPECT_EQ(m.name, "tp_decode[n_past=512;seq=1]");
  int cost_bearing = 0;
  for (const auto& l : m.layers) {
    if (!l.cost_bearing()) continue;
    ++cost_bearing;
    EXPECT_NE(l.cost, mp::CostClass::kUnsupported) << l.name << " " << l.op_type;
    EXPECT_TRUE(l.shapes_known) << l.name << " " << l.op_type;
  }
  EXPECT_EQ(cost_bearing, 250);
  const auto d = decoder_step(m, 1000, 1e10);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->phase, "decode");
  EXPECT_EQ(d->new_tokens, 1);
  EXPECT_EQ(d->past_tokens, 512);
  // 6 layers, one K/V head of 64: the cache read and the cache after the step.
  EXPECT_EQ(d->kv_read_bytes, int64_t{6} * 2 * 512 * 64 * 4);
  EXPECT_EQ(d->kv_cache_bytes, int64_t{6} * 2 * 513 * 64 * 4);
  // 32,528,384 parameters in f32 (the embedding stored once, the head tied to it), less the 7
  // LayerNorms' scales and biases (all ones, all zeros at initialization), which PyTorch's exporter
  // stores once each: 2 x 6 x 512 floats fewer; plus the graph's small constants.
  const int64_t params = int64_t{32528384} * 4, deduplicated = int64_t{2} * 6 * 512 * 4;
  EXPECT_GE(d->weight_bytes, params - deduplicated);
  EXPECT_LT(d->weight_bytes, params - deduplicated + (1 << 16));
  // Its prefill graph at 128 tokens.
  o.dims = {{"seq", {128}}};
  auto p = mp::process_model(dir + "tp_prefill.onnx", o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const auto pd = decoder_step(p->at(0), 1000, 1e10);
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->phase, "prefill");
  EXPECT_EQ(pd->new_tokens, 128);
  for (const auto& l : p->at(0).layers) {
    if (l.cost_bearing()) {
      EXPECT_TRUE(l.shapes_known && l.cost != mp::CostClass::kUnsupported) << l.name;
    }
  }
}

// The merged decoder (tests/fixtures/composite/merged_decoder.onnx: an If on use_cache_branch whose
// then-branch concatenates the cache): each scenario's step names the branch its past length picks.
TEST(DecoderStep, AMergedDecoderStepNamesTheBranchItsIfRuns) {
  mp::ProcessOptions o;
  o.batches = {2};
  o.dims = {{"sequence_length", {3}}, {"past_sequence_length", {0, 5}}};
  auto r = mp::process_model(
      std::string(FLOORLINE_SOURCE_DIR) + "/tests/fixtures/composite/merged_decoder.onnx", o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  const auto none = decoder_step(r->at(0), 100, std::nullopt),
             cache = decoder_step(r->at(1), 100, std::nullopt);
  ASSERT_TRUE(none && cache);
  EXPECT_EQ(none->past_tokens, 0);
  EXPECT_EQ(none->if_branch, "else-branch (without the cache)");
  EXPECT_EQ(cache->past_tokens, 5);
  EXPECT_EQ(cache->new_tokens, 3);
  EXPECT_EQ(cache->if_branch, "then-branch (with the cache)");
  // A decoder without an If names none.
  mp::ModelIR plain = r->at(1);
  plain.merged_branch.clear();
  EXPECT_EQ(decoder_step(plain, 100, std::nullopt)->if_branch, "");
}

// The 1B Llama as ONNX Runtime's tools write it (models/llm/llama_1b_contrib.onnx: com.microsoft
// SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization, GroupQueryAttention with its
// rotary) and the same with 4-bit MatMulNBits weights: a decode step at 512 past tokens has every
// cost-bearing layer shaped and supported, and reads the cache of 22 layers, 4 K/V heads of 64.
TEST(DecoderStep, TheContribLlamasDecodeWithEveryLayerShapedAndSupported) {
  for (const char* file : {"llama_1b_contrib.onnx", "llama_1b_int4.onnx"}) {
    SCOPED_TRACE(file);
    mp::ProcessOptions o;
    o.dims = {{"sequence_length", {1}}, {"past_sequence_length", {512}}};
    auto r = mp::process_model(std::string(FLOORLINE_SOURCE_DIR) + "/models/llm/" + file, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& m = r->at(0);
    int cost_bearing = 0, nbits = 0;
    for (const auto& l : m.layers) {
      if (!l.cost_bearing()) continue;
      ++cost_bearing;
      EXPECT_NE(l.cost, mp::CostClass::kUnsupported) << l.name << " " << l.op_type;
      EXPECT_TRUE(l.shapes_known) << l.name << " " << l.op_type;
      if (l.config.kind == mp::LayerKind::kMatMulNBits) ++nbits;
    }
    EXPECT_GT(cost_bearing, 22 * 10);
    // Seven projections a layer (q, k, v, o, gate, up, down) and the LM head, 4-bit in the int4 file.
    EXPECT_EQ(nbits, std::string(file) == "llama_1b_int4.onnx" ? 22 * 7 + 1 : 0);
    const auto d = decoder_step(m, 1000, 1e10);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->phase, "decode");
    EXPECT_EQ(d->past_tokens, 512);
    EXPECT_EQ(d->kv_read_bytes, int64_t{22} * 2 * 4 * 512 * 64 * 4);
    EXPECT_EQ(d->kv_cache_bytes, int64_t{22} * 2 * 4 * 513 * 64 * 4);
  }
}

}  // namespace
}  // namespace floorline::analyzer
