// The extern "C" entries for tokenizers: open/close, the engine's tokenizer, info, tokenize,
// detokenize, token pieces and the chat template. Buffer calls follow one rule (gannet.h): a
// size query with a NULL buffer, RESOURCE_EXHAUSTED plus the size needed when it is too small.
#include <string>

#include "lib/capi/capi_internal.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/engine/chat_prompt.h"
#include "lib/model/config.h"

namespace gannet::capi {
namespace {

// Writes `n` elements of `src` to `dst` per the buffer rule.
template <typename T>
gannet_status_t WriteBuffer(const T* src, size_t n, T* dst, size_t capacity, size_t* size_out,
                            bool text, const char* what) {
  if (size_out == nullptr) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, std::string(what) + ": the size output is NULL");
  }
  if (dst == nullptr && capacity > 0) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT,
                std::string(what) + ": the buffer is NULL but capacity is not 0");
  }
  *size_out = n;
  if (dst == nullptr) return GANNET_OK;  // size query
  if (n > capacity) {
    return Fail(GANNET_ERR_RESOURCE_EXHAUSTED,
                fmt::format("{}: {} elements do not fit a buffer of {}", what, n, capacity));
  }
  if (n > 0) std::memcpy(dst, src, n * sizeof(T));
  if (text && n < capacity) reinterpret_cast<char*>(dst)[n] = '\0';
  return GANNET_OK;
}

gannet_status_t RequireTokenizer(const gannet_tokenizer_t* t, const char* what) {
  if (t == nullptr || t->tokenizer == nullptr) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, std::string(what) + ": tokenizer is NULL");
  }
  return GANNET_OK;
}

}  // namespace
}  // namespace gannet::capi

using gannet::capi::Fail;
using gannet::capi::Guard;

extern "C" {

gannet_status_t gannet_tokenizer_open(const char* model_dir, gannet_tokenizer_t** out) {
  return Guard("gannet_tokenizer_open", [&]() -> gannet_status_t {
    if (model_dir == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_tokenizer_open: model_dir and tokenizer_out are required");
    }
    const std::string path = std::string(model_dir) + "/tokenizer.json";
    if (!gannet::FileExists(path)) {
      return Fail(GANNET_ERR_NOT_FOUND,
                  fmt::format("gannet_tokenizer_open: {} does not exist", path));
    }
    auto config = gannet::model::LoadModelConfig(model_dir);
    if (!config.ok()) return Fail(config.status());
    auto tok = gannet::tokenizer::Tokenizer::FromFile(path);
    if (!tok.ok()) return Fail(tok.status());
    auto chat = gannet::tokenizer::ChatFormat::Load(model_dir,
                                                    gannet::engine::ChatVariant(config->variant));
    if (!chat.ok()) return Fail(chat.status());
    auto* t = new gannet_tokenizer();
    t->owned = std::move(*tok);
    t->tokenizer = t->owned.get();
    t->variant = config->variant;
    t->owned_chat = std::move(*chat);
    t->chat = &*t->owned_chat;
    *out = t;
    return GANNET_OK;
  });
}

void gannet_tokenizer_close(gannet_tokenizer_t* tokenizer) {
  if (tokenizer == nullptr || tokenizer->owned == nullptr) return;  // engines own theirs
  try {
    delete tokenizer;
  } catch (...) {
  }
}

gannet_status_t gannet_engine_tokenizer(gannet_engine_t* engine, const gannet_tokenizer_t** out) {
  return Guard("gannet_engine_tokenizer", [&]() -> gannet_status_t {
    if (engine == nullptr || out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_tokenizer: engine and tokenizer_out are required");
    }
    if (engine->tokenizer.tokenizer == nullptr) {
      return Fail(GANNET_ERR_NOT_FOUND, "gannet_engine_tokenizer: the model has no tokenizer.json");
    }
    *out = &engine->tokenizer;
    return GANNET_OK;
  });
}

gannet_status_t gannet_tokenizer_get_info(const gannet_tokenizer_t* tokenizer,
                                          gannet_tokenizer_info_t* out) {
  return Guard("gannet_tokenizer_get_info", [&]() -> gannet_status_t {
    if (gannet_status_t st = gannet::capi::RequireTokenizer(tokenizer, "gannet_tokenizer_get_info");
        st != GANNET_OK) {
      return st;
    }
    if (out == nullptr)
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_tokenizer_get_info: info_out is NULL");
    const gannet::tokenizer::Tokenizer& t = *tokenizer->tokenizer;
    gannet_tokenizer_info_t full = GANNET_TOKENIZER_INFO_INIT;
    full.vocab_size = t.vocab_size();
    full.bos_id = t.bos_id();
    full.eos_id = t.eos_id();
    full.pad_id = t.pad_id();
    full.unk_id = t.unk_id();
    full.start_of_turn_id = t.TokenToId("<|turn>").value_or(-1);
    full.end_of_turn_id = t.TokenToId("<turn|>").value_or(-1);
    return gannet::capi::WriteVersioned(full, out, "gannet_tokenizer_info_t");
  });
}

gannet_status_t gannet_tokenize(const gannet_tokenizer_t* tokenizer, const char* text,
                                size_t text_len, int32_t add_special_tokens, int32_t* ids_out,
                                size_t capacity, size_t* num_ids_out) {
  return Guard("gannet_tokenize", [&]() -> gannet_status_t {
    if (gannet_status_t st = gannet::capi::RequireTokenizer(tokenizer, "gannet_tokenize");
        st != GANNET_OK) {
      return st;
    }
    if (text == nullptr && text_len > 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_tokenize: text is NULL");
    }
    if (gannet_status_t st =
            gannet::capi::CheckFlag("gannet_tokenize: add_special_tokens", add_special_tokens);
        st != GANNET_OK) {
      return st;
    }
    const std::string_view s(text == nullptr ? "" : text, text_len);
    if (!gannet::IsValidUtf8(s)) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_tokenize: text is not valid UTF-8");
    }
    const std::vector<int32_t> ids =
        tokenizer->tokenizer->Encode(s, {.add_special_tokens = add_special_tokens == 1});
    return gannet::capi::WriteBuffer(ids.data(), ids.size(), ids_out, capacity, num_ids_out, false,
                                     "gannet_tokenize");
  });
}

