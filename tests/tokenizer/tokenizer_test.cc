// Loader errors and BPE behaviour on small hand-written tokenizer.json files; the exhaustive
// comparison with HF is parity_test.cc.
#include "lib/tokenizer/tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/test_util.h"

namespace gannet::tokenizer {
namespace {

std::string ReplaceOnce(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// A small Gemma-shaped tokenizer.json; `merges` and `model_extra` splice into the model.
std::string MakeJson(
    const std::string& merges = R"(["a b", "ab c", "b c"])",
    const std::string& model_extra = R"("unk_token": "<unk>", "fuse_unk": true,)") {
  return R"({"version": "1.0", "added_tokens": [
      {"id": 0, "content": "<pad>", "special": true, "normalized": false},
      {"id": 1, "content": "<eos>", "special": true, "normalized": false},
      {"id": 2, "content": "<bos>", "special": true, "normalized": false},
      {"id": 3, "content": "<unk>", "special": true, "normalized": false}],
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                      "behavior": "MergedWithPrevious", "invert": false},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
    "model": {"type": "BPE", "byte_fallback": false,)" +
         model_extra + R"(
      "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "a": 4, "b": 5, "c": 6,
                "ab": 7, "abc": 8, "bc": 9, "\u2581": 10},
      "merges": )" +
         merges + "}}";
}

