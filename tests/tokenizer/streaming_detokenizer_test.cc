#include "lib/tokenizer/streaming_detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

using testing::ParityTokenizer;

int32_t Byte(const Tokenizer& tok, int b) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", b);
  return *tok.TokenToId(name);
}

StreamingDetokenizer MakeStream(const Tokenizer& tok, bool skip = false) {
  auto s = StreamingDetokenizer::Create(&tok, {.skip_special_tokens = skip});
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(StreamingDetokenizerTest, EmojiSplitOverByteTokensComesOutWhole) {
  const Tokenizer& tok = ParityTokenizer();
  StreamingDetokenizer s = MakeStream(tok);
  EXPECT_EQ(*s.Push(*tok.TokenToId("\u2581")), " ");
  for (int b : {0xF0, 0x9F, 0x98}) {
    EXPECT_EQ(*s.Push(Byte(tok, b)), "");
  }
  EXPECT_EQ(s.num_pending(), 3u);
  EXPECT_EQ(*s.Push(Byte(tok, 0x80)), "");  // the run may still grow
  EXPECT_EQ(*s.Push(*tok.TokenToId("a")),
            "\xF0\x9F\x98\x80"
            "a");
  EXPECT_EQ(s.num_pending(), 0u);
  EXPECT_EQ(s.Flush(), "");
}

// A run is judged as a whole, as HF's ByteFallback does: one bad byte turns every byte of the
// run into U+FFFD, including bytes that were a complete character on their own.
TEST(StreamingDetokenizerTest, InvalidRunsAndUnfinishedTailsBecomeReplacementCharacters) {
  const Tokenizer& tok = ParityTokenizer();
  StreamingDetokenizer s = MakeStream(tok);
  EXPECT_EQ(*s.Push(Byte(tok, 'A')), "");
  EXPECT_EQ(*s.Push(Byte(tok, 0xFF)), "");
  EXPECT_EQ(*s.Push(*tok.TokenToId("b")),
            "\uFFFD\uFFFD"
            "b");
  EXPECT_EQ(*s.Push(Byte(tok, 0xE2)), "");
  EXPECT_EQ(*s.Push(Byte(tok, 0x82)), "");
  EXPECT_EQ(s.Flush(), "\uFFFD\uFFFD");
  EXPECT_EQ(*tok.Decode({Byte(tok, 'A'), Byte(tok, 0xFF), *tok.TokenToId("b"), Byte(tok, 0xE2),
                         Byte(tok, 0x82)}),
            "\uFFFD\uFFFD"
            "b\uFFFD\uFFFD");
}

TEST(StreamingDetokenizerTest, SkippedSpecialTokensDoNotBreakAByteRun) {
  const Tokenizer& tok = ParityTokenizer();
  const std::vector<int32_t> ids = {Byte(tok, 0xE2), tok.bos_id(), Byte(tok, 0x82), Byte(tok, 0xAC),
                                    *tok.TokenToId("<turn|>")};
  StreamingDetokenizer skip = MakeStream(tok, true);
  std::string out;
  for (int32_t id : ids) out += *skip.Push(id);
  out += skip.Flush();
  EXPECT_EQ(out, "\u20AC");
  StreamingDetokenizer keep = MakeStream(tok, false);
  out.clear();
  for (int32_t id : ids) out += *keep.Push(id);
  out += keep.Flush();
  EXPECT_EQ(out, "\uFFFD<bos>\uFFFD\uFFFD<turn|>");
  EXPECT_EQ(out, *tok.Decode(ids));
}

TEST(StreamingDetokenizerTest, BadIdIsAnErrorAndLeavesTheStreamIntact) {
  const Tokenizer& tok = ParityTokenizer();
  StreamingDetokenizer s = MakeStream(tok);
  EXPECT_EQ(*s.Push(Byte(tok, 0xC3)), "");
  auto bad = s.Push(tok.vocab_size());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.Push(-5).ok());
  EXPECT_EQ(*s.Push(Byte(tok, 0xA9)), "");
  EXPECT_EQ(s.Flush(), "\u00E9");
}

// Property: for random id sequences (heavy on byte tokens and specials) the deltas concatenate
// to the full decode, under the Gemma decoder and under a Llama-style one with a leading Strip.
TEST(StreamingDetokenizerTest, DeltasConcatenateToFullDecode) {
  Json root = testing::LoadJson("parity_tokenizer.json");
  auto llama_json = root;
  auto decoder = Json::Parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})");
  ASSERT_TRUE(decoder.ok());
  llama_json.Set("decoder", *decoder);
  auto llama = Tokenizer::FromParsedJson(llama_json, "llama-style");
  ASSERT_TRUE(llama.ok()) << llama.status();

  std::mt19937 rng(7);
  for (const Tokenizer* tok : std::vector<const Tokenizer*>{&ParityTokenizer(), llama->get()}) {
    const int32_t space = *tok->TokenToId("\u2581");
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<int32_t> ids(rng() % 24);
      for (int32_t& id : ids) {
        switch (rng() % 5) {
          case 0:
            id = Byte(*tok, rng() % 256);
            break;
          case 1:
            id = Byte(*tok, std::string("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80")[rng() % 9] & 0xFF);
            break;
          case 2:
            id = static_cast<int32_t>(rng() % 108);
            break;
          case 3:
            id = space;
            break;
          default:
            id = static_cast<int32_t>(rng() % tok->vocab_size());
            break;
        }
      }
      for (bool skip : {false, true}) {
        StreamingDetokenizer s = MakeStream(*tok, skip);
        std::string out;
        for (int32_t id : ids) {
          std::string delta = *s.Push(id);
          out += delta;
        }
        out += s.Flush();
        EXPECT_EQ(out, *tok->Decode(ids, {.skip_special_tokens = skip})) << "trial " << trial;
      }
    }
  }
}

TEST(StreamingDetokenizerTest, DecodersThatEditTheTailCannotStream) {
  Json root = testing::LoadJson("parity_tokenizer.json");
  auto decoder = Json::Parse(R"({"type": "Sequence", "decoders": [{"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 0, "stop": 1}]})");
  ASSERT_TRUE(decoder.ok());
  root.Set("decoder", *decoder);
  auto tok = Tokenizer::FromParsedJson(root, "tail-strip");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto s = StreamingDetokenizer::Create(tok->get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gannet::tokenizer
