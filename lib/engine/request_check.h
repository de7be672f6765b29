// The checks a request passes before it is queued, in one place: Engine::Submit runs them against
// the loaded model, and gannet_request_check against a model's info (or none) so a program can
// refuse a bad request before any weight is loaded.
//
// Checked: exactly one prompt source; sampling values (sampling.h); max_tokens, min_tokens and
// min_tokens <= max_tokens; logprobs in [0, kMaxLogprobs]; deadline_ms >= 0; chat roles the
// template knows; valid UTF-8 in the prompt text, chat roles and contents and stop strings (never
// repaired); that text, chat and stop strings have a tokenizer; with a known vocabulary, every
// prompt and stop id inside it; with a known context, that the prompt ids leave room for one
// output token. Pure; thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "lib/engine/engine.h"

namespace gannet::engine {

inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;
// Bounds on what the C ABI copies before anything else is checked: more prompt ids than any
// context holds, or more chat messages than any prompt could, is a caller's bug.
inline constexpr size_t kMaxPromptTokens = size_t{1} << 24;
inline constexpr size_t kMaxChatMessages = size_t{1} << 16;

// Text prompts are refused before they are tokenized when they cannot fit: no token stands for
// more than `max_token_bytes` bytes of text (the longest token string of the vocabulary), so a
// prompt text (or the chat messages' text together) of more than
// max_model_len x max_token_bytes bytes needs more tokens than the context holds. InvalidArgument
// naming both numbers; the work and memory to find out are then a few passes over the bytes, not
// a tokenization (issue 56: a 100 MB text took 3.1 s and 841 MB to be told it was too long).
absl::Status CheckPromptBytes(const RequestInput& in, int64_t max_model_len,
                              int64_t max_token_bytes);

// What a request is checked against; zero values are unknown and skip their checks.
struct RequestModelFacts {
  int64_t vocab_size = 0;
  int64_t max_context = 0;       // max_model_len (engine) or max_position_embeddings (info)
  bool has_tokenizer = true;     // unknown counts as present
  bool check_prompt_ids = true;  // Submit reports bad prompt ids as an ERROR event instead
  // Images: whether the model has a vision tower (unknown counts as present) and the id of its
  // image placeholder (< 0: unknown, placeholders in prompt ids are not counted).
  bool has_vision = true;
  int32_t image_token_id = -1;
};

// InvalidArgument naming the field; FailedPrecondition for text without a tokenizer.
// Image sources are checked for their count, sizes and budgets only (Submit decodes them once,
// in image_input.h); CheckRequestImages does the rest.
absl::Status CheckRequest(const RequestInput& request, const RequestModelFacts& model);

// What gannet_request_check adds for image sources: each decodes and preprocesses (errors name
// the image and carry its vision::ImageErrorKind), the images need a vision tower, prompt ids
// hold one placeholder per image (text and chat prompts: counted when the engine tokenizes), and
// the images' tokens (boi + soft tokens + eoi each, plus prompt ids) fit the context. Slow: it
// decodes every image.
absl::Status CheckRequestImages(const RequestInput& request, const RequestModelFacts& model);

}  // namespace gannet::engine
