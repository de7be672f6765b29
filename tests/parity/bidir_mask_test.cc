// Bidirectional attention over image blocks (docs/vision.md) against HF transformers
// (tools/golden/bidir_mask_golden.py: the tiny 31B text model, image positions embedding their
// ordinary token ids):
//  - the CPU attention op's mask, probed with one-hot values, equals HF's sliding and full masks,
//    with f32 and FP8 KV;
//  - one-shot prefill logits with the image blocks equal HF's (the parity tolerance);
//  - the scheduler's chunked prefill never cuts a block, and under budgets that would cut one the
//    logits stay those of one-shot prefill; a block longer than a step is refused at submit;
//  - the prefix cache reuses an image block's pages for the same content hash only.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/dtype.h"
#include "lib/common/image_blocks.h"
#include "lib/engine/step_batch.h"
#include "lib/kv/kv_manager.h"
#include "lib/sched/scheduler.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

constexpr double kHfTolerance = 1e-3;    // as tests/parity/parity_test.cc
constexpr double kSelfTolerance = 2e-5;  // same backend, other step shapes
constexpr int kMaxLen = 64;

struct BidirGolden {
  std::vector<int32_t> ids;
  std::vector<ImageBlock> blocks;
  std::vector<int32_t> block_ids, sliding_mask, full_mask;
  std::vector<float> logits;
};

BidirGolden LoadBidir(const std::string& prompt) {
  BidirGolden g;
  auto file = testing::GoldenFile::Open("31b-bidir");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return g;
  std::vector<int32_t> ranges;
  EXPECT_TRUE(file->Ints(prompt + ".input_ids", &g.ids).ok());
  EXPECT_TRUE(file->Ints(prompt + ".blocks", &ranges).ok());
  EXPECT_TRUE(file->Ints(prompt + ".block_ids", &g.block_ids).ok());
  EXPECT_TRUE(file->Ints(prompt + ".sliding_mask", &g.sliding_mask).ok());
  EXPECT_TRUE(file->Ints(prompt + ".full_mask", &g.full_mask).ok());
  EXPECT_TRUE(file->Floats(prompt + ".logits", &g.logits).ok());
  for (size_t k = 0; k + 1 < ranges.size(); k += 2) {
    // Distinct content per block, as a vision tower's caller would hash distinct images.
    g.blocks.push_back({ranges[k], ranges[k + 1], 0x1000 + k});
  }
  return g;
}

const char* const kPrompts[] = {"narrow", "wide"};

