// parallel::GroupTpHooks on a group of CPU-backend ranks (threads): the best-pick exchange gives
// each row the arg-max of the whole (concatenated) vocabulary row, ties to the lowest id, for the
// runner and the drafter alike; the vocabulary shards gather into full rows in rank order.
#include "lib/parallel/group_tp_hooks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "lib/backend/cpu/cpu_backend.h"
#include "lib/parallel/host_collectives.h"

namespace gannet::parallel {
namespace {

using backend::Tensor;

constexpr int kWorld = 2, kRows = 4, kCols = 3;

// Full rows [kRows, kWorld * kCols]: rank r holds columns r * kCols .. (r + 1) * kCols - 1.
const float kFull[kRows][kWorld * kCols] = {
    {0.f, 1.f, 5.f, 2.f, 5.f, 3.f},        // tie across ranks: the lower id (2) wins
    {0.f, 1.f, 2.f, 3.f, 9.f, 9.f},        // tie inside rank 1: id 4
    {-7.f, -1.f, -3.f, -2.f, -4.f, -9.f},  // all negative: id 1
    {1.f, 1.f, 1.f, 1.f, 1.f, 1.f},        // all equal: id 0
};
const int32_t kArgmax[kRows] = {2, 4, 1, 0};

struct RankOut {
  absl::Status status;
  std::vector<int32_t> tokens;
  std::vector<float> full;
};

RankOut RunRank(HostGroup* group, int rank, bool small_scratch) {
  RankOut out;
  backend::CpuBackend be;
  std::unique_ptr<backend::Collectives> c = group->Rank(rank);
  GroupTpHooks tp(c.get());
  auto alloc = [&](int64_t n) { return be.Allocate(static_cast<size_t>(n) * sizeof(float)); };
  auto blocks_buf = alloc(kWorld * kRows * kCols), full_buf = alloc(kRows * kWorld * kCols),
       scratch_buf = alloc(kWorld * kRows * 2), picks_buf = alloc(kRows * 2 * kWorld);
  if (!blocks_buf.ok() || !full_buf.ok() || !scratch_buf.ok() || !picks_buf.ok()) {
    out.status = absl::InternalError("allocate");
    return out;
  }
  const Tensor blocks = blocks_buf->View(DType::kF32, {kWorld, kRows, kCols});
  const Tensor full = full_buf->View(DType::kF32, {kRows, kWorld * kCols});
  const Tensor scratch = scratch_buf->View(DType::kF32, {kWorld * (small_scratch ? 1 : kRows), 2});
  const Tensor picks = picks_buf->View(DType::kF32, {kRows, 2 * kWorld});
  std::vector<float> mine(kRows * kCols);
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kCols; ++j) mine[r * kCols + j] = kFull[r][rank * kCols + j];
  }
  const Tensor shard = Tensor::Make(static_cast<float*>(blocks.data) + rank * kRows * kCols,
                                    DType::kF32, {kRows, kCols});
  out.status = be.CopyToDevice(shard.data, mine.data(), mine.size() * sizeof(float));
  if (!out.status.ok()) return out;
  out.status = tp.ExchangeBestPicks(be, shard, Tensor(), rank * kCols, scratch, picks);
  if (!out.status.ok()) return out;
  out.tokens.resize(kRows);
  out.status = tp.ReadBestPicks(be, picks, out.tokens);
  if (!out.status.ok()) return out;
  out.status = tp.GatherVocabShards(blocks, full);
  if (!out.status.ok()) return out;
  out.full.resize(kRows * kWorld * kCols);
  out.status = be.CopyToHost(out.full.data(), full.data, out.full.size() * sizeof(float));
  return out;
}

std::vector<RankOut> RunGroup(bool small_scratch) {
  HostGroup group(kWorld);
  std::vector<RankOut> outs(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] { outs[r] = RunRank(&group, r, small_scratch); });
  }
  for (std::thread& t : threads) t.join();
  return outs;
}

TEST(GroupTpHooks, BestPicksAreTheFullRowsArgmaxAndShardsGatherInRankOrder) {
  std::vector<RankOut> outs = RunGroup(/*small_scratch=*/false);
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(outs[rank].status.ok()) << outs[rank].status;
    for (int r = 0; r < kRows; ++r) EXPECT_EQ(outs[rank].tokens[r], kArgmax[r]) << rank << " " << r;
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kWorld * kCols; ++j) {
        EXPECT_EQ(outs[rank].full[r * kWorld * kCols + j], kFull[r][j]) << rank << " " << r;
      }
    }
  }
}

TEST(GroupTpHooks, RejectsScratchTooSmallForTheRanksBlocks) {
  // Every rank fails the same check before any collective, so none waits on another.
  for (const RankOut& out : RunGroup(/*small_scratch=*/true)) {
    EXPECT_TRUE(absl::IsInvalidArgument(out.status)) << out.status;
  }
}

}  // namespace
}  // namespace gannet::parallel
