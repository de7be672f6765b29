// The MTP drafter of a tensor-parallel group (every rank drafting with its shard of the
// assistant, lib/parallel/tp_runner.h), ranks as threads on CPU backends: a round's tokens are one
// device's, in one process (TpRunner's workers) and across the multi-process protocol (TpWorkers
// behind the host channel, the same messages NCCL carries between processes); sampled rows bring
// the same logits rows to the host, and every rank draws rank 0's tokens; a rank failing
// mid-round, or vanishing, ends the round device-lost on rank 0 without hanging; the draft
// message round-trips and rejects torn copies.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/forwarding_backend.h"
#include "lib/common/status.h"
#include "lib/parallel/host_collectives.h"
#include "lib/parallel/step_message.h"
#include "lib/parallel/tp_worker.h"
#include "lib/spec/drafter.h"
#include "tests/parallel/tp_draft_util.h"
#include "tests/parallel/tp_test_util.h"

namespace gannet {
namespace {

constexpr int kPage = testing::kTpDraftPage;
constexpr int kSteps = testing::kTpDraftSteps;
using testing::DraftRound;
using testing::LoadPair;
using testing::PrefillAndPlan;
using testing::TinyPair;
using testing::TpDrafterOptions;

// One device's round: the reference.
spec::DraftResult OneDevice(const TinyPair& p, bool sampled) {
  backend::CpuBackend be;
  auto r = testing::CreateTinyRunner(
      p.target->config, p.target->weights, &be,
      testing::SimpleRunnerOptions(p.target->config, kPage, testing::kTpMaxLen, testing::kTpSeqs,
                                   256),
      testing::kTpMaxLen, testing::kTpSeqs);
  EXPECT_TRUE(r.ok()) << r.status();
  spec::DraftResult res;
  if (!r.ok()) return res;
  auto d = spec::Drafter::Create(p.drafter->config, p.drafter->weights, p.target->config, r->get(),
                                 &be, TpDrafterOptions());
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return res;
  const DraftRound round = PrefillAndPlan(**r, sampled);
  absl::Status st = (*d)->Draft(round.seqs, kSteps, &res);
  EXPECT_TRUE(st.ok()) << st;
  return res;
}

// Rank 0 here, the other ranks behind the host channel as TpWorkers.
struct RemoteGroup {
  std::shared_ptr<parallel::HostGroup> group;
  std::vector<std::unique_ptr<backend::Backend>> backends;
  std::vector<std::unique_ptr<parallel::TpWorker>> workers;
  std::unique_ptr<parallel::TpRunner> runner;
};

std::unique_ptr<RemoteGroup> MakeRemoteGroup(const TinyPair& p, int world) {
  auto g = std::make_unique<RemoteGroup>();
  g->group = std::make_shared<parallel::HostGroup>(world);
  for (int r = 0; r < world; ++r) g->backends.push_back(std::make_unique<backend::CpuBackend>());
  for (int r = 1; r < world; ++r) {
    g->workers.push_back(parallel::TpWorker::Start(
        p.target->config, p.target->weights, g->backends[r].get(), g->group->Rank(r),
        g->group->Channel(r), {&p.drafter->config, &p.drafter->weights}));
  }
  std::vector<parallel::TpRankParts> ranks(1);
  ranks[0].backend = g->backends[0].get();
  ranks[0].collectives = g->group->Rank(0);
  auto tp = parallel::TpRunner::Create(
      p.target->config, p.target->weights, std::move(ranks), g->group,
      testing::SimpleRunnerOptions(p.target->config, kPage, testing::kTpMaxLen, testing::kTpSeqs,
                                   256),
      g->group->Channel(0));
  EXPECT_TRUE(tp.ok()) << tp.status();
  if (!tp.ok()) return nullptr;
  absl::Status st = (*tp)->AttachKv(testing::SimpleKvLayout(
      (*tp)->shard_config(), *g->backends[0], kPage, testing::kTpMaxLen, testing::kTpSeqs));
  EXPECT_TRUE(st.ok()) << st;
  g->runner = std::move(*tp);
  return g;
}

void ExpectSameRound(const spec::DraftResult& got, const spec::DraftResult& want,
                     const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  for (size_t i = 0; i < want.logits.size(); ++i) {
    ASSERT_EQ(got.logits[i].size(), want.logits[i].size()) << what << " sequence " << i;
    for (size_t j = 0; j < want.logits[i].size(); ++j) {
      if (std::isinf(want.logits[i][j])) {
        EXPECT_EQ(got.logits[i][j], want.logits[i][j]) << what;  // the centroid mask
      } else {
        ASSERT_NEAR(got.logits[i][j], want.logits[i][j], 1e-4f) << what << " sequence " << i;
      }
    }
  }
}

class TpDrafterTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TpDrafterTest, RoundsOfOneDeviceInOneProcessAndAcrossTheChannel) {
  const auto& [variant, world] = GetParam();
  const TinyPair p = LoadPair(variant);
  ASSERT_NE(p.drafter, nullptr);
  for (bool sampled : {false, true}) {
    const std::string what =
        variant + " tp " + std::to_string(world) + (sampled ? " sampled" : " greedy");
    const spec::DraftResult want = OneDevice(p, sampled);
    ASSERT_EQ(want.tokens.size(), static_cast<size_t>(testing::kTpSeqs));

    testing::HostTpGroup local = testing::MakeHostTpGroup(
        *p.target, world, kPage, [](int) { return std::make_unique<backend::CpuBackend>(); });
    ASSERT_NE(local.runner, nullptr);
    auto drafter =
        local.runner->AttachDrafter(p.drafter->config, p.drafter->weights, TpDrafterOptions());
    ASSERT_TRUE(drafter.ok()) << drafter.status();
    EXPECT_EQ((*drafter)->config().text.vocab_size, p.drafter->config.text.vocab_size);
    const DraftRound round = PrefillAndPlan(*local.runner, sampled);
    spec::DraftResult in_process;
    ASSERT_TRUE((*drafter)->Draft(round.seqs, kSteps, &in_process).ok());
    ExpectSameRound(in_process, want, what + " in one process");
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(local.runner->RankDraftTokens(r), in_process.tokens) << what << " rank " << r;
    }

