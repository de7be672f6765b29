#include "lib/engine/text_output.h"

#include <algorithm>

#include "lib/common/status.h"

namespace gannet::engine {

absl::StatusOr<TextOutput> TextOutput::Create(const tokenizer::Tokenizer* tok,
                                              std::vector<std::string> stop_strings) {
  std::optional<tokenizer::StreamingDetokenizer> detok;
  if (tok != nullptr) {
    tokenizer::DecodeOptions o;
    o.skip_special_tokens = true;
    GANNET_ASSIGN_OR_RETURN(auto d, tokenizer::StreamingDetokenizer::Create(tok, o));
    detok.emplace(std::move(d));
  }
  stop_strings.erase(std::remove(stop_strings.begin(), stop_strings.end(), std::string()),
                     stop_strings.end());
  return TextOutput(std::move(detok), std::move(stop_strings));
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

std::string TextOutput::Finish() {
  if (!detok_ || stopped_) return "";
  pending_ += detok_->Flush();
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace gannet::engine
