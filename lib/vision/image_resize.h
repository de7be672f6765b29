// Antialiased bicubic resize of 8-bit RGB, computing what torchvision's
// transforms.v2.functional.resize(uint8 tensor, BICUBIC, antialias=True) computes on the CPU
// (PyTorch's _upsample_bicubic2d_aa for uint8, itself modelled on Pillow's ImagingResample):
//   - per axis, output i covers input centre scale * (i + 0.5), scale = in / out (double); the
//     Keys cubic (a = -0.5) is stretched by `scale` when shrinking (that is the antialias), its
//     support 2 * max(scale, 1), taps from trunc(centre -/+ support + 0.5) clipped to the image,
//     normalised to sum 1;
//   - the weights become int16 in fixed point with the largest precision (< 22 bits) at which
//     the axis's biggest weight still fits 15 bits, rounded half away from zero;
//   - horizontal pass first (skipped when the width is unchanged), into an 8-bit image, then the
//     vertical pass (skipped when the height is unchanged); each output is
//     clamp((2^(p-1) + sum(w * pixel)) >> p, 0, 255) in 32-bit integers.
// The result is therefore exact integers, not an approximation of a float resize.
#pragma once

#include "lib/vision/image.h"

namespace gannet::vision {

// Requires width, height > 0 (the caller's target size); returns `src` unchanged in size when
// both sides already match.
RgbImage ResizeBicubicAntialias(const RgbImage& src, int width, int height);

}  // namespace gannet::vision
