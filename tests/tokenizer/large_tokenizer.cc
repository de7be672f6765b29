#include "tests/tokenizer/large_tokenizer.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "lib/common/json.h"

namespace gannet::tokenizer::testing {

std::string MakeLargeTokenizerJson(const LargeTokenizerSpec& spec) {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
  }
  const size_t first_piece = tokens.size();
  tokens.push_back("\xE2\x96\x81");  // "▁"
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) tokens.push_back(std::string(1, c));
  for (char c = '0'; c <= '9'; ++c) tokens.push_back(std::string(1, c));
  // Many-byte characters (Cyrillic, CJK), as a multilingual vocabulary has.
  for (char32_t c : {0x434, 0x435, 0x438, 0x43E, 0x442, 0x4E2D, 0x6587, 0x7684, 0x4E00, 0x662F}) {
    std::string s;
    if (c < 0x800) {
      s = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    } else {
      s = {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
           static_cast<char>(0x80 | (c & 0x3F))};
    }
    tokens.push_back(s);
  }
  absl::flat_hash_map<std::string, int> ids;
  for (size_t i = 0; i < tokens.size(); ++i) ids.emplace(tokens[i], static_cast<int>(i));

  // Grow the vocabulary by merging two pieces, shorter ones more often (as real merges do).
  std::mt19937_64 rng(56);
  std::vector<std::pair<int, int>> merges;
  absl::flat_hash_set<uint64_t> merged;
  // Most merges append a short piece to a longer one; a piece from the first few thousand
  // tokens is short, and one whose own pieces are in the vocabulary gives other splits too.
  auto pick = [&](size_t window) {
    const size_t n = std::min(tokens.size() - first_piece, window);
    return static_cast<int>(first_piece + rng() % n);
  };
  while (static_cast<int>(tokens.size()) < spec.vocab_size) {
    const int a = pick(tokens.size()), b = pick(2000);
    std::string t = tokens[a] + tokens[b];
    if (t.size() > 40 || ids.contains(t)) continue;
    ids.emplace(t, static_cast<int>(tokens.size()));
    tokens.push_back(std::move(t));
    merges.emplace_back(a, b);
    merged.insert(uint64_t(a) << 32 | uint64_t(b));
  }
  // More merges, as real vocabularies have: other ways to split a token into two pieces.
  for (size_t i = first_piece; i < tokens.size() && static_cast<int>(merges.size()) < spec.merges;
       ++i) {
    const absl::string_view t(tokens[i].data(), tokens[i].size());
    for (size_t k = 1; k < t.size(); ++k) {
      if ((static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) continue;  // inside a character
      auto a = ids.find(t.substr(0, k));
      if (a == ids.end()) continue;
      auto b = ids.find(t.substr(k));
      if (b == ids.end()) continue;
      if (!merged.insert(uint64_t(a->second) << 32 | uint64_t(b->second)).second) continue;
      merges.emplace_back(a->second, b->second);
      if (static_cast<int>(merges.size()) >= spec.merges) break;
    }
  }

  std::string out;
  out.reserve(40u << 20);
  out += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  out += "  \"added_tokens\": [";
  const int num_added = std::min<int>(spec.added_tokens, static_cast<int>(tokens.size()));
  for (int i = 0; i < num_added; ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += "    {\n      \"id\": " + std::to_string(i) + ",\n      \"content\": ";
    AppendJsonString(tokens[i], &out);
    out +=
        ",\n      \"single_word\": false,\n      \"lstrip\": false,\n      \"rstrip\": false,\n"
        "      \"normalized\": false,\n      \"special\": ";
    out += i < 4 ? "true" : "false";
    out += "\n    }";
  }
  out += "\n  ],\n";
  out +=
      "  \"normalizer\": {\n    \"type\": \"Replace\",\n    \"pattern\": {\n      \"String\": \" "
      "\"\n"
      "    },\n    \"content\": \"\xE2\x96\x81\"\n  },\n"
      "  \"pre_tokenizer\": {\n    \"type\": \"Split\",\n    \"pattern\": {\n      \"String\": \" "
      "\"\n"
      "    },\n    \"behavior\": \"MergedWithPrevious\",\n    \"invert\": false\n  },\n"
      "  \"post_processor\": {\n    \"type\": \"TemplateProcessing\",\n    \"single\": [\n"
      "      {\n        \"SpecialToken\": {\n          \"id\": \"<bos>\",\n          \"type_id\": "
      "0\n"
      "        }\n      },\n      {\n        \"Sequence\": {\n          \"id\": \"A\",\n"
      "          \"type_id\": 0\n        }\n      }\n    ],\n    \"pair\": [],\n"
      "    \"special_tokens\": {\n      \"<bos>\": {\n        \"id\": \"<bos>\",\n"
      "        \"ids\": [\n          2\n        ],\n        \"tokens\": [\n          \"<bos>\"\n"
      "        ]\n      }\n    }\n  },\n"
      "  \"decoder\": {\n    \"type\": \"Sequence\",\n    \"decoders\": [\n      {\n"
      "        \"type\": \"Replace\",\n        \"pattern\": {\n          \"String\": "
      "\"\xE2\x96\x81\"\n"
      "        },\n        \"content\": \" \"\n      },\n      {\n        \"type\": "
      "\"ByteFallback\"\n"
      "      },\n      {\n        \"type\": \"Fuse\"\n      }\n    ]\n  },\n";
  out +=
      "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": "
      "\"<unk>\",\n"
      "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
      "    \"fuse_unk\": true,\n    \"byte_fallback\": true,\n    \"ignore_merges\": false,\n"
      "    \"vocab\": {";
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i == 0 ? "\n      " : ",\n      ";
    AppendJsonString(tokens[i], &out);
    out += ": " + std::to_string(i);
  }
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < merges.size(); ++i) {
    out += i == 0 ? "\n      [\n        " : ",\n      [\n        ";
    AppendJsonString(tokens[merges[i].first], &out);
    out += ",\n        ";
    AppendJsonString(tokens[merges[i].second], &out);
    out += "\n      ]";
  }
  out += "\n    ]\n  }\n}";
  return out;
}

}  // namespace gannet::tokenizer::testing
