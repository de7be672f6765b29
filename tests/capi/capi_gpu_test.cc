// The engine on the CUDA backend, through the C ABI (ctest label `gpu`; skipped without a GPU):
// concurrent greedy requests give the CPU backend's tokens with decode graphs on and off, and
// the real-size "dummy" load format serves requests.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/capi/capi_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {
namespace {

gannet_engine_t* CudaEngine(const std::string& model, bool graphs) {
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  c.model_dir = model.c_str();
  c.backend = "cuda";
  c.max_model_len = 256;
  c.kv_memory_bytes = int64_t{1} << 30;
  c.max_running_seqs = 16;
  c.disable_cuda_graphs = graphs ? 0 : 1;
  gannet_engine_t* e = nullptr;
  return gannet_engine_create(&c, &e) == GANNET_OK ? e : nullptr;
}

std::vector<std::vector<int32_t>> RunBatch(gannet_engine_t* engine, int n, int tokens) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(MakePrompt(300 + i, 3 + (i * 7) % 40));
  std::set<uint64_t> ids;
  std::vector<uint64_t> order;
  for (auto& p : prompts) {
    gannet_request_t r = GreedyRequest(p, tokens);
    r.ignore_default_stop_tokens = 1;
    uint64_t id;
    EXPECT_EQ(gannet_engine_submit(engine, &r, &id), GANNET_OK) << gannet_last_error_message();
    ids.insert(id);
    order.push_back(id);
  }
  auto out = WaitAll(engine, ids);
  std::vector<std::vector<int32_t>> tokens_out;
  for (uint64_t id : order) {
    EXPECT_EQ(out[id].status, GANNET_OK) << out[id].message;
    tokens_out.push_back(out[id].tokens);
  }
  return tokens_out;
}

class CapiGpuTest : public ::testing::TestWithParam<std::string> {};

// 31B and 26B-A4B: bf16 GPU greedy tokens equal the fp32 CPU backend's for these prompts (their
// top-2 logit gaps are far above bf16 noise; E2B/E4B tiny models have near-ties, see
// tests/backend/cuda_runner_test.cc).
TEST_P(CapiGpuTest, GreedyMatchesCpuWithAndWithoutGraphs) {
  const std::string dir = TinyModelDir(GetParam());
  gannet_engine_t* gpu = CudaEngine(dir, /*graphs=*/true);
  if (gpu == nullptr) GTEST_SKIP() << "no usable CUDA backend: " << gannet_last_error_message();
  auto with_graphs = RunBatch(gpu, 16, 16);
  auto again = RunBatch(gpu, 16, 16);  // second pass replays the recorded graphs
  gannet_engine_destroy(gpu);
  gannet_engine_t* eager = CudaEngine(dir, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  auto without = RunBatch(eager, 16, 16);
  gannet_engine_destroy(eager);
  gannet_engine_t* cpu = CreateTinyEngine(GetParam(), [](gannet_engine_config_t* c) {
    c->max_running_seqs = 16;
  });
  auto reference = RunBatch(cpu, 16, 16);
  gannet_engine_destroy(cpu);
  EXPECT_EQ(with_graphs, again);
  EXPECT_EQ(with_graphs, without);
  EXPECT_EQ(with_graphs, reference);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CapiGpuTest, ::testing::Values("31b", "26b-a4b"),
                         [](const auto& info) {
                           return info.param == "31b" ? std::string("d31b") : std::string("moe26b");
                         });

TEST(CapiGpuDummyTest, RealSizeDummyModelServes) {
  gannet_engine_config_t c = GANNET_ENGINE_CONFIG_INIT;
  c.model_dir = "dummy:e2b";
  c.backend = "cuda";
  c.max_model_len = 1024;
  c.kv_memory_bytes = int64_t{2} << 30;
  gannet_engine_t* e = nullptr;
  if (gannet_engine_create(&c, &e) != GANNET_OK) {
    GTEST_SKIP() << "no usable CUDA backend: " << gannet_last_error_message();
  }
  std::vector<int32_t> p = MakePrompt(1, 300, 262144);
  gannet_request_t r = GreedyRequest(p, 8);
  r.ignore_default_stop_tokens = 1;
  Outcome o = RunAlone(e, r);
  EXPECT_EQ(o.status, GANNET_OK) << o.message;
  EXPECT_EQ(o.tokens.size(), 8u);
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  ASSERT_EQ(gannet_engine_get_stats(e, &s), GANNET_OK);
  EXPECT_GT(s.weight_bytes, int64_t{9} << 30);  // E2B's real geometry, ~10 GB of bf16
  gannet_engine_destroy(e);
}

}  // namespace
}  // namespace gannet::testing
