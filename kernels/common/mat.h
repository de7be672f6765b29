// The strided matrix view the elementwise, norm and small-GEMM kernels take. Host-callable; no
// device code.
#pragma once

#include <cstdint>

#include "kernels/common/dtype.h"

namespace gannet::kernels {

// The element types the Mat kernels read and write: bf16 (activations and weights of the default
// path), f16 (those of the fp16 compute path: GPUs without bf16 tensor cores,
// lib/backend/cuda/cuda_backend.h) and f32 (the residual stream, norm inputs on the fp16 path,
// logits). Launchers refuse other types with cudaErrorInvalidValue.
constexpr bool IsMatType(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32;
}

// A strided row-major 2-D view handed to the elementwise kernels.
struct Mat {
  void* data = nullptr;
  DType type = DType::kBF16;
  int64_t ld = 0;  // elements between rows
};

}  // namespace gannet::kernels
