// Tensor parallelism on the CPU backend, ranks as threads joined by the host collectives: for
// every tiny variant, TP = 2 and 4 compute the logits of TP = 1 within fp32 rounding and the
// same greedy tokens; the sharding rules (model/tp_shard.h) and the failure policy of a group.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/forwarding_backend.h"
#include "lib/common/status.h"
#include "lib/model/tp_shard.h"
#include "lib/model/variants.h"
#include "lib/parallel/host_collectives.h"
#include "tests/parallel/tp_test_util.h"

namespace gannet {
namespace {

constexpr int kPage = 16;
constexpr int kSteps = 6;

using CpuGroup = testing::HostTpGroup;

// `wrap` (optional) wraps rank `wrapped`'s backend.
CpuGroup MakeCpuGroup(
    const testing::LoadedModel& m, int world,
    std::function<std::unique_ptr<backend::Backend>(std::unique_ptr<backend::Backend>)> wrap =
        nullptr,
    int wrapped = -1, model::MoeSplit moe = model::MoeSplit::kAuto) {
  return testing::MakeHostTpGroup(
      m, world, kPage,
      [&](int r) {
        std::unique_ptr<backend::Backend> be = std::make_unique<backend::CpuBackend>();
        return r == wrapped ? wrap(std::move(be)) : std::move(be);
      },
      moe);
}

class TpRunnerTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(TpRunnerTest, MatchesOneDevice) {
  const auto& [variant, world] = GetParam();
  auto m = testing::LoadTinyModel(variant);
  ASSERT_TRUE(m.ok()) << m.status();
  const testing::TpRun ref = testing::RunOneDeviceReference(**m, kSteps, kPage);
  CpuGroup g = MakeCpuGroup(**m, world);
  ASSERT_NE(g.runner, nullptr);
  // fp32: sums split between ranks (measured up to 1.2e-5).
  testing::ExpectSameRun(testing::RunGreedySteps(*g.runner, kSteps, kPage), ref,
                         static_cast<int>((*m)->config.text.vocab_size), 1e-4);
  // Each rank holds its share: a rank's weights well under the whole model's.
  auto shard = model::ShardWeights((*m)->config, (*m)->weights, {0, world});
  ASSERT_TRUE(shard.ok());
  EXPECT_LT(model::ViewBytes((*shard)->views) * 3 / 2, model::ViewBytes((*m)->weights));
  // The count the engine checks memory with is the shard's.
  EXPECT_EQ(2 * model::ShardParameterCount((*m)->config, world), model::ViewBytes((*shard)->views));
}

INSTANTIATE_TEST_SUITE_P(Variants, TpRunnerTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" +
                                           std::to_string(std::get<1>(info.param));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// Weights quantized at load (weight_dtype) shard like plain ones: each rank quantizes exactly the
// groups of its slice that one device would (a row-parallel slice holds whole groups), so TP = 2
// keeps TP = 1's tokens and logits within fp32 rounding; a per-channel scheme, whose channels the
// row-parallel slices would split, and a group that straddles ranks are refused by name.
TEST(TpRunnerTest, WeightsQuantizedAtLoadMatchOneDevice) {
  for (const char* variant : {"trained", "31b"}) {
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(model::QuantizeAtLoad(&(*m)->weights, WeightFormat::Int4(32, DType::kBF16)).ok());
    const testing::TpRun ref = testing::RunOneDeviceReference(**m, kSteps, kPage);
    CpuGroup g = MakeCpuGroup(**m, 2);
    ASSERT_NE(g.runner, nullptr) << variant;
    testing::ExpectSameRun(testing::RunGreedySteps(*g.runner, kSteps, kPage), ref,
                           static_cast<int>((*m)->config.text.vocab_size), 1e-4);
  }
  auto m = testing::LoadTinyModel("trained");
  ASSERT_TRUE(m.ok());
  model::ModelWeights channel = (*m)->weights;
  ASSERT_TRUE(model::QuantizeAtLoad(&channel, WeightFormat::Int4(0, DType::kBF16)).ok());
  auto refused = model::ShardWeights((*m)->config, channel, {0, 2});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(std::string(refused.status().message()).find("per channel"), std::string::npos)
      << refused.status();
  // The trained model's down_proj has 640 inputs: 2 ranks get 320, not a multiple of 128.
  model::ModelWeights g128 = (*m)->weights;
  ASSERT_TRUE(model::QuantizeAtLoad(&g128, WeightFormat::Int4(128, DType::kBF16)).ok());
  auto straddle = model::ShardWeights((*m)->config, g128, {0, 2});
  ASSERT_FALSE(straddle.ok());
  EXPECT_NE(std::string(straddle.status().message()).find("group of 128"), std::string::npos)
      << straddle.status().message();
}

// 26B-A4B under both MoE splits, whatever DefaultMoeSplit picks: the experts themselves split
// (expert parallelism: 4 of the tiny model's 8 experts per rank at TP 2, 2 at TP 4, as many as a
// token picks) and every expert's intermediate split. One device's logits and tokens; each rank
// holds only its part.
TEST(TpRunnerTest, BothMoeSplitsMatchOneDevice) {
  auto m = testing::LoadTinyModel("26b-a4b");
  ASSERT_TRUE(m.ok()) << m.status();
  const model::TextConfig& c = (*m)->config.text;
  const testing::TpRun ref = testing::RunOneDeviceReference(**m, kSteps, kPage);
  for (model::MoeSplit split : {model::MoeSplit::kExperts, model::MoeSplit::kIntermediate}) {
    const bool ep = split == model::MoeSplit::kExperts;
    for (int world : {2, 4}) {
      CpuGroup g = MakeCpuGroup(**m, world, nullptr, -1, split);
      ASSERT_NE(g.runner, nullptr) << "tp " << world;
      const model::TextConfig& s = g.runner->shard_config().text;
      EXPECT_EQ(s.local_experts, ep ? c.num_experts / world : 0);
      EXPECT_EQ(s.moe_intermediate_size,
                ep ? c.moe_intermediate_size : c.moe_intermediate_size / world);
      testing::ExpectSameRun(testing::RunGreedySteps(*g.runner, kSteps, kPage), ref,
                             static_cast<int>(c.vocab_size), 1e-4);
    }
  }
  // Rank r's experts are the original's [r * E / 2, (r + 1) * E / 2): views, nothing copied.
  const model::WeightView& gu = (*m)->weights.layers[0].experts_gate_up;
  for (int r = 0; r < 2; ++r) {
    auto s = model::ShardWeights((*m)->config, (*m)->weights, {r, 2, model::MoeSplit::kExperts});
    ASSERT_TRUE(s.ok()) << s.status();
    const model::WeightView& v = (*s)->views.layers[0].experts_gate_up;
    EXPECT_EQ(v.dim(0), c.num_experts / 2);
    EXPECT_EQ(v.data, static_cast<const uint8_t*>(gu.data) + r * v.nbytes());
    EXPECT_EQ(2 * model::ShardParameterCount((*m)->config, 2, model::MoeSplit::kExperts),
              model::ViewBytes((*s)->views));
  }
  // A split that does not divide the experts is named.
  model::ModelConfig odd = (*m)->config;
  odd.text.num_experts = 6;
  const absl::Status st = model::CheckTpShardable(odd, 4, model::MoeSplit::kExperts);
  EXPECT_NE(st.message().find("num_experts"), std::string::npos) << st;
}

// Device-sampled steps: all-greedy batches take the ranks' shard arg-maxes (no logits gather),
// mixed batches gather the rows and sample on rank 0; both must give one device's tokens, bans
// included.
TEST(TpRunnerSamplingTest, DeviceSampledTokensOfOneDevice) {
  for (const char* variant : {"31b", "e2b"}) {
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok());
    backend::CpuBackend be;
    auto opts = testing::SimpleRunnerOptions((*m)->config, kPage, testing::kTpMaxLen,
                                             testing::kTpSeqs, 256);
    auto ref = testing::CreateTinyRunner((*m)->config, (*m)->weights, &be, opts, testing::kTpMaxLen,
                                         testing::kTpSeqs);
    ASSERT_TRUE(ref.ok());
    std::vector<std::vector<int32_t>> prompts, tables;
    for (int s = 0; s < testing::kTpSeqs; ++s) {
      prompts.push_back(testing::TpPrompt(s + 3, 6 + 4 * s));
      tables.push_back(testing::IdentityPageTable(s, testing::kTpMaxLen / kPage));
    }
    // The unbanned greedy tokens, to ban them in the second round.
    std::vector<int32_t> first(testing::kTpSeqs);
    for (int world : {2, 4}) {
      CpuGroup g = MakeCpuGroup(**m, world);
      ASSERT_NE(g.runner, nullptr);
      for (int round = 0; round < 3; ++round) {
        std::vector<std::vector<int32_t>> bans(testing::kTpSeqs);
        runner::StepBatch b;
        for (int s = 0; s < testing::kTpSeqs; ++s) {
          runner::SeqStep q;
          q.tokens = prompts[s];
          q.page_table[0] = tables[s];
          q.page_table[1] = tables[s];
          b.seqs.push_back(q);
          sampling::DrawParams p{0.0f, 0, 1.0f, 0.0f, 0};
          if (round == 2 && s == 1) p = {0.8f, 20, 0.9f, 0.0f, 77};  // mixed: the gather path
          b.device_sampling.push_back(p);
          b.host_logits.push_back(0);
          if (round >= 1) bans[s] = {first[s], 3};
        }
        for (auto& ban : bans) b.banned_tokens.push_back(ban);
        runner::StepResult want, got;
        ASSERT_TRUE((*ref)->Forward(b, &want).ok());
        ASSERT_TRUE(g.runner->Forward(b, &got).ok());
        EXPECT_EQ(got.sampled, want.sampled) << variant << " tp" << world << " round " << round;
        if (round == 0) first = want.sampled;
        if (round == 1) {
          for (int s = 0; s < testing::kTpSeqs; ++s) EXPECT_NE(got.sampled[s], first[s]);
        }
      }
    }
  }
}

TEST(TpShardTest, GeometryOfTheFullSizeVariants) {
  for (const char* name : {"dummy:31b", "dummy:26b-a4b", "dummy:e4b", "dummy:e2b"}) {
    auto c = model::DummyModelConfig(name);
    ASSERT_TRUE(c.ok());
    for (int world : {2, 4, 8}) {
      ASSERT_TRUE(model::CheckTpShardable(*c, world).ok()) << name << " tp " << world;
      const model::ModelConfig s = model::ShardConfig(*c, world);
      EXPECT_EQ(s.text.num_attention_heads * world, c->text.num_attention_heads);
      EXPECT_EQ(s.text.intermediate_size * world, c->text.intermediate_size);
      EXPECT_EQ(s.text.vocab_size, c->text.vocab_size);
      // KV heads split, or one per rank when there are fewer than ranks (replicated).
      const int kv = c->text.FullNumKvHeads();
      EXPECT_EQ(s.text.FullNumKvHeads(), std::max(1, kv / world)) << name;
    }
  }
  auto c31 = model::DummyModelConfig("dummy:31b");
  ASSERT_TRUE(c31.ok());
  // 31B full layers: 4 KV heads; at TP 8 ranks 2r and 2r + 1 share head r.
  EXPECT_EQ(c31->text.FullNumKvHeads(), 4);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(model::KvHeadBegin(4, {r, 8}), r / 2);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(model::KvHeadBegin(4, {r, 2}), 2 * r);
}

TEST(TpShardTest, WhatDoesNotDivideIsNamed) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  absl::Status st = model::CheckTpShardable((*m)->config, 3);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("num_attention_heads"), std::string::npos) << st;
  EXPECT_FALSE(model::CheckTpShardable((*m)->config, 0).ok());
  EXPECT_FALSE(model::CheckTpShardable((*m)->config, 16).ok());
  model::ModelConfig odd = (*m)->config;
  odd.text.vocab_size = 513;
  st = model::CheckTpShardable(odd, 2);
  EXPECT_NE(st.message().find("vocab_size"), std::string::npos) << st;
}

