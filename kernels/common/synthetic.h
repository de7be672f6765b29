// Synthetic ("dummy") weights generated on the GPU, bit-identical to model::FillSyntheticBf16
// (lib/model/synthetic.h specifies the generator; the host computes the per-tensor key with
// model::SyntheticKey). A real-size model then needs neither a checkpoint nor host memory.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

// Same order as model::WeightInit (the CUDA backend static_asserts the mapping).
enum class SyntheticInit : int32_t {
  kMatrix = 0,
  kEmbedding = 1,
  kNorm = 2,
  kQkNorm = 3,
  kLayerScalar = 4,
  kPositiveScale = 5,
  kPermutation = 6,
};

// Writes elements [offset, offset + count) of the tensor keyed `key` to out: bf16 values, or
// those bf16 values as f32, or as f16 (the fp16 compute path; rounded where fp16 cannot hold them).
cudaError_t LaunchFillSynthetic(void* out, DType out_type, int64_t offset, int64_t count,
                                uint64_t key, SyntheticInit init, int64_t fan_in,
                                cudaStream_t stream);

}  // namespace gannet::kernels
