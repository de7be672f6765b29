// A warm-up before serving: one step of every shape whose first run costs more than later ones, so
// that cost is paid at start instead of inside the first requests that meet each shape.
//
// Two first-time costs exist (CUDA): the linear layers time candidate kernels at each new row key
// (Backend::LinearTuningRows: every M up to 16, then buckets), and a decode step records a CUDA
// graph per (batch bucket, context-length bucket) on its second run (graph_cache.h), after an
// eager first. The warm-up runs one step of every row key up to the step's token budget (a single
// sequence of M tokens, a logits row per token while the rows allow, so the LM head meets the same
// keys), then every decode shape twice: each batch bucket up to max_seqs at each context-length
// bucket up to max_model_len, greedy (and, for a tensor-parallel group, whose graphs differ by
// sampling mode, sampled). The eager runs come first, so the workspaces reach their size before
// any recording (a workspace that grew would void earlier recordings). A shape whose sequences
// would not fit the KV pools side by side is left out: serving cannot make it, and its
// workspaces (split-KV partials grow with batch and context) could pass what the memory left.
//
// The steps write K/V into the pools before the KV manager hands out any page: their page tables
// reuse the pools' first pages (every sequence the same ones, block b on page b mod pool size),
// so any layout serves, and what they leave is overwritten before a request reads it (a request
// attends only to positions it wrote). Verify chunks and the drafter's rounds are not warmed.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "lib/backend/backend.h"
#include "lib/kv/kv_layout.h"
#include "lib/runner/step_runner.h"

namespace gannet::runner {

struct WarmupLimits {
  int max_seqs = 0;                // running sequences (decode batch buckets up to it)
  int max_tokens = 0;              // tokens per step (row keys up to it)
  int max_logit_rows = 0;          // logits rows per step
  int64_t max_model_len = 0;       // context (length buckets up to its own)
  bool both_sample_modes = false;  // tensor parallelism: greedy and sampled decode graphs differ
  // The KV pools (kv::KvLayout): page size, window, pages per group (sliding, full; 0 = none).
  int page_size = 16;
  int sliding_window = 0;
  int64_t pool_pages[2] = {0, 0};
};
// The layout's pool geometry in `limits` (page size, window, pages per group).
void SetPools(const kv::KvLayout& layout, WarmupLimits* limits);

// The steps, in the order they run.
struct WarmupStep {
  int num_seqs = 1;
  int tokens_per_seq = 1;
  int context = 1;          // each sequence's context after the step (its last position + 1)
  bool all_logits = false;  // a logits row per token (else one per sequence)
  bool greedy = true;
};
// `linear_rows`: Backend::LinearTuningRows(max_tokens); `graphs`: Backend::SupportsGraphs.
std::vector<WarmupStep> PlanWarmup(const WarmupLimits& limits, const std::vector<int>& linear_rows,
                                   bool graphs);

// Runs the plan on `runner` over pages of `layout` (the layout its KV storage was attached with),
// before the KV manager hands out any page. Errors name the step that failed.
absl::Status WarmUp(StepRunner* runner, const kv::KvLayout& layout,
                    const std::vector<WarmupStep>& steps, int32_t vocab_size);

}  // namespace gannet::runner
