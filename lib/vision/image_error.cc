#include "lib/vision/image_error.h"

#include <array>

#include "absl/strings/cord.h"

namespace gannet::vision {
namespace {

constexpr absl::string_view kImageErrorUrl = "gannet/image-error";

constexpr std::array<ImageErrorKind, 7> kAllKinds = {
    ImageErrorKind::kEmpty,      ImageErrorKind::kUnknownFormat, ImageErrorKind::kTruncated,
    ImageErrorKind::kCorrupt,    ImageErrorKind::kTooLarge,      ImageErrorKind::kUnsupported,
    ImageErrorKind::kBadGeometry};

}  // namespace

std::string_view ImageErrorKindName(ImageErrorKind kind) {
  switch (kind) {
    case ImageErrorKind::kEmpty:
      return "empty";
    case ImageErrorKind::kUnknownFormat:
      return "unknown_format";
    case ImageErrorKind::kTruncated:
      return "truncated";
    case ImageErrorKind::kCorrupt:
      return "corrupt";
    case ImageErrorKind::kTooLarge:
      return "too_large";
    case ImageErrorKind::kUnsupported:
      return "unsupported";
    case ImageErrorKind::kBadGeometry:
      return "bad_geometry";
  }
  return "unknown";
}

absl::Status MakeImageError(ImageErrorKind kind, std::string_view message) {
  absl::Status status = kind == ImageErrorKind::kUnsupported
                            ? absl::UnimplementedError(fmt::format("image: {}", message))
                            : absl::InvalidArgumentError(fmt::format("image: {}", message));
  std::string_view name = ImageErrorKindName(kind);
  status.SetPayload(kImageErrorUrl, absl::Cord(absl::string_view(name.data(), name.size())));
  return status;
}

std::optional<ImageErrorKind> GetImageErrorKind(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  auto payload = status.GetPayload(kImageErrorUrl);
  if (!payload) return std::nullopt;
  for (ImageErrorKind kind : kAllKinds) {
    std::string_view name = ImageErrorKindName(kind);
    if (*payload == absl::string_view(name.data(), name.size())) return kind;
  }
  return std::nullopt;
}

}  // namespace gannet::vision
