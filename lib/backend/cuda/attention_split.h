// How the CUDA backend cuts a step's attention into kernel launches (host code only: runs
// without a GPU). A decode CTA holds up to kDecodeCtaRows (query token, head of a GQA group) rows
// and splits the keys; a prefill CTA takes a 64-row or larger query tile. A mixed step (the
// scheduler puts decode rows before prompt chunks) run as one prefill launch gives each decode
// row a mostly empty tile and no split of the keys: on an H200, 80 decode rows beside a
// 2048-token chunk added 45 ms to 31B's sliding-layer prefill kernel a step, and the step took
// 286.5 ms against 262.0 ms with those rows in the decode kernel (docs/results-log/multigpu.md,
// session 28). So such a step runs as two launches over disjoint rows of out.
#pragma once

#include <optional>

#include "kernels/attention/paged_attention.h"
#include "lib/backend/backend.h"

namespace gannet::backend {

inline constexpr int kDecodeCtaRows = 16;

// Whether a decode CTA holds every sequence's query rows.
inline bool FitsDecodeCta(const kernels::PagedAttentionParams& p) {
  return p.max_query_len * (p.num_q_heads / p.num_kv_heads) <= kDecodeCtaRows;
}

struct MixedStepLaunches {
  kernels::PagedAttentionParams decode;  // the leading sequences, with host bounds of their own
  kernels::PagedAttentionParams rest;    // the others: per-sequence arrays advanced past them
};

// The two launches of a step whose leading sequences fit a decode CTA and whose others do not,
// from the host copies of query_start and seq_lens in `m`; nullopt for any other step (every
// sequence fits, the first does not, or the host copies are absent). Steps of one query length
// never split, so a graph-recorded step (always of one query length) replays what it recorded.
std::optional<MixedStepLaunches> SplitMixedStep(const kernels::PagedAttentionParams& p,
                                                const StepMetadata& m);

}  // namespace gannet::backend
