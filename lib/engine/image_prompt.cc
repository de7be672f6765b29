#include "lib/engine/image_prompt.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "lib/common/hash.h"
#include "lib/common/logging.h"
#include "lib/common/status.h"
#include "lib/vision/vision_weights.h"

namespace gannet::engine {

absl::StatusOr<VisionPart> LoadVisionPart(const model::ModelConfig& config,
                                          const std::string& model_dir, bool dummy_weights,
                                          int tensor_parallel_size, backend::Backend* backend) {
  VisionPart v;
  if (!config.vision.has_value()) {
    v.unavailable =
        InvalidArgumentError("engine: the model has no vision_config: it takes no images");
    return v;
  }
  if (dummy_weights) {
    v.unavailable =
        InvalidArgumentError("engine: dummy weights have no vision tower: they take no images");
    return v;
  }
  // The tower needs the backend's vision ops; a backend that lacks them (CUDA today) answers
  // Unimplemented whatever the arguments, so a call with empty tensors tells.
  {
    const backend::Tensor none;
    const absl::Status probes[] = {
        backend->Clamp(none, 0.0f, 0.0f, none),
        backend->VisionRope(none, none, 1.0f),
        backend->SegmentAttention(backend::SegmentAttentionArgs()),
        backend->ScatterSumRows(none, none, 1.0f, none),
        backend->Standardize(none, none, none),
    };
    for (const absl::Status& p : probes) {
      if (p.code() != absl::StatusCode::kUnimplemented) continue;
      v.unavailable = UnimplementedError(
          "engine: the {} backend lacks the vision tower's ops; images run on the CPU backend "
          "only for now",
          backend->name());
      return v;
    }
  }
  if (tensor_parallel_size > 1) {
    v.unavailable = UnimplementedError("engine: images are not served with tensor parallelism");
    return v;
  }
  GANNET_ASSIGN_OR_RETURN(v.checkpoint, model::Checkpoint::Open(model_dir, {.vision_only = true}));
  if (v.checkpoint->Names().empty()) {
    v.checkpoint.reset();
    v.unavailable = InvalidArgumentError(
        "engine: the checkpoint in {} has no vision tower weights: it takes no images", model_dir);
    return v;
  }
  // A tower that does not bind (tensors that disagree with vision_config) leaves the text model
  // serving: only requests with images are refused, naming why.
  absl::StatusOr<vision::VisionWeights> w = vision::BindVisionWeights(config, *v.checkpoint);
  if (!w.ok()) {
    GANNET_LOG_WARNING("engine: the vision tower is not loaded, images are refused: {}",
                       w.status().message());
    v.checkpoint.reset();
    v.unavailable = InvalidArgumentError("engine: the checkpoint's vision tower does not load: {}",
                                         w.status().message());
    return v;
  }
  GANNET_ASSIGN_OR_RETURN(v.tower, vision::VisionTower::Create(backend, config, *w));
  return v;
}

absl::StatusOr<int64_t> ImageSoftTokens(const model::VisionConfig& vc, const ImageInput& image,
                                        size_t index) {
  const int64_t width = 3 * int64_t{vc.patch_size} * vc.patch_size;
  const int64_t rows = static_cast<int64_t>(image.positions.size()) / 2;
  if (image.positions.size() % 2 != 0 || rows == 0 ||
      static_cast<int64_t>(image.pixel_values.size()) != rows * width) {
    return InvalidArgumentError(
        "image {}: {} pixel values and {} position values do not make [patches, {}] and "
        "[patches, 2]",
        index, image.pixel_values.size(), image.positions.size(), width);
  }
  int64_t real = 0;
  for (int64_t r = 0; r < rows; ++r) real += image.positions[2 * r] >= 0 ? 1 : 0;
  const int64_t k2 = int64_t{vc.pooling_kernel_size} * vc.pooling_kernel_size;
  if (real == 0 || real % k2 != 0) {
    return InvalidArgumentError("image {}: {} real patches is not a positive multiple of {}", index,
                                real, k2);
  }
  return real / k2;
}

uint64_t ImageContentHash(const ImageInput& image) {
  const uint64_t px =
      Fnv1a64(std::string_view(reinterpret_cast<const char*>(image.pixel_values.data()),
                               image.pixel_values.size() * sizeof(float)));
  const uint64_t pos =
      Fnv1a64(std::string_view(reinterpret_cast<const char*>(image.positions.data()),
                               image.positions.size() * sizeof(int32_t)));
  return SplitMix64(px ^ SplitMix64(pos));
}

absl::StatusOr<std::vector<ImageBlock>> MatchImageBlocks(const model::ModelConfig& config,
                                                         const VisionPart& vision,
                                                         std::span<const int32_t> prompt,
                                                         std::span<const ImageInput> images) {
  // Runs of the image soft token: HF's mm_token_type_ids marks these positions only (boi and eoi
  // are text), and its placeholder mask is `input_ids == image_token_id`.
  std::vector<ImageBlock> runs;
  const int32_t image_token = config.image_token_id;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != image_token) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prompt.size() && prompt[j] == image_token) ++j;
    runs.push_back({static_cast<int64_t>(i), static_cast<int64_t>(j), 0});
    i = j;
  }
  if (images.empty() && (runs.empty() || !config.vision.has_value()))
    return std::vector<ImageBlock>{};
  if (!vision.unavailable.ok()) return vision.unavailable;
  if (vision.tower == nullptr)
    return FailedPreconditionError("engine: the vision tower is not loaded");
  if (runs.size() != images.size()) {
    return InvalidArgumentError(
        "request: the prompt has {} runs of the image token {} for {} images", runs.size(),
        image_token, images.size());
  }
  for (size_t k = 0; k < images.size(); ++k) {
    GANNET_ASSIGN_OR_RETURN(const int64_t soft, ImageSoftTokens(*config.vision, images[k], k));
    if (runs[k].size() != soft) {
      return InvalidArgumentError(
          "image {}: the prompt has {} image tokens at position {} but the image is {} soft tokens",
          k, runs[k].size(), runs[k].begin, soft);
    }
    runs[k].content_hash = ImageContentHash(images[k]);
  }
  return runs;
}

absl::StatusOr<std::vector<float>> EncodeImages(vision::VisionTower& tower,
                                                std::span<const ImageInput> images) {
  std::vector<vision::ImagePatches> patches;
  patches.reserve(images.size());
  for (const ImageInput& im : images) patches.push_back({im.pixel_values, im.positions});
  GANNET_ASSIGN_OR_RETURN(vision::VisionOutput out, tower.Encode(patches));
  return std::move(out.soft_tokens);
}

}  // namespace gannet::engine
