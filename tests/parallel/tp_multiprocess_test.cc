// Tensor parallelism with one process per GPU, through the C ABI only (label multigpu; skips below
// two devices). The test process is rank 0; rank 1 is this binary run again (fork + exec, so the
// child starts without the parent's CUDA state) in worker mode, given the group id in its
// environment: it creates its engine with tp_rank 1 and serves until rank 0 ends the group.
//  - two processes give the tokens of the same two GPUs driven by one process;
//  - a rank killed mid-run makes rank 0's requests end in GANNET_ERR_DEVICE_LOST within the group
//    timeout, and rank 0's engine is destroyed without hanging;
//  - both again with speculative decoding (every process given the tiny 31B's assistant: each
//    rank drafts with its shard, rank 0's rounds reach rank 1 as kDraft messages).
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

constexpr const char* kChildEnv = "GANNET_TP_TEST_CHILD_ID";
constexpr const char* kChildDraftEnv = "GANNET_TP_TEST_CHILD_DRAFT";  // "1": rank 1 drafts too

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string Hex(const gannet_tp_id_t& id) {
  std::string s;
  char b[3];
  for (uint8_t v : id.bytes) {
    std::snprintf(b, sizeof b, "%02x", v);
    s += b;
  }
  return s;
}

bool FromHex(const char* hex, gannet_tp_id_t* id) {
  if (std::string(hex).size() != 2 * sizeof id->bytes) return false;
  for (size_t i = 0; i < sizeof id->bytes; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
    id->bytes[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// `draft`: the assistant's folder (kept alive by the caller), or empty.
gannet_engine_config_t RankConfig(const std::string& model, int rank, const gannet_tp_id_t* id,
                                  const std::string& draft = "") {
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  c.model_dir = model.c_str();
  if (!draft.empty()) c.draft_model_dir = draft.c_str();
  c.backend = "cuda";
  c.device_id = rank;
  c.max_model_len = 512;
  c.tensor_parallel_size = 2;
  c.tp_rank = rank;
  c.tp_id = id;
  return c;
}

// Rank 1's process: only when started by a test below.
TEST(TpMultiProcessTest, WorkerRank) {
  const char* hex = std::getenv(kChildEnv);
  if (hex == nullptr) GTEST_SKIP() << "runs only as rank 1 of the tests below";
  gannet_tp_id_t id;
  if (!FromHex(hex, &id)) std::_Exit(3);
  const std::string model = testing::TinyModelDir("31b");
  const char* drafts = std::getenv(kChildDraftEnv);
  const std::string draft =
      drafts != nullptr && std::string(drafts) == "1" ? testing::TinyModelDir("31b-assistant") : "";
  gannet_engine_config_t c = RankConfig(model, 1, &id, draft);
  gannet_engine_t* e = nullptr;
  if (gannet_engine_create(&c, &e) != GANNET_OK) {
    std::fprintf(stderr, "rank 1: %s\n", gannet_last_error_message());
    std::_Exit(4);
  }
  const gannet_status_t st = gannet_engine_serve(e, -1);
  gannet_engine_destroy(e);
  std::_Exit(st == GANNET_OK ? 0 : 10 + st);
}

pid_t SpawnRank1(const gannet_tp_id_t& id, bool drafts = false) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv(kChildEnv, Hex(id).c_str(), 1);
    setenv(kChildDraftEnv, drafts ? "1" : "0", 1);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) std::_Exit(2);
    self[n] = 0;
    execl(self, self, "--gtest_filter=TpMultiProcessTest.WorkerRank", nullptr);
    std::_Exit(2);
  }
  return pid;
}

std::vector<int32_t> Generate(gannet_engine_t* e, int tokens) {
  const std::vector<int32_t> prompt = testing::MakePrompt(7, 40);
  gannet_request_t r = testing::GreedyRequest(prompt, tokens);
  testing::Outcome o = testing::RunAlone(e, r);
  EXPECT_EQ(o.status, GANNET_OK) << o.message;
  return o.tokens;
}

TEST(TpMultiProcessTest, TwoProcessesGiveTheTokensOfOne) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs";
  setenv("GANNET_ALLREDUCE", "nccl", 1);  // the same reduction in both modes
  const std::string model = testing::TinyModelDir("31b");
  std::vector<int32_t> one;
  {
    gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
    c.model_dir = model.c_str();
    c.backend = "cuda";
    c.max_model_len = 512;
    c.tensor_parallel_size = 2;
    gannet_engine_t* e = nullptr;
    ASSERT_EQ(gannet_engine_create(&c, &e), GANNET_OK) << gannet_last_error_message();
    one = Generate(e, 32);
    gannet_engine_destroy(e);
  }
  gannet_tp_id_t id;
  ASSERT_EQ(gannet_tp_create_id(&id), GANNET_OK) << gannet_last_error_message();
  const pid_t child = SpawnRank1(id);
  ASSERT_GT(child, 0);
  gannet_engine_config_t c = RankConfig(model, 0, &id);
  gannet_engine_t* e = nullptr;
  ASSERT_EQ(gannet_engine_create(&c, &e), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(Generate(e, 32), one);
  gannet_engine_destroy(e);  // ends the group: rank 1's serve returns OK
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 exit " << status;
  unsetenv("GANNET_ALLREDUCE");
}

