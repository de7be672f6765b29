// The OpenAI request parser of gannet serve: what each field becomes in the engine's request,
// and which bodies are refused with which field named.
#include "examples/server/api_request.h"
#include "examples/server/thinking.h"

#include <gtest/gtest.h>

namespace gannet_server {
namespace {

ApiRequest Parse(Endpoint e, const std::string& body) {
  auto r = ParseApiRequest(e, body);
  if (auto* err = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " -> " << err->message;
    return {};
  }
  return std::get<ApiRequest>(r);
}

ApiError Fail(Endpoint e, const std::string& body) {
  auto r = ParseApiRequest(e, body);
  if (auto* err = std::get_if<ApiError>(&r)) return *err;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

TEST(ApiRequestTest, ChatFieldsMapOntoTheEngineRequest) {
  ApiRequest r = Parse(Endpoint::kChat, R"({
    "model": "m", "messages": [{"role": "developer", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]},
                               {"role": "assistant", "content": null}],
    "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": -1,
    "min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "seed": 18446744073709551615, "stop": "END", "logprobs": true, "top_logprobs": 4,
    "user": "u", "n": 2, "whatever": {"unknown": [1, 2]}})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(r, SamplingDefaults{}, 0, 1, &storage, &q);
  // The chat goes to the engine as one chat_json object, parts as sent.
  ASSERT_NE(q.chat_json, nullptr);
  EXPECT_EQ(nlohmann::json::parse(q.chat_json),
            nlohmann::json::parse(R"({"messages": [{"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a"},
                                             {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": null}]})"));
  EXPECT_EQ(q.split_special_tokens, 1);
  EXPECT_EQ(q.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(q.temperature, 0.5f);
  EXPECT_FLOAT_EQ(q.top_p, 0.9f);
  EXPECT_EQ(q.top_k, 0);
  EXPECT_FLOAT_EQ(q.min_p, 0.1f);
  EXPECT_FLOAT_EQ(q.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(q.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(q.repetition_penalty, 1.1f);
  EXPECT_EQ(q.seed_mode, GANNET_SEED_FIXED);
  EXPECT_EQ(q.seed, 0u);  // UINT64_MAX + choice 1 wraps
  ASSERT_EQ(q.num_stop_strings, 1u);
  EXPECT_STREQ(q.stop_strings[0], "END");
  EXPECT_EQ(q.logprobs, 4);
  EXPECT_EQ(gannet_request_check(&q, nullptr), GANNET_OK) << gannet_last_error_message();
}

// image_url parts with data: URLs become {"type": "image"} parts and the request's images, in
// order; anything else an image_url may say is refused naming the part.
TEST(ApiRequestTest, ImageUrlDataUrlsBecomeImages) {
  // "iVBORw0KGgo=" is the PNG signature's first 8 bytes; "QUJD" is "ABC".
  ApiRequest r = Parse(Endpoint::kChat, R"({"messages": [{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
      {"type": "text", "text": "and"},
      {"type": "image_url", "image_url": "data:image/jpeg;base64,QUJD"}]}]})");
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0], std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(r.images[1], "ABC");
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(r, SamplingDefaults{}, 0, 0, &storage, &q);
  ASSERT_EQ(q.num_images, 2u);
  EXPECT_EQ(q.images[1].size, 3u);
  EXPECT_EQ(q.images[0].struct_size, sizeof(gannet_image_t));
  EXPECT_EQ(nlohmann::json::parse(q.chat_json)["messages"][0]["content"],
            nlohmann::json::parse(R"([{"type": "image"}, {"type": "text", "text": "and"},
                                      {"type": "image"}])"));
  const auto image_part = [](const std::string& part) {
    return R"({"messages": [{"role": "user", "content": [)" + part + "]}]}";
  };
  for (const char* bad :
       {R"({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})",
        R"({"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}})",
        R"({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}})",
        R"({"type": "image_url"})"}) {
    const ApiError e = Fail(Endpoint::kChat, image_part(bad));
    EXPECT_EQ(e.http_status, 400) << bad;
    EXPECT_NE(e.message.find("content[0]"), std::string::npos) << bad << ": " << e.message;
  }
  EXPECT_NE(Fail(Endpoint::kChat, image_part(R"({"type": "input_audio"})")).message.find("audio"),
            std::string::npos);
  // A call forced after the thought rebuilds the prompt as ids: not with images yet.
  const ApiError forced = Fail(Endpoint::kChat, R"({"messages": [{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
      "tool_choice": "required", "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_NE(forced.message.find("images"), std::string::npos) << forced.message;
}

