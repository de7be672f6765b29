// Decode steps replayed from CUDA graphs compute exactly what the same padded steps compute
// eagerly: the runner records one graph per (batch bucket, context-length bucket) and must give
// bit-identical logits, across batch sizes that share a bucket, contexts that cross a length
// bucket (256 -> 512) and both KV pools' page tables changing between replays.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cuda/cuda_backend.h"
#include "lib/common/status.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

constexpr int kMaxLen = 320;
constexpr int kMaxSeqs = 12;

// Prefills num_seqs prompts of ~250 tokens, then decodes greedily for `steps` steps; returns the
// logits of every decode step.
// With q > 1 each step is a speculative verify chunk: the last token and q - 1 made-up drafts,
// a logits row for each, all kept (the next chunk starts after them).
std::vector<std::vector<float>> Decode(runner::ModelRunner& r, int num_seqs, int steps,
                                       int qlen = 1) {
  const int pages = (kMaxLen + 15) / 16;
  std::vector<std::vector<int32_t>> tokens, tables;
  for (int s = 0; s < num_seqs; ++s) {
    std::vector<int32_t> p = {2};
    for (int i = 1; i < 245 + s; ++i) p.push_back(108 + (s * 97 + i * 31) % 400);
    tokens.push_back(p);
    // Non-identity tables: sequences interleave their pages across the pool.
    std::vector<int32_t> t(pages);
    for (int i = 0; i < pages; ++i) t[i] = i * kMaxSeqs + s;
    tables.push_back(t);
  }
  auto run = [&](bool prefill) {
    StepBatch b;
    for (int s = 0; s < num_seqs; ++s) {
      SeqStep q;
      const int n = static_cast<int>(tokens[s].size());
      q.tokens = prefill ? std::span<const int32_t>(tokens[s])
                         : std::span<const int32_t>(&tokens[s][n - qlen], qlen);
      if (!prefill && qlen > 1) q.logits = SeqStep::Logits::kAll;
      q.start_pos = prefill ? 0 : n - qlen;
      q.page_table[0] = tables[s];
      q.page_table[1] = tables[s];
      b.seqs.push_back(q);
    }
    StepResult res;
    absl::Status st = r.Forward(b, &res);
    EXPECT_TRUE(st.ok()) << st;
    return res;
  };
  std::vector<std::vector<float>> out;
  StepResult res = run(true);
  for (int i = 0; i < steps; ++i) {
    for (int s = 0; s < num_seqs; ++s) {
      // The last row of the sequence gives the next token; q - 1 made-up drafts follow it.
      auto row = res.Row(i == 0 ? s : s * qlen + qlen - 1);
      tokens[s].push_back(
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
      for (int d = 1; d < qlen; ++d) tokens[s].push_back(108 + (i * 31 + s * 7 + d * 13) % 400);
    }
    res = run(false);
    out.push_back(res.logits);
  }
  return out;
}

class CudaGraphTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGraphTest, GraphReplayEqualsEagerPaddedSteps) {
  if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto m = testing::LoadTinyModel(GetParam());
  ASSERT_TRUE(m.ok()) << m.status();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  auto opts = testing::SimpleRunnerOptions((*m)->config, 16, kMaxLen, kMaxSeqs, 4096);
  opts.enable_graphs = true;
  auto graphed =
      testing::CreateTinyRunner((*m)->config, (*m)->weights, be->get(), opts, kMaxLen, kMaxSeqs);
  opts.enable_graphs = false;
  opts.pad_decode_batches = true;
  auto eager =
      testing::CreateTinyRunner((*m)->config, (*m)->weights, be->get(), opts, kMaxLen, kMaxSeqs);
  ASSERT_TRUE(graphed.ok() && eager.ok());
  for (int num_seqs : {1, 3, 4, 9}) {
    // 14 decode steps from ~250 tokens cross the 256-token context bucket.
    auto a = Decode(**graphed, num_seqs, 14);
    auto b = Decode(**eager, num_seqs, 14);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i], b[i]) << GetParam() << ": " << num_seqs << " sequences, decode step " << i;
    }
  }
  // 1, 3 -> 4, 4 and 9 -> 16: buckets 1, 4, 16 (x2 length buckets), each recorded once.
  EXPECT_GE((*graphed)->num_graphs(), 4);
}