TEST(TpShardTest, ShardsReassembleTheWeights) {
  // Row slices are views into the checkpoint; column slices are copies: concatenating every
  // rank's o_proj columns and experts' slices gives the original back.
  auto m = testing::LoadTinyModel("26b-a4b");
  ASSERT_TRUE(m.ok());
  const model::LayerWeights& lw = (*m)->weights.layers[0];
  const int world = 2;
  std::vector<std::unique_ptr<model::ShardedWeights>> shards;
  for (int r = 0; r < world; ++r) {
    auto s = model::ShardWeights((*m)->config, (*m)->weights,
                                 {r, world, model::MoeSplit::kIntermediate});
    ASSERT_TRUE(s.ok()) << s.status();
    shards.push_back(std::move(*s));
  }
  const auto* o = static_cast<const uint16_t*>(lw.o_proj.data);
  const int64_t H = lw.o_proj.dim(0), K = lw.o_proj.dim(1), Kl = K / world;
  for (int r = 0; r < world; ++r) {
    const model::WeightView& v = shards[r]->views.layers[0].o_proj;
    ASSERT_EQ(v.dim(1), Kl);
    for (int64_t i = 0; i < H; ++i) {
      for (int64_t j = 0; j < Kl; ++j) {
        ASSERT_EQ(static_cast<const uint16_t*>(v.data)[i * Kl + j], o[i * K + r * Kl + j]);
      }
    }
    // q rows: a view at the rank's offset.
    const model::WeightView& q = shards[r]->views.layers[0].q_proj;
    EXPECT_EQ(q.data, static_cast<const uint8_t*>(lw.q_proj.data) + r * q.nbytes());
  }
  // Experts: rank r's gate rows of expert e are the original's rows [r * Il, (r + 1) * Il).
  const model::WeightView& gu = lw.experts_gate_up;
  const int64_t E = gu.dim(0), I2 = gu.dim(1), Hd = gu.dim(2), Il = I2 / 2 / world;
  for (int r = 0; r < world; ++r) {
    const model::WeightView& v = shards[r]->views.layers[0].experts_gate_up;
    ASSERT_EQ(v.dim(1), 2 * Il);
    const auto* a = static_cast<const uint16_t*>(v.data);
    const auto* b = static_cast<const uint16_t*>(gu.data);
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t i = 0; i < Il; ++i) {
        for (int64_t h = 0; h < Hd; ++h) {
          ASSERT_EQ(a[(e * 2 * Il + i) * Hd + h], b[(e * I2 + r * Il + i) * Hd + h]);  // gate
          ASSERT_EQ(a[(e * 2 * Il + Il + i) * Hd + h],
                    b[(e * I2 + I2 / 2 + r * Il + i) * Hd + h]);  // up
        }
      }
    }
  }
}

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

