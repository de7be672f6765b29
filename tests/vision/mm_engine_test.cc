// Images in the engine against HF (tools/golden/mm_prompt_golden.py): a prompt of text + image +
// text + image on the tiny multimodal checkpoints mm-31b (bidirectional image blocks) and mm-e4b
// (per-layer embeddings), CPU.
//  - runner: every prompt position's logits with the tower's features in place of the soft
//    tokens' embeddings equal HF's within 1e-3 (max abs diff / max abs logit);
//  - engine: Submit with images gives HF's greedy continuation and the last prompt row's top-20
//    log-probabilities,
//    also with step budgets that would cut an image (the scheduler keeps it whole);
//  - prefix cache: a repeated image (same pixels) reuses the KV pages, other pixels with the same
//    token ids do not;
//  - every refusal: soft-token count mismatch, more or fewer images than runs, no vision config,
//    no tower (dummy weights), a backend without the tower's ops (Unimplemented, and the engine
//    keeps serving).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/forwarding_backend.h"
#include "lib/common/image_blocks.h"
#include "lib/engine/engine.h"
#include "lib/engine/image_prompt.h"
#include "lib/model/safetensors.h"
#include "lib/vision/vision_tower.h"
#include "lib/vision/vision_weights.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using engine::Engine;
using engine::EngineConfig;
using engine::Event;
using engine::EventType;
using engine::ImageInput;
using engine::RequestInput;

constexpr double kHfTolerance = 1e-3;
constexpr int kMaxLen = 64;
constexpr int kTopLogprobs = 20;  // the first token's top log-probabilities, against HF's row
const char* const kKinds[] = {"mm-31b", "mm-e4b"};

struct MmGolden {
  std::vector<int32_t> ids, greedy;
  std::vector<float> logits;  // [n, vocab]
  std::vector<ImageInput> images;
};

// The golden's images rebuilt in the preprocessor's layout: real patches first (row-major over
// the grid, positions (x, y)), then zero pixels at (-1, -1) up to max_patches.
MmGolden LoadMm(const std::string& kind) {
  MmGolden g;
  const std::string path = testing::TestDataDir() + "/golden/" + kind + "-prompt.safetensors";
  auto file = testing::GoldenFile::Open(kind + "-prompt");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return g;
  std::vector<int32_t> max_patches;
  EXPECT_TRUE(file->Ints("input_ids", &g.ids).ok());
  EXPECT_TRUE(file->Ints("greedy", &g.greedy).ok());
  EXPECT_TRUE(file->Ints("max_patches", &max_patches).ok());
  EXPECT_TRUE(file->Floats("logits", &g.logits).ok());
  auto f = model::SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok() || max_patches.size() != 1) return g;
  const model::TensorInfo* px = (*f)->Find("pixels_u8");
  const model::TensorInfo* grid = (*f)->Find("grid");
  EXPECT_TRUE(px != nullptr && grid != nullptr);
  if (px == nullptr || grid == nullptr) return g;
  const uint8_t* u8 = (*f)->Data(*px);
  int32_t rc[4];
  std::memcpy(rc, (*f)->Data(*grid), sizeof(rc));
  constexpr int kDim = 768;
  const int P = max_patches[0];
  int64_t row = 0;
  for (int i = 0; i < 2; ++i) {
    ImageInput im;
    im.pixel_values.assign(static_cast<size_t>(P) * kDim, 0.0f);
    im.positions.assign(static_cast<size_t>(P) * 2, -1);
    const int n = rc[2 * i] * rc[2 * i + 1];
    for (int p = 0; p < n; ++p, ++row) {
      for (int c = 0; c < kDim; ++c) im.pixel_values[p * kDim + c] = u8[row * kDim + c] / 255.0f;
      im.positions[2 * p] = p % rc[2 * i + 1];
      im.positions[2 * p + 1] = p / rc[2 * i + 1];
    }
    g.images.push_back(std::move(im));
  }
  return g;
}

// ---- Runner: every position's logits -----------------------------------------------------------

