// Tensor parallelism on CUDA devices over NCCL.
//  - label gpu (one device): TP = 1 through the NCCL path (a one-rank communicator, the
//    vocabulary "gather", the worker thread) gives bit-identical logits to the plain runner, and
//    its drafter (every rank's shard of the assistant, lib/parallel/tp_runner.h) the plain
//    drafter's tokens.
//  - label multigpu (skips below 2 devices): TP = 2 (and 4 with 4 devices) on every tiny variant
//    against the f32 CPU reference, which replays every step on the group's own tokens: a token
//    that differs must be a near-tie of the reference's own logits, and the decode steps' logits
//    stay within the bound cuda_runner_test applies to one GPU (testing::Bf16GapBound; the worst
//    step against the worst of what bf16 does to the same group: bf16-rounding CPU ranks split
//    the same way, on the same steps). A step where the reference's MoE router nearly chose other
//    experts is reported instead (kRouterTie). And NCCL's all-reduce (f32, bf16) and column gather
//    against sums computed on the host, 1 KB to 64 MB.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/model/tp_shard.h"
#include "lib/parallel/nccl_collectives.h"
#include "tests/backend/bf16_cpu_backend.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/parallel/tp_draft_util.h"
#include "tests/parallel/tp_test_util.h"

namespace gannet {
namespace {

constexpr int kPage = 16;
constexpr int kSteps = 24;
constexpr double kNearTie = 2e-2;  // of max |logit|
// A step whose f32 reference routed some token with less than this between the router logits of
// its last chosen expert and the best one left out is not held to the logit bound (reported): the
// tiny 26B-A4B's router is near uniform (its margins run 0.0003-0.02), and the bf16-rounding CPU
// itself picks other experts at margins up to 0.0021, which moves the logits by 0.14-0.22.
constexpr double kRouterTie = 0.003;

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

struct GpuGroup {
  std::vector<std::unique_ptr<backend::CudaBackend>> backends;
  std::unique_ptr<parallel::TpRunner> runner;
};

GpuGroup MakeGpuGroup(const testing::LoadedModel& m, int world) {
  GpuGroup g;
  std::vector<backend::Backend*> raw;
  for (int r = 0; r < world; ++r) {
    auto be = backend::CudaBackend::Create(r);
    EXPECT_TRUE(be.ok()) << be.status();
    if (!be.ok()) return g;
    raw.push_back(be->get());
    g.backends.push_back(std::move(*be));
  }
  auto comms = parallel::CreateNcclGroup(raw);
  EXPECT_TRUE(comms.ok()) << comms.status();
  if (!comms.ok()) return g;
  auto tp = testing::CreateTinyTpRunner(m, raw, std::move(*comms), nullptr, kPage);
  EXPECT_TRUE(tp.ok()) << tp.status();
  if (tp.ok()) g.runner = std::move(*tp);
  return g;
}

TEST(CudaTpTest, OneGpuThroughTheNcclPathIsThePlainRunner) {
  GANNET_REQUIRE_GPU();
  for (const std::string& variant : testing::TargetVariants()) {
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    GpuGroup g = MakeGpuGroup(**m, 1);
    ASSERT_NE(g.runner, nullptr);
    auto opts = testing::SimpleRunnerOptions((*m)->config, kPage, testing::kTpMaxLen,
                                             testing::kTpSeqs, 256);
    auto plain = testing::CreateTinyRunner((*m)->config, (*m)->weights, g.backends[0].get(), opts,
                                           testing::kTpMaxLen, testing::kTpSeqs);
    ASSERT_TRUE(plain.ok()) << plain.status();
    const testing::TpRun a = testing::RunGreedySteps(**plain, 8, kPage);
    const testing::TpRun b = testing::RunGreedySteps(*g.runner, 8, kPage);
    EXPECT_EQ(a.tokens, b.tokens) << variant;
    EXPECT_EQ(a.logits, b.logits) << variant << ": not bit-identical";
  }
}

// The verify step of `drafts` after `round` (each sequence's chunk [bonus, d1..dK] at its
// committed length, a greedy device-sampled row per token); `sampled` gets the rows' tokens.
absl::Status VerifyStep(runner::StepRunner& r, const testing::DraftRound& round,
                        const spec::DraftResult& drafts, std::vector<int32_t>* sampled) {
  std::vector<std::vector<int32_t>> chunks;
  runner::StepBatch b;
  for (size_t s = 0; s < round.seqs.size(); ++s) {
    chunks.push_back({round.seqs[s].token});
    chunks.back().insert(chunks.back().end(), drafts.tokens[s].begin(), drafts.tokens[s].end());
  }
  for (size_t s = 0; s < round.seqs.size(); ++s) {
    runner::SeqStep q;
    q.tokens = chunks[s];
    q.start_pos = static_cast<int32_t>(round.seqs[s].committed);
    q.page_table[0] = round.tables[s];
    q.page_table[1] = round.tables[s];
    q.logits = runner::SeqStep::Logits::kAll;
    b.seqs.push_back(q);
    for (size_t t = 0; t < chunks[s].size(); ++t) {
      b.device_sampling.push_back(sampling::DrawParams::Greedy());
      b.host_logits.push_back(0);
    }
  }
  runner::StepResult res;
  GANNET_RETURN_IF_ERROR(r.Forward(b, &res));
  *sampled = res.sampled;
  return absl::OkStatus();
}

// A draft round of the group's drafter (eager: the rank-local embedding ids go through the host,
// the dense head's arg-max through ShardArgmax and the pair exchange) against the plain drafter
// over a plain runner on the same GPU (eager too: see below): the same tokens;
// sampled rows bring their logits rows to the host, within bf16 rounding of each other.
TEST(CudaTpTest, OneGpuDrafterThroughTheNcclPathDraftsAsThePlainDrafter) {
  GANNET_REQUIRE_GPU();
  for (const std::string& variant : testing::TargetVariants()) {
    const testing::TinyPair p = testing::LoadPair(variant);
    ASSERT_NE(p.drafter, nullptr);
    GpuGroup g = MakeGpuGroup(*p.target, 1);
    ASSERT_NE(g.runner, nullptr);
    auto group_drafter =
        g.runner->AttachDrafter(p.drafter->config, p.drafter->weights, testing::TpDrafterOptions());
    ASSERT_TRUE(group_drafter.ok()) << group_drafter.status();
    auto opts = testing::SimpleRunnerOptions(p.target->config, kPage, testing::kTpMaxLen,
                                             testing::kTpSeqs, 256);
    auto plain = testing::CreateTinyRunner(p.target->config, p.target->weights, g.backends[0].get(),
                                           opts, testing::kTpMaxLen, testing::kTpSeqs);
    ASSERT_TRUE(plain.ok()) << plain.status();
    // The plain drafter runs its rounds eagerly, as the group's do: a replayed round sizes its
    // split-KV grids from the context bucket (256), an eager one from the real length, and that
    // reduction order alone flips a near-tie of 26B-A4B's assistant (third sequence, third draft:
    // 480 against 184 on an H100, 2026-12-07). Graph replay itself is cuda_drafter_test's.
    spec::DrafterOptions plain_options = testing::TpDrafterOptions();
    plain_options.enable_graphs = false;
    auto plain_drafter =
        spec::Drafter::Create(p.drafter->config, p.drafter->weights, p.target->config, plain->get(),
                              g.backends[0].get(), plain_options);
    ASSERT_TRUE(plain_drafter.ok()) << plain_drafter.status();
    for (bool sampled : {false, true}) {
      const testing::DraftRound a = testing::PrefillAndPlan(**plain, sampled);
      spec::DraftResult want;
      ASSERT_TRUE((*plain_drafter)->Draft(a.seqs, testing::kTpDraftSteps, &want).ok());
      const testing::DraftRound b = testing::PrefillAndPlan(*g.runner, sampled);
      spec::DraftResult got;
      ASSERT_TRUE((*group_drafter)->Draft(b.seqs, testing::kTpDraftSteps, &got).ok());
      EXPECT_EQ(got.tokens, want.tokens) << variant << (sampled ? " sampled" : " greedy");
      if (!sampled) {
        // The verify chunks of these drafts ([bonus, d1..dK], a greedy row each): a uniform step,
        // which the group, as one device, runs eagerly the first time (GraphCache's warm-up),
        // records the second and replays the third, each giving one device's tokens.
        const int before = g.runner->num_graphs();
        std::vector<int32_t> a_tokens, b_tokens;
        ASSERT_TRUE(VerifyStep(**plain, a, want, &a_tokens).ok());
        for (int run = 0; run < 3; ++run) {
          ASSERT_TRUE(VerifyStep(*g.runner, b, want, &b_tokens).ok());
          EXPECT_EQ(g.runner->num_graphs(), before + (run == 0 ? 0 : 1))
              << variant << ": after verify step " << run + 1 << " (warm-up, record, replay)";
          EXPECT_EQ(b_tokens, a_tokens) << variant << ", verify step " << run + 1;
        }
      }
      ASSERT_EQ(got.logits.size(), want.logits.size());
      for (size_t i = 0; i < want.logits.size(); ++i) {
        ASSERT_EQ(got.logits[i].size(), want.logits[i].size());
        float scale = 0;
        for (float x : want.logits[i])
          scale = std::isinf(x) ? scale : std::max(scale, std::fabs(x));
        for (size_t j = 0; j < want.logits[i].size(); ++j) {
          if (std::isinf(want.logits[i][j])) {
            EXPECT_EQ(got.logits[i][j], want.logits[i][j]);
          } else {
            ASSERT_NEAR(got.logits[i][j], want.logits[i][j], 1e-2f * scale) << variant;
          }
        }
      }
    }
  }
}

TEST(CudaTpTest, OneGpuThroughTheMultiProcessPathIsThePlainRunner) {
  // A group of one process joined by id: rank 0's messages (NCCL broadcasts to no one), the
  // agreement on free memory, and the steps run as in the other modes.
  GANNET_REQUIRE_GPU();
  auto m = testing::LoadTinyModel("e4b");
  ASSERT_TRUE(m.ok()) << m.status();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok());
  auto id = parallel::CreateNcclId();
  ASSERT_TRUE(id.ok()) << id.status();
  auto joined = parallel::JoinNcclGroup(be->get(), 0, 1, *id);
  ASSERT_TRUE(joined.ok()) << joined.status();
  std::vector<parallel::TpRankParts> ranks(1);
  ranks[0].backend = be->get();
  ranks[0].collectives = std::move(joined->collectives);
  auto opts =
      testing::SimpleRunnerOptions((*m)->config, kPage, testing::kTpMaxLen, testing::kTpSeqs, 256);
  auto tp = parallel::TpRunner::Create((*m)->config, (*m)->weights, std::move(ranks), nullptr, opts,
                                       std::move(joined->channel));
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_GT((*tp)->MinFreeMemoryBytes(), 0);
  ASSERT_TRUE((*tp)
                  ->AttachKv(testing::SimpleKvLayout((*tp)->shard_config(), **be, kPage,
                                                     testing::kTpMaxLen, testing::kTpSeqs))
                  .ok());
  auto plain = testing::CreateTinyRunner((*m)->config, (*m)->weights, be->get(), opts,
                                         testing::kTpMaxLen, testing::kTpSeqs);
  ASSERT_TRUE(plain.ok());
  const testing::TpRun a = testing::RunGreedySteps(**plain, 8, kPage);
  const testing::TpRun b = testing::RunGreedySteps(**tp, 8, kPage);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
}

TEST(CudaTpTest, ShardArgmaxMatchesTheCpu) {
  GANNET_REQUIRE_GPU();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok());
  backend::CpuBackend cpu;
  const int64_t rows = 6, cols = 5000, offset = 12345;
  std::vector<float> x(rows * cols);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (float& v : x) v = std::round(u(rng) * 4) / 4;  // many equal values: the ties matter
  for (int64_t i = 0; i < cols; ++i) x[3 * cols + i] = -INFINITY;  // a row with nothing left
  std::vector<float> banned(rows * backend::kSampleBanSlots, -1.f);
  banned[0] = static_cast<float>(offset + 7);  // inside the shard
  banned[1] = 3.f;                             // another shard's id
  banned[backend::kSampleBanSlots] = static_cast<float>(offset + cols - 1);
  x[7] = 100.f;  // row 0: the banned id would win
  auto gx = testing::Upload(**be, x, DType::kF32, {rows, cols});
  auto gb = testing::Upload(**be, banned, DType::kI32, {rows, backend::kSampleBanSlots});
  auto go = testing::Upload(**be, std::vector<float>(rows * 2, 0.f), DType::kF32, {rows, 2});
  ASSERT_TRUE((*be)->ShardArgmax(gx.t, gb.t, offset, go.t).ok());
  const std::vector<float> got = testing::Download(**be, go.t);
  std::vector<int32_t> ban_i(banned.begin(), banned.end());
  std::vector<float> want(rows * 2);
  ASSERT_TRUE(cpu.ShardArgmax(backend::Tensor::Make(x.data(), DType::kF32, {rows, cols}),
                              backend::Tensor::Make(ban_i.data(), DType::kI32,
                                                    {rows, backend::kSampleBanSlots}),
                              offset, backend::Tensor::Make(want.data(), DType::kF32, {rows, 2}))
                  .ok());
  for (int64_t r = 0; r < rows; ++r) {
    int32_t gi, wi;
    std::memcpy(&gi, &got[2 * r + 1], 4);
    std::memcpy(&wi, &want[2 * r + 1], 4);
    EXPECT_EQ(gi, wi) << "row " << r;
    EXPECT_EQ(got[2 * r], want[2 * r]) << "row " << r;
  }
  int32_t id0;
  std::memcpy(&id0, &want[1], 4);
  EXPECT_NE(id0, offset + 7);  // the ban held
}

