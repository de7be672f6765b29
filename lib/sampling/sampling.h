// Host-side sampling: turns one row of logits into the next token.
//
// Order of operations (as vLLM/HF apply them): penalties on the raw logits (repetition over prompt
// and output tokens, HF's rule: positive logits divided, negative multiplied; presence and
// frequency over output tokens, OpenAI's rule), then the draw of draw.h: the arg-max when greedy
// (DrawParams::greedy()), else temperature, top-k, top-p nucleus, min-p, and a draw in fixed point.
//
// Randomness is counter-based: the draw for output token i of a request uses the seed
// RowSeed(seed, i). So a request's output does not depend on what else is in the batch or on
// which path (host or backend) sampled it, and a request preempted and recomputed later draws
// exactly the same tokens.
//
// Logprobs, when asked for, are log-softmax values of the model's logits before penalties and
// temperature (what the model itself assigns), for the chosen token and the top-n.
//
// Thread-safe: pure functions; TokenCounts is per request.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "lib/sampling/draw.h"

namespace gannet::sampling {

// A request's sampling: the draw (its seed is the request's; row i draws with RowSeed(seed, i),
// RowDrawParams) and the penalties applied on the host before it. greedy() is DrawParams's rule.
struct SamplingParams : DrawParams {
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  bool needs_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// InvalidArgument naming the field: negative temperature, top_k < 0, top_p outside (0, 1],
// min_p outside [0, 1], repetition_penalty <= 0, non-finite values.
absl::Status ValidateSamplingParams(const SamplingParams& p);

// The tokens a request has seen, for penalties.
class TokenCounts {
 public:
  void AddPrompt(std::span<const int32_t> tokens);
  void AddOutput(int32_t token) { ++output_[token]; }
  const absl::flat_hash_map<int32_t, int32_t>& output() const { return output_; }
  const absl::flat_hash_map<int32_t, int32_t>& prompt() const { return prompt_; }

 private:
  absl::flat_hash_map<int32_t, int32_t> prompt_;
  absl::flat_hash_map<int32_t, int32_t> output_;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
};

// Samples output token number `step` (0-based) of a request. `scratch` is reused between calls.
SampleResult Sample(std::span<const float> logits, const SamplingParams& params,
                    const TokenCounts* counts, uint64_t step, int top_logprobs,
                    std::vector<float>* scratch);

// Logprobs of r->token and the top_logprobs best tokens (log-softmax of the model's logits).
void FillLogprobs(std::span<const float> logits, int top_logprobs, SampleResult* r);

// Repetition, presence and frequency penalties on one row of logits, in place.
void ApplyPenalties(const SamplingParams& params, const TokenCounts& counts,
                    std::vector<float>* logits);

// The draw parameters of output token `step` (what a backend samples with, see draw.h).
DrawParams RowDrawParams(const SamplingParams& params, uint64_t step);

}  // namespace gannet::sampling
