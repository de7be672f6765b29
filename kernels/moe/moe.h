// Mixture-of-experts kernels of Gemma-4 26B-A4B: the fused router and the experts' gated MLPs.
// Host-callable declarations only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

// Router: u = RmsNorm_noweight(x) * router_scale * hidden^-1/2; logits = router_proj u;
// p = softmax(logits) over all experts; top-k by p (ties to the lower index); weights =
// p / sum(top-k p) * per_expert_scale.
struct MoeRouteParams {
  const float* x = nullptr;  // [num_tokens, hidden] f32 (the residual stream)
  int64_t ldx = 0;
  const float* router_scale = nullptr;      // [hidden]
  const void* router_proj = nullptr;        // [num_experts, hidden] of router_type
  DType router_type = DType::kBF16;         // bf16, or f16 on the fp16 compute path
  const float* per_expert_scale = nullptr;  // [num_experts]
  int32_t* topk_ids = nullptr;              // [num_tokens, top_k]
  float* topk_weights = nullptr;            // [num_tokens, top_k]
  int num_tokens = 0;
  int hidden = 0;
  int num_experts = 0;  // <= 256
  int top_k = 0;        // <= 32
  float eps = 1e-6f;
};
// Workspace: logits and per-token-group counters (zeroed once; the kernel leaves them zeroed).
size_t MoeRouteWorkspaceBytes(int num_tokens, int num_experts);
cudaError_t LaunchMoeRoute(const MoeRouteParams& p, void* workspace, cudaStream_t stream);

// Experts: out[t] = sum_j topk_weights[t, j] * down_e (gelu_tanh(gate_e x[t]) * up_e x[t]),
// e = topk_ids[t, j]; gate rows [0, I) and up rows [I, 2I) of gate_up[e].
// Expert parallelism: gate_up and down hold the model's experts [expert_begin, expert_begin +
// num_experts); a pair whose id falls outside that range is another rank's and adds nothing (a
// token none of whose experts are here gets a zero row; the ranks' all-reduce sums the parts).
struct MoeExpertsParams {
  // x and the weights are of w_type (bf16, or f16 on the fp16 compute path); out is w_type or
  // (fp16 path: the sum feeds a norm) f32. The grouped kernels take bf16 alone.
  DType w_type = DType::kBF16;
  DType out_type = DType::kBF16;
  const void* x = nullptr;  // [num_tokens, hidden], row stride ldx
  int64_t ldx = 0;
  const int32_t* topk_ids = nullptr;    // [num_tokens, top_k]
  const float* topk_weights = nullptr;  // [num_tokens, top_k]
  const void* gate_up = nullptr;        // [num_experts, 2 * inter, hidden]
  const void* down = nullptr;           // [num_experts, hidden, inter]
  void* out = nullptr;                  // [num_tokens, hidden], row stride ldo
  int64_t ldo = 0;
  int num_tokens = 0;
  int hidden = 0;
  int inter = 0;
  int num_experts = 0;   // experts held here
  int expert_begin = 0;  // the model's id of the first one
  int top_k = 0;
};

// Decode path: one warp-level GEMV per (token, expert) pair with GeGLU fused, then a down
// projection per token that sums its experts in a fixed order (deterministic).
size_t MoePairGemvWorkspaceBytes(const MoeExpertsParams& p);
cudaError_t LaunchMoePairGemv(const MoeExpertsParams& p, void* workspace, cudaStream_t stream);

// Prefill path (tensor cores): pairs sorted by expert, a grouped GEMM for gate/up with GeGLU in
// the epilogue, a grouped GEMM for down, and a fixed-order weighted sum per token. LaunchMoeGrouped
// runs the sm_80+ build, LaunchMoeGroupedSm75 the sm_75 one (fp16 MMAs); same workspace.
size_t MoeGroupedWorkspaceBytes(const MoeExpertsParams& p);
cudaError_t LaunchMoeGrouped(const MoeExpertsParams& p, void* workspace, cudaStream_t stream);
cudaError_t LaunchMoeGroupedSm75(const MoeExpertsParams& p, void* workspace, cudaStream_t stream);

}  // namespace gannet::kernels
