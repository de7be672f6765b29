#include "lib/tokenizer/streaming_detokenizer.h"

#include <algorithm>
#include <string>

#include "lib/common/check.h"
#include "lib/common/status.h"

namespace gannet::tokenizer {

absl::StatusOr<StreamingDetokenizer> StreamingDetokenizer::Create(const Tokenizer* tokenizer,
                                                                  DecodeOptions options) {
  if (!tokenizer->streamable()) {
    return UnimplementedError(
        "this tokenizer's decoder rewrites the ends of the joined text; it cannot be streamed");
  }
  return StreamingDetokenizer(tokenizer, options);
}

absl::StatusOr<std::string> StreamingDetokenizer::Push(int32_t id) {
  GANNET_RETURN_IF_ERROR(tokenizer_->IdToToken(id).status());
  // Skipped tokens vanish before the decoder runs in a full decode too, so a skipped special
  // token between two byte tokens does not end their run.
  if (options_.skip_special_tokens && tokenizer_->IsSpecial(id)) return std::string();
  window_.push_back(id);
  if (tokenizer_->IsHeldByteToken(id)) return std::string();

  GANNET_ASSIGN_OR_RETURN(std::string text, tokenizer_->Decode(window_, options_));
  // Prefix stability holds for every decoder Create accepts; report rather than abort if not.
  if (text.compare(0, anchor_text_.size(), anchor_text_) != 0) {
    return InternalError("streaming decode is not prefix-stable at token id {}", id);
  }
  std::string delta = text.substr(anchor_text_.size());
  window_.assign(1, id);
  anchor_ = 1;
  GANNET_ASSIGN_OR_RETURN(anchor_text_, tokenizer_->Decode(window_, options_));
  return delta;
}

std::string StreamingDetokenizer::Flush() {
  std::string delta;
  if (window_.size() > anchor_) {
    // Every id in the window was validated by Push, so decoding cannot fail.
    absl::StatusOr<std::string> text = tokenizer_->Decode(window_, options_);
    GANNET_CHECK_OK(text.status());
    delta = text->substr(std::min(anchor_text_.size(), text->size()));
  }
  window_.clear();
  anchor_ = 0;
  anchor_text_.clear();
  return delta;
}

}  // namespace gannet::tokenizer
