// Incremental detokenization for token streams: feed ids one at a time, get back the text that
// became final with each. The concatenation of everything Push and Flush return equals
// Tokenizer::Decode of all the ids pushed (with the same DecodeOptions), so streamed output and a
// full decode never disagree, including "▁"→space and any leading-space rule of the decoder.
//
// How: the decoder of Gemma's tokenizer.json is concatenative token by token except that runs of
// byte-fallback tokens ("<0xE2><0x82><0xAC>" → "€") are decoded together, and a run is valid or
// invalid as a whole (HF turns every byte of an invalid run into U+FFFD). So a byte token is held
// until the run ends (at the next non-byte token, or Flush), and text is only ever emitted up to
// a token that ends a run. Each step decodes a small window: the last emitted token (so the
// decoder sees the same left context as in a full decode) plus the held tokens. Emitted text is
// therefore always whole UTF-8 characters; a 4-byte emoji spread over 4 tokens comes out at once.
//
// Flush() ends the stream: an unfinished byte run comes out as HF decodes it (one U+FFFD per
// byte), and the detokenizer is ready for a new stream.
//
// Ownership: borrows the Tokenizer, which must outlive it. Not thread-safe (one per sequence);
// cheap to create and to move.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::tokenizer {

class StreamingDetokenizer {
 public:
  // Unimplemented when the tokenizer's decoder edits the ends of the joined text (a Strip with
  // stop > 0 after Fuse), which no stream can reproduce without look-ahead.
  static absl::StatusOr<StreamingDetokenizer> Create(const Tokenizer* tokenizer,
                                                     DecodeOptions options = {});

  // The text finalised by `id` (often empty while a byte run is open). InvalidArgument for an id
  // outside the vocabulary; the stream is unchanged then.
  absl::StatusOr<std::string> Push(int32_t id);

  // The rest of the stream; then starts a new one.
  std::string Flush();

  // Ids pushed but not yet reflected in the output.
  size_t num_pending() const { return window_.size() - anchor_; }

 private:
  StreamingDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
      : tokenizer_(tokenizer), options_(options) {}

  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  // window_[0, anchor_) were emitted already (at most the last one is kept, as left context);
  // anchor_text_ is their decode on their own.
  std::vector<int32_t> window_;
  size_t anchor_ = 0;
  std::string anchor_text_;
};

}  // namespace gannet::tokenizer
