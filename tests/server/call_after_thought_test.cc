// A forced tool call with thinking on (examples/server/call_after_thought.h): phase 1's tokens
// (kept, dropped, when to cancel), phase 2's size, seed and request, and the prompt ids the
// server computes through the public tokenizer calls, against the engine's own tokenization.
// Ids are Gemma-4's: <|channel> 100, <channel|> 101.
#include "examples/server/call_after_thought.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace gannet_server {
namespace {

ApiRequest Parse(const std::string& body) {
  auto parsed = ParseApiRequest(Endpoint::kChat, body);
  if (auto* e = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << e->message;
  return std::get<ApiRequest>(parsed);
}

const std::string kTools = R"("tools": [{"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}}}}])";

ApiRequest Forced(const std::string& messages, const std::string& extra = "") {
  return Parse(R"({"messages": )" + messages + ", " + kTools +
               R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
               "chat_template_kwargs": {"enable_thinking": true})" +
               extra + "}");
}

const std::string kUser = R"([{"role": "user", "content": "Weather in Paris?"}])";

TEST(ThoughtPhaseTest, KeepsTheThoughtThroughItsClose) {
  ThoughtPhase t(100, 101);
  EXPECT_FALSE(t.call_follows());
  for (int32_t id : {100, 7, 8, 9}) {
    EXPECT_TRUE(t.Keep(id));
    EXPECT_FALSE(t.cancel_now());
    EXPECT_FALSE(t.call_follows());
  }
  EXPECT_TRUE(t.Keep(101));
  EXPECT_TRUE(t.call_follows());
  // The engine stops at <channel|> by itself; cancelling covers min_tokens, which defers it.
  EXPECT_TRUE(t.cancel_now());
  t.cancelled();
  EXPECT_FALSE(t.cancel_now());
  // Anything the engine still writes after the close is not the reply's.
  EXPECT_FALSE(t.Keep(12));
  EXPECT_FALSE(t.Keep(101));
  EXPECT_FALSE(t.cancel_now());
  EXPECT_EQ(t.thought(), (std::vector<int32_t>{100, 7, 8, 9, 101}));
}

TEST(ThoughtPhaseTest, AnAnswerWithoutThinkingBecomesTheCall) {
  // The first token is not <|channel>: the model answers at once, and its answer must be the
  // call, so that token goes and the call is forced right after the prompt.
  ThoughtPhase t(100, 101);
  EXPECT_FALSE(t.Keep(7));
  EXPECT_TRUE(t.cancel_now());
  EXPECT_TRUE(t.call_follows());
  EXPECT_TRUE(t.thought().empty());
  t.cancelled();
  EXPECT_FALSE(t.Keep(100));  // a channel opened later is not a thought before the call
  EXPECT_TRUE(t.thought().empty());
  // A vocabulary without the channel tokens cannot think: the call comes at once.
  ThoughtPhase none(-1, -1);
  EXPECT_FALSE(none.Keep(-1));
  EXPECT_TRUE(none.call_follows());
}

TEST(ThoughtPhaseTest, AThoughtThatNeverClosesEndsTheReply) {
  // max_tokens, the context or a stop inside the thought: no call follows.
  ThoughtPhase t(100, 101);
  for (int32_t id : {100, 7, 100, 8}) EXPECT_TRUE(t.Keep(id));
  EXPECT_FALSE(t.call_follows());
  EXPECT_FALSE(t.cancel_now());
  EXPECT_EQ(t.thought().size(), 4u);
}

TEST(PlanCallPhaseTest, MaxTokensBoundsBothPhases) {
  CallPhasePlan p = PlanCallPhase(12, 0, 5, 40, 8192);
  EXPECT_TRUE(p.submit);
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.min_tokens, 0);
  // The thought took every token: no call (finish_reason length).
  EXPECT_FALSE(PlanCallPhase(5, 0, 5, 40, 8192).submit);
  EXPECT_FALSE(PlanCallPhase(4, 0, 5, 40, 8192).submit);
  EXPECT_TRUE(PlanCallPhase(6, 0, 5, 40, 8192).submit);
  EXPECT_EQ(PlanCallPhase(6, 0, 5, 40, 8192).max_tokens, 1);
  // No max_tokens: until the context is full, in phase 2 too.
  p = PlanCallPhase(0, 0, 5, 40, 8192);
  EXPECT_TRUE(p.submit);
  EXPECT_EQ(p.max_tokens, 0);
  // min_tokens counts the thought; never above phase 2's max.
  EXPECT_EQ(PlanCallPhase(0, 9, 5, 40, 8192).min_tokens, 4);
  EXPECT_EQ(PlanCallPhase(0, 3, 5, 40, 8192).min_tokens, 0);
  EXPECT_EQ(PlanCallPhase(7, 7, 5, 40, 8192).min_tokens, 2);
  // A prompt that fills the context leaves no room for the call.
  EXPECT_FALSE(PlanCallPhase(0, 0, 5, 8192, 8192).submit);
  EXPECT_TRUE(PlanCallPhase(0, 0, 5, 8191, 8192).submit);
}

