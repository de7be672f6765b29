// The "model" of a HuggingFace tokenizer.json when its type is "BPE": vocabulary, ranked merges,
// byte fallback, unknown-token handling. Tokenize() reproduces HF tokenizers' BPE::tokenize:
// each character becomes its vocab id (else its "<0xXX>" byte tokens with byte_fallback, else
// <unk>, fused with neighbouring <unk>s when fuse_unk), then the lowest-ranked adjacent pair is
// merged until none applies (a priority queue over a linked list of symbols, keyed by the pair's
// ids, so a word of n characters costs O(n log n)). Gemma's pre-tokenizer hands over whole
// paragraphs as one word; when the merges provably never join across a "▁" that follows another
// character (true of SentencePiece-style vocabularies, checked at load), such words are cut there
// first, which gives the same ids from short, cacheable pieces. Both merge encodings are read:
// "a b" strings and ["a", "b"] pairs.
//
// Thread safety: immutable after Parse except for an internal word cache guarded by mutexes, so
// Tokenize may be called concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/tokenizer/json_fields.h"

namespace gannet::tokenizer {

class BpeModel {
 public:
  // Ids at or above this are rejected as corrupt (Gemma's vocabulary is 262144).
  static constexpr int64_t kMaxTokenId = int64_t{1} << 24;

  // Reads a model from tokenizer.json member by member (Tokenizer streams the file: its vocab
  // and merges are ~all of it, and a JSON tree of them costs ~40x their text). The vocabulary
  // and merges are held compactly until Finish, in whatever order the file gives them.
  class Builder {
   public:
    // One entry of "vocab" (token -> id) and one of "merges", in document order.
    void AddVocab(std::string token, const Json& id);
    absl::Status AddMerge(const Json& merge, const internal::JsonWhere& where);
    // `options`: the model object's other members (type, byte_fallback, unk_token, ...);
    // has_vocab / has_merges: whether "vocab" was an object and "merges" an array.
    absl::StatusOr<std::unique_ptr<BpeModel>> Finish(const Json& options, bool has_vocab,
                                                     bool has_merges,
                                                     const internal::JsonWhere& where);

   private:
    std::vector<std::pair<std::string, int64_t>> vocab_;  // id -1: not an integer
    // Merge i is merge_text_[merge_ends_[2i-1] .. merge_ends_[2i]) and on to merge_ends_[2i+1].
    std::string merge_text_;
    std::vector<uint32_t> merge_ends_;
  };
  ~BpeModel();

  // Appends the ids of one pre-tokenized piece.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // nullptr when no vocab entry has this id.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // Number of vocabulary entries (HF's get_vocab_size; equals id_limit unless ids have gaps).
  size_t num_entries() const { return vocab_.size(); }
  // Whether every character becomes at least one token: it is in the vocabulary, or byte
  // fallback covers all 256 bytes, or it becomes an unfused <unk>. Not so when unknown characters
  // fuse into one <unk> or are dropped (no <unk>): any length of input in one token, or none.
  bool covers_every_character() const;
  size_t num_merges() const { return merges_.size(); }

 private:
  struct MergeInfo {
    int32_t rank;
    int32_t new_id;
  };
  class WordCache;

  BpeModel();
  static constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // "▁", SentencePiece's space

  std::optional<int32_t> Lookup(std::string_view s) const;
  bool CanSplitAtMetaspace() const;
  void TokenizeCached(std::string_view word, std::vector<int32_t>* ids) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  absl::flat_hash_map<uint64_t, MergeInfo> merges_;
  std::array<int32_t, 256> byte_ids_;   // "<0xXX>" ids, -1 where absent
  std::array<int32_t, 128> ascii_ids_;  // single ASCII character ids, -1 where absent
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  // Whether words may be cut before each "▁" that follows another character (CanSplitAtMetaspace).
  bool split_at_metaspace_ = false;
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace gannet::tokenizer