TEST(CudaTpTest, ARankWhoseGroupNeverFormsGivesUpInBoundedTime) {
  GANNET_REQUIRE_GPU();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok());
  auto id = parallel::CreateNcclId();
  ASSERT_TRUE(id.ok()) << id.status();
  setenv("GANNET_TP_JOIN_TIMEOUT_S", "2", 1);
  const auto t0 = std::chrono::steady_clock::now();
  auto joined = parallel::JoinNcclGroup(be->get(), 0, 2, *id);  // rank 1 never comes
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("GANNET_TP_JOIN_TIMEOUT_S");
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kDeadlineExceeded) << joined.status();
  EXPECT_LT(s, 10.0);
}

double MaxAbs(std::span<const float> row) {
  double m = 0;
  for (float v : row) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// The f32 CPU reference, keeping how close its MoE router came to choosing other experts: the
// smallest gap, over a step's tokens and layers, between the router logits of the last expert it
// chose and of the best one it left out (the log of their probabilities' ratio).
class RouterMarginCpuBackend final : public backend::CpuBackend {
 public:
  absl::Status MoeRoute(const backend::MoeRouteArgs& a) override {
    GANNET_RETURN_IF_ERROR(CpuBackend::MoeRoute(a));
    const int64_t t = a.x.rows();
    const int k = a.top_k + 1;
    if (k > a.router_proj.dim(0)) return absl::OkStatus();
    std::vector<int32_t> ids(t * k);
    std::vector<float> w(t * k);
    backend::MoeRouteArgs wider = a;
    wider.top_k = k;
    wider.topk_ids = backend::Tensor::Make(ids.data(), DType::kI32, {t, k});
    wider.topk_weights = backend::Tensor::Make(w.data(), DType::kF32, {t, k});
    GANNET_RETURN_IF_ERROR(CpuBackend::MoeRoute(wider));
    // A weight is p / sum(chosen p) * per_expert_scale: divided by its scale, the ratio of two is
    // the ratio of their probabilities.
    const float* scale = a.per_expert_scale.as<float>();
    for (int64_t r = 0; r < t; ++r) {
      const int32_t in = ids[r * k + k - 2], out = ids[r * k + k - 1];
      const double p_in = w[r * k + k - 2] / scale[in], p_out = w[r * k + k - 1] / scale[out];
      margin_ = std::min(margin_, std::log(p_in / p_out));
    }
    return absl::OkStatus();
  }
  // The smallest margin since the last call (infinity: no routing).
  double TakeMargin() { return std::exchange(margin_, kNoRouting); }

 private:
  static constexpr double kNoRouting = std::numeric_limits<double>::infinity();
  double margin_ = kNoRouting;
};

// The yardstick of what bf16 does to a group: `world` bf16-rounding CPU ranks (host
// collectives), split as the GPUs are, so it also rounds each rank's partial sums before the
// all-reduce. A rank's logits are its vocabulary slice, kept f32 as the GPU keeps them.
testing::HostTpGroup MakeBf16CpuGroup(const testing::LoadedModel& m, int world) {
  return testing::MakeHostTpGroup(m, world, kPage, [&](int) -> std::unique_ptr<backend::Backend> {
    return std::make_unique<testing::Bf16ActivationCpuBackend>(
        m.config.text.hidden_size, model::VocabShardSize(m.config, world));
  });
}

// A step of every sequence of `run` replayed: the prefill (i = 0) or decode step i.
runner::StepBatch ReplayStep(const testing::TpRun& run, int i,
                             const std::vector<std::vector<int32_t>>& tables) {
  runner::StepBatch b;
  for (int s = 0; s < testing::kTpSeqs; ++s) {
    const int prompt = 7 + 5 * s;
    runner::SeqStep q;
    q.tokens = i == 0 ? std::span<const int32_t>(run.tokens[s].data(), prompt)
                      : std::span<const int32_t>(&run.tokens[s][prompt + i - 1], 1);
    q.start_pos = i == 0 ? 0 : prompt + i - 1;
    q.page_table[0] = tables[s];
    q.page_table[1] = tables[s];
    b.seqs.push_back(q);
  }
  return b;
}

class MultiGpuTpTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(MultiGpuTpTest, GreedyMatchesTheCpuReference) {
  const auto& [variant, world] = GetParam();
  if (DeviceCount() < world) GTEST_SKIP() << "needs " << world << " GPUs, have " << DeviceCount();
  auto m = testing::LoadTinyModel(variant);
  ASSERT_TRUE(m.ok()) << m.status();
  RouterMarginCpuBackend cpu;
  auto opts =
      testing::SimpleRunnerOptions((*m)->config, kPage, testing::kTpMaxLen, testing::kTpSeqs, 256);
  auto ref = testing::CreateTinyRunner((*m)->config, (*m)->weights, &cpu, opts, testing::kTpMaxLen,
                                       testing::kTpSeqs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  testing::HostTpGroup bf16 = MakeBf16CpuGroup(**m, world);
  ASSERT_NE(bf16.runner, nullptr);
  GpuGroup g = MakeGpuGroup(**m, world);
  ASSERT_NE(g.runner, nullptr);
  // The GPU group decodes its own greedy tokens; every reference recomputes each step from the
  // GPU's tokens, so every step compares the same inputs, also past a near-tie.
  const testing::TpRun gpu = testing::RunGreedySteps(*g.runner, kSteps, kPage);
  ASSERT_EQ(static_cast<int>(gpu.logits.size()), kSteps);
  // One GPU alone on the same inputs, for the notes: what the group adds to the kernels' error.
  auto one = testing::CreateTinyRunner((*m)->config, (*m)->weights, g.backends[0].get(), opts,
                                       testing::kTpMaxLen, testing::kTpSeqs);
  ASSERT_TRUE(one.ok()) << one.status();
  const int vocab = static_cast<int>((*m)->config.text.vocab_size);
  std::vector<std::vector<int32_t>> tables;
  for (int s = 0; s < testing::kTpSeqs; ++s) {
    tables.push_back(testing::IdentityPageTable(s, testing::kTpMaxLen / kPage));
  }
  auto rel = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return testing::MaxRelativeLogitError(a.data(), b.data(), testing::kTpSeqs, vocab);
  };
  int parted = kSteps, excused = 0, worst_step = 0;
  double worst = 0, worst_gap = 0, worst_one = 0;
  for (int i = 0; i <= kSteps; ++i) {
    const runner::StepBatch b = ReplayStep(gpu, i, tables);
    runner::StepResult r, r16, r1;
    ASSERT_TRUE((*ref)->Forward(b, &r).ok());
    const double margin = cpu.TakeMargin();
    ASSERT_TRUE(bf16.runner->Forward(b, &r16).ok());
    ASSERT_TRUE((*one)->Forward(b, &r1).ok());
    for (int s = 0; s < testing::kTpSeqs && i < kSteps; ++s) {
      const auto row = r.Row(s);
      const int want = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
      const int got = gpu.tokens[s][7 + 5 * s + i];
      if (want != got) {
        const double gap = row[want] - row[got];
        std::printf(
            "[ note ] %s tp%d: near-tie at step %d seq %d (cpu %d, gpu %d, gap %.3g of %.3g)\n",
            variant.c_str(), world, i, s, want, got, gap, MaxAbs(row));
        EXPECT_LE(gap, kNearTie * MaxAbs(row)) << "step " << i << " seq " << s;
        parted = std::min(parted, i);
      }
    }
    if (i == 0) continue;  // the group's prefill logits are not kept, only its tokens
    const double err = rel(gpu.logits[i - 1], r.logits), gap = rel(r16.logits, r.logits);
    worst_one = std::max(worst_one, rel(r1.logits, r.logits));
    if (margin < kRouterTie) {
      // An expert choice a rounding can flip: there the logits may differ by O(0.1).
      ++excused;
      if (err > testing::Bf16GapBound(gap)) {
        std::printf(
            "[ note ] %s tp%d: decode step %d, router near-tie (margin %.3g): error %.3g, "
            "bf16 CPU group %.3g\n",
            variant.c_str(), world, i, margin, err, gap);
      }
      continue;
    }
    if (err > worst) worst = err, worst_step = i;
    worst_gap = std::max(worst_gap, gap);
  }
  // As cuda_runner_test bounds a prompt's rows: the worst step against what bf16 does at its worst.
  EXPECT_LE(worst, testing::Bf16GapBound(worst_gap)) << "decode step " << worst_step;
  // The steps held to the bound must be a good share of them, or a broken MoE would pass.
  EXPECT_LE(excused, kSteps * 3 / 4) << "too few steps without a router near-tie to check";
  std::printf(
      "[ note ] %s tp%d: greedy identical to the f32 CPU for %d of %d steps; max rel logit "
      "error %.3g (bf16 CPU group's worst %.3g; one GPU's worst %.3g); %d steps with a "
      "router near-tie\n",
      variant.c_str(), world, parted, kSteps, worst, worst_gap, worst_one, excused);
}

INSTANTIATE_TEST_SUITE_P(Variants, MultiGpuTpTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" +
                                           std::to_string(std::get<1>(info.param));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(MultiGpuCollectivesTest, NcclMatchesHostSums) {
  const int world = std::min(DeviceCount(), 4);
  if (world < 2) GTEST_SKIP() << "needs 2 GPUs";
  std::vector<std::unique_ptr<backend::CudaBackend>> bes;
  std::vector<backend::Backend*> raw;
  for (int r = 0; r < world; ++r) {
    auto be = backend::CudaBackend::Create(r);
    ASSERT_TRUE(be.ok());
    raw.push_back(be->get());
    bes.push_back(std::move(*be));
  }
  // The group's all-reduce takes the custom one-shot kernel up to its limit and NCCL above it
  // (auto); GANNET_ALLREDUCE=nccl gives NCCL alone: both must give the exact sums.
  for (const char* mode : {"auto", "nccl", "custom"}) {
    setenv("GANNET_ALLREDUCE", mode, 1);
    auto comms = parallel::CreateNcclGroup(raw);
    unsetenv("GANNET_ALLREDUCE");
    ASSERT_TRUE(comms.ok()) << comms.status();
    for (int64_t bytes = 1024; bytes <= (64 << 20); bytes *= 8) {
      for (DType dt : {DType::kF32, DType::kBF16}) {
        const int64_t n = bytes / (DTypeBits(dt) / 8);
        std::vector<std::vector<float>> in(world, std::vector<float>(n));
        std::vector<testing::DeviceTensor> dev;
        std::vector<double> want(n, 0.0);
        for (int r = 0; r < world; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            // bf16-exact small integers: the sum is exact in either type.
            in[r][i] = static_cast<float>(((i * 7 + r * 13) % 64) - 32);
            want[i] += in[r][i];
          }
          ASSERT_TRUE(raw[r]->BindThread().ok());
          dev.push_back(testing::Upload(*raw[r], in[r], dt, {n}));
        }
        // Each rank's call from its own thread, as the engine's workers issue them.
        std::vector<absl::Status> st(world);
        std::vector<std::thread> threads;
        for (int r = 0; r < world; ++r) {
          threads.emplace_back([&, r] {
            st[r] = raw[r]->BindThread();
            if (st[r].ok()) st[r] = (*comms)[r]->AllReduceSum(dev[r].t);
            if (st[r].ok()) st[r] = raw[r]->Synchronize();
          });
        }
        for (auto& t : threads) t.join();
        for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << st[r];
        for (int r = 0; r < world; ++r) {
          ASSERT_TRUE(raw[r]->BindThread().ok());
          const std::vector<float> got = testing::Download(*raw[r], dev[r].t);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(got[i], want[i])
                << mode << " rank " << r << " elem " << i << " bytes " << bytes;
          }
        }
      }
    }
    if (std::string(mode) != "auto") continue;

    // The vocabulary gather: [rows, cols] blocks side by side.
    const int64_t rows = 5, cols = 1000;
    std::vector<testing::DeviceTensor> blocks, full;
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(raw[r]->BindThread().ok());
      std::vector<float> b(world * rows * cols, -1.0f);
      for (int64_t i = 0; i < rows * cols; ++i)
        b[r * rows * cols + i] = static_cast<float>(r * 100000 + i);
      blocks.push_back(testing::Upload(*raw[r], b, DType::kF32, {world, rows, cols}));
      full.push_back(testing::Upload(*raw[r], std::vector<float>(rows * cols * world, 0.0f),
                                     DType::kF32, {rows, world * cols}));
    }
    std::vector<absl::Status> st(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        st[r] = raw[r]->BindThread();
        if (st[r].ok()) st[r] = (*comms)[r]->AllGatherColumns(blocks[r].t, full[r].t);
        if (st[r].ok()) st[r] = raw[r]->Synchronize();
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(st[r].ok()) << st[r];
      ASSERT_TRUE(raw[r]->BindThread().ok());
      const std::vector<float> got = testing::Download(*raw[r], full[r].t);
      for (int64_t i = 0; i < rows; ++i) {
        for (int q = 0; q < world; ++q) {
          for (int64_t j = 0; j < cols; ++j) {
            ASSERT_EQ(got[i * world * cols + q * cols + j],
                      static_cast<float>(q * 100000 + i * cols + j));
          }
        }
      }
    }
  }  // mode
}

}  // namespace
}  // namespace gannet
