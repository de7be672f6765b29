#include "lib/common/json.h"

#include <string>

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
      "",       "{",          "[1,]",        "{\"a\":1,}",   "{\"a\" 1}", "tru",
      "01",     "1.",         "\"abc",       "[1] x",        "{\"a\":1, \"a\":2}",
      "\"\\x\"", "\"\\ud800\"", "\"\xff\"",   "nan",          "1e999",
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

}  // namespace
}  // namespace gannet
