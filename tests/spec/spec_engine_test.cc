// Speculative decoding through the engine (CPU backend, the four tiny target/drafter pairs):
//  - greedy output with drafts is token for token the output without them, for 100 concurrent
//    mixed requests, at page sizes 1, 16 and 32, with chunked prefill (small step budgets) and
//    prefix-cache hits; both with the real (random-weight) drafter, which proposes junk, and with
//    drafts replaced by the true continuation most of the time (the override hook), so that long
//    accepted runs, partial accepts and rejections all occur;
//  - forced preemption, stop tokens and max_tokens inside an accepted run, per-request opt-out;
//  - configuration errors name what is wrong.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/hash.h"
#include "lib/engine/engine.h"
#include "tests/testing/tiny_models.h"

namespace gannet::engine {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  EventFinish finish = EventFinish::kNone;
  absl::Status status;
  int drafts = 0, accepted = 0;
};

std::vector<int32_t> Prompt(uint32_t seed, int length) {
  std::vector<int32_t> p = {2};
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  while (static_cast<int>(p.size()) < length) {
    x = SplitMix64(x);
    p.push_back(108 + static_cast<int32_t>(x % 404));
  }
  return p;
}

RequestInput Greedy(const std::vector<int32_t>& prompt, int max_tokens) {
  RequestInput in;
  in.prompt_tokens = prompt;
  in.max_tokens = max_tokens;
  in.sampling.temperature = 0.0f;
  in.seed_mode = SeedMode::kFixed;
  return in;
}

// Submits everything at once and waits for every terminal event; outcomes in input order.
std::vector<Outcome> RunAll(Engine& engine, const std::vector<RequestInput>& inputs) {
  std::vector<uint64_t> ids;
  std::map<uint64_t, Outcome> out;
  for (const RequestInput& in : inputs) {
    auto id = engine.Submit(in);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return {};
    ids.push_back(*id);
  }
  size_t done = 0;
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (done < ids.size() && std::chrono::steady_clock::now() < deadline) {
    events.clear();
    EXPECT_TRUE(engine.Poll(100, 1024, &events).ok());
    for (Event& e : events) {
      Outcome& o = out[e.request_id];
      if (e.type == EventType::kToken) {
        o.tokens.push_back(e.token_id);
        continue;
      }
      o.finish = e.finish;
      o.status = e.status;
      o.drafts = e.num_draft_tokens;
      o.accepted = e.num_accepted_draft_tokens;
      ++done;
    }
  }
  EXPECT_EQ(done, ids.size()) << "timed out";
  std::vector<Outcome> ordered;
  for (uint64_t id : ids) ordered.push_back(out[id]);
  return ordered;
}

struct EngineSetup {
  std::string variant;
  int page_size = 16;
  int max_step_tokens = 0;
  int spec_tokens = 0;  // 0: no drafter
  int max_running_seqs = 0;
  int kv_full_pages = 0, kv_sliding_pages = 0;
  std::function<void(uint64_t, int64_t, std::vector<int32_t>*)> override_drafts;
};

std::unique_ptr<Engine> MakeEngine(const EngineSetup& s) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir(s.variant);
  c.backend = "cpu";
  c.num_threads = 2;
  c.max_model_len = 160;
  c.page_size = s.page_size;
  c.max_step_tokens = s.max_step_tokens;
  c.max_running_seqs = s.max_running_seqs;
  c.kv_full_pages = s.kv_full_pages;
  c.kv_sliding_pages = s.kv_sliding_pages;
  if (s.spec_tokens > 0) {
    c.draft_model_dir = testing::TinyModelDir(s.variant + "-assistant");
    c.num_speculative_tokens = s.spec_tokens;
    c.override_drafts = s.override_drafts;
  }
  auto e = Engine::Create(c);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// Drafts that are the true continuation (recorded from a plain run) at each position with
