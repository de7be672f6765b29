// Images in a request: matching the prompt's image soft-token runs to the request's images,
// loading the vision tower with the engine, and encoding a request's images into the features
// that replace those tokens' embeddings (docs/vision.md "Images in the engine").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/common/image_blocks.h"
#include "lib/engine/engine.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/vision/vision_tower.h"

namespace gannet::engine {

// The engine's vision tower, or why there is none (`unavailable`: InvalidArgument for a model
// without vision_config or a checkpoint without the tower, Unimplemented for a backend or setup
// that cannot run it).
struct VisionPart {
  std::unique_ptr<model::Checkpoint> checkpoint;  // vision_only; the tower points into it
  std::unique_ptr<vision::VisionTower> tower;
  absl::Status unavailable;
};

// Loads the tower for `backend` when the config has one and the backend runs it. A tower whose
// tensors do not bind leaves `unavailable` set (the text model still serves); an error only when
// the checkpoint cannot be opened or the backend refuses the tower's weights.
absl::StatusOr<VisionPart> LoadVisionPart(const model::ModelConfig& config,
                                          const std::string& model_dir, bool dummy_weights,
                                          int tensor_parallel_size, backend::Backend* backend);

// Soft tokens the image stands for: its real patches (positions not (-1, -1)) / pooling_kernel^2.
// InvalidArgument naming the image when the sizes do not fit the config.
absl::StatusOr<int64_t> ImageSoftTokens(const model::VisionConfig& vc, const ImageInput& image,
                                        size_t index);

// The image blocks of a prompt: each maximal run of the config's image_token_id is the next
// image's soft tokens (HF marks only those, not boi/eoi), hashed by the image's pixels and
// positions. InvalidArgument naming the image for a run whose length differs from its soft-token
// count, more or fewer images than runs; `vision.unavailable` when there are images or runs and no
// tower. A model without vision_config reads image token ids as text when no image is given.
absl::StatusOr<std::vector<ImageBlock>> MatchImageBlocks(const model::ModelConfig& config,
                                                         const VisionPart& vision,
                                                         std::span<const int32_t> prompt,
                                                         std::span<const ImageInput> images);

// 64-bit hash of an image's pixels and positions (the prefix cache's content key).
uint64_t ImageContentHash(const ImageInput& image);

// Runs the tower over the images: [total soft tokens, text hidden] f32 in prompt order.
absl::StatusOr<std::vector<float>> EncodeImages(vision::VisionTower& tower,
                                                std::span<const ImageInput> images);

}  // namespace gannet::engine
