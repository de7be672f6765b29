// A chat reply event by event, as gannet serve streams it: thinking goes to reasoning_content,
// the answer to content, Gemma-4 tool calls (when tools were offered) to tool_calls deltas, and
// the finish reason becomes tool_calls. Ids are Gemma-4's: <|channel> 100, <channel|> 101,
// <|tool_call> 48, <tool_call|> 49, <|"|> 52; -1 is a token whose text is plain.
#include "examples/server/chat_reply.h"

#include <gtest/gtest.h>

#include "gannet/gannet.h"

namespace gannet_server {
namespace {

using nlohmann::json;

ChatReply Make(bool tools) {
  return ChatReply(ThinkingSplitter(100, 101), tools, ToolCallParser({48, 49, 52}));
}

struct Ev {
  int32_t token;
  std::string text;
};

// Feeds the events and a FINISH; returns every non-empty delta.
std::vector<ChatReply::Delta> Stream(ChatReply& r, const std::vector<Ev>& events) {
  std::vector<ChatReply::Delta> out;
  for (const Ev& e : events) {
    ChatReply::Delta d = r.Feed(e.token, e.text, false);
    if (!d.empty()) out.push_back(std::move(d));
  }
  ChatReply::Delta d = r.Feed(-1, "", true);
  if (!d.empty()) out.push_back(std::move(d));
  return out;
}

// Thinking, a sentence, then a call: the text before a special token arrives with it.
const std::vector<Ev> kThinkThenCall = {{100, ""},
                                        {-1, "thought\nI need"},
                                        {-1, " the weather."},
                                        {101, ""},
                                        {-1, "Let me check."},
                                        {48, ""},
                                        {-1, "call:get_weather{city:"},
                                        {52, ""},
                                        {-1, "Paris"},
                                        {52, ""},
                                        {-1, "}"},
                                        {49, ""}};

TEST(ChatReplyTest, ThinkingContentAndToolCallDeltas) {
  ChatReply r = Make(true);
  std::vector<ChatReply::Delta> deltas = Stream(r, kThinkThenCall);
  std::string reasoning, content;
  json calls = json::array();
  for (const auto& d : deltas) {
    reasoning += d.reasoning;
    content += d.content;
    for (const json& c : d.tool_calls) calls.push_back(c);
    // One event's delta is never part thinking, part answer.
    EXPECT_FALSE(!d.reasoning.empty() && !d.content.empty());
  }
  EXPECT_EQ(reasoning, "I need the weather.");
  EXPECT_EQ(content, "Let me check.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_STOP), std::string("tool_calls"));
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_LENGTH), std::string("length"));
  json m = r.Message();
  EXPECT_EQ(m["content"], "Let me check.");
  EXPECT_EQ(m["reasoning_content"], "I need the weather.");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_FALSE(m["tool_calls"][0].contains("index"));
  EXPECT_EQ(m["tool_calls"][0]["id"], calls[0]["id"]);
}

TEST(ChatReplyTest, OnlyToolCallsGiveNullContent) {
  ChatReply r = Make(true);
  Stream(r, {{48, ""}, {-1, "call:get_time{}"}, {49, ""}});
  EXPECT_TRUE(r.Message()["content"].is_null());
  EXPECT_EQ(r.tool_calls().size(), 1u);
}

TEST(ChatReplyTest, MarkersInsideThinkingAreReasoning) {
  ChatReply r = Make(true);
  Stream(r, {{100, ""},
             {-1, "thought\nmaybe "},
             {48, ""},
             {-1, "call:x{}"},
             {49, ""},
             {101, ""},
             {-1, "No call."}});
  EXPECT_EQ(r.reasoning(), "maybe call:x{}");
  EXPECT_EQ(r.content(), "No call.");
  EXPECT_TRUE(r.tool_calls().empty());
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_STOP), std::string("stop"));
}

TEST(ChatReplyTest, AnUnclosedCallComesBackAsContentAtTheEnd) {
  ChatReply r = Make(true);
  std::vector<ChatReply::Delta> deltas =
      Stream(r, {{-1, "Sure."}, {48, ""}, {-1, "call:f{a:"}, {52, ""}, {-1, "x"}});
  ASSERT_FALSE(deltas.empty());
  EXPECT_EQ(deltas.back().content, "<|tool_call>call:f{a:<|\"|>x");  // flushed by the FINISH
  EXPECT_EQ(r.content(), "Sure.<|tool_call>call:f{a:<|\"|>x");
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_LENGTH), std::string("length"));
}

