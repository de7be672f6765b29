#include "lib/engine/image_input.h"

#include <algorithm>

#include "lib/common/status.h"
#include "lib/vision/image_decode.h"
#include "lib/vision/image_preprocess.h"

namespace gannet::engine {

absl::StatusOr<PreparedImages> PrepareImages(std::span<const ImageSource> sources,
                                             const ImageGeometry& geometry) {
  if (sources.size() > kMaxRequestImages) {
    return InvalidArgumentError("request: {} images (at most {})", sources.size(),
                                kMaxRequestImages);
  }
  PreparedImages out;
  out.images.reserve(sources.size());
  out.soft_tokens.reserve(sources.size());
  for (size_t k = 0; k < sources.size(); ++k) {
    const ImageSource& s = sources[k];
    const std::string where = fmt::format("request: images[{}]", k);
    vision::PreprocessOptions options;
    options.max_soft_tokens = s.max_soft_tokens == 0 ? kDefaultImageSoftTokens : s.max_soft_tokens;
    options.patch_size = geometry.patch_size;
    options.pooling_kernel = geometry.pooling_kernel;
    if (absl::Status st = vision::CheckPreprocessOptions(options); !st.ok()) {
      return Annotate(st, where);
    }
    absl::StatusOr<vision::RgbImage> rgb =
        s.raw ? vision::RgbImageFromRaw(s.width, s.height, s.bytes) : vision::DecodeImage(s.bytes);
    if (!rgb.ok()) return Annotate(rgb.status(), where);
    absl::StatusOr<vision::ImagePatches> patches = vision::PreprocessImage(*rgb, options);
    if (!patches.ok()) return Annotate(patches.status(), where);
    out.soft_tokens.push_back(patches->num_soft_tokens);
    out.images.push_back({std::move(patches->pixel_values), std::move(patches->position_ids)});
  }
  return out;
}

int64_t CountImagePlaceholders(std::span<const int32_t> prompt, int32_t image_token_id) {
  return std::count(prompt.begin(), prompt.end(), image_token_id);
}

int64_t ExpandedPromptLength(int64_t prompt_tokens, std::span<const int> soft_tokens) {
  int64_t n = prompt_tokens;
  // Each placeholder (one token) becomes boi + N + eoi.
  for (int t : soft_tokens) n += int64_t{t} + 1;
  return n;
}

}  // namespace gannet::engine
