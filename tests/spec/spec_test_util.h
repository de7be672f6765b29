// Helpers of the speculative-decoding engine tests (CPU and GPU): deterministic prompts, greedy
// requests, running a batch to completion through Engine, and the draft oracle (the override
// hook replacing drafts by the true continuation most of the time).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/hash.h"
#include "lib/engine/engine.h"
#include "tests/testing/tiny_models.h"

namespace gannet::engine::spectest {

struct Outcome {
  std::vector<int32_t> tokens;
  EventFinish finish = EventFinish::kNone;
  absl::Status status;
  int drafts = 0, accepted = 0;
  std::vector<float> gaps;  // per token, top-1 minus top-2 logprob (requests with logprobs >= 2)
};

inline std::vector<int32_t> Prompt(uint32_t seed, int length) {
  std::vector<int32_t> p = {2};
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  while (static_cast<int>(p.size()) < length) {
    x = SplitMix64(x);
    p.push_back(108 + static_cast<int32_t>(x % 404));
  }
  return p;
}

inline RequestInput Greedy(const std::vector<int32_t>& prompt, int max_tokens) {
  RequestInput in;
  in.prompt_tokens = prompt;
  in.max_tokens = max_tokens;
  in.sampling.temperature = 0.0f;
  in.seed_mode = SeedMode::kFixed;
  return in;
}

// Submits everything at once and waits for every terminal event; outcomes in input order.
inline std::vector<Outcome> RunAll(Engine& engine, const std::vector<RequestInput>& inputs) {
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
        if (e.top_logprobs.size() >= 2) o.gaps.push_back(e.top_logprobs[0] - e.top_logprobs[1]);
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
  std::function<void(uint64_t, int64_t, std::vector<int32_t>*)> override_drafts = {};
  std::string backend = "cpu";
  int tensor_parallel_size = 1;     // CPU: ranks as threads (lib/parallel)
  std::string kv_cache_dtype = {};  // "" = the backend's default
  int max_model_len = 160;
};

inline std::unique_ptr<Engine> MakeEngine(const EngineSetup& s) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir(s.variant);
  c.backend = s.backend;
  c.num_threads = s.backend == "cpu" ? 2 : 0;
  c.max_model_len = s.max_model_len;
  c.page_size = s.page_size;
  c.tensor_parallel_size = s.tensor_parallel_size;
  c.kv_cache_dtype = s.kv_cache_dtype;
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

  // The outputs of a plain engine's run, in submission order (the engine numbers requests from 1).
  static Oracle From(const std::vector<Outcome>& outcomes) {
    Oracle o;
    for (const Outcome& r : outcomes) o.expected.push_back(r.tokens);
    o.first_id = 1;
    return o;
  }
  // `s` drafting K = 4 tokens per round from this oracle, which must outlive the engine.
  EngineSetup Drafting(EngineSetup s) const {
    s.spec_tokens = 4;
    s.override_drafts = [this](uint64_t id, int64_t at, std::vector<int32_t>* d) {
      Override(id, at, d);
    };
    return s;
  }

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
inline Workload Mixed(int n) {
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

}  // namespace gannet::engine::spectest
