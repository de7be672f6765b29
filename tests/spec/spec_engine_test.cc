// Speculative decoding through the engine (CPU backend, the four tiny target/drafter pairs):
//  - greedy output with drafts is token for token the output without them, for 100 concurrent
//    mixed requests, at page sizes 1, 16 and 32, with chunked prefill (small step budgets) and
//    prefix-cache hits; both with the real (random-weight) drafter, which proposes junk, and with
//    drafts replaced by the true continuation most of the time (the override hook), so that long
//    accepted runs, partial accepts and rejections all occur;
//  - min_tokens, penalties and logprobs, with junk drafts and with mostly right ones;
//  - forced preemption, stop tokens and max_tokens inside an accepted run, per-request opt-out;
//  - configuration errors name what is wrong.
#include <algorithm>
#include <cstring>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"
#include "lib/common/hash.h"
#include "lib/engine/engine.h"
#include "tests/spec/spec_test_util.h"
#include "tests/testing/tiny_models.h"

namespace gannet::engine {
namespace {

using namespace spectest;  // NOLINT: the helpers of this test family

class SpecEngineTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SpecEngineTest, GreedyWithDraftsEqualsWithout) {
  const auto [variant, page_size] = GetParam();
  // 48 requests: every prompt length of Mixed's cycle (1-48 tokens) and every output length twice,
  // a fifth of them sharing a 40-token prefix. 100 requests took this suite 311 s of a 2-core CI
  // machine and covered the same lengths twice over.
  const Workload w = Mixed(48);
  EngineSetup plain{variant, page_size};
  auto base = MakeEngine(plain);
  ASSERT_NE(base, nullptr);
  const std::vector<Outcome> expected = RunAll(*base, w.inputs);
  ASSERT_EQ(expected.size(), w.inputs.size());
  for (const Outcome& o : expected) ASSERT_TRUE(o.status.ok()) << o.status;

  // Chunked prefill (small budgets) with the real drafter and with oracle drafts.
  for (int budget : {0, 24}) {
    for (bool oracle : {false, true}) {
      const Oracle orc = Oracle::From(expected);
      EngineSetup s = plain;
      s.max_step_tokens = budget;
      s.spec_tokens = 3;
      if (oracle) s = orc.Drafting(s);
      auto engine = MakeEngine(s);
      ASSERT_NE(engine, nullptr);
      const std::vector<Outcome> got = RunAll(*engine, w.inputs);
      ASSERT_EQ(got.size(), expected.size());
      int64_t drafts = 0, accepted = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i].status.ok()) << got[i].status;
        EXPECT_EQ(got[i].tokens, expected[i].tokens)
            << variant << " page " << page_size << " budget " << budget << " oracle " << oracle
            << " request " << i;
        EXPECT_EQ(got[i].finish, expected[i].finish) << "request " << i;
        drafts += got[i].drafts;
        accepted += got[i].accepted;
      }
      const EngineStats st = engine->GetStats();
      EXPECT_EQ(st.spec_draft_tokens, drafts);
      EXPECT_EQ(st.spec_accepted_tokens, accepted);
      EXPECT_GT(drafts, 0);
      EXPECT_GT(st.prefix_cache_hit_tokens, 0);
      if (oracle) {
        // 3/4 of drafts are right: long runs must be accepted.
        EXPECT_GT(accepted, drafts / 3) << accepted << " of " << drafts;
        EXPECT_GT(st.spec_mean_accepted_length, 1.5);
      }
      EXPECT_EQ(st.kv_pages_used[0] + st.kv_pages_used[1], 0) << "pages leaked";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, SpecEngineTest,
                         ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()),
                                            ::testing::Values(1, 16, 32)),
                         [](const auto& info) {
                           std::string v = std::get<0>(info.param);
                           std::replace(v.begin(), v.end(), '-', '_');
                           return v + "_page" + std::to_string(std::get<1>(info.param));
                         });

TEST(SpecEngine, PreemptionKeepsTheOutput) {
  EngineSetup plain{"e4b", 16};
  plain.kv_full_pages = 14;
  plain.kv_sliding_pages = 16;
  plain.max_running_seqs = 8;
  plain.max_step_tokens = 64;
  std::vector<RequestInput> inputs;
  for (int i = 0; i < 8; ++i) {
    RequestInput in = Greedy(Prompt(500 + i, 40), 30);
    in.ignore_default_stop_tokens = true;
    inputs.push_back(in);
  }
  auto base = MakeEngine(plain);
  ASSERT_NE(base, nullptr);
  std::vector<Outcome> expected;
  for (const RequestInput& in : inputs) expected.push_back(RunAll(*base, {in})[0]);
  const Oracle orc = Oracle::From(expected);
  auto engine = MakeEngine(orc.Drafting(plain));
  ASSERT_NE(engine, nullptr);
  const std::vector<Outcome> got = RunAll(*engine, inputs);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].status.ok()) << got[i].status;
    EXPECT_EQ(got[i].tokens, expected[i].tokens) << "request " << i;
  }
  const EngineStats st = engine->GetStats();
  EXPECT_GT(st.num_preemptions, 0);
  EXPECT_GT(st.spec_accepted_tokens, 0);
  EXPECT_EQ(st.kv_pages_used[0] + st.kv_pages_used[1], 0);
}

