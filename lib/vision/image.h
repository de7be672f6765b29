// A decoded image as the preprocessing works on it: 8-bit RGB, interleaved, row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gannet::vision {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3 bytes: R, G, B per pixel, rows top down

  const uint8_t* Row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

// Bounds checked before anything proportional to the image is allocated.
//
// max_pixels: 2^26 (67 M pixels, e.g. 8192 x 8192) by default. That is above any camera photo
// users send (a 50 MP phone image is 5.2e7) and close to PIL's own decompression-bomb warning
// (89 M pixels), while keeping the worst decode at 2^26 * 3 bytes = 192 MiB (the 16-bit grey
// path holds 128 MiB more while it converts). The Gemma-4 resize brings any image down to at
// most 1120 * 9 * 256 = 2.6 M pixels, so nothing above the limit could add detail anyway.
// max_bytes: 64 MiB of encoded data by default (a maximum-size PNG of a noisy photo fits).
struct DecodeLimits {
  int64_t max_pixels = int64_t{1} << 26;
  size_t max_bytes = size_t{64} << 20;
};

}  // namespace gannet::vision
