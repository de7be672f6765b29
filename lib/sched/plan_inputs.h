// What a plan's sequences read: each sampling request's row request (where and how its logits
// row is sampled, sampling/row_policy.h) and, as a debug check, its KV pages (GANNET_DEBUG_KV,
// docs/kv-memory.md). The runner's batch is built above the scheduler (lib/engine/step_batch.h).
// Engine thread only.
#pragma once

#include "absl/status/status.h"
#include "lib/kv/kv_manager.h"
#include "lib/sampling/row_policy.h"
#include "lib/sched/scheduler.h"

namespace gannet::sched {

// The sampling request of the logits row of a scheduled sequence.
sampling::RowRequest RowRequestOf(const Request& request);

// Checks every page the plan's sequences will read (sliding: the window before each chunk; full:
// everything) against the KV manager's state; Internal with a dump on a violation.
absl::Status ValidatePlanReads(const StepPlan& plan, const kv::KvManager& kv);

}  // namespace gannet::sched