// Speculative verify chunks (K + 1 = 4 tokens per sequence) replay from graphs too.
TEST_P(CudaGraphTest, GraphReplayEqualsEagerPaddedVerifySteps) {
  if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto m = testing::LoadTinyModel(GetParam());
  ASSERT_TRUE(m.ok()) << m.status();
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  auto opts = testing::SimpleRunnerOptions((*m)->config, 16, kMaxLen, kMaxSeqs, 4096);
  opts.max_logit_rows = 4 * 16;
  opts.enable_graphs = true;
  auto graphed =
      testing::CreateTinyRunner((*m)->config, (*m)->weights, be->get(), opts, kMaxLen, kMaxSeqs);
  opts.enable_graphs = false;
  opts.pad_decode_batches = true;
  auto eager =
      testing::CreateTinyRunner((*m)->config, (*m)->weights, be->get(), opts, kMaxLen, kMaxSeqs);
  ASSERT_TRUE(graphed.ok() && eager.ok());
  for (int num_seqs : {1, 3, 9}) {
    auto a = Decode(**graphed, num_seqs, 12, /*qlen=*/4);
    auto b = Decode(**eager, num_seqs, 12, /*qlen=*/4);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i], b[i]) << GetParam() << ": " << num_seqs << " sequences, verify step " << i;
    }
  }
  EXPECT_GE((*graphed)->num_graphs(), 3);
}

// Backend::RunConcurrently inside a capture: the side branch runs on a second stream forked from
// the capture and joined back, so ops after it see both branches' results; the replay equals
// the same ops run eagerly (in order). Each branch is a long chain of in-place adds over 8 MB,
// long enough that a missing fork or join edge would let the final add read a stale buffer.
TEST(CudaConcurrentBranchesTest, CapturedBranchesForkAndJoin) {
  if (!testing::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto be = backend::CudaBackend::Create(0);
  ASSERT_TRUE(be.ok()) << be.status();
  backend::CudaBackend& gpu = **be;
  const int64_t rows = 1024, cols = 4096;
  const std::vector<float> xh = testing::RandomNormal(rows * cols, 5);
  testing::DeviceTensor x = testing::Upload(gpu, xh, DType::kF32, {rows, cols});
  testing::DeviceTensor a =
      testing::Upload(gpu, std::vector<float>(rows * cols), DType::kF32, {rows, cols});
  testing::DeviceTensor b =
      testing::Upload(gpu, std::vector<float>(rows * cols), DType::kF32, {rows, cols});
  testing::DeviceTensor c =
      testing::Upload(gpu, std::vector<float>(rows * cols), DType::kF32, {rows, cols});
  constexpr int kChain = 40;
  auto step = [&]() -> absl::Status {
    auto side = [&]() -> absl::Status {  // a = 2x, then kChain - 1 more x: (kChain + 1) x
      GANNET_RETURN_IF_ERROR(gpu.Add(x.t, x.t, a.t));
      for (int i = 1; i < kChain; ++i) GANNET_RETURN_IF_ERROR(gpu.Add(a.t, x.t, a.t));
      return absl::OkStatus();
    };
    auto main = [&]() -> absl::Status {  // b = 3x
      GANNET_RETURN_IF_ERROR(gpu.Add(x.t, x.t, b.t));
      return gpu.Add(b.t, x.t, b.t);
    };
    GANNET_RETURN_IF_ERROR(gpu.RunConcurrently(side, main));
    return gpu.Add(a.t, b.t, c.t);  // (kChain + 1 + 3) x
  };
  ASSERT_TRUE(step().ok());
  const std::vector<float> eager = testing::Download(gpu, c.t);
  for (size_t i = 0; i < eager.size(); i += 4099)
    ASSERT_NEAR(eager[i], (kChain + 4) * xh[i], 1e-3f * (kChain + 4));
  ASSERT_TRUE(gpu.Fill(c.t, NAN).ok());
  ASSERT_TRUE(gpu.Fill(a.t, NAN).ok());
  ASSERT_TRUE(gpu.BeginGraphCapture().ok());
  ASSERT_TRUE(step().ok());
  auto graph = gpu.EndGraphCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (int rep = 0; rep < 3; ++rep) {
    ASSERT_TRUE(gpu.Fill(c.t, NAN).ok());
    ASSERT_TRUE(gpu.LaunchGraph(*graph).ok());
    EXPECT_EQ(testing::Download(gpu, c.t), eager) << "replay " << rep;
  }

  // A failing side branch: the call reports it, the capture still ends (the fork was joined),
  // and the backend issues on its own stream again.
  ASSERT_TRUE(gpu.BeginGraphCapture().ok());
  const absl::Status failed =
      gpu.RunConcurrently([] { return absl::InvalidArgumentError("side branch failed"); },
                          [&] { return gpu.Add(x.t, x.t, b.t); });
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  auto abandoned = gpu.EndGraphCapture();
  if (abandoned.ok()) gpu.ReleaseGraph(*abandoned);
  ASSERT_TRUE(step().ok());
  EXPECT_EQ(testing::Download(gpu, c.t), eager);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CudaGraphTest,
                         ::testing::Values("31b", "26b-a4b", "e4b", "e2b"), [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return "v" + n;
                         });

}  // namespace
}  // namespace gannet
