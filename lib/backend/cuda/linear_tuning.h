// The arithmetic of CudaLinear's tuning (cuda_linear.cc), apart from its CUDA calls so that it is
// tested without a GPU: the M a plan is tuned for, and which of the timed candidates it keeps.
#pragma once

#include <vector>

namespace gannet::backend {

// The M a linear plan is keyed and tuned by: exact up to 16, then the runner's decode batch
// buckets (multiples of 8 to 64, of 16 to 128: runner::BatchBucket), so every graphed decode
// batch up to 128 gets a pick timed at its own M, then powers of two (prefill chunks).
int LinearPlanRows(int m);
// The last decode batch bucket's rows: above it plans are keyed by powers of two.
inline constexpr int kLinearDecodeBucketRows = 128;
// The distinct LinearPlanRows(m) for m in 1 .. max_rows, ascending (each is its own key's M).
std::vector<int> LinearPlanKeys(int max_rows);

// Whether a plan of M = m (its LinearPlanRows) times cuBLASLt's unsplit, clustered variants
// (cublaslt_candidates.h) beside the heuristic's algos: the decode batches above the GEMV's rows
// (gemv_max_m) up to the last decode bucket (kLinearDecodeBucketRows). They were measured for
// 64-80 rows; at batch 1-8 the GEMV and the heuristic's picks were tuned against each other with
// PDL in mind, and a prefill chunk's tiles are not split-K, where each variant would only add
// ~1 ms of tuning.
bool TimesCublasLtVariants(int m, int gemv_max_m);

// The median of one candidate's timed rounds; +inf when it has none.
float MedianMs(std::vector<float> runs);

// Which of cuBLASLt's algos to keep, given each one's time in the heuristic's order (+inf: did not
// run): the first that ran, replaced by a later one only when that is faster than the one kept by
// more than `margin` (a fraction). Eager timings of one kernel at a time do not say which of two
// near-ties runs faster between a step's other kernels, and the heuristic's order is the better
// prior there. -1 when none ran.
int PickAlgo(const std::vector<float>& ms, float margin);

// The GEMV tiles (kernels::GemvTile, `tiles` of them) a plan of M = m times: [first, first +
// count). Every tile at M = 1, the four-row tile (0) alone above it; `forced` (GANNET_GEMV_TILE,
// clamped to a tile; < 0 = none) alone at M = 1. The pick among them is PickAlgo's, index 0 =
// `first`.
struct GemvTileRange {
  int first = 0;
  int count = 1;
};
GemvTileRange GemvTilesToTime(int m, int forced, int tiles);

}  // namespace gannet::backend
