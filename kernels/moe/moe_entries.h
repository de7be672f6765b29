// The MoE-experts entries of the kernel registry; `args` of their launch is a MoeExpertsParams.
// The problem key carries n = intermediate width, k = hidden, num_experts, top_k, num_tokens.
#pragma once

#include "kernels/moe/moe.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm80MoeGroupedGemm;  // prefill: sorted pairs, grouped mma GEMMs
extern const KernelEntry kSm75MoeGroupedGemm;  // the same on sm_75 (fp16 MMAs)
extern const KernelEntry kSm70MoePairGemv;     // decode: per-(token, expert) GEMVs, M <= 32
extern const KernelEntry kSm70MoePairGemvAnyM;  // the same at any M (sm_70's prefill)

// The most tokens the per-pair GEMVs take. moe_bench (H200, 26B-A4B geometry, uniform routing):
// they beat the grouped GEMMs at every count up to 32 (166 vs 371 us at 8 tokens, 299 vs 464 at
// 16, 540 vs 615 at 32) and lose at 64 (1035 vs 670): below 64 tokens most experts get one or two
// rows, which the grouped kernels' 64-row tiles spend whole tiles on. bench/RESULTS_TP.md.
inline constexpr int kMoePairGemvMaxTokens = 32;

ProblemKey MoeExpertsProblem(const MoeExpertsParams& p);
MoeExpertsParams MoeParamsOfProblem(const ProblemKey& pk);  // sizes only, for workspace queries

}  // namespace gannet::kernels
