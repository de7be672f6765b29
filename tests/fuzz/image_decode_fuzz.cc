// Fuzz target: image decoding and preprocessing (lib/vision/image_decode.h, image_preprocess.h):
// the bytes a caller sends as an image, through libpng, libjpeg-turbo or libwebp.
//
// Input: the bytes of an image file (PNG, JPEG, WebP or anything else). The seeds
// (corpus/image_decode_fuzz, from make_corpus.py) are the small test images of
// tests/data/images.
//
// Each input is decoded under DecodeLimits of 2^20 pixels (so one input stays milliseconds;
// the limit check itself is the same code at any value); a decoded image gets its Gemma-4
// target size at every budget and is resized to a small size taken from the input.
//
// Expected: statuses only, every failure carrying an ImageErrorKind payload. Properties checked:
// a decoded image has width * height * 3 bytes within the limit; every target size has sides
// that are multiples of 48 and at most 9 * tokens patches; the resize has the asked size.
#include <cstdint>
#include <span>

#include "lib/vision/image_decode.h"
#include "lib/vision/image_error.h"
#include "lib/vision/image_preprocess.h"
#include "lib/vision/image_resize.h"
#include "tests/fuzz/fuzz_util.h"

using namespace gannet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vision::DecodeLimits limits;
  limits.max_pixels = int64_t{1} << 20;
  auto image = vision::DecodeImage(std::span<const uint8_t>(data, size), limits);
  if (!image.ok()) {
    if (!vision::GetImageErrorKind(image.status())) {
      fuzz::Fail("decode error without an image error kind", image.status().ToString());
    }
    return 0;
  }
  const int64_t pixels = int64_t{image->width} * image->height;
  if (image->width <= 0 || image->height <= 0 || pixels > limits.max_pixels ||
      image->pixels.size() != static_cast<size_t>(pixels) * 3) {
    fuzz::Fail("decoded image has an inconsistent size");
  }
  // The Gemma-4 target size for every budget (cheap); the full preprocess always makes ~150 K
  // output pixels, so the resize runs instead to a small size taken from the input, shrinking
  // or enlarging an arbitrary decoded shape.
  for (int tokens : {70, 140, 280, 560, 1120}) {
    vision::PreprocessOptions options;
    options.max_soft_tokens = tokens;
    auto target = vision::GemmaTargetSize(image->height, image->width, options);
    if (!target.ok()) fuzz::Fail("no target size", target.status().ToString());
    if (target->height % 48 != 0 || target->width % 48 != 0 || target->height <= 0 ||
        target->width <= 0 ||
        int64_t{target->height / 16} * (target->width / 16) > int64_t{tokens} * 9) {
      fuzz::Fail("target size breaks HF's rule");
    }
  }
  const int out_w = 1 + static_cast<int>((size * 7 + data[size / 2]) % 97);
  const int out_h = 1 + static_cast<int>((size * 13 + data[size / 3]) % 89);
  vision::RgbImage resized = vision::ResizeBicubicAntialias(*image, out_w, out_h);
  if (resized.width != out_w || resized.height != out_h ||
      resized.pixels.size() != static_cast<size_t>(out_w) * out_h * 3) {
    fuzz::Fail("resize output has the wrong size");
  }
  return 0;
}
