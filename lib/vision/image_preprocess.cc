#include "lib/vision/image_preprocess.h"

#include <algorithm>
#include <cmath>

#include "lib/common/status.h"
#include "lib/vision/image_error.h"
#include "lib/vision/image_resize.h"

namespace gannet::vision {

absl::Status CheckPreprocessOptions(const PreprocessOptions& options) {
  constexpr int kSupported[] = {70, 140, 280, 560, 1120};
  if (std::find(std::begin(kSupported), std::end(kSupported), options.max_soft_tokens) ==
      std::end(kSupported)) {
    return InvalidArgumentError("max_soft_tokens must be one of 70, 140, 280, 560, 1120, got {}",
                                options.max_soft_tokens);
  }
  if (options.patch_size <= 0 || options.patch_size > 64 || options.pooling_kernel <= 0 ||
      options.pooling_kernel > 8) {
    return InvalidArgumentError("patch_size {} / pooling_kernel {} out of range",
                                options.patch_size, options.pooling_kernel);
  }
  return absl::OkStatus();
}

absl::StatusOr<TargetSize> GemmaTargetSize(int height, int width,
                                           const PreprocessOptions& options) {
  GANNET_RETURN_IF_ERROR(CheckPreprocessOptions(options));
  if (height <= 0 || width <= 0) {
    return ImageError(ImageErrorKind::kEmpty, "image is {} x {} pixels", width, height);
  }
  const int64_t pool2 = int64_t{options.pooling_kernel} * options.pooling_kernel;
  const int64_t max_patches = options.max_soft_tokens * pool2;
  const int64_t target_px = max_patches * options.patch_size * options.patch_size;
  const int64_t total_px = int64_t{height} * width;
  const double factor = std::sqrt(static_cast<double>(target_px) / static_cast<double>(total_px));
  const int64_t side = int64_t{options.pooling_kernel} * options.patch_size;
  int64_t th = static_cast<int64_t>(std::floor(factor * height / side)) * side;
  int64_t tw = static_cast<int64_t>(std::floor(factor * width / side)) * side;
  if (th == 0 && tw == 0) {
    return ImageError(ImageErrorKind::kBadGeometry, "{} x {} resizes to 0 x 0", width, height);
  }
  const int64_t max_side = (max_patches / pool2) * side;
  if (th == 0) {
    th = side;
    tw = std::min(static_cast<int64_t>(std::floor(static_cast<double>(width) / height)) * side,
                  max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min(static_cast<int64_t>(std::floor(static_cast<double>(height) / width)) * side,
                  max_side);
  }
  if (th * tw > target_px) {
    return ImageError(ImageErrorKind::kBadGeometry,
                      "{} x {} resizes to {} x {}, more than {} patches", width, height, tw, th,
                      max_patches);
  }
  return TargetSize{static_cast<int>(th), static_cast<int>(tw)};
}

absl::StatusOr<RgbImage> ResizeForGemma(const RgbImage& image, const PreprocessOptions& options) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return ImageError(ImageErrorKind::kEmpty, "image {} x {} with {} bytes", image.width,
                      image.height, image.pixels.size());
  }
  GANNET_ASSIGN_OR_RETURN(TargetSize target, GemmaTargetSize(image.height, image.width, options));
  return ResizeBicubicAntialias(image, target.width, target.height);
}

absl::StatusOr<ImagePatches> PreprocessImage(const RgbImage& image,
                                             const PreprocessOptions& options) {
  GANNET_ASSIGN_OR_RETURN(RgbImage resized, ResizeForGemma(image, options));
  const int p = options.patch_size;
  const int pool2 = options.pooling_kernel * options.pooling_kernel;
  ImagePatches out;
  out.max_patches = options.max_soft_tokens * pool2;
  out.patch_values = 3 * p * p;
  out.grid_height = resized.height / p;
  out.grid_width = resized.width / p;
  out.num_patches = out.grid_height * out.grid_width;
  out.num_soft_tokens = out.num_patches / pool2;
  out.pixel_values.assign(static_cast<size_t>(out.max_patches) * out.patch_values, 0.0f);
  out.position_ids.assign(static_cast<size_t>(out.max_patches) * 2, -1);
  for (int gy = 0; gy < out.grid_height; ++gy) {
    for (int gx = 0; gx < out.grid_width; ++gx) {
      const size_t patch = static_cast<size_t>(gy) * out.grid_width + gx;
      float* dst = &out.pixel_values[patch * out.patch_values];
      for (int py = 0; py < p; ++py) {
        const uint8_t* src = resized.Row(gy * p + py) + static_cast<size_t>(gx) * p * 3;
        for (int k = 0; k < p * 3; ++k) dst[py * p * 3 + k] = RescaleU8(src[k]);
      }
      out.position_ids[patch * 2] = gx;
      out.position_ids[patch * 2 + 1] = gy;
    }
  }
  return out;
}

}  // namespace gannet::vision
