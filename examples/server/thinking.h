// Gemma-4 thinking, split out of a reply: the model writes its thoughts as
// <|channel>thought\n ... <channel|> before the answer. Those special tokens never reach the text
// (the detokenizer skips them), so the split follows the token ids: what lies between them goes
// to `reasoning_content`, never to `content`. Malformed output (a channel never closed, a header
// without its newline) keeps every character, as reasoning.
#pragma once

#include <cstdint>
#include <string>

namespace gannet_server {

class ThinkingSplitter {
 public:
  // The ids of <|channel> and <channel|>; -1 = the vocabulary lacks them (nothing is split).
  ThinkingSplitter(int32_t open_id = -1, int32_t close_id = -1)
      : open_id_(open_id), close_id_(close_id) {}

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  // One event: its token (-1 for a FINISH event's held-back text) and the text it completed.
  // The text belongs to the state before the token (special tokens add none of their own).
  Delta Feed(int32_t token_id, const std::string& text);
  // The end of the reply: a channel header still open is reasoning.
  Delta Finish();
  // Whether text now would be answer (not thinking).
  bool in_content() const { return state_ == State::kContent; }

 private:
  enum class State { kContent, kHeader, kThought };
  // The channel's name line ("thought\n") is dropped; longer than this without a newline it is
  // not a header, and is kept as reasoning.
  static constexpr size_t kMaxHeader = 32;
  void Route(const std::string& text, Delta* d);

  int32_t open_id_, close_id_;
  State state_ = State::kContent;
  std::string header_;
};

}  // namespace gannet_server
