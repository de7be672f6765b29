#include "lib/engine/request_check.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/engine/image_input.h"
#include "lib/tokenizer/chat_format.h"
#include "lib/tokenizer/chat_template.h"

namespace gannet::engine {
namespace {

absl::Status CheckIds(const std::vector<int32_t>& ids, int64_t vocab, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidArgumentError("request: {} {} (id {}) is outside the vocabulary [0, {})", what,
                                  i, ids[i], vocab);
    }
  }
  return absl::OkStatus();
}

// "<|image|>" written in text (Gemma-4's image placeholder token).
int64_t CountSpelledPlaceholders(std::string_view text) {
  constexpr std::string_view kSpelling = "<|image|>";
  int64_t n = 0;
  for (size_t at = text.find(kSpelling); at != std::string_view::npos;
       at = text.find(kSpelling, at + kSpelling.size())) {
    ++n;
  }
  return n;
}

// {"type": "image"} content parts of a chat, plus spellings in its text parts and string contents.
// Spellings count only where they become tokens (not with split_special_tokens).
int64_t CountImageParts(const Json& chat, bool count_spelled) {
  int64_t n = 0;
  const Json* messages = chat.Find("messages");
  if (messages == nullptr || !messages->is_array()) return 0;
  for (const Json& m : messages->AsArray()) {
    const Json* content = m.Find("content");
    if (content == nullptr) continue;
    if (content->is_string()) {
      if (count_spelled) n += CountSpelledPlaceholders(content->AsString());
      continue;
    }
    if (!content->is_array()) continue;
    for (const Json& part : content->AsArray()) {
      const Json* type = part.Find("type");
      if (type == nullptr || !type->is_string()) continue;
      if (type->AsString() == "image") ++n;
      const Json* text = part.Find("text");
      if (count_spelled && type->AsString() == "text" && text != nullptr && text->is_string()) {
        n += CountSpelledPlaceholders(text->AsString());
      }
    }
  }
  return n;
}

}  // namespace

absl::Status CheckRequest(const RequestInput& in, const RequestModelFacts& model) {
  const int sources = (!in.prompt_tokens.empty()) + in.prompt_text.has_value() +
                      (!in.messages.empty()) + in.chat.has_value();
  if (sources != 1) {
    return InvalidArgumentError(
        "request: give exactly one prompt (token ids, text, chat messages or chat JSON); got {}",
        sources);
  }
  if (in.chat) GANNET_RETURN_IF_ERROR(tokenizer::CheckChatJson(*in.chat));
  GANNET_RETURN_IF_ERROR(sampling::ValidateSamplingParams(in.sampling));
  if (in.max_tokens < 0 || in.min_tokens < 0) {
    return InvalidArgumentError("request: max_tokens ({}) and min_tokens ({}) must be >= 0",
                                in.max_tokens, in.min_tokens);
  }
  if (in.max_tokens > 0 && in.min_tokens > in.max_tokens) {
    return InvalidArgumentError("request: min_tokens ({}) exceeds max_tokens ({})", in.min_tokens,
                                in.max_tokens);
  }
  if (in.logprobs < 0 || in.logprobs > kMaxLogprobs) {
    return InvalidArgumentError("request: logprobs must be in [0, {}], got {}", kMaxLogprobs,
                                in.logprobs);
  }
  if (!in.reply_prefix.empty()) {
    if (in.messages.empty() && !in.chat) {
      return InvalidArgumentError(
          "request: reply_prefix needs a chat prompt (messages or chat_json)");
    }
    if (!IsValidUtf8(in.reply_prefix)) {
      return InvalidArgumentError("request: reply_prefix is not valid UTF-8");
    }
  }
  if (in.prompt_text && !IsValidUtf8(*in.prompt_text)) {
    return InvalidArgumentError("request: prompt_text is not valid UTF-8");
  }
  for (size_t i = 0; i < in.messages.size(); ++i) {
    if (!IsValidUtf8(in.messages[i].role) || !IsValidUtf8(in.messages[i].content)) {
      return InvalidArgumentError("request: messages[{}] is not valid UTF-8", i);
    }
    // The roles the chat template renders, so that a check passes only what submit accepts.
    if (!tokenizer::IsKnownChatRole(in.messages[i].role)) {
      return InvalidArgumentError(
          "request: messages[{}] has role '{}'; expected system, developer, user, assistant or "
          "model",
          i, EscapeForMessage(in.messages[i].role));
    }
  }
  if (in.deadline_ms < 0) {
    return InvalidArgumentError("request: deadline_ms is {}; it must be >= 0 (0: none)",
                                in.deadline_ms);
  }
  if (in.stop_strings.size() > kMaxStopStrings) {
    return InvalidArgumentError("request: {} stop strings (at most {})", in.stop_strings.size(),
                                kMaxStopStrings);
  }
  for (size_t i = 0; i < in.stop_strings.size(); ++i) {
    const std::string& s = in.stop_strings[i];
    if (s.empty() || s.size() > kMaxStopStringBytes) {
      return InvalidArgumentError("request: stop_strings[{}] has {} bytes (1 to {})", i, s.size(),
                                  kMaxStopStringBytes);
    }
    if (!IsValidUtf8(s)) {
      return InvalidArgumentError("request: stop_strings[{}] is not valid UTF-8", i);
    }
  }
  if (in.stop_token_ids && in.stop_token_ids->size() > kMaxStopTokenIds) {
    return InvalidArgumentError("request: {} stop token ids (at most {})",
                                in.stop_token_ids->size(), kMaxStopTokenIds);
  }
  if ((in.prompt_text || !in.messages.empty() || in.chat || !in.stop_strings.empty()) &&
      !model.has_tokenizer) {
    return FailedPreconditionError(
        "request: text prompts, chat messages and stop strings need the model's tokenizer.json, "
        "and this model has none; give prompt token ids and stop token ids instead");
  }
  if (model.vocab_size > 0) {
    if (model.check_prompt_ids) {
      GANNET_RETURN_IF_ERROR(CheckIds(in.prompt_tokens, model.vocab_size, "prompt token"));
    }
    if (in.stop_token_ids) {
      GANNET_RETURN_IF_ERROR(CheckIds(*in.stop_token_ids, model.vocab_size, "stop token"));
    }
  }
  if (!in.image_sources.empty()) {
    if (!in.images.empty()) {
      return InvalidArgumentError(
          "request: give images either preprocessed or as sources, not both");
    }
    if (in.image_sources.size() > kMaxRequestImages) {
      return InvalidArgumentError("request: {} images (at most {})", in.image_sources.size(),
                                  kMaxRequestImages);
    }
    for (size_t k = 0; k < in.image_sources.size(); ++k) {
      const ImageSource& img = in.image_sources[k];
      const int t = img.max_soft_tokens;
      if (t != 0 && t != 70 && t != 140 && t != 280 && t != 560 && t != 1120) {
        return InvalidArgumentError(
            "request: images[{}].max_soft_tokens is {}; it must be 0 (280), 70, 140, 280, 560 or "
            "1120",
            k, t);
      }
    }
  }
  if (model.max_context > 0 && static_cast<int64_t>(in.prompt_tokens.size()) >= model.max_context) {
    return InvalidArgumentError(
        "request: the prompt has {} tokens but the context holds {}: at least one must remain "
        "for the output",
        in.prompt_tokens.size(), model.max_context);
  }
  return absl::OkStatus();
}

