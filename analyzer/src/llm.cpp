// The language-model view (llm.hpp): a decoder's step from its graph values.
#include "floorline/analyzer/llm.hpp"

namespace floorline::analyzer {

namespace {

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// a + b, saturating at INT64_MAX (a hostile graph may declare more bytes than int64 counts).
void add_bytes(int64_t& a, int64_t b) {
  if (__builtin_add_overflow(a, b, &a)) a = INT64_MAX;
}

// The tokens axis of a KV tensor [batch, kv_heads, tokens, head_dim]: dim -2.
std::optional<int64_t> tokens_of(const mp::GraphValue& v) {
  if (!v.shape_known || v.shape.size() < 3) return std::nullopt;
  return v.shape[v.shape.size() - 2];
}

}  // namespace

std::optional<DecoderStep> decoder_step(const mp::ModelIR& model, double S_us,
                                        std::optional<double> bytes_per_s) {
  DecoderStep d;
  std::optional<int64_t> past, present;
  bool has_past = false;
  for (const auto& v : model.inputs)
    if (contains(v.name, "past")) {
      const auto t = tokens_of(v);
      if (!t) return std::nullopt;  // a cache of unknown shape: no figures
      has_past = true;
      past = past ? std::max(*past, *t) : *t;
      add_bytes(d.kv_read_bytes, v.bytes());
    }
  for (const auto& v : model.outputs)
    if (contains(v.name, "present")) {
      const auto t = tokens_of(v);
      if (!t) return std::nullopt;
      present = present ? std::max(*present, *t) : *t;
      add_bytes(d.kv_cache_bytes, v.bytes());
    }
  if (!present) return std::nullopt;  // no cache written: not a decoder step we can describe
  d.past_tokens = has_past ? *past : 0;
  d.new_tokens = *present - d.past_tokens;
  if (d.new_tokens < 0) return std::nullopt;
  d.phase = has_past && d.new_tokens == 1 ? "decode" : "prefill";
  d.weight_bytes = model.weight_bytes;
  d.if_branch = model.merged_branch;
  if (S_us > 0) d.tokens_per_s = static_cast<double>(model.batch * d.new_tokens) * 1e6 / S_us;
  if (bytes_per_s && *bytes_per_s > 0) {
    d.memory_floor_us =
        (static_cast<double>(d.weight_bytes) + static_cast<double>(d.kv_read_bytes)) / *bytes_per_s * 1e6;
    if (*d.memory_floor_us > 0 && S_us > 0) d.S_over_floor = S_us / *d.memory_floor_us;
  }
  return d;
}

}  // namespace floorline::analyzer