TEST(ApiRequestTest, DefaultsComeFromTheCheckpointThenOpenAI) {
  ApiRequest r = Parse(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}]})");
  SamplingDefaults d;
  d.temperature = 1.0f;
  d.top_p = 0.95f;
  d.top_k = 64;
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(r, d, 0, 0, &storage, &q);
  EXPECT_FLOAT_EQ(q.temperature, 1.0f);
  EXPECT_FLOAT_EQ(q.top_p, 0.95f);
  EXPECT_EQ(q.top_k, 64);
  EXPECT_EQ(q.max_tokens, 0);  // chat: until a stop or the context
  EXPECT_EQ(q.seed_mode, GANNET_SEED_RANDOM);
  EXPECT_EQ(q.logprobs, 0);
  FillEngineRequest(r, SamplingDefaults{}, 0, 0, &storage, &q);
  EXPECT_FLOAT_EQ(q.temperature, 1.0f);  // OpenAI's default
  EXPECT_EQ(q.top_k, 0);
  // logprobs without top_logprobs still asks the engine for one (the chosen token's logprob
  // comes only with it)
  r = Parse(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
                                  "logprobs": true, "temperature": 0})");
  FillEngineRequest(r, d, 0, 0, &storage, &q);
  EXPECT_EQ(q.logprobs, 1);
  EXPECT_FLOAT_EQ(q.temperature, 0.0f);
}

TEST(ApiRequestTest, CompletionPrompts) {
  ApiRequest r = Parse(Endpoint::kCompletion, R"({"prompt": "hi"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(r, SamplingDefaults{}, 0, 0, &storage, &q);
  EXPECT_STREQ(q.prompt_text, "hi");
  EXPECT_EQ(q.max_tokens, 16);  // OpenAI's completions default
  r = Parse(Endpoint::kCompletion, R"({"prompt": [2, 5, 7], "stop": ["a", "", "b"]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{2, 5, 7}));
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  r = Parse(Endpoint::kCompletion, R"({"prompt": ["a", [2, 3]], "n": 2, "logprobs": 0})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[1].is_ids);
  EXPECT_TRUE(r.logprobs);
  FillEngineRequest(r, SamplingDefaults{}, 1, 0, &storage, &q);
  EXPECT_EQ(q.num_prompt_tokens, 2u);
  EXPECT_EQ(q.logprobs, 1);
}

TEST(ApiRequestTest, RefusalsNameTheField) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  struct Case {
    std::string body, param;
  } cases[] = {
      {"{" + m + R"(, "temperature": "1"})", "temperature"},
      {"{" + m + R"(, "temperature": 2.5})", "temperature"},
      {"{" + m + R"(, "max_tokens": 1.5})", "max_tokens"},
      {"{" + m + R"(, "max_tokens": 0})", "max_tokens"},
      {"{" + m + R"(, "max_tokens": 4294967296})", "max_tokens"},
      {"{" + m + R"(, "n": 129})", "n"},
      {"{" + m + R"(, "seed": 1.5})", "seed"},
      {"{" + m + R"(, "top_logprobs": 2})", "top_logprobs"},
      {"{" + m + R"(, "logit_bias": {"1": 1}})", "logit_bias"},
      {"{" + m + R"(, "response_format": {"type": "json_object"}})", "response_format"},
      {"{" + m + R"(, "tools": [{}]})", "tools[0]"},
      {"{" + m + R"(, "tools": {"type": "function"}})", "tools"},
      {"{" + m + R"(, "tools": [{"type": "function", "function": {"name": ""}}]})",
       "tools[0].function.name"},
      {"{" + m + R"(, "tool_choice": "required"})", "tool_choice"},
      {"{" + m + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})",
       "tool_choice"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0]"},
      {R"({"messages": [{"role": "function", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{}]}]})", "messages[0].tool_calls[0]"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function",
           "function": {"name": "f", "arguments": "not json"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls"},
  };
  for (const Case& c : cases) EXPECT_EQ(Fail(Endpoint::kChat, c.body).param, c.param) << c.body;
  EXPECT_EQ(Fail(Endpoint::kCompletion, R"({"prompt": [1, -1]})").param, "prompt");
  EXPECT_EQ(Fail(Endpoint::kCompletion, R"({"prompt": "x", "suffix": "y"})").param, "suffix");
  EXPECT_EQ(Fail(Endpoint::kCompletion, std::string(100000, '[')).http_status, 400);
  EXPECT_EQ(Fail(Endpoint::kCompletion, "").http_status, 400);
}

// <|channel> = 100, <channel|> = 101 (the tiny vocabulary's ids).
std::pair<std::string, std::string> Split(
    const std::vector<std::pair<int32_t, std::string>>& events) {
  ThinkingSplitter s(100, 101);
  std::string reasoning, content;
  for (const auto& [id, text] : events) {
    ThinkingSplitter::Delta d = s.Feed(id, text);
    reasoning += d.reasoning;
    content += d.content;
  }
  ThinkingSplitter::Delta d = s.Finish();
  reasoning += d.reasoning;
  content += d.content;
  return {reasoning, content};
}

TEST(ThinkingSplitterTest, ThoughtsGoToReasoningNeverToContent) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(Split({{5, "Hello"}, {6, " world"}}), P("", "Hello world"));
  EXPECT_EQ(Split({{100, ""},
                   {7, "thought"},
                   {8, "\n"},
                   {9, "Let me"},
                   {10, " see."},
                   {101, ""},
                   {11, "Answer"}}),
            P("Let me see.", "Answer"));
  // the header split across tokens, and in one token with the first words
  EXPECT_EQ(Split({{100, ""}, {7, "tho"}, {7, "ught\nhm"}, {101, ""}, {11, "A"}}), P("hm", "A"));
  // text a special token completes belongs before it (held-back text released late)
  EXPECT_EQ(Split({{5, "Hi"}, {100, " there"}, {7, "thought\n"}, {9, "x"}, {101, "y"}}),
            P("xy", "Hi there"));
  // malformed: never closed, no header newline, a stray close: every character is kept
  EXPECT_EQ(Split({{100, ""}, {7, "thought\n"}, {9, "forever"}}), P("forever", ""));
  EXPECT_EQ(Split({{100, ""}, {7, "no newline"}}), P("no newline", ""));
  EXPECT_EQ(Split({{100, ""}, {7, std::string(40, 'x')}, {9, "y"}}),
            P(std::string(40, 'x') + "y", ""));
  EXPECT_EQ(Split({{100, ""}, {7, "x"}, {101, ""}, {9, "y"}}), P("x", "y"));
  EXPECT_EQ(Split({{101, ""}, {9, "y"}}), P("", "y"));
  // a second channel after the answer is thinking again
  EXPECT_EQ(Split({{100, ""},
                   {7, "thought\na"},
                   {101, ""},
                   {9, "b"},
                   {100, ""},
                   {7, "thought\nc"},
                   {101, ""},
                   {9, "d"}}),
            P("ac", "bd"));
  // a vocabulary without the tokens splits nothing
  ThinkingSplitter none;
  EXPECT_EQ(none.Feed(100, "x").content, "x");
}

TEST(ApiRequestTest, EnableThinkingReachesTheEngine) {
  ApiRequest r = Parse(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
                                            "chat_template_kwargs": {"enable_thinking": true}})");
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(r, SamplingDefaults{}, 0, 0, &storage, &q);
  EXPECT_EQ(q.enable_thinking, 1);
  EXPECT_EQ(Fail(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
                                      "chat_template_kwargs": {"enable_thinking": 1}})")
                .param,
            "chat_template_kwargs");
}

