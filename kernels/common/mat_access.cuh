// Element access to a kernels::Mat (a strided bf16 or f32 row-major view), in f32, for the
// elementwise and norm kernels that take either element type.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/norm/norm.h"

namespace gannet::kernels {

__device__ __forceinline__ float LoadAt(const Mat& m, int64_t row, int64_t i) {
  const int64_t at = row * m.ld + i;
  return m.type == DataType::kF32 ? static_cast<const float*>(m.data)[at]
                                  : __bfloat162float(static_cast<const bf16*>(m.data)[at]);
}

__device__ __forceinline__ void StoreAt(const Mat& m, int64_t row, int64_t i, float v) {
  if (m.type == DataType::kF32) {
    static_cast<float*>(m.data)[row * m.ld + i] = v;
  } else {
    static_cast<bf16*>(m.data)[row * m.ld + i] = __float2bfloat16_rn(v);
  }
}

}  // namespace gannet::kernels
