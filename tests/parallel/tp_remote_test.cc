// The multi-process protocol of tensor parallelism (rank 0's TpRunner sends every call through a
// StepChannel; TpWorkers run them on their shards) with the ranks as threads on CPU backends and
// the host channel: the same tokens and logits as one device, a clean end when rank 0 goes, and
// device-lost (never a hang) when a rank vanishes. The NCCL channel between processes is the same
// protocol over broadcasts (tp_multiprocess_test, label multigpu).
#include <cstdlib>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/status.h"
#include "lib/parallel/host_collectives.h"
#include "lib/parallel/step_message.h"
#include "lib/parallel/tp_worker.h"
#include "tests/parallel/tp_test_util.h"

namespace gannet {
namespace {

constexpr int kPage = 16;

struct RemoteGroup {
  std::shared_ptr<parallel::HostGroup> group;
  std::vector<std::unique_ptr<backend::Backend>> backends;
  std::vector<std::unique_ptr<parallel::TpWorker>> workers;  // ranks 1..
  std::unique_ptr<parallel::TpRunner> runner;                // rank 0
};

std::unique_ptr<RemoteGroup> MakeRemoteGroup(const testing::LoadedModel& m, int world) {
  auto g = std::make_unique<RemoteGroup>();
  g->group = std::make_shared<parallel::HostGroup>(world);
  for (int r = 0; r < world; ++r) g->backends.push_back(std::make_unique<backend::CpuBackend>());
  for (int r = 1; r < world; ++r) {
    g->workers.push_back(parallel::TpWorker::Start(m.config, m.weights, g->backends[r].get(),
                                                   g->group->Rank(r), g->group->Channel(r)));
  }
  std::vector<parallel::TpRankParts> ranks(1);
  ranks[0].backend = g->backends[0].get();
  ranks[0].collectives = g->group->Rank(0);
  runner::RunnerOptions o =
      testing::SimpleRunnerOptions(m.config, kPage, testing::kTpMaxLen, testing::kTpSeqs, 256);
  auto tp = parallel::TpRunner::Create(m.config, m.weights, std::move(ranks), g->group, o,
                                       g->group->Channel(0));
  EXPECT_TRUE(tp.ok()) << tp.status();
  if (!tp.ok()) return nullptr;
  absl::Status st = (*tp)->AttachKv(testing::SimpleKvLayout(
      (*tp)->shard_config(), *g->backends[0], kPage, testing::kTpMaxLen, testing::kTpSeqs));
  EXPECT_TRUE(st.ok()) << st;
  g->runner = std::move(*tp);
  return g;
}

class TpRemoteTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TpRemoteTest, MatchesOneDeviceAndEndsCleanly) {
  const auto& [variant, world] = GetParam();
  auto m = testing::LoadTinyModel(variant);
  ASSERT_TRUE(m.ok()) << m.status();
  const testing::TpRun ref = testing::RunOneDeviceReference(**m, 5, kPage);
  auto g = MakeRemoteGroup(**m, world);
  ASSERT_NE(g, nullptr);
  testing::ExpectSameRun(testing::RunGreedySteps(*g->runner, 5, kPage), ref,
                         static_cast<int>((*m)->config.text.vocab_size), 1e-4);
  g->runner.reset();  // rank 0 shuts the group down
  for (auto& w : g->workers) EXPECT_TRUE(w->Wait(10).ok()) << w->Wait(0);
}

INSTANTIATE_TEST_SUITE_P(Variants, TpRemoteTest,
                         ::testing::Combine(::testing::Values("31b", "26b-a4b", "e2b"),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" +
                                           std::to_string(std::get<1>(info.param));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(TpRemoteFailureTest, AVanishedRankFailsRankZeroWithDeviceLost) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  auto g = MakeRemoteGroup(**m, 2);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(testing::RunGreedySteps(*g->runner, 1, kPage).logits.size(), 1u);
  g->workers[0].reset();  // rank 1 leaves mid-service
  runner::StepResult res;
  const std::vector<int32_t> t = {2, 200, 300};
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  const runner::StepBatch b = testing::OneSequenceStep(t, table);
  absl::Status st = g->runner->Forward(b, &res);
  EXPECT_TRUE(IsDeviceLost(st)) << st;
}

TEST(TpRemoteFailureTest, RankZeroSilentMeansDeviceLostAfterTheTimeout) {
  setenv("GANNET_TP_TIMEOUT_S", "1", 1);
  auto m = testing::LoadTinyModel("e2b");
  ASSERT_TRUE(m.ok());
  auto group = std::make_shared<parallel::HostGroup>(2);
  backend::CpuBackend be0, be1;
  auto worker = parallel::TpWorker::Start((*m)->config, (*m)->weights, &be1, group->Rank(1),
                                          group->Channel(1));
  // Rank 0 says hello and joins the first agreement, then goes silent (its process died).
  auto channel0 = group->Channel(0);
  auto coll0 = group->Rank(0);
  runner::RunnerOptions o =
      testing::SimpleRunnerOptions((*m)->config, kPage, testing::kTpMaxLen, testing::kTpSeqs, 256);
  ASSERT_TRUE(channel0->Send(parallel::EncodeInit(o)).ok());
  ASSERT_TRUE(coll0->MinOverRanks(1).ok());
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = worker->Wait(20);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(IsDeviceLost(st)) << st;
  EXPECT_LT(s, 5.0);
  unsetenv("GANNET_TP_TIMEOUT_S");
}

TEST(StepMessageTest, RoundTripsAndRejectsTornMessages) {
  std::vector<int32_t> toks = {5, 6, 7}, t0 = {0, 1}, t1 = {-1, 4, 9}, ban = {1, 2},
                       blocks = {-1, 0, 0};
  runner::StepBatch b;
  runner::SeqStep q;
  q.tokens = toks;
  q.start_pos = 17;
  q.page_table[0] = t0;
  q.page_table[1] = t1;
  q.logits = runner::SeqStep::Logits::kAll;
  q.image_block = blocks;
  b.seqs.push_back(q);
  b.device_sampling.push_back(sampling::DrawParams{0.5f, 3, 0.9f, 0.1f, 42});
  b.host_logits.push_back(1);
  b.banned_tokens.push_back(ban);
  const std::vector<uint8_t> msg = parallel::EncodeStep(b);
  parallel::DecodedStep d;
  ASSERT_TRUE(parallel::DecodeStep(msg, &d).ok());
  ASSERT_EQ(d.batch.seqs.size(), 1u);
  const runner::SeqStep& s = d.batch.seqs[0];
  EXPECT_EQ(std::vector<int32_t>(s.tokens.begin(), s.tokens.end()), toks);
  EXPECT_EQ(s.start_pos, 17);
  EXPECT_EQ(std::vector<int32_t>(s.page_table[1].begin(), s.page_table[1].end()), t1);
  EXPECT_EQ(s.logits, runner::SeqStep::Logits::kAll);
  EXPECT_EQ(std::vector<int32_t>(s.image_block.begin(), s.image_block.end()), blocks);
  EXPECT_EQ(d.batch.device_sampling[0].seed, 42u);
  EXPECT_EQ(d.batch.host_logits, std::vector<uint8_t>{1});
  EXPECT_EQ(std::vector<int32_t>(d.batch.banned_tokens[0].begin(), d.batch.banned_tokens[0].end()),
            ban);
  // Every truncation is an error, never a read past the end.
  for (size_t n = 0; n < msg.size(); ++n) {
    EXPECT_FALSE(parallel::DecodeStep(std::span<const uint8_t>(msg.data(), n), &d).ok()) << n;
  }
}

}  // namespace
}  // namespace gannet
