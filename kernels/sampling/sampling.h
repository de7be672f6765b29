// Token sampling on the GPU, one CTA per logits row, without sorting the vocabulary:
//   greedy (DrawParams::greedy(): temperature <= 0 or top_k == 1): arg-max, ties to the lowest id;
//   otherwise z = (x - max x) / temperature, w = exp(z) in (0, 1], in fixed point
//   q = floor(w * 2^32) (integer sums: order-free, so the draw is reproducible run to run), and
//     top-k: keep logits >= the k-th largest (radix select over order-preserving keys),
//     top-p: keep logits >= the largest threshold whose kept mass reaches top_p x the top-k mass,
//     min-p: keep w >= min_p (w is p / p_max),
//   then the token at which the running kept mass, in vocabulary order, first exceeds
//   floor(u x kept mass), u = (SplitMix64(seed) >> 11) / 2^53.
// The CPU backend implements the same definition (lib/backend/cpu/cpu_sample.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling/draw_params.h"

namespace gannet::kernels {

// banned (nullable): [rows, ban_slots] token ids, -1 unused; their logits are set to -inf in
// place before the draw.
cudaError_t LaunchSample(float* logits /* [rows, vocab], row stride ld */, int64_t ld, int rows,
                         int vocab, const DrawParams* params /* [rows] device */,
                         const int32_t* banned, int ban_slots, int32_t* out_ids /* [rows] */,
                         cudaStream_t stream);

// The greedy pick of a vocabulary shard (Backend::ShardArgmax): per row (value, id + id_offset) of
// the largest logit, ties to the lowest id (the first when all are -inf); banned global ids inside
// [id_offset, id_offset + cols) set to -inf in place first. out [rows, 2] f32 (id as int32 bits).
cudaError_t LaunchShardArgmax(float* logits, int64_t ld, int rows, int cols, int64_t id_offset,
                              const int32_t* banned, int ban_slots, float* out, int64_t out_ld,
                              cudaStream_t stream);

}  // namespace gannet::kernels
