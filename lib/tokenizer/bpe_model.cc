#include "lib/tokenizer/bpe_model.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "lib/common/status.h"
#include "lib/common/utf8.h"

namespace gannet::tokenizer {

using internal::JsonWhere;

// Words seen before, as HF's BPE cache: bounded, filled until full and never evicted, only for
// short words (long ones are rare repeats and would pin memory). Sharded to keep concurrent
// encoders from serialising on one lock; std::mutex because Debian's absl::Mutex runs deadlock
// detection on every lock, which cost 15% of encode time here.
class BpeModel::WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;
  static constexpr size_t kShards = 16;
  static constexpr size_t kEntriesPerShard = 10000 / kShards;

  bool Get(std::string_view word, std::vector<int32_t>* ids) const {
    const Shard& s = shards_[ShardOf(word)];
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(absl::string_view(word.data(), word.size()));
    if (it == s.map.end()) return false;
    ids->insert(ids->end(), it->second.begin(), it->second.end());
    return true;
  }
  void Put(std::string_view word, const int32_t* ids, size_t n) {
    Shard& s = shards_[ShardOf(word)];
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.map.size() >= kEntriesPerShard) return;
    s.map.try_emplace(std::string(word), ids, ids + n);
  }

 private:
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> map;
  };
  static size_t ShardOf(std::string_view word) {
    size_t h = word.size();
    for (char c : word.substr(0, 16)) h = h * 131 + static_cast<unsigned char>(c);
    return h % kShards;
  }
  std::array<Shard, kShards> shards_;
};

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {
  byte_ids_.fill(-1);
  ascii_ids_.fill(-1);
}
BpeModel::~BpeModel() = default;

