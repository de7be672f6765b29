#include "lib/quant/int4.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace gannet::quant {

static_assert(std::endian::native == std::endian::little,
              "compressed-tensors int32 words are read as little-endian bytes");

float ScaleToF32(const void* scales, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16:
      return Bf16ToFloat(LoadUnaligned<uint16_t>(scales, i));
    case DType::kF16:
      return F16ToFloat(LoadUnaligned<uint16_t>(scales, i));
    default:
      return LoadUnaligned<float>(scales, i);
  }
}

void StoreScale(void* scales, DType t, int64_t i, float v) {
  char* p = static_cast<char*>(scales);
  if (t == DType::kBF16 || t == DType::kF16) {
    const uint16_t h = t == DType::kBF16 ? FloatToBf16(v) : FloatToF16(v);
    std::memcpy(p + i * 2, &h, 2);
  } else {
    std::memcpy(p + i * 4, &v, 4);
  }
}

void DequantizeInt4Row(const WeightFormat& f, const uint8_t* packed_row, const void* scales,
                       const uint8_t* zeros, int64_t k, float* out) {
  const int64_t g = f.group_size;
  const bool is_signed = f.elem == DType::kI4;
  for (int64_t g0 = 0, gi = 0; g0 < k; g0 += g, ++gi) {
    const float s = ScaleToF32(scales, f.scale, gi);
    const int zp = f.zero_point ? zeros[gi] : 0;
    for (int64_t i = g0; i < g0 + g; i += 2) {
      const uint8_t b = packed_row[i / 2];
      int lo = b & 0xF, hi = b >> 4;
      if (is_signed) {
        lo = (lo ^ 8) - 8;
        hi = (hi ^ 8) - 8;
      }
      out[i] = static_cast<float>(lo - zp) * s;
      out[i + 1] = static_cast<float>(hi - zp) * s;
    }
  }
}

void CtWordsToCanonical(const uint8_t* words, int64_t rows, int64_t words_per_row, int64_t k,
                        bool to_signed, uint8_t* out) {
  const int64_t row_bytes = k / 2;
  const uint8_t flip = to_signed ? 0x88 : 0x00;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = words + r * words_per_row * 4;
    uint8_t* dst = out + r * row_bytes;
    for (int64_t i = 0; i < row_bytes; ++i) dst[i] = src[i] ^ flip;
  }
}

void CanonicalToCtWords(const uint8_t* packed, int64_t rows, int64_t k, bool from_signed,
                        int64_t words_per_row, uint8_t* words) {
  const int64_t row_bytes = k / 2;
  const uint8_t flip = from_signed ? 0x88 : 0x00;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = words + r * words_per_row * 4;
    std::memset(dst, 0, static_cast<size_t>(words_per_row) * 4);
    const uint8_t* src = packed + r * row_bytes;
    for (int64_t i = 0; i < row_bytes; ++i) dst[i] = src[i] ^ flip;
  }
}

void CtZeroPointsToCanonical(const uint8_t* words, int64_t rows, int64_t groups, uint8_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const uint32_t w = LoadUnaligned<uint32_t>(words, (r / 8) * groups + g);
      out[r * groups + g] = static_cast<uint8_t>((w >> (4 * (r % 8))) & 0xF);
    }
  }
}

void CanonicalZeroPointsToCt(const uint8_t* zeros, int64_t rows, int64_t groups, uint8_t* words) {
  const int64_t word_rows = (rows + 7) / 8;
  std::memset(words, 0, static_cast<size_t>(word_rows * groups) * 4);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t i = (r / 8) * groups + g;
      uint32_t w = LoadUnaligned<uint32_t>(words, i);
      w |= static_cast<uint32_t>(zeros[r * groups + g] & 0xF) << (4 * (r % 8));
      std::memcpy(words + i * 4, &w, 4);
    }
  }
}

namespace {

float SmallestNormal(DType t) {
  switch (t) {
    case DType::kBF16:
      return std::numeric_limits<float>::min();  // bf16 shares f32's exponent
    case DType::kF16:
      return 6.103515625e-05f;
    default:
      return std::numeric_limits<float>::min();
  }
}

}  // namespace

void QuantizeInt4Rows(const WeightFormat& f, const float* w, int64_t rows, int64_t k,
                      uint8_t* packed, void* scales, uint8_t* zeros) {
  const int64_t g = f.group_size;
  const int64_t groups = k / g;
  const bool asym = f.zero_point;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + r * k;
    uint8_t* prow = packed + r * (k / 2);
    std::memset(prow, 0, static_cast<size_t>(k / 2));
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = x + gi * g;
      float lo = 0.f, hi = 0.f;
      for (int64_t i = 0; i < g; ++i) {
        lo = std::min(lo, xg[i]);
        hi = std::max(hi, xg[i]);
      }
      float scale = asym ? (hi - lo) / 15.0f : std::max(-lo, hi) / 7.5f;
      scale = RoundToFloatType(scale, f.scale);
      if (!(scale > 0.f)) scale = SmallestNormal(f.scale);
      StoreScale(scales, f.scale, r * groups + gi, scale);
      int zp = 0;
      if (asym) {
        zp = static_cast<int>(std::clamp(std::nearbyint(-lo / scale), 0.0f, 15.0f));
        zeros[r * groups + gi] = static_cast<uint8_t>(zp);
      }
      for (int64_t i = 0; i < g; ++i) {
        const float q = std::nearbyint(xg[i] / scale);
        const int v = asym ? static_cast<int>(std::clamp(q + zp, 0.0f, 15.0f))
                           : static_cast<int>(std::clamp(q, -8.0f, 7.0f)) & 0xF;
        const int64_t e = gi * g + i;
        prow[e / 2] |= static_cast<uint8_t>(v << (4 * (e % 2)));
      }
    }
  }
}

}  // namespace gannet::quant
