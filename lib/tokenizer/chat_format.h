// How a model's conversations become prompt text: the checkpoint's own chat template when it
// has one (chat_template.jinja, else tokenizer_config.json's "chat_template"), run by the
// interpreter of jinja_template.h; otherwise the built-in Gemma-4 rendering of chat_template.h,
// kept as the fallback for checkpoints without a template (text messages only: tools and tool
// messages need a template). docs/chat-templates.md says more.
//
// Immutable after Load; Render is thread-safe.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/common/json.h"
#include "lib/tokenizer/chat_template.h"
#include "lib/tokenizer/jinja_template.h"

namespace gannet::tokenizer {

// A rendered prompt is bounded: a template (or a conversation) that would write more is refused.
inline constexpr size_t kMaxRenderedPromptBytes = size_t{64} << 20;

class ChatFormat {
 public:
  // The built-in rendering only.
  explicit ChatFormat(ChatTemplateVariant variant) : variant_(variant) {}

  // Reads model_dir's template: chat_template.jinja, else tokenizer_config.json's
  // "chat_template" (a string, or a list of {"name", "template"} of which "default" is used);
  // neither: the built-in rendering. A template that does not parse is an error naming the file
  // and line (a model whose template gannet cannot run is refused, never silently rendered
  // differently).
  static absl::StatusOr<ChatFormat> Load(const std::string& model_dir, ChatTemplateVariant variant);

  bool has_template() const { return tmpl_.has_value(); }
  const std::string& template_source() const;                     // "" without a template
  const std::string& template_origin() const { return origin_; }  // the file it came from
  ChatTemplateVariant variant() const { return variant_; }  // the model's (built-in rendering)

  // Renders `chat`, an object {"messages": [...], "tools": [...]} in the OpenAI chat shape
  // (roles system, developer, user, assistant, tool; tool_calls; content as a string or a list
  // of parts). content_ranges: as RenderChatTemplate's. Without a template, messages must be
  // text (role and string content, optional "reasoning" / "reasoning_content") and tools absent.
  absl::StatusOr<std::string> Render(const Json& chat, const ChatTemplateOptions& options,
                                     std::vector<std::pair<size_t, size_t>>* content_ranges) const;

  // Plain text messages (the C ABI's gannet_chat_message_t).
  absl::StatusOr<std::string> Render(absl::Span<const ChatMessage> messages,
                                     const ChatTemplateOptions& options,
                                     std::vector<std::pair<size_t, size_t>>* content_ranges) const;

 private:
  ChatTemplateVariant variant_;
  std::optional<JinjaTemplate> tmpl_;
  std::string origin_;
};

// The checks every chat object passes before rendering, with or without a template: an object
// whose "messages" is a non-empty array of objects with a string "role", and whose "tools", if
// present, is an array or null. InvalidArgument naming the member.
absl::Status CheckChatJson(const Json& chat);

}  // namespace gannet::tokenizer