namespace {

absl::StatusOr<std::string> OptionalString(const Json& obj, std::string_view key,
                                           const JsonWhere& where) {
  const Json* v = obj.Find(key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return where.Child(key).Error("must be a string or null");
  return v->AsString();
}

// One entry of "merges": "a b" (exactly one space, as HF's legacy format) or ["a", "b"].
absl::Status ParseMerge(const Json& m, const JsonWhere& where, std::string* a, std::string* b) {
  if (m.is_string()) {
    const std::string& s = m.AsString();
    size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return where.Error(fmt::format("merge \"{}\" must be two tokens separated by one space", s));
    }
    *a = s.substr(0, space);
    *b = s.substr(space + 1);
    return absl::OkStatus();
  }
  if (m.is_array() && m.AsArray().size() == 2 && m.AsArray()[0].is_string() &&
      m.AsArray()[1].is_string()) {
    *a = m.AsArray()[0].AsString();
    *b = m.AsArray()[1].AsString();
    return absl::OkStatus();
  }
  return where.Error("a merge must be \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

bool BpeModel::covers_every_character() const {
  const bool all_bytes =
      std::all_of(byte_ids_.begin(), byte_ids_.end(), [](int32_t id) { return id >= 0; });
  if (byte_fallback_ && all_bytes) return true;
  return unk_id_.has_value() && !fuse_unk_;
}

void BpeModel::Builder::AddVocab(std::string token, const Json& id) {
  vocab_.emplace_back(std::move(token), id.is_int() ? id.AsInt() : -1);
}

absl::Status BpeModel::Builder::AddMerge(const Json& merge, const JsonWhere& where) {
  std::string a, b;
  GANNET_RETURN_IF_ERROR(ParseMerge(merge, where, &a, &b));
  merge_text_ += a;
  merge_ends_.push_back(static_cast<uint32_t>(merge_text_.size()));
  merge_text_ += b;
  merge_ends_.push_back(static_cast<uint32_t>(merge_text_.size()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Builder::Finish(const Json& model,
                                                                    bool has_vocab, bool has_merges,
                                                                    const JsonWhere& where) {
  std::unique_ptr<BpeModel> bpe(new BpeModel());
  GANNET_ASSIGN_OR_RETURN(bpe->byte_fallback_,
                          internal::GetBool(model, "byte_fallback", false, where));
  GANNET_ASSIGN_OR_RETURN(bpe->fuse_unk_, internal::GetBool(model, "fuse_unk", false, where));
  GANNET_ASSIGN_OR_RETURN(bpe->ignore_merges_,
                          internal::GetBool(model, "ignore_merges", false, where));
  GANNET_ASSIGN_OR_RETURN(bpe->continuing_subword_prefix_,
                          OptionalString(model, "continuing_subword_prefix", where));
  GANNET_ASSIGN_OR_RETURN(bpe->end_of_word_suffix_,
                          OptionalString(model, "end_of_word_suffix", where));
  if (const Json* d = model.Find("dropout"); d != nullptr && !d->is_null()) {
    if (!d->is_number()) return where.Child("dropout").Error("must be a number or null");
    if (d->AsDouble() != 0.0) {
      return UnimplementedError(
          "{}: {}: BPE dropout {} is not supported (it makes encoding "
          "random)",
          where.source, where.Child("dropout").path, d->AsDouble());
    }
  }

  // Vocabulary.
  JsonWhere vw = where.Child("vocab");
  if (!has_vocab) return vw.Error("must be an object");
  bpe->vocab_.reserve(vocab_.size());
  // Ids index a table sized by the largest: they must be nearly dense (real vocabularies are), so
  // one entry with id 16777215 cannot make a 512 MiB table.
  const int64_t id_limit =
      std::min<int64_t>(kMaxTokenId, 2 * static_cast<int64_t>(vocab_.size()) + 1024);
  for (const auto& [token, id] : vocab_) {
    if (id < 0 || id >= id_limit) {
      return vw.Error(
          fmt::format("token \"{}\" must map to an id in [0, {}) (a vocabulary of {} entries)",
                      EscapeForMessage(token), id_limit, vocab_.size()));
    }
    if (static_cast<size_t>(id) >= bpe->id_to_token_.size()) {
      bpe->id_to_token_.resize(id + 1);
      bpe->has_id_.resize(id + 1, false);
    }
  }
  for (auto& [token, id] : vocab_) {
    if (bpe->has_id_[id]) {
      return vw.Error(fmt::format("id {} is used by both \"{}\" and \"{}\"", id,
                                  EscapeForMessage(bpe->id_to_token_[id]),
                                  EscapeForMessage(token)));
    }
    // The file's JSON object cannot repeat a key (the tree reader refuses it; streamed, it is
    // refused here).
    if (!bpe->vocab_.emplace(token, static_cast<int32_t>(id)).second) {
      return vw.Error(fmt::format("duplicate key \"{}\"", EscapeForMessage(token)));
    }
    bpe->has_id_[id] = true;
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
        std::string_view(token).find_first_not_of("0123456789ABCDEF", 3) == 5) {
      const auto byte = static_cast<unsigned char>(std::stoi(token.substr(3, 2), nullptr, 16));
      bpe->byte_ids_[byte] = static_cast<int32_t>(id);
    }
    if (token.size() == 1 && static_cast<unsigned char>(token[0]) < 128) {
      bpe->ascii_ids_[static_cast<unsigned char>(token[0])] = static_cast<int32_t>(id);
    }
    bpe->id_to_token_[id] = std::move(token);
  }
  std::vector<std::pair<std::string, int64_t>>().swap(vocab_);

  // Unknown token.
  GANNET_ASSIGN_OR_RETURN(std::string unk, OptionalString(model, "unk_token", where));
  bool all_bytes =
      std::all_of(bpe->byte_ids_.begin(), bpe->byte_ids_.end(), [](int32_t id) { return id >= 0; });
  if (!unk.empty()) {
    if (auto id = bpe->Lookup(unk)) {
      bpe->unk_id_ = *id;
    } else if (!(bpe->byte_fallback_ && all_bytes)) {
      // HF fails on the first character it cannot represent; we fail at load instead.
      return where.Child("unk_token").Error(fmt::format("\"{}\" is not in the vocabulary", unk));
    }
  }

  // Merges.
  JsonWhere mw = where.Child("merges");
  if (!has_merges) return mw.Error("must be an array");
  const size_t num_merges = merge_ends_.size() / 2;
  bpe->merges_.reserve(num_merges);
  const size_t prefix_len = bpe->continuing_subword_prefix_.size();
  const std::string_view text = merge_text_;
  for (size_t rank = 0; rank < num_merges; ++rank) {
    JsonWhere w = mw.Index(rank);
    const size_t a_begin = rank == 0 ? 0 : merge_ends_[2 * rank - 1];
    const std::string_view a = text.substr(a_begin, merge_ends_[2 * rank] - a_begin);
    const std::string_view b =
        text.substr(merge_ends_[2 * rank], merge_ends_[2 * rank + 1] - merge_ends_[2 * rank]);
    auto a_id = bpe->Lookup(a), b_id = bpe->Lookup(b);
    if (!a_id) return w.Error(fmt::format("token \"{}\" is not in the vocabulary", a));
    if (!b_id) return w.Error(fmt::format("token \"{}\" is not in the vocabulary", b));
    if (b.size() < prefix_len) {
      return w.Error(fmt::format("token \"{}\" lacks the continuing-subword prefix", b));
    }
    std::string merged = std::string(a) + std::string(b.substr(prefix_len));
    auto new_id = bpe->Lookup(merged);
    if (!new_id) {
      return w.Error(fmt::format("merged token \"{}\" is not in the vocabulary", merged));
    }
    // A repeated pair keeps its last rank, as HF's HashMap collect does.
    bpe->merges_[PairKey(*a_id, *b_id)] = {static_cast<int32_t>(rank), *new_id};
  }
  std::string().swap(merge_text_);
  std::vector<uint32_t>().swap(merge_ends_);
  bpe->split_at_metaspace_ = bpe->CanSplitAtMetaspace();
  return bpe;
}

// A token whose string has "▁" right after some other character is the only kind of token that
// can span a cut placed before such a "▁" (the piece right of the cut starts with the "▁" token;
// the piece left of it ends in a character, byte token or <unk>, none of which ends in "▁").
// Without one among the merge results, cutting there cannot change the result. (ignore_merges
// looks the whole word up before Tokenize cuts it, so it needs no extra care.)
bool BpeModel::CanSplitAtMetaspace() const {
  if (!continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty()) return false;
  if (!Lookup(kMetaspace)) return false;  // "▁" would fall back to bytes
  auto spans_cut = [](std::string_view t) {
    for (size_t pos = t.find(kMetaspace, 1); pos != std::string_view::npos;
         pos = t.find(kMetaspace, pos + kMetaspace.size())) {
      if (pos < kMetaspace.size() ||
          t.compare(pos - kMetaspace.size(), kMetaspace.size(), kMetaspace) != 0) {
        return true;
      }
    }
    return false;
  };
  for (const auto& [pair, merge] : merges_) {
    if (spans_cut(id_to_token_[merge.new_id])) return false;
  }
  return true;
}

std::optional<int32_t> BpeModel::Lookup(std::string_view s) const {
  auto it = vocab_.find(absl::string_view(s.data(), s.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const { return Lookup(token); }

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = Lookup(word)) {
      ids->push_back(*id);
      return;
    }
  }
  if (!split_at_metaspace_) {
    TokenizeCached(word, ids);
    return;
  }
  // Cut before every "▁" that follows another character: Parse proved no merge spans such a
  // cut, so the pieces merge independently and give the ids of the whole word, while staying
  // short enough for the cache and the merge queue.
  size_t start = 0;
  for (size_t pos = word.find(kMetaspace, 1); pos != std::string_view::npos;
       pos = word.find(kMetaspace, pos + kMetaspace.size())) {
    if (pos >= kMetaspace.size() &&
        word.compare(pos - kMetaspace.size(), kMetaspace.size(), kMetaspace) == 0) {
      continue;
    }
    TokenizeCached(word.substr(start, pos - start), ids);
    start = pos;
  }
  TokenizeCached(word.substr(start), ids);
}

void BpeModel::TokenizeCached(std::string_view word, std::vector<int32_t>* ids) const {
  const bool cacheable = word.size() < WordCache::kMaxWordBytes;
  if (cacheable && cache_->Get(word, ids)) return;
  size_t first = ids->size();
  MergeWord(word, ids);
  if (cacheable) cache_->Put(word, ids->data() + first, ids->size() - first);
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool removed;
};

struct QueuedMerge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};

// std heap functions build a max-heap; "a after b" puts the lowest rank (then leftmost) on top.
// A function object (not a function pointer) so the heap operations inline it.
struct After {
  bool operator()(const QueuedMerge& a, const QueuedMerge& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  // Scratch is per call, so concurrent Tokenize calls share nothing but the cache.
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t pos = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, pos - 1, pos + 1, false});
  };
  const bool plain = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  int32_t pending_unk = -1;  // HF keeps one <unk> open to fuse neighbours into it
  std::string decorated;
  size_t i = 0;
  while (i < word.size()) {
    size_t len = Utf8SequenceLength(word.substr(i));
    if (len == 0) len = 1;  // callers sanitize; never loop forever on bad bytes
    std::string_view ch = word.substr(i, len);
    std::string_view s = ch;
    if (!plain) {
      decorated.clear();
      if (i > 0) decorated += continuing_subword_prefix_;
      decorated += ch;
      if (i + len == word.size()) decorated += end_of_word_suffix_;
      s = decorated;
    }
    i += len;
    int32_t id = -1;
    if (s.size() == 1 && static_cast<unsigned char>(s[0]) < 128) {
      id = ascii_ids_[static_cast<unsigned char>(s[0])];
    } else if (auto found = Lookup(s)) {
      id = *found;
    }
    if (id >= 0) {
      if (pending_unk >= 0) {
        add(pending_unk);
        pending_unk = -1;
      }
      add(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(s.begin(), s.end(), [&](char c) {
          return byte_ids_[static_cast<unsigned char>(c)] >= 0;
        })) {
      // Like HF, this does not close a pending <unk> first.
      for (char c : s) add(byte_ids_[static_cast<unsigned char>(c)]);
      continue;
    }
    if (!unk_id_) continue;  // no <unk> configured: HF drops the character
    if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
    pending_unk = *unk_id_;
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::vector<QueuedMerge> heap;
  heap.reserve(symbols.size());
  auto push = [&](int32_t pos, int32_t left, int32_t right) {
    auto it = merges_.find(PairKey(left, right));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.new_id});
    std::push_heap(heap.begin(), heap.end(), After());
  };
  for (size_t p = 0; p + 1 < symbols.size(); ++p) {
    auto it = merges_.find(PairKey(symbols[p].id, symbols[p + 1].id));
    if (it != merges_.end()) {
      heap.push_back({it->second.rank, static_cast<int32_t>(p), it->second.new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), After());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), After());
    QueuedMerge top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[top.pos];
    if (cur.removed || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    // Stale entry: one side changed since it was queued.
    auto it = merges_.find(PairKey(cur.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    cur.id = top.new_id;
    right.removed = true;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) push(cur.prev, symbols[cur.prev].id, cur.id);
    if (cur.next >= 0) push(top.pos, cur.id, symbols[cur.next].id);
  }
  for (const Symbol& s : symbols) {
    if (!s.removed) ids->push_back(s.id);
  }
}

}  // namespace gannet::tokenizer
