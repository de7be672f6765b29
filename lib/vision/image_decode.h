// Image bytes -> 8-bit RGB, converted the way HF transformers 5.17's Gemma-4 processor sees a
// PIL image: PIL.Image.open(bytes), then transformers' convert_to_rgb (image_transforms.py),
// which is PIL's Image.convert("RGB"), i.e.
//   - grey (1/2/4/8-bit) replicated to R = G = B, low bit depths scaled to 0..255;
//   - palette looked up; 16-bit colour samples keep their high byte (PIL's "RGB;16B" raw mode);
//   - 16-bit grey is clipped to 255, not scaled (PIL opens it as mode I;16 and its I;16 -> L
//     conversion clips): a PIL quirk we copy so the model sees what it sees under HF;
//   - alpha is dropped, not composited: an alpha channel is ignored, and so is a PNG tRNS
//     transparent colour or palette entry (later transformers versions composite on white);
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

}  // namespace gannet::vision
