// Kernels of the MTP speculative decoder (lib/spec).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/norm/norm.h"

namespace gannet::kernels {

// The ordered-embedding ("centroid") head of the E2B/E4B drafters, docs/gemma4-model.md §3.5:
// per row r, the top_k clusters by cluster_logits[r] (ties to the lower index) go to
// selected[r * top_k ...] in ascending order; logits[r] is -inf except at the tokens of those
// clusters,
// ordering[c * per_cluster ...] for cluster c, where it is h[r] . table[id] (f32 accumulation).
// h [rows, width] bf16, f16 or f32; table [vocab, width] of table_type (bf16 or f16) row-major;
// width even, <= 12288; at most 4096 clusters.
cudaError_t LaunchCentroidLogits(Mat h, int rows, const void* table, DType table_type, int width,
                                 const float* cluster_logits, int64_t ldc, int num_clusters,
                                 const int32_t* ordering, int per_cluster, int top_k,
                                 int32_t* selected, float* logits, int64_t ld, int vocab,
                                 cudaStream_t stream);

}  // namespace gannet::kernels
