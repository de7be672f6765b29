// WebP through libwebp: the header's features first (size, alpha, animation), then a decode
// into a buffer we allocated after checking the size. libwebp reports errors by return value.
#include <webp/decode.h>

#include <vector>

#include "lib/vision/image_codecs.h"
#include "lib/vision/image_error.h"

namespace gannet::vision::internal {

absl::StatusOr<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode header = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (header == VP8_STATUS_NOT_ENOUGH_DATA) {
    return ImageError(ImageErrorKind::kTruncated, "WebP header: unexpected end of data");
  }
  if (header != VP8_STATUS_OK) {
    return ImageError(ImageErrorKind::kCorrupt, "WebP header: libwebp status {}",
                      static_cast<int>(header));
  }
  GANNET_RETURN_IF_ERROR(CheckDimensions(features.width, features.height, limits, "WebP"));
  if (features.has_animation) {
    return ImageError(ImageErrorKind::kUnsupported, "animated WebP images are not supported");
  }
  // RGB output: an alpha channel is dropped, as PIL's convert("RGB") drops it.
  const size_t stride = static_cast<size_t>(features.width) * 3;
  std::vector<uint8_t> raw(stride * features.height);
  const uint8_t* ok = WebPDecodeRGBInto(bytes.data(), bytes.size(), raw.data(), raw.size(),
                                        static_cast<int>(stride));
  if (ok == nullptr) {
    // libwebp's simple API does not say why; a stream that stops early is the usual cause and
    // is told apart by asking the incremental decoder whether it wanted more data.
    WebPIDecoder* idec = WebPINewRGB(MODE_RGB, raw.data(), raw.size(), static_cast<int>(stride));
    const VP8StatusCode status =
        idec ? WebPIAppend(idec, bytes.data(), bytes.size()) : VP8_STATUS_OUT_OF_MEMORY;
    if (idec) WebPIDelete(idec);
    if (status == VP8_STATUS_SUSPENDED || status == VP8_STATUS_NOT_ENOUGH_DATA) {
      return ImageError(ImageErrorKind::kTruncated, "WebP data: unexpected end of data");
    }
    return ImageError(ImageErrorKind::kCorrupt, "WebP data: libwebp could not decode the image");
  }
  RgbImage image;
  image.width = features.width;
  image.height = features.height;
  image.pixels = std::move(raw);
  return image;
}

}  // namespace gannet::vision::internal
