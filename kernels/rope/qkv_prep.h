// QKV preparation, fused into one kernel: per-head q RMSNorm (weighted) + RoPE -> q_out;
// k RMSNorm (weighted) + RoPE and v RMSNorm (no weight) written straight into the paged KV cache
// (bf16, or FP8 E4M3 with one scale per row: amax / 448).
// RoPE is rotate-half (NeoX) over the whole head with per-pair inverse frequencies (zero for the
// pairs proportional RoPE leaves unrotated), passed by value.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

inline constexpr int kMaxRopePairs = 256;  // head_dim 512

struct QkvPrepParams {
  const void* qkv = nullptr;  // [T, (n_q + n_kv * (k_eq_v ? 1 : 2)) * d], row stride ld_qkv
  int64_t ld_qkv = 0;
  // The element types: bf16 qkv and bf16 q_out, or (the fp16 compute path) f32 qkv and f16 q_out.
  DType qkv_type = DType::kBF16;
  DType q_type = DType::kBF16;
  int num_tokens = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;     // even, <= 2 * kMaxRopePairs
  bool has_kv = true;   // false on KV-shared layers
  bool k_eq_v = false;  // V is the raw K projection
  float eps = 1e-6f;
  const float* q_norm = nullptr;          // [d]
  const float* k_norm = nullptr;          // [d] or null (no weight)
  const int32_t* positions = nullptr;     // [T]
  const int32_t* slot_mapping = nullptr;  // [T] page * page_size + offset, -1 = skip
  void* q_out = nullptr;                  // [T, n_q, d] of q_type, token stride ld_q
  int64_t ld_q = 0;
  void* k_cache = nullptr;  // [num_pages, n_kv, page_size, d] bf16, or FP8 E4M3 (kv_fp8);
                            // null: V alone (single-store K=V, K derived by attention)
  void* v_cache = nullptr;
  bool kv_fp8 = false;       // FP8 rows with per-row scales (lib/backend/backend.h)
  float* k_scale = nullptr;  // [num_pages, n_kv, page_size] with kv_fp8
  float* v_scale = nullptr;
  int page_size = 0;
  float inv_freq[kMaxRopePairs] = {};  // [d / 2]
};

cudaError_t LaunchQkvPrep(const QkvPrepParams& p, cudaStream_t stream);

}  // namespace gannet::kernels