TEST(TpGroupTest, ARankFailingMidStepBreaksTheGroupWithoutHanging) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  CpuGroup g = MakeCpuGroup(
      **m, 2,
      [](std::unique_ptr<backend::Backend> b) {
        return std::unique_ptr<backend::Backend>(std::make_unique<FailingBackend>(std::move(b), 3));
      },
      /*wrapped=*/1);
  ASSERT_NE(g.runner, nullptr);
  const std::vector<int32_t> prompt = testing::TpPrompt(0, 9);
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  const runner::StepBatch b = testing::OneSequenceStep(prompt, table);
  runner::StepResult res;
  // Rank 1 fails in layer 2 while rank 0 waits for it in that layer's all-reduce.
  absl::Status st = g.runner->Forward(b, &res);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(IsDeviceLost(st)) << st;
  EXPECT_NE(st.message().find("injected failure"), std::string::npos) << st;
  // The group stays failed.
  st = g.runner->Forward(b, &res);
  EXPECT_TRUE(IsDeviceLost(st)) << st;
}

// A CPU rank that says it is a device: its thread and the engine's poll before blocking
// (rank_worker.h), the path device ranks take, here with the CPU's arithmetic to check.
class DeviceLikeBackend final : public backend::ForwardingBackend {
 public:
  DeviceLikeBackend(std::unique_ptr<backend::Backend> inner, int device, int fail_at)
      : ForwardingBackend(std::move(inner)), device_(device), fail_at_(fail_at) {}
  int device_id() const override { return device_; }
  absl::Status Attention(const backend::AttentionArgs& a) override {
    if (fail_at_ > 0 && ++calls_ == fail_at_) return absl::InternalError("injected failure");
    return ForwardingBackend::Attention(a);
  }
  // A span of its own per rank: the group reports rank 0's.
  absl::StatusOr<double> DeviceSpanSeconds() override { return 1e-3 * (device_ + 1); }

