// Paged attention over the KV layout of backend.h: the parameter block and the device launchers
// of every compiled attention kernel configuration. Plain C++ over the CUDA runtime API, so both
// the .cu kernels and the host-side registry entries (attention_entries.cc) include it.
//
// Layouts:
//   q, out     [num_tokens, num_q_heads, head_dim] bf16 (token stride q_stride / out_stride)
//   k/v cache  [num_pages, num_kv_heads, page_size, head_dim] bf16, or FP8 E4M3 (kv_fp8) with
//              k/v_scale [num_pages, num_kv_heads, page_size] f32: value = fp8 * scale of its row
//   page_table [num_seqs, max_pages_per_seq] int32, -1 = hole (never read)
//   k_from_v   single-store K=V (lib/backend/backend.h): no K cache; key j at position j is
//              K_j = RoPE_j(k_norm * V_j) over rotate-half pairs (i, i + head_dim / 2), i <
//              rope_pairs, with angle inv_freq[i] * j and cos/sin in f32 as QkvPrep; the other
//              dims are k_norm * V_j
// Sequence s owns tokens [query_start[s], query_start[s+1]) at positions `positions[t]`, the
// last tokens of its seq_lens[s]-long context. Token indices are absolute (rows of q, out and
// positions), so query_start[0] may exceed 0: a launch over a step's later sequences passes its
// per-sequence arrays advanced past the earlier ones, and num_tokens = query_start[num_seqs] -
// query_start[0]. A query at position p attends to keys
// max(0, p - window + 1) .. p (window 0 = all keys 0 .. p).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gannet::kernels {

struct PagedAttentionParams {
  const void* q = nullptr;  // [num_tokens, n_q, d] bf16, or f16 with io_f16
  bool io_f16 = false;      // q and out are fp16 (the fp16 compute path; sm70 and generic entries)
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  bool kv_fp8 = false;
  const float* k_scale = nullptr;  // with kv_fp8
  const float* v_scale = nullptr;
  void* out = nullptr;
  const int32_t* query_start = nullptr;  // [num_seqs + 1] device
  const int32_t* seq_lens = nullptr;     // [num_seqs] device
  const int32_t* positions = nullptr;    // [num_tokens] device
  const int32_t* page_table = nullptr;   // [num_seqs, max_pages_per_seq] device
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;  // host bound on any sequence's query length
  int max_seq_len = 0;    // host bound on any seq_len (sizes the split count)
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 0;
  int max_pages_per_seq = 0;
  int window = 0;
  int64_t q_stride = 0;    // elements between tokens of q
  int64_t out_stride = 0;  // elements between tokens of out
  float scale = 1.0f;
  int num_splits = 0;  // 0 = the entry's heuristic; > 0 forces a split count (tests, benchmarks)
  bool k_from_v = false;
  const float* k_norm = nullptr;  // [head_dim] f32, with k_from_v
  int rope_pairs = 0;             // rotated pairs, <= kMaxKFromVRopePairs
  float inv_freq[64] = {};        // [rope_pairs]
  // Image-block mask (lib/backend/backend.h, AttentionArgs::image_block_mask): null, or
  // [num_tokens] device, indexed by absolute token like positions: each token's image block id
  // (-1 text). A query of block b >= 0 also sees the keys of the later tokens of its run of b in
  // its sequence's chunk (all of the block is in the step), the window bounding only earlier keys.
  // Only entries with the kFlagImageBlocks capability read it (AttentionProblem sets the flag).
  const int32_t* image_block = nullptr;
};
inline constexpr int kMaxKFromVRopePairs = 64;

// Whether the flash kernels (sm80, sm75 and sm70 entries) derive K for this rotation: head_dim 512
// (the K=V layers' width, the only one with a K-from-V instantiation), the rotated dims [0, R) and
// [h, h + R) (R = rope_pairs, h = head_dim / 2) are whole 32-dim blocks, each thread of a CTA
// keeps one pair's frequency and weights (threads % R == 0), and under FP8 the derived dims fit
// the stage's K row as fp16 (4 R <= head_dim + 32). The generic kernel takes any rotation.
inline bool FlashSupportsKFromV(int rope_pairs, int head_dim, bool kv_fp8, int threads) {
  const int r = rope_pairs;
  return head_dim == 512 && r >= 0 && r % 32 == 0 && r <= kMaxKFromVRopePairs &&
         (r == 0 || threads % r == 0) && (!kv_fp8 || 4 * r <= head_dim + 32);
}

