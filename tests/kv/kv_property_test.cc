// Randomized property test of KvManager: >= 10,000 operations per configuration against a
// shadow model and a simulated device memory (each page slot records the token and position the
// "runner" wrote there). After every operation: CheckInvariants (page states, refcounts = table
// references + pins, nothing leaks), the exact hole pattern of every table, every position a
// kernel would read validated and holding the right token, every cached block's pages holding
// its tokens, and distinct referenced pages == owned pages. Prefix hits are re-verified by
// reading the attached pages back. Fixed seed per configuration: deterministic.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "tests/kv/kv_test_layout.h"
#include "lib/kv/kv_manager.h"

namespace gannet::kv {
namespace {

struct Config {
  std::string name;
  int32_t page_size;
  int32_t window;
  int32_t sliding_pages;
  int32_t full_pages;
  int64_t max_len;    // sequences finish here
  int64_t max_chunk;  // prefill chunk
  int num_seqs;       // running at most
  int num_ops;
  uint64_t seed;
  BlockHashFn hash = nullptr;
};

// Collides constantly: 16 buckets per parent.
uint64_t WeakHash(uint64_t parent, absl::Span<const int32_t> tokens) {
  return parent * 16 + static_cast<uint64_t>(tokens[0] % 4) * 4 + tokens.back() % 4 + 1;
}

struct Slot {
  int32_t token = -1;
  int64_t pos = -1;
};

struct Shadow {
  std::vector<int32_t> tokens;  // everything known: prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t computed = 0;   // == Length()
  int64_t keep_from = 0;  // reference model of ReleaseSlidingBefore
};

class Harness {
 public:
  explicit Harness(const Config& c) : c_(c), rng_(c.seed) {
    KvManagerOptions options;
    options.block_hash = c.hash;
    options.debug_validate = true;
    const KvLayout layout = TestKvLayout(c.page_size, c.window, c.sliding_pages, c.full_pages);
    m_ = std::move(KvManager::Create(layout, options)).value();
    for (KvGroup g : kAllKvGroups) {
      memory_[GroupIndex(g)].resize(static_cast<size_t>(layout.num_pages[GroupIndex(g)]) *
                                    c.page_size);
    }
    // Documents that prompts share prefixes of.
    for (int d = 0; d < 5; ++d) {
      std::vector<int32_t> doc(c.max_len);
      for (auto& t : doc) t = static_cast<int32_t>(Uniform(0, 999));
      docs_.push_back(doc);
    }
  }

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Coin(double p) { return std::bernoulli_distribution(p)(rng_); }

  void Run() {
    for (int op = 0; op < c_.num_ops; ++op) {
      const int64_t choice = Uniform(0, 99);
      if (shadow_.empty() || (choice < 12 && static_cast<int>(shadow_.size()) < c_.num_seqs)) {
        AddRequest();
      } else if (choice < 70) {
        Step(RandomSeq());
      } else if (choice < 74) {
        Fork(RandomSeq());
      } else if (choice < 79) {
        Finish(RandomSeq());
      } else if (choice < 84) {
        Preempt(RandomSeq());
      } else if (choice < 89) {
        const int64_t id = RandomSeq();
        ASSERT_TRUE(m_->CommitPages(id, shadow_[id].tokens, shadow_[id].computed).ok());
      } else if (choice < 93) {
        Truncate(RandomSeq());
      } else if (choice < 97) {
        PinOrUnpin();
      } else {
        Lookup();
      }
      if (::testing::Test::HasFatalFailure()) return;
      CheckAll(op);
      if (::testing::Test::HasFatalFailure()) return;
    }
    const KvStats& stats = m_->stats();
    std::printf(
        "%s: %d ops, %lld exhausted, %lld prefix hits (hit rate %.2f), evictions %lld sliding "
        "%lld full\n",
        c_.name.c_str(), c_.num_ops, static_cast<long long>(exhausted_),
        static_cast<long long>(hits_), stats.HitRate(), static_cast<long long>(stats.evictions[0]),
        static_cast<long long>(stats.evictions[1]));
    for (const auto& [kind, count] : counts_) {
      std::printf("  %s %lld", kind.c_str(), static_cast<long long>(count));
    }
    std::printf("\n");
    EXPECT_GT(exhausted_, c_.num_ops / 200) << "pools should run out now and then";
    EXPECT_GT(m_->stats().prefix_hit_tokens, 0);
    for (KvGroup g : kAllKvGroups) {
      if (m_->has_group(g)) {
        EXPECT_GT(m_->stats().evictions[GroupIndex(g)], 0) << KvGroupName(g);
      }
    }
  }