TEST(MmRunnerTest, PromptLogitsWithImageFeaturesMatchHf) {
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    MmGolden g = LoadMm(kind);
    ASSERT_EQ(g.images.size(), 2u);
    auto m = testing::LoadTinyModel(kind);
    ASSERT_TRUE(m.ok()) << m.status();
    const model::ModelConfig& config = (*m)->config;
    backend::CpuBackend be;
    // The tower, as the engine loads it.
    auto part = engine::LoadVisionPart(config, testing::TinyModelDir(kind), false, 1, &be);
    ASSERT_TRUE(part.ok()) << part.status();
    ASSERT_TRUE(part->unavailable.ok()) << part->unavailable;
    auto blocks = engine::MatchImageBlocks(config, *part, g.ids, g.images);
    ASSERT_TRUE(blocks.ok()) << blocks.status();
    ASSERT_EQ(blocks->size(), 2u);
    // HF marks the soft tokens only: boi before, eoi after each block.
    for (const ImageBlock& b : *blocks) {
      EXPECT_EQ(g.ids[b.begin - 1], config.boi_token_id);
      EXPECT_EQ(g.ids[b.end], config.eoi_token_id);
    }
    auto features = engine::EncodeImages(*part->tower, g.images);
    ASSERT_TRUE(features.ok()) << features.status();

    auto r = testing::CreateTinyRunner(
        config, (*m)->weights, &be, testing::SimpleRunnerOptions(config, 16, kMaxLen, 1, kMaxLen),
        kMaxLen, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<int32_t> block_ids = ImageBlockIds(*blocks, g.ids.size());
    const std::vector<int32_t> table = testing::IdentityPageTable(0, kMaxLen / 16);
    auto run = [&](bool with_features) {
      runner::StepBatch batch;
      runner::SeqStep s;
      s.tokens = g.ids;
      s.page_table[0] = table;
      s.page_table[1] = table;
      s.logits = runner::SeqStep::Logits::kAll;
      s.image_block = block_ids;
      if (with_features) s.image_embeds = *features;
      batch.seqs.push_back(s);
      runner::StepResult res;
      absl::Status st = (*r)->Forward(batch, &res);
      EXPECT_TRUE(st.ok()) << st;
      return res.logits;
    };
    const int n = static_cast<int>(g.ids.size());
    const int vocab = static_cast<int>(config.text.vocab_size);
    std::vector<float> got = run(true);
    ASSERT_EQ(got.size(), static_cast<size_t>(n) * vocab);
    const double err = testing::MaxRelativeLogitError(got.data(), g.logits.data(), n, vocab);
    EXPECT_LE(err, kHfTolerance);
    RecordProperty(std::string(kind) + "_max_rel_err", std::to_string(err));
    std::printf("%s: prompt logits max rel err vs HF %.3g\n", kind, err);
    // The features matter: the image token's own embedding gives other logits.
    std::vector<float> plain = run(false);
    EXPECT_GT(testing::MaxRelativeLogitError(plain.data(), g.logits.data(), n, vocab), 1e-2);
    // A wrong number of feature values is refused.
    runner::StepBatch bad;
    runner::SeqStep s;
    s.tokens = g.ids;
    s.page_table[0] = table;
    s.page_table[1] = table;
    s.image_block = block_ids;
    s.image_embeds = std::span<const float>(features->data(), features->size() - 1);
    bad.seqs.push_back(s);
    runner::StepResult res;
    EXPECT_EQ((*r)->Forward(bad, &res).code(), absl::StatusCode::kInvalidArgument);
  }
}

// ---- Engine
// --------------------------------------------------------------------------------------

// The CPU backend without the vision ops (as the CUDA backend is today): the base Backend's
// answers, Unimplemented.
class NoVisionBackend : public backend::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Clamp(backend::Tensor x, float lo, float hi, backend::Tensor out) override {
    return Backend::Clamp(x, lo, hi, out);
  }
  absl::Status VisionRope(backend::Tensor x, backend::Tensor positions, float theta) override {
    return Backend::VisionRope(x, positions, theta);
  }
  absl::Status SegmentAttention(const backend::SegmentAttentionArgs& a) override {
    return Backend::SegmentAttention(a);
  }
  absl::Status ScatterSumRows(backend::Tensor x, backend::Tensor dest, float scale,
                              backend::Tensor out) override {
    return Backend::ScatterSumRows(x, dest, scale, out);
  }
  absl::Status Standardize(backend::Tensor x, backend::Tensor bias,
                           backend::Tensor scale) override {
    return Backend::Standardize(x, bias, scale);
  }
};

std::unique_ptr<Engine> MakeEngine(const std::string& kind, int max_step_tokens = 0,
                                   bool no_vision_ops = false, bool dummy = false) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir(kind);
  c.backend = "cpu";
  c.max_model_len = kMaxLen;
  c.page_size = 16;
  c.max_step_tokens = max_step_tokens;
  if (dummy) c.load_format = "dummy";
  if (no_vision_ops) {
    c.wrap_backend = [](std::unique_ptr<backend::Backend> b) -> std::unique_ptr<backend::Backend> {
      return std::make_unique<NoVisionBackend>(std::move(b));
    };
  }
  auto e = Engine::Create(c);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

