#include "lib/common/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace gannet {
namespace {

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {1, 7, 100, 10007}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 80);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialized) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        pool.ParallelFor(64, 4, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 64);
}

}  // namespace
}  // namespace gannet
