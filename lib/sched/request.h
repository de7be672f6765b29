// A request as the scheduler tracks it: the prompt, what has been generated, how far its KV is
// computed, and its stop conditions. Owned by the Scheduler; the engine reads it when it turns
// sampled tokens into events. Not thread-safe (engine thread only).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/common/image_blocks.h"
#include "lib/sampling/sampling.h"

namespace gannet::sched {

using Clock = std::chrono::steady_clock;

enum class RequestState : uint8_t { kWaiting, kRunning, kFinished };

enum class FinishReason : uint8_t { kNone, kStop, kLength, kCancelled, kError };

struct RequestSpec {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  sampling::SamplingParams sampling;
  int32_t max_tokens = 0;  // 0 = until the context is full
  int32_t min_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  int32_t logprobs = 0;
  int32_t priority = 0;
  Clock::time_point deadline = Clock::time_point::max();
  // Prompt positions that stand for images (in position order, disjoint): with a model whose
  // use_bidirectional_attention is "vision", each block's tokens attend to each other in both
  // directions on sliding layers. Set by the engine; not yet reachable through the C ABI.
  std::vector<ImageBlock> image_blocks;

  // Whether a stop id or stop string as the request's n-th output token (1-based) ends it:
  // min_tokens holds back both. Asked by the scheduler and the drafts' cut (stop ids) and by the
  // engine's text output (stop strings).
  bool StopsAt(int64_t n) const { return n > min_tokens; }
};

struct Request {
  explicit Request(RequestSpec s)
      : spec(std::move(s)), tokens(spec.prompt), prompt_len(static_cast<int64_t>(tokens.size())) {}

  RequestSpec spec;
  RequestState state = RequestState::kWaiting;
  uint64_t arrival = 0;         // submission order, for FCFS among equal priorities
  std::vector<int32_t> tokens;  // prompt followed by the generated tokens
  int64_t prompt_len = 0;
  // Tokens whose KV is computed: a prefix of `tokens`. After each decode step the newest sampled
  // token is not computed yet.
  int64_t num_computed = 0;
  int32_t num_cached_prompt = 0;  // prompt tokens served from the prefix cache
  // With image blocks (set by Scheduler::Add): the block id of each token (ImageBlockIds, -1 for
  // text, generated tokens included) and each KV page's prefix-cache salt (ImagePageSalts).
  std::vector<int32_t> image_block_ids;
  std::vector<uint64_t> page_salts;
  // With images: the vision tower's features of every image soft token, [soft tokens of all
  // image_blocks, text hidden] f32 in prompt order (set by the engine at admission; they replace
  // those tokens' embeddings each time the prompt is computed, preemption included).
  std::vector<float> image_features;
  bool has_kv_sequence = false;  // a KV-manager sequence exists for this request
  int32_t num_preemptions = 0;
  sampling::TokenCounts counts;  // filled only when penalties are used
  FinishReason finish = FinishReason::kNone;

  // Speculative decoding (lib/spec). A decoding request may carry drafts: tokens proposed to
  // follow `tokens`, verified by the next step that schedules it ([tokens.back(), drafts...] in
  // one chunk, verify_input) and then cleared. Drafts are never part of `tokens`.
  bool speculate = false;  // the engine has a drafter and the request did not opt out
  std::vector<int32_t> drafts;
  std::vector<float> draft_logits;    // [drafts, vocab]: the drafter's rows, for rejection sampling
  std::vector<int32_t> verify_input;  // set by the plan that verifies the drafts
  int64_t num_drafted = 0;            // drafts verified so far
  int64_t num_accepted = 0;           // of which accepted

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - prompt_len; }
  int64_t kv_id() const { return static_cast<int64_t>(spec.id); }
  void ClearDrafts() {
    drafts.clear();
    draft_logits.clear();
    verify_input.clear();
  }
};

// How many drafts could still be useful to a decoding request: a verify step appends up to
// drafts + 1 tokens, which must stay within max_tokens and the context (max_model_len).
inline int64_t MaxUsefulDrafts(const Request& r, int64_t max_model_len) {
  int64_t room = max_model_len - r.num_tokens() - 1;
  if (r.spec.max_tokens > 0) room = std::min<int64_t>(room, r.spec.max_tokens - r.num_output() - 1);
  return std::max<int64_t>(0, room);
}

}  // namespace gannet::sched