RequestInput Greedy(const std::vector<int32_t>& ids, std::vector<ImageInput> images, int n) {
  RequestInput in;
  in.prompt_tokens = ids;
  in.images = std::move(images);
  in.max_tokens = n;
  in.min_tokens = n;
  in.ignore_default_stop_tokens = true;
  in.logprobs = kTopLogprobs;
  return in;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  Event first;  // the first TOKEN event (its top log-probabilities)
  Event last;
};

Outcome RunRequest(Engine& e, RequestInput in) {
  Outcome o;
  auto id = e.Submit(std::move(in));
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return o;
  while (true) {
    std::vector<Event> ev;
    EXPECT_TRUE(e.Poll(1000, 64, &ev).ok());
    for (Event& x : ev) {
      if (x.request_id != *id) continue;
      if (x.type == EventType::kToken) {
        if (o.tokens.empty()) o.first = x;
        o.tokens.push_back(x.token_id);
        o.logprobs.push_back(x.logprob);
        continue;
      }
      o.last = x;
      return o;
    }
  }
}

// log softmax of HF's last prompt row at `token`.
double HfLogprob(const MmGolden& g, int vocab, int token) {
  const float* row = g.logits.data() + (g.ids.size() - 1) * vocab;
  const double mx = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
  return row[token] - mx - std::log(sum);
}

TEST(MmEngineTest, GreedyWithImagesMatchesHfAtEveryStepBudget) {
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    MmGolden g = LoadMm(kind);
    ASSERT_EQ(g.images.size(), 2u);
    const int vocab = static_cast<int>(g.logits.size() / g.ids.size());
    // Images at positions 5..10 and 18..21 of 27. 0: the default budget (one step). The others
    // would cut: 6 (the block's size), 7 and 8 image 0 and then image 1 ([0, 5) [5, 12) then a
    // cut at 19; [0, 5) [5, 13) then 21), 9 image 0, 20 image 1.
    double worst = 0;  // largest |ours - HF| over the top log-probabilities, every budget
    for (int budget : {0, 6, 7, 8, 9, 20}) {
      SCOPED_TRACE(budget);
      std::unique_ptr<Engine> e = MakeEngine(kind, budget);
      ASSERT_NE(e, nullptr);
      Outcome o = RunRequest(*e, Greedy(g.ids, g.images, static_cast<int>(g.greedy.size())));
      ASSERT_TRUE(o.last.status.ok()) << o.last.status;
      EXPECT_EQ(o.tokens, g.greedy);
      if (budget > 0) {
        // The prompt really was split: at least ceil(n / budget) prefill steps, then a step per
        // further token.
        const int64_t n = static_cast<int64_t>(g.ids.size());
        EXPECT_GE(e->GetStats().num_steps,
                  (n + budget - 1) / budget + static_cast<int64_t>(g.greedy.size()) - 1);
      }
      ASSERT_FALSE(o.logprobs.empty());
      const double hf = HfLogprob(g, vocab, g.greedy[0]);
      EXPECT_NEAR(o.logprobs[0], hf, 1e-3);
      // The last prompt position's row: its top log-probabilities equal HF's at the same ids.
      ASSERT_EQ(o.first.top_ids.size(), static_cast<size_t>(kTopLogprobs));
      for (int k = 0; k < kTopLogprobs; ++k) {
        const double want = HfLogprob(g, vocab, o.first.top_ids[k]);
        EXPECT_NEAR(o.first.top_logprobs[k], want, 1e-3) << k;
        worst = std::max(worst, std::abs(o.first.top_logprobs[k] - want));
      }
    }
    std::printf("%s: top-%d log-probabilities, max |ours - HF| %.3g over every budget\n", kind,
                kTopLogprobs, worst);
  }
}

TEST(MmEngineTest, PrefixCacheReusesARepeatedImageOnly) {
  MmGolden g = LoadMm("mm-31b");
  ASSERT_EQ(g.images.size(), 2u);
  std::unique_ptr<Engine> e = MakeEngine("mm-31b");
  ASSERT_NE(e, nullptr);
  const int n = static_cast<int>(g.greedy.size());
  Outcome first = RunRequest(*e, Greedy(g.ids, g.images, n));
  ASSERT_TRUE(first.last.status.ok()) << first.last.status;
  EXPECT_EQ(first.last.num_cached_prompt_tokens, 0);
  // Same pixels: the full page holding image 0 (positions 0..15) is reused, the answer is HF's.
  Outcome again = RunRequest(*e, Greedy(g.ids, g.images, n));
  ASSERT_TRUE(again.last.status.ok()) << again.last.status;
  EXPECT_GE(again.last.num_cached_prompt_tokens, 16);
  EXPECT_EQ(again.tokens, g.greedy);
  // Other pixels for image 0, same token ids: nothing is reused.
  std::vector<ImageInput> other = g.images;
  other[0].pixel_values[0] = 1.0f - other[0].pixel_values[0];
  Outcome changed = RunRequest(*e, Greedy(g.ids, other, n));
  ASSERT_TRUE(changed.last.status.ok()) << changed.last.status;
  EXPECT_EQ(changed.last.num_cached_prompt_tokens, 0);
}

