#include "lib/backend/cuda/cublaslt_candidates.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lib/backend/cuda/cuda_status.h"

namespace gannet::backend {

namespace {

bool VariantsEnabled() {
  const char* env = std::getenv("GANNET_LINEAR_VARIANTS");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// What tells two configurations of cuBLASLt's algos apart, for the variants' dedup.
struct AlgoConfig {
  int32_t id = 0;
  uint32_t tile = 0, reduction = 0, stages = 0;
  int32_t splitk = 0;
  uint16_t cluster = 0;
  bool operator==(const AlgoConfig&) const = default;
};

AlgoConfig ConfigOf(const cublasLtMatmulAlgo_t& a) {
  AlgoConfig c;
  size_t n = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &c.id, sizeof(c.id), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof(c.tile),
                                       &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk,
                                       sizeof(c.splitk), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction,
                                       sizeof(c.reduction), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages,
                                       sizeof(c.stages), &n);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c.cluster,
                                       sizeof(c.cluster), &n);
  return c;
}

// `a` unsplit on `cluster`; false where cuBLASLt refuses an attribute.
bool Unsplit(cublasLtMatmulAlgo_t* a, uint16_t cluster) {
  const int32_t splitk = 1;
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  return cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                              sizeof(splitk)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                              sizeof(reduction)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                              sizeof(cluster)) == CUBLAS_STATUS_SUCCESS;
}

}  // namespace

absl::StatusOr<std::vector<cublasLtMatmulAlgo_t>> CublasLtCandidates(
    cublasLtHandle_t handle, const CublasLtProblem& p, int heuristic_algos, size_t workspace_bytes,
    bool with_variants, int* variants) {
  cublasLtMatmulHeuristicResult_t results[kMaxCublasLtCandidates];
  int count = 0;
  GANNET_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(
      handle, p.desc, p.a, p.b, p.c, p.c, p.pref,
      std::clamp(heuristic_algos, 1, kMaxCublasLtCandidates), results, &count));
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::vector<AlgoConfig> seen;
  for (int i = 0; i < count; ++i) {
    algos.push_back(results[i].algo);
    seen.push_back(ConfigOf(results[i].algo));
  }
  *variants = 0;
  if (!with_variants || !VariantsEnabled()) return algos;
  const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1};
  for (int i = 0; i < count; ++i) {
    for (const uint16_t cluster : clusters) {
      if (static_cast<int>(algos.size()) == kMaxCublasLtCandidates) return algos;
      cublasLtMatmulAlgo_t a = results[i].algo;
      if (!Unsplit(&a, cluster)) continue;
      const AlgoConfig c = ConfigOf(a);
      if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
      cublasLtMatmulHeuristicResult_t check;
      if (cublasLtMatmulAlgoCheck(handle, p.desc, p.a, p.b, p.c, p.c, &a, &check) !=
              CUBLAS_STATUS_SUCCESS ||
          check.workspaceSize > workspace_bytes) {
        continue;
      }
      seen.push_back(c);
      algos.push_back(a);
      ++*variants;
    }
  }
  return algos;
}

}  // namespace gannet::backend