std::unique_ptr<Tokenizer> Load(const std::string& json) {
  auto tok = Tokenizer::FromJson(json, "test.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

void ExpectError(const std::string& json, absl::StatusCode code, const std::string& needle) {
  auto tok = Tokenizer::FromJson(json, "test.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), code) << tok.status();
  EXPECT_TRUE(absl::StrContains(tok.status().message(), needle)) << tok.status();
  EXPECT_TRUE(absl::StrContains(tok.status().message(), "test.json")) << tok.status();
}

TEST(TokenizerTest, MergesApplyByRank) {
  auto tok = Load(MakeJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("abc"), (std::vector<int32_t>{8}));  // a b → ab, ab c → abc
  auto reversed = Load(MakeJson(R"(["b c", "a b", "ab c"])"));
  ASSERT_NE(reversed, nullptr);
  EXPECT_EQ(reversed->Encode("abc"), (std::vector<int32_t>{4, 9}));  // b c wins first
  EXPECT_EQ(tok->Encode("abab"), (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(tok->Encode("a b"), (std::vector<int32_t>{4, 10, 5}));
}

// Words are cut before "▁" only when no merge can join across the cut; a merge that builds
// "b▁" must still apply (here "ab▁" forms across what would otherwise be a cut).
TEST(TokenizerTest, MergeAcrossSpaceDisablesCuttingWords) {
  std::string json = MakeJson(R"(["a b", "b \u2581", "ab \u2581"])");
  json = ReplaceOnce(json, R"("\u2581": 10)", R"("\u2581": 10, "b\u2581": 11, "ab\u2581": 12)");
  auto tok = Load(json);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("ab a"), (std::vector<int32_t>{12, 4}));
  EXPECT_EQ(tok->Encode("cb c"), (std::vector<int32_t>{6, 11, 6}));
}

TEST(TokenizerTest, UnknownCharactersFuseIntoOneUnk) {
  auto fused = Load(MakeJson());
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->Encode("axyzb"), (std::vector<int32_t>{4, 3, 5}));
  auto unfused = Load(MakeJson(R"(["a b"])", R"("unk_token": "<unk>", "fuse_unk": false,)"));
  ASSERT_NE(unfused, nullptr);
  EXPECT_EQ(unfused->Encode("axyzb"), (std::vector<int32_t>{4, 3, 3, 3, 5}));
}

TEST(TokenizerTest, SpecialTokensAndBosPolicy) {
  auto tok = Load(MakeJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->vocab_size(), 11);
  EXPECT_EQ(tok->Encode("<bos>ab<eos>"), (std::vector<int32_t>{2, 7, 1}));
  EXPECT_EQ(tok->Encode("ab", {.add_special_tokens = true}), (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(tok->Encode(""), (std::vector<int32_t>{}));
  EXPECT_EQ(tok->Encode("", {.add_special_tokens = true}), (std::vector<int32_t>{2}));
  EXPECT_TRUE(tok->IsSpecial(2));
  EXPECT_FALSE(tok->IsSpecial(7));
  EXPECT_EQ(tok->TokenToId("abc"), 8);
  EXPECT_EQ(tok->TokenToId("<eos>"), 1);
  EXPECT_EQ(tok->TokenToId("zzz"), std::nullopt);
  EXPECT_EQ(*tok->IdToToken(10), "\u2581");
}

TEST(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = Load(MakeJson());
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(*tok->Decode({2, 7, 10, 6}), "<bos>ab c");
  EXPECT_EQ(*tok->Decode({2, 7, 10, 6}, {.skip_special_tokens = true}), "ab c");
  for (int32_t bad : {11, -1, 1 << 30}) {
    auto text = tok->Decode({7, bad});
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(text.status().message(), std::to_string(bad)));
    EXPECT_FALSE(tok->IdToToken(bad).ok());
  }
}

// Invalid UTF-8 is replaced per maximal subpart before tokenizing (no error, no crash).
TEST(TokenizerTest, InvalidUtf8EncodesAsReplacementCharacters) {
  const Tokenizer& tok = testing::ParityTokenizer();
  EXPECT_EQ(tok.Encode("ab\xE2\x82"
                       "c\xFF"),
            tok.Encode("ab\uFFFD"
                       "c\uFFFD"));
  EXPECT_EQ(tok.Encode(std::string("nul\0byte", 8)), tok.Encode(std::string("nul\0byte", 8)));
}

TEST(TokenizerTest, ConcurrentEncodersAgree) {
  const Tokenizer& tok = testing::ParityTokenizer();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("word" + std::to_string(i % 37) + " and more");
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : texts) want.push_back(tok.Encode(t));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) mismatches[t] += tok.Encode(texts[i]) != want[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

// A long unbroken word: Gemma's pre-tokenizer hands whole paragraphs to BPE as one word.
TEST(TokenizerTest, LongWordRoundTrips) {
  const Tokenizer& tok = testing::ParityTokenizer();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "And it came to pass, ";
  std::vector<int32_t> ids = tok.Encode(text);
  EXPECT_LT(ids.size(), text.size() / 3);
  EXPECT_EQ(*tok.Decode(ids), text);
}

TEST(TokenizerLoadTest, MalformedFilesAreClearErrors) {
  ExpectError("{not json", absl::StatusCode::kInvalidArgument, "");
  ExpectError("[]", absl::StatusCode::kInvalidArgument, "must be an object");
  ExpectError(R"({"version": "1.0"})", absl::StatusCode::kInvalidArgument, "model");
  ExpectError(R"({"model": {"type": "WordPiece", "vocab": {}}})", absl::StatusCode::kUnimplemented,
              "WordPiece");
  ExpectError(MakeJson(R"(["a q"])"), absl::StatusCode::kInvalidArgument, "merges[0]");
  ExpectError(MakeJson(R"(["a b", "abc"])"), absl::StatusCode::kInvalidArgument, "merges[1]");
  ExpectError(MakeJson(R"(["b a"])"), absl::StatusCode::kInvalidArgument, "\"ba\"");
  ExpectError(MakeJson(R"([["a"]])"), absl::StatusCode::kInvalidArgument, "merges[0]");
  ExpectError(MakeJson(R"(["a b"])", R"("dropout": 0.1,)"), absl::StatusCode::kUnimplemented,
              "dropout");
  ExpectError(MakeJson(R"(["a b"])", R"("unk_token": "<nope>",)"),
              absl::StatusCode::kInvalidArgument, "<nope>");
}

// The file is read member by member (issue 56), so nothing may depend on the order HF writes
// members in, and what the JSON tree refused (duplicate keys) is still refused.
TEST(TokenizerLoadTest, MemberOrderDoesNotMatterAndKeysAreUnique) {
  const std::string json = MakeJson();
  auto reference = Load(json);
  ASSERT_NE(reference, nullptr);
  // Merges before the vocabulary, and the model before the added tokens.
  std::string reordered =
      ReplaceOnce(json, R"("merges": ["a b", "ab c", "b c"])", R"("merges_": 0)");
  reordered =
      ReplaceOnce(reordered, R"("vocab": {)", R"("merges": ["a b", "ab c", "b c"], "vocab": {)");
  const size_t model_at = reordered.find(R"("model": )");
  const std::string model = reordered.substr(model_at, reordered.size() - 1 - model_at);
  reordered = "{" + model + ", " + reordered.substr(1, model_at - 1);
  reordered.resize(reordered.find_last_not_of(", \n") + 1);
  reordered += "}";
  auto tok = Load(reordered);
  ASSERT_NE(tok, nullptr) << reordered;
  EXPECT_EQ(reordered.find(R"("model")"), 1u) << reordered;
  for (const char* text : {"abc", "a b c", "<bos>ab<eos>", "xyz"}) {
    EXPECT_EQ(tok->Encode(text, {.add_special_tokens = true}),
              reference->Encode(text, {.add_special_tokens = true}))
        << text;
  }
  // The same document as a tree gives the same tokenizer.
  auto tree = Json::Parse(json);
  ASSERT_TRUE(tree.ok());
  auto from_tree = Tokenizer::FromParsedJson(*tree, "test.json");
  ASSERT_TRUE(from_tree.ok()) << from_tree.status();
  EXPECT_EQ((*from_tree)->Encode("abc ab"), reference->Encode("abc ab"));
  EXPECT_EQ((*from_tree)->vocab_size(), reference->vocab_size());

  ExpectError(ReplaceOnce(json, R"("a": 4,)", R"("a": 4, "a": 11,)"),
              absl::StatusCode::kInvalidArgument, "duplicate key \"a\"");
  ExpectError(ReplaceOnce(json, R"("version": "1.0",)", R"("model": {}, "version": "1.0",)"),
              absl::StatusCode::kInvalidArgument, "duplicate key \"model\"");
  ExpectError(ReplaceOnce(json, R"("vocab": {)", R"("vocab": [], "vocab": {)"),
              absl::StatusCode::kInvalidArgument, "duplicate key \"vocab\"");
  ExpectError(ReplaceOnce(json, R"("version": "1.0",)", R"("added_tokens": {}, "version": "1.0",)"),
              absl::StatusCode::kInvalidArgument, "added_tokens");
  ExpectError(ReplaceOnce(json, R"("merges": [)", R"("merges": {"a": 1}, "x": [)"),
              absl::StatusCode::kInvalidArgument, "model.merges: must be an array");
}

TEST(TokenizerLoadTest, UnsupportedPipelinePiecesAreNamed) {
  std::string json = MakeJson();
  // Replaces the object value of `key` (found by brace matching) with `value`.
  auto with = [&](const std::string& key, const std::string& value) {
    size_t begin = json.find("\"" + key + "\": ") + key.size() + 4;
    size_t end = begin;
    for (int depth = 0; end < json.size(); ++end) {
      depth += json[end] == '{' ? 1 : json[end] == '}' ? -1 : 0;
      if (depth == 0) break;
    }
    return json.substr(0, begin) + value + json.substr(end + 1);
  };
  ExpectError(with("normalizer", R"({"type": "NFKC"})"), absl::StatusCode::kUnimplemented,
              "normalizer type 'NFKC'");
  ExpectError(
      with("normalizer", R"({"type": "Replace", "pattern": {"Regex": " +"}, "content": ""})"),
      absl::StatusCode::kUnimplemented, "normalizer.pattern");
  ExpectError(with("pre_tokenizer", R"({"type": "ByteLevel"})"), absl::StatusCode::kUnimplemented,
              "ByteLevel");
  ExpectError(with("pre_tokenizer",
                   R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})"),
              absl::StatusCode::kInvalidArgument, "Sideways");
  ExpectError(with("decoder", R"({"type": "WordPiece"})"), absl::StatusCode::kUnimplemented,
              "decoder type 'WordPiece'");
  const std::string two_char_strip =
      R"({"type": "Sequence", "decoders": [)"
      R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0}]})";
  ExpectError(with("decoder", two_char_strip), absl::StatusCode::kInvalidArgument,
              "decoder.decoders[0].content");
}

