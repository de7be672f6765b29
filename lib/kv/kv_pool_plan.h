// KV pool sizing: how many pages each group's pool gets out of a memory budget (docs/kv-memory.md).
//
// The sliding pool gets exactly the worst case that max_running_seqs concurrent sequences can
// hold at once (SlidingPagesWorstCase below); the full pool gets the rest of the budget. Either
// count can be overridden. A model without one group gives the whole budget to the other. Each
// present group also stores one padding page (kv_layout.h), taken from the budget first.
// Minimums (an error below them, unless the pool is overridden): the sliding pool holds the
// worst case; the full pool holds one sequence of max_seq_len tokens, so any admissible request
// can run to completion on its own. A pool never passes the int32 slot range (kMaxPoolTokens).
//
// PlanKvPoolsWithDefaults is what the engine calls: where a limit is the engine's own default
// (not the user's setting) and the budget cannot hold the minimums, it lowers that limit to what
// fits (running sequences first, then the context length, never below 1024 tokens) and says so; a
// user's setting that cannot fit is an error naming the setting and the value that would fit.
// A default running limit is also lowered where the windows it reserves would leave the full pool
// short of that many sequences of kPlannedSeqTokens: such a limit only preempts.
//
// Scale (docs/gemma4-model.md §2.12): for 31B bf16 a sliding token costs 800 KiB (50 layers)
// and a full token 80 KiB (10 layers), so at high concurrency the sliding pool is what binds.
// Pure functions on value types; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lib/kv/kv_layout.h"
#include "lib/kv/kv_types.h"

namespace gannet::kv {

// The most sliding pages one sequence holds during a step that grows it by new_tokens: the blocks
// touching its window and the new positions (at most W - 1 + new_tokens positions, at the worst
// alignment), and never more than the ceil(max_seq_len / P) blocks of a whole sequence.
int64_t SlidingPagesHeld(int64_t window, int64_t page_size, int64_t new_tokens,
                         int64_t max_seq_len);

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
  int32_t pages = 0;      // pages the KV manager hands out (the padding page is extra)
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
// for an absent group or past the slot range); ResourceExhausted when the budget cannot hold the
// minimums (or the overrides), with the bytes each part needs.
absl::StatusOr<KvPoolPlan> PlanKvPools(const KvPoolPlanOptions& options);

// Bytes the minimums of `options` need (both pools and the padding pages); overrides ignored.
int64_t KvMinimumBytes(const KvPoolPlanOptions& options);

// The sequence length a default running limit is planned for (a chat turn: prompt and answer).
// The sliding pool is reserved for every running sequence's window, and the full pool gets the
// rest; a default limit whose windows leave the full pool fewer than that many sequences of this
// length admits sequences it cannot keep. Measured: 31B on two H100s serving 80 users of 1000 +
// 1000 tokens (context 2016): the group's default 128, lowered only to what the windows allowed
// (107), left the full pool 3 such sequences; it preempted 95 times for 247 tok/s.
inline constexpr int64_t kPlannedSeqTokens = 2048;

// Which of the limits in `options` the user set; the others are the engine's defaults, which
// PlanKvPoolsWithDefaults may lower.
struct KvPlanRequest {
  KvPoolPlanOptions options;
  bool user_running_seqs = false;  // max_running_seqs
  bool user_max_seq_len = false;   // max_model_len
  bool user_budget = false;        // kv_memory_bytes
  std::string budget_origin;       // how a default budget was derived, for messages
};

struct KvPlanResult {
  KvPoolPlan plan;
  int32_t max_running_seqs = 0;  // possibly lowered from the request's default
  int64_t max_seq_len = 0;       // possibly lowered from the request's default
  std::string warning;           // what was lowered and why, with the numbers; empty if nothing
};

// PlanKvPools, lowering default limits that do not fit (see the header comment). Errors:
// InvalidArgument as PlanKvPools; ResourceExhausted naming the user setting (max_running_seqs,
// max_model_len, kv_memory_bytes, kv_*_pages) to change and a value that would fit.
absl::StatusOr<KvPlanResult> PlanKvPoolsWithDefaults(const KvPlanRequest& request);

}  // namespace gannet::kv
