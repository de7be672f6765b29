// Images as the public API gives them (encoded bytes or a raw RGB buffer, one placeholder token
// per image in the prompt) turned into the engine's preprocessed ImageInput and the expanded
// prompt (docs/vision.md "API"). Runs on the submitting thread: decoding and resizing a large
// photo takes ~150 ms, which must not stall the engine thread's steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/engine/engine.h"
#include "lib/vision/image.h"

namespace gannet::engine {

// The soft-token budgets HF's Gemma-4 processor accepts; 0 in an ImageSource means the default.
inline constexpr int kDefaultImageSoftTokens = 280;
// Images one request may carry (each costs at least 1 + 1 + 1 prompt tokens; a context of 256K
// could not hold more than this many of the smallest).
inline constexpr size_t kMaxRequestImages = 4096;

// What a request's image may be before it is decoded (bytes, pixels): the decoder's defaults.
inline constexpr vision::DecodeLimits kImageDecodeLimits{};

// The geometry preprocessing needs from the model (Gemma-4: 16-pixel patches, 3x3 pooling).
struct ImageGeometry {
  int patch_size = 16;
  int pooling_kernel = 3;
};

// One preprocessed image and the soft tokens it stands for.
struct PreparedImages {
  std::vector<ImageInput> images;
  std::vector<int> soft_tokens;
};

// Decodes and preprocesses every source in order. Errors keep their vision::ImageErrorKind
// payload and name the image ("request: images[2]: ...").
absl::StatusOr<PreparedImages> PrepareImages(std::span<const ImageSource> sources,
                                             const ImageGeometry& geometry);

// How many image placeholders (token `image_token_id`) the prompt ids hold.
int64_t CountImagePlaceholders(std::span<const int32_t> prompt, int32_t image_token_id);

// The prompt length once every placeholder became boi + N soft tokens + eoi.
int64_t ExpandedPromptLength(int64_t prompt_tokens, std::span<const int> soft_tokens);

}  // namespace gannet::engine
