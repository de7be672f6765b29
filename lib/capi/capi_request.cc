// The extern "C" entries for requests and events: submit, request checks, cancel and poll.
#include <string>

#include "lib/capi/capi_internal.h"
#include "lib/common/status.h"
#include "lib/common/utf8.h"
#include "lib/engine/image_input.h"
#include "lib/engine/request_check.h"

namespace gannet::capi {

namespace {

// Copies the request's images (the caller may free them when submit returns); decoding waits for
// the engine, which knows the model's patch geometry.
gannet_status_t ReadImages(const gannet_request_t& r, engine::RequestInput* in) {
  if (r.num_images == 0) return GANNET_OK;
  if (r.images == nullptr) return Fail(GANNET_ERR_INVALID_ARGUMENT, "request: images is NULL");
  if (r.num_images > engine::kMaxRequestImages) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, fmt::format("request: num_images is {} (at most {})",
                                                         r.num_images, engine::kMaxRequestImages));
  }
  // Every element has the first's size, as for chat messages.
  const uint32_t stride = r.images[0].struct_size;
  if (stride < offsetof(gannet_image_t, height) + sizeof(int32_t) || stride > kMaxStructSize ||
      stride % alignof(gannet_image_t) != 0) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT,
                fmt::format("request: images[0].struct_size is {}: initialise images with "
                            "GANNET_IMAGE_INIT",
                            stride));
  }
  const char* base = reinterpret_cast<const char*>(r.images);
  const auto& limits = engine::kImageDecodeLimits;
  for (size_t k = 0; k < r.num_images; ++k) {
    gannet_image_t img = GANNET_IMAGE_INIT;
    std::memcpy(&img, base + k * stride, std::min<size_t>(stride, sizeof(img)));
    if (img.struct_size != stride) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: images[{}].struct_size is {}, images[0]'s is {}", k,
                              img.struct_size, stride));
    }
    engine::ImageSource src;
    src.max_soft_tokens = img.max_soft_tokens;
    const bool encoded = img.data != nullptr || img.size > 0;
    const bool raw = img.rgb != nullptr || img.width != 0 || img.height != 0;
    if (encoded == raw) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: images[{}]: give either data and size (encoded bytes) or "
                              "rgb, width and height (raw RGB)",
                              k));
    }
    if (encoded) {
      if (img.data == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: images[{}].data is NULL", k));
      }
      // Bounded before the copy; DecodeImage applies the same limit with its typed error.
      if (img.size > limits.max_bytes) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: images[{}] is {} bytes (at most {})", k, img.size,
                                limits.max_bytes));
      }
      src.bytes.assign(img.data, img.data + img.size);
    } else {
      if (img.width <= 0 || img.height <= 0 ||
          int64_t{img.width} * img.height > limits.max_pixels) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: images[{}] is {} x {} raw pixels (1 to {} pixels)", k,
                                img.width, img.height, limits.max_pixels));
      }
      if (img.rgb == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT, fmt::format("request: images[{}].rgb is NULL", k));
      }
      src.raw = true;
      src.width = img.width;
      src.height = img.height;
      src.bytes.assign(img.rgb, img.rgb + size_t{3} * img.width * img.height);
    }
    in->image_sources.push_back(std::move(src));
  }
  return GANNET_OK;
}

}  // namespace