// ---- The op's mask, probed: q = 0 makes every visible key equally likely, and V_j = e_j makes
// output column j the weight of key j, non-zero exactly when the query sees key j.
std::vector<int32_t> ProbeMask(const BidirGolden& g, bool sliding, bool fp8) {
  const int n = static_cast<int>(g.ids.size());
  const int d = 64, page = 16, pages = (n + page - 1) / page;
  EXPECT_LE(n, d);
  backend::CpuBackend be;
  std::vector<float> q(static_cast<size_t>(n) * d, 0.0f), out(q.size(), 0.0f);
  std::vector<float> kf(static_cast<size_t>(pages) * page * d, 0.0f), vf(kf.size(), 0.0f);
  std::vector<uint8_t> k8(kf.size(), 0), v8(kf.size(), 0);
  std::vector<float> ks(static_cast<size_t>(pages) * page, 0.0f), vs(ks.size(), 0.0f);
  std::vector<float> onehot(d);
  for (int j = 0; j < n; ++j) {
    std::fill(onehot.begin(), onehot.end(), 0.0f);
    onehot[j] = 1.0f;
    std::copy(onehot.begin(), onehot.end(), vf.begin() + static_cast<size_t>(j) * d);
    vs[j] = QuantizeFp8E4M3Row(onehot.data(), d, v8.data() + static_cast<size_t>(j) * d);
    std::fill(onehot.begin(), onehot.end(), 0.0f);
    ks[j] = QuantizeFp8E4M3Row(onehot.data(), d, k8.data() + static_cast<size_t>(j) * d);
  }
  std::vector<int32_t> positions(n), table(pages), qstart = {0, n}, lens = {n}, seq(n, 0);
  for (int i = 0; i < n; ++i) positions[i] = i;
  for (int p = 0; p < pages; ++p) table[p] = p;
  std::vector<int32_t> slots = positions;
  backend::StepMetadata md;
  md.num_seqs = 1;
  md.num_tokens = n;
  md.max_query_len = n;
  md.max_seq_len = n;
  md.query_start = md.host_query_start = qstart.data();
  md.seq_lens = md.host_seq_lens = lens.data();
  md.positions = md.host_positions = positions.data();
  md.token_seq = seq.data();
  md.image_block = md.host_image_block = g.block_ids.data();
  for (backend::KvGroupView& v : md.groups) {
    v.page_size = page;
    v.num_pages = pages;
    v.max_pages_per_seq = pages;
    v.page_table = v.host_page_table = table.data();
    v.slot_mapping = v.host_slot_mapping = slots.data();
  }
  backend::AttentionArgs a;
  a.q = backend::Tensor::Make(q.data(), DType::kF32, {n, 1, d});
  a.out = backend::Tensor::Make(out.data(), DType::kF32, {n, 1, d});
  if (fp8) {
    a.kv.k = backend::Tensor::Make(k8.data(), DType::kF8E4M3, {pages, 1, page, d});
    a.kv.v = backend::Tensor::Make(v8.data(), DType::kF8E4M3, {pages, 1, page, d});
    a.kv.k_scale = backend::Tensor::Make(ks.data(), DType::kF32, {pages, 1, page});
    a.kv.v_scale = backend::Tensor::Make(vs.data(), DType::kF32, {pages, 1, page});
  } else {
    a.kv.k = backend::Tensor::Make(kf.data(), DType::kF32, {pages, 1, page, d});
    a.kv.v = backend::Tensor::Make(vf.data(), DType::kF32, {pages, 1, page, d});
  }
  a.kv.group = sliding ? backend::kSlidingGroup : backend::kFullGroup;
  a.num_q_heads = 1;
  a.num_kv_heads = 1;
  a.head_dim = d;
  a.window = sliding ? 16 : 0;   // the tiny model's window, as in the golden
  a.image_block_mask = sliding;  // what the runner passes (lib/runner/layer_blocks.cc)
  a.meta = &md;
  absl::Status st = be.Attention(a);
  EXPECT_TRUE(st.ok()) << st;
  std::vector<int32_t> mask(static_cast<size_t>(n) * n);
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < n; ++j) mask[t * n + j] = out[static_cast<size_t>(t) * d + j] > 0 ? 1 : 0;
  }
  return mask;
}

TEST(BidirMaskTest, AttentionMaskEqualsHf) {
  for (const char* prompt : kPrompts) {
    BidirGolden g = LoadBidir(prompt);
    ASSERT_FALSE(g.ids.empty());
    ASSERT_EQ(ImageBlockIds(g.blocks, static_cast<int64_t>(g.ids.size())), g.block_ids) << prompt;
    for (bool fp8 : {false, true}) {
      EXPECT_EQ(ProbeMask(g, /*sliding=*/true, fp8), g.sliding_mask) << prompt << " fp8 " << fp8;
      EXPECT_EQ(ProbeMask(g, /*sliding=*/false, fp8), g.full_mask) << prompt << " fp8 " << fp8;
    }
  }
}

class BidirRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(/*page_size=*/16, /*max_seqs=*/2); }
  void Make(int page_size, int max_seqs) {
    auto m = testing::LoadTinyModel("31b");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    ASSERT_EQ(model_->config.text.use_bidirectional_attention, "vision");
    page_size_ = page_size;
    auto r = testing::CreateTinyRunner(
        model_->config, model_->weights, &backend_,
        testing::SimpleRunnerOptions(model_->config, page_size, kMaxLen, max_seqs, kMaxLen),
        kMaxLen, max_seqs);
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = std::move(*r);
  }

  // One-shot prefill of the whole prompt, logits for every position.
  std::vector<float> OneShot(const BidirGolden& g, bool with_blocks) {
    std::vector<int32_t> table =
        testing::IdentityPageTable(0, (kMaxLen + page_size_ - 1) / page_size_);
    StepBatch batch;
    SeqStep s;
    s.tokens = g.ids;
    s.page_table[0] = table;
    s.page_table[1] = table;
    s.logits = SeqStep::Logits::kAll;
    if (with_blocks) s.image_block = g.block_ids;
    batch.seqs.push_back(s);
    StepResult r;
    absl::Status st = runner_->Forward(batch, &r);
    EXPECT_TRUE(st.ok()) << st;
    return r.logits;
  }

  backend::CpuBackend backend_;
  std::unique_ptr<testing::LoadedModel> model_;
  std::unique_ptr<runner::ModelRunner> runner_;
  int page_size_ = 16;
};