TEST(TokenizerLoadTest, AddedTokenIdsMustMatchHowHfLoadsThem) {
  std::string json = MakeJson();
  std::string wrong =
      ReplaceOnce(json, R"("id": 3, "content": "<unk>")", R"("id": 9, "content": "<unk>")");
  ExpectError(wrong, absl::StatusCode::kInvalidArgument, "added_tokens[3]");
  // A token outside the model vocabulary gets the next id after it.
  std::string extra = json;
  extra.insert(extra.find("]"), R"(, {"id": 11, "content": "<extra>", "special": false})");
  auto tok = Load(extra);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 12);
  EXPECT_EQ(tok->Encode("a<extra>b"), (std::vector<int32_t>{4, 11, 5}));
  EXPECT_EQ(*tok->Decode({11, 2}, {.skip_special_tokens = true}), "<extra>");
  std::string gap = json;
  gap.insert(gap.find("]"), R"(, {"id": 12, "content": "<extra>"})");
  ExpectError(gap, absl::StatusCode::kInvalidArgument, "loads as id 11");
}

// A chain of rewrites that would blow text up (64 doubling Replaces reach 2^64 bytes on the first
// added token normalized at load) or run without bound is refused at load, naming the field.
TEST(TokenizerLoadTest, RewriteChainsAreBounded) {
  auto chain = [](const char* kind, const char* list, int n, const char* from, const char* to) {
    std::string steps;
    for (int i = 0; i < n; ++i) {
      steps += std::string(i ? "," : "") + R"({"type": "Replace", "pattern": {"String": ")" + from +
               R"("}, "content": ")" + to + R"("})";
    }
    return std::string(R"({"type": "Sequence", ")") + list + R"(": [)" + steps + "]}";
  };
  auto with = [](std::string json, const std::string& key, const std::string& value) {
    const size_t begin = json.find("\"" + key + "\": ") + key.size() + 4;
    size_t end = begin;
    for (int depth = 0; end < json.size(); ++end) {
      depth += json[end] == '{' ? 1 : json[end] == '}' ? -1 : 0;
      if (depth == 0) break;
    }
    return json.substr(0, begin) + value + json.substr(end + 1);
  };
  ExpectError(with(MakeJson(), "normalizer", chain("normalizer", "normalizers", 64, "a", "aa")),
              absl::StatusCode::kInvalidArgument, "more than 64-fold");
  ExpectError(with(MakeJson(), "decoder", chain("decoder", "decoders", 7, "b", "bb")),
              absl::StatusCode::kInvalidArgument, "decoder.decoders[6]");
  ExpectError(with(MakeJson(), "normalizer", chain("normalizer", "normalizers", 65, "a", "a")),
              absl::StatusCode::kInvalidArgument, "more than 64 steps");
  // Six doublings (64-fold) and shrinking Replaces are fine.
  EXPECT_NE(Load(with(MakeJson(), "normalizer", chain("normalizer", "normalizers", 6, "q", "qq"))),
            nullptr);
  EXPECT_NE(Load(with(MakeJson(), "decoder", chain("decoder", "decoders", 64, "bb", "b"))),
            nullptr);
}

// Vocabulary ids index a table: one id far past the entries would size it (16777215 entries of
// strings from a 20-byte line), so ids must be nearly dense.
TEST(TokenizerLoadTest, SparseVocabularyIdsAreRefused) {
  ExpectError(ReplaceOnce(MakeJson(), R"("\u2581": 10)", R"("\u2581": 16777215)"),
              absl::StatusCode::kInvalidArgument, "a vocabulary of 11 entries");
}

TEST(TokenizerLoadTest, MissingFileIsNotFound) {
  auto tok = Tokenizer::FromFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(tok.status().message(), "/nonexistent/tokenizer.json"));
}

}  // namespace
}  // namespace gannet::tokenizer
