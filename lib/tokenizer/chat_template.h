// Renders a conversation into Gemma-4's prompt text, byte for byte what the model's own
// chat_template.jinja produces for text-only messages (no tools, no images), so the engine needs
// no Jinja interpreter. Encode the result with add_special_tokens = false: it already starts
// with "<bos>".
//
// Shape (tests/tokenizer/chat_template_test.cc checks it against Jinja renderings of the real
// template; tools/tokenizer/make_chat_template_data.py names the copy that was used):
//   <bos>
//   [<|turn>system\n [<|think|>\n] [first system/developer message, trimmed] <turn|>\n]
//        — present when thinking is enabled or the first message is system/developer
//   per message: <|turn>{role}\n [<|channel>thought\n{reasoning}\n<channel|>] {content} <turn|>\n
//        role "assistant" is written "model"; an assistant message right after another assistant
//        message continues the same turn (no second opener); user/system text is trimmed (Python
//        str.strip); model text has <|channel>…<channel|> thoughts removed, then is trimmed;
//        reasoning is rendered only after the last user message or with preserve_thinking
//   generation prompt: <|turn>model\n, followed on 31B/26B-A4B (kLarge) by an empty thought
//        channel <|channel>thought\n<channel|> when thinking is off; E2B/E4B (kSmall) end at the
//        bare opener.
//
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gannet::tokenizer {

enum class ChatTemplateVariant {
  kLarge,  // gemma-4-31B-it, gemma-4-26B-A4B-it
  kSmall,  // gemma-4-E2B-it, gemma-4-E4B-it
};

struct ChatMessage {
  std::string role;  // "system", "developer", "user", "assistant" (or "model")
  std::string content;
  std::string reasoning;  // optional chain of thought of an earlier model turn
};

struct ChatTemplateOptions {
  ChatTemplateVariant variant = ChatTemplateVariant::kLarge;
  bool add_generation_prompt = true;
  bool enable_thinking = false;
  bool preserve_thinking = false;  // keep reasoning of turns before the last user message
  std::string bos_token = "<bos>";
};

// The roles RenderChatTemplate accepts: system, developer, user, assistant and model.
bool IsKnownChatRole(std::string_view role);

// InvalidArgument for an empty conversation, an unknown role (tool messages are not supported),
// or text that is not valid UTF-8.
// content_ranges (optional) receives the byte ranges [begin, end) of the result that came from
// the messages' content and reasoning (sorted, disjoint): the text a user wrote, which
// Tokenizer::Encode's plain_ranges can keep from being read as control tokens.
absl::StatusOr<std::string> RenderChatTemplate(
    absl::Span<const ChatMessage> messages, const ChatTemplateOptions& options,
    std::vector<std::pair<size_t, size_t>>* content_ranges = nullptr);

}  // namespace gannet::tokenizer