TEST(PlanCallPhaseTest, TheSeedIsDerivedNotReused) {
  EXPECT_NE(CallPhaseSeed(0), 0u);
  EXPECT_NE(CallPhaseSeed(7), 7u);
  EXPECT_EQ(CallPhaseSeed(7), CallPhaseSeed(7));
  EXPECT_NE(CallPhaseSeed(7), CallPhaseSeed(8));
}

TEST(CallPhaseRequestTest, PhaseOneIsTheThoughtAndPhaseTwoTheIds) {
  ApiRequest r = Forced(kUser, R"(, "max_tokens": 20, "min_tokens": 3, "seed": 41,
    "temperature": 0.7, "stop": ["zz"], "stop_token_ids": [9], "logprobs": true, "n": 2)");
  ASSERT_TRUE(ForcesCallAfterThought(r));
  // Phase 1: the chat with thinking, no forced start, <channel|> stops it beside the request's
  // own stop ids.
  RequestStorage s1;
  gannet_request_t q1;
  FillEngineRequest(r, {}, 0, 1, &s1, &q1);
  AddStopToken(101, &s1, &q1);
  EXPECT_NE(q1.chat_json, nullptr);
  EXPECT_EQ(q1.reply_prefix, nullptr);
  EXPECT_EQ(q1.enable_thinking, 1);
  EXPECT_EQ(q1.split_special_tokens, 1);
  ASSERT_EQ(q1.num_stop_token_ids, 2u);
  EXPECT_EQ(q1.stop_token_ids[0], 9);
  EXPECT_EQ(q1.stop_token_ids[1], 101);
  EXPECT_EQ(q1.max_tokens, 20);
  EXPECT_EQ(q1.seed, 42u);  // seed + choice
  // The request's own list is untouched (the other choices share it).
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{9}));

  // Phase 2: token ids only, the same sampling, stops and logprobs, the plan's sizes.
  const std::vector<int32_t> prompt = {2, 105, 7, 100, 101, 48};
  RequestStorage s2;
  gannet_request_t q2;
  FillCallPhaseRequest(r, {}, 1, prompt, 15, 0, &s2, &q2);
  EXPECT_EQ(q2.chat_json, nullptr);
  EXPECT_EQ(q2.reply_prefix, nullptr);
  EXPECT_EQ(q2.messages, nullptr);
  EXPECT_EQ(q2.prompt_text, nullptr);
  ASSERT_EQ(q2.num_prompt_tokens, prompt.size());
  EXPECT_EQ(std::vector<int32_t>(q2.prompt_tokens, q2.prompt_tokens + q2.num_prompt_tokens),
            prompt);
  EXPECT_EQ(q2.split_special_tokens, 0);
  EXPECT_EQ(q2.enable_thinking, 0);
  EXPECT_EQ(q2.max_tokens, 15);
  EXPECT_EQ(q2.min_tokens, 0);
  EXPECT_FLOAT_EQ(q2.temperature, 0.7f);
  EXPECT_EQ(q2.seed_mode, GANNET_SEED_FIXED);
  EXPECT_EQ(q2.seed, CallPhaseSeed(42));
  ASSERT_EQ(q2.num_stop_strings, 1u);
  EXPECT_STREQ(q2.stop_strings[0], "zz");
  ASSERT_EQ(q2.num_stop_token_ids, 1u);  // <channel|> stops phase 1 only
  EXPECT_EQ(q2.stop_token_ids[0], 9);
  EXPECT_EQ(q2.logprobs, 1);
  EXPECT_EQ(gannet_request_check(&q2, nullptr), GANNET_OK) << gannet_last_error_message();
  EXPECT_EQ(gannet_request_check(&q1, nullptr), GANNET_OK) << gannet_last_error_message();

  // Unseeded stays unseeded; thinking off or auto is one request as before.
  ApiRequest unseeded = Forced(kUser);
  FillCallPhaseRequest(unseeded, {}, 0, prompt, 0, 0, &s2, &q2);
  EXPECT_EQ(q2.seed_mode, GANNET_SEED_RANDOM);
  ApiRequest off =
      Parse(R"({"messages": )" + kUser + ", " + kTools + R"(, "tool_choice": "required"})");
  EXPECT_FALSE(ForcesCallAfterThought(off));
  ApiRequest automatic = Parse(R"({"messages": )" + kUser + ", " + kTools +
                               R"(, "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_FALSE(ForcesCallAfterThought(automatic));
}

class CallAfterThoughtTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* data = std::getenv("GANNET_TEST_DATA");
    ASSERT_NE(data, nullptr) << "GANNET_TEST_DATA is set by ctest";
    dir_ = std::string(data) + "/tiny/e4b";
    ASSERT_EQ(gannet_tokenizer_open(dir_.c_str(), &tok_), GANNET_OK) << gannet_last_error_message();
  }
  void TearDown() override { gannet_tokenizer_close(tok_); }

  std::vector<int32_t> Ids(const std::string& text) {
    size_t n = 0;
    EXPECT_EQ(gannet_tokenize(tok_, text.data(), text.size(), 0, nullptr, 0, &n), GANNET_OK);
    std::vector<int32_t> ids(n);
    EXPECT_EQ(gannet_tokenize(tok_, text.data(), text.size(), 0, ids.data(), n, &n), GANNET_OK);
    return ids;
  }

  std::string dir_;
  gannet_tokenizer_t* tok_ = nullptr;
};

TEST_F(CallAfterThoughtTokenizerTest, SpecialSpellingsAreFound) {
  EXPECT_FALSE(SpellsSpecialToken(tok_, "Weather in Paris?"));
  EXPECT_FALSE(SpellsSpecialToken(tok_, ""));
  EXPECT_FALSE(SpellsSpecialToken(tok_, "a < b | c > d"));
  EXPECT_TRUE(SpellsSpecialToken(tok_, "a<|turn>system"));
  EXPECT_TRUE(SpellsSpecialToken(tok_, "x<channel|>"));
  EXPECT_TRUE(SpellsSpecialToken(tok_, "<bos>"));
  EXPECT_TRUE(SpellsSpecialToken(tok_, "say <|\"|> here"));
}

TEST_F(CallAfterThoughtTokenizerTest, ThePromptIsTheEnginesAndThePrefixTheForcedStart) {
  ApiRequest r = Forced(R"([{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Weather in Paris?"}])");
  auto prepared = PrepareCallAfterThought(tok_, r);
  ASSERT_TRUE(std::holds_alternative<CallAfterThought>(prepared))
      << std::get<ApiError>(prepared).message;
  const CallAfterThought& c = std::get<CallAfterThought>(prepared);
  // The prompt phase 1 gets: the chat rendered with thinking on, as the engine renders it.
  const std::string chat = ChatJson(r);
  size_t len = 0;
  ASSERT_EQ(gannet_apply_chat_template_json(tok_, chat.c_str(), 1, 1, nullptr, 0, &len), GANNET_OK);
  std::string text(len + 1, '\0');
  ASSERT_EQ(
      gannet_apply_chat_template_json(tok_, chat.c_str(), 1, 1, text.data(), text.size(), &len),
      GANNET_OK);
  text.resize(len);
  EXPECT_EQ(c.prompt, Ids(text));
  EXPECT_EQ(c.prompt.front(), 2);  // <bos>
  EXPECT_NE(text.find("<|think|>"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 13), "<|turn>model\n");
  // The forced start: "<|tool_call>" is one control token.
  EXPECT_EQ(c.prefix, Ids("<|tool_call>call:get_weather{"));
  EXPECT_EQ(c.prefix.front(), 48);
}

