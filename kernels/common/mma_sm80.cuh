// Warp-level tensor-core and async-copy primitives of sm_80 (mma.sync m16n8k16 bf16, ldmatrix,
// cp.async), which also run on sm_86/89/90/100/120. Kernels using them are compiled for every
// arch of the build; on older archs the bodies are empty and the registry never selects them
// (each entry carries its arch range), so these wrappers compile to nothing below sm_80.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GANNET_SM80_ENABLED 1
#else
#define GANNET_SM80_ENABLED 0
#endif

namespace gannet::kernels::sm80 {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; bytes beyond `src_bytes` (0 or 16) are zero-filled, and with
// src_bytes == 0 global memory is not read at all (how masked rows never touch a KV hole).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, int src_bytes) {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)),
               "l"(gmem), "r"(src_bytes));
#endif
}

// 4 bytes (an FP8 row's scale); src_bytes 0 zero-fills.
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, int src_bytes) {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(src_bytes));
#endif
}

__device__ __forceinline__ void CpAsyncCommit() {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l / 8, row l % 8.
__device__ __forceinline__ void LdMatrixX4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                           const void* smem) {
#if GANNET_SM80_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(SmemAddr(smem)));
#endif
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                uint32_t& r3, const void* smem) {
#if GANNET_SM80_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(SmemAddr(smem)));
#endif
}

__device__ __forceinline__ void LdMatrixX2(uint32_t& r0, uint32_t& r1, const void* smem) {
#if GANNET_SM80_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(SmemAddr(smem)));
#endif
}

// D = A * B + D; A 16x16 (row), B 16x8 (col), bf16 inputs, f32 accumulators.
__device__ __forceinline__ void MmaBf16(float* d, const uint32_t* a, const uint32_t* b) {
#if GANNET_SM80_ENABLED
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The same MMA on fp16 operands (the FP8 KV paths: E4M3 converts to fp16 exactly).
__device__ __forceinline__ void MmaF16(float* d, const uint32_t* a, const uint32_t* b) {
#if GANNET_SM80_ENABLED
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Two f32 -> one register of two fp16 (low half = first).
__device__ __forceinline__ uint32_t PackF16x2(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Two E4M3 bytes (low byte = first) -> two fp16, exactly (one cvt on sm_89+).
__device__ __forceinline__ uint32_t Fp8x2ToF16x2(uint32_t two_bytes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Two f32 -> one register of two bf16 (low half = first).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace gannet::kernels::sm80
