#include "lib/tokenizer/tiny_tokenizer.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/common/file_util.h"
#include "lib/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

std::unique_ptr<Tokenizer> LoadTiny(int vocab_size) {
  auto json = MakeTinyTokenizerJson(vocab_size);
  EXPECT_TRUE(json.ok()) << json.status();
  auto tok = Tokenizer::FromJson(*json, "tiny");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(TinyTokenizerTest, GemmaSpecialTokensSitAtTheirIds) {
  auto tok = LoadTiny(512);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 512);
  const std::pair<int, const char*> specials[] = {{0, "<pad>"},
                                                  {1, "<eos>"},
                                                  {2, "<bos>"},
                                                  {3, "<unk>"},
                                                  {46, "<|tool>"},
                                                  {47, "<tool|>"},
                                                  {48, "<|tool_call>"},
                                                  {49, "<tool_call|>"},
                                                  {50, "<|tool_response>"},
                                                  {51, "<tool_response|>"},
                                                  {52, "<|\"|>"},
                                                  {98, "<|think|>"},
                                                  {100, "<|channel>"},
                                                  {101, "<channel|>"},
                                                  {105, "<|turn>"},
                                                  {106, "<turn|>"}};
  for (const auto& [id, token] : specials) {
    EXPECT_EQ(tok->TokenToId(token), id) << token;
    EXPECT_TRUE(tok->IsSpecial(id)) << token;
  }
  EXPECT_EQ(tok->TokenToId("\n"), 107);
  EXPECT_EQ(tok->TokenToId("<0x00>"), 108);
  EXPECT_EQ(tok->TokenToId("<0xFF>"), 363);
  EXPECT_EQ(tok->TokenToId("<unused7>"), 7);
  EXPECT_EQ(tok->TokenToId("<unused511>"), 511);
  EXPECT_FALSE(tok->IsSpecial(7));
  EXPECT_FALSE(tok->IsSpecial(511));
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->Encode("<|turn>user\n"),
            (std::vector<int32_t>{105, *tok->TokenToId("u"), *tok->TokenToId("s"),
                                  *tok->TokenToId("er"), 107}));
}

TEST(TinyTokenizerTest, OrdinaryTextUsesMergesAndRoundTrips) {
  auto tok = LoadTiny(512);
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> the = tok->Encode(" the");
  EXPECT_EQ(the, (std::vector<int32_t>{*tok->TokenToId("\u2581the")}));
  const std::string texts[] = {
      "The theory of information and the nation is interesting.",
      "  two  spaces, tabs\tand\nnewlines\n\n",
      "Caf\u00e9 \u65e5\u672c \U0001F600 mixed with ASCII",
      "<bos>special <|think|> tokens <turn|>",
      "",
  };
  for (const std::string& text : texts) {
    std::vector<int32_t> ids = tok->Encode(text);
    EXPECT_EQ(*tok->Decode(ids), text);
  }
  std::vector<int32_t> ids = tok->Encode(texts[0]);
  EXPECT_LT(ids.size(), texts[0].size() * 2 / 3);  // merges make multi-byte tokens
}

TEST(TinyTokenizerTest, LargeVocabularyPlacesMultimodalSpecials) {
  auto tok = LoadTiny(262144);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 262144);
  EXPECT_EQ(tok->TokenToId("<|image>"), 255999);
  EXPECT_EQ(tok->TokenToId("<|video|>"), 258884);
  EXPECT_EQ(tok->TokenToId("<unused262143>"), 262143);
}

TEST(TinyTokenizerTest, RejectsTooSmallOrTooLargeVocabularies) {
  for (int v : {0, 511, -3, (1 << 24) + 1}) {
    auto json = MakeTinyTokenizerJson(v);
    ASSERT_FALSE(json.ok()) << v;
    EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// The committed tiny_tokenizer.json is this generator's output (HF's expectations in
// tiny_expected.json were computed from it). GANNET_UPDATE_FIXTURES=1 rewrites it.
TEST(TinyTokenizerTest, MatchesCommittedFixture) {
  auto json = MakeTinyTokenizerJson(512);
  ASSERT_TRUE(json.ok());
  const std::string path = testing::DataPath("tiny_tokenizer.json");
  if (const char* update = std::getenv("GANNET_UPDATE_FIXTURES"); update && *update == '1') {
    ASSERT_TRUE(WriteStringToFile(path, *json).ok());
  }
  auto committed = ReadFileToString(path, int64_t{1} << 30, "test data");
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_TRUE(*committed == *json) << "tiny tokenizer changed; regenerate the fixtures (see "
                                      "tools/tokenizer/make_parity_data.py)";
}

// HF tokenizers loaded the same JSON and encoded these strings (make_parity_data.py --tiny).
TEST(TinyTokenizerTest, MatchesHfTokenizers) {
  auto tok = LoadTiny(512);
  ASSERT_NE(tok, nullptr);
  Json expected = testing::LoadJson("tiny_expected.json");
  const Json::Array& cases = expected.Find("cases")->AsArray();
  ASSERT_GE(cases.size(), 50u);
  for (const Json& c : cases) {
    const std::string& input = c.Find("input")->AsString();
    std::vector<int32_t> ids = testing::Ids(*c.Find("ids"));
    EXPECT_EQ(tok->Encode(input), ids) << input;
    std::vector<int32_t> with_special = testing::Ids(*c.Find("special_prefix"));
    with_special.insert(with_special.end(), ids.begin(), ids.end());
    EXPECT_EQ(tok->Encode(input, {.add_special_tokens = true}), with_special) << input;
    EXPECT_EQ(*tok->Decode(ids), c.Find("decoded")->AsString()) << input;
    EXPECT_EQ(*tok->Decode(ids, {.skip_special_tokens = true}), c.Find("decoded_skip")->AsString())
        << input;
  }
}

}  // namespace
}  // namespace gannet::tokenizer
