// Image bytes -> 8-bit RGB, converted the way HF's Gemma-4 processor sees a PIL image:
// PIL.Image.open(bytes) followed by transformers' convert_to_rgb (image_transforms.py), i.e.
//   - grey (1/2/4/8-bit) replicated to R = G = B, low bit depths scaled to 0..255;
//   - palette looked up; 16-bit colour samples keep their high byte (PIL's "RGB;16B" raw mode);
//   - 16-bit grey is clipped to 255, not scaled (PIL opens it as mode I;16 and its I;16 -> L
//     conversion clips): a PIL quirk we copy so the model sees what it sees under HF;
//   - any alpha (an alpha channel, or a tRNS transparent colour / palette entry) is composited
//     on white with PIL's integer alpha_composite rounding (CompositeOnWhite below);
//   - EXIF orientation is not applied (PIL.Image.open does not apply it either).
// Formats are recognised by their signature, never by a name: PNG, JPEG (baseline and
// progressive; grey, YCbCr or RGB; CMYK is refused as unsupported) and WebP (lossy or lossless,
// still images; animations are refused).
//
// Every failure is an InvalidArgument (Unimplemented for unsupported kinds) carrying an
// ImageErrorKind payload (image_error.h). Sizes are checked against DecodeLimits before any
// buffer proportional to the image is allocated; codec errors never unwind C++ frames (see the
// per-codec files).
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "lib/vision/image.h"

namespace gannet::vision {

enum class ImageFormat { kPng, kJpeg, kWebp };

// The format whose signature starts `bytes`; kUnknownFormat (or kEmpty) error otherwise.
absl::StatusOr<ImageFormat> SniffImageFormat(std::span<const uint8_t> bytes);

absl::StatusOr<RgbImage> DecodeImage(std::span<const uint8_t> bytes,
                                     const DecodeLimits& limits = {});

// A caller's raw buffer: width * height * 3 bytes of interleaved RGB, rows top down.
absl::StatusOr<RgbImage> RgbImageFromRaw(int width, int height, std::span<const uint8_t> bytes,
                                         const DecodeLimits& limits = {});

// PIL's Image.alpha_composite of (r, a) over an opaque white background, exactly: in 7-bit
// fixed point, 128 * (c * a + 255 * (255 - a)) + 64 * 256 divided by 255 * 128 with PIL's
// shift-based division. Checked against PIL for all 65536 (c, a) pairs.
inline uint8_t CompositeOnWhite(uint32_t c, uint32_t a) {
  uint32_t tmp = 128 * (c * a + 255 * (255 - a)) + (0x80 << 7);
  return static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> 7);
}

}  // namespace gannet::vision
