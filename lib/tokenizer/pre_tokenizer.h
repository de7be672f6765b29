// The "pre_tokenizer" of a HuggingFace tokenizer.json: cuts normalized text into the pieces the
// BPE model sees one at a time ("words"). Supported, with HF tokenizers semantics:
//   Split    {"pattern": {"String": s}, "behavior": Removed | Isolated | MergedWithPrevious |
//             MergedWithNext | Contiguous, "invert": b}
//   Sequence {"pretokenizers": [...]}
// Gemma's tokenizer.json uses Split(" ", MergedWithPrevious) after a normalizer that has already
// replaced every space with "▁", so for Gemma the whole normalized text is one word. Other types
// (ByteLevel, Metaspace, regex patterns, ...) are reported as Unimplemented.
//
// Pieces are views into the caller's string; nothing is copied. Immutable after parsing; Split
// may be called concurrently.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/tokenizer/json_fields.h"

namespace gannet::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces *pieces with their sub-pieces, in order; empty pieces are dropped.
  virtual void Split(std::vector<std::string_view>* pieces) const = 0;
  // Whether Split may drop text (a Removed split): then a token can stand for any amount of input.
  virtual bool Drops() const = 0;
};

// Parses a pre_tokenizer object; JSON null yields nullptr (the text is one piece).
absl::StatusOr<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const Json& json,
                                                                const internal::JsonWhere& where);

}  // namespace gannet::tokenizer
