#include "examples/server/thinking.h"

namespace gannet_server {

void ThinkingSplitter::Route(const std::string& text, Delta* d) {
  switch (state_) {
    case State::kContent:
      d->content += text;
      break;
    case State::kThought:
      d->reasoning += text;
      break;
    case State::kHeader: {
      header_ += text;
      const size_t nl = header_.find('\n');
      if (nl != std::string::npos) {
        d->reasoning += header_.substr(nl + 1);
        header_.clear();
        state_ = State::kThought;
      } else if (header_.size() > kMaxHeader) {
        d->reasoning += header_;
        header_.clear();
        state_ = State::kThought;
      }
      break;
    }
  }
}

ThinkingSplitter::Delta ThinkingSplitter::Feed(int32_t token_id, const std::string& text) {
  Delta d;
  Route(text, &d);
  if (token_id >= 0 && token_id == open_id_ && state_ == State::kContent) {
    state_ = State::kHeader;
    header_.clear();
  } else if (token_id >= 0 && token_id == close_id_ && state_ != State::kContent) {
    if (state_ == State::kHeader) d.reasoning += header_;  // "<|channel>x<channel|>": keep x
    header_.clear();
    state_ = State::kContent;
  }
  return d;
}

ThinkingSplitter::Delta ThinkingSplitter::Finish() {
  Delta d;
  if (state_ == State::kHeader) d.reasoning = header_;
  header_.clear();
  return d;
}

}  // namespace gannet_server
