// A scheduler plan as the runner's batch: per sequence its new tokens, first position, page
// table per KV group and whether it wants logits; per logits row where and how it is sampled
// (sampling/row_policy.h). Here, above both, so the scheduler knows nothing of the runner.
//
// The batch points into the requests' tokens and the KV manager's tables: use it before either
// changes (the step that follows the plan). Engine thread only.
#pragma once

#include "lib/kv/kv_manager.h"
#include "lib/runner/step.h"
#include "lib/sched/scheduler.h"

namespace gannet::engine {

runner::StepBatch BuildStepBatch(const sched::StepPlan& plan, const kv::KvManager& kv);

}  // namespace gannet::engine
