// floorline/analyzer/llm.hpp — the language-model view: what the bounds say about a transformer
// decoder's prefill and decode steps.
//
// A decoder is recognized by its KV cache among the graph's values: inputs whose name contains
// "past" (past_key_values.{i}.key, past_key, past_value) and outputs whose name contains "present"
// (present.{i}.key), each [batch, kv_heads, tokens, head_dim] — the layout of PyTorch's and ONNX
// Runtime's exports. One processed scenario of a decoder (mp::ModelIR, at one batch and one value of
// each named dim) is one step:
//   new_tokens   tokens each sequence adds in this step: present's tokens axis (dim -2) minus past's
//                (the present tokens alone where the graph takes no past)
//   past_tokens  tokens each sequence has in the cache it reads (past's dim -2; 0 without past)
//   phase        "decode" where one token is added to a cache (new_tokens = 1 and a past input, which
//                may be empty), else "prefill" (the prompt's tokens at once)
//   TTFT bound   S of a prefill step: no runtime on this system produces the first token faster
//   TPOT bound   S of a decode step at its past length: no runtime produces the next token faster
//   tokens/s     batch × new_tokens / S
//   KV cache     bytes of the present outputs (the cache after the step); kv_read bytes of the past
//                inputs (what the step reads of it)
//   memory floor (weight bytes + kv_read bytes) / the system's memory bandwidth (the "memory"
//                calibration, gen::calibrate: a copy of at least 4 × the largest cache, so every
//                byte comes from memory): a decode step whose weights and cache exceed the caches
//                streams them at least once, and S / floor says how close the best kernels come to
//                that memory roofline (Williams et al., "Roofline", CACM 2009). S, timed with each
//                layer's weights warm in the caches, can be below it: the floor is a reference for
//                what a real decode step pays, not a bound
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "floorline/model_processor/model.hpp"

namespace floorline::analyzer {

struct DecoderStep {
  std::string phase;  // "prefill" or "decode"
  int64_t new_tokens = 0;
  int64_t past_tokens = 0;
  int64_t weight_bytes = 0;               // mp::ModelIR::weight_bytes
  int64_t kv_read_bytes = 0;              // Σ bytes of the past inputs
  int64_t kv_cache_bytes = 0;             // Σ bytes of the present outputs
  double tokens_per_s = 0;                // batch × new_tokens / S (0 when S is 0)
  std::optional<double> memory_floor_us;  // none without a calibrated bandwidth
  std::optional<double> S_over_floor;
  // A merged decoder's step: the branch of its If the scenario runs (mp::ModelIR::merged_branch);
  // "" for a decoder without one.
  std::string if_branch;
};

// The step `model` is, when it is a decoder (a KV cache among its graph inputs or outputs with
// known shapes); nullopt otherwise. `S_us`: the model's S; `bytes_per_s`: the calibrated bandwidth
// (none: no floor).
std::optional<DecoderStep> decoder_step(const mp::ModelIR& model, double S_us,
                                        std::optional<double> bytes_per_s);

}  // namespace floorline::analyzer
