// A tensor-parallel group's row-parallel projections (o_proj, the MLP's down projection: each
// rank holds a slice of K and the outputs are summed over the group), with the all-reduce of a
// long step overlapped with the projection itself.
#pragma once

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"

namespace gannet::runner {

// out[n, N] = the group's sum of x[n, K] w[N, K]^T. At n >= min_rows (and min_rows > 0) the rows
// go in two halves and the first half's all-reduce runs while the second half is projected
// (Backend::OverlapCollective), so only the second half's all-reduce waits between the GEMMs: a
// 2048-row prefill step of 31B at TP=2 spent ~10% of its time in 120 all-reduces of 22 MB between
// its GEMMs (bench/RESULTS_MULTIGPU.md, session 25). Below min_rows: one projection, one
// all-reduce. Each row's arithmetic is the same either way; only the GEMM's M differs.
absl::Status ProjectAllReduce(backend::Backend* be, backend::Collectives* tp, backend::Tensor x,
                              backend::Tensor w, backend::Tensor out, int64_t min_rows);

}  // namespace gannet::runner
