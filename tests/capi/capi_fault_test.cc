// A device lost in the middle of serving (issue 56), through the test-only hook
// GANNET_FAULT_INJECT_STEP (lib/backend/fault_injection_backend.h): every request in flight,
// running or waiting, ends with exactly one DEVICE_LOST event; later submits fail with
// DEVICE_LOST; poll, stats and destroy return promptly (never a hang).
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

// Creates an engine whose `step`-th device span fails as a lost device.
gannet_engine_t* EngineFailingAt(const char* step, gannet_status_t* status = nullptr) {
  ::setenv("GANNET_FAULT_INJECT_STEP", step, 1);
  const std::string dir = TinyModelDir("e2b");
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  c.model_dir = dir.c_str();
  c.backend = "cpu";
  c.num_threads = 2;
  c.max_model_len = 128;
  c.max_running_seqs = 4;
  gannet_engine_t* engine = nullptr;
  const gannet_status_t st = gannet_engine_create(&c, &engine);
  ::unsetenv("GANNET_FAULT_INJECT_STEP");
  if (status != nullptr) *status = st;
  return st == GANNET_OK ? engine : nullptr;
}

TEST(CapiFaultTest, ADeviceLostMidStepEndsEveryRequestInFlight) {
  gannet_engine_t* engine = EngineFailingAt("6");
  ASSERT_NE(engine, nullptr) << gannet_last_error_message();
  // 10 requests, 4 run at a time: when step 6 fails, 4 are running and 6 wait.
  std::vector<std::vector<int32_t>> prompts;
  std::set<uint64_t> ids;
  for (int i = 0; i < 10; ++i) prompts.push_back(MakePrompt(i, 3 + i));
  for (const auto& p : prompts) {
    gannet_request_t r = GreedyRequest(p, 60);
    r.ignore_default_stop_tokens = 1;
    uint64_t id;
    ASSERT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_OK);
    ids.insert(id);
  }
  const auto start = std::chrono::steady_clock::now();
  std::map<uint64_t, Outcome> out = WaitAll(engine, ids, /*timeout_s=*/60);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  ASSERT_EQ(out.size(), ids.size());
  for (uint64_t id : ids) {
    const Outcome& o = out[id];
    EXPECT_EQ(o.terminal_events, 1) << id;
    EXPECT_EQ(o.status, GANNET_ERR_DEVICE_LOST) << id << ": " << o.message;
    EXPECT_EQ(o.finish, GANNET_FINISH_ERROR) << id;
    EXPECT_LT(o.tokens.size(), 60u) << id;
  }
  // The engine is cleanly failed: submits say why, stats and poll still answer.
  std::vector<int32_t> p = MakePrompt(99, 4);
  gannet_request_t r = GreedyRequest(p, 4);
  uint64_t id;
  EXPECT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_ERR_DEVICE_LOST);
  EXPECT_NE(std::string(gannet_last_error_message()).find("injected device fault"),
            std::string::npos)
      << gannet_last_error_message();
  gannet_engine_stats_t stats = GANNET_ENGINE_STATS_INIT;
  ASSERT_EQ(gannet_engine_get_stats(engine, &stats), GANNET_OK);
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.kv_pages_used[0] + stats.kv_pages_used[1], 0);
  const gannet_event_t* const* events;
  size_t n;
  EXPECT_EQ(gannet_engine_poll(engine, 50, 16, &events, &n), GANNET_OK);
  EXPECT_EQ(n, 0u);
  const auto destroy = std::chrono::steady_clock::now();
  gannet_engine_destroy(engine);
  EXPECT_LT(std::chrono::steady_clock::now() - destroy, std::chrono::seconds(5));
}

// The hook is off unless set, and a value that is not a step count is refused, not ignored.
TEST(CapiFaultTest, AMalformedHookValueIsAnError) {
  gannet_status_t st = GANNET_OK;
  EXPECT_EQ(EngineFailingAt("soon", &st), nullptr);
  EXPECT_EQ(st, GANNET_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gannet_last_error_message()).find("GANNET_FAULT_INJECT_STEP"),
            std::string::npos);
}

}  // namespace
}  // namespace gannet::testing
