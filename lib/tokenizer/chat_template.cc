#include "lib/tokenizer/chat_template.h"

#include <string_view>

#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {
namespace {

constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";

// The template's strip_thinking macro: split on <channel|>; of each part keep what precedes a
// <|channel>; join; trim.
std::string StripThinking(std::string_view text) {
  std::string result;
  size_t start = 0;
  while (true) {
    size_t close = text.find(kChannelClose, start);
    std::string_view part =
        text.substr(start, close == std::string_view::npos ? close : close - start);
    result.append(part.substr(0, part.find(kChannelOpen)));
    if (close == std::string_view::npos) break;
    start = close + kChannelClose.size();
  }
  return std::string(TrimPythonSpace(result));
}

}  // namespace

bool IsKnownChatRole(std::string_view role) {
  return role == "system" || role == "developer" || role == "user" || role == "assistant" ||
         role == "model";
}

absl::StatusOr<std::string> RenderChatTemplate(
    absl::Span<const ChatMessage> messages, const ChatTemplateOptions& options,
    std::vector<std::pair<size_t, size_t>>* content_ranges) {
  if (messages.empty()) return InvalidArgumentError("chat template: no messages to render");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!IsKnownChatRole(m.role)) {
      return InvalidArgumentError(
          "chat template: message {} has role '{}'; expected system, developer, user or "
          "assistant",
          i, m.role);
    }
    if (!IsValidUtf8(m.content) || !IsValidUtf8(m.reasoning)) {
      return InvalidArgumentError("chat template: message {} is not valid UTF-8", i);
    }
  }

  std::string out = options.bos_token;
  // Appends text of the caller's messages, noting where it lies.
  auto user_text = [&](std::string_view text) {
    if (content_ranges != nullptr && !text.empty()) {
      content_ranges->emplace_back(out.size(), out.size() + text.size());
    }
    out += text;
  };
  if (content_ranges != nullptr) content_ranges->clear();
  absl::Span<const ChatMessage> loop = messages;
  const bool leading_system = messages[0].role == "system" || messages[0].role == "developer";
  if (options.enable_thinking || leading_system) {
    out += "<|turn>system\n";
    if (options.enable_thinking) out += "<|think|>\n";
    if (leading_system) {
      user_text(TrimPythonSpace(messages[0].content));
      loop = messages.subspan(1);
    }
    out += "<turn|>\n";
  }

  int last_user = -1;
  for (size_t i = 0; i < loop.size(); ++i) {
    if (loop[i].role == "user") last_user = static_cast<int>(i);
  }
  for (size_t i = 0; i < loop.size(); ++i) {
    const ChatMessage& m = loop[i];
    const std::string_view role = m.role == "assistant" ? "model" : std::string_view(m.role);
    // Consecutive assistant messages form one model turn.
    const bool continues = role == "model" && i > 0 && loop[i - 1].role == "assistant";
    if (!continues) {
      out += "<|turn>";
      out += role;
      out += '\n';
    }
    if (!m.reasoning.empty() && (static_cast<int>(i) > last_user || options.preserve_thinking)) {
      out += "<|channel>thought\n";
      user_text(m.reasoning);
      out += "\n<channel|>";
    }
    if (role == "model") {
      user_text(StripThinking(m.content));
    } else {
      user_text(TrimPythonSpace(m.content));
    }
    out += "<turn|>\n";
  }

  if (options.add_generation_prompt) {
    out += "<|turn>model\n";
    if (options.variant == ChatTemplateVariant::kLarge && !options.enable_thinking) {
      out += "<|channel>thought\n<channel|>";
    }
  }
  return out;
}

}  // namespace gannet::tokenizer
