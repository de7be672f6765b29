// Warp-level tensor-core and async-copy primitives of sm_80 (mma.sync m16n8k16 bf16, ldmatrix,
// cp.async), which also run on sm_86/89/90/100/120, and their sm_75 (Turing) forms, so the same
// kernels serve both:
//   - sm_75 has ldmatrix and mma.sync m16n8k8 on fp16 only: an m16n8k16 product is two k8 MMAs,
//     and bf16 operands are converted to fp16 first (bf16 -> fp16 is exact for the normalised
//     values attention and the MLPs feed in: |x| in [6e-5, 65504], 8 significant bits);
//   - sm_75 has no cp.async: the copy is a plain 16-byte load and store, complete when it returns,
//     so commit/wait are no-ops and the kernels' existing barriers publish it (sm_70 likewise:
//     the Volta flash kernels share the loaders).
// A kernel instantiation states the oldest arch it is built for (its traits' kMinArch: 800 for
// the sm80 entries, 750 for the sm75 ones); below that its body is empty and the registry never
// selects it. Below sm_75 these wrappers compile to nothing.
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
// ldmatrix and mma.sync (m16n8k8 f16) exist: sm_75 and newer.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
#define GANNET_MMA_ENABLED 1
#else
#define GANNET_MMA_ENABLED 0
#endif
// The synchronous copy fallback below serves sm_70 too (the Volta flash kernels, mma_sm70.cuh).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define GANNET_SYNC_COPY_ENABLED 1
#else
#define GANNET_SYNC_COPY_ENABLED 0
#endif

namespace gannet::kernels::sm80 {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; bytes beyond `src_bytes` (0 or 16) are zero-filled, and with
// src_bytes == 0 global memory is not read at all (how masked rows never touch a KV hole).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, int src_bytes) {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(src_bytes));
#elif GANNET_SYNC_COPY_ENABLED
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (src_bytes != 0) v = *static_cast<const uint4*>(gmem);
  *static_cast<uint4*>(smem) = v;
#endif
}

// 4 bytes (an FP8 row's scale); src_bytes 0 zero-fills.
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, int src_bytes) {
#if GANNET_SM80_ENABLED
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(smem)), "l"(gmem),
               "r"(src_bytes));
#elif GANNET_SYNC_COPY_ENABLED
  *static_cast<uint32_t*>(smem) = src_bytes != 0 ? *static_cast<const uint32_t*>(gmem) : 0u;
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
#if GANNET_MMA_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(SmemAddr(smem)));
#endif
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                uint32_t& r3, const void* smem) {
#if GANNET_MMA_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(SmemAddr(smem)));
#endif
}

__device__ __forceinline__ void LdMatrixX2(uint32_t& r0, uint32_t& r1, const void* smem) {
#if GANNET_MMA_ENABLED
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(SmemAddr(smem)));
#endif
}

// sm_75's tensor-core product: D = A * B + D, A 16x8 (row, a0: row g, a1: row g + 8, columns
// 2t..2t+1), B 8x8 (col, rows 2t..2t+1 of column g), fp16 inputs, f32 accumulators. The two
// halves of an m16n8k16 fragment (registers 0-1 and 2-3 of A, 0 and 1 of B) are two such steps.
__device__ __forceinline__ void MmaF16K8(float* d, uint32_t a0, uint32_t a1, uint32_t b0) {
#if GANNET_MMA_ENABLED
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
#endif
}

// One register of two bf16 -> two fp16 (sm_75 has no bf16 MMA).
__device__ __forceinline__ uint32_t Bf16x2ToF16x2(uint32_t two) {
  const __half2 h =
      __floats2half2_rn(__uint_as_float(two << 16), __uint_as_float(two & 0xFFFF0000u));
  return *reinterpret_cast<const uint32_t*>(&h);
}

// D = A * B + D; A 16x16 (row), B 16x8 (col), bf16 inputs, f32 accumulators.
__device__ __forceinline__ void MmaBf16(float* d, const uint32_t* a, const uint32_t* b) {
#if GANNET_SM80_ENABLED
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif GANNET_MMA_ENABLED
  MmaF16K8(d, Bf16x2ToF16x2(a[0]), Bf16x2ToF16x2(a[1]), Bf16x2ToF16x2(b[0]));
  MmaF16K8(d, Bf16x2ToF16x2(a[2]), Bf16x2ToF16x2(a[3]), Bf16x2ToF16x2(b[1]));
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
#elif GANNET_MMA_ENABLED
  MmaF16K8(d, a[0], a[1], b[0]);
  MmaF16K8(d, a[2], a[3], b[1]);
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
