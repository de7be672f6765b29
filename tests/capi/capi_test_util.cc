#include "tests/capi/capi_test_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/testing/tiny_models.h"

namespace gannet::testing {

gannet_engine_t* CreateTinyEngine(const std::string& variant,
                                  const std::function<void(gannet_engine_config_t*)>& edit) {
  static std::string dir;  // must outlive the create call only
  dir = TinyModelDir(variant);
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = dir.c_str();
  config.backend = "cpu";
  config.num_threads = 2;
  config.max_model_len = 256;
  if (edit) edit(&config);
  gannet_engine_t* engine = nullptr;
  gannet_status_t st = gannet_engine_create(&config, &engine);
  EXPECT_EQ(st, GANNET_OK) << gannet_last_error_message();
  return engine;
}

gannet_engine_t* CreateTinyEngineOn(const std::string& variant, const char* backend) {
  const std::string dir = TinyModelDir(variant);
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = dir.c_str();
  config.backend = backend;
  config.max_model_len = 256;
  gannet_engine_t* engine = nullptr;
  return gannet_engine_create(&config, &engine) == GANNET_OK ? engine : nullptr;
}

gannet_request_t GreedyRequest(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  gannet_request_t r = GANNET_REQUEST_INIT;
  r.prompt_tokens = prompt.data();
  r.num_prompt_tokens = prompt.size();
  r.max_tokens = max_tokens;
  return r;
}

std::map<uint64_t, Outcome> WaitAll(gannet_engine_t* engine, const std::set<uint64_t>& ids,
                                    double timeout_s) {
  std::map<uint64_t, Outcome> out;
  size_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (done < ids.size() && std::chrono::steady_clock::now() < deadline) {
    const gannet_event_t* const* events = nullptr;
    size_t n = 0;
    EXPECT_EQ(gannet_engine_poll(engine, 100, 256, &events, &n), GANNET_OK);
    for (size_t i = 0; i < n; ++i) {
      const gannet_event_t& e = *events[i];
      if (!ids.count(e.request_id)) continue;
      Outcome& o = out[e.request_id];
      if (e.text_len) o.text.append(e.text, e.text_len);
      switch (e.type) {
        case GANNET_EVENT_TOKEN:
          EXPECT_EQ(o.terminal_events, 0) << "token after the end of request " << e.request_id;
          o.tokens.push_back(e.token_id);
          o.logprobs.push_back(e.logprob);
          o.top_ids.emplace_back(e.top_token_ids, e.top_token_ids + e.num_top_logprobs);
          o.top_logprobs.emplace_back(e.top_logprobs, e.top_logprobs + e.num_top_logprobs);
          break;
        case GANNET_EVENT_FINISH:
        case GANNET_EVENT_ERROR:
          o.finish = e.finish_reason;
          o.status = e.status;
          o.message = e.message;
          o.num_cached_prompt_tokens = e.num_cached_prompt_tokens;
          o.num_prompt_tokens = e.num_prompt_tokens;
          if (++o.terminal_events == 1) ++done;
          break;
        default:
          ADD_FAILURE() << "unknown event type " << e.type;
      }
    }
  }
  EXPECT_EQ(done, ids.size()) << "timed out waiting for requests";
  return out;
}

Outcome RunAlone(gannet_engine_t* engine, const gannet_request_t& request) {
  uint64_t id = 0;
  EXPECT_EQ(gannet_engine_submit(engine, &request, &id), GANNET_OK) << gannet_last_error_message();
  return WaitAll(engine, {id})[id];
}

int Scaled(int n, int minimum) {
  static const double scale = [] {
    const char* env = std::getenv("GANNET_TEST_SCALE");
    return env ? std::atof(env) : 1.0;
  }();
  return std::max(minimum, static_cast<int>(n * scale));
}

std::vector<int32_t> MakePrompt(uint32_t seed, int length, int vocab) {
  std::vector<int32_t> p = {2};
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  while (static_cast<int>(p.size()) < length) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p.push_back(108 + static_cast<int32_t>(x % static_cast<uint64_t>(vocab - 108)));
  }
  return p;
}

}  // namespace gannet::testing