gannet_status_t gannet_detokenize(const gannet_tokenizer_t* tokenizer, const int32_t* ids,
                                  size_t num_ids, int32_t skip_special_tokens, char* text_out,
                                  size_t capacity, size_t* text_len_out) {
  return Guard("gannet_detokenize", [&]() -> gannet_status_t {
    if (gannet_status_t st = gannet::capi::RequireTokenizer(tokenizer, "gannet_detokenize");
        st != GANNET_OK) {
      return st;
    }
    if (ids == nullptr && num_ids > 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_detokenize: ids is NULL");
    }
    if (gannet_status_t st =
            gannet::capi::CheckFlag("gannet_detokenize: skip_special_tokens", skip_special_tokens);
        st != GANNET_OK) {
      return st;
    }
    auto text = tokenizer->tokenizer->Decode(absl::Span<const int32_t>(ids, num_ids),
                                             {.skip_special_tokens = skip_special_tokens == 1});
    if (!text.ok()) return Fail(text.status());
    return gannet::capi::WriteBuffer(text->data(), text->size(), text_out, capacity, text_len_out,
                                     true, "gannet_detokenize");
  });
}

gannet_status_t gannet_token_to_piece(const gannet_tokenizer_t* tokenizer, int32_t id,
                                      char* text_out, size_t capacity, size_t* text_len_out) {
  return Guard("gannet_token_to_piece", [&]() -> gannet_status_t {
    if (gannet_status_t st = gannet::capi::RequireTokenizer(tokenizer, "gannet_token_to_piece");
        st != GANNET_OK) {
      return st;
    }
    const gannet::tokenizer::Tokenizer& t = *tokenizer->tokenizer;
    std::string piece;
    if (t.IsHeldByteToken(id)) {
      // "<0xNN>": the raw byte, which alone may be part of a multi-byte character.
      auto token = t.IdToToken(id);
      if (!token.ok()) return Fail(token.status());
      piece.push_back(static_cast<char>(std::stoi(std::string(token->substr(3, 2)), nullptr, 16)));
    } else {
      auto text = t.Decode(absl::Span<const int32_t>(&id, 1));
      if (!text.ok()) return Fail(text.status());
      piece = *std::move(text);
    }
    return gannet::capi::WriteBuffer(piece.data(), piece.size(), text_out, capacity, text_len_out,
                                     true, "gannet_token_to_piece");
  });
}

