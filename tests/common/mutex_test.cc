#include "lib/common/mutex.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace gannet {
namespace {

struct Flag {
  Mutex mu;
  CondVar cv;
  bool set ABSL_GUARDED_BY(mu) = false;
  int wakeups ABSL_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, WaitReturnsHoldingTheMutexOnceThePredicateHolds) {
  Flag f;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    MutexLock lock(&f.mu);
    f.set = true;
    f.cv.NotifyAll();
  });
  {
    MutexLock lock(&f.mu);
    f.cv.Wait(f.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f.mu) {
      ++f.wakeups;
      return f.set;
    });
    EXPECT_TRUE(f.set);
    EXPECT_GE(f.wakeups, 1);
  }
  setter.join();
  // The waiter handed the mutex back: it can be taken again.
  MutexLock lock(&f.mu);
  EXPECT_TRUE(f.set);
}

TEST(MutexTest, WaitForReportsATimeoutAndKeepsTheMutex) {
  Flag f;
  MutexLock lock(&f.mu);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(f.cv.WaitFor(f.mu, std::chrono::milliseconds(30),
                            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f.mu) { return f.set; }));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(30));
  f.set = true;  // still held after the timeout
  EXPECT_TRUE(f.cv.WaitFor(f.mu, std::chrono::seconds(10),
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f.mu) { return f.set; }));
}

TEST(MutexTest, MutexLockUnlocksAndRelocksInsideItsScope) {
  Flag f;
  MutexLock lock(&f.mu);
  f.set = true;
  lock.Unlock();
  // Another thread can take it while this scope has released it.
  std::thread other([&] {
    MutexLock inner(&f.mu);
    f.wakeups = 7;
  });
  other.join();
  lock.Lock();
  EXPECT_EQ(f.wakeups, 7);
}

}  // namespace
}  // namespace gannet