 private:
  int64_t RandomSeq() {
    auto it = shadow_.begin();
    std::advance(it, Uniform(0, static_cast<int64_t>(shadow_.size()) - 1));
    return it->first;
  }
  Slot& At(KvGroup g, int32_t page, int64_t pos) {
    return memory_[GroupIndex(g)][static_cast<size_t>(page) * c_.page_size + pos % c_.page_size];
  }
  int32_t PageOf(int64_t id, KvGroup g, int64_t pos) {
    return (*m_->PageTable(id, g))[pos / c_.page_size];
  }
  int64_t SlidingFloor(int64_t next) const {
    return m_->has_group(KvGroup::kSliding) ? std::max<int64_t>(0, next - c_.window + 1) : 0;
  }

  void AddRequest() {
    const std::vector<int32_t>& doc = docs_[Uniform(0, docs_.size() - 1)];
    Shadow s;
    s.tokens.assign(doc.begin(), doc.begin() + Uniform(1, c_.max_len * 3 / 4));
    if (Coin(0.5)) {
      for (int64_t i = Uniform(1, 3 * c_.page_size); i > 0; --i) {
        s.tokens.push_back(static_cast<int32_t>(Uniform(0, 999)));
      }
    }
    if (static_cast<int64_t>(s.tokens.size()) > c_.max_len - 1) s.tokens.resize(c_.max_len - 1);
    s.prompt_len = static_cast<int64_t>(s.tokens.size());
    const int64_t id = next_id_++;
    ASSERT_TRUE(m_->AddSequence(id).ok());
    shadow_[id] = std::move(s);
    AttachCached(id);
  }

  // MatchPrefix + AttachPrefix, as the scheduler does for a new or preempted request.
  void AttachCached(int64_t id) {
    Shadow& s = shadow_[id];
    const int64_t hit = m_->MatchPrefix(s.tokens, s.prompt_len - 1);
    ASSERT_EQ(hit % c_.page_size, 0);
    ASSERT_LE(hit, std::max<int64_t>(0, s.prompt_len - 1));
    if (hit == 0) return;
    ASSERT_TRUE(m_->AttachPrefix(id, s.tokens, hit).ok());
    s.computed = hit;
    s.keep_from = m_->has_group(KvGroup::kSliding) ? std::max<int64_t>(0, hit - c_.window) : 0;
    // The hit is only as good as the pages behind it: read every attached position back.
    for (KvGroup g : kAllKvGroups) {
      if (!m_->has_group(g)) continue;
      const int64_t first = g == KvGroup::kSliding ? s.keep_from : 0;
      for (int64_t pos = first; pos < hit; ++pos) {
        const Slot& slot = At(g, PageOf(id, g, pos), pos);
        ASSERT_TRUE(slot.token == s.tokens[pos] && slot.pos == pos)
            << KvGroupName(g) << " prefix hit of " << hit << " wrong at " << pos;
      }
    }
    ++hits_;
  }

  struct Snapshot {
    PerGroup<PoolUsage> usage;
    PerGroup<std::vector<int32_t>> table;
    int64_t length;
  };
  Snapshot Take(int64_t id) {
    Snapshot snap;
    for (KvGroup g : kAllKvGroups) {
      snap.usage[GroupIndex(g)] = m_->Usage(g);
      auto t = *m_->PageTable(id, g);
      snap.table[GroupIndex(g)].assign(t.begin(), t.end());
    }
    snap.length = *m_->Length(id);
    return snap;
  }
  void ExpectUnchanged(int64_t id, const Snapshot& before) {
    const Snapshot after = Take(id);
    for (KvGroup g : kAllKvGroups) {
      const int gi = GroupIndex(g);
      EXPECT_EQ(after.usage[gi].free, before.usage[gi].free);
      EXPECT_EQ(after.usage[gi].cached, before.usage[gi].cached);
      EXPECT_EQ(after.table[gi], before.table[gi]);
    }
    EXPECT_EQ(after.length, before.length);
  }