absl::Status CheckRequestImages(const RequestInput& in, const RequestModelFacts& model) {
  // Without images, only a model known to take them refuses placeholders (a text model reads
  // them as text).
  if (in.image_sources.empty() && (model.image_token_id < 0 || !model.has_vision)) {
    return absl::OkStatus();
  }
  if (!model.has_vision) {
    return InvalidArgumentError("request: {} images, but the model has no vision tower",
                                in.image_sources.size());
  }
  // Placeholders counted without a tokenizer: ids in prompt ids; in text, the Gemma-4 spelling
  // of the image token; in chat_json, {"type": "image"} parts (the template writes each as that
  // spelling). Submit counts the tokens themselves.
  int64_t placeholders = -1;
  int64_t prompt_len = static_cast<int64_t>(in.image_sources.size());
  if (!in.prompt_tokens.empty()) {
    if (model.image_token_id >= 0) {
      placeholders = CountImagePlaceholders(in.prompt_tokens, model.image_token_id);
    }
    prompt_len = static_cast<int64_t>(in.prompt_tokens.size());
  } else if (in.prompt_text) {
    placeholders = CountSpelledPlaceholders(*in.prompt_text);
  } else if (!in.messages.empty()) {
    placeholders = 0;
    if (!in.split_special_tokens) {
      for (const tokenizer::ChatMessage& m : in.messages) {
        placeholders += CountSpelledPlaceholders(m.content);
      }
    }
  } else if (in.chat) {
    placeholders = CountImageParts(*in.chat, !in.split_special_tokens);
  }
  if (placeholders >= 0 && placeholders != static_cast<int64_t>(in.image_sources.size())) {
    return InvalidArgumentError("request: the prompt has {} image placeholders for {} images",
                                placeholders, in.image_sources.size());
  }
  if (in.image_sources.empty()) return absl::OkStatus();
  GANNET_ASSIGN_OR_RETURN(PreparedImages prepared, PrepareImages(in.image_sources, {}));
  const int64_t len = ExpandedPromptLength(prompt_len, prepared.soft_tokens);
  if (model.max_context > 0 && len >= model.max_context) {
    return InvalidArgumentError(
        "request: the prompt with its {} images is at least {} tokens but the context holds {}: "
        "at least one must remain for the output (fewer images or a smaller max_soft_tokens)",
        prepared.images.size(), len, model.max_context);
  }
  return absl::OkStatus();
}

absl::Status CheckPromptBytes(const RequestInput& in, int64_t max_model_len,
                              int64_t max_token_bytes) {
  if (max_token_bytes <= 0) return absl::OkStatus();  // the tokenizer gives no bound
  uint64_t bytes = in.prompt_text ? in.prompt_text->size() : 0;
  for (const tokenizer::ChatMessage& m : in.messages) {
    bytes += m.content.size() + m.reasoning.size();
  }
  // A chat object's text: its JSON, a bound on the strings the template can write of it.
  if (in.chat) bytes += in.chat->Dump().size();
  bytes += in.reply_prefix.size();
  const uint64_t cap = static_cast<uint64_t>(std::max<int64_t>(max_model_len, 1)) *
                       static_cast<uint64_t>(max_token_bytes);
  if (bytes > cap) {
    return InvalidArgumentError(
        "request: the prompt's text is {} bytes; a context of {} tokens holds at most {} bytes "
        "({} bytes per token at most)",
        bytes, max_model_len, cap, max_token_bytes);
  }
  return absl::OkStatus();
}

}  // namespace gannet::engine
