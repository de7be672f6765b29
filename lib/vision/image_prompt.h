// The prompt side of an image: where its soft tokens go and which attention block they form.
//
// HF's Gemma4Processor replaces each image token written in the prompt by
//   boi, image_token x num_soft_tokens, eoi
// with nothing around it (no newlines), and marks only the image_token positions as image
// (mm_token_type_ids = 1; boi and eoi are text, 0). The model turns each contiguous run of image
// tokens into one bidirectional block; here that is the image block id: k >= 0 for every soft
// token of the k-th image of the prompt, -1 for everything else (boi and eoi included).
// Token ids come from the model config (boi_token_id, image_token_id, eoi_token_id).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace gannet::vision {

struct ImageTokenIds {
  int32_t boi = -1;    // <|image>
  int32_t image = -1;  // <|image|>, the placeholder in a prompt and the soft token after expansion
  int32_t eoi = -1;    // <image|>
};

// One image's tokens: boi, num_soft_tokens x image, eoi.
std::vector<int32_t> ImageTokenSequence(int num_soft_tokens, const ImageTokenIds& ids);

struct ExpandedPrompt {
  std::vector<int32_t> tokens;
  std::vector<int32_t> image_block_ids;  // per token: -1 text (boi/eoi too), k for image k
};

// Expands every `ids.image` token of `prompt`, in order, into image k's sequence; the number of
// placeholders must equal num_soft_tokens.size() (InvalidArgument otherwise, as HF refuses), a
// prompt may not already contain boi/eoi, and the ids must be distinct and non-negative.
absl::StatusOr<ExpandedPrompt> ExpandImagePlaceholders(std::span<const int32_t> prompt,
                                                       std::span<const int> num_soft_tokens,
                                                       const ImageTokenIds& ids);

}  // namespace gannet::vision
