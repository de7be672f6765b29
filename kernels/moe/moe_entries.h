// The MoE-experts entries of the kernel registry; `args` of their launch is a MoeExpertsParams.
// The problem key carries n = intermediate width, k = hidden, num_experts, top_k, num_tokens.
#pragma once

#include "kernels/moe/moe.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm80MoeGroupedGemm;      // prefill: sorted pairs, grouped mma GEMMs
extern const KernelEntry kSm75MoeGroupedGemm;      // the same on sm_75 (fp16 MMAs)
extern const KernelEntry kSm70MoePairGemv;         // decode: per-(token, expert) GEMVs, M <= 24
extern const KernelEntry kSm70MoePairGemvAnyM;     // the same at any M (sm_70's prefill)
extern const KernelEntry kSm70MoePairGemvF16;      // the fp16 compute path's, M <= 24
extern const KernelEntry kSm70MoePairGemvAnyMF16;  // and at any M

// The most tokens the per-pair GEMVs take. moe_bench (H200, 26B-A4B geometry, uniform routing,
// against the grouped GEMMs' 64x2 stages): the GEMVs are faster up to 24 tokens (186 vs 308 us at
// 8, 313 vs 396 at 16, 432 vs 455 at 24) and slower from 32 (546 vs 474; 1042 vs 499 at 64): below
// ~30 tokens most experts get one row, which the grouped kernels spend a whole 64-row tile on.
// docs/results-log/tp.md.
inline constexpr int kMoePairGemvMaxTokens = 24;

ProblemKey MoeExpertsProblem(const MoeExpertsParams& p);
MoeExpertsParams MoeParamsOfProblem(const ProblemKey& pk);  // sizes only, for workspace queries

}  // namespace gannet::kernels
