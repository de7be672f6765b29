// Typed errors of image decoding and preprocessing. The kind travels as a status payload (the
// way lib/common/status.h marks device loss), so callers branch on it, never on message text.
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "lib/common/status.h"

namespace gannet::vision {

enum class ImageErrorKind {
  kEmpty,          // no bytes, or a 0-pixel image
  kUnknownFormat,  // not PNG, JPEG or WebP (nor a raw buffer of the stated size)
  kTruncated,      // the stream ends before the image does
  kCorrupt,        // the codec rejects the stream (bad header, CRC, Huffman data, ...)
  kTooLarge,       // more bytes or pixels than DecodeLimits allow
  kUnsupported,    // a valid image of a kind we do not convert (CMYK JPEG, animated WebP)
  kBadGeometry,    // an aspect ratio the Gemma-4 resize rule cannot fit (HF raises too)
};

std::string_view ImageErrorKindName(ImageErrorKind kind);

// InvalidArgument (Unimplemented for kUnsupported) with the kind as payload.
absl::Status MakeImageError(ImageErrorKind kind, std::string_view message);

template <typename... Args>
absl::Status ImageError(ImageErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  return MakeImageError(kind, fmt::format(f, std::forward<Args>(args)...));
}

// The kind of an error made by MakeImageError (payloads survive gannet::Annotate); nullopt for
// any other status.
std::optional<ImageErrorKind> GetImageErrorKind(const absl::Status& status);

}  // namespace gannet::vision
