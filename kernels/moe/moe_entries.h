// The MoE-experts entries of the kernel registry; `args` of their launch is a MoeExpertsParams.
// The problem key carries n = intermediate width, k = hidden, num_experts, top_k, num_tokens.
#pragma once

#include "kernels/moe/moe.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm80MoeGroupedGemm;  // prefill: sorted pairs, grouped mma GEMMs
extern const KernelEntry kSm75MoeGroupedGemm;  // the same on sm_75 (fp16 MMAs)
extern const KernelEntry kSm75MoePairGemv;     // decode: per-(token, expert) GEMVs, M <= 4

ProblemKey MoeExpertsProblem(const MoeExpertsParams& p);
MoeExpertsParams MoeParamsOfProblem(const ProblemKey& pk);  // sizes only, for workspace queries

}  // namespace gannet::kernels