 private:
  const int device_;
  const int fail_at_;
  int calls_ = 0;
};

TEST(TpGroupTest, PollingRanksMatchOneDeviceAndStillFailCleanly) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  const testing::TpRun ref = testing::RunOneDeviceReference(**m, kSteps, kPage);
  const std::vector<int32_t> prompt = testing::TpPrompt(0, 9);
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  for (int fail : {0, 3}) {
    SCOPED_TRACE(fail > 0 ? "rank 1 fails" : "no failure");
    CpuGroup g = testing::MakeHostTpGroup(**m, 2, kPage, [&](int r) {
      return std::unique_ptr<backend::Backend>(std::make_unique<DeviceLikeBackend>(
          std::make_unique<backend::CpuBackend>(), r, r == 1 ? fail : 0));
    });
    ASSERT_NE(g.runner, nullptr);
    if (fail == 0) {
      testing::ExpectSameRun(testing::RunGreedySteps(*g.runner, kSteps, kPage), ref,
                             static_cast<int>((*m)->config.text.vocab_size), 1e-4);
      absl::StatusOr<double> span = g.runner->LastStepDeviceSeconds();
      ASSERT_TRUE(span.ok()) << span.status();
      EXPECT_EQ(*span, 1e-3);  // rank 0's
      continue;
    }
    runner::StepResult res;
    absl::Status st = g.runner->Forward(testing::OneSequenceStep(prompt, table), &res);
    EXPECT_TRUE(IsDeviceLost(st)) << st;
    EXPECT_NE(st.message().find("injected failure"), std::string::npos) << st;
    EXPECT_FALSE(g.runner->LastStepDeviceSeconds().ok());  // no span of a failed step
  }
}

