// gannet's text tokenizer: loads a HuggingFace tokenizer.json with a BPE model (Gemma-4's kind:
// byte fallback, "▁" for spaces, added special tokens) and encodes text to token ids and decodes
// ids to text exactly as HF tokenizers does (tests/tokenizer/parity_test.cc holds us to it).
//
// Pipeline of Encode, as HF: added tokens are cut out of the raw text first (never split, matched
// before BPE); every remaining piece is normalized, searched again for normalized added tokens,
// pre-tokenized into words, and each word is run through the BPE model; with add_special_tokens
// the post-processor's template (Gemma: "<bos> $A") wraps the result.
//
// Input text is bytes. Invalid UTF-8 never fails: each maximal ill-formed subsequence is replaced
// by U+FFFD first, exactly as Python's bytes.decode("utf-8", "replace") would before HF sees the
// text (see unicode_text.h). Decode rejects ids outside the vocabulary with InvalidArgument (HF
// silently drops them).
//
// BOS policy: Encode adds nothing unless add_special_tokens is set, and then only what the file's
// post_processor says. Gemma-4 prompts must start with exactly one <bos> (id 2); chat prompts from
// RenderChatTemplate already begin with the "<bos>" text, which encodes to id 2, so encode them
// with add_special_tokens = false (a second BOS degrades the model; docs/gemma4-model.md §5).
//
// Ownership and thread safety: a Tokenizer owns all its tables and is immutable after loading
// (apart from an internally synchronised word cache); share one instance across threads freely.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/common/json.h"

namespace gannet::tokenizer {

namespace internal {
class TokenizerJsonReader;
}

struct EncodeOptions {
  // Apply the tokenizer.json post-processor (Gemma-style files: prepend <bos>).
  bool add_special_tokens = false;
};

struct DecodeOptions {
  // Drop added tokens marked "special" (<bos>, <|turn>, ...); non-special added tokens stay.
  bool skip_special_tokens = false;
};

// Gemma's tokenizer.json is ~33 MB; anything much larger is not a tokenizer we serve.
inline constexpr int64_t kMaxTokenizerJsonBytes = int64_t{256} << 20;

class Tokenizer {
 public:
  // Errors: NotFound / DataLoss for an unreadable file, InvalidArgument naming the JSON path of
  // malformed content, Unimplemented naming an unsupported model or pipeline type. The text is
  // read member by member (Json::Stream), never as a whole tree: Gemma-4's 33 MB file costs
  // ~85 MB beyond its text at the peak (tests/tokenizer/tokenizer_memory_test.cc).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  // `source` names the document in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json_text,
                                                             std::string_view source);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromParsedJson(const Json& root,
                                                                   std::string_view source);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options = {}) const;
  // `plain_ranges`: byte ranges [begin, end) of the text, sorted and disjoint, that are plain
  // text: special tokens spelled inside them ("<|turn>" in a user's message) are tokenized as the
  // characters they are, never as the control token (HF's split_special_tokens, for those ranges
  // only). Text outside them tokenizes exactly as without; a text with no special token inside
  // them gives the same ids. Ignored for text that is not valid UTF-8 (its byte offsets change
  // when it is repaired).
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options,
                              absl::Span<const std::pair<size_t, size_t>> plain_ranges) const;

  // InvalidArgument for an id outside the vocabulary.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     const DecodeOptions& options = {}) const;

  // One past the largest id of the model vocabulary and the added tokens.
  int32_t vocab_size() const { return vocab_size_; }
  // The most bytes of input text one token can stand for: the longest token string (as stored:
  // "▁the" is 6 bytes for 4 of input), times how much the normalizer can shorten text. A text
  // longer than n times this cannot encode to n tokens or fewer (prompt caps). 0 when there is no
  // such bound (a Strip normalizer, an added token with lstrip/rstrip).
  int64_t max_token_bytes() const { return max_token_bytes_; }
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token's string as stored in tokenizer.json ("▁the", "<0x0A>", "<bos>").
  absl::StatusOr<std::string_view> IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // Well-known ids looked up by Gemma's token strings (<bos>, <eos>, <pad>, the model's unk
  // token); -1 when the vocabulary lacks them.
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  // The ids add_special_tokens puts before the text (Gemma-3-style files: {bos}; a file written
  // with add_bos_token=False: none), so callers can enforce "exactly one BOS" themselves.
  absl::Span<const int32_t> special_prefix_ids() const;

  // For StreamingDetokenizer: whether the decoder is prefix-stable token by token, and whether a
  // token is a byte piece that the decoder fuses with its neighbours.
  bool streamable() const;
  bool IsHeldByteToken(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromReader(
      internal::TokenizerJsonReader& reader);
  const std::string* TokenString(int32_t id, bool* special) const;

  std::unique_ptr<Impl> impl_;
  int32_t vocab_size_ = 0;
  int64_t max_token_bytes_ = 1;
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = -1, unk_id_ = -1;
};

}  // namespace gannet::tokenizer
