// Gemma-4 image preprocessing: an RGB image -> the vision tower's input, as HF transformers
// 5.17's default Gemma4ImageProcessor (the torchvision one) builds it:
//   1. target size (GemmaTargetSize): the largest aspect-preserving size whose sides are
//      multiples of patch * pooling (48) and whose patch count fits max_patches =
//      max_soft_tokens * pooling^2; the image is resized to it (image_resize.h) unless it is
//      already that size;
//   2. values rescaled to [0, 1] as float(u8) * float(1/255) (no mean/std normalisation: the
//      tower applies 2 * (x - 0.5) itself);
//   3. cut into 16 x 16 patches, row-major over the patch grid, each flattened in
//      (patch row, patch column, channel) order: pixel_values [max_patches, 3 * 16 * 16];
//      image_position_ids [max_patches, 2] = (x, y) of each patch in the grid;
//   4. padded to max_patches with zero pixels and position (-1, -1);
//   5. num_soft_tokens = real patches / pooling^2 (the tower pools 3 x 3 patch cells).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/vision/image.h"

namespace gannet::vision {

struct PreprocessOptions {
  int max_soft_tokens = 280;  // one of 70, 140, 280, 560, 1120 (HF refuses others)
  int patch_size = 16;
  int pooling_kernel = 3;
};

// max_soft_tokens is one HF supports and patch_size, pooling_kernel are positive.
absl::Status CheckPreprocessOptions(const PreprocessOptions& options);

struct TargetSize {
  int height = 0;
  int width = 0;
};

// HF's get_aspect_ratio_preserving_size, in the same double arithmetic. Very thin images (one
// side rounds to zero) get one 48-pixel side and the other capped at
// (max_patches / pooling^2) * 48; a kBadGeometry error where HF raises.
absl::StatusOr<TargetSize> GemmaTargetSize(int height, int width,
                                           const PreprocessOptions& options = {});

struct ImagePatches {
  int max_patches = 0;                // max_soft_tokens * pooling^2
  int patch_values = 0;               // 3 * patch^2
  int grid_height = 0;                // patch rows of the resized image
  int grid_width = 0;                 // patch columns
  int num_patches = 0;                // grid_height * grid_width, the real (unpadded) rows
  int num_soft_tokens = 0;            // num_patches / pooling^2
  std::vector<float> pixel_values;    // [max_patches, patch_values]
  std::vector<int32_t> position_ids;  // [max_patches, 2]: (x, y), (-1, -1) on padding
};

absl::StatusOr<ImagePatches> PreprocessImage(const RgbImage& image,
                                             const PreprocessOptions& options = {});

// The resized image PreprocessImage patchifies (exposed for tests and tools).
absl::StatusOr<RgbImage> ResizeForGemma(const RgbImage& image, const PreprocessOptions& options);

// float(v) * float(1/255): the value HF's rescale gives a uint8 v (a uint8 tensor times a
// Python float computes in float32).
inline float RescaleU8(uint8_t v) {
  return static_cast<float>(v) * static_cast<float>(1.0 / 255.0);
}

}  // namespace gannet::vision