// A rank whose first Attention stalls (a rank stuck in the driver or in a kernel) for `seconds`.
class StallingBackend final : public backend::ForwardingBackend {
 public:
  StallingBackend(std::unique_ptr<backend::Backend> inner, double seconds)
      : ForwardingBackend(std::move(inner)), seconds_(seconds) {}
  absl::Status Attention(const backend::AttentionArgs& a) override {
    if (!stalled_) {
      stalled_ = true;
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    }
    return ForwardingBackend::Attention(a);
  }

 private:
  bool stalled_ = false;
  const double seconds_;
};

TEST(TpGroupTest, AStuckRankInThisProcessEndsTheStepAtTheGroupDeadline) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  setenv("GANNET_TP_TIMEOUT_S", "1", 1);
  CpuGroup g = MakeCpuGroup(
      **m, 2,
      [](std::unique_ptr<backend::Backend> b) {
        return std::unique_ptr<backend::Backend>(
            std::make_unique<StallingBackend>(std::move(b), 4.0));
      },
      /*wrapped=*/1);
  ASSERT_NE(g.runner, nullptr);
  const std::vector<int32_t> prompt = testing::TpPrompt(0, 9);
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  runner::StepResult res;
  // Rank 0 waits in layer 0's all-reduce; past the deadline the group is aborted, and the step
  // ends once the stuck rank comes back (it finds the group aborted).
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = g.runner->Forward(testing::OneSequenceStep(prompt, table), &res);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("GANNET_TP_TIMEOUT_S");
  EXPECT_TRUE(IsDeviceLost(st)) << st;
  EXPECT_NE(st.message().find("did not complete within 1 s"), std::string::npos) << st;
  EXPECT_NE(st.message().find("stuck"), std::string::npos) << st;
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 15.0);
}

// Teardown order (a CUDA graph that captured NCCL operations keeps ncclCommDestroy and
// ncclCommAbort waiting until it is released; the in-process TP=2 engine hung in its destroy on
// two H200s until the runner released every rank's graphs before its collectives).
struct TeardownLog {
  std::mutex mu;
  std::vector<std::string> events;
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
  }
};

