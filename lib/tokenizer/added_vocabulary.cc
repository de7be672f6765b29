#include "lib/tokenizer/added_vocabulary.h"

#include <algorithm>
#include <utility>

#include "lib/tokenizer/unicode_text.h"

namespace gannet::tokenizer {
namespace {

bool IsWordChar(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  return !IsUnicodeWhitespace(cp);
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view pattern, int32_t token) {
  if (pattern.empty()) return;  // an empty token can never match (HF skips it too)
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
  int32_t node = 0;
  for (char ch : pattern) {
    unsigned char c = static_cast<unsigned char>(ch);
    auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
    if (it != kids.end() && it->first == c) {
      node = it->second;
    } else {
      int32_t child = static_cast<int32_t>(nodes.size());
      kids.insert(it, {c, child});
      nodes.emplace_back();  // may reallocate; `kids` is not used afterwards
      node = child;
    }
  }
  // The first token with a given pattern wins, as in an Aho-Corasick automaton built in order.
  if (nodes[node].token < 0) nodes[node].token = token;
}

int32_t AddedVocabulary::Trie::Match(std::string_view text, size_t pos, size_t* len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    const auto& kids = nodes[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
    if (it == kids.end() || it->first != c) break;
    node = it->second;
    if (nodes[node].token >= 0) {
      best = nodes[node].token;
      *len = i + 1 - pos;
    }
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_.emplace(t.id, i);
    by_content_.emplace(t.content, i);
    if (t.normalized) {
      normalized_trie_.Insert(t.normalized_content, static_cast<int32_t>(i));
    } else {
      raw_trie_.Insert(t.content, static_cast<int32_t>(i));
    }
  }
}

namespace {

// Whether [begin, end) overlaps one of the sorted, disjoint ranges.
bool Overlaps(absl::Span<const std::pair<size_t, size_t>> ranges, size_t begin, size_t end) {
  auto it =
      std::upper_bound(ranges.begin(), ranges.end(), begin,
                       [](size_t b, const std::pair<size_t, size_t>& r) { return b < r.second; });
  return it != ranges.end() && it->first < end;
}

}  // namespace

void AddedVocabulary::Split(std::string_view text, bool raw, std::vector<Segment>* out,
                            absl::Span<const std::pair<size_t, size_t>> plain,
                            bool no_special) const {
  const Trie& trie = raw ? raw_trie_ : normalized_trie_;
  if (trie.nodes.size() == 1) {
    out->push_back({-1, text});
    return;
  }
  size_t start_offset = 0;  // end of the last emitted segment
  size_t pos = 0;           // where the matcher resumes (end of the last raw match)
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    int32_t index = trie.Match(text, pos, &len);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[index];
    if (t.special && (no_special || Overlaps(plain, pos, pos + len))) {
      ++pos;  // text here is plain: the bytes go to the model like any other
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    size_t cp_len;
    if (t.single_word) {
      bool start_ok = start == 0 || !IsWordChar(LastCodePoint(text.substr(0, start), &cp_len));
      bool stop_ok = stop == text.size() || !IsWordChar(NextCodePoint(text.substr(stop), &cp_len));
      // A rejected match still consumes its span, as the Aho-Corasick iterator in HF does.
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0 && IsUnicodeWhitespace(LastCodePoint(text.substr(0, s), &cp_len))) s -= cp_len;
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < text.size() && IsUnicodeWhitespace(NextCodePoint(text.substr(stop), &cp_len))) {
        stop += cp_len;
      }
    }
    if (start_offset < start) out->push_back({-1, text.substr(start_offset, start - start_offset)});
    out->push_back({t.id, text.substr(start, stop - start)});
    start_offset = std::max(start_offset, stop);
  }
  if (start_offset < text.size() || text.empty()) {
    out->push_back({-1, text.substr(start_offset)});
  }
}

const AddedToken* AddedVocabulary::FindById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(absl::string_view(content.data(), content.size()));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace gannet::tokenizer
