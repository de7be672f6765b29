// Fuzz target: the tokenizer (lib/tokenizer/tokenizer.h, streaming_detokenizer.h): loading a
// tokenizer.json, encoding arbitrary bytes, decoding arbitrary ids, streaming detokenization.
//
// Input: byte 0 holds flags, the rest is the payload.
//   flags & 3 == 0  payload is a tokenizer.json, optionally followed by a NUL byte and a text
//                   (raw NULs cannot occur in JSON): Tokenizer::FromJson (every field and
//                   pipeline piece it accepts or names as unsupported); when it loads, the text
//                   (or a fixed sample) is encoded and decoded with it and its ids are streamed.
//   flags & 3 == 1  payload is text for the committed tiny tokenizer (tests/data/tiny/e4b, parsed
//                   once, built afresh per input so its word cache cannot make runs differ):
//                   Encode, Decode of the ids, the streaming detokenizer over them.
//   flags & 3 == 2  payload is ids, 2 bytes each (little-endian u16 v: v < 0xFF00 gives
//                   v % (vocab + 4), so mostly valid ids and a few just past the end; larger v
//                   picks -1, INT32_MIN, INT32_MAX, ...): Decode, IdToToken, IsSpecial, streaming.
//   flags & 3 == 3  as 1, with the tiny tokenizer's decoder ending in a Strip of one leading
//                   space (the Llama-style decoder the streaming detokenizer handles specially).
//   flags & 4       Encode with add_special_tokens.
//   flags & 8       Decode/stream with skip_special_tokens.
// The seeds (corpus/tokenizer_fuzz, make_corpus.py) are the tiny tokenizer.json and variations
// of it, sample texts (ASCII, accents, emoji, special tokens, invalid UTF-8), and id lists.
//
// Properties checked (documented contracts, not just "no crash"):
//  - streaming: the concatenation of Push and Flush equals Decode of the ids Push accepted;
//  - round trip (mode 1, no special tokens added): Decode(Encode(text)) == text for valid UTF-8
//    without "▁" (the decoder turns every "▁" into a space, by design).
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/common/utf8.h"
#include "lib/tokenizer/streaming_detokenizer.h"
#include "lib/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace gannet;
using tokenizer::DecodeOptions;
using tokenizer::EncodeOptions;
using tokenizer::StreamingDetokenizer;
using tokenizer::Tokenizer;

std::string TinyJson() {
  auto text = ReadFileToString(fuzz::DataDir() + "/tiny/e4b/tokenizer.json", int64_t{1} << 24,
                               "tokenizer.json");
  if (!text.ok()) fuzz::Fail("cannot read the tiny tokenizer", text.status().ToString());
  return *std::move(text);
}

// The parsed tiny tokenizer.json (once) and the Llama-style variant of it: its decoder ends with
// Strip(" ", start 1, stop 0), which the streaming detokenizer handles specially.
const Json& TinyRoot(bool stripped) {
  static const Json* roots = [] {
    auto root = Json::Parse(TinyJson());
    auto decoder = Json::Parse(R"({"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})");
    if (!root.ok() || !decoder.ok()) fuzz::Fail("cannot parse the tiny tokenizer");
    Json* out = new Json[2]{*root, *root};
    out[1].Set("decoder", *std::move(decoder));
    return out;
  }();
  return roots[stripped ? 1 : 0];
}

// A fresh tokenizer for every input that encodes: Encode fills a word cache that would otherwise
// carry state from one input to the next (a repeated input would skip the BPE merges), and the
// fuzzer must be deterministic. Building one from the parsed JSON costs about 1.5 ms under ASan.
std::unique_ptr<Tokenizer> Tiny(bool stripped = false) {
  auto t = Tokenizer::FromParsedJson(TinyRoot(stripped), "tiny tokenizer.json");
  if (!t.ok()) fuzz::Fail("cannot load the tiny tokenizer", t.status().ToString());
  return *std::move(t);
}