TEST_F(BidirRunnerTest, PrefillLogitsMatchHf) {
  const int vocab = static_cast<int>(model_->config.text.vocab_size);
  for (const char* prompt : kPrompts) {
    BidirGolden g = LoadBidir(prompt);
    const int n = static_cast<int>(g.ids.size());
    std::vector<float> got = OneShot(g, true);
    ASSERT_EQ(got.size(), static_cast<size_t>(n) * vocab);
    const double err = testing::MaxRelativeLogitError(got.data(), g.logits.data(), n, vocab);
    EXPECT_LE(err, kHfTolerance) << prompt;
    RecordProperty(std::string(prompt) + "_max_rel_err", std::to_string(err));
    // Without the blocks the engine is plainly causal: far from HF's image-aware logits.
    std::vector<float> causal = OneShot(g, false);
    EXPECT_GT(testing::MaxRelativeLogitError(causal.data(), g.logits.data(), n, vocab), 1e-2)
        << prompt;
  }
}

// Drives the scheduler over one prompt with every chunk's logits rows kept; returns the rows by
// position and checks that no chunk ends inside an image block.
struct SchedRun {
  std::vector<float> logits;  // [n, vocab]
  std::vector<std::pair<int64_t, int32_t>> chunks;
  int32_t cached = 0;
};

class BidirSchedTest : public BidirRunnerTest {
 protected:
  void SetUp() override { Make(/*page_size=*/4, /*max_seqs=*/2); }

  void Init(int32_t budget) {
    auto kv = kv::KvManager::Create(runner_->kv()->layout());
    ASSERT_TRUE(kv.ok()) << kv.status();
    kv_ = std::move(*kv);
    sched::SchedulerOptions o;
    o.max_running_seqs = 2;
    o.max_step_tokens = budget;
    o.max_model_len = kMaxLen;
    sched_ = std::make_unique<sched::Scheduler>(o, kv_.get());
  }

  std::unique_ptr<sched::Request> MakeRequest(uint64_t id, const BidirGolden& g,
                                              std::vector<ImageBlock> blocks) {
    sched::RequestSpec spec;
    spec.id = id;
    spec.prompt = g.ids;
    spec.image_blocks = std::move(blocks);
    return std::make_unique<sched::Request>(std::move(spec));
  }

  // Prefills request `id` (already added) to its first sampled token, then finishes it so its
  // pages stay in the prefix cache.
  SchedRun Prefill(uint64_t id, const BidirGolden& g) {
    const int vocab = static_cast<int>(model_->config.text.vocab_size);
    const int n = static_cast<int>(g.ids.size());
    SchedRun run;
    run.logits.assign(static_cast<size_t>(n) * vocab, 0.0f);
    for (int guard = 0; guard < 4 * n; ++guard) {
      sched::StepPlan plan = sched_->Plan();
      if (plan.empty()) break;
      runner::StepBatch batch = engine::BuildStepBatch(plan, *kv_);
      batch.device_sampling.clear();
      batch.host_logits.clear();
      batch.banned_tokens.clear();
      for (SeqStep& s : batch.seqs) s.logits = SeqStep::Logits::kAll;
      StepResult r;
      absl::Status st = runner_->Forward(batch, &r);
      EXPECT_TRUE(st.ok()) << st;
      if (!st.ok()) break;
      bool done = false;
      for (const sched::ScheduledSeq& q : plan.seqs) {
        EXPECT_EQ(q.request->spec.id, id);
        run.chunks.emplace_back(q.start, q.num_tokens);
        const int64_t end = q.start + q.num_tokens;
        const ImageBlock* b = ImageBlockAt(q.request->spec.image_blocks, end);
        EXPECT_TRUE(end == n || b == nullptr || b->begin == end)
            << "a chunk ends at " << end << ", inside an image block";
        run.cached = q.request->num_cached_prompt;
        done = q.sample;
      }
      for (int row = 0; row < r.rows(); ++row) {
        std::copy(r.Row(row).begin(), r.Row(row).end(),
                  run.logits.begin() + static_cast<int64_t>(r.row_pos[row]) * vocab);
      }
      sched_->StepCompleted(plan);
      if (done) {
        sched::Request* req = plan.seqs[0].request;
        sched_->Finish(req, sched::FinishReason::kStop);
        sched_->TakeRetired();
        break;
      }
    }
    return run;
  }

  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<sched::Scheduler> sched_;
};