gannet_status_t gannet_apply_chat_template(const gannet_tokenizer_t* tokenizer,
                                           const gannet_chat_message_t* messages,
                                           size_t num_messages, int32_t add_generation_prompt,
                                           int32_t enable_thinking, char* text_out, size_t capacity,
                                           size_t* text_len_out) {
  return Guard("gannet_apply_chat_template", [&]() -> gannet_status_t {
    if (gannet_status_t st =
            gannet::capi::RequireTokenizer(tokenizer, "gannet_apply_chat_template");
        st != GANNET_OK) {
      return st;
    }
    if (gannet_status_t st = gannet::capi::CheckFlag(
            "gannet_apply_chat_template: add_generation_prompt", add_generation_prompt);
        st != GANNET_OK) {
      return st;
    }
    if (gannet_status_t st =
            gannet::capi::CheckFlag("gannet_apply_chat_template: enable_thinking", enable_thinking);
        st != GANNET_OK) {
      return st;
    }
    // The messages are read exactly as a request's are (struct_size, NULL fields, UTF-8).
    gannet_request_t r = GANNET_REQUEST_INIT;
    r.messages = messages;
    r.num_messages = num_messages;
    gannet::engine::RequestInput in;
    if (gannet_status_t st = gannet::capi::ReadRequest(&r, &in); st != GANNET_OK) return st;
    if (in.messages.empty()) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_apply_chat_template: no messages");
    }
    for (size_t i = 0; i < in.messages.size(); ++i) {
      if (!gannet::IsValidUtf8(in.messages[i].role) ||
          !gannet::IsValidUtf8(in.messages[i].content)) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("gannet_apply_chat_template: messages[{}] is not valid UTF-8", i));
      }
    }
    auto text = tokenizer->chat->Render(
        in.messages,
        gannet::engine::ChatOptions(tokenizer->variant, add_generation_prompt == 1,
                                    enable_thinking == 1),
        nullptr);
    if (!text.ok()) return Fail(text.status());
    return gannet::capi::WriteBuffer(text->data(), text->size(), text_out, capacity, text_len_out,
                                     true, "gannet_apply_chat_template");
  });
}

gannet_status_t gannet_apply_chat_template_json(const gannet_tokenizer_t* tokenizer,
                                                const char* chat_json,
                                                int32_t add_generation_prompt,
                                                int32_t enable_thinking, char* text_out,
                                                size_t capacity, size_t* text_len_out) {
  return Guard("gannet_apply_chat_template_json", [&]() -> gannet_status_t {
    if (gannet_status_t st =
            gannet::capi::RequireTokenizer(tokenizer, "gannet_apply_chat_template_json");
        st != GANNET_OK) {
      return st;
    }
    for (auto [name, flag] : {std::pair{"add_generation_prompt", add_generation_prompt},
                              std::pair{"enable_thinking", enable_thinking}}) {
      if (gannet_status_t st = gannet::capi::CheckFlag(
              fmt::format("gannet_apply_chat_template_json: {}", name).c_str(), flag);
          st != GANNET_OK) {
        return st;
      }
    }
    if (chat_json == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_apply_chat_template_json: chat_json is NULL");
    }
    auto chat = gannet::Json::Parse(chat_json);
    if (!chat.ok()) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("gannet_apply_chat_template_json: {}", chat.status().message()));
    }
    auto text = tokenizer->chat->Render(
        *chat,
        gannet::engine::ChatOptions(tokenizer->variant, add_generation_prompt == 1,
                                    enable_thinking == 1),
        nullptr);
    if (!text.ok()) return Fail(text.status());
    return gannet::capi::WriteBuffer(text->data(), text->size(), text_out, capacity, text_len_out,
                                     true, "gannet_apply_chat_template_json");
  });
}

int32_t gannet_tokenizer_has_chat_template(const gannet_tokenizer_t* tokenizer) {
  return tokenizer != nullptr && tokenizer->chat != nullptr && tokenizer->chat->has_template() ? 1
                                                                                               : 0;
}

}  // extern "C"
