#include "lib/parallel/group_tp_hooks.h"

#include <cstring>
#include <vector>

#include "lib/common/status.h"

namespace gannet::parallel {

using backend::Tensor;

absl::Status GroupTpHooks::SumPartials(Tensor x) { return c_->AllReduceSum(x); }

absl::Status GroupTpHooks::SumPostNormResidual(backend::Backend& be, Tensor x, Tensor post_weight,
                                               Tensor residual, Tensor scalar, Tensor next_weight,
                                               Tensor next_out, float eps) {
  return c_->AllReducePostNormResidual(be, x, post_weight, residual, scalar, next_weight, next_out,
                                       eps);
}

absl::Status GroupTpHooks::GatherVocabShards(Tensor blocks, Tensor full) {
  return c_->AllGatherColumns(blocks, full);
}

absl::Status GroupTpHooks::ExchangeBestPicks(backend::Backend& be, Tensor shard, Tensor banned,
                                             int64_t id_begin, Tensor scratch, Tensor picks) {
  // Each rank's winners (value, id) go to its block of [world, rows, 2], gathered side by side
  // into [rows, 2 * world].
  const int64_t world = c_->world_size(), rows = shard.dim(0);
  if (scratch.numel() < world * rows * 2 || picks.dim(0) != rows || picks.dim(1) != 2 * world) {
    return InvalidArgumentError("tensor parallel: best picks of {} rows over {} ranks", rows,
                                world);
  }
  float* blocks = static_cast<float*>(scratch.data);
  Tensor mine = Tensor::Make(blocks + c_->rank() * rows * 2, DType::kF32, {rows, 2});
  GANNET_RETURN_IF_ERROR(be.ShardArgmax(shard, banned, id_begin, mine));
  return c_->AllGatherColumns(Tensor::Make(blocks, DType::kF32, {world, rows, 2}), picks);
}

absl::Status GroupTpHooks::ReadBestPicks(backend::Backend& be, Tensor picks,
                                         std::span<int32_t> out) {
  const int world = c_->world_size();
  std::vector<float> host(out.size() * 2 * world);
  GANNET_RETURN_IF_ERROR(be.CopyToHost(host.data(), picks.data, host.size() * sizeof(float)));
  for (size_t r = 0; r < out.size(); ++r) {
    // The best of the ranks' winners; equal values go to the lower rank (its ids are lower), so
    // the token is the full row's arg-max with ties to the lowest id, as Sample picks it.
    const float* p = host.data() + r * 2 * world;
    int best = 0;
    for (int k = 1; k < world; ++k) {
      if (p[2 * k] > p[2 * best]) best = k;
    }
    std::memcpy(&out[r], &p[2 * best + 1], sizeof(int32_t));
  }
  return absl::OkStatus();
}

}  // namespace gannet::parallel
