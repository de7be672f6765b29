// The "added_tokens" of a HuggingFace tokenizer.json: strings that are never split by the model
// and are matched in the input before anything else (Gemma's <bos>, <|turn>, <unusedN>, ...).
// Matching follows HF tokenizers' AddedVocabulary: leftmost-longest over the raw text for tokens
// with normalized=false; the remaining text pieces are normalized, then tokens with
// normalized=true (whose patterns are their normalized content) are matched in them. lstrip /
// rstrip widen a match over adjacent Unicode whitespace; single_word rejects a match that touches
// a word character (ASCII letters, digits, '_' and any non-ASCII, non-whitespace character — an
// approximation of Rust's char::is_alphanumeric that Gemma never relies on).
//
// Immutable after construction; Split may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace gannet::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  // `content` after the tokenizer's normalizer: what normalized tokens are matched against, and
  // the token string HF reports for them (id_to_token, decode).
  std::string normalized_content;
};

class AddedVocabulary {
 public:
  // A piece of input: an added token (id >= 0) or plain text (id == -1).
  struct Segment {
    int32_t id;
    std::string_view text;
  };

  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Appends the segments of `text`; `raw` selects the normalized=false tokens (matched on the raw
  // input), otherwise the normalized=true ones. Text segments are views into `text`.
  // `plain`: byte ranges [begin, end) of `text`, sorted and disjoint, where special tokens are
  // plain text (HF's split_special_tokens, for a part of the input only): a special token's match
  // that overlaps one is not taken. `no_special`: no special token matches anywhere.
  void Split(std::string_view text, bool raw, std::vector<Segment>* out,
             absl::Span<const std::pair<size_t, size_t>> plain = {}, bool no_special = false) const;

  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  // A byte trie: leftmost-longest matching is "walk as far as possible from each start".
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
      int32_t token = -1;                                       // index into tokens_
    };
    std::vector<Node> nodes{1};
    bool first_byte[256] = {};
    void Insert(std::string_view pattern, int32_t token);
    // Longest match starting at text[pos]: token index and length, or -1.
    int32_t Match(std::string_view text, size_t pos, size_t* len) const;
  };

  std::vector<AddedToken> tokens_;
  Trie raw_trie_, normalized_trie_;
  absl::flat_hash_map<int32_t, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_content_;
};

}  // namespace gannet::tokenizer
