// Per-request output text: streaming detokenization plus stop strings that may span tokens.
//
// Text that could still be the beginning of a stop string is held back until it can't be; when a
// stop string completes, the text before it is released and the rest (the stop string and
// anything after it) is dropped. Not thread-safe (engine thread only).
//
// Thinking: Gemma-4 writes its reasoning as `<|channel>thought\n ... <channel|>` before the answer.
// The two markers are special tokens (never in the text); the channel's name line ("thought\n")
// is dropped; the text between them is marked `thinking`. A Delta never mixes the two: at a marker
// the held-back text of the side it closes is released (a stop string does not span a marker).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/streaming_detokenizer.h"

namespace gannet::engine {

class TextOutput {
 public:
  // tokenizer may be null (no tokenizer.json): no text, stop strings never match.
  static absl::StatusOr<TextOutput> Create(const tokenizer::Tokenizer* tokenizer,
                                           std::vector<std::string> stop_strings);

  struct Delta {
    std::string text;       // safe to show now
    bool stop_hit = false;  // a stop string completed; text ends before it
    bool thinking = false;  // text is from the model's thought channel
  };
  // match_stops false (the request's first min_tokens tokens): stop strings are not looked for,
  // so one that completes there does not end the request; a later one still does.
  absl::StatusOr<Delta> Push(int32_t token, bool match_stops = true);
  // The held-back tail at the end of the request (never part of a stop string by now).
  Delta Finish();

 private:
  TextOutput(std::optional<tokenizer::StreamingDetokenizer> detok,
             std::vector<std::string> stop_strings, int32_t channel_open, int32_t channel_close)
      : detok_(std::move(detok)),
        stops_(std::move(stop_strings)),
        channel_open_(channel_open),
        channel_close_(channel_close) {}
  // How many trailing bytes of pending_ could start a stop string.
  size_t HoldBack() const;

  std::optional<tokenizer::StreamingDetokenizer> detok_;
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  int32_t channel_open_ = -1;   // <|channel>, -1 when the vocabulary lacks it
  int32_t channel_close_ = -1;  // <channel|>
  bool in_thought_ = false;     // between the two
  bool naming_ = false;         // reading the channel's name line, which is not text
  std::string channel_name_;
};

}  // namespace gannet::engine