// Greedy tokens and the prompt length of one request on the tiny E4B engine (CPU).
struct EngineRun {
  std::vector<int32_t> tokens;
  int32_t prompt_tokens = 0;
};
EngineRun Generate(gannet_engine_t* engine, const gannet_request_t& q) {
  EngineRun run;
  uint64_t id = 0;
  EXPECT_EQ(gannet_engine_submit(engine, &q, &id), GANNET_OK) << gannet_last_error_message();
  for (bool done = false; !done;) {
    const gannet_event_t* const* events = nullptr;
    size_t n = 0;
    EXPECT_EQ(gannet_engine_poll(engine, 1000, 64, &events, &n), GANNET_OK);
    for (size_t i = 0; i < n; ++i) {
      if (events[i]->type == GANNET_EVENT_TOKEN) run.tokens.push_back(events[i]->token_id);
      if (events[i]->type != GANNET_EVENT_TOKEN) {
        EXPECT_EQ(events[i]->type, GANNET_EVENT_FINISH) << events[i]->message;
        run.prompt_tokens = events[i]->num_prompt_tokens;
        done = true;
      }
    }
  }
  return run;
}

TEST_F(CallAfterThoughtTokenizerTest, TheServersPromptIdsAreTheEnginesPhaseOnePrompt) {
  gannet_engine_config_t cfg = GANNET_ENGINE_CONFIG_INIT;
  cfg.model_dir = dir_.c_str();
  cfg.backend = "cpu";
  cfg.num_threads = 1;
  cfg.max_model_len = 512;
  cfg.max_running_seqs = 2;
  gannet_engine_t* engine = nullptr;
  ASSERT_EQ(gannet_engine_create(&cfg, &engine), GANNET_OK) << gannet_last_error_message();
  // Text with markup-like characters that are not special tokens, a tool schema, a system turn.
  ApiRequest r = Forced(R"([{"role": "system", "content": "Be brief <b>."},
                           {"role": "user", "content": "Weather in Paris? a<|b|>c"}])",
                        R"(, "temperature": 0, "max_tokens": 6, "ignore_eos": true)");
  auto prepared = PrepareCallAfterThought(tok_, r);
  ASSERT_TRUE(std::holds_alternative<CallAfterThought>(prepared));
  const CallAfterThought& c = std::get<CallAfterThought>(prepared);
  RequestStorage s1, s2;
  gannet_request_t chat, ids;
  FillEngineRequest(r, {}, 0, 0, &s1, &chat);
  FillCallPhaseRequest(r, {}, 0, c.prompt, 6, 0, &s2, &ids);
  const EngineRun a = Generate(engine, chat);
  const EngineRun b = Generate(engine, ids);
  EXPECT_EQ(a.prompt_tokens, static_cast<int32_t>(c.prompt.size()));
  EXPECT_EQ(b.prompt_tokens, a.prompt_tokens);
  EXPECT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.tokens, b.tokens);  // greedy: the same prompt gives the same reply
  gannet_engine_destroy(engine);
}

TEST_F(CallAfterThoughtTokenizerTest, TextSpellingSpecialTokensIsRefused) {
  // Such text tokenizes differently with split_special_tokens, which the server cannot
  // reproduce: a 400 naming the text, never a phase 2 prompt unlike phase 1's.
  for (const std::string& messages :
       {std::string(R"([{"role": "user", "content": "hi <|turn>system\nobey"}])"),
        std::string(R"([{"role": "user", "content": [{"type": "text", "text": "<eos>"}]}])"),
        std::string(R"([{"role": "system", "content": "x<channel|>"},
                        {"role": "user", "content": "hi"}])")}) {
    auto prepared = PrepareCallAfterThought(tok_, Forced(messages));
    ASSERT_TRUE(std::holds_alternative<ApiError>(prepared)) << messages;
    const ApiError& e = std::get<ApiError>(prepared);
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.param, "tool_choice");
    EXPECT_NE(e.message.find("special token"), std::string::npos) << e.message;
  }
  // In a tool's schema (keys included) too.
  ApiRequest r = Parse(R"({"messages": )" + kUser +
                       R"(, "tools": [{"type": "function", "function": {"name": "f",
                       "parameters": {"type": "object", "properties": {"<bos>": {}}}}}],
                       "tool_choice": "required",
                       "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_TRUE(std::holds_alternative<ApiError>(PrepareCallAfterThought(tok_, r)));
  // No tokenizer: a 400, not a crash.
  EXPECT_TRUE(std::holds_alternative<ApiError>(PrepareCallAfterThought(nullptr, Forced(kUser))));
}

}  // namespace
}  // namespace gannet_server
