// Internal: one decoder per format (png_decode.cc, jpeg_decode.cc, webp_decode.cc), called by
// DecodeImage after the signature check. Each returns RGB (any alpha dropped).
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "lib/vision/image.h"

namespace gannet::vision::internal {

absl::StatusOr<RgbImage> DecodePng(std::span<const uint8_t> bytes, const DecodeLimits& limits);
absl::StatusOr<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
absl::StatusOr<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// kEmpty / kTooLarge errors for a header's dimensions; OK when width * height is within limits.
absl::Status CheckDimensions(int64_t width, int64_t height, const DecodeLimits& limits,
                             const char* format);

}  // namespace gannet::vision::internal
