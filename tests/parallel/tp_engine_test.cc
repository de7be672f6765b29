// The engine with tensor parallelism on the CPU backend (ranks as threads): TP = 2 and 4 give
// TP = 1's tokens for greedy and seeded sampled requests (top-k/top-p/min-p, penalties) served
// together, and logprobs within fp32 rounding; configuration errors are named.
#include <map>

#include "gtest/gtest.h"
#include "lib/engine/engine.h"
#include "tests/testing/tiny_models.h"

namespace gannet::engine {
namespace {

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

std::vector<RequestInput> Requests() {
  std::vector<RequestInput> v;
  for (int i = 0; i < 6; ++i) {
    RequestInput in;
    in.prompt_tokens = {2};
    for (int t = 0; t < 5 + 7 * i; ++t) in.prompt_tokens.push_back(108 + (i * 53 + t * 29) % 400);
    in.max_tokens = 12;
    in.ignore_default_stop_tokens = true;
    in.seed_mode = SeedMode::kFixed;
    in.seed = 1000 + i;
    if (i % 3 == 1) {
      in.sampling.temperature = 0.9f;
      in.sampling.top_k = 40;
      in.sampling.top_p = 0.9f;
      in.sampling.min_p = 0.02f;
    } else if (i % 3 == 2) {
      in.sampling.temperature = 0.7f;
      in.sampling.repetition_penalty = 1.2f;
      in.sampling.presence_penalty = 0.3f;
      in.logprobs = 3;
    }
    v.push_back(in);
  }
  return v;
}

std::vector<Output> Serve(const std::string& variant, int tp, const std::string& kv_dtype = "",
                          const std::string& weight_dtype = "") {
  EngineConfig c;
  c.kv_cache_dtype = kv_dtype;
  c.weight_dtype = weight_dtype;
  c.model_dir = testing::TinyModelDir(variant);
  c.backend = "cpu";
  c.num_threads = 2;
  c.max_model_len = 128;
  c.max_step_tokens = 32;  // prompts arrive in chunks next to decodes
  c.tensor_parallel_size = tp;
  auto e = Engine::Create(c);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return {};
  if (tp > 1) {
    EXPECT_NE(
        (*e)->GetStats().device_name.find("tensor parallel over " + std::to_string(tp) + " ranks"),
        std::string::npos)
        << (*e)->GetStats().device_name;
  }
  std::vector<RequestInput> reqs = Requests();
  std::map<uint64_t, int> index;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = (*e)->Submit(reqs[i]);
    EXPECT_TRUE(id.ok()) << id.status();
    if (id.ok()) index[*id] = static_cast<int>(i);
  }
  std::vector<Output> out(reqs.size());
  size_t finished = 0;
  while (finished < reqs.size()) {
    std::vector<Event> ev;
    EXPECT_TRUE((*e)->Poll(1000, 64, &ev).ok());
    for (const Event& x : ev) {
      Output& o = out[index[x.request_id]];
      if (x.type == EventType::kToken) {
        o.tokens.push_back(x.token_id);
        o.logprobs.push_back(x.logprob);
      } else {
        EXPECT_EQ(x.type, EventType::kFinish) << x.status;
        ++finished;
      }
    }
  }
  return out;
}

class TpEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TpEngineTest, TokensOfOneDevice) {
  const std::vector<Output> ref = Serve(GetParam(), 1);
  ASSERT_EQ(ref.size(), 6u);
  for (int tp : {2, 4}) {
    const std::vector<Output> got = Serve(GetParam(), tp);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].tokens, ref[i].tokens) << "tp " << tp << " request " << i;
      ASSERT_EQ(got[i].logprobs.size(), ref[i].logprobs.size());
      for (size_t t = 0; t < ref[i].logprobs.size(); ++t) {
        EXPECT_NEAR(got[i].logprobs[t], ref[i].logprobs[t], 1e-4) << "tp " << tp;
      }
    }
  }
}

// FP8 KV under tensor parallelism: each (token, head) row is quantised on its own, so a rank that
// holds some heads stores the rows one device would -- up to the last-bit differences the
// all-reduces' summation order leaves in K and V, which can move an element across an FP8 rounding
// boundary (one 6-12% step) that these tiny random models amplify within a few tokens (measured:
// every first token equal, later tokens part on 31B and E2B). So: every request is served, its
// first token is TP 1's, and most tokens come before the parting.
TEST_P(TpEngineTest, Fp8KvTokensOfOneDevice) {
  const std::vector<Output> ref = Serve(GetParam(), 1, "fp8");
  ASSERT_EQ(ref.size(), 6u);
  const std::vector<Output> got = Serve(GetParam(), 2, "fp8");
  ASSERT_EQ(got.size(), ref.size());
  size_t same = 0, total = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(got[i].tokens.size(), ref[i].tokens.size()) << "request " << i;
    ASSERT_FALSE(ref[i].tokens.empty());
    // Greedy first tokens must agree. A sampled draw need not: the ranks sum in another order,
    // an FP8 rounding flip moves the distribution a little, and a draw from a flat one (request
    // 2's first token has p ~ 0.003) lands elsewhere.
    if (i % 3 == 0) {
      EXPECT_EQ(got[i].tokens[0], ref[i].tokens[0]) << "request " << i;
    }
    size_t k = 0;
    while (k < ref[i].tokens.size() && got[i].tokens[k] == ref[i].tokens[k]) ++k;
    same += k;
    total += ref[i].tokens.size();
  }
  EXPECT_GE(2 * same, total) << same << " of " << total;
}

// weight_dtype under tensor parallelism: the trained model quantized to int4 as it loads serves
// TP 1's tokens at TP 2 (each rank quantizes the groups of its slice that one device would).
TEST(TpEngineWeightDtypeTest, Int4AtLoadTokensOfOneDevice) {
  const std::vector<Output> ref = Serve("trained", 1, "", "int4-g32");
  ASSERT_EQ(ref.size(), 6u);
  const std::vector<Output> got = Serve("trained", 2, "", "int4-g32");
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(got[i].tokens, ref[i].tokens) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, TpEngineTest, ::testing::ValuesIn(testing::TargetVariants()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(TpEngineConfigTest, ErrorsNameTheSetting) {
  EngineConfig c;
  c.model_dir = testing::TinyModelDir("31b");
  c.backend = "cpu";
  c.max_model_len = 64;
  c.tensor_parallel_size = 3;  // 4 heads
  auto e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("num_attention_heads"), std::string::npos) << e.status();
  c.tensor_parallel_size = 2;
  c.device_ids = {0, 1};
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("CPU"), std::string::npos) << e.status();
  c.device_ids = {0, 1, 2};
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("device ids"), std::string::npos) << e.status();
  // Speculative decoding with tensor parallelism: tp_spec_engine_test.
}

}  // namespace
}  // namespace gannet::engine