// One shared tokenizer for decoding only (Decode and the streaming detokenizer keep no state).
const Tokenizer& SharedTiny() {
  static const Tokenizer* tok = Tiny().release();
  return *tok;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Decodes `ids` (any values), streams them, and checks that the stream agrees with Decode.
void DecodeAndStream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  const DecodeOptions options{.skip_special_tokens = skip};
  (void)tok.Decode(ids, options);
  for (int32_t id : ids) {
    (void)tok.IdToToken(id);
    (void)tok.IsSpecial(id);
    (void)tok.IsHeldByteToken(id);
  }
  auto stream = StreamingDetokenizer::Create(&tok, options);
  if (!stream.ok()) return;  // a decoder that edits the tail cannot stream: a status
  std::vector<int32_t> accepted;
  std::string streamed;
  for (int32_t id : ids) {
    auto delta = stream->Push(id);
    if (!delta.ok()) continue;  // out of the vocabulary: the stream is unchanged
    accepted.push_back(id);
    streamed += *delta;
  }
  streamed += stream->Flush();
  auto full = tok.Decode(accepted, options);
  if (!full.ok()) fuzz::Fail("Decode rejects ids that Push accepted", Join(accepted));
  if (streamed != *full) {
    fuzz::Fail("streamed text differs from Decode",
               "ids: " + Join(accepted) + "\nstream: " + streamed + "\ndecode: " + *full);
  }
}

void EncodeDecode(const Tokenizer& tok, std::string_view text, uint8_t flags, bool round_trip) {
  const bool add_special = flags & 4;
  const bool skip = flags & 8;
  const std::vector<int32_t> ids =
      tok.Encode(text, EncodeOptions{.add_special_tokens = add_special});
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size())
      fuzz::Fail("Encode produced an id outside the vocabulary");
  }
  DecodeAndStream(tok, ids, skip);
  if (round_trip && !add_special && !skip && IsValidUtf8(text) &&
      text.find("\u2581") == std::string_view::npos) {
    auto back = tok.Decode(ids);
    if (!back.ok() || *back != text) {
      fuzz::Fail(
          "Decode(Encode(text)) != text",
          "ids: " + Join(ids) + "\ndecoded: " + (back.ok() ? *back : back.status().ToString()));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  TinyRoot(false);
  SharedTiny();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t flags = in.U8();
  switch (flags & 3) {
    case 0: {
      const std::string payload = in.Rest();
      const size_t nul = payload.find('\0');
      auto tok =
          Tokenizer::FromJson(std::string_view(payload).substr(0, nul), "fuzz tokenizer.json");
      if (!tok.ok()) return 0;
      const Tokenizer& t = **tok;
      (void)t.special_prefix_ids();
      (void)t.TokenToId("<bos>");
      const std::string_view sample =
          "Hello world, <bos>caf\xC3\xA9 \xE2\x82\xAC\xF0\x9F\x98\x80\n\t \xFF!";
      EncodeDecode(t, nul == std::string::npos ? sample : std::string_view(payload).substr(nul + 1),
                   flags, /*round_trip=*/false);
      DecodeAndStream(t, {0, 1, 2, 3, t.vocab_size() - 1, t.vocab_size(), -1}, flags & 8);
      return 0;
    }
    case 1:
    case 3: {
      const std::string text = in.Rest();
      EncodeDecode(*Tiny(/*stripped=*/(flags & 3) == 3), text, flags,
                   /*round_trip=*/(flags & 3) == 1);
      return 0;
    }
    case 2: {
      const Tokenizer& t = SharedTiny();
      static constexpr int32_t kOdd[] = {-1, -2, INT32_MIN, INT32_MAX, 1 << 20, -512, 262144, 106};
      std::vector<int32_t> ids;
      while (!in.empty()) {
        const uint16_t v = in.U16();
        ids.push_back(v < 0xFF00 ? static_cast<int32_t>(v % (t.vocab_size() + 4)) : kOdd[v & 7]);
      }
      DecodeAndStream(t, ids, flags & 8);
      return 0;
    }
  }
  return 0;
}