TEST(MmEngineTest, RefusesImagesThatDoNotFitThePrompt) {
  MmGolden g = LoadMm("mm-31b");
  ASSERT_EQ(g.images.size(), 2u);
  std::unique_ptr<Engine> e = MakeEngine("mm-31b");
  ASSERT_NE(e, nullptr);
  auto submit = [&](std::vector<int32_t> ids, std::vector<ImageInput> images) {
    return e->Submit(Greedy(ids, std::move(images), 4)).status();
  };
  // Image 0's run one token short.
  std::vector<int32_t> shorter = g.ids;
  auto first_image = std::find(shorter.begin(), shorter.end(), 7);
  shorter.erase(first_image);
  absl::Status st = submit(shorter, g.images);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("image 0"), std::string::npos) << st;
  EXPECT_NE(st.message().find("5 image tokens"), std::string::npos) << st;
  EXPECT_NE(st.message().find("6 soft tokens"), std::string::npos) << st;
  // More images than runs, fewer images than runs, runs without images.
  std::vector<ImageInput> three = g.images;
  three.push_back(g.images[0]);
  EXPECT_EQ(submit(g.ids, three).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(submit(g.ids, {g.images[0]}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(submit(g.ids, {}).code(), absl::StatusCode::kInvalidArgument);
  // Malformed pixels: sizes that do not make [patches, 768].
  std::vector<ImageInput> cut = g.images;
  cut[1].pixel_values.pop_back();
  st = submit(g.ids, cut);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("image 1"), std::string::npos) << st;
  // Still serving.
  EXPECT_EQ(RunRequest(*e, Greedy(g.ids, g.images, 4)).tokens.size(), 4u);
}

TEST(MmEngineTest, RefusesImagesWithoutATower) {
  MmGolden g = LoadMm("mm-31b");
  ASSERT_EQ(g.images.size(), 2u);
  // tiny/e2b is a text model (no vision_config): images are refused; without images its prompt
  // is plain text (its image token id is outside the tiny vocabulary).
  std::unique_ptr<Engine> text = MakeEngine("e2b");
  ASSERT_NE(text, nullptr);
  absl::Status st = text->Submit(Greedy(g.ids, g.images, 4)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("vision_config"), std::string::npos) << st;
  EXPECT_TRUE(text->Submit(Greedy(g.ids, {}, 4)).ok());
  // tiny/31b's vision_config is the default tower, but its checkpoint's tower has other shapes:
  // the text model serves, images are refused naming why.
  std::unique_ptr<Engine> broken = MakeEngine("31b");
  ASSERT_NE(broken, nullptr);
  st = broken->Submit(Greedy(g.ids, g.images, 4)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("vision tower does not load"), std::string::npos) << st;
  EXPECT_TRUE(broken->Submit(Greedy(g.ids, {}, 4)).ok());
  // Dummy weights have no tower: image tokens and images refused.
  std::unique_ptr<Engine> dummy = MakeEngine("mm-31b", 0, false, true);
  ASSERT_NE(dummy, nullptr);
  EXPECT_EQ(dummy->Submit(Greedy(g.ids, g.images, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dummy->Submit(Greedy(g.ids, {}, 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MmEngineTest, BackendWithoutTheTowerOpsRefusesImagesAndKeepsServing) {
  MmGolden g = LoadMm("mm-e4b");
  ASSERT_EQ(g.images.size(), 2u);
  std::unique_ptr<Engine> e = MakeEngine("mm-e4b", 0, /*no_vision_ops=*/true);
  ASSERT_NE(e, nullptr);
  absl::Status st = e->Submit(Greedy(g.ids, g.images, 4)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  // A text request on the same engine is served.
  Outcome o = RunRequest(*e, Greedy({2, 40, 41, 42}, {}, 4));
  EXPECT_TRUE(o.last.status.ok()) << o.last.status;
  EXPECT_EQ(o.tokens.size(), 4u);
}

}  // namespace
}  // namespace gannet
