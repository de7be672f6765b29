// The element types host code hands to kernels, and the strided matrix view the elementwise, norm
// and small-GEMM kernels take. Host-callable; no device code.
#pragma once

#include <cstdint>

namespace gannet::kernels {

// bf16: activations and weights of the default path; f16: those of the fp16 compute path (GPUs
// without bf16 tensor cores, lib/backend/cuda/cuda_backend.h); f32: the residual stream, norm
// inputs on the fp16 path, logits.
enum class DataType : uint8_t { kBF16, kF32, kF16 };

// A strided row-major 2-D view handed to the elementwise kernels.
struct Mat {
  void* data = nullptr;
  DataType type = DataType::kBF16;
  int64_t ld = 0;  // elements between rows
};

}  // namespace gannet::kernels