TEST(ApiRequestTest, ErrorJsonIsOpenAIShaped) {
  ApiError e = BadRequest("bad \"x\"", "x");
  EXPECT_EQ(
      e.Json(),
      R"({"error":{"code":400,"message":"bad \"x\"","param":"x","type":"invalid_request_error"}})");
}

TEST(ApiRequestTest, ToolsAndToolMessagesBecomeTheChatObject) {
  ApiRequest r = Parse(Endpoint::kChat, R"({
    "messages": [{"role": "user", "content": "Weather?"},
                 {"role": "assistant", "content": null, "reasoning_content": "call it",
                  "tool_calls": [{"id": "c1", "type": "function",
                                  "function": {"name": "get_weather",
                                               "arguments": "{\"city\": \"Paris\"}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "tool_choice": "auto", "parallel_tool_calls": true})");
  EXPECT_TRUE(r.has_tool_messages);
  auto chat = nlohmann::json::parse(ChatJson(r));
  // Arguments sent as a JSON string reach the template as an object, as they are rendered.
  EXPECT_EQ(chat["messages"][1]["tool_calls"][0]["function"]["arguments"],
            nlohmann::json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(chat["messages"][1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(chat["messages"][1]["reasoning_content"], "call it");
  EXPECT_EQ(chat["messages"][2]["tool_call_id"], "c1");
  ASSERT_TRUE(chat.contains("tools"));
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "get_weather");

  // tool_choice "none": the tools are not offered.
  ApiRequest none = Parse(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})");
  EXPECT_FALSE(nlohmann::json::parse(ChatJson(none)).contains("tools"));
}

TEST(ApiRequestTest, ForcedToolChoiceBecomesTheReplyPrefix) {
  const std::string head = R"({"messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}},
              {"type": "function", "function": {"name": "get_time"}}], )";
  // Named: the reply starts inside the call, so the model writes only the arguments.
  ApiRequest named = Parse(Endpoint::kChat, head + R"("tool_choice": {"type": "function",
    "function": {"name": "get_time"}}})");
  EXPECT_EQ(named.tool_choice, ApiRequest::ToolChoice::kNamed);
  EXPECT_EQ(ForcedCallStart(named), "call:get_time{");
  EXPECT_EQ(ForcedReplyPrefix(named), "<|tool_call>call:get_time{");
  EXPECT_EQ(ToolNames(named), (std::vector<std::string>{"get_weather", "get_time"}));
  RequestStorage storage;
  gannet_request_t q;
  FillEngineRequest(named, {}, 0, 0, &storage, &q);
  ASSERT_NE(q.reply_prefix, nullptr);
  EXPECT_STREQ(q.reply_prefix, "<|tool_call>call:get_time{");
  // The tools stay offered (the template declares them).
  EXPECT_TRUE(nlohmann::json::parse(ChatJson(named)).contains("tools"));

  // Required: the model picks the name.
  ApiRequest required = Parse(Endpoint::kChat, head + R"("tool_choice": "required"})");
  EXPECT_EQ(required.tool_choice, ApiRequest::ToolChoice::kRequired);
  EXPECT_EQ(ForcedReplyPrefix(required), "<|tool_call>call:");
  FillEngineRequest(required, {}, 0, 0, &storage, &q);
  EXPECT_STREQ(q.reply_prefix, "<|tool_call>call:");

  // auto and none force nothing.
  for (const char* choice : {R"("auto")", R"("none")", "null"}) {
    ApiRequest r = Parse(Endpoint::kChat, head + R"("tool_choice": )" + choice + "}");
    EXPECT_EQ(ForcedReplyPrefix(r), "") << choice;
    FillEngineRequest(r, {}, 0, 0, &storage, &q);
    EXPECT_EQ(q.reply_prefix, nullptr) << choice;
  }
}

