#include "lib/common/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace gannet {

bool WeightFormatIsLoadable(const WeightFormat& f) {
  return !f.quantized() &&
         (f.elem == DType::kBF16 || f.elem == DType::kF16 || f.elem == DType::kF32);
}

std::string WeightFormatName(const WeightFormat& f) {
  // Short: `gannet info` passes it through the C ABI's 64-byte weight_format with a suffix.
  auto short_name = [](DType t) -> std::string {
    return t == DType::kF8E4M3 ? "fp8" : std::string(DTypeShortName(t));
  };
  std::string s = f.elem == DType::kF4E2M1 && f.global_scale ? "nvfp4" : short_name(f.elem);
  if (!f.quantized()) return s;
  switch (f.granularity) {
    case ScaleGranularity::kTensor:
      s += " tensor";
      break;
    case ScaleGranularity::kChannel:
      s += " channel";
      break;
    case ScaleGranularity::kGroup:
      s += " g";  // appends, not " g" + to_string(...): GCC 12's -Wrestrict false positive at -O3
      s += std::to_string(f.group_size);
      break;
    case ScaleGranularity::kBlock:
      s += ' ';
      s += std::to_string(f.block_rows);
      s += 'x';
      s += std::to_string(f.group_size);
      break;
    case ScaleGranularity::kNone:
      break;
  }
  if (f.zero_point) s += " + zero points";
  if (f.input_perm) s += " act-order";
  s += " (";
  s += short_name(f.scale);
  s += f.global_scale ? " scales, global)" : " scales)";
  switch (f.act) {
    case ActivationQuant::kDynamicFp8:
      s += f.act_group > 0 ? ", A8 g" : ", A8 token";
      if (f.act_group > 0) s += std::to_string(f.act_group);
      break;
    case ActivationQuant::kStaticFp8:
      s += ", A8 static";
      break;
    case ActivationQuant::kDynamicNvfp4:
      s += ", A4 g";
      s += std::to_string(f.act_group);
      break;
    case ActivationQuant::kNone:
      break;
  }
  return s;
}

float F16ToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1u;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    value = mant ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -value : value;
}

uint16_t FloatToF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exp = (bits >> 23) & 0xFFu;
  uint32_t mant = bits & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

void ElementsToF32(const void* p, DType t, int64_t n, float* out) {
  switch (t) {
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(LoadUnaligned<uint16_t>(p, i));
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToFloat(LoadUnaligned<uint16_t>(p, i));
      break;
    default:
      std::memcpy(out, p, static_cast<size_t>(n) * 4);
  }
}

float Fp8E4M3ToFloat(uint8_t v) {
  const float sign = (v & 0x80u) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xF;
  const int man = v & 0x7;
  if (exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
}

uint8_t FloatToFp8E4M3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  constexpr uint8_t kMaxFinite = 0x7E;  // 448
  if (a >= 448.0f) return sign | kMaxFinite;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 steps reach the smallest normal)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 7;                // a = (2m) * 2^(e-1)
  int man = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (man == 8) {
    man = 0;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && man == 7)) return sign | kMaxFinite;
  return sign | static_cast<uint8_t>((exp << 3) | man);
}

float QuantizeFp8E4M3Row(const float* x, int64_t n, uint8_t* out) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inv = amax > 0.f ? kFp8E4M3Max / amax : 0.f;
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToFp8E4M3(x[i] * inv);
  return amax / kFp8E4M3Max;
}

void DequantizeFp8E4M3Row(const uint8_t* q, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp8E4M3ToFloat(q[i]) * scale;
}

}  // namespace gannet