gannet_status_t ReadRequest(const gannet_request_t* request, engine::RequestInput* in) {
  gannet_request_t r;
  if (!ReadVersioned(request, gannet_request_t GANNET_REQUEST_INIT, &r, "gannet_request_t")) {
    return GANNET_ERR_INVALID_ARGUMENT;
  }
  // Counts are bounded before their arrays are read: a negative length cast to size_t must be an
  // error naming the field, not a read past the caller's array.
  if (r.num_prompt_tokens > engine::kMaxPromptTokens) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT,
                fmt::format("request: num_prompt_tokens is {} (at most {})", r.num_prompt_tokens,
                            engine::kMaxPromptTokens));
  }
  if (r.num_messages > engine::kMaxChatMessages) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, fmt::format("request: num_messages is {} (at most {})",
                                                         r.num_messages, engine::kMaxChatMessages));
  }
  if (gannet_status_t st = CheckFlag("request: add_generation_prompt", r.add_generation_prompt, 2);
      st != GANNET_OK) {
    return st;
  }
  if (gannet_status_t st = CheckFlag("request: enable_thinking", r.enable_thinking);
      st != GANNET_OK) {
    return st;
  }
  if (gannet_status_t st =
          CheckFlag("request: ignore_default_stop_tokens", r.ignore_default_stop_tokens);
      st != GANNET_OK) {
    return st;
  }
  if (gannet_status_t st = CheckFlag("request: disable_speculation", r.disable_speculation);
      st != GANNET_OK) {
    return st;
  }
  if (r.split_special_tokens != 0 && r.split_special_tokens != 1) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT,
                fmt::format("request: split_special_tokens is {}; it must be in [0, 1]",
                            r.split_special_tokens));
  }
  if (r.num_prompt_tokens > 0) {
    if (r.prompt_tokens == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "request: prompt_tokens is NULL");
    }
    in->prompt_tokens.assign(r.prompt_tokens, r.prompt_tokens + r.num_prompt_tokens);
  }
  if (r.prompt_text != nullptr) in->prompt_text = std::string(r.prompt_text);
  if (r.num_messages > 0) {
    if (r.messages == nullptr)
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "request: messages is NULL");
    // Every element has the first's size (the header that initialised the array).
    const uint32_t stride = r.messages[0].struct_size;
    // A size that ends inside a field (not a multiple of the struct's alignment) is no version of
    // the struct, as the growth rules say.
    if (stride < offsetof(gannet_chat_message_t, content) + sizeof(const char*) ||
        stride > kMaxStructSize || stride % alignof(gannet_chat_message_t) != 0) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: messages[0].struct_size is {}: initialise messages with "
                              "GANNET_CHAT_MESSAGE_INIT",
                              stride));
    }
    const char* base = reinterpret_cast<const char*>(r.messages);
    for (size_t i = 0; i < r.num_messages; ++i) {
      gannet_chat_message_t m = GANNET_CHAT_MESSAGE_INIT;
      std::memcpy(&m, base + i * stride, std::min<size_t>(stride, sizeof(m)));
      if (m.struct_size != stride) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: messages[{}].struct_size is {}, messages[0]'s is {}", i,
                                m.struct_size, stride));
      }
      if (m.role == nullptr || m.content == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: messages[{}] has a NULL role or content", i));
      }
      in->messages.push_back({m.role, m.content, ""});
    }
  }
  in->add_generation_prompt = r.add_generation_prompt != 2;  // 0 (default) and 1: yes
  in->enable_thinking = r.enable_thinking == 1;
  in->sampling.temperature = r.temperature;
  in->sampling.top_k = r.top_k;
  in->sampling.top_p = r.top_p == 0.0f ? 1.0f : r.top_p;
  in->sampling.min_p = r.min_p;
  in->sampling.repetition_penalty = r.repetition_penalty == 0.0f ? 1.0f : r.repetition_penalty;
  in->sampling.presence_penalty = r.presence_penalty;
  in->sampling.frequency_penalty = r.frequency_penalty;
  if (r.seed_mode < GANNET_SEED_RANDOM || r.seed_mode > GANNET_SEED_REQUEST_ID) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT,
                fmt::format("request: seed_mode {} is not a GANNET_SEED_* value", r.seed_mode));
  }
  in->seed_mode = static_cast<engine::SeedMode>(r.seed_mode);
  in->seed = r.seed;
  in->max_tokens = r.max_tokens;
  in->min_tokens = r.min_tokens;
  if (r.stop_token_ids != nullptr) {
    if (r.num_stop_token_ids > engine::kMaxStopTokenIds) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: {} stop token ids (at most {})", r.num_stop_token_ids,
                              engine::kMaxStopTokenIds));
    }
    in->stop_token_ids =
        std::vector<int32_t>(r.stop_token_ids, r.stop_token_ids + r.num_stop_token_ids);
  } else if (r.num_stop_token_ids > 0) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, "request: stop_token_ids is NULL");
  }
  in->ignore_default_stop_tokens = r.ignore_default_stop_tokens == 1;
  if (r.num_stop_strings > 0) {
    if (r.stop_strings == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "request: stop_strings is NULL");
    }
    if (r.num_stop_strings > engine::kMaxStopStrings) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: {} stop strings (at most {})", r.num_stop_strings,
                              engine::kMaxStopStrings));
    }
    for (size_t i = 0; i < r.num_stop_strings; ++i) {
      if (r.stop_strings[i] == nullptr) {
        return Fail(GANNET_ERR_INVALID_ARGUMENT,
                    fmt::format("request: stop_strings[{}] is NULL", i));
      }
      in->stop_strings.emplace_back(r.stop_strings[i]);
    }
  }
  in->logprobs = r.logprobs;
  in->priority = r.priority;
  in->deadline_ms = r.deadline_ms;
  in->disable_speculation = r.disable_speculation == 1;
  in->split_special_tokens = r.split_special_tokens == 1;
  if (r.chat_json != nullptr) {
    auto chat = Json::Parse(r.chat_json);
    if (!chat.ok()) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  fmt::format("request: chat_json: {}", chat.status().message()));
    }
    in->chat = std::move(*chat);
  }
  if (r.reply_prefix != nullptr) in->reply_prefix = r.reply_prefix;
  return ReadImages(r, in);
}

}  // namespace gannet::capi

using gannet::capi::Fail;
using gannet::capi::Guard;

