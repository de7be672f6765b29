// Random canonical int4 weights (the loader's form, kernels/quant/int4_repack.h) for the int4
// tests: every nibble value, random scales of the format's type, random zero points.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/quant/int4_repack.h"

namespace gannet::kernels::testing {

// Round-to-nearest-even f32 -> bf16 / f16 bits (test data only: finite, normal values).
inline uint16_t FloatToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline uint16_t FloatToF16Bits(float f) {
  // Values here are in [2^-14, 65504]: normal f16 numbers.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = u & 0x7FFFFF;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

struct CanonicalWeight {
  WeightFormat format;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> packed, scales, zero_points;
  Int4Canonical view() const {
    return {packed.data(), scales.data(), format.zero_point ? zero_points.data() : nullptr};
  }
};

inline CanonicalWeight RandomInt4(DType elem, int group, DType scale, int64_t n, int64_t k,
                                  uint64_t seed) {
  CanonicalWeight w;
  w.format = WeightFormat{elem, ScaleGranularity::kGroup, group, scale};
  w.format.zero_point = elem == DType::kU4;
  w.n = n;
  w.k = k;
  std::mt19937_64 rng(seed);
  w.packed.resize(static_cast<size_t>(n * k / 2));
  for (auto& b : w.packed) b = static_cast<uint8_t>(rng());
  const int64_t groups = k / group;
  const int sbytes = DTypeBits(scale) / 8;
  w.scales.resize(static_cast<size_t>(n * groups * sbytes));
  std::uniform_real_distribution<float> s_dist(0.002f, 0.05f);
  for (int64_t i = 0; i < n * groups; ++i) {
    const float s = s_dist(rng) * ((rng() & 1) ? 1.f : -1.f);  // negative scales occur in GPTQ
    if (scale == DType::kF32) {
      std::memcpy(&w.scales[i * 4], &s, 4);
    } else {
      const uint16_t h = scale == DType::kBF16 ? FloatToBf16Bits(s) : FloatToF16Bits(s);
      std::memcpy(&w.scales[i * 2], &h, 2);
    }
  }
  if (w.format.zero_point) {
    w.zero_points.resize(static_cast<size_t>(n * groups));
    for (auto& z : w.zero_points) z = static_cast<uint8_t>(rng() % 16);
  }
  return w;
}

}  // namespace gannet::kernels::testing
