#include "lib/common/json.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/common/utf8.h"

namespace gannet {
namespace {

TEST(JsonTest, ParsesNestedDocument) {
  auto j = Json::Parse(R"({"a": [1, 2.5, -3e2, true, null], "b": {"c": "x\u00e9\ud83d\ude00"}})");
  ASSERT_TRUE(j.ok()) << j.status();
  const Json* a = j->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->AsArray().size(), 5u);
  EXPECT_TRUE(a->AsArray()[0].is_int());
  EXPECT_EQ(a->AsArray()[0].AsInt(), 1);
  EXPECT_FALSE(a->AsArray()[1].is_int());
  EXPECT_DOUBLE_EQ(a->AsArray()[1].AsDouble(), 2.5);
  EXPECT_DOUBLE_EQ(a->AsArray()[2].AsDouble(), -300.0);
  EXPECT_TRUE(a->AsArray()[3].AsBool());
  EXPECT_TRUE(a->AsArray()[4].is_null());
  EXPECT_EQ(j->Find("b")->Find("c")->AsString(), "x\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonTest, KeepsLargeIntegersExact) {
  auto j = Json::Parse("[9007199254740993, 9223372036854775807]");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->AsArray()[0].AsInt(), 9007199254740993LL);
  EXPECT_EQ(j->AsArray()[1].AsInt(), 9223372036854775807LL);
}

TEST(JsonTest, RejectsMalformedInputWithPosition) {
  const char* bad[] = {
      "",    "{",     "[1,]",  "{\"a\":1,}",         "{\"a\" 1}", "tru",         "01",
      "1.",  "\"abc", "[1] x", "{\"a\":1, \"a\":2}", "\"\\x\"",   "\"\\ud800\"", "\"\xff\"",
      "nan", "1e999",
  };
  for (const char* text : bad) {
    auto j = Json::Parse(text);
    EXPECT_FALSE(j.ok()) << "accepted: " << text;
    if (!j.ok()) {
      EXPECT_NE(std::string(j.status().message()).find("JSON line"), std::string::npos);
      // The message never echoes the input (which may be invalid UTF-8).
      EXPECT_TRUE(IsValidUtf8(std::string(j.status().message()))) << j.status().message();
    }
  }
}

TEST(JsonTest, RejectsExcessiveNesting) {
  std::string deep(Json::kMaxDepth + 5, '[');
  deep += std::string(Json::kMaxDepth + 5, ']');
  auto j = Json::Parse(deep);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(std::string(j.status().message()).find("nesting"), std::string::npos);
}

TEST(JsonTest, DumpRoundTrips) {
  Json o = Json::MakeObject();
  o.Set("name", Json::String("q\"\n\x01"));
  Json arr = Json::MakeArray();
  arr.Push(Json::Int(-7));
  arr.Push(Json::Number(0.25));
  arr.Push(Json::Bool(false));
  o.Set("list", std::move(arr));
  auto back = Json::Parse(o.Dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Find("name")->AsString(), "q\"\n\x01");
  EXPECT_EQ(back->Find("list")->AsArray()[0].AsInt(), -7);
  EXPECT_DOUBLE_EQ(back->Find("list")->AsArray()[1].AsDouble(), 0.25);
  EXPECT_EQ(o.Dump(), back->Dump());
}

// Json::Stream hands each value below the streamed containers over with its path; Walk does the
// same for a tree, so one reader serves both.
std::vector<std::string> StreamEvents(std::string_view text, bool walk, int64_t budget = 1000) {
  std::vector<std::string> events;
  Json::StreamHandler h;
  h.descend = [&](const std::vector<std::string>& path, Json::Type type) {
    std::string p = absl::StrJoin(path, "/");
    events.push_back("descend " + p + " " + std::string(Json::TypeName(type)));
    return p == "big" || p == "big/list";
  };
  h.value = [&](const std::vector<std::string>& path, Json value) {
    events.push_back(absl::StrJoin(path, "/") + "=" + value.Dump());
    return absl::OkStatus();
  };
  absl::Status st;
  if (walk) {
    auto tree = Json::Parse(text);
    EXPECT_TRUE(tree.ok()) << tree.status();
    st = tree->Walk(h);
  } else {
    st = Json::Stream(text, budget, h);
  }
  if (!st.ok()) events.push_back(std::string(st.message()));
  return events;
}

TEST(JsonTest, StreamHandsOverValuesWithTheirPaths) {
  const std::string text =
      R"({"a": 1, "big": {"x": [1, {"y": 2}], "list": ["p", ["q", "r"], {}], "z": null},)"
      R"( "b": {"c": true}})";
  const std::vector<std::string> want = {
      "a=1",
      "descend big object",
      "descend big/x array",
      R"(big/x=[1,{"y":2}])",
      "descend big/list array",
      R"(big/list/0="p")",
      "descend big/list/1 array",
      R"(big/list/1=["q","r"])",
      "descend big/list/2 object",
      "big/list/2={}",
      "big/z=null",
      "descend b object",
      R"(b={"c":true})",
  };
  EXPECT_EQ(StreamEvents(text, /*walk=*/false), want);
  EXPECT_EQ(StreamEvents(text, /*walk=*/true), want);
}

TEST(JsonTest, StreamChecksWhatParseChecks) {
  // Each value handed over has its own budget; the streamed containers cost none.
  EXPECT_EQ(StreamEvents(R"({"big": {"list": [[1, 2], [3, 4]]}})", false, 3).back(),
            R"(big/list/1=[3,4])");
  EXPECT_TRUE(absl::StrContains(StreamEvents(R"({"big": {"list": [[1, 2, 3]]}})", false, 3).back(),
                                "limit"));
  // Duplicate keys inside a built value, bad syntax and a top level that is not an object are
  // errors naming the place.
  EXPECT_TRUE(
      absl::StrContains(StreamEvents(R"({"b": {"c": 1, "c": 2}})", false).back(), "duplicate key"));
  EXPECT_TRUE(
      absl::StrContains(StreamEvents(R"({"big": {"list": [1,]}})", false).back(), "line 1"));
  EXPECT_TRUE(
      absl::StrContains(StreamEvents("[1]", false).back(), "top-level value must be an object"));
  // A handler's error ends the parse and comes back as it is.
  Json::StreamHandler h;
  h.descend = [](const std::vector<std::string>&, Json::Type) { return false; };
  int calls = 0;
  h.value = [&](const std::vector<std::string>&, Json) {
    ++calls;
    return absl::DataLossError("stop");
  };
  absl::Status st = Json::Stream(R"({"a": 1, "b": 2})", 10, h);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gannet