TEST(ApiRequestTest, ForcedToolChoiceRefusals) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  struct Case {
    std::string body;
    std::string word;  // in the message
  };
  const std::vector<Case> cases = {
      // A name not offered: 400 naming it.
      {"{" + m + ", " + tools +
           R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       "\"g\""},
      // Required or named without tools.
      {"{" + m + R"(, "tool_choice": "required"})", "tools"},
      {"{" + m + R"(, "tools": [], "tool_choice": "required"})", "tools"},
      // Malformed objects and values.
      {"{" + m + ", " + tools + R"(, "tool_choice": {"type": "function"}})", "name"},
      {"{" + m + ", " + tools + R"(, "tool_choice": {"type": "x", "function": {"name": "f"}}})",
       "type"},
      {"{" + m + ", " + tools + R"(, "tool_choice": {"function": {"name": 5}}})", "name"},
      {"{" + m + ", " + tools + R"(, "tool_choice": "sometimes"})", "required"},
      {"{" + m + ", " + tools + R"(, "tool_choice": 1})", "required"},
      {"{" + m + ", " + tools + R"(, "tool_choice": "required", "add_generation_prompt": false})",
       "add_generation_prompt"},
      // A name that would spell markup in the prompt.
      {"{" + m +
           R"(, "tools": [{"type": "function", "function": {"name": "<|turn>"}}],
           "tool_choice": {"type": "function", "function": {"name": "<|turn>"}}})",
       "a-z"},
  };
  for (const Case& c : cases) {
    ApiError e = Fail(Endpoint::kChat, c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, "tool_choice") << c.body;
    EXPECT_NE(e.message.find(c.word), std::string::npos) << c.body << " -> " << e.message;
  }
  // Thinking with auto is fine.
  Parse(Endpoint::kChat, "{" + m + ", " + tools +
                             R"(, "tool_choice": "auto", "chat_template_kwargs":
                             {"enable_thinking": true}})");
  // Forced with thinking but without the generation prompt: still no reply to start.
  ApiError e = Fail(Endpoint::kChat, "{" + m + ", " + tools +
                                         R"(, "tool_choice": "required", "add_generation_prompt":
                                         false, "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_EQ(e.param, "tool_choice");
  EXPECT_NE(e.message.find("add_generation_prompt"), std::string::npos) << e.message;
}

TEST(ApiRequestTest, ResponseFormatWithASchemaIsRefusedAsNotYetSupported) {
  ApiError e = Fail(Endpoint::kChat, R"({"messages": [{"role": "user", "content": "x"}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "response_format");
  EXPECT_NE(e.message.find("not supported yet"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace gannet_server
