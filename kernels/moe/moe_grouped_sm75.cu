// The MoE experts' prefill path for sm_75 (Turing): the grouped GEMMs of moe_grouped_mma.cuh with
// m16n8k8 fp16 MMAs (bf16 operands converted) and synchronous copies. This file compiles for
// sm_75 alone, with PTX so that newer GPUs run it under JIT when a test forces the entry.
#include "kernels/moe/moe_grouped_mma.cuh"

namespace gannet::kernels {

cudaError_t LaunchMoeGroupedSm75(const MoeExpertsParams& p, void* workspace, cudaStream_t stream) {
  return moe_grouped::LaunchMoeGroupedFor<750>(p, workspace, stream);
}

}  // namespace gannet::kernels
