// Device helpers of the int4 kernels (int4_layout.h): scale and zero-point pair loads, and the
// register dequantization of a lane's 32-bit word into m16n8k16 A fragments. Header-only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/device_utils.cuh"
#include "kernels/quant/int4_layout.h"

namespace gannet::kernels::int4 {

// The scales of rows g and g + 8 of row block `rb` and group `grp` (one 4- or 8-byte load).
__device__ __forceinline__ float2 ScalePair(const bf16* s, int64_t pair) {
  const uint32_t v = __ldg(reinterpret_cast<const unsigned int*>(s) + pair);
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xFFFF0000u));
}
__device__ __forceinline__ float2 ScalePair(const f16* s, int64_t pair) {
  const uint32_t v = __ldg(reinterpret_cast<const unsigned int*>(s) + pair);
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}
__device__ __forceinline__ float2 ScalePair(const float* s, int64_t pair) {
  return __ldg(reinterpret_cast<const float2*>(s) + pair);
}
// The zero points of the same two rows (kU4), or the stored zero of kI4.
template <bool kZp>
__device__ __forceinline__ int2 ZeroPair(const uint8_t* z, int64_t pair) {
  if constexpr (kZp) {
    const uint16_t v = __ldg(reinterpret_cast<const unsigned short*>(z) + pair);
    return make_int2(v & 0xFF, v >> 8);
  }
  return make_int2(kInt4SignedZero, kInt4SignedZero);
}
// The same pair loaded raw (so a loop can issue every load of several tiles before it uses any)
// and converted where it is used.
template <typename ST>
struct ScaleLoad {  // 16-bit scales: one 32-bit word, row g in the low half
  using Raw = uint32_t;
  __device__ static Raw Load(const ST* s, int64_t pair) {
    return __ldg(reinterpret_cast<const unsigned int*>(s) + pair);
  }
  __device__ static Raw LoadAt(const Raw* p) { return __ldg(p); }
  __device__ static float2 Get(Raw v) {
    if constexpr (sizeof(ST) == 2 && std::is_same_v<ST, bf16>) {
      return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xFFFF0000u));
    } else {
      return __half22float2(*reinterpret_cast<const __half2*>(&v));
    }
  }
};
template <>
struct ScaleLoad<float> {
  using Raw = float2;
  __device__ static Raw Load(const float* s, int64_t pair) {
    return __ldg(reinterpret_cast<const float2*>(s) + pair);
  }
  __device__ static Raw LoadAt(const Raw* p) { return __ldg(p); }
  __device__ static float2 Get(Raw v) { return v; }
};
// Zero points loaded raw: two bytes (row g low); kI4 has none (its stored zero is 8).
template <bool kZp>
__device__ __forceinline__ uint32_t ZeroLoad(const uint8_t* z, int64_t pair) {
  if constexpr (kZp) return __ldg(reinterpret_cast<const unsigned short*>(z) + pair);
  return kInt4SignedZero | (kInt4SignedZero << 8);
}

// The group of k tile kt (kernels with groups of 64 or more: one scale per tile): kt >> shift,
// where shift is log2(group / 64), or 31 for per-channel (one group: every kt maps to 0).
inline int Int4GroupShift(int group, int64_t k) {
  if (group == k) return 31;
  int shift = 0;
  while ((64 << shift) < group) ++shift;
  return shift;
}

// Index of the pair (row g of row block rb, group grp) in units of pairs.
__device__ __forceinline__ int64_t PairIndex(int64_t rb, int64_t groups, int64_t grp, int g) {
  return (rb * groups + grp) * 8 + g;
}

// A register a_p's two nibbles as 16-bit floats 1024 + u (f16) or 128 + u (bf16): the nibbles sit
// in the low bits of each half, and the OR supplies the exponent (one LOP3).
template <typename T>
struct Magic;
template <>
struct Magic<f16> {
  static constexpr uint32_t kOr = 0x64006400u;  // 1024.0 in both halves
  __device__ static uint32_t Bias(int zp) {     // 1024 + zp in both halves (exact)
    const uint32_t h = 0x6400u + static_cast<uint32_t>(zp);
    return h | (h << 16);
  }
  __device__ static uint32_t Sub(uint32_t a, uint32_t b) {
    __half2 r =
        __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
  }
};
template <>
struct Magic<bf16> {
  static constexpr uint32_t kOr = 0x43004300u;  // 128.0 in both halves
  __device__ static uint32_t Bias(int zp) {     // 128 + zp (bf16 spacing is 1 in [128, 256))
    const uint32_t h = 0x4300u + static_cast<uint32_t>(zp);
    return h | (h << 16);
  }
  __device__ static uint32_t Sub(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                               *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<uint32_t*>(&r);
#else
    const float lo = __uint_as_float(a << 16) - __uint_as_float(b << 16);
    const float hi = __uint_as_float(a & 0xFFFF0000u) - __uint_as_float(b & 0xFFFF0000u);
    __nv_bfloat162 r = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&r);
#endif
  }
};

// The four A registers of one k-step from the lane's word: exact integers u - zero point; bias_lo
// for the row-g registers (a0, a2), bias_hi for row g + 8 (a1, a3).
// (v & 0x000F000F) | magic as one LOP3: written as C, the compiler emits an AND and an OR (a
// SASS LOP3 holds one immediate), 16 instructions more per 512-byte tile.
template <uint32_t kMagic>
__device__ __forceinline__ uint32_t NibblePair(uint32_t v) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(v), "n"(0x000F000Fu), "n"(kMagic));
  return r;
}

template <typename T>
__device__ __forceinline__ void DequantA(uint32_t word, uint32_t bias_lo, uint32_t bias_hi,
                                         uint32_t (&a)[4]) {
  a[0] = Magic<T>::Sub(NibblePair<Magic<T>::kOr>(word), bias_lo);
  a[1] = Magic<T>::Sub(NibblePair<Magic<T>::kOr>(word >> 4), bias_hi);
  a[2] = Magic<T>::Sub(NibblePair<Magic<T>::kOr>(word >> 8), bias_lo);
  a[3] = Magic<T>::Sub(NibblePair<Magic<T>::kOr>(word >> 12), bias_hi);
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int s) {
  return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w;
}

}  // namespace gannet::kernels::int4
