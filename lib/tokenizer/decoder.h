// The "decoder" of a HuggingFace tokenizer.json: turns token strings back into text. Supported,
// with HF tokenizers semantics (each step maps the token list to a new token list; the result is
// their concatenation):
//   Replace      {"pattern": {"String": s}, "content": c}  per token
//   ByteFallback                                           runs of "<0xXX>" tokens become the
//                 bytes they name if the whole run is valid UTF-8, else one U+FFFD per byte
//   Fuse                                                   joins everything into one token
//   Strip        {"content": ch, "start": n, "stop": m}    per token, up to n leading and m
//                 trailing `ch` (HF panics when a token is shorter than m; we just stop)
//   Sequence     {"decoders": [...]}
// Other types are reported as Unimplemented. A tokenizer.json without a decoder joins tokens
// with a space, as HF does.
//
// Immutable after parsing; Decode may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/tokenizer/json_fields.h"

namespace gannet::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
};

// The parsed decoder chain plus the two facts the streaming detokenizer needs about it.
class DecoderChain {
 public:
  // JSON null means "no decoder": tokens are joined with " ".
  static absl::StatusOr<DecoderChain> Parse(const Json& json, const internal::JsonWhere& where);

  std::string Decode(std::vector<std::string> tokens) const;

  // Whether `token` is a byte piece ("<0xXX>") the ByteFallback step would merge with its
  // neighbours: such tokens must be held back when streaming until their run ends.
  bool IsHeldByteToken(std::string_view token) const;

  // Whether text decoded token by token can be streamed as deltas of a prefix-stable decode.
  // False for a Strip with stop > 0 or start > 1 applied after Fuse (it edits the ends of the
  // joined text). Gemma's and Llama's decoders are streamable.
  bool streamable() const { return streamable_; }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;  // flattened Sequence
  bool has_decoder_ = false;
  // Steps before ByteFallback (applied per token to recognise held tokens); -1 = no ByteFallback.
  int byte_fallback_index_ = -1;
  bool streamable_ = true;
};

// Parses "<0xXX>" the way HF's ByteFallback does (two hex digits of either case; Rust's
// u8::from_str_radix also accepts a leading '+', so "<0x+A>" is byte 10).
bool ParseByteToken(std::string_view token, unsigned char* byte);

}  // namespace gannet::tokenizer