TEST(TpMultiProcessTest, TwoProcessesWithDraftsGiveTheTokensOfOne) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs";
  setenv("GANNET_ALLREDUCE", "nccl", 1);  // the same reduction in both modes
  const std::string model = testing::TinyModelDir("31b");
  const std::string draft = testing::TinyModelDir("31b-assistant");
  std::vector<int32_t> one;
  {
    gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
    c.model_dir = model.c_str();
    c.draft_model_dir = draft.c_str();
    c.backend = "cuda";
    c.max_model_len = 512;
    c.tensor_parallel_size = 2;
    gannet_engine_t* e = nullptr;
    ASSERT_EQ(gannet_engine_create(&c, &e), GANNET_OK) << gannet_last_error_message();
    one = Generate(e, 32);
    gannet_engine_destroy(e);
  }
  gannet_tp_id_t id;
  ASSERT_EQ(gannet_tp_create_id(&id), GANNET_OK) << gannet_last_error_message();
  const pid_t child = SpawnRank1(id, /*drafts=*/true);
  ASSERT_GT(child, 0);
  gannet_engine_config_t c = RankConfig(model, 0, &id, draft);
  gannet_engine_t* e = nullptr;
  ASSERT_EQ(gannet_engine_create(&c, &e), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(Generate(e, 32), one);
  gannet_engine_destroy(e);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 exit " << status;
  unsetenv("GANNET_ALLREDUCE");
}

// Rank 1 killed while rank 0 serves a long request (with drafts: mid-step or mid-round).
void KillRankOne(bool drafts) {
  setenv("GANNET_TP_TIMEOUT_S", "5", 1);  // inherited by rank 1
  const std::string model = testing::TinyModelDir("31b");
  const std::string draft = drafts ? testing::TinyModelDir("31b-assistant") : "";
  gannet_tp_id_t id;
  ASSERT_EQ(gannet_tp_create_id(&id), GANNET_OK) << gannet_last_error_message();
  const pid_t child = SpawnRank1(id, drafts);
  gannet_engine_config_t c = RankConfig(model, 0, &id, draft);
  gannet_engine_t* e = nullptr;
  ASSERT_EQ(gannet_engine_create(&c, &e), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(Generate(e, 4).size(), 4u);  // the group serves
  const std::vector<int32_t> prompt = testing::MakePrompt(9, 20);
  gannet_request_t r = testing::GreedyRequest(prompt, 400);
  uint64_t rid = 0;
  ASSERT_EQ(gannet_engine_submit(e, &r, &rid), GANNET_OK);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto outcomes = testing::WaitAll(e, {rid}, 60);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(outcomes.count(rid), 1u);
  const testing::Outcome& o = outcomes[rid];
  // Either it finished before the kill landed, or it ended in device lost, in bounded time.
  if (o.finish != GANNET_FINISH_LENGTH) {
    EXPECT_EQ(o.status, GANNET_ERR_DEVICE_LOST) << o.message;
  }
  EXPECT_LT(s, 30.0);
  uint64_t next = 0;
  const std::vector<int32_t> prompt2 = testing::MakePrompt(3, 8);
  gannet_request_t r2 = testing::GreedyRequest(prompt2, 4);
  const gannet_status_t st = gannet_engine_submit(e, &r2, &next);
  if (st == GANNET_OK) {
    auto later = testing::WaitAll(e, {next}, 60);
    EXPECT_EQ(later[next].status, GANNET_ERR_DEVICE_LOST) << later[next].message;
  } else {
    EXPECT_EQ(st, GANNET_ERR_DEVICE_LOST);
  }
  gannet_engine_destroy(e);  // must return
  unsetenv("GANNET_TP_TIMEOUT_S");
}

TEST(TpMultiProcessTest, AKilledRankEndsInDeviceLost) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs";
  KillRankOne(false);
}

TEST(TpMultiProcessTest, AKilledRankEndsInDeviceLostWithDrafts) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs";
  KillRankOne(true);
}

}  // namespace
}  // namespace gannet