TEST_F(BidirSchedTest, ChunksNeverCutABlockAndMatchOneShot) {
  const int vocab = static_cast<int>(model_->config.text.vocab_size);
  BidirGolden g = LoadBidir("narrow");  // blocks [6, 11) and [14, 21)
  const int n = static_cast<int>(g.ids.size());
  const std::vector<float> one_shot = OneShot(g, true);
  // Budgets whose plain cuts (8, 16 / 9, 18 / 12) fall inside a block.
  uint64_t id = 1;
  for (int32_t budget : {8, 9, 12}) {
    Init(budget);
    ASSERT_TRUE(sched_->Add(MakeRequest(id, g, g.blocks)).ok());
    SchedRun run = Prefill(id++, g);
    ASSERT_GT(run.chunks.size(), 1u) << budget;
    EXPECT_LE(testing::MaxRelativeLogitError(run.logits.data(), one_shot.data(), n, vocab),
              kSelfTolerance)
        << "budget " << budget;
    EXPECT_LE(testing::MaxRelativeLogitError(run.logits.data(), g.logits.data(), n, vocab),
              kHfTolerance)
        << "budget " << budget;
  }
}

TEST_F(BidirSchedTest, BlockLongerThanAStepIsRefusedAtSubmit) {
  BidirGolden g = LoadBidir("wide");  // a 19-token block
  Init(/*budget=*/16);
  absl::Status st = sched_->Add(MakeRequest(1, g, g.blocks));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  // Overlapping or out-of-range blocks are refused too.
  Init(/*budget=*/32);
  EXPECT_TRUE(absl::IsInvalidArgument(sched_->Add(MakeRequest(2, g, {{6, 11, 1}, {10, 12, 2}}))));
  EXPECT_TRUE(absl::IsInvalidArgument(sched_->Add(MakeRequest(3, g, {{40, 50, 1}}))));
  EXPECT_TRUE(absl::IsInvalidArgument(sched_->Add(MakeRequest(5, g, {{6, 11, 1}, {11, 14, 2}}))));
  EXPECT_TRUE(sched_->Add(MakeRequest(4, g, g.blocks)).ok());
}

TEST_F(BidirSchedTest, PrefixCacheReusesAnImageOnlyForTheSameContent) {
  const int vocab = static_cast<int>(model_->config.text.vocab_size);
  BidirGolden g = LoadBidir("narrow");  // blocks [6, 11) and [14, 21), pages of 4
  const int n = static_cast<int>(g.ids.size());
  Init(/*budget=*/64);
  ASSERT_TRUE(sched_->Add(MakeRequest(1, g, g.blocks)).ok());
  SchedRun cold = Prefill(1, g);
  EXPECT_EQ(cold.cached, 0);

  // The same images: the whole prompt but its last page is reused.
  ASSERT_TRUE(sched_->Add(MakeRequest(2, g, g.blocks)).ok());
  SchedRun same = Prefill(2, g);
  EXPECT_EQ(same.cached, (n - 1) / 4 * 4);
  const int64_t c = same.cached;
  EXPECT_LE(testing::MaxRelativeLogitError(same.logits.data() + c * vocab,
                                           cold.logits.data() + c * vocab, n - c, vocab),
            kSelfTolerance);

  // The second image differs: reuse stops at the page holding its first position (14 -> 12).
  std::vector<ImageBlock> other = g.blocks;
  other[1].content_hash ^= 0xabcdef;
  ASSERT_TRUE(sched_->Add(MakeRequest(3, g, other)).ok());
  SchedRun changed = Prefill(3, g);
  EXPECT_EQ(changed.cached, 12);

  // The same token ids as plain text share nothing past the first image's page (6 -> 4).
  ASSERT_TRUE(sched_->Add(MakeRequest(4, g, {})).ok());
  SchedRun text = Prefill(4, g);
  EXPECT_EQ(text.cached, 4);
  EXPECT_TRUE(kv_->CheckInvariants().ok());
}

}  // namespace
}  // namespace gannet
