// What every rank of a tensor-parallel group does the same way, whether rank 0's TpRunner drives
// it in this process or a TpWorker in another: make its shard's runner (and, with speculative
// decoding, its shard's drafter), and agree with the other ranks that every one of them got as
// far.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/backend/collectives.h"
#include "lib/model/config.h"
#include "lib/model/tp_shard.h"
#include "lib/model/weights.h"
#include "lib/parallel/group_tp_hooks.h"
#include "lib/runner/model_runner.h"
#include "lib/spec/drafter.h"

namespace gannet::parallel {

struct RankRunner {
  std::unique_ptr<model::ShardedWeights> weights;  // outlives the runner (the CPU reads in place)
  std::unique_ptr<GroupTpHooks> tp;                // the runner's (and its drafter's) hooks
  std::unique_ptr<runner::ModelRunner> runner;
};

// The shard of `config`/`weights` for the rank of `collectives` and its runner on `backend`
// (options.tp is set to hooks over `collectives`, which must outlive the runner).
absl::StatusOr<RankRunner> CreateRankRunner(const model::ModelConfig& config,
                                            const model::ModelWeights& weights,
                                            backend::Collectives* collectives,
                                            backend::Backend* backend,
                                            runner::RunnerOptions options);

struct RankDrafter {
  std::unique_ptr<model::ShardedWeights> weights;  // outlives the drafter
  std::unique_ptr<spec::Drafter> drafter;
  spec::DraftResult scratch;  // the result of a rank other than 0 (only rank 0's is returned)
};

// The shard of the MTP assistant `config`/`weights` for the rank of `collectives`
// (model/tp_shard.h: its q heads those that read the rank's KV heads), drafting for `target`, the
// rank's runner (whose config is the target's shard geometry).
absl::StatusOr<RankDrafter> CreateRankDrafter(const model::ModelConfig& config,
                                              const model::ModelWeights& weights,
                                              backend::Collectives* collectives,
                                              backend::Backend* backend,
                                              runner::ModelRunner* target,
                                              const spec::DrafterOptions& options);

// Every rank calls it at the same point with its own outcome and, when it succeeded, a value >= 0:
// the least value over the ranks once all succeeded; this rank's error if it failed; device lost
// naming `what` when another rank failed.
absl::StatusOr<int64_t> AgreeOverRanks(backend::Collectives& collectives, const absl::Status& mine,
                                       int64_t value, std::string_view what);

}  // namespace gannet::parallel
