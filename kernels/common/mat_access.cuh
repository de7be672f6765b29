// Element access to a kernels::Mat (a strided bf16, f16 or f32 row-major view), in f32, for the
// elementwise and norm kernels that take any of the element types.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/mat.h"

namespace gannet::kernels {

__device__ __forceinline__ float LoadAt(const Mat& m, int64_t row, int64_t i) {
  const int64_t at = row * m.ld + i;
  switch (m.type) {
    case DType::kF32:
      return static_cast<const float*>(m.data)[at];
    case DType::kF16:
      return __half2float(static_cast<const f16*>(m.data)[at]);
    default:
      return __bfloat162float(static_cast<const bf16*>(m.data)[at]);
  }
}

__device__ __forceinline__ void StoreAt(const Mat& m, int64_t row, int64_t i, float v) {
  const int64_t at = row * m.ld + i;
  switch (m.type) {
    case DType::kF32:
      static_cast<float*>(m.data)[at] = v;
      break;
    case DType::kF16:
      static_cast<f16*>(m.data)[at] = SaturateToF16(v);
      break;
    default:
      static_cast<bf16*>(m.data)[at] = __float2bfloat16_rn(v);
  }
}

}  // namespace gannet::kernels