// probability 3/4, else a wrong token: long accepted runs, partial accepts and rejections.
struct Oracle {
  std::vector<std::vector<int32_t>> expected;  // by submission index
  uint64_t first_id = 0;
  void Override(uint64_t id, int64_t first_output, std::vector<int32_t>* drafts) const {
    const uint64_t index = id - first_id;
    if (index >= expected.size()) return;
    const std::vector<int32_t>& truth = expected[index];
    for (size_t k = 0; k < drafts->size(); ++k) {
      const int64_t at = first_output + static_cast<int64_t>(k);
      const uint64_t h = SplitMix64(id * 1315423911u + at);
      if (at < static_cast<int64_t>(truth.size()) && h % 4 != 0) {
        (*drafts)[k] = truth[at];
      } else {
        (*drafts)[k] = static_cast<int32_t>(108 + h % 400);
      }
    }
  }
};

struct Workload {
  std::vector<RequestInput> inputs;
};

// 100 mixed requests; every fifth shares a 40-token prefix (prefix-cache hits).
Workload Mixed(int n) {
  Workload w;
  const std::vector<int32_t> shared = Prompt(7, 40);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = Prompt(1000 + i, 1 + (i * 37) % 48);
    if (i % 5 == 0) {
      p = shared;
      p.push_back(200 + i);
    }
    RequestInput in = Greedy(p, 1 + (i * 11) % 24);
    in.ignore_default_stop_tokens = i % 3 != 0;
    w.inputs.push_back(in);
  }
  return w;
}

class SpecEngineTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(SpecEngineTest, GreedyWithDraftsEqualsWithout) {
  const auto [variant, page_size] = GetParam();
  const Workload w = Mixed(100);
  EngineSetup plain{variant, page_size};
  auto base = MakeEngine(plain);
  ASSERT_NE(base, nullptr);
  const std::vector<Outcome> expected = RunAll(*base, w.inputs);
  ASSERT_EQ(expected.size(), w.inputs.size());
  for (const Outcome& o : expected) ASSERT_TRUE(o.status.ok()) << o.status;

  // Chunked prefill (small budgets) with the real drafter and with oracle drafts.
  for (int budget : {0, 24}) {
    for (bool oracle : {false, true}) {
      Oracle orc;
      for (const Outcome& o : expected) orc.expected.push_back(o.tokens);
      orc.first_id = 1;  // the engine numbers requests from 1
      EngineSetup s = plain;
      s.max_step_tokens = budget;
      s.spec_tokens = oracle ? 4 : 3;
      if (oracle) {
        s.override_drafts = [&orc](uint64_t id, int64_t at, std::vector<int32_t>* d) {
          orc.Override(id, at, d);
        };
      }
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

INSTANTIATE_TEST_SUITE_P(
    Pairs, SpecEngineTest,
    ::testing::Combine(::testing::ValuesIn(testing::TargetVariants()), ::testing::Values(1, 16, 32)),
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
  Oracle orc;
  for (const Outcome& o : expected) orc.expected.push_back(o.tokens);
  orc.first_id = 1;
  EngineSetup s = plain;
  s.spec_tokens = 4;
  s.override_drafts = [&orc](uint64_t id, int64_t at, std::vector<int32_t>* d) {
    orc.Override(id, at, d);
  };
  auto engine = MakeEngine(s);
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
  EXPECT_EQ(got[0].tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + cut + 1));
  EXPECT_EQ(got[0].finish, EventFinish::kStop);
  EXPECT_EQ(got[1].tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 11));
  EXPECT_EQ(got[1].finish, EventFinish::kLength);
  EXPECT_EQ(got[2].tokens, full.tokens);
  EXPECT_EQ(got[2].drafts, 0) << "the opted-out request was given drafts";
  EXPECT_EQ(got[3].tokens, full.tokens);
  EXPECT_GT(got[3].accepted, 15);  // 24 tokens in about 3 rounds of 8
  EXPECT_EQ(got[3].accepted, got[3].drafts);
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