// A stop token inside an accepted run ends the output there; max_tokens cuts a run short.
TEST(SpecEngine, StopsInsideAcceptedRuns) {
  EngineSetup plain{"31b", 16};
  auto base = MakeEngine(plain);
  ASSERT_NE(base, nullptr);
  RequestInput in = Greedy(Prompt(42, 20), 24);
  in.ignore_default_stop_tokens = true;
  const Outcome full = RunAll(*base, {in})[0];
  ASSERT_EQ(full.tokens.size(), 24u);
  // Stop at the first occurrence of the token at output index 9.
  const int32_t stop = full.tokens[9];
  const size_t cut = std::find(full.tokens.begin(), full.tokens.end(), stop) - full.tokens.begin();
  RequestInput stopping = in;
  stopping.stop_token_ids = std::vector<int32_t>{stop};
  RequestInput short_max = in;
  short_max.max_tokens = 11;
  RequestInput opted_out = in;
  opted_out.disable_speculation = true;

  EngineSetup s = plain;
  s.spec_tokens = 8;
  s.override_drafts = [&full](uint64_t, int64_t at, std::vector<int32_t>* d) {
    for (size_t k = 0; k < d->size(); ++k) {
      if (at + static_cast<int64_t>(k) < static_cast<int64_t>(full.tokens.size())) {
        (*d)[k] = full.tokens[at + k];  // always right: whole runs accepted
      }
    }
  };
  auto engine = MakeEngine(s);
  ASSERT_NE(engine, nullptr);
  const std::vector<Outcome> got = RunAll(*engine, {stopping, short_max, opted_out, in});
  EXPECT_EQ(got[0].tokens,
            std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + cut + 1));
  EXPECT_EQ(got[0].finish, EventFinish::kStop);
  EXPECT_EQ(got[1].tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 11));
  EXPECT_EQ(got[1].finish, EventFinish::kLength);
  EXPECT_EQ(got[2].tokens, full.tokens);
  EXPECT_EQ(got[2].drafts, 0) << "the opted-out request was given drafts";
  EXPECT_EQ(got[3].tokens, full.tokens);
  EXPECT_GT(got[3].accepted, 15);  // 24 tokens in about 3 rounds of 8
  EXPECT_EQ(got[3].accepted, got[3].drafts);
}

// Request options that change each token's draw -- min_tokens holding back stop ids, repetition,
// presence and frequency penalties (counting the drafts before each position), logprobs -- give
// the same greedy output with drafts as without, whether the drafts are junk (the real drafter)
// or mostly right (the oracle): a verify chunk must prepare each row as plain decoding does.
void ExpectOptionsKeepTheOutput(const std::string& variant) {
  EngineSetup plain{variant, 16};
  auto base = MakeEngine(plain);
  ASSERT_NE(base, nullptr);
  RequestInput free_run = Greedy(Prompt(300, 20), 24);
  free_run.ignore_default_stop_tokens = true;
  const Outcome free_out = RunAll(*base, {free_run})[0];
  ASSERT_EQ(free_out.tokens.size(), 24u);

  std::vector<RequestInput> inputs;
  RequestInput held = free_run;  // the stop id it would emit third, held back until output 9
  held.stop_token_ids = std::vector<int32_t>{free_out.tokens[2]};
  held.min_tokens = 8;
  inputs.push_back(held);
  RequestInput penalized = free_run;
  penalized.sampling.repetition_penalty = 1.5f;
  penalized.sampling.presence_penalty = 0.4f;
  penalized.sampling.frequency_penalty = 0.3f;
  inputs.push_back(penalized);
  RequestInput both = penalized;
  both.prompt_tokens = Prompt(301, 12);
  both.stop_token_ids = std::vector<int32_t>{free_out.tokens[1]};
  both.min_tokens = 5;
  both.logprobs = 3;
  inputs.push_back(both);
  RequestInput repeats = penalized;  // a prompt of one token repeated: penalties bite at once
  repeats.prompt_tokens = std::vector<int32_t>(16, free_out.tokens[0]);
  repeats.sampling.repetition_penalty = 3.0f;
  inputs.push_back(repeats);

  const std::vector<Outcome> expected = RunAll(*base, inputs);
  ASSERT_EQ(expected.size(), inputs.size());
  for (const Outcome& o : expected) ASSERT_TRUE(o.status.ok()) << o.status;
  // The options did change the output, so the comparison below can fail.
  EXPECT_NE(expected[1].tokens, free_out.tokens);
  EXPECT_GT(expected[0].tokens.size(), 8u);

  for (bool oracle : {false, true}) {
    const Oracle orc = Oracle::From(expected);
    EngineSetup s = plain;
    s.spec_tokens = 3;
    if (oracle) s = orc.Drafting(s);
    auto engine = MakeEngine(s);
    ASSERT_NE(engine, nullptr);
    const std::vector<Outcome> got = RunAll(*engine, inputs);
    ASSERT_EQ(got.size(), expected.size());
    int accepted = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i].status.ok()) << got[i].status;
      EXPECT_EQ(got[i].tokens, expected[i].tokens)
          << variant << " oracle " << oracle << " request " << i;
      EXPECT_EQ(got[i].finish, expected[i].finish) << "request " << i;
      EXPECT_GT(got[i].drafts, 0) << "request " << i << " was not speculated";
      accepted += got[i].accepted;
    }
    EXPECT_EQ(got[2].gaps.size(), got[2].tokens.size()) << "logprobs missing under speculation";
    if (oracle) {
      EXPECT_GT(accepted, 10) << "the oracle's drafts were not accepted";
    }
  }
}