  // One scheduler step for a sequence: a prefill chunk, one decode token, or a speculative
  // verify of 2..4 tokens rolled back to the accepted ones.
  void Step(int64_t id) {
    Shadow& s = shadow_[id];
    int64_t n;
    int64_t rollback = 0;
    if (s.computed < s.prompt_len) {
      n = std::min(Uniform(1, c_.max_chunk), s.prompt_len - s.computed);
    } else {
      n = Coin(0.8) ? 1 : Uniform(2, 4);
      if (n > 1) rollback = Uniform(0, n - 1);
      for (int64_t i = 0; i < n; ++i) s.tokens.push_back(static_cast<int32_t>(Uniform(0, 999)));
    }
    const int64_t start = s.computed;
    // Now and then a careless caller releases too much: the manager clamps it to what the next
    // position reads.
    const int64_t release =
        Coin(0.1) ? start + Uniform(-c_.window, c_.window) : start - c_.window + 1;
    ASSERT_TRUE(m_->ReleaseSlidingBefore(id, release).ok());
    s.keep_from =
        std::max(s.keep_from, std::min(std::max<int64_t>(release, 0), SlidingFloor(start)));
    const Snapshot before = Take(id);
    const absl::Status grown = m_->Grow(id, start + n);
    if (!grown.ok()) {
      ASSERT_EQ(grown.code(), absl::StatusCode::kResourceExhausted) << grown;
      ExpectUnchanged(id, before);
      ++exhausted_;
      s.tokens.resize(std::max(s.prompt_len, start));
      if (Coin(0.5)) {
        Preempt(id);
      } else {
        Preempt(RandomSeq());
      }
      return;
    }
    // What the kernels read for this step, then the write of the new positions.
    for (KvGroup g : kAllKvGroups) {
      if (!m_->has_group(g)) continue;
      const int64_t first = g == KvGroup::kSliding ? SlidingFloor(start) : 0;
      const absl::Status valid = m_->ValidateRead(id, g, first, start + n - 1);
      ASSERT_TRUE(valid.ok()) << valid;
      for (int64_t pos = first; pos < start; ++pos) {
        const Slot& slot = At(g, PageOf(id, g, pos), pos);
        ASSERT_TRUE(slot.token == s.tokens[pos] && slot.pos == pos)
            << "seq " << id << " reads a wrong " << KvGroupName(g) << " key at " << pos;
      }
      for (int64_t pos = start; pos < start + n; ++pos) {
        At(g, PageOf(id, g, pos), pos) = Slot{s.tokens[pos], pos};
      }
    }
    s.computed = start + n;
    ++counts_["step"];
    if (rollback > 0) {
      auto copies = m_->Truncate(id, s.computed - rollback);
      if (!copies.ok()) {
        ASSERT_EQ(copies.status().code(), absl::StatusCode::kResourceExhausted);
        ++exhausted_;
      } else {
        ApplyCopies(*copies);
        ++counts_["rollback"];
        s.computed -= rollback;
        s.tokens.resize(s.computed);
      }
    }
    if (Coin(0.6)) {
      ASSERT_TRUE(m_->CommitPages(id, s.tokens, s.computed).ok());
    }
    if (s.computed >= c_.max_len) Finish(id);
  }

  void ApplyCopies(const std::vector<PageCopy>& copies) {
    counts_["page_copies"] += static_cast<int64_t>(copies.size());
    for (const PageCopy& copy : copies) {
      for (int64_t i = 0; i < c_.page_size; ++i) {
        At(copy.group, copy.dst_page, i) = At(copy.group, copy.src_page, i);
      }
    }
  }

  void Fork(int64_t src) {
    if (static_cast<int>(shadow_.size()) >= c_.num_seqs) return;
    const int64_t dst = next_id_++;
    auto copies = m_->Fork(src, dst);
    if (!copies.ok()) {
      ASSERT_EQ(copies.status().code(), absl::StatusCode::kResourceExhausted);
      ASSERT_FALSE(m_->HasSequence(dst));
      ++exhausted_;
      return;
    }
    const int64_t partial = shadow_[src].computed % c_.page_size != 0;
    ASSERT_EQ(copies->size(), partial ? (m_->has_group(KvGroup::kSliding) ? 1u : 0u) +
                                            (m_->has_group(KvGroup::kFull) ? 1u : 0u)
                                      : 0u);
    ApplyCopies(*copies);
    ++counts_["fork"];
    shadow_[dst] = shadow_[src];
  }

