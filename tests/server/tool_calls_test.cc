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

TEST(ToolCallsTest, WithoutIdsNothingIsParsed) {
  ToolCallParser p;  // a vocabulary without the markers
  ToolCallParser::Delta d = p.Feed(kOpen, "text");
  d = p.Feed(-1, "call:f{}");
  EXPECT_EQ(d.content, "call:f{}");
  EXPECT_TRUE(d.calls.empty());
}

}  // namespace
}  // namespace gannet_server