extern "C" {

gannet_status_t gannet_engine_submit(gannet_engine_t* engine, const gannet_request_t* request,
                                     uint64_t* request_id_out) {
  return Guard("gannet_engine_submit", [&]() -> gannet_status_t {
    if (engine == nullptr || request == nullptr || request_id_out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_submit: engine, request and request_id_out are required");
    }
    gannet::engine::RequestInput in;
    if (gannet_status_t st = gannet::capi::ReadRequest(request, &in); st != GANNET_OK) return st;
    auto id = engine->engine->Submit(std::move(in));
    if (!id.ok()) return Fail(id.status());
    *request_id_out = *id;
    return GANNET_OK;
  });
}

gannet_status_t gannet_request_check(const gannet_request_t* request,
                                     const gannet_model_info_t* model) {
  return Guard("gannet_request_check", [&]() -> gannet_status_t {
    if (request == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_request_check: request is required");
    }
    gannet::engine::RequestInput in;
    if (gannet_status_t st = gannet::capi::ReadRequest(request, &in); st != GANNET_OK) return st;
    gannet::engine::RequestModelFacts facts;
    if (model != nullptr) {
      gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
      if (!gannet::capi::ReadVersioned(model, info, &info, "gannet_model_info_t")) {
        return GANNET_ERR_INVALID_ARGUMENT;
      }
      facts.vocab_size = info.vocab_size;
      facts.max_context = info.max_position_embeddings;
      facts.has_tokenizer = info.has_tokenizer != 0;
      // An info struct from before images says nothing about them: unknown, not "none".
      if (model->struct_size >= offsetof(gannet_model_info_t, image_token_id) + sizeof(int32_t)) {
        facts.has_vision = info.has_vision != 0;
        facts.image_token_id = info.image_token_id;
      }
    }
    absl::Status st = gannet::engine::CheckRequest(in, facts);
    if (st.ok()) st = gannet::engine::CheckRequestImages(in, facts);
    return st.ok() ? GANNET_OK : Fail(st);
  });
}

gannet_status_t gannet_engine_cancel(gannet_engine_t* engine, uint64_t request_id) {
  return Guard("gannet_engine_cancel", [&]() -> gannet_status_t {
    if (engine == nullptr)
      return Fail(GANNET_ERR_INVALID_ARGUMENT, "gannet_engine_cancel: engine is NULL");
    absl::Status st = engine->engine->Cancel(request_id);
    return st.ok() ? GANNET_OK : Fail(st);
  });
}

gannet_status_t gannet_engine_poll(gannet_engine_t* engine, int32_t timeout_ms, size_t max_events,
                                   const gannet_event_t* const** events_out,
                                   size_t* num_events_out) {
  return Guard("gannet_engine_poll", [&]() -> gannet_status_t {
    if (engine == nullptr || events_out == nullptr || num_events_out == nullptr) {
      return Fail(GANNET_ERR_INVALID_ARGUMENT,
                  "gannet_engine_poll: engine, events_out and num_events_out are required");
    }
    engine->polled.clear();
    engine->messages.clear();
    engine->views.clear();
    engine->pointers.clear();
    if (max_events == 0) {
      *events_out = nullptr;
      *num_events_out = 0;
      return GANNET_OK;
    }
    absl::Status st = engine->engine->Poll(timeout_ms, max_events, &engine->polled);
    if (!st.ok()) return Fail(st);
    engine->views.resize(engine->polled.size());
    engine->messages.resize(engine->polled.size());
    for (size_t i = 0; i < engine->polled.size(); ++i) {
      const gannet::engine::Event& e = engine->polled[i];
      gannet_event_t& v = engine->views[i];
      v = gannet_event_t{};
      v.struct_size = sizeof(gannet_event_t);
      v.request_id = e.request_id;
      v.type = static_cast<int32_t>(e.type);
      v.token_id = e.token_id;
      v.text = e.text.c_str();
      v.text_len = e.text.size();
      v.logprob = e.logprob;
      v.num_top_logprobs = static_cast<int32_t>(e.top_ids.size());
      v.top_token_ids = e.top_ids.empty() ? nullptr : e.top_ids.data();
      v.top_logprobs = e.top_logprobs.empty() ? nullptr : e.top_logprobs.data();
      v.finish_reason = static_cast<int32_t>(e.finish);
      v.status = gannet::capi::ToStatus(e.status);
      engine->messages[i] =
          e.status.ok() ? std::string()
                        : gannet::EscapeForMessage(std::string_view(e.status.message().data(),
                                                                    e.status.message().size()),
                                                   gannet::capi::kMaxMessageBytes);
      v.message = engine->messages[i].c_str();
      v.num_prompt_tokens = e.num_prompt_tokens;
      v.num_generated_tokens = e.num_generated_tokens;
      v.num_cached_prompt_tokens = e.num_cached_prompt_tokens;
      v.num_draft_tokens = e.num_draft_tokens;
      v.num_accepted_draft_tokens = e.num_accepted_draft_tokens;
      v.thinking = e.thinking ? 1 : 0;
    }
    for (const gannet_event_t& v : engine->views) engine->pointers.push_back(&v);
    *events_out = engine->pointers.empty() ? nullptr : engine->pointers.data();
    *num_events_out = engine->pointers.size();
    return GANNET_OK;
  });
}

}  // extern "C"
