// KV pool sizing: how many pages each group's pool gets out of a memory budget (design.md §4).
//
// The sliding pool gets exactly the worst case that max_running_seqs concurrent sequences can
// hold at once (SlidingPagesWorstCase below); the full pool gets the rest of the budget. Either
// count can be overridden. A model without one group gives the whole budget to the other.
// Minimums (an error below them, unless the pool is overridden): the sliding pool holds the
// worst case; the full pool holds one sequence of max_seq_len tokens, so any admissible request
// can run to completion on its own.
//
// Scale (gemma4-architecture.md §2.12): for 31B bf16 a sliding token costs 800 KiB (50 layers)
// and a full token 80 KiB (10 layers), so at high concurrency the sliding pool is what binds.
// Pure functions on value types; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/kv/kv_types.h"

namespace gannet::kv {

// One decoder layer's KV geometry, for KvBytesPerToken.
struct KvLayerGeometry {
  KvGroup group = KvGroup::kSliding;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  bool owns_kv = true;  // false for KV-shared layers (they read their donor's pages)
};

// Bytes one token costs in each group: sum over layers owning KV of
// 2 (K and V) x num_kv_heads x head_dim x dtype_bytes.
PerGroup<int64_t> KvBytesPerToken(absl::Span<const KvLayerGeometry> layers, int64_t dtype_bytes);

// The most sliding pages that max_running_seqs sequences hold at once when every running
// sequence calls ReleaseSlidingBefore(next position - W + 1) before each step and a step computes
// at most max_step_tokens tokens in total. See kv_pool_plan.cc for the derivation.
int64_t SlidingPagesWorstCase(int64_t window, int64_t page_size, int64_t max_running_seqs,
                              int64_t max_step_tokens, int64_t max_seq_len);

struct KvPoolPlanOptions {
  int64_t budget_bytes = 0;                    // device memory for both pools
  PerGroup<int64_t> bytes_per_token = {0, 0};  // per GroupIndex(); 0 = the model lacks the group
  int32_t sliding_window = 0;                  // W
  int32_t page_size = 16;                      // P
  int32_t max_running_seqs = 0;
  int32_t max_step_tokens = 0;                    // per-step token budget of the scheduler
  int64_t max_seq_len = 0;                        // context length of one sequence
  PerGroup<int32_t> num_pages_override = {0, 0};  // > 0: use this page count as is
};

struct KvPoolCapacity {
  int32_t pages = 0;
  int64_t tokens = 0;     // pages x P
  int64_t bytes = 0;      // pages x P x bytes_per_token
  int64_t min_pages = 0;  // the minimum described above (0 for an absent group)
  bool overridden = false;
  std::string report;  // one line for the start-up log
};

struct KvPoolPlan {
  PerGroup<KvPoolCapacity> groups;

  const KvPoolCapacity& group(KvGroup g) const { return groups[GroupIndex(g)]; }
  PerGroup<int32_t> num_pages() const { return {groups[0].pages, groups[1].pages}; }
};

// InvalidArgument for inconsistent options (no group, non-positive P / W / limits, an override
// for an absent group); ResourceExhausted when the budget cannot hold the minimums (or the
// overrides), with the bytes each part needs.
absl::StatusOr<KvPoolPlan> PlanKvPools(const KvPoolPlanOptions& options);

}  // namespace gannet::kv
