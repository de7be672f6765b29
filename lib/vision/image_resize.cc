#include "lib/vision/image_resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gannet::vision {
namespace {

// Keys' cubic convolution kernel with a = -0.5 (Pillow's and PyTorch's antialias bicubic).
double CubicFilter(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// One axis's taps: output i reads input [first[i], first[i] + count[i]) with weights
// weights[i * taps + j] in fixed point of `precision` bits.
struct AxisTaps {
  int taps = 0;
  int precision = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;  // int16 values, widened for the arithmetic
};

AxisTaps ComputeTaps(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisTaps t;
  t.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size) * t.taps, 0.0);
  double w_max = 0.0;
  for (int i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t n = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size) - lo;
    n = std::clamp<int64_t>(n, 0, t.taps);
    double* wi = &w[static_cast<size_t>(i) * t.taps];
    double total = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      wi[j] = CubicFilter((static_cast<double>(j + lo) - center + 0.5) * inv_scale);
      total += wi[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < n; ++j) {
        wi[j] /= total;
        w_max = std::max(w_max, wi[j]);
      }
    }
    t.first[i] = static_cast<int>(lo);
    t.count[i] = static_cast<int>(n);
  }
  int p = 0;
  for (; p < 22; ++p) {
    if (static_cast<int>(0.5 + w_max * (1 << (p + 1))) >= (1 << 15)) break;
  }
  t.precision = p;
  t.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << p);
    t.weights[k] =
        static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

uint8_t Round(int32_t acc, int precision) {
  return static_cast<uint8_t>(std::clamp(acc >> precision, 0, 255));
}

// Resamples along x: src is width_in wide, dst width_out (= taps.first.size()), same height.
void Horizontal(const uint8_t* src, int width_in, int height, const AxisTaps& t, uint8_t* dst) {
  const int width_out = static_cast<int>(t.first.size());
  const int32_t half = t.precision > 0 ? int32_t{1} << (t.precision - 1) : 0;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * width_in * 3;
    uint8_t* out = dst + static_cast<size_t>(y) * width_out * 3;
    for (int x = 0; x < width_out; ++x) {
      const int32_t* w = &t.weights[static_cast<size_t>(x) * t.taps];
      const uint8_t* in = row + static_cast<size_t>(t.first[x]) * 3;
      int32_t acc[3] = {half, half, half};
      for (int j = 0; j < t.count[x]; ++j) {
        for (int c = 0; c < 3; ++c) acc[c] += w[j] * in[j * 3 + c];
      }
      for (int c = 0; c < 3; ++c) out[x * 3 + c] = Round(acc[c], t.precision);
    }
  }
}

// Resamples along y: src has rows of `row_len` bytes, dst height_out (= t.first.size()) rows.
void Vertical(const uint8_t* src, size_t row_len, const AxisTaps& t, uint8_t* dst) {
  const int height_out = static_cast<int>(t.first.size());
  const int32_t half = t.precision > 0 ? int32_t{1} << (t.precision - 1) : 0;
  std::vector<int32_t> acc(row_len);
  for (int y = 0; y < height_out; ++y) {
    std::fill(acc.begin(), acc.end(), half);
    const int32_t* w = &t.weights[static_cast<size_t>(y) * t.taps];
    for (int j = 0; j < t.count[y]; ++j) {
      const uint8_t* in = src + static_cast<size_t>(t.first[y] + j) * row_len;
      for (size_t k = 0; k < row_len; ++k) acc[k] += w[j] * in[k];
    }
    uint8_t* out = dst + static_cast<size_t>(y) * row_len;
    for (size_t k = 0; k < row_len; ++k) out[k] = Round(acc[k], t.precision);
  }
}

}  // namespace

RgbImage ResizeBicubicAntialias(const RgbImage& src, int width, int height) {
  if (width == src.width && height == src.height) return src;
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * height * 3);
  const bool horizontal = width != src.width;
  const bool vertical = height != src.height;
  std::vector<uint8_t> mid;
  const uint8_t* rows = src.pixels.data();
  if (horizontal) {
    uint8_t* dst = out.pixels.data();
    if (vertical) {
      mid.resize(static_cast<size_t>(width) * src.height * 3);
      dst = mid.data();
    }
    Horizontal(src.pixels.data(), src.width, src.height, ComputeTaps(src.width, width), dst);
    rows = dst;
  }
  if (vertical) {
    Vertical(rows, static_cast<size_t>(width) * 3, ComputeTaps(src.height, height),
             out.pixels.data());
  }
  return out;
}

}  // namespace gannet::vision
