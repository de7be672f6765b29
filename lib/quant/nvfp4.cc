#include "lib/quant/nvfp4.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gannet::quant {
namespace {

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// An FP8 group scale as compressed-tensors rounds it (clamp to +-448, E4M3 round to nearest even);
// zero becomes 0.125.
float RoundGroupScale(float s) {
  float r = Fp8E4M3ToFloat(FloatToFp8E4M3(std::clamp(s, -kFp8E4M3Max, kFp8E4M3Max)));
  return r == 0.f ? 0.125f : r;
}

}  // namespace

float Fp4E2M1ToFloat(uint8_t nibble) {
  const float v = kE2M1[nibble & 7];
  return (nibble & 8) ? -v : v;
}

uint8_t FloatToFp4E2M1(float f) {
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  // The midpoints between neighbours; a tie goes to the even magnitude index.
  uint8_t m;
  if (a <= 0.25f) {
    m = 0;
  } else if (a < 0.75f) {
    m = 1;
  } else if (a <= 1.25f) {
    m = 2;
  } else if (a < 1.75f) {
    m = 3;
  } else if (a <= 2.5f) {
    m = 4;
  } else if (a < 3.5f) {
    m = 5;
  } else if (a <= 5.0f) {
    m = 6;
  } else {
    m = 7;
  }
  return sign | m;
}

void DequantizeNvfp4Row(const uint8_t* packed_row, const uint8_t* scales, float global, int64_t k,
                        float* out) {
  for (int64_t g = 0; g < k / kNvfp4Group; ++g) {
    const float s = Fp8E4M3ToFloat(scales[g]) / global;
    for (int64_t i = g * kNvfp4Group; i < (g + 1) * kNvfp4Group; i += 2) {
      const uint8_t b = packed_row[i / 2];
      out[i] = RoundToBf16(Fp4E2M1ToFloat(b & 0xF) * s);
      out[i + 1] = RoundToBf16(Fp4E2M1ToFloat(b >> 4) * s);
    }
  }
}

void FakeQuantizeNvfp4Activations(float input_global, const float* x, int64_t k, float* out) {
  for (int64_t g0 = 0; g0 < k; g0 += kNvfp4Group) {
    const int64_t end = std::min(k, g0 + kNvfp4Group);
    float amax = 0.f;
    for (int64_t i = g0; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float eff = RoundGroupScale(input_global * (amax / kFp4E2M1Max)) / input_global;
    for (int64_t i = g0; i < end; ++i) {
      const float v = std::clamp(x[i] / eff, -kFp4E2M1Max, kFp4E2M1Max);
      out[i] = Fp4E2M1ToFloat(FloatToFp4E2M1(v)) * eff;
    }
  }
}

float QuantizeNvfp4Rows(DType value_type, const float* w, int64_t rows, int64_t k, uint8_t* packed,
                        uint8_t* scales) {
  float amax = 0.f;
  for (int64_t i = 0; i < rows * k; ++i) amax = std::max(amax, std::fabs(w[i]));
  amax = std::max(amax, std::numeric_limits<float>::min());
  float global = RoundToFloatType(kFp8E4M3Max * kFp4E2M1Max / amax, value_type);
  if (!std::isfinite(global)) global = 1.0f;
  const int64_t groups = k / kNvfp4Group;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* prow = packed + r * (k / 2);
    std::fill(prow, prow + k / 2, uint8_t{0});
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w + r * k + g * kNvfp4Group;
      float gmax = 0.f;
      for (int i = 0; i < kNvfp4Group; ++i) gmax = std::max(gmax, std::fabs(x[i]));
      const float s = RoundGroupScale(global * RoundToFloatType(gmax / kFp4E2M1Max, value_type));
      scales[r * groups + g] = FloatToFp8E4M3(s);
      const float eff = s / global;
      for (int i = 0; i < kNvfp4Group; ++i) {
        const uint8_t q = FloatToFp4E2M1(std::clamp(x[i] / eff, -kFp4E2M1Max, kFp4E2M1Max));
        const int64_t e = g * kNvfp4Group + i;
        prow[e / 2] |= static_cast<uint8_t>(q << (4 * (e % 2)));
      }
    }
  }
  return global;
}

}  // namespace gannet::quant
