// What the kernel registry selects on: the op, the problem key (everything that decides which
// kernel can run it) and the device. Plain host C++ plus the CUDA runtime API; no lib/ types.
//
// A ProblemKey mixes two kinds of fields: the *class* of a problem (dtypes, head_dim, page size,
// GQA group, window, flags), which decides which entries apply and is what selection logs, and
// *sizes* (num_seqs, num_tokens, max_seq_len, m/n/k), which only size workspaces and launch
// grids.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace gannet::kernels {

enum class Op : uint8_t {
  kAttentionDecode,   // paged attention, one query token per sequence (split-KV)
  kAttentionPrefill,  // paged attention, any number of query tokens (prefill / extend / mixed)
  kGemv,              // out[M, N] = x[M, K] w[N, K]^T for small M
  kMoeExperts,        // the experts' gated MLPs of a routed token batch
  kLinearInt4,        // out[M, N] = x[M, K] w[N, K]^T, w W4A16 int4 (kernels/quant), any M
  kCount,
};
const char* OpName(Op op);  // "attention.decode", ...

// Problem flags.
inline constexpr uint32_t kFlagAligned16 = 1u << 0;  // every pointer and row stride 16-B aligned
inline constexpr uint32_t kFlagKFromV = 1u << 1;  // attention derives K from V (single-store K=V)
// Attention applies the image-block mask (PagedAttentionParams::image_block): a query also sees
// the later keys of its image block. A *capability* flag: only entries whose predicate lists it
// in `capabilities` may run such a problem (registry.h).
inline constexpr uint32_t kFlagImageBlocks = 1u << 2;
// The problem flags an entry must declare it can honour (a kernel that ignored them would compute
// a wrong answer, not a slow one).
inline constexpr uint32_t kCapabilityFlags = kFlagImageBlocks;

struct DeviceInfo {
  int device = 0;  // CUDA ordinal
  int sm = 0;      // compute capability as major * 10 + minor (90 on H100)
  int num_sms = 0;
  int max_smem_optin = 0;  // bytes of dynamic shared memory one block may opt into
  static cudaError_t Query(int device, DeviceInfo* out);
};

struct ProblemKey {
  Op op = Op::kCount;
  // Element types (kernels/common/dtype.h); each entry's predicate names those it runs, so a
  // type no entry takes (a quantized weight today) fails selection with "dtypes ... unsupported".
  DType in_type = DType::kBF16;  // q / x (kF16: the fp16 compute path's activations)
  DType kv_type = DType::kBF16;  // KV cache (kF8E4M3: with per-row scales) / weights
  DType out_type = DType::kBF16;
  uint32_t flags = 0;
  // Attention.
  int head_dim = 0;
  int page_size = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int window = 0;         // 0 = full causal
  int max_query_len = 0;  // longest query of the step
  int rope_pairs = 0;     // with kFlagKFromV: the rotated pairs K's derivation applies
  // GEMM / MoE.
  int n = 0;
  int k = 0;
  int num_experts = 0;
  int top_k = 0;
  // Quantized weights (kv_type kI4 / kU4): input elements per scale (k for per-channel) and the
  // scales' type.
  int group_size = 0;
  DType scale_type = DType::kBF16;
  // Sizes (workspace and grid only).
  int num_seqs = 0;
  int num_tokens = 0;  // also GEMM M
  int max_seq_len = 0;

  int group() const { return num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0; }
  // The class fields, for logs and the log-once set ("hd512 page16 gqa8 win0 q1 bf16").
  std::string ClassString() const;
};

}  // namespace gannet::kernels
