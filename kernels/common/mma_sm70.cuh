// Volta's tensor-core product (sm_70): mma.sync m8n8k4, fp16 operands, f32 accumulators. The PTX
// also runs on every newer arch (slowly past sm_75), which is how an H100/H200 tests the Volta
// kernels: their .cu files carry compute_75 PTX in the release build (kernels/CMakeLists.txt).
//
// One warp instruction is FOUR independent 8x8x4 products, one per quad pair: QP q = lanes
// 4q .. 4q + 3 (its low half) and 4q + 16 .. 4q + 19 (its high half). Within a QP, with
// lo = lane & 3 and hi = (lane >> 4) & 1 (layouts probed on an H200, all 64 outputs checked):
//   A, row-major 8x4:    the lane holds row lo + 4 hi, k = 0..3 (two f16x2 registers);
//   B, col-major 4x8:    the lane holds column lo + 4 hi, k = 0..3;
//   B, row-major 4x8:    the lane holds row k = lo, columns 4 hi .. 4 hi + 3;
//   C/D, 8x8 f32:        register i is row (lane & 1) + 2 ((i >> 1) & 1) + 4 hi,
//                        column (i & 1) + 2 ((lane >> 1) & 1) + 4 (i >> 2).
// So a lane's accumulators cover two rows (registers {0, 1, 4, 5} and {2, 3, 6, 7}) at the same
// four columns, and the lanes sharing a row differ in lane bit 1 (and in the QP).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define GANNET_SM70_MMA_ENABLED 1
#else
#define GANNET_SM70_MMA_ENABLED 0
#endif

namespace gannet::kernels::sm70 {

// The A row / B column (col-major B) a lane supplies within its quad pair.
__device__ __forceinline__ int QpOperandRow(int lane) { return (lane & 3) + 4 * ((lane >> 4) & 1); }
// Row of accumulator half h (registers {0, 1, 4, 5} for h 0, {2, 3, 6, 7} for h 1) in the QP's 8.
__device__ __forceinline__ int QpAccRow(int lane, int h) {
  return (lane & 1) + 2 * h + 4 * ((lane >> 4) & 1);
}
// Column of accumulator register i in the QP's 8.
__device__ __forceinline__ int QpAccCol(int lane, int i) {
  return (i & 1) + 2 * ((lane >> 1) & 1) + 4 * (i >> 2);
}

// D = A B + D, B column-major (S = Q K^T: K rows are B's columns).
__device__ __forceinline__ void MmaM8n8k4RowCol(float (&d)[8], uint32_t a0, uint32_t a1,
                                                uint32_t b0, uint32_t b1) {
#if GANNET_SM70_MMA_ENABLED
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
#endif
}

// D = A B + D, B row-major (O += P V: four dims of one V row per lane).
__device__ __forceinline__ void MmaM8n8k4RowRow(float (&d)[8], uint32_t a0, uint32_t a1,
                                                uint32_t b0, uint32_t b1) {
#if GANNET_SM70_MMA_ENABLED
  asm volatile(
      "mma.sync.aligned.m8n8k4.row.row.f32.f16.f16.f32 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11}, {%0, %1, %2, %3, %4, %5, %6, %7};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(b0), "r"(b1));
#endif
}

}  // namespace gannet::kernels::sm70
