// The FP8 KV storage of lib/backend/backend.h for whole host arrays, for tests that build caches
// by hand: each row of `d` values is QuantizeFp8E4M3Row's. A row holding NaN (the tests' poison)
// becomes NaN bytes with a NaN scale, so a kernel that reads it still turns its output into NaN.
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
    if (std::any_of(row, row + d, [](float v) { return std::isnan(v); })) {
      std::fill(out.bytes.begin() + r * d, out.bytes.begin() + (r + 1) * d, uint8_t{0x7F});
      out.scales[r] = NAN;
      continue;
    }
    out.scales[r] = QuantizeFp8E4M3Row(row, d, out.bytes.data() + r * d);
  }
  return out;
}

// The values an FP8 cache row reads back as (f32, before any bf16 rounding).
inline std::vector<float> DequantizeFp8Rows(const Fp8Rows& q, int d) {
  std::vector<float> x(q.bytes.size());
  for (size_t r = 0; r < q.scales.size(); ++r) {
    DequantizeFp8E4M3Row(q.bytes.data() + r * d, d, q.scales[r], x.data() + r * d);
  }
  return x;
}

}  // namespace gannet::testing