    auto remote = MakeRemoteGroup(p, world);
    ASSERT_NE(remote, nullptr);
    auto rd =
        remote->runner->AttachDrafter(p.drafter->config, p.drafter->weights, TpDrafterOptions());
    ASSERT_TRUE(rd.ok()) << rd.status();
    const DraftRound rround = PrefillAndPlan(*remote->runner, sampled);
    spec::DraftResult across;
    ASSERT_TRUE((*rd)->Draft(rround.seqs, kSteps, &across).ok());
    // The same arithmetic as in one process (rank-order sums): the same bits.
    EXPECT_EQ(across.tokens, in_process.tokens) << what;
    EXPECT_EQ(across.logits, in_process.logits) << what;
    rd->reset();
    remote->runner.reset();  // rank 0 shuts the group down
    for (auto& w : remote->workers) EXPECT_TRUE(w->Wait(10).ok()) << w->Wait(0);
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, TpDrafterTest,
                         ::testing::Combine(::testing::Values("31b", "e2b"),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" +
                                           std::to_string(std::get<1>(info.param));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// A rank whose Attention fails on its n-th call.
class FailingBackend final : public backend::ForwardingBackend {
 public:
  FailingBackend(std::unique_ptr<backend::Backend> inner, int fail_at)
      : ForwardingBackend(std::move(inner)), fail_at_(fail_at) {}
  absl::Status Attention(const backend::AttentionArgs& a) override {
    if (++calls_ == fail_at_) return absl::InternalError("injected failure");
    return ForwardingBackend::Attention(a);
  }

 private:
  int calls_ = 0;
  const int fail_at_;
};

TEST(TpDrafterFailureTest, ARankFailingMidRoundBreaksTheGroupWithoutHanging) {
  const TinyPair p = LoadPair("31b");
  ASSERT_NE(p.drafter, nullptr);
  // The prefill step makes one Attention call per target layer; the next fails in the drafter's
  // second layer, while rank 0 waits for rank 1 in that layer's all-reduce.
  const int fail_at = p.target->config.text.num_hidden_layers + 2;
  testing::HostTpGroup g = testing::MakeHostTpGroup(*p.target, 2, kPage, [&](int r) {
    std::unique_ptr<backend::Backend> b = std::make_unique<backend::CpuBackend>();
    if (r == 1) b = std::make_unique<FailingBackend>(std::move(b), fail_at);
    return b;
  });
  ASSERT_NE(g.runner, nullptr);
  auto drafter = g.runner->AttachDrafter(p.drafter->config, p.drafter->weights, TpDrafterOptions());
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const DraftRound round = PrefillAndPlan(*g.runner, false);
  spec::DraftResult res;
  absl::Status st = (*drafter)->Draft(round.seqs, kSteps, &res);
  EXPECT_TRUE(IsDeviceLost(st)) << st;
  EXPECT_NE(st.message().find("injected failure"), std::string::npos) << st;
  // The group stays failed: the next step and round too.
  runner::StepResult step;
  EXPECT_TRUE(IsDeviceLost(
      g.runner->Forward(testing::OneSequenceStep(round.prompts[0], round.tables[0]), &step)));
  EXPECT_TRUE(IsDeviceLost((*drafter)->Draft(round.seqs, kSteps, &res)));
}

TEST(TpDrafterFailureTest, AVanishedRankFailsTheRoundWithDeviceLost) {
  const TinyPair p = LoadPair("e2b");
  ASSERT_NE(p.drafter, nullptr);
  auto g = MakeRemoteGroup(p, 2);
  ASSERT_NE(g, nullptr);
  auto drafter =
      g->runner->AttachDrafter(p.drafter->config, p.drafter->weights, TpDrafterOptions());
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const DraftRound round = PrefillAndPlan(*g->runner, false);
  g->workers[0].reset();  // rank 1 leaves between the step and the round
  spec::DraftResult res;
  absl::Status st = (*drafter)->Draft(round.seqs, kSteps, &res);
  EXPECT_TRUE(IsDeviceLost(st)) << st;
}

TEST(TpDrafterFailureTest, ARankWithoutTheDraftModelIsNamed) {
  const TinyPair p = LoadPair("31b");
  ASSERT_NE(p.drafter, nullptr);
  auto group = std::make_shared<parallel::HostGroup>(2);
  backend::CpuBackend be0, be1;
  auto worker = parallel::TpWorker::Start(p.target->config, p.target->weights, &be1, group->Rank(1),
                                          group->Channel(1));  // no draft model
  std::vector<parallel::TpRankParts> ranks(1);
  ranks[0].backend = &be0;
  ranks[0].collectives = group->Rank(0);
  auto tp = parallel::TpRunner::Create(
      p.target->config, p.target->weights, std::move(ranks), group,
      testing::SimpleRunnerOptions(p.target->config, kPage, testing::kTpMaxLen, testing::kTpSeqs,
                                   256),
      group->Channel(0));
  ASSERT_TRUE(tp.ok()) << tp.status();
  auto drafter = (*tp)->AttachDrafter(p.drafter->config, p.drafter->weights, TpDrafterOptions());
  ASSERT_FALSE(drafter.ok());
  EXPECT_TRUE(IsDeviceLost(drafter.status())) << drafter.status();
  EXPECT_NE(drafter.status().message().find("create its drafter"), std::string::npos)
      << drafter.status();
  tp->reset();
  EXPECT_FALSE(worker->Wait(10).ok());
}

TEST(StepMessageTest, DraftRoundsRoundTripAndRejectTornMessages) {
  const std::vector<int32_t> t0 = {0, 1}, t1 = {-1, 4, 9};
  spec::DraftSeq a;
  a.token = 77;
  a.hidden_row = 2;
  a.committed = 123456789012;
  a.page_table[0] = t0;
  a.page_table[1] = t1;
  a.draws = {sampling::DrawParams{0.5f, 3, 0.9f, 0.1f, 42}, sampling::DrawParams::Greedy()};
  a.want_logits = true;
  spec::DraftSeq b = a;
  b.token = 5;
  b.want_logits = false;
  const std::vector<spec::DraftSeq> seqs = {a, b};
  const std::vector<uint8_t> msg = parallel::EncodeDraft(seqs, 2);
  parallel::DecodedDraft d;
  ASSERT_TRUE(parallel::DecodeDraft(msg, &d).ok());
  EXPECT_EQ(d.steps, 2);
  ASSERT_EQ(d.seqs.size(), 2u);
  EXPECT_EQ(d.seqs[0].token, 77);
  EXPECT_EQ(d.seqs[0].hidden_row, 2);
  EXPECT_EQ(d.seqs[0].committed, 123456789012);
  EXPECT_EQ(std::vector<int32_t>(d.seqs[0].page_table[1].begin(), d.seqs[0].page_table[1].end()),
            t1);
  EXPECT_EQ(std::vector<int32_t>(d.seqs[1].page_table[0].begin(), d.seqs[1].page_table[0].end()),
            t0);
  ASSERT_EQ(d.seqs[0].draws.size(), 2u);
  EXPECT_EQ(d.seqs[0].draws[0].seed, 42u);
  EXPECT_TRUE(d.seqs[0].draws[1].greedy());
  EXPECT_TRUE(d.seqs[0].want_logits);
  EXPECT_FALSE(d.seqs[1].want_logits);
  for (size_t n = 0; n < msg.size(); ++n) {
    EXPECT_FALSE(parallel::DecodeDraft(std::span<const uint8_t>(msg.data(), n), &d).ok()) << n;
  }
  auto o = parallel::DecodeAttachDrafter(parallel::EncodeAttachDrafter(TpDrafterOptions()));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_seqs, testing::kTpSeqs);
  EXPECT_EQ(o->max_steps, kSteps);
}

}  // namespace
}  // namespace gannet