class GraphLoggingBackend final : public backend::ForwardingBackend {
 public:
  GraphLoggingBackend(std::unique_ptr<backend::Backend> inner, int rank, TeardownLog* log)
      : ForwardingBackend(std::move(inner)), rank_(rank), log_(log) {}
  void ReleaseGraphs() override { log_->Add(fmt::format("graphs {}", rank_)); }

 private:
  const int rank_;
  TeardownLog* log_;
};

class LoggingCollectives final : public backend::Collectives {
 public:
  LoggingCollectives(std::unique_ptr<backend::Collectives> inner, TeardownLog* log)
      : inner_(std::move(inner)), log_(log) {}
  ~LoggingCollectives() override { log_->Add(fmt::format("collectives {}", inner_->rank())); }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(backend::Tensor x) override { return inner_->AllReduceSum(x); }
  absl::Status AllGatherColumns(backend::Tensor b, backend::Tensor f) override {
    return inner_->AllGatherColumns(b, f);
  }
  absl::StatusOr<int64_t> MinOverRanks(int64_t v) override { return inner_->MinOverRanks(v); }
  void Abort() override { inner_->Abort(); }

 private:
  std::unique_ptr<backend::Collectives> inner_;
  TeardownLog* log_;
};

TEST(TpGroupTest, TeardownReleasesEveryRanksGraphsBeforeItsCollectives) {
  auto m = testing::LoadTinyModel("31b");
  ASSERT_TRUE(m.ok());
  constexpr int kWorld = 2;
  TeardownLog log;
  auto group = std::make_shared<parallel::HostGroup>(kWorld);
  std::vector<std::unique_ptr<backend::Backend>> backends;
  std::vector<backend::Backend*> raw;
  std::vector<std::unique_ptr<backend::Collectives>> comms;
  for (int r = 0; r < kWorld; ++r) {
    backends.push_back(
        std::make_unique<GraphLoggingBackend>(std::make_unique<backend::CpuBackend>(), r, &log));
    raw.push_back(backends.back().get());
    comms.push_back(std::make_unique<LoggingCollectives>(group->Rank(r), &log));
  }
  auto tp = testing::CreateTinyTpRunner(**m, raw, std::move(comms), group, kPage);
  ASSERT_TRUE(tp.ok()) << tp.status();
  const std::vector<int32_t> prompt = testing::TpPrompt(0, 9);
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  runner::StepResult res;
  ASSERT_TRUE((*tp)->Forward(testing::OneSequenceStep(prompt, table), &res).ok());
  tp->reset();
  for (int r = 0; r < kWorld; ++r) {
    const auto& e = log.events;
    const auto graphs = std::find(e.begin(), e.end(), fmt::format("graphs {}", r));
    const auto colls = std::find(e.begin(), e.end(), fmt::format("collectives {}", r));
    ASSERT_NE(graphs, e.end()) << "rank " << r << "'s graphs were never released";
    ASSERT_NE(colls, e.end()) << "rank " << r << "'s collectives were never destroyed";
    EXPECT_LT(graphs - e.begin(), colls - e.begin()) << "rank " << r;
  }
}

TEST(TpGroupTest, AStepEveryRankRejectsFailsOnlyThatStep) {
  auto m = testing::LoadTinyModel("e2b");
  ASSERT_TRUE(m.ok());
  CpuGroup g = MakeCpuGroup(**m, 2);
  ASSERT_NE(g.runner, nullptr);
  const std::vector<int32_t> bad = {2, 100000};  // outside the vocabulary
  const std::vector<int32_t> table = testing::IdentityPageTable(0, testing::kTpMaxLen / kPage);
  const runner::StepBatch b = testing::OneSequenceStep(bad, table);
  runner::StepResult res;
  absl::Status st = g.runner->Forward(b, &res);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_FALSE(IsDeviceLost(st));
  const testing::TpRun run = testing::RunGreedySteps(*g.runner, 2, kPage);  // still serving
  EXPECT_EQ(run.logits.size(), 2u);
}

}  // namespace
}  // namespace gannet
