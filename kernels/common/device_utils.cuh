// Small device helpers shared by every kernel: bf16 / fp16 <-> f32, 16-byte vector access, warp
// and block reductions. Header-only; includes nothing but CUDA headers (kernels/ never sees lib/).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gannet::kernels {

using bf16 = __nv_bfloat16;
using f16 = __half;  // the fp16 compute path's activations and weights (GPUs without bf16 MMA)

// Eight bf16 values moved as one 16-byte access (the unit of every vectorised load here).
struct alignas(16) Bf16x8 {
  __nv_bfloat162 v[4];
};

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(f16 x) { return __half2float(x); }

// f32 -> fp16 saturating to +-65504 (NaN stays NaN): an activation past fp16's range (a GeGLU
// product, a large projection) becomes the largest finite value instead of an infinity that the
// next norm would turn into NaN. The values that really leave the range (the residual stream,
// norm inputs, logits) are kept in f32 on the fp16 path and never come through here.
__device__ __forceinline__ f16 SaturateToF16(float x) {
  return __float2half_rn(x != x ? x : fminf(fmaxf(x, -65504.f), 65504.f));
}

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 FromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ f16 FromFloat<f16>(float x) {
  return SaturateToF16(x);
}

// Programmatic dependent launch (PDL, sm_90+; the host side is kernels::Launch in launch.h).
// Every kernel launched through Launch calls this before it touches memory that another kernel
// writes (reading what no kernel writes before it is fine and, at batch 1, worth it: weights and
// other constants, see PrefetchL2, and the step's metadata, which the host copies in before the
// step's first kernel): it waits until
// the grids before it in the stream have finished and their writes are visible
// (griddepcontrol.wait), then allows the next kernel in the stream to start launching its CTAs
// (griddepcontrol.launch_dependents), which wait here in turn. A small decode kernel thus starts
// while its predecessor drains instead of after it, which is most of a batch-1 step's gaps.
// Code for an older virtual arch compiles it away, and Launch sets the attribute only for code
// built for compute_90 or newer, so such a kernel is never launched early.
__device__ __forceinline__ void PdlEnter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Starts pulling `bytes` (a multiple of 16, 16-byte aligned) at `p` into L2 without waiting
// (one bulk prefetch, sm_90+; nothing before). For a kernel's constant inputs (weights) before
// PdlEnter: they stream in while the previous kernel finishes.
__device__ __forceinline__ void PrefetchL2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// Unpacks 8 bf16 into f32.
__device__ __forceinline__ void Unpack8(const Bf16x8& p, float* out) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = __bfloat1622float2(p.v[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ Bf16x8 Pack8(const float* in) {
  Bf16x8 p;
#pragma unroll
  for (int i = 0; i < 4; ++i) p.v[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  return p;
}

// Loads 8 consecutive elements of type T as f32 (16 B for bf16 / fp16, 32 B for f32; aligned).
__device__ __forceinline__ void Load8(const bf16* p, float* out) {
  Unpack8(*reinterpret_cast<const Bf16x8*>(p), out);
}
__device__ __forceinline__ void Load8(const f16* p, float* out) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void Load8(const float* p, float* out) {
  float4 a = reinterpret_cast<const float4*>(p)[0];
  float4 b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x;
  out[1] = a.y;
  out[2] = a.z;
  out[3] = a.w;
  out[4] = b.x;
  out[5] = b.y;
  out[6] = b.z;
  out[7] = b.w;
}
// FP8 E4M3 (the FP8 KV cache): 8 values as one 8-byte access; the conversions round to nearest
// even and saturate (the CPU reference's FloatToFp8E4M3, bit for bit).
__device__ __forceinline__ float2 Fp8x2ToFloat2(uint16_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
__device__ __forceinline__ float Fp8ToFloat(uint8_t v) { return Fp8x2ToFloat2(v).x; }
__device__ __forceinline__ void Load8(const uint8_t* p, float* out) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = Fp8x2ToFloat2(static_cast<uint16_t>((i < 2 ? w.x : w.y) >> (16 * (i & 1))));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ uint8_t FloatToFp8(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ void Store8(bf16* p, const float* in) {
  *reinterpret_cast<Bf16x8*>(p) = Pack8(in);
}
__device__ __forceinline__ void Store8(f16* p, const float* in) {
  alignas(16) f16 h[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = SaturateToF16(in[i]);
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(h);
}
__device__ __forceinline__ void Store8(float* p, const float* in) {
  reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024). `scratch` holds 32 floats.
// Every thread gets the result. Fixed reduction order, so results are run-to-run deterministic.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(r);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(r);
}

// Gemma's GELU (tanh approximation), evaluated in f32 exactly as the CPU reference writes it.
__device__ __forceinline__ float GeluTanh(float x) {
  const float kAlpha = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kAlpha * (x + 0.044715f * x * x * x)));
}

__host__ __device__ constexpr int CeilDiv(int a, int b) { return (a + b - 1) / b; }

}  // namespace gannet::kernels
