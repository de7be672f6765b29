// The tensor-parallel hooks of a runner that is one rank of a group (runner::TpHooks), over the
// group's collectives: the all-reduces of partial sums, the gather of the LM head's vocabulary
// shards, and the best-pick (value, id) exchange that greedy rows use instead of that gather (8
// bytes a row per rank instead of the rank's vocabulary shard). The target runner and the MTP
// drafter of a rank share one (the drafter reads it from its target's RunnerOptions).
#pragma once

#include "lib/backend/collectives.h"
#include "lib/runner/tp_hooks.h"

namespace gannet::parallel {

class GroupTpHooks : public runner::TpHooks {
 public:
  // `collectives` is not owned and must outlive the hooks.
  explicit GroupTpHooks(backend::Collectives* collectives) : c_(collectives) {}

  int rank() const override { return c_->rank(); }
  int world_size() const override { return c_->world_size(); }
  absl::Status SumPartials(backend::Tensor x) override;
  absl::Status SumPostNormResidual(backend::Backend& be, backend::Tensor x,
                                   backend::Tensor post_weight, backend::Tensor residual,
                                   backend::Tensor scalar, backend::Tensor next_weight,
                                   backend::Tensor next_out, float eps) override;
  absl::Status GatherVocabShards(backend::Tensor blocks, backend::Tensor full) override;
  absl::Status ExchangeBestPicks(backend::Backend& be, backend::Tensor shard,
                                 backend::Tensor banned, int64_t id_begin, backend::Tensor scratch,
                                 backend::Tensor picks) override;
  absl::Status ReadBestPicks(backend::Backend& be, backend::Tensor picks,
                             std::span<int32_t> out) override;

 private:
  backend::Collectives* c_;
};

}  // namespace gannet::parallel
