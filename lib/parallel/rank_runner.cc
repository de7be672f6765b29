#include "lib/parallel/rank_runner.h"

#include "lib/common/status.h"

namespace gannet::parallel {

absl::StatusOr<RankRunner> CreateRankRunner(const model::ModelConfig& config,
                                            const model::ModelWeights& weights,
                                            backend::Collectives* collectives,
                                            backend::Backend* backend,
                                            runner::RunnerOptions options) {
  const int world = collectives->world_size();
  RankRunner r;
  GANNET_ASSIGN_OR_RETURN(
      r.weights,
      model::ShardWeights(config, weights, {collectives->rank(), world, options.moe_split}));
  r.tp = std::make_unique<GroupTpHooks>(collectives);
  options.tp = r.tp.get();
  GANNET_ASSIGN_OR_RETURN(
      r.runner, runner::ModelRunner::Create(model::ShardConfig(config, world, options.moe_split),
                                            r.weights->views, backend, options));
  return r;
}

absl::StatusOr<RankDrafter> CreateRankDrafter(const model::ModelConfig& config,
                                              const model::ModelWeights& weights,
                                              backend::Collectives* collectives,
                                              backend::Backend* backend,
                                              runner::ModelRunner* target,
                                              const spec::DrafterOptions& options) {
  if (target == nullptr) {
    return FailedPreconditionError("tensor parallel: a drafter before the runner");
  }
  const int world = collectives->world_size();
  // The assistant has no experts: its split is the intermediate one whatever the target's.
  GANNET_RETURN_IF_ERROR(model::CheckTpShardable(config, world, model::MoeSplit::kIntermediate));
  RankDrafter d;
  GANNET_ASSIGN_OR_RETURN(
      d.weights, model::ShardWeights(config, weights,
                                     {collectives->rank(), world, model::MoeSplit::kIntermediate}));
  GANNET_ASSIGN_OR_RETURN(d.drafter,
                          spec::Drafter::Create(model::ShardConfig(config, world), d.weights->views,
                                                target->config(), target, backend, options));
  return d;
}

absl::StatusOr<int64_t> AgreeOverRanks(backend::Collectives& collectives, const absl::Status& mine,
                                       int64_t value, std::string_view what) {
  absl::StatusOr<int64_t> least = collectives.MinOverRanks(mine.ok() ? value : -1);
  GANNET_RETURN_IF_ERROR(mine);
  GANNET_RETURN_IF_ERROR(least.status());
  if (*least < 0) {
    return MarkDeviceLost(absl::InternalError(
        fmt::format("tensor parallel: another rank could not {} (see its log)", what)));
  }
  return *least;
}

}  // namespace gannet::parallel