  void Finish(int64_t id) {
    ++counts_["free"];
    ASSERT_TRUE(m_->Free(id).ok());
    shadow_.erase(id);
    for (size_t i = 0; i < pins_.size();) {
      if (Coin(0.5)) {
        ASSERT_TRUE(m_->UnpinPage(pins_[i].first, pins_[i].second).ok());
        pins_.erase(pins_.begin() + i);
      } else {
        ++i;
      }
    }
  }

  // Drops all pages, then resumes from whatever the prefix cache still has.
  void Preempt(int64_t id) {
    ++counts_["preempt"];
    Shadow s = shadow_[id];
    ASSERT_TRUE(m_->Free(id).ok());
    ASSERT_TRUE(m_->AddSequence(id).ok());
    s.prompt_len = static_cast<int64_t>(s.tokens.size());  // recompute everything known
    s.computed = 0;
    s.keep_from = 0;
    shadow_[id] = s;
    AttachCached(id);
  }

  void Truncate(int64_t id) {
    Shadow& s = shadow_[id];
    const int64_t new_len =
        Uniform(std::max<int64_t>(0, s.computed - 2 * c_.page_size), s.computed);
    const bool released = s.keep_from > SlidingFloor(new_len);
    auto copies = m_->Truncate(id, new_len);
    if (released) {
      ASSERT_EQ(copies.status().code(), absl::StatusCode::kFailedPrecondition);
      return;
    }
    if (!copies.ok()) {
      ASSERT_EQ(copies.status().code(), absl::StatusCode::kResourceExhausted);
      ++exhausted_;
      return;
    }
    ApplyCopies(*copies);
    ++counts_["truncate"];
    s.computed = new_len;
    s.tokens.resize(std::max(new_len, s.prompt_len));  // generated tokens past new_len go
  }

  void PinOrUnpin() {
    if (!pins_.empty() && Coin(0.5)) {
      const size_t i = Uniform(0, pins_.size() - 1);
      ASSERT_TRUE(m_->UnpinPage(pins_[i].first, pins_[i].second).ok());
      pins_.erase(pins_.begin() + i);
      return;
    }
    const int64_t id = RandomSeq();
    const KvGroup g = m_->has_group(KvGroup::kFull) ? KvGroup::kFull : KvGroup::kSliding;
    auto table = *m_->PageTable(id, g);
    if (table.empty() || table.back() == kNoPage || pins_.size() > 4) return;
    ASSERT_TRUE(m_->PinPage(g, table.back()).ok());
    pins_.emplace_back(g, table.back());
    ++counts_["pin"];
  }

  // A bare lookup of a document prefix, attached to a throwaway sequence and read back.
  void Lookup() {
    const std::vector<int32_t>& doc = docs_[Uniform(0, docs_.size() - 1)];
    const int64_t id = next_id_++;
    ASSERT_TRUE(m_->AddSequence(id).ok());
    Shadow s;
    s.tokens = doc;
    s.prompt_len = static_cast<int64_t>(doc.size());
    shadow_[id] = s;
    AttachCached(id);
    if (::testing::Test::HasFatalFailure()) return;
    Finish(id);
  }

