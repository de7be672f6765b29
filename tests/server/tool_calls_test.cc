// The tool-call parser of gannet serve against a corpus of model outputs
// (tests/data/chat_corpus/model_outputs.json), well-formed and malformed: calls come out with
// their name and JSON arguments; a malformed call comes back as content, raw, never dropped. Each
// output is fed as the engine streams it: text in small pieces, each marker as its own token.
#include "examples/server/tool_calls.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gannet_server {
namespace {

using nlohmann::json;

constexpr int32_t kOpen = 48, kClose = 49, kQuote = 52;  // Gemma-4's ids

json LoadCorpus() {
  const char* root = std::getenv("GANNET_TEST_DATA");
  EXPECT_NE(root, nullptr) << "GANNET_TEST_DATA is not set (run through ctest)";
  std::ifstream f(std::string(root ? root : ".") + "/chat_corpus/model_outputs.json");
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

// Feeds `output` in pieces of `step` bytes (markers as tokens); returns content and calls.
ToolCallParser::Delta FeedAll(const std::string& output, size_t step) {
  ToolCallParser p({kOpen, kClose, kQuote});
  ToolCallParser::Delta all;
  auto take = [&](ToolCallParser::Delta d) {
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(std::move(c));
  };
  const std::pair<const char*, int32_t> markers[] = {
      {"<|tool_call>", kOpen}, {"<tool_call|>", kClose}, {"<|\"|>", kQuote}};
  size_t pos = 0;
  std::string text;
  while (pos < output.size()) {
    int32_t marker = -1;
    size_t len = 0;
    for (auto [spelling, id] : markers) {
      if (output.compare(pos, std::strlen(spelling), spelling) == 0) {
        marker = id;
        len = std::strlen(spelling);
      }
    }
    if (marker >= 0) {
      take(p.Feed(marker, text));  // the text held before the marker comes with it
      text.clear();
      pos += len;
      continue;
    }
    text += output[pos++];
    if (text.size() >= step) {
      take(p.Feed(-1, text));
      text.clear();
    }
  }
  take(p.Feed(-1, text));
  take(p.Finish());
  return all;
}

TEST(ToolCallsTest, ModelOutputCorpus) {
  json corpus = LoadCorpus();
  ASSERT_GE(corpus["cases"].size(), 15u);
  for (const json& c : corpus["cases"]) {
    for (size_t step : {1, 3, 1000}) {
      SCOPED_TRACE(c["name"].get<std::string>() + " step " + std::to_string(step));
      ToolCallParser::Delta d = FeedAll(c["output"].get<std::string>(), step);
      EXPECT_EQ(d.content, c["content"].get<std::string>());
      ASSERT_EQ(d.calls.size(), c["calls"].size());
      for (size_t k = 0; k < d.calls.size(); ++k) {
        EXPECT_EQ(d.calls[k].name, c["calls"][k]["name"].get<std::string>());
        EXPECT_EQ(json::parse(d.calls[k].arguments), c["calls"][k]["arguments"]);
        EXPECT_EQ(d.calls[k].id.rfind("call_", 0), 0u) << d.calls[k].id;
      }
      if (d.calls.size() == 2) {
        EXPECT_NE(d.calls[0].id, d.calls[1].id);
      }
    }
  }
}

TEST(ToolCallsTest, DeepNestingIsMalformedNotACrash) {
  std::string deep = "call:f{a:";
  for (int k = 0; k < 100000; ++k) deep += "[";
  EXPECT_FALSE(ParseToolCallBody(deep).has_value());
  std::string ok = "call:f{a:";
  for (int k = 0; k < 10; ++k) ok += "[";
  ok += "1";
  for (int k = 0; k < 10; ++k) ok += "]";
  ok += "}";
  EXPECT_TRUE(ParseToolCallBody(ok).has_value());
}

// Forced tool choices: the reply began with "<|tool_call>call:NAME{" (named) or
// "<|tool_call>call:" (required) in the prompt; the model's text continues the call.
ToolCallParser::Delta Forced(const std::string& start, std::vector<std::string> allowed,
                             const std::vector<std::pair<int32_t, std::string>>& events,
                             bool finish = true) {
  ToolCallParser p({kOpen, kClose, kQuote});
  p.set_allowed_names(std::move(allowed));
  p.Force(start);
  ToolCallParser::Delta all;
  auto take = [&](ToolCallParser::Delta d) {
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(std::move(c));
  };
  for (const auto& [id, text] : events) take(p.Feed(id, text));
  if (finish) take(p.Finish());
  return all;
}

TEST(ToolCallsTest, ANamedForcedCallParsesWithThePrefix) {
  ToolCallParser::Delta d = Forced("call:get_weather{", {"get_weather", "get_time"},
                                   {{-1, "city:"},
                                    {kQuote, ""},
                                    {-1, "Paris"},
                                    {kQuote, ""},
                                    {-1, "}"},
                                    {kClose, ""},
                                    {-1, "done"}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(d.calls[0].arguments), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(d.content, "done");  // text after the call stays content
}

TEST(ToolCallsTest, AForcedCallThatDoesNotParseKeepsItsNameAndRawArguments) {
  // Garbage arguments, closed: still the forced call, arguments the raw text from '{' on.
  ToolCallParser::Delta d =
      Forced("call:f{", {"f"}, {{-1, "x y z"}, {kQuote, ""}, {-1, "]]"}, {kClose, ""}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{x y z<|\"|>]]");
  EXPECT_TRUE(d.content.empty());
  // Never closed (max_tokens): a call with the arguments so far, flushed by Finish.
  d = Forced("call:f{", {"f"}, {{-1, "a:"}, {kQuote, ""}, {-1, "Par"}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{a:<|\"|>Par");
  // Nothing generated at all.
  d = Forced("call:f{", {"f"}, {});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{");
  // A second call opened inside the forced one: the forced one is still a call.
  d = Forced("call:f{", {"f"}, {{-1, "a:1"}, {kOpen, ""}, {-1, "call:f{b:2}"}, {kClose, ""}});
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].arguments, "{a:1");
  EXPECT_EQ(json::parse(d.calls[1].arguments), json::parse(R"({"b": 2})"));
}

TEST(ToolCallsTest, RequiredValidatesTheNameTheModelPicks) {
  ToolCallParser::Delta d =
      Forced("call:", {"get_weather"}, {{-1, "get_weather{city:1}"}, {kClose, ""}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(d.calls[0].arguments), json::parse(R"({"city": 1})"));
  // A name not in tools: content, raw, markers spelled, as a malformed call.
  d = Forced("call:", {"get_weather"}, {{-1, "launch{x:1}"}, {kClose, ""}});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "<|tool_call>call:launch{x:1}<tool_call|>");
  // ... also when unparsable or never closed.
  d = Forced("call:", {"get_weather"}, {{-1, "launch{x"}});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "<|tool_call>call:launch{x");
  // No name at all (no '{'): content.
  d = Forced("call:", {"get_weather"}, {{-1, "hello"}});
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "<|tool_call>call:hello");
  // A known name with bad arguments: the call, raw arguments.
  d = Forced("call:", {"get_weather"}, {{-1, "get_weather{?"}, {kClose, ""}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{?");
  // Later calls to names not offered are content too.
  d = Forced("call:", {"get_weather"},
             {{-1, "get_weather{}"}, {kClose, ""}, {kOpen, ""}, {-1, "call:rm{}"}, {kClose, ""}});
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.content, "<|tool_call>call:rm{}<tool_call|>");
}

TEST(ToolCallsTest, WithoutIdsNothingIsParsed) {
  ToolCallParser p;  // a vocabulary without the markers
  ToolCallParser::Delta d = p.Feed(kOpen, "text");
  d = p.Feed(-1, "call:f{}");
  EXPECT_EQ(d.content, "call:f{}");
  EXPECT_TRUE(d.calls.empty());
}

}  // namespace
}  // namespace gannet_server
