#include "lib/engine/text_output.h"

#include <algorithm>

#include "lib/common/status.h"

namespace gannet::engine {

absl::StatusOr<TextOutput> TextOutput::Create(const tokenizer::Tokenizer* tok,
                                              std::vector<std::string> stop_strings) {
  std::optional<tokenizer::StreamingDetokenizer> detok;
  int32_t open = -1, close = -1;
  if (tok != nullptr) {
    open = tok->TokenToId("<|channel>").value_or(-1);
    close = tok->TokenToId("<channel|>").value_or(-1);
    tokenizer::DecodeOptions o;
    o.skip_special_tokens = true;
    GANNET_ASSIGN_OR_RETURN(auto d, tokenizer::StreamingDetokenizer::Create(tok, o));
    detok.emplace(std::move(d));
  }
  stop_strings.erase(std::remove(stop_strings.begin(), stop_strings.end(), std::string()),
                     stop_strings.end());
  return TextOutput(std::move(detok), std::move(stop_strings), open, close);
}

size_t TextOutput::HoldBack() const {
  size_t hold = 0;
  for (const std::string& s : stops_) {
    // Longest proper prefix of s that is a suffix of pending_.
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

absl::StatusOr<TextOutput::Delta> TextOutput::Push(int32_t token, bool match_stops) {
  Delta d;
  if (!detok_ || stopped_) return d;
  GANNET_ASSIGN_OR_RETURN(std::string piece, detok_->Push(token));
  if (token >= 0 && (token == channel_open_ || token == channel_close_)) {
    // A marker ends one side: release what it held back (no stop string spans a marker).
    d.text = std::move(pending_) + piece;
    pending_.clear();
    d.thinking = in_thought_;
    in_thought_ = token == channel_open_;
    naming_ = in_thought_;
    channel_name_.clear();
    return d;
  }
  d.thinking = in_thought_;
  if (naming_) {
    // The channel's name ("thought") and its newline open the channel; they are not text. A
    // name that runs on without a newline is not one: it is kept as text.
    constexpr size_t kMaxName = 64;
    channel_name_ += piece;
    const size_t nl = channel_name_.find('\n');
    if (nl == std::string::npos && channel_name_.size() <= kMaxName) return d;
    piece = nl == std::string::npos ? channel_name_ : channel_name_.substr(nl + 1);
    naming_ = false;
    channel_name_.clear();
  }
  pending_ += piece;
  size_t first = std::string::npos;
  if (match_stops) {
    for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  }
  if (first != std::string::npos) {
    d.text = pending_.substr(0, first);
    d.stop_hit = true;
    stopped_ = true;
    pending_.clear();
    return d;
  }
  const size_t emit = pending_.size() - HoldBack();
  d.text = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return d;
}

TextOutput::Delta TextOutput::Finish() {
  Delta d;
  if (!detok_ || stopped_) return d;
  pending_ += detok_->Flush();
  d.text.swap(pending_);
  d.thinking = in_thought_;
  return d;
}

}  // namespace gannet::engine
