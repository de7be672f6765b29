#include "lib/tokenizer/tiny_tokenizer.h"

#include <map>
#include <utility>
#include <vector>

#include "lib/common/json.h"
#include "lib/common/status.h"
#include "lib/tokenizer/bpe_model.h"

namespace gannet::tokenizer {
namespace {

constexpr int kMinVocab = 512;
constexpr int kNewlineId = 107;

// Gemma-4 special tokens at their real ids (docs/gemma4-model.md §5).
const std::map<int, std::string>& GemmaSpecials() {
  static const auto* specials = new std::map<int, std::string>{
      {0, "<pad>"},
      {1, "<eos>"},
      {2, "<bos>"},
      {3, "<unk>"},
      {4, "<mask>"},
      {5, "[multimodal]"},
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
      {106, "<turn|>"},
      {255999, "<|image>"},
      {256000, "<|audio>"},
      {258880, "<|image|>"},
      {258881, "<|audio|>"},
      {258882, "<image|>"},
      {258883, "<audio|>"},
      {258884, "<|video|>"},
  };
  return *specials;
}

// Merges in rank order; every part is a base character or an earlier merge's result.
constexpr std::pair<const char*, const char*> kMerges[] = {
    {"▁", "t"},   {"h", "e"}, {"▁t", "he"}, {"i", "n"},   {"e", "r"},   {"a", "n"},    {"r", "e"},
    {"o", "n"},   {"▁", "a"}, {"e", "n"},   {"a", "t"},   {"o", "u"},   {"in", "g"},   {"▁", "s"},
    {"▁", "w"},   {"i", "s"}, {"e", "d"},   {"o", "r"},   {"i", "t"},   {"▁", "o"},    {"▁o", "f"},
    {"a", "r"},   {"e", "s"}, {"▁", "c"},   {"n", "d"},   {"▁a", "nd"}, {"▁", "b"},    {"▁", "i"},
    {"▁t", "o"},  {"▁", "m"}, {"▁", "p"},   {"▁", "h"},   {"l", "l"},   {"▁", "f"},    {"▁i", "n"},
    {"▁", "d"},   {"t", "h"}, {"▁", "T"},   {"▁T", "he"}, {"i", "on"},  {"at", "ion"}, {"▁", "▁"},
    {"\n", "\n"}, {"▁", "l"}, {"▁", "e"},   {"l", "y"},   {"▁i", "s"},  {"ou", "r"},
};

Json AddedTokenJson(int id, const std::string& content, bool special) {
  Json t = Json::MakeObject();
  t.Set("id", Json::Int(id));
  t.Set("content", Json::String(content));
  t.Set("single_word", Json::Bool(false));
  t.Set("lstrip", Json::Bool(false));
  t.Set("rstrip", Json::Bool(false));
  t.Set("normalized", Json::Bool(false));
  t.Set("special", Json::Bool(special));
  return t;
}

Json StringPattern(const char* s) {
  Json p = Json::MakeObject();
  p.Set("String", Json::String(s));
  return p;
}

Json Typed(const char* type) {
  Json o = Json::MakeObject();
  o.Set("type", Json::String(type));
  return o;
}

Json TemplateItem(const char* kind, const char* id) {
  Json inner = Json::MakeObject();
  inner.Set("id", Json::String(id));
  inner.Set("type_id", Json::Int(0));
  Json item = Json::MakeObject();
  item.Set(kind, std::move(inner));
  return item;
}

}  // namespace

absl::StatusOr<std::string> MakeTinyTokenizerJson(int vocab_size) {
  if (vocab_size < kMinVocab || vocab_size > BpeModel::kMaxTokenId) {
    return InvalidArgumentError("tiny tokenizer vocab_size must be in [{}, {}], got {}", kMinVocab,
                                BpeModel::kMaxTokenId, vocab_size);
  }
  // Ids in order; added tokens are the specials and every <unusedN> placeholder.
  std::vector<std::string> tokens(vocab_size);
  std::vector<bool> filled(vocab_size, false);
  auto place = [&](int id, std::string token) {
    tokens[id] = std::move(token);
    filled[id] = true;
  };
  for (const auto& [id, token] : GemmaSpecials()) {
    if (id < vocab_size) place(id, token);
  }
  int next = 0;
  auto append = [&](std::string token) {
    while (filled[next]) ++next;
    place(next, std::move(token));
  };
  for (int id = 0; id < kNewlineId; ++id) {
    if (!filled[id]) place(id, "<unused" + std::to_string(id) + ">");
  }
  place(kNewlineId, "\n");
  for (int b = 0; b < 256; ++b) append(fmt::format("<0x{:02X}>", b));
  append("▁");
  append("\t");
  for (char c = '!'; c <= '~'; ++c) append(std::string(1, c));
  for (const auto& [a, b] : kMerges) append(std::string(a) + b);
  for (int id = next; id < vocab_size; ++id) {
    if (!filled[id]) place(id, "<unused" + std::to_string(id) + ">");
  }

  Json root = Json::MakeObject();
  root.Set("version", Json::String("1.0"));
  root.Set("truncation", Json());
  root.Set("padding", Json());
  Json added = Json::MakeArray();
  for (int id = 0; id < vocab_size; ++id) {
    bool is_special = GemmaSpecials().count(id) > 0;
    // Like Gemma: the specials and the low <unusedN> ids are added tokens (never split); the
    // fillers past the merges are plain vocabulary entries, which keeps a 262144-entry file small.
    if (is_special || id < kNewlineId) added.Push(AddedTokenJson(id, tokens[id], is_special));
  }
  root.Set("added_tokens", std::move(added));

  Json normalizer = Typed("Replace");
  normalizer.Set("pattern", StringPattern(" "));
  normalizer.Set("content", Json::String("▁"));
  root.Set("normalizer", std::move(normalizer));

  Json pre = Typed("Split");
  pre.Set("pattern", StringPattern(" "));
  pre.Set("behavior", Json::String("MergedWithPrevious"));
  pre.Set("invert", Json::Bool(false));
  root.Set("pre_tokenizer", std::move(pre));

  Json post = Typed("TemplateProcessing");
  post.Set("single",
           Json::MakeArray({TemplateItem("SpecialToken", "<bos>"), TemplateItem("Sequence", "A")}));
  post.Set("pair",
           Json::MakeArray({TemplateItem("SpecialToken", "<bos>"), TemplateItem("Sequence", "A"),
                            TemplateItem("SpecialToken", "<bos>"), TemplateItem("Sequence", "B")}));
  Json bos = Json::MakeObject();
  bos.Set("id", Json::String("<bos>"));
  bos.Set("ids", Json::MakeArray({Json::Int(2)}));
  bos.Set("tokens", Json::MakeArray({Json::String("<bos>")}));
  Json specials = Json::MakeObject();
  specials.Set("<bos>", std::move(bos));
  post.Set("special_tokens", std::move(specials));
  root.Set("post_processor", std::move(post));

  Json replace = Typed("Replace");
  replace.Set("pattern", StringPattern("▁"));
  replace.Set("content", Json::String(" "));
  Json decoder = Typed("Sequence");
  decoder.Set("decoders",
              Json::MakeArray({std::move(replace), Typed("ByteFallback"), Typed("Fuse")}));
  root.Set("decoder", std::move(decoder));

  Json model = Typed("BPE");
  model.Set("dropout", Json());
  model.Set("unk_token", Json::String("<unk>"));
  model.Set("continuing_subword_prefix", Json());
  model.Set("end_of_word_suffix", Json());
  model.Set("fuse_unk", Json::Bool(true));
  model.Set("byte_fallback", Json::Bool(true));
  model.Set("ignore_merges", Json::Bool(false));
  Json vocab = Json::MakeObject();
  for (int id = 0; id < vocab_size; ++id) vocab.Set(tokens[id], Json::Int(id));
  model.Set("vocab", std::move(vocab));
  Json merges = Json::MakeArray();
  for (const auto& [a, b] : kMerges) {
    merges.Push(Json::MakeArray({Json::String(a), Json::String(b)}));
  }
  model.Set("merges", std::move(merges));
  root.Set("model", std::move(model));
  return root.Dump();
}

}  // namespace gannet::tokenizer
