// A scheduler plan as the runner's batch: per sequence its new tokens, first position, page
// table per KV group and whether it wants logits; per logits row where and how it is sampled
// (sampling/row_policy.h). Also the debug check of every page a step will read
// (GANNET_DEBUG_KV, docs/kv-memory.md).
//
// The batch points into the requests' tokens and the KV manager's tables: use it before either
// changes (the step that follows the plan). Engine thread only.
#pragma once

#include "absl/status/status.h"
#include "lib/kv/kv_manager.h"
#include "lib/runner/step.h"
#include "lib/sampling/row_policy.h"
#include "lib/sched/scheduler.h"

namespace gannet::sched {

runner::StepBatch BuildStepBatch(const StepPlan& plan, const kv::KvManager& kv);

// The sampling request of the logits row of a scheduled sequence.
sampling::RowRequest RowRequestOf(const Request& request);

// Checks every page the plan's sequences will read (sliding: the window before each chunk; full:
// everything) against the KV manager's state; Internal with a dump on a violation.
absl::Status ValidatePlanReads(const StepPlan& plan, const kv::KvManager& kv);

}  // namespace gannet::sched