// One compiled tile configuration of the flash kernels (sm80/flash_decode_sm80.cuh,
// sm80/flash_prefill_sm80.cuh).
struct FlashConfig {
  int head_dim;
  int block_m;  // query rows per CTA: (token, head-of-group) pairs, GQA-packed
  int block_n;  // keys per pipeline stage
  int threads;
  int stages;
  int smem_bytes;
};

// Rows of the flash kernel's grid for a step: an upper bound on the CTA tiles over all sequences
// (each sequence's q_len * group rows rounded up to block_m), fixed by (num_tokens, num_seqs) so a
// captured graph can replay any step of that shape.
inline int FlashGridTiles(const FlashConfig& c, int num_tokens, int num_seqs, int group) {
  return (num_tokens * group + c.block_m - 1) / c.block_m + num_seqs;
}

// Workspace of a split launch: every split's normalised partial O and its log2-sum-exp, merged
// afterwards by a combine kernel (no counters, so the workspace can be shared with other users).
inline size_t FlashWorkspaceBytes(const FlashConfig& c, int grid_tiles, int num_kv_heads,
                                  int num_splits) {
  if (num_splits <= 1) return 0;
  const size_t ctas = static_cast<size_t>(grid_tiles) * num_kv_heads;
  return ctas * num_splits * c.block_m * (c.head_dim + 1) * sizeof(float);
}

// The compiled configurations; each is defined (with its tile sizes) in one .cu file under
// attention/{decode,prefill}/sm80/ or .../sm75/ so the instantiations compile in parallel. The
// *Sm75 ones are the same kernels built for Turing (m16n8k8 fp16 MMAs, synchronous copies, at
// most 64 KB of shared memory); their .cu files compile for sm_75 alone (with PTX, so newer GPUs
// run them under JIT when a test forces them). The *Sm90 ones are the Hopper wgmma kernels
// (attention/prefill/sm90/, built for sm_90a only when the arch list has sm_90). The *Sm70 ones
// are Volta's m8n8k4 kernels (attention/sm70/: sm_70 code in the Volta build, compute_75 PTX in
// the release build so that newer GPUs run them under JIT when forced); FlashHd512* serves both
// decode and prefill.
#define GANNET_FLASH_CONFIGS(X) \
  X(DecodeHd256)                \
  X(DecodeHd256Small)           \
  X(DecodeHd512)                \
  X(DecodeHd512Deep)            \
  X(PrefillHd256)               \
  X(PrefillHd256Small)          \
  X(PrefillHd512)               \
  X(PrefillHd512Small)          \
  X(DecodeHd256Fp8)             \
  X(DecodeHd512Fp8)             \
  X(DecodeHd256Fp8Small)        \
  X(DecodeHd512Fp8Small)        \
  X(PrefillHd256Fp8)            \
  X(PrefillHd512Fp8)            \
  X(PrefillHd256Fp8Small)       \
  X(PrefillHd512Fp8Small)       \
  X(DecodeHd256Sm75)            \
  X(DecodeHd512Sm75)            \
  X(DecodeHd256Fp8Sm75)         \
  X(DecodeHd512Fp8Sm75)         \
  X(PrefillHd256Sm75)           \
  X(PrefillHd512Sm75)           \
  X(PrefillHd256Fp8Sm75)        \
  X(PrefillHd512Fp8Sm75)        \
  X(PrefillHd256Sm90)           \
  X(PrefillHd512Sm90)           \
  X(DecodeHd256Sm70)            \
  X(PrefillHd256Sm70)           \
  X(FlashHd512Sm70)             \
  X(DecodeHd256Fp8Sm70)         \
  X(PrefillHd256Fp8Sm70)        \
  X(FlashHd512Fp8Sm70)

// Per configuration: its FlashConfig and its launcher. `num_splits` >= 1; workspace as above.
#define GANNET_DECLARE_FLASH(name)                                                              \
  FlashConfig FlashConfig##name();                                                              \
  cudaError_t LaunchFlash##name(const PagedAttentionParams& p, int num_splits, void* workspace, \
                                cudaStream_t stream);
GANNET_FLASH_CONFIGS(GANNET_DECLARE_FLASH)
#undef GANNET_DECLARE_FLASH

// The CUDA-core fallback for every arch (sm_75+), any head_dim multiple of 64 up to 512, bf16 or
// FP8 KV: one warp per (token, query head), online softmax. Slow but simple: the reference on the
// GPU.
cudaError_t LaunchGenericAttention(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace gannet::kernels
