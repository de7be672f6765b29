// Threads against the C ABI: many submitters and one poller, cancel storms, destroy with requests
// in flight. Run under ThreadSanitizer in CI.
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"

namespace gannet::testing {
namespace {

TEST(CapiConcurrencyTest, EightSubmittersOnePoller) {
  gannet_engine_t* engine = CreateTinyEngine("e2b", [](gannet_engine_config_t* c) {
    c->max_running_seqs = 32;
    c->max_step_tokens = 256;
  });
  ASSERT_NE(engine, nullptr);
  const int kThreads = 8, kPerThread = Scaled(100, 10);
  std::mutex mu;
  std::set<uint64_t> ids;
  std::atomic<int> submitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::vector<int32_t> p = MakePrompt(t * 1000 + i, 2 + i % 6);
        gannet_request_t r = GreedyRequest(p, 1 + i % 3);
        uint64_t id;
        ASSERT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_OK) << gannet_last_error_message();
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
        ++submitted;
      }
    });
  }
  // The poller runs concurrently with the submitters.
  std::map<uint64_t, int> terminal;
  std::map<uint64_t, int> tokens;
  while (static_cast<int>(terminal.size()) < kThreads * kPerThread) {
    const gannet_event_t* const* ev;
    size_t n;
    ASSERT_EQ(gannet_engine_poll(engine, 200, 64, &ev, &n), GANNET_OK);
    for (size_t i = 0; i < n; ++i) {
      if (ev[i]->type == GANNET_EVENT_TOKEN) {
        EXPECT_EQ(terminal.count(ev[i]->request_id), 0u);
        ++tokens[ev[i]->request_id];
      } else {
        EXPECT_EQ(ev[i]->status, GANNET_OK) << ev[i]->message;
        EXPECT_EQ(++terminal[ev[i]->request_id], 1);
        EXPECT_EQ(ev[i]->num_generated_tokens, tokens[ev[i]->request_id]);
      }
    }
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(submitted.load(), kThreads * kPerThread);
  for (uint64_t id : ids) EXPECT_EQ(terminal[id], 1);
  gannet_engine_destroy(engine);
}

TEST(CapiConcurrencyTest, CancelStorm) {
  gannet_engine_t* engine = CreateTinyEngine("31b");
  ASSERT_NE(engine, nullptr);
  const int kRequests = Scaled(200, 20), kTokens = Scaled(40, 10);
  std::vector<uint64_t> ids;
  std::mutex mu;
  std::atomic<bool> done{false};
  std::thread submitter([&] {
    for (int i = 0; i < kRequests; ++i) {
      std::vector<int32_t> p = MakePrompt(i, 3 + i % 30);
      gannet_request_t r = GreedyRequest(p, kTokens);
      r.ignore_default_stop_tokens = 1;
      uint64_t id;
      ASSERT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_OK);
      std::lock_guard<std::mutex> lock(mu);
      ids.push_back(id);
    }
    done = true;
  });
  std::thread canceller([&] {
    std::mt19937 rng(3);
    while (!done || rng() % 4) {
      uint64_t victim = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (ids.empty()) continue;
        victim = ids[rng() % ids.size()];
      }
      gannet_status_t st = gannet_engine_cancel(engine, victim);
      // Cancelling twice or after the end is NOT_FOUND, never anything else.
      EXPECT_TRUE(st == GANNET_OK || st == GANNET_ERR_NOT_FOUND) << gannet_status_string(st);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
      if (done && ids.size() >= static_cast<size_t>(kRequests) && rng() % 50 == 0) break;
    }
  });
  submitter.join();
  canceller.join();
  std::set<uint64_t> all(ids.begin(), ids.end());
  auto out = WaitAll(engine, all, 300);
  int cancelled = 0;
  for (uint64_t id : all) {
    const Outcome& o = out[id];
    EXPECT_EQ(o.terminal_events, 1) << id;
    EXPECT_EQ(o.status, GANNET_OK) << o.message;
    if (o.finish == GANNET_FINISH_CANCELLED) {
      ++cancelled;
      EXPECT_LE(o.tokens.size(), static_cast<size_t>(kTokens));
    } else {
      EXPECT_EQ(o.tokens.size(), static_cast<size_t>(kTokens));
    }
  }
  EXPECT_GT(cancelled, 0);
  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  ASSERT_EQ(gannet_engine_get_stats(engine, &stats), GANNET_OK);
  EXPECT_EQ(stats.kv_pages_used[0] + stats.kv_pages_used[1], 0);  // cancelled pages were freed
  EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
  gannet_engine_destroy(engine);
}

TEST(CapiConcurrencyTest, DestroyWithRequestsInFlight) {
  for (int round = 0; round < 3; ++round) {
    gannet_engine_t* engine = CreateTinyEngine("26b-a4b");
    ASSERT_NE(engine, nullptr);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < Scaled(50, 10); ++i) prompts.push_back(MakePrompt(i, 20));
    std::thread submitter([&] {
      for (auto& p : prompts) {
        gannet_request_t r = GreedyRequest(p, 100);
        uint64_t id;
        gannet_engine_submit(engine, &r, &id);
      }
    });
    submitter.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * round));
    gannet_engine_destroy(engine);  // must return promptly, free everything, not crash
  }
}

}  // namespace
}  // namespace gannet::testing
