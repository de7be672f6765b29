// The MoE experts' prefill path for sm_80 and newer (moe_grouped_mma.cuh: m16n8k16 bf16 MMAs,
// cp.async).
#include "kernels/moe/moe_grouped_mma.cuh"

namespace gannet::kernels {

size_t MoeGroupedWorkspaceBytes(const MoeExpertsParams& p) {
  const size_t pairs = static_cast<size_t>(p.num_tokens) * p.top_k;
  return moe_grouped::Align256((p.num_experts + 1) * sizeof(int)) +
         moe_grouped::Align256(pairs * sizeof(int)) +
         moe_grouped::Align256(pairs * p.inter * sizeof(bf16)) + pairs * p.hidden * sizeof(bf16);
}

cudaError_t LaunchMoeGrouped(const MoeExpertsParams& p, void* workspace, cudaStream_t stream) {
  return moe_grouped::LaunchMoeGroupedFor<800>(p, workspace, stream);
}

}  // namespace gannet::kernels
