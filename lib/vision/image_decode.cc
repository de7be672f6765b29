#include "lib/vision/image_decode.h"

#include <cstring>

#include "lib/vision/image_codecs.h"
#include "lib/vision/image_error.h"

namespace gannet::vision {
namespace internal {

absl::Status CheckDimensions(int64_t width, int64_t height, const DecodeLimits& limits,
                             const char* format) {
  if (width <= 0 || height <= 0) {
    return ImageError(ImageErrorKind::kEmpty, "{} image is {} x {} pixels", format, width, height);
  }
  // Both factors are below 2^32 for every format's header, so the product cannot overflow.
  if (width > (int64_t{1} << 32) || height > (int64_t{1} << 32) ||
      width * height > limits.max_pixels) {
    return ImageError(ImageErrorKind::kTooLarge,
                      "{} image is {} x {} pixels, above the limit of {}", format, width, height,
                      limits.max_pixels);
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<ImageFormat> SniffImageFormat(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return ImageError(ImageErrorKind::kEmpty, "no image bytes");
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 12 && std::memcmp(bytes.data(), "RIFF", 4) == 0 &&
      std::memcmp(bytes.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  return ImageError(ImageErrorKind::kUnknownFormat,
                    "{} bytes that start with no PNG, JPEG or WebP signature", bytes.size());
}

absl::StatusOr<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    return ImageError(ImageErrorKind::kTooLarge, "{} bytes of image data, above the limit of {}",
                      bytes.size(), limits.max_bytes);
  }
  GANNET_ASSIGN_OR_RETURN(ImageFormat format, SniffImageFormat(bytes));
  switch (format) {
    case ImageFormat::kPng:
      return internal::DecodePng(bytes, limits);
    case ImageFormat::kJpeg:
      return internal::DecodeJpeg(bytes, limits);
    case ImageFormat::kWebp:
      return internal::DecodeWebp(bytes, limits);
  }
  return ImageError(ImageErrorKind::kUnknownFormat, "unknown image format");
}

absl::StatusOr<RgbImage> RgbImageFromRaw(int width, int height, std::span<const uint8_t> bytes,
                                         const DecodeLimits& limits) {
  GANNET_RETURN_IF_ERROR(internal::CheckDimensions(width, height, limits, "raw RGB"));
  const size_t want = static_cast<size_t>(width) * static_cast<size_t>(height) * 3;
  if (bytes.size() != want) {
    return ImageError(bytes.size() < want ? ImageErrorKind::kTruncated : ImageErrorKind::kCorrupt,
                      "raw RGB {} x {} needs {} bytes, got {}", width, height, want, bytes.size());
  }
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.assign(bytes.begin(), bytes.end());
  return image;
}

}  // namespace gannet::vision
