#include "lib/vision/image_prompt.h"

#include "lib/common/status.h"

namespace gannet::vision {

std::vector<int32_t> ImageTokenSequence(int num_soft_tokens, const ImageTokenIds& ids) {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(num_soft_tokens) + 2);
  out.push_back(ids.boi);
  out.insert(out.end(), static_cast<size_t>(num_soft_tokens), ids.image);
  out.push_back(ids.eoi);
  return out;
}

absl::StatusOr<ExpandedPrompt> ExpandImagePlaceholders(std::span<const int32_t> prompt,
                                                       std::span<const int> num_soft_tokens,
                                                       const ImageTokenIds& ids) {
  if (ids.boi < 0 || ids.image < 0 || ids.eoi < 0 || ids.boi == ids.image || ids.boi == ids.eoi ||
      ids.image == ids.eoi) {
    return InvalidArgumentError("image token ids boi {} image {} eoi {} must be distinct and >= 0",
                                ids.boi, ids.image, ids.eoi);
  }
  size_t placeholders = 0;
  size_t extra = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] == ids.boi || prompt[i] == ids.eoi) {
      return InvalidArgumentError(
          "prompt token {} is an image delimiter ({}): images are placed "
          "by the image token {} only",
          i, prompt[i], ids.image);
    }
    if (prompt[i] != ids.image) continue;
    if (placeholders < num_soft_tokens.size()) {
      const int n = num_soft_tokens[placeholders];
      if (n <= 0) return InvalidArgumentError("image {} has {} soft tokens", placeholders, n);
      extra += static_cast<size_t>(n) + 1;  // the placeholder becomes n + 2 tokens
    }
    ++placeholders;
  }
  if (placeholders != num_soft_tokens.size()) {
    return InvalidArgumentError("prompt has {} image tokens for {} images", placeholders,
                                num_soft_tokens.size());
  }
  ExpandedPrompt out;
  out.tokens.reserve(prompt.size() + extra);
  out.image_block_ids.reserve(prompt.size() + extra);
  int32_t image = 0;
  for (int32_t token : prompt) {
    if (token != ids.image) {
      out.tokens.push_back(token);
      out.image_block_ids.push_back(-1);
      continue;
    }
    const int n = num_soft_tokens[image];
    out.tokens.push_back(ids.boi);
    out.image_block_ids.push_back(-1);
    out.tokens.insert(out.tokens.end(), static_cast<size_t>(n), ids.image);
    out.image_block_ids.insert(out.image_block_ids.end(), static_cast<size_t>(n), image);
    out.tokens.push_back(ids.eoi);
    out.image_block_ids.push_back(-1);
    ++image;
  }
  return out;
}

}  // namespace gannet::vision
