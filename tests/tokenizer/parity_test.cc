// Our encoder and decoder against HuggingFace tokenizers on the fixture written by
// tools/tokenizer/make_parity_data.py: a Gemma-style byte-fallback BPE (8k vocab, Gemma-4
// special tokens at their real ids) and HF's ids / decodes for a few hundred strings, random id
// sequences, and the same vocabulary under other normalizer / pre-tokenizer / decoder / model
// settings. Every comparison is exact.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/tokenizer/streaming_detokenizer.h"
#include "lib/tokenizer/tokenizer.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

using testing::DataPath;
using testing::FromHex;
using testing::Ids;
using testing::LoadJson;
using testing::ParityTokenizer;

std::string InputOf(const Json& c) {
  if (const Json* hex = c.Find("input_hex")) return FromHex(hex->AsString());
  return c.Find("input")->AsString();
}

std::string Describe(const Json& c) {
  if (const Json* hex = c.Find("input_hex")) return "hex " + hex->AsString();
  return c.Find("input")->Dump().substr(0, 120);
}

std::string StreamAll(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  auto stream = StreamingDetokenizer::Create(&tok, {.skip_special_tokens = skip});
  EXPECT_TRUE(stream.ok()) << stream.status();
  std::string out;
  for (int32_t id : ids) {
    auto delta = stream->Push(id);
    EXPECT_TRUE(delta.ok()) << delta.status();
    out += *delta;
  }
  return out + stream->Flush();
}

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override { expected_ = LoadJson("parity_expected.json"); }
  Json expected_;
};

TEST_F(ParityTest, EncodeMatchesHf) {
  const Tokenizer& tok = ParityTokenizer();
  const Json::Array& cases = expected_.Find("cases")->AsArray();
  ASSERT_GE(cases.size(), 300u);
  for (const Json& c : cases) {
    std::vector<int32_t> want = Ids(*c.Find("ids"));
    EXPECT_EQ(tok.Encode(InputOf(c)), want) << Describe(c);
    std::vector<int32_t> with_special = Ids(*c.Find("special_prefix"));
    with_special.insert(with_special.end(), want.begin(), want.end());
    EXPECT_EQ(tok.Encode(InputOf(c), {.add_special_tokens = true}), with_special) << Describe(c);
  }
}

TEST_F(ParityTest, DecodeMatchesHf) {
  const Tokenizer& tok = ParityTokenizer();
  for (const char* list : {"cases", "decode_cases"}) {
    for (const Json& c : expected_.Find(list)->AsArray()) {
      std::vector<int32_t> ids = Ids(*c.Find("ids"));
      auto text = tok.Decode(ids);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(*text, c.Find("decoded")->AsString()) << list << " " << c.Find("ids")->Dump();
      auto skipped = tok.Decode(ids, {.skip_special_tokens = true});
      ASSERT_TRUE(skipped.ok()) << skipped.status();
      EXPECT_EQ(*skipped, c.Find("decoded_skip")->AsString()) << c.Find("ids")->Dump();
    }
  }
}

// The streamed deltas concatenate to HF's full decode, for both skip modes.
TEST_F(ParityTest, StreamingMatchesHfDecode) {
  const Tokenizer& tok = ParityTokenizer();
  for (const char* list : {"cases", "decode_cases"}) {
    for (const Json& c : expected_.Find(list)->AsArray()) {
      std::vector<int32_t> ids = Ids(*c.Find("ids"));
      EXPECT_EQ(StreamAll(tok, ids, false), c.Find("decoded")->AsString()) << c.Find("ids")->Dump();
      EXPECT_EQ(StreamAll(tok, ids, true), c.Find("decoded_skip")->AsString())
          << c.Find("ids")->Dump();
    }
  }
}

// The same vocabulary with other pipeline pieces (Prepend, Strip, Split behaviours, a Strip
// decoder, ignore_merges, <unk> with and without fusing).
TEST_F(ParityTest, VariantsMatchHf) {
  Json base = LoadJson("parity_tokenizer.json");
  const Json::Array& cases = expected_.Find("cases")->AsArray();
  int checked = 0;
  for (const auto& [name, variant] : expected_.Find("variants")->AsMembers()) {
    Json root = base;
    for (const auto& [key, value] : variant.Find("overrides")->AsMembers()) {
      if (key == "model") {
        Json model = *root.Find("model");
        for (const auto& [mk, mv] : value.AsMembers()) model.Set(mk, mv);
        root.Set("model", std::move(model));
      } else {
        root.Set(key, value);
      }
    }
    auto tok = Tokenizer::FromParsedJson(root, name);
    ASSERT_TRUE(tok.ok()) << tok.status();
    for (const Json& r : variant.Find("results")->AsArray()) {
      const Json& c = cases[r.Find("case")->AsInt()];
      std::vector<int32_t> ids = Ids(*r.Find("ids"));
      EXPECT_EQ((*tok)->Encode(InputOf(c)), ids) << name << ": " << Describe(c);
      auto text = (*tok)->Decode(ids);
      ASSERT_TRUE(text.ok()) << text.status();
      // null: HF's Strip decoder panicked (a token shorter than `stop`); we only must not fail.
      if (!r.Find("decoded")->is_null()) {
        EXPECT_EQ(*text, r.Find("decoded")->AsString()) << name << ": " << Describe(c);
        if ((*tok)->streamable()) {
          EXPECT_EQ(StreamAll(**tok, ids, false), *text) << name << ": " << Describe(c);
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 500);
}

// HF writes merges as ["a", "b"] pairs; the legacy "a b" strings must load to the same model.
TEST_F(ParityTest, LegacyMergeStringsEncodeTheSame) {
  Json root = LoadJson("parity_tokenizer.json");
  Json model = *root.Find("model");
  Json merges = Json::MakeArray();
  for (const Json& pair : model.Find("merges")->AsArray()) {
    merges.Push(Json::String(pair.AsArray()[0].AsString() + " " + pair.AsArray()[1].AsString()));
  }
  model.Set("merges", std::move(merges));
  root.Set("model", std::move(model));
  auto tok = Tokenizer::FromParsedJson(root, "legacy merges");
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const Json& c : expected_.Find("cases")->AsArray()) {
    EXPECT_EQ((*tok)->Encode(InputOf(c)), Ids(*c.Find("ids"))) << Describe(c);
  }
}

}  // namespace
}  // namespace gannet::tokenizer
