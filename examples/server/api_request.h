// Parsing of the OpenAI request bodies (/v1/chat/completions, /v1/completions) into what the
// engine takes. This is the server's untrusted input: every field that maps onto the engine is
// type- and range-checked and answered with a 400 naming the field; unknown fields are ignored
// as OpenAI does; fields whose meaning the engine cannot honour yet (response_format,
// logit_bias, a forced tool_choice with thinking on, ...) are refused rather than silently
// dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "examples/server/api_error.h"
#include "examples/server/gen_config.h"
#include "gannet/gannet.h"

namespace gannet_server {

enum class Endpoint { kChat, kCompletion };

struct ChatMessage {
  std::string role;
  std::string content;
};

struct Prompt {
  bool is_ids = false;
  std::string text;
  std::vector<int32_t> ids;
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<ChatMessage> messages;  // chat: role and text of each message
  // chat: the messages and tools normalised for the model's template (chat_json of the C ABI):
  // tool_calls with object arguments, tool messages, content parts as sent.
  nlohmann::json chat_messages;
  nlohmann::json tools;  // null: none offered
  // tool_choice: "auto" (the default), "none" (tools not offered), "required" (a call to one
  // of `tools`, the model picks) or {"type": "function", "function": {"name"}} (kNamed).
  // The forced two begin the reply with ForcedReplyPrefix(), written into the prompt (with
  // thinking on, after the model's thought: call_after_thought.h).
  enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;    // kNamed
  bool has_tool_messages = false;  // tool calls or results in the conversation
  std::vector<Prompt> prompts;     // completions: one or more (a batch)
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  std::optional<int32_t> max_tokens;
  int32_t min_tokens = 0;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence_penalty = 0, frequency_penalty = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // logprobs: chat `logprobs: true` (+ top_logprobs), completions `logprobs: N`.
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool echo = false;  // completions: the prompt before the completion
  bool add_generation_prompt = true;
  bool enable_thinking = false;  // chat_template_kwargs.enable_thinking
  std::string user;
  // chat: the bytes of each image_url part's data: URL, in order (each part became a
  // {"type": "image"} part of chat_messages).
  std::vector<std::string> images;
};

// Largest n (choices per prompt) and prompts per completions batch.
inline constexpr int kMaxChoices = 128;
inline constexpr int kMaxJsonDepth = 64;
// nlohmann builds the DOM without recursion, but a body of a million '[' still costs a node
// each: a body nested deeper than kMaxJsonDepth (any real request is far shallower) is refused
// before parsing. Strings are skipped, escapes included.
bool NestedTooDeep(const std::string& body);

// Parses a body. On failure returns the error (400, naming the field).
std::variant<ApiRequest, ApiError> ParseApiRequest(Endpoint endpoint, const std::string& body);

// Strings and arrays a gannet_request_t points into; must outlive the submit call.
struct RequestStorage {
  std::string chat_json;
  std::string reply_prefix;
  std::vector<const char*> stop_ptrs;
  std::vector<int32_t> stop_ids;
  std::vector<gannet_image_t> images;  // point into ApiRequest::images
};

// The chat object for the C ABI's chat_json: {"messages": ..., "tools": ...}.
std::string ChatJson(const ApiRequest& r);

// A forced tool choice's start of the reply after "<|tool_call>": "call:" (required) or
// "call:NAME{" (named); "" for auto and none.
std::string ForcedCallStart(const ApiRequest& r);
// A forced choice with thinking on: the call follows the model's thought, in a second engine
// request (call_after_thought.h); FillEngineRequest then fills the first, without the call.
bool ForcesCallAfterThought(const ApiRequest& r);
// The whole forced start as the C ABI's reply_prefix: "<|tool_call>" + ForcedCallStart(r).
std::string ForcedReplyPrefix(const ApiRequest& r);
// The function names of `tools`, in order.
std::vector<std::string> ToolNames(const ApiRequest& r);

// Fills `out` for prompt `prompt_index` (completions; 0 for chat) and choice `choice` (n > 1:
// a given seed becomes seed + choice so the choices differ yet stay repeatable).
void FillEngineRequest(const ApiRequest& r, const SamplingDefaults& defaults, size_t prompt_index,
                       int choice, RequestStorage* storage, gannet_request_t* out);

}  // namespace gannet_server
