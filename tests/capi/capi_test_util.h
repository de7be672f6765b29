// Helpers for tests that drive the engine only through the public C ABI.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gannet/gannet.h"

namespace gannet::testing {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<float> logprobs;
  // Per token, when the request asked for logprobs: the most likely ids and their logprobs.
  std::vector<std::vector<int32_t>> top_ids;
  std::vector<std::vector<float>> top_logprobs;
  int32_t finish = 0;          // GANNET_FINISH_*
  gannet_status_t status = 0;  // ERROR events
  std::string message;
  int32_t terminal_events = 0;  // FINISH + ERROR events seen (must be exactly 1)
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_prompt_tokens = 0;
};

// Creates an engine on the CPU backend for a tiny model; `edit` may change the config.
gannet_engine_t* CreateTinyEngine(const std::string& variant,
                                  const std::function<void(gannet_engine_config_t*)>& edit = {});

// A tiny model's engine on `backend`, or nullptr (no error reported) when it cannot start.
gannet_engine_t* CreateTinyEngineOn(const std::string& variant, const char* backend);

// A greedy request for the given prompt.
// The request points into `prompt`, which must outlive its submission; a temporary would dangle
// once the statement ends (a multi-GPU test read freed memory this way), so it does not compile.
gannet_request_t GreedyRequest(const std::vector<int32_t>& prompt, int32_t max_tokens);
gannet_request_t GreedyRequest(std::vector<int32_t>&& prompt, int32_t max_tokens) = delete;

// Polls until every id in `ids` has its terminal event (or timeout_s passes); returns outcomes.
std::map<uint64_t, Outcome> WaitAll(gannet_engine_t* engine, const std::set<uint64_t>& ids,
                                    double timeout_s = 120);

// Submits and waits for one request alone.
Outcome RunAlone(gannet_engine_t* engine, const gannet_request_t& request);

// n scaled by $GANNET_TEST_SCALE (default 1; the sanitizer runs use less), at least `minimum`.
// Sanitizers slow the engine 5-20x; the concurrency they check needs the threads, not the volume.
int Scaled(int n, int minimum = 1);

// Deterministic prompt of `length` ids in [108, vocab), starting with <bos> (2).
std::vector<int32_t> MakePrompt(uint32_t seed, int length, int vocab = 512);

}  // namespace gannet::testing
