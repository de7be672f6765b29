// The element types (DType, WeightFormat: kernels/common/dtype.h, shared with kernels/), which of
// them the engine loads, and the bf16 / f16 / FP8 <-> f32 conversions the CPU backend and the
// tools use.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common/dtype.h"

namespace gannet {

// True for the weight formats the engine loads today: unscaled bf16, f16 and f32. Every other
// DType parses and every WeightFormat describes itself, so a checkpoint using one gets a clear
// "unsupported" error naming it instead of "unknown dtype".
bool WeightFormatIsLoadable(const WeightFormat& f);

// A format in words, for errors, logs and `gannet info` (short: the C ABI's weight_format holds
// 63 bytes): "bf16", "int4 g32 (bf16 scales)", "uint4 g128 + zero points (f16 scales)",
// "fp8 channel (bf16 scales), A8 token" (FP8 activations dynamic per token; "A8 g128" per 128
// inputs, "A8 static"), "fp8 128x128 (f32 scales)", "nvfp4 g16 (fp8 scales, global), A4 g16".
std::string WeightFormatName(const WeightFormat& f);

// Element i of an array of T whose start may be misaligned for T (a checkpoint tensor served in
// place, model/safetensors.h): copied out, never dereferenced as a T*.
template <typename T>
inline T LoadUnaligned(const void* p, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

inline float Bf16ToFloat(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even, NaN preserved (quiet).
inline uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

float F16ToFloat(uint16_t h);
uint16_t FloatToF16(float f);

// n elements of type t (bf16, f16 or f32; any other type is read as f32) starting at p, which may
// be misaligned for t (a checkpoint's tensor), as f32 into out.
void ElementsToF32(const void* p, DType t, int64_t n, float* out);

// `v` rounded to nearest even in t when t is bf16 or f16; other types return it unchanged (the
// quantizers' scales are stored in one of the three).
inline float RoundToFloatType(float v, DType t) {
  if (t == DType::kBF16) return RoundToBf16(v);
  if (t == DType::kF16) return F16ToFloat(FloatToF16(v));
  return v;
}

// OCP FP8 E4M3 (bias 7, no infinities, 0x7F/0xFF NaN, largest finite 448). FloatToFp8E4M3 rounds
// to nearest even and saturates finite values to +-448 (NaN stays NaN): CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3), bit for bit.
float Fp8E4M3ToFloat(uint8_t v);
uint8_t FloatToFp8E4M3(float f);

// The FP8 KV row (lib/backend/backend.h): `n` values stored as FloatToFp8E4M3(x * 448 / amax) with
// the scale amax / 448 (0 for an all-zero row), read back as byte * scale. Returns the scale.
inline constexpr float kFp8E4M3Max = 448.0f;
float QuantizeFp8E4M3Row(const float* x, int64_t n, uint8_t* out);
void DequantizeFp8E4M3Row(const uint8_t* q, int64_t n, float scale, float* out);

}  // namespace gannet
