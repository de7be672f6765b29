// TextOutput: stop strings and the thought channel, token by token, on the tiny Gemma tokenizer
// (<|channel> 100, <channel|> 101 as in Gemma-4).
#include "lib/engine/text_output.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/tokenizer/tiny_tokenizer.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::engine {
namespace {

constexpr int32_t kChannelOpen = 100;
constexpr int32_t kChannelClose = 101;

std::unique_ptr<tokenizer::Tokenizer> Tiny() {
  auto json = tokenizer::MakeTinyTokenizerJson(512);
  EXPECT_TRUE(json.ok()) << json.status();
  auto tok = tokenizer::Tokenizer::FromJson(*json, "tiny");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

std::vector<int32_t> Ids(const tokenizer::Tokenizer& tok, const std::string& text) {
  return tok.Encode(text);  // no <bos> (add_special_tokens is off by default)
}

// Pushes every token and gathers the text of each side.
struct Split {
  std::string thinking, answer;
};
Split PushAll(TextOutput& out, const std::vector<int32_t>& tokens) {
  Split s;
  for (int32_t t : tokens) {
    auto d = out.Push(t);
    EXPECT_TRUE(d.ok()) << d.status();
    (d->thinking ? s.thinking : s.answer) += d->text;
  }
  TextOutput::Delta tail = out.Finish();
  (tail.thinking ? s.thinking : s.answer) += tail.text;
  return s;
}

TEST(TextOutputTest, ThoughtChannelIsMarkedAndItsNameDropped) {
  auto tok = Tiny();
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->TokenToId("<|channel>"), kChannelOpen);
  std::vector<int32_t> ids = {kChannelOpen};
  for (int32_t id : Ids(*tok, "thought\nthe user says hi")) ids.push_back(id);
  ids.push_back(kChannelClose);
  for (int32_t id : Ids(*tok, "Hello there")) ids.push_back(id);
  auto out = TextOutput::Create(tok.get(), {});
  ASSERT_TRUE(out.ok());
  Split s = PushAll(*out, ids);
  EXPECT_EQ(s.thinking, "the user says hi");
  EXPECT_EQ(s.answer, "Hello there");
}

TEST(TextOutputTest, HeldBackTextIsReleasedOnItsOwnSideOfAMarker) {
  auto tok = Tiny();
  ASSERT_NE(tok, nullptr);
  // "the us" could start the stop string "the user": held back inside the thought, then the
  // channel closes: it is released as thinking, never glued to the answer.
  std::vector<int32_t> ids = {kChannelOpen};
  for (int32_t id : Ids(*tok, "thought\nabout the us")) ids.push_back(id);
  ids.push_back(kChannelClose);
  for (int32_t id : Ids(*tok, "er ok")) ids.push_back(id);
  auto out = TextOutput::Create(tok.get(), {"the user"});
  ASSERT_TRUE(out.ok());
  std::string thinking, answer;
  for (int32_t t : ids) {
    auto d = out->Push(t);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->stop_hit);
    (d->thinking ? thinking : answer) += d->text;
  }
  TextOutput::Delta tail = out->Finish();
  (tail.thinking ? thinking : answer) += tail.text;
  EXPECT_EQ(thinking, "about the us");
  EXPECT_EQ(answer, "er ok");
}

TEST(TextOutputTest, UnfinishedThoughtEndsAsThinking) {
  auto tok = Tiny();
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> ids = {kChannelOpen};
  for (int32_t id : Ids(*tok, "thought\nstill thinking")) ids.push_back(id);
  auto out = TextOutput::Create(tok.get(), {});
  ASSERT_TRUE(out.ok());
  Split s = PushAll(*out, ids);
  EXPECT_EQ(s.thinking, "still thinking");
  EXPECT_EQ(s.answer, "");
}

TEST(TextOutputTest, TextWithoutChannelIsAllAnswerAndStopsStillWork) {
  auto tok = Tiny();
  ASSERT_NE(tok, nullptr);
  auto out = TextOutput::Create(tok.get(), {"there"});
  ASSERT_TRUE(out.ok());
  std::string answer;
  bool stopped = false;
  for (int32_t t : Ids(*tok, "thought\nHello there friend")) {
    auto d = out->Push(t);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->thinking);
    answer += d->text;
    stopped = stopped || d->stop_hit;
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(answer, "thought\nHello ");  // no marker: "thought\n" is ordinary text
}

}  // namespace
}  // namespace gannet::engine
