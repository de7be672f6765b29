// The arithmetic of the CUDA linear layers' tuning (host code only: runs without a GPU): which M a
// plan is tuned for, against the runner's decode batch buckets, and which timed algo it keeps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cuda/linear_tuning.h"
#include "lib/runner/graph_cache.h"

namespace gannet::backend {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LinearPlanRowsTest, CoversAndIsStable) {
  for (int m = 1; m <= 70000; ++m) {
    const int rows = LinearPlanRows(m);
    ASSERT_GE(rows, m) << m;
    ASSERT_EQ(LinearPlanRows(rows), rows) << m;  // a bucket's own M is tuned for itself
    if (m <= 16) {
      ASSERT_EQ(rows, m);
    }
    if (m > 128) {
      ASSERT_EQ(rows & (rows - 1), 0) << m;  // prefill chunks: powers of two
    }
  }
  EXPECT_EQ(LinearPlanRows(17), 24);
  EXPECT_EQ(LinearPlanRows(65), 80);
  EXPECT_EQ(LinearPlanRows(129), 256);
}

// Each graphed decode batch up to 128 sequences (one row each) gets a plan timed at its own M, so
// a step of 80 rows does not run what was timed for 65, 96 or 128.
TEST(LinearPlanRowsTest, EveryDecodeBatchBucketIsItsOwnPlan) {
  for (int seqs = 1; seqs <= 128; ++seqs) {
    const int bucket = runner::BatchBucket(seqs, 128);
    EXPECT_EQ(LinearPlanRows(bucket), bucket) << seqs;
  }
}

// The warm-up's list (Backend::LinearTuningRows): one M per key, every key up to max_rows met once.
TEST(LinearPlanKeysTest, OneRowCountPerKeyUpToTheLimit) {
  for (int max_rows : {1, 5, 16, 17, 100, 128, 300, 2048, 2000, 8192}) {
    const std::vector<int> keys = LinearPlanKeys(max_rows);
    std::vector<int> seen;  // the keys of the listed M, in order
    for (const int m : keys) {
      ASSERT_GE(m, 1);
      ASSERT_LE(m, max_rows);
      seen.push_back(LinearPlanRows(m));
    }
    for (size_t i = 1; i < seen.size(); ++i) ASSERT_LT(seen[i - 1], seen[i]) << max_rows;
    for (int m = 1; m <= max_rows; ++m) {  // every M's key is among them
      ASSERT_NE(std::find(seen.begin(), seen.end(), LinearPlanRows(m)), seen.end()) << m;
    }
  }
  EXPECT_EQ(LinearPlanKeys(20),
            (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20}));
  EXPECT_EQ(LinearPlanKeys(2000).back(), 2000);  // key 2048, met at the largest M there is
}

TEST(TimesCublasLtVariantsTest, DecodeBatchesAboveTheGemvOnly) {
  for (int m : {1, 2, 8}) EXPECT_FALSE(TimesCublasLtVariants(m, 8)) << m;
  for (int m : {9, 16, 64, 80, 128}) EXPECT_TRUE(TimesCublasLtVariants(m, 8)) << m;
  for (int m : {256, 2048}) EXPECT_FALSE(TimesCublasLtVariants(m, 8)) << m;
  EXPECT_TRUE(TimesCublasLtVariants(4, 2));
}

TEST(MedianMsTest, MiddleRoundIgnoresOutliers) {
  EXPECT_EQ(MedianMs({}), kInf);
  EXPECT_EQ(MedianMs({0.03f}), 0.03f);
  // A run that waited on the host (hundreds of us) does not move the median.
  EXPECT_EQ(MedianMs({0.035f, 0.700f, 0.036f, 0.034f, 0.650f, 0.035f, 0.036f}), 0.036f);
}

TEST(PickAlgoTest, FirstPickStandsUnlessClearlyBeaten) {
  EXPECT_EQ(PickAlgo({}, 0.03f), -1);
  EXPECT_EQ(PickAlgo({kInf, kInf}, 0.03f), -1);
  EXPECT_EQ(PickAlgo({0.100f}, 0.03f), 0);
  // Within the margin of the heuristic's first pick: keep it.
  EXPECT_EQ(PickAlgo({0.100f, 0.098f, 0.0975f}, 0.03f), 0);
  // Beyond it: the later algo, and the margin is then taken against the new pick.
  EXPECT_EQ(PickAlgo({0.100f, 0.090f, 0.089f, 0.080f}, 0.03f), 3);
  EXPECT_EQ(PickAlgo({0.100f, 0.090f, 0.089f}, 0.03f), 1);
  // Algos that did not run are skipped, also in first place.
  EXPECT_EQ(PickAlgo({kInf, 0.050f, 0.049f}, 0.03f), 1);
  // No margin: the fastest, the earlier one on a tie.
  EXPECT_EQ(PickAlgo({0.100f, 0.098f, 0.098f}, 0.f), 1);
}

// The GEMV's tiles are timed at M = 1 only (LaunchGemv runs the deep tiles at M = 1 only), every
// one of them unless GANNET_GEMV_TILE pins one, which is clamped to a real tile.
TEST(GemvTilesToTimeTest, EveryTileAtOneRowOnlyTheFourRowTileAbove) {
  constexpr int kTiles = 4;
  auto range = [](int m, int forced) {
    const GemvTileRange r = GemvTilesToTime(m, forced, kTiles);
    return std::pair{r.first, r.count};
  };
  EXPECT_EQ(range(1, -1), (std::pair{0, kTiles}));
  for (int m : {2, 3, 4, 8}) {
    EXPECT_EQ(range(m, -1), (std::pair{0, 1})) << m;
    EXPECT_EQ(range(m, 2), (std::pair{0, 1})) << m;  // a pinned tile does not reach M > 1
  }
  EXPECT_EQ(range(1, 0), (std::pair{0, 1}));
  EXPECT_EQ(range(1, 2), (std::pair{2, 1}));
  EXPECT_EQ(range(1, 9), (std::pair{kTiles - 1, 1}));
  EXPECT_EQ(GemvTilesToTime(1, -1, 1).count, 1);  // a kernel with one tile
}

}  // namespace
}  // namespace gannet::backend
