// The FP8 KV storage of lib/backend/backend.h computed on the host, for tests that build caches
// by hand: each row of `d` values becomes FloatToFp8E4M3(x * 448 / amax) and the scale
// amax / 448. A row holding NaN (the tests' poison) becomes NaN bytes with a NaN scale, so a
// kernel that reads it still turns its output into NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lib/common/dtype.h"

namespace gannet::testing {

struct Fp8Rows {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};

inline Fp8Rows QuantizeFp8Rows(const std::vector<float>& x, int d) {
  Fp8Rows out;
  out.bytes.resize(x.size());
  out.scales.resize(x.size() / d);
  for (size_t r = 0; r < out.scales.size(); ++r) {
    const float* row = x.data() + r * d;
    float amax = 0.f;
    bool nan = false;
    for (int i = 0; i < d; ++i) {
      nan |= std::isnan(row[i]);
      amax = std::max(amax, std::fabs(row[i]));
    }
    const float inv = amax > 0.f ? 448.0f / amax : 0.f;
    for (int i = 0; i < d; ++i) out.bytes[r * d + i] = nan ? 0x7F : FloatToFp8E4M3(row[i] * inv);
    out.scales[r] = nan ? NAN : amax / 448.0f;
  }
  return out;
}

// The values an FP8 cache row reads back as (f32, before any bf16 rounding).
inline std::vector<float> DequantizeFp8Rows(const Fp8Rows& q, int d) {
  std::vector<float> x(q.bytes.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = Fp8E4M3ToFloat(q.bytes[i]) * q.scales[i / d];
  return x;
}

}  // namespace gannet::testing
