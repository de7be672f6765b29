// The Gemma-4 vision tower: image patches in, soft tokens in the text model's width out
// (docs/vision.md "Vision tower" gives the math). It runs on a backend::Backend through the
// text path's ops (Linear, RmsNorm, Embed, GeluTanhMul, Add) and the vision ops of backend.h
// (Clamp, VisionRope, SegmentAttention, ScatterSumRows, Standardize): the CPU backend implements
// them today. A CUDA tower needs those five ops in the CUDA backend and activation buffers in its
// compute dtype (they are f32 here, the CPU's activation type).
//
// Several images are encoded as one batch: the real patches of every image are stacked into one
// activation matrix (padding rows are dropped up front: HF masks them out of attention and
// pooling, so they never change a real output) and attention runs within each image's segment.
// Not thread-safe: one Encode at a time (like the backend).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/config.h"
#include "lib/vision/vision_weights.h"

namespace gannet::vision {

// One image in the preprocessor's hand-off layout (HF's): pixel_values [max_patches,
// 3 * patch^2] in [0, 1], (patch_y, patch_x, channel) order; positions [max_patches, 2] int32 =
// (x, y) of each patch, (-1, -1) on padding rows.
struct ImagePatches {
  std::span<const float> pixel_values;
  std::span<const int32_t> positions;
};

// Intermediate activations, for tests against HF: real patches of all images stacked in order.
struct VisionTrace {
  std::vector<float> embed;                // [T, H] patch projection + position embedding
  std::vector<std::vector<float>> layers;  // per encoder layer, its output [T, H]
  std::vector<float> pooled;               // [C, H] pooled by position, x sqrt(H)
  std::vector<float> standardized;         // [C, H] (= pooled without standardize)
};

struct VisionOutput {
  std::vector<float> soft_tokens;     // [C, text hidden]: every image's soft tokens in order
  std::vector<int> tokens_per_image;  // C_i per image; sums to C
};

class VisionTower {
 public:
  // Loads the weights onto `backend` (which must outlive the tower). The backend may keep
  // pointing into the views' memory (the CPU backend does for matrices): the checkpoint behind
  // `weights` must outlive the tower too.
  static absl::StatusOr<std::unique_ptr<VisionTower>> Create(backend::Backend* backend,
                                                             const model::ModelConfig& config,
                                                             const VisionWeights& weights);
  ~VisionTower();

  // Encodes the images. InvalidArgument naming the image for a malformed one (sizes that do not
  // match the config, a position outside the position table, a position of which only one
  // coordinate is -1, no real patch, a non-finite pixel, max_patches not a multiple of
  // pooling_kernel^2, a patch whose pooling cell lies past max_patches / pooling_kernel^2).
  absl::StatusOr<VisionOutput> Encode(std::span<const ImagePatches> images,
                                      VisionTrace* trace = nullptr);

  const model::VisionConfig& config() const { return vc_; }

 private:
  struct Impl;
  VisionTower(backend::Backend* backend, const model::ModelConfig& config);

  backend::Backend* backend_;
  model::VisionConfig vc_;
  int64_t text_hidden_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gannet::vision
