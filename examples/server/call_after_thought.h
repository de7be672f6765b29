// A forced tool choice ("required" or a named function) with thinking on: the model thinks
// freely, then its answer is made to start with the call. One engine request cannot stop where
// the thought closes and resume with the call forced, so a choice runs as two engine requests
// (docs/chat-templates.md section 5):
//   1. the chat with thinking on and <channel|> as an extra stop token: the thought;
//   2. token ids: phase 1's prompt + the thought's tokens + the forced start of the call, so the
//      model sees exactly what one request would have held (and the prefix cache serves all but
//      the forced tokens).
// ThoughtPhase follows phase 1's tokens; PlanCallPhase sizes phase 2; PrepareCallAfterThought
// computes phase 1's prompt ids through the public tokenizer calls.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "examples/server/api_error.h"
#include "examples/server/api_request.h"
#include "gannet/gannet.h"

namespace gannet_server {

// Phase 1 token by token. The reply keeps the thought: <|channel>, the thought's tokens and
// <channel|>. A reply that does not open the channel with its first token is an answer, and
// the answer must be the call: that token is dropped and the call is forced at once. Tokens
// after the thought closed (min_tokens can make the engine write past the stop token) are
// dropped too. Either way the caller cancels phase 1 (cancel_now) and waits for its terminal
// event.
class ThoughtPhase {
 public:
  ThoughtPhase() = default;
  // The ids of <|channel> and <channel|>.
  ThoughtPhase(int32_t open_id, int32_t close_id) : open_id_(open_id), close_id_(close_id) {}

  // One TOKEN event of phase 1: true = part of the reply (feed it on, count it); false = drop.
  bool Keep(int32_t token_id);
  // After Keep: phase 1 has served its purpose and should be cancelled (once).
  bool cancel_now() const { return cancel_now_; }
  void cancelled() { cancel_now_ = false; }
  // At phase 1's terminal event: whether the call follows (the thought closed, or was never
  // opened); otherwise the reply ends with phase 1 (max_tokens, the context, a stop token or
  // string inside the thought).
  bool call_follows() const { return state_ == State::kClosed || state_ == State::kSkipped; }
  // The tokens the reply kept: the thought, markers included (empty when it was skipped).
  const std::vector<int32_t>& thought() const { return thought_; }

 private:
  enum class State { kStart, kThought, kClosed, kSkipped };
  int32_t open_id_ = -1, close_id_ = -1;
  State state_ = State::kStart;
  bool cancel_now_ = false;
  std::vector<int32_t> thought_;
};

// Phase 2's size, or why there is none.
struct CallPhasePlan {
  bool submit = false;     // false: the reply ends after the thought with finish_reason length
  int32_t max_tokens = 0;  // the engine's max_tokens (0: until the context is full)
  int32_t min_tokens = 0;
};
// `max_tokens` and `min_tokens` of the whole reply (0: no limit), `thought` tokens already
// generated, phase 2's prompt length and the engine's max_model_len: max_tokens bounds the
// two phases together, and the call needs room for at least one token.
CallPhasePlan PlanCallPhase(int32_t max_tokens, int32_t min_tokens, size_t thought,
                            size_t prompt_len, int32_t max_model_len);

// Phase 2 samples with a seed derived from the choice's (so its draws do not repeat phase 1's
// first ones): same seed, same reply.
uint64_t CallPhaseSeed(uint64_t seed);

// Phase 1: after FillEngineRequest (which leaves the call out), <channel|> as one more stop
// token, beside the request's own and the engine's defaults.
void AddStopToken(int32_t id, RequestStorage* storage, gannet_request_t* out);
// Phase 2 of choice `choice`: the request's sampling, stops and logprobs, `prompt` as token ids,
// the plan's max_tokens and min_tokens, a seed from CallPhaseSeed when the request fixes one.
void FillCallPhaseRequest(const ApiRequest& r, const SamplingDefaults& defaults, int choice,
                          const std::vector<int32_t>& prompt, int32_t max_tokens,
                          int32_t min_tokens, RequestStorage* storage, gannet_request_t* out);

// What phase 2 is built from, the same for every choice of a request.
struct CallAfterThought {
  std::vector<int32_t> prompt;  // phase 1's prompt: the rendered chat, thinking on
  std::vector<int32_t> prefix;  // the forced start: "<|tool_call>call:NAME{" or "<|tool_call>call:"
};
// Renders and tokenizes the chat as the engine does for phase 1. The engine tokenizes the
// messages' text with split_special_tokens, which no public call offers; where the callers'
// text spells none of the vocabulary's special tokens both tokenizations agree, so a request
// whose text does spell one (in any message or tool) is refused with a 400 rather than given a
// phase 2 prompt that differs from phase 1's. The server also compares the count with phase 1's
// prompt length as the engine reports it.
std::variant<CallAfterThought, ApiError> PrepareCallAfterThought(const gannet_tokenizer_t* tok,
                                                                 const ApiRequest& r);

// Whether `text` holds the spelling of a special token ("<|turn>", "<bos>", ...) that the
// tokenizer would read as that token.
bool SpellsSpecialToken(const gannet_tokenizer_t* tok, const std::string& text);

}  // namespace gannet_server
