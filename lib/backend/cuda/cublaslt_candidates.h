// The cuBLASLt algorithms CudaLinear times for one problem (cuda_linear.h): the heuristic's top
// picks, then variants of them the heuristic does not offer. For the decode step's narrow
// projections (N 4-9 K on a TP rank, K long, 64-80 rows) the heuristic splits K with a separate
// reduction pass; the same tiles unsplit on a cluster of 4 (or 2) CTAs along N ran 6-17% faster
// on an H200 (31B's down projection at TP=2, 80 rows: 37.3 -> 32.2 us). A search of every tile,
// split and cluster the algo accepts found none faster than these by more than 1%
// (docs/experiments.md, "cublaslt_search.cu"; docs/results-log/decode.md, session 36).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"

namespace gannet::backend {

inline constexpr int kMaxCublasLtCandidates = 64;

// One matmul as cuBLASLt describes it, its layouts at the M to time.
struct CublasLtProblem {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // c is also D
  cublasLtMatmulPreference_t pref = nullptr;                     // the workspace limit
};

// The heuristic's first `heuristic_algos` (1..kMaxCublasLtCandidates), then, with
// `with_variants`, each one's variants unsplit on 4x1x1 and 2x1x1 clusters that cuBLASLt accepts
// for the problem within `workspace_bytes` and that differ from every earlier candidate; at most
// kMaxCublasLtCandidates in all. *variants counts the variants (the last ones).
// GANNET_LINEAR_VARIANTS=0 (a diagnostic, for measuring what they are worth) leaves them out.
// Algos without clusters (before sm_90) fail cuBLASLt's check and give none.
absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> CublasLtCandidates(
    cublasLtHandle_t handle, const CublasLtProblem& problem, int heuristic_algos,
    size_t workspace_bytes, bool with_variants, int* variants);

}  // namespace gannet::backend