TEST(ChatReplyTest, AForcedCallIsTheReplysToolCall) {
  // tool_choice named: "<|tool_call>call:f{" was in the prompt; the model wrote the rest.
  ChatReply r = Make(true);
  r.ForceToolCall("call:f{", {"f"});
  std::vector<ChatReply::Delta> deltas = Stream(r, {{-1, "a:"}, {-1, "1}"}, {49, ""}});
  ASSERT_EQ(deltas.size(), 1u);  // the call, when it closes; the prefix itself gives no delta
  ASSERT_EQ(deltas[0].tool_calls.size(), 1u);
  EXPECT_EQ(deltas[0].tool_calls[0]["function"]["name"], "f");
  EXPECT_EQ(deltas[0].tool_calls[0]["function"]["arguments"], R"({"a":1})");
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_STOP), std::string("tool_calls"));
  EXPECT_TRUE(r.Message()["content"].is_null());

  // Cut off by max_tokens: the call with its raw arguments, finish_reason length.
  ChatReply cut = Make(true);
  cut.ForceToolCall("call:f{", {"f"});
  Stream(cut, {{-1, "a:"}, {52, ""}, {-1, "xy"}});
  ASSERT_EQ(cut.tool_calls().size(), 1u);
  EXPECT_EQ(cut.tool_calls()[0]["function"]["arguments"], "{a:<|\"|>xy");
  EXPECT_EQ(cut.FinishReason(GANNET_FINISH_LENGTH), std::string("length"));

  // Required, and the model names a function not offered: content, not tool_calls.
  ChatReply bad = Make(true);
  bad.ForceToolCall("call:", {"f"});
  Stream(bad, {{-1, "g{}"}, {49, ""}});
  EXPECT_TRUE(bad.tool_calls().empty());
  EXPECT_EQ(bad.content(), "<|tool_call>call:g{}<tool_call|>");
  EXPECT_EQ(bad.FinishReason(GANNET_FINISH_STOP), std::string("stop"));
}

TEST(ChatReplyTest, AForcedCallAfterTheThought) {
  // Thinking on (call_after_thought.h): phase 1's events are the thought, through <channel|>;
  // then the call is forced and phase 2's events are its arguments. One reply: the thought in
  // reasoning_content, the call in tool_calls, nothing in content.
  ChatReply r = Make(true);
  std::vector<ChatReply::Delta> deltas;
  for (const Ev& e :
       std::vector<Ev>{{100, ""}, {-1, "thought\nPar"}, {-1, "is, then."}, {101, ""}}) {
    deltas.push_back(r.Feed(e.token, e.text, false));
  }
  r.ForceToolCall("call:get_weather{", {"get_weather", "get_time"});
  for (const Ev& e :
       std::vector<Ev>{{-1, "city:"}, {52, ""}, {-1, "Paris"}, {52, ""}, {-1, "}"}, {49, ""}}) {
    deltas.push_back(r.Feed(e.token, e.text, false));
  }
  deltas.push_back(r.Feed(-1, "", true));
  std::string reasoning;
  json calls = json::array();
  for (const ChatReply::Delta& d : deltas) {
    reasoning += d.reasoning;
    EXPECT_TRUE(d.content.empty()) << d.content;
    for (const json& c : d.tool_calls) calls.push_back(c);
  }
  EXPECT_EQ(reasoning, "Paris, then.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_EQ(r.FinishReason(GANNET_FINISH_STOP), std::string("tool_calls"));
  const json m = r.Message();
  EXPECT_EQ(m["reasoning_content"], "Paris, then.");
  EXPECT_TRUE(m["content"].is_null());
}

TEST(ChatReplyTest, WithoutToolsNothingIsParsed) {
  ChatReply r = Make(false);
  Stream(r, {{-1, "a"}, {48, ""}, {-1, "call:f{}"}, {49, ""}});
  EXPECT_EQ(r.content(), "acall:f{}");  // the markers are special tokens: no text of their own
  EXPECT_TRUE(r.tool_calls().empty());
  EXPECT_FALSE(r.Message().contains("tool_calls"));
}

}  // namespace
}  // namespace gannet_server