  void CheckAll(int op) {
    const absl::Status invariants = m_->CheckInvariants();
    ASSERT_TRUE(invariants.ok()) << "op " << op << ": " << invariants;
    PerGroup<std::set<int32_t>> referenced;
    for (const auto& [id, s] : shadow_) {
      ASSERT_EQ(*m_->Length(id), s.computed) << "op " << op << " seq " << id;
      for (KvGroup g : kAllKvGroups) {
        const auto table = *m_->PageTable(id, g);
        if (!m_->has_group(g)) {
          ASSERT_TRUE(table.empty());
          continue;
        }
        const int64_t blocks = (s.computed + c_.page_size - 1) / c_.page_size;
        ASSERT_EQ(static_cast<int64_t>(table.size()), blocks);
        const int64_t holes = g == KvGroup::kSliding ? s.keep_from / c_.page_size : 0;
        for (int64_t b = 0; b < blocks; ++b) {
          ASSERT_EQ(table[b] == kNoPage, b < holes)
              << "op " << op << " seq " << id << " " << KvGroupName(g) << " block " << b;
          if (table[b] != kNoPage) referenced[GroupIndex(g)].insert(table[b]);
        }
        if (s.computed == 0) continue;
        // Readable: what the next position needs, and the whole window of the last token once
        // the releases allow it (they do after every completed step).
        int64_t first = g == KvGroup::kSliding ? SlidingFloor(s.computed) : 0;
        if (g == KvGroup::kSliding && s.keep_from <= s.computed - c_.window) {
          first = std::max<int64_t>(0, s.computed - c_.window);
        }
        ASSERT_TRUE(m_->ValidateRead(id, g, first, s.computed - 1).ok());
        for (int64_t pos = first; pos < s.computed; ++pos) {
          const Slot& slot = At(g, table[pos / c_.page_size], pos);
          ASSERT_TRUE(slot.token == s.tokens[pos] && slot.pos == pos)
              << "op " << op << " seq " << id << " " << KvGroupName(g) << " pos " << pos;
        }
      }
    }
    for (const auto& [g, page] : pins_) referenced[GroupIndex(g)].insert(page);
    for (KvGroup g : kAllKvGroups) {
      const PoolUsage u = m_->Usage(g);
      ASSERT_EQ(u.free + u.owned + u.cached, u.capacity);
      ASSERT_EQ(static_cast<int32_t>(referenced[GroupIndex(g)].size()), u.owned) << "op " << op;
    }
    // Every cached block's pages still hold its tokens.
    bool ok = true;
    m_->ForEachCachedBlock(
        [&](int32_t block, absl::Span<const int32_t> tokens, const PerGroup<int32_t>& pages) {
          for (KvGroup g : kAllKvGroups) {
            const int32_t page = pages[GroupIndex(g)];
            if (page == kNoPage) continue;
            for (int64_t i = 0; i < c_.page_size; ++i) {
              const Slot& slot = At(g, page, i);
              ok = ok && slot.token == tokens[i] &&
                   slot.pos == static_cast<int64_t>(block) * c_.page_size + i;
            }
          }
        });
    ASSERT_TRUE(ok) << "op " << op << ": a cached block's page was overwritten";
  }

  const Config c_;
  std::mt19937_64 rng_;
  std::unique_ptr<KvManager> m_;
  PerGroup<std::vector<Slot>> memory_;  // [pages x page_size] per group: the "device" KV
  std::vector<std::vector<int32_t>> docs_;
  std::map<int64_t, Shadow> shadow_;
  std::vector<std::pair<KvGroup, int32_t>> pins_;
  int64_t next_id_ = 0;
  int64_t exhausted_ = 0;
  int64_t hits_ = 0;
  std::map<std::string, int64_t> counts_;  // completed operations by kind, for the summary
};

void PrintTo(const Config& config, std::ostream* os) { *os << config.name; }

class KvPropertyTest : public ::testing::TestWithParam<Config> {};

TEST_P(KvPropertyTest, RandomOperationsKeepEveryInvariant) {
  Harness harness(GetParam());
  harness.Run();
}

INSTANTIATE_TEST_SUITE_P(
    Configs, KvPropertyTest,
    ::testing::Values(
        // name, P, W, sliding pages, full pages, max_len, max_chunk, seqs, ops, seed
        Config{"gemma31b_p16", 16, 1024, 200, 300, 2600, 512, 6, 10000, 31},
        Config{"gemma31b_p32", 32, 1024, 100, 150, 2600, 512, 6, 10000, 32},
        Config{"e4b_p16", 16, 512, 120, 220, 1500, 256, 6, 10000, 4},
        Config{"sliding_only", 8, 64, 40, 0, 400, 48, 6, 10000, 5},
        Config{"full_only", 16, 0, 0, 70, 600, 64, 6, 10000, 6},
        Config{"page_size_1", 1, 16, 70, 300, 160, 24, 5, 10000, 7},
        Config{"weak_hash", 4, 32, 50, 90, 160, 24, 6, 10000, 8, &WeakHash}),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace gannet::kv