TEST(SpecEngine, RequestOptionsKeepTheOutput) {
  for (const std::string& variant : testing::TargetVariants()) {
    SCOPED_TRACE(variant);
    ExpectOptionsKeepTheOutput(variant);
  }
}

// Rewrites a safetensors file with its header one space longer (JSON allows it), so that every
// tensor starts one byte past where it did: legal, and misaligned for every type wider than a byte.
void MisalignByOneByte(const std::string& path) {
  absl::StatusOr<std::string> read = ReadFileToString(path, int64_t{1} << 30, "tiny checkpoint");
  ASSERT_TRUE(read.ok()) << read.status();
  const std::string& bytes = *read;
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian, as the format (and this machine) is
  ASSERT_LE(n + 8, bytes.size());
  const uint64_t padded = n + 1;
  std::string out(reinterpret_cast<const char*>(&padded), 8);
  out += bytes.substr(8, n) + " " + bytes.substr(8 + n);
  ASSERT_TRUE(WriteStringToFile(path, out).ok());
}

// A checkpoint whose tensors are all misaligned (safetensors.h serves them in place; every reader
// copies bytes out) gives the same greedy output as the original, drafter included (E2B's
// assistant reads its int64 token ordering on the host).
TEST(SpecEngine, MisalignedCheckpointsGiveTheSameOutput) {
  for (const std::string variant : {"e2b", "26b-a4b"}) {
    SCOPED_TRACE(variant);
    // Per process: ctest runs this binary twice at once (spec_engine_test and
    // spec_engine_small_test), and one run's copy must not be rewritten under the other's reads.
    const std::string root =
        ::testing::TempDir() + "/misaligned_" + std::to_string(::getpid()) + "_" + variant;
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    for (const std::string& dir : {variant, variant + "-assistant"}) {
      std::filesystem::copy(testing::TinyModelDir(dir), root + "/" + dir,
                            std::filesystem::copy_options::recursive);
      MisalignByOneByte(root + "/" + dir + "/model.safetensors");
    }
    auto run = [&](const std::string& target, const std::string& assistant) {
      EngineConfig c;
      c.model_dir = target;
      c.draft_model_dir = assistant;
      c.num_speculative_tokens = 3;
      c.backend = "cpu";
      c.num_threads = 2;
      c.max_model_len = 96;
      auto e = Engine::Create(c);
      EXPECT_TRUE(e.ok()) << e.status();
      if (!e.ok()) return Outcome{};
      RequestInput in = Greedy(Prompt(77, 24), 20);
      in.ignore_default_stop_tokens = true;
      return RunAll(**e, {in})[0];
    };
    const Outcome want =
        run(testing::TinyModelDir(variant), testing::TinyModelDir(variant + "-assistant"));
    const Outcome got = run(root + "/" + variant, root + "/" + variant + "-assistant");
    ASSERT_EQ(want.tokens.size(), 20u);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.drafts, want.drafts);
    EXPECT_EQ(got.accepted, want.accepted);
    std::filesystem::remove_all(root);
  }
}

TEST(SpecEngine, ConfigurationErrorsNameTheProblem) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir("31b");
  c.backend = "cpu";
  c.max_model_len = 64;
  c.num_speculative_tokens = 3;
  auto e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("draft_model_dir"), std::string::npos) << e.status();

  c.draft_model_dir = testing::TinyModelDir("31b-assistant");
  c.num_speculative_tokens = 9;
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("1 to 8"), std::string::npos) << e.status();

  c.num_speculative_tokens = 0;
  c.draft_model_dir = testing::TinyModelDir("e2b-assistant");
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("backbone_hidden_size"), std::string::npos) << e.status();

  c.draft_model_dir = testing::TinyModelDir("e2b");
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("not a Gemma-4 MTP assistant"), std::string::npos)
      << e.status();

  c.draft_model_dir = testing::TinyModelDir("31b-assistant");
  e = Engine::Create(c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->GetStats().num_speculative_tokens, 3);
}

}  // namespace
}  // namespace gannet::engine
