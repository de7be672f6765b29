// NextWeightHints (host code only: runs without a GPU): which weight a GEMV pulls into L2 for the
// layer after it, learned from the order earlier steps read the weights.
#include "lib/backend/cuda/next_weight.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace gannet::backend {
namespace {

// Fake weights: only their addresses and sizes matter.
struct Weights {
  char storage[4][16] = {};
  const void* at(int i) const { return storage[i]; }
};

// One step over a, b, c, d (sizes 100, 2000, 300, 4000) reads nothing back; from the second step
// on each names the next, capped, and the step's last names the next step's first.
TEST(NextWeightHintsTest, NamesTheWeightThatFollowedLastTime) {
  Weights w;
  const size_t bytes[4] = {100, 2000, 300, 4000};
  NextWeightHints hints(1024);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(hints.Observe(w.at(i), bytes[i], 0).bytes, 0u) << i;
  for (int step = 0; step < 2; ++step) {
    for (int i = 0; i < 4; ++i) {
      const NextWeightHints::Region r = hints.Observe(w.at(i), bytes[i], 0);
      const int next = (i + 1) % 4;
      EXPECT_EQ(r.data, w.at(next)) << "step " << step << " weight " << i;
      EXPECT_EQ(r.bytes, std::min<size_t>(bytes[next], 1024)) << "step " << step << " weight " << i;
    }
  }
}

// A changed order is learned by the next call; a layer read twice in a row is not its own
// successor.
TEST(NextWeightHintsTest, FollowsAChangedOrderAndSkipsRepeats) {
  Weights w;
  NextWeightHints hints(1 << 20);
  hints.Observe(w.at(0), 10, 0);
  hints.Observe(w.at(1), 20, 0);
  EXPECT_EQ(hints.Observe(w.at(0), 10, 0).data, w.at(1));
  hints.Observe(w.at(2), 30, 0);  // 0 is now followed by 2
  EXPECT_EQ(hints.Observe(w.at(0), 10, 0).data, w.at(2));
  EXPECT_EQ(hints.Observe(w.at(0), 10, 0).data, w.at(2));  // a repeat changes nothing
  EXPECT_EQ(hints.Observe(w.at(3), 40, 0).bytes, 0u);      // never read before: no successor known
  EXPECT_EQ(hints.Observe(w.at(0), 10, 0).data, w.at(3));
  EXPECT_EQ(hints.Observe(w.at(3), 40, 0).data, w.at(0));
}

// A freed buffer (the backend's count moves) forgets everything learned: no hint may name memory
// that is gone. A cap of 0 never hints.
TEST(NextWeightHintsTest, ForgetsWhenBuffersAreFreedAndHintsNothingAtCapZero) {
  Weights w;
  NextWeightHints hints(64);
  for (int round = 0; round < 2; ++round) {
    hints.Observe(w.at(0), 10, 0);
    hints.Observe(w.at(1), 20, 0);
  }
  EXPECT_EQ(hints.Observe(w.at(0), 10, 0).data, w.at(1));
  EXPECT_EQ(hints.Observe(w.at(1), 20, 1).bytes, 0u);      // 1 -> 0 was learned before the free
  EXPECT_EQ(hints.Observe(w.at(0), 10, 1).bytes, 0u);      // and 0 -> 1
  EXPECT_EQ(hints.Observe(w.at(1), 20, 1).data, w.at(0));  // relearned since
  EXPECT_EQ(hints.Observe(w.at(0), 10, 1).data, w.at(1));

  NextWeightHints off(0);
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(off.Observe(w.at(0), 10, 0).bytes, 0u);
    EXPECT_EQ(off.Observe(w.at(1), 20, 0).bytes, 0u);
  }
}

}  // namespace
}  // namespace gannet::backend
