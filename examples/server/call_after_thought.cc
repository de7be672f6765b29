#include "examples/server/call_after_thought.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace gannet_server {
namespace {

using nlohmann::json;

bool Tokenize(const gannet_tokenizer_t* tok, const std::string& text, std::vector<int32_t>* ids) {
  size_t n = 0;
  if (gannet_tokenize(tok, text.data(), text.size(), 0, nullptr, 0, &n) != GANNET_OK) return false;
  ids->resize(n);
  if (gannet_tokenize(tok, text.data(), text.size(), 0, ids->data(), ids->size(), &n) !=
      GANNET_OK) {
    return false;
  }
  ids->resize(n);
  return true;
}

size_t DecodedLength(const gannet_tokenizer_t* tok, const std::vector<int32_t>& ids, int32_t skip) {
  size_t len = 0;
  if (gannet_detokenize(tok, ids.data(), ids.size(), skip, nullptr, 0, &len) != GANNET_OK) return 0;
  return len;
}

// The first string (object keys included) of `v` that spells a special token, or null.
const std::string* FindSpelling(const gannet_tokenizer_t* tok, const json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return SpellsSpecialToken(tok, s) ? &s : nullptr;
  }
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (SpellsSpecialToken(tok, it.key())) return &it.key();
      if (const std::string* s = FindSpelling(tok, it.value())) return s;
    }
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (const std::string* s = FindSpelling(tok, e)) return s;
    }
  }
  return nullptr;
}

ApiError Internal(const std::string& what) {
  return ApiError{500, what + ": " + gannet_last_error_message(), "server_error", ""};
}

}  // namespace

bool ThoughtPhase::Keep(int32_t token_id) {
  switch (state_) {
    case State::kStart:
      if (token_id != open_id_ || open_id_ < 0) {
        // The model answers without thinking: its answer is the call, forced from here on.
        state_ = State::kSkipped;
        cancel_now_ = true;
        return false;
      }
      state_ = State::kThought;
      thought_.push_back(token_id);
      return true;
    case State::kThought:
      thought_.push_back(token_id);
      if (token_id == close_id_) {
        state_ = State::kClosed;
        // Phase 1 stops at <channel|> by itself; with min_tokens the stop is ignored until
        // then, and the engine must be told.
        cancel_now_ = true;
      }
      return true;
    case State::kClosed:
    case State::kSkipped:
      return false;
  }
  return false;
}

CallPhasePlan PlanCallPhase(int32_t max_tokens, int32_t min_tokens, size_t thought,
                            size_t prompt_len, int32_t max_model_len) {
  CallPhasePlan plan;
  const int64_t used = static_cast<int64_t>(thought);
  if (max_tokens > 0) {
    if (used >= max_tokens) return plan;
    plan.max_tokens = static_cast<int32_t>(max_tokens - used);
  }
  // The engine needs the prompt and at least one generated token inside the context.
  if (max_model_len > 0 && static_cast<int64_t>(prompt_len) >= max_model_len) return plan;
  plan.min_tokens = static_cast<int32_t>(std::max<int64_t>(0, min_tokens - used));
  if (plan.max_tokens > 0) plan.min_tokens = std::min(plan.min_tokens, plan.max_tokens);
  plan.submit = true;
  return plan;
}

uint64_t CallPhaseSeed(uint64_t seed) {
  // SplitMix64's finaliser: a bijection, so distinct seeds stay distinct.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool SpellsSpecialToken(const gannet_tokenizer_t* tok, const std::string& text) {
  std::vector<int32_t> ids;
  if (text.empty() || !Tokenize(tok, text, &ids)) return false;
  // Special tokens are the ones detokenizing with skip_special_tokens drops.
  return DecodedLength(tok, ids, 1) != DecodedLength(tok, ids, 0);
}

std::variant<CallAfterThought, ApiError> PrepareCallAfterThought(const gannet_tokenizer_t* tok,
                                                                 const ApiRequest& r) {
  if (!tok) {
    return BadRequest("a forced tool call with thinking on needs the model's tokenizer",
                      "tool_choice");
  }
  for (const json* part : {&r.chat_messages, &r.tools}) {
    if (const std::string* s = FindSpelling(tok, *part)) {
      std::string shown = s->substr(0, 40);
      return BadRequest(
          "cannot force a tool call after the model's thought (chat_template_kwargs."
          "enable_thinking) when the conversation's text spells a special token of the model, "
          "as \"" +
              shown + (s->size() > 40 ? "...\"" : "\"") +
              " does: the call is resumed from token ids, and the server cannot tokenize such "
              "text as the engine does (split_special_tokens); remove the markup, turn thinking "
              "off or use tool_choice \"auto\"",
          "tool_choice");
    }
  }
  const std::string chat = ChatJson(r);
  size_t len = 0;
  if (gannet_apply_chat_template_json(tok, chat.c_str(), 1, 1, nullptr, 0, &len) != GANNET_OK) {
    return BadRequest(gannet_last_error_message(), "messages");
  }
  std::string text(len + 1, '\0');
  if (gannet_apply_chat_template_json(tok, chat.c_str(), 1, 1, text.data(), text.size(), &len) !=
      GANNET_OK) {
    return Internal("rendering the chat");
  }
  text.resize(len);
  CallAfterThought out;
  if (!Tokenize(tok, text, &out.prompt)) return Internal("tokenizing the chat");
  if (!Tokenize(tok, ForcedReplyPrefix(r), &out.prefix)) return Internal("tokenizing the call");
  return out;
}

void AddStopToken(int32_t id, RequestStorage* storage, gannet_request_t* out) {
  storage->stop_ids.push_back(id);
  out->stop_token_ids = storage->stop_ids.data();
  out->num_stop_token_ids = storage->stop_ids.size();
}

void FillCallPhaseRequest(const ApiRequest& r, const SamplingDefaults& defaults, int choice,
                          const std::vector<int32_t>& prompt, int32_t max_tokens,
                          int32_t min_tokens, RequestStorage* storage, gannet_request_t* out) {
  FillEngineRequest(r, defaults, 0, choice, storage, out);
  // The prompt is token ids: the chat's fields do not apply.
  out->chat_json = nullptr;
  out->reply_prefix = nullptr;
  out->add_generation_prompt = 0;
  out->enable_thinking = 0;
  out->split_special_tokens = 0;
  out->prompt_tokens = prompt.data();
  out->num_prompt_tokens = prompt.size();
  out->max_tokens = max_tokens;
  out->min_tokens = min_tokens;
  if (out->seed_mode == GANNET_SEED_FIXED) out->seed = CallPhaseSeed(out->seed);
}

}  // namespace gannet_server
