// The "normalizer" of a HuggingFace tokenizer.json: rewrites each piece of input text (the text
// between added tokens) before pre-tokenization. Supported types, with HF tokenizers semantics:
//   Replace  {"pattern": {"String": s}, "content": c}  every non-overlapping s, left to right
//   Prepend  {"prepend": p}                              only onto a non-empty piece
//   Strip    {"strip_left": b, "strip_right": b}         Unicode White_Space
//   Sequence {"normalizers": [...]}
// Anything else (Unicode normalization forms, Precompiled, regex patterns, ...) is reported as
// Unimplemented naming the type, so an unsupported tokenizer.json fails at load, not silently.
//
// Immutable after parsing; Normalize may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/tokenizer/json_fields.h"

namespace gannet::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string* text) const = 0;
  // How many times shorter Normalize can make a text, at most (1: never shorter); 0 when it can
  // remove any amount (Strip, a Replace with empty content). Bounds the input bytes a token can
  // stand for (Tokenizer::max_token_bytes).
  virtual int64_t MaxShrink() const = 0;
};

// Parses a normalizer object; JSON null yields nullptr (no normalization).
absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const Json& json,
                                                            const internal::JsonWhere& where);

}  // namespace gannet::tokenizer
