// Focused tests of KvManager: sliding release, prefix hits shortened by the window, fork and
// truncate copy-on-write, all-or-nothing exhaustion, pins, collisions and bad input.
#include "lib/kv/kv_manager.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kv/kv_test_layout.h"

namespace gannet::kv {
namespace {

constexpr KvGroup kS = KvGroup::kSliding;
constexpr KvGroup kF = KvGroup::kFull;

std::unique_ptr<KvManager> MakeManager(int32_t page_size, int32_t window, int32_t sliding_pages,
                                       int32_t full_pages, BlockHashFn hash = nullptr) {
  KvManagerOptions options;
  options.debug_validate = true;
  options.block_hash = hash;
  auto manager =
      KvManager::Create(TestKvLayout(page_size, window, sliding_pages, full_pages), options);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return std::move(manager).value();
}

std::vector<int32_t> Table(const KvManager& m, int64_t seq, KvGroup g) {
  auto table = m.PageTable(seq, g);
  EXPECT_TRUE(table.ok()) << table.status();
  return std::vector<int32_t>(table->begin(), table->end());
}

std::vector<int32_t> Iota(int n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(KvManagerTest, CreateRejectsAnEmptyLayout) {
  EXPECT_EQ(KvManager::Create(KvLayout{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvManagerTest, BadSequenceIdsAreInvalidArgument) {
  auto m = MakeManager(4, 8, 8, 8);
  EXPECT_EQ(m->Grow(7, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Free(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Length(7).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(m->AddSequence(7).ok());
  EXPECT_EQ(m->AddSequence(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Grow(7, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->CommitPages(7, {}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, SlidingReleasePattern) {
  // P = 4, W = 8: a query at q reads q - 7 .. q.
  auto m = MakeManager(4, 8, 16, 16);
  ASSERT_TRUE(m->AddSequence(1).ok());
  ASSERT_TRUE(m->Grow(1, 20).ok());  // blocks 0..4
  EXPECT_EQ(m->Usage(kS).owned, 5);
  // Next position 20 reads from 13: blocks 0, 1, 2 (positions 0..11) go back.
  ASSERT_TRUE(m->ReleaseSlidingBefore(1, 20 - 8 + 1).ok());
  std::vector<int32_t> sliding = Table(*m, 1, kS);
  ASSERT_EQ(sliding.size(), 5u);
  EXPECT_EQ(sliding[0], kNoPage);
  EXPECT_EQ(sliding[1], kNoPage);
  EXPECT_EQ(sliding[2], kNoPage);
  EXPECT_NE(sliding[3], kNoPage);
  EXPECT_NE(sliding[4], kNoPage);
  EXPECT_EQ(m->Usage(kS).owned, 2);
  EXPECT_EQ(m->Usage(kS).free, 14);
  EXPECT_EQ(Table(*m, 1, kF).size(), 5u);  // the full group keeps everything
  EXPECT_EQ(m->Usage(kF).owned, 5);

  // Releasing past what position 20 needs is clamped to 13.
  ASSERT_TRUE(m->ReleaseSlidingBefore(1, 1000).ok());
  EXPECT_EQ(Table(*m, 1, kS), sliding);

  EXPECT_TRUE(m->ValidateRead(1, kS, 13, 19).ok());
  EXPECT_TRUE(m->ValidateRead(1, kF, 0, 19).ok());
  const absl::Status hole = m->ValidateRead(1, kS, 11, 19);
  EXPECT_EQ(hole.code(), absl::StatusCode::kInternal);
  EXPECT_NE(hole.message().find("position 11 (block 2) -> page -1 (hole)"), absl::string_view::npos)
      << hole;
  EXPECT_EQ(m->ValidateRead(1, kS, 13, 20).code(), absl::StatusCode::kInternal);  // past length

  // Decode: release then grow by one; a sequence never holds more than
  // 1 + ceil((W - 1 + 1 - 1) / P) = 3 sliding pages while it computes one token.
  for (int64_t pos = 20; pos < 60; ++pos) {
    ASSERT_TRUE(m->ReleaseSlidingBefore(1, pos - 8 + 1).ok());
    ASSERT_TRUE(m->Grow(1, pos + 1).ok());
    ASSERT_TRUE(m->ValidateRead(1, kS, pos - 7, pos).ok());
    EXPECT_LE(m->Usage(kS).owned, 3) << "pos " << pos;
    ASSERT_TRUE(m->CheckInvariants().ok());
  }
  EXPECT_EQ(m->Usage(kF).owned, 15);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->Usage(kS).free, 16);
  EXPECT_EQ(m->Usage(kF).free, 16);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

// Chunked prefill of `tokens` in chunks of `chunk` with release before and commit after each.
void Prefill(KvManager& m, int64_t seq, const std::vector<int32_t>& tokens, int64_t chunk) {
  const int64_t window = m.sliding_window();
  for (int64_t pos = 0; pos < static_cast<int64_t>(tokens.size()); pos += chunk) {
    ASSERT_TRUE(m.ReleaseSlidingBefore(seq, pos - window + 1).ok());
    const int64_t end = std::min<int64_t>(pos + chunk, tokens.size());
    ASSERT_TRUE(m.Grow(seq, end).ok());
    ASSERT_TRUE(m.CommitPages(seq, tokens, end).ok());
  }
}

// Salted blocks (pages holding image positions, lib/common/image_blocks.h): a block's salt is part
// of its key, so the same token ids with another salt, or none, share only the blocks before the
// first that differs; the same salts share everything; the chain stays consistent.
TEST(KvManagerTest, PrefixSaltsKeyBlocksBeyondTheirTokens) {
  auto m = MakeManager(4, 64, 32, 32);
  const std::vector<int32_t> prompt = Iota(16, 100);
  const std::vector<uint64_t> salts = {0, 7, 7, 0}, other = {0, 7, 9, 0};
  ASSERT_TRUE(m->AddSequence(1).ok());
  ASSERT_TRUE(m->Grow(1, 16).ok());
  ASSERT_TRUE(m->CommitPages(1, prompt, 16, salts).ok());
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->MatchPrefix(prompt, 16, salts), 16);
  EXPECT_EQ(m->MatchPrefix(prompt, 16, other), 8);
  EXPECT_EQ(m->MatchPrefix(prompt, 16), 4);  // unsalted: block 1 differs
  ASSERT_TRUE(m->AddSequence(2).ok());
  EXPECT_EQ(m->AttachPrefix(2, prompt, 12, other).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->AttachPrefix(2, prompt, 8, other).ok());
  ASSERT_TRUE(m->Grow(2, 16).ok());
  ASSERT_TRUE(m->CommitPages(2, prompt, 16, other).ok());
  EXPECT_TRUE(m->CheckInvariants().ok());
  ASSERT_TRUE(m->Free(2).ok());
  EXPECT_EQ(m->MatchPrefix(prompt, 16, other), 16);
  EXPECT_EQ(m->MatchPrefix(prompt, 16, salts), 16);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, PrefixHitShortenedByWindow) {
  // P = 4, W = 8: a hit at L needs the full pages of blocks [0, L/4) and the sliding pages of
  // the blocks covering [L - 8, L).
  auto m = MakeManager(4, 8, 8, 16);
  const std::vector<int32_t> prompt = Iota(24, 100);
  ASSERT_TRUE(m->AddSequence(1).ok());
  Prefill(*m, 1, prompt, 8);
  // The last chunk released blocks 0 and 1 (positions < 9): they stay cached.
  EXPECT_EQ(m->Usage(kS).cached, 2);
  ASSERT_TRUE(m->Free(1).ok());
  // LRU order: b0, b1 (released first), then b5, b4, b3, b2 (Free goes tail first).
  EXPECT_EQ(m->Usage(kS).cached, 6);
  EXPECT_EQ(m->Usage(kF).cached, 6);
  EXPECT_EQ(m->MatchPrefix(prompt, 24), 24);
  EXPECT_EQ(m->MatchPrefix(prompt, 23), 20);  // a multiple of P, at most max_len

  // Pressure from another sequence evicts the LRU front.
  ASSERT_TRUE(m->AddSequence(2).ok());
  ASSERT_TRUE(m->Grow(2, 16).ok());  // 2 free + evicts b0, b1
  EXPECT_EQ(m->stats().evictions[GroupIndex(kS)], 2);
  EXPECT_EQ(m->MatchPrefix(prompt, 24), 24);  // blocks 0, 1 are outside every window needed
  ASSERT_TRUE(m->Grow(2, 20).ok());           // evicts b5
  EXPECT_EQ(m->MatchPrefix(prompt, 24), 20);  // L = 20 needs [12, 20): blocks 3, 4
  ASSERT_TRUE(m->Grow(2, 24).ok());           // evicts b4
  EXPECT_EQ(m->MatchPrefix(prompt, 24), 16);  // L = 16 needs [8, 16): blocks 2, 3
  EXPECT_EQ(m->MatchPrefix(Iota(24, 5), 24), 0);
  EXPECT_EQ(m->stats().prefix_lookups, 6);
  EXPECT_EQ(m->stats().prefix_hit_tokens, 24 + 20 + 24 + 20 + 16);

  // Attach gives sequence 3 the 16 cached tokens: holes before 16 - 8 = 8.
  ASSERT_TRUE(m->AddSequence(3).ok());
  EXPECT_EQ(m->AttachPrefix(3, prompt, 20).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m->AttachPrefix(3, prompt, 16).ok());
  const std::vector<int32_t> sliding = Table(*m, 3, kS);
  ASSERT_EQ(sliding.size(), 4u);
  EXPECT_EQ(sliding[0], kNoPage);
  EXPECT_EQ(sliding[1], kNoPage);
  EXPECT_NE(sliding[2], kNoPage);
  EXPECT_NE(sliding[3], kNoPage);
  EXPECT_EQ(Table(*m, 3, kF).size(), 4u);
  EXPECT_EQ(*m->Length(3), 16);
  EXPECT_TRUE(m->ValidateRead(3, kS, 8, 15).ok());
  EXPECT_TRUE(m->CheckInvariants().ok());
  // Attached pages left the LRU: the full pool still caches blocks 4 and 5 only.
  EXPECT_EQ(m->Usage(kF).cached, 2);
  EXPECT_EQ(m->AttachPrefix(3, prompt, 16).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvManagerTest, LosingAFullPageDropsTheBlockSlidingPage) {
  auto m = MakeManager(4, 8, 16, 6);
  const std::vector<int32_t> prompt = Iota(24, 0);
  ASSERT_TRUE(m->AddSequence(1).ok());
  Prefill(*m, 1, prompt, 24);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->Usage(kS).cached, 6);
  ASSERT_TRUE(m->AddSequence(2).ok());
  ASSERT_TRUE(m->Grow(2, 4).ok());    // evicts the full page of block 5 (the chain's tail)
  EXPECT_EQ(m->Usage(kS).cached, 5);  // its sliding page is useless without it
  EXPECT_EQ(m->MatchPrefix(prompt, 24), 20);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, ForkCopiesOnlyThePartialPage) {
  auto m = MakeManager(4, 8, 16, 16);
  ASSERT_TRUE(m->AddSequence(1).ok());
  ASSERT_TRUE(m->Grow(1, 10).ok());  // blocks 0, 1 full, block 2 holds positions 8, 9
  const std::vector<int32_t> s1 = Table(*m, 1, kS);
  const std::vector<int32_t> f1 = Table(*m, 1, kF);
  auto copies = m->Fork(1, 2);
  ASSERT_TRUE(copies.ok()) << copies.status();
  const std::vector<int32_t> s2 = Table(*m, 2, kS);
  const std::vector<int32_t> f2 = Table(*m, 2, kF);
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0], (PageCopy{kS, s1[2], s2[2]}));
  EXPECT_EQ((*copies)[1], (PageCopy{kF, f1[2], f2[2]}));
  EXPECT_NE(s1[2], s2[2]);
  EXPECT_EQ(s1[0], s2[0]);
  EXPECT_EQ(f1[1], f2[1]);
  EXPECT_EQ(*m->Length(2), 10);
  EXPECT_EQ(m->Usage(kS).owned, 4);
  EXPECT_EQ(m->Fork(1, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m->CheckInvariants().ok());

  // Aligned length: nothing to copy.
  ASSERT_TRUE(m->Grow(1, 12).ok());
  copies = m->Fork(1, 3);
  ASSERT_TRUE(copies.ok());
  EXPECT_TRUE(copies->empty());

  // Truncating a fork into a shared page copies it; the source keeps its pages.
  ASSERT_TRUE(m->Grow(3, 16).ok());
  auto truncated = m->Truncate(3, 6);  // block 1 (positions 4..7) is shared with sequence 1
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  ASSERT_EQ(truncated->size(), 2u);
  EXPECT_EQ((*truncated)[0].group, kF);  // full group first
  EXPECT_EQ((*truncated)[0].src_page, f1[1]);
  EXPECT_EQ(Table(*m, 3, kF)[1], (*truncated)[0].dst_page);
  EXPECT_EQ(Table(*m, 1, kF)[1], f1[1]);
  EXPECT_EQ(*m->Length(3), 6);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, TruncateUnregistersOwnCachedBlockAndRespectsReleasedPages) {
  auto m = MakeManager(4, 8, 16, 16);
  const std::vector<int32_t> prompt = Iota(16, 0);
  ASSERT_TRUE(m->AddSequence(1).ok());
  Prefill(*m, 1, prompt, 16);
  EXPECT_EQ(m->MatchPrefix(prompt, 16), 16);
  auto copies = m->Truncate(1, 10);  // block 2 is ours alone: dropped from the cache, no copy
  ASSERT_TRUE(copies.ok());
  EXPECT_TRUE(copies->empty());
  EXPECT_EQ(m->MatchPrefix(prompt, 16), 8);
  EXPECT_TRUE(m->CheckInvariants().ok());

  ASSERT_TRUE(m->Grow(1, 30).ok());
  ASSERT_TRUE(m->ReleaseSlidingBefore(1, 23).ok());  // positions < 23 released (blocks 0..4)
  EXPECT_EQ(m->Truncate(1, 25).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m->Truncate(1, 30).ok());  // a no-op
  EXPECT_EQ(m->Truncate(1, 31).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, ExhaustionLeavesStateUnchanged) {
  auto m = MakeManager(4, 8, 4, 6);
  ASSERT_TRUE(m->AddSequence(1).ok());
  ASSERT_TRUE(m->AddSequence(2).ok());
  ASSERT_TRUE(m->Grow(1, 16).ok());  // 4 sliding, 4 full
  const PoolUsage s = m->Usage(kS);
  const PoolUsage f = m->Usage(kF);
  EXPECT_EQ(*m->PagesNeeded(2, 8), (PerGroup<int64_t>{2, 2}));
  EXPECT_FALSE(*m->CanGrow(2, 8));
  const absl::Status status = m->Grow(2, 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("kv: growing sequence 2 from 0 to 8 tokens needs 2 sliding pages "
                                  "but only 0 are available (0 free + 0 cached of 4)"),
            absl::string_view::npos)
      << status;
  EXPECT_EQ(*m->Length(2), 0);
  EXPECT_TRUE(Table(*m, 2, kS).empty());
  EXPECT_TRUE(Table(*m, 2, kF).empty());
  EXPECT_EQ(m->Usage(kS).free, s.free);
  EXPECT_EQ(m->Usage(kF).free, f.free);

  // Free sliding pages, then run out of full pages instead.
  ASSERT_TRUE(m->ReleaseSlidingBefore(1, 9).ok());                         // blocks 0, 1
  EXPECT_EQ(m->Grow(1, 28).code(), absl::StatusCode::kResourceExhausted);  // needs 3, 2 left
  EXPECT_TRUE(*m->CanGrow(1, 24));
  ASSERT_TRUE(m->Grow(1, 18).ok());
  const std::vector<int32_t> before = Table(*m, 1, kF);
  EXPECT_TRUE(m->Fork(1, 3).ok());  // length 18: copies block 4 into the last page of each pool
  EXPECT_EQ(m->Fork(1, 4).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(m->HasSequence(4));
  EXPECT_EQ(Table(*m, 1, kF), before);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, PinsKeepPagesAlive) {
  auto m = MakeManager(4, 8, 4, 4);
  ASSERT_TRUE(m->AddSequence(1).ok());
  ASSERT_TRUE(m->Grow(1, 4).ok());
  const int32_t page = Table(*m, 1, kF)[0];
  ASSERT_TRUE(m->PinPage(kF, page).ok());
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->Usage(kF).owned, 1);
  EXPECT_TRUE(m->CheckInvariants().ok());
  ASSERT_TRUE(m->UnpinPage(kF, page).ok());
  EXPECT_EQ(m->Usage(kF).free, 4);
  EXPECT_EQ(m->UnpinPage(kF, page).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->PinPage(kF, page).code(), absl::StatusCode::kInvalidArgument);  // free
  EXPECT_EQ(m->PinPage(kF, 99).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

uint64_t ConstantHash(uint64_t, absl::Span<const int32_t>) { return 42; }

TEST(KvManagerTest, HashCollisionsShortenHitsButNeverLie) {
  auto m = MakeManager(4, 0, 0, 16, &ConstantHash);  // full-only model
  const std::vector<int32_t> a = Iota(12, 0);
  const std::vector<int32_t> b = Iota(12, 50);
  ASSERT_TRUE(m->AddSequence(1).ok());
  Prefill(*m, 1, a, 12);
  // Block 1 of `a` collides with block 0: only block 0 is cached.
  EXPECT_EQ(m->MatchPrefix(a, 12), 4);
  EXPECT_EQ(m->MatchPrefix(b, 12), 0);
  ASSERT_TRUE(m->AddSequence(2).ok());
  Prefill(*m, 2, b, 12);
  EXPECT_EQ(m->MatchPrefix(b, 12), 0);
  EXPECT_TRUE(m->CheckInvariants().ok());
}

TEST(KvManagerTest, SlidingOnlyModelHitsThroughPagelessBlocks) {
  auto m = MakeManager(4, 8, 16, 0);
  EXPECT_FALSE(m->has_group(kF));
  const std::vector<int32_t> prompt = Iota(32, 7);
  ASSERT_TRUE(m->AddSequence(1).ok());
  Prefill(*m, 1, prompt, 8);
  ASSERT_TRUE(m->AddSequence(2).ok());
  ASSERT_TRUE(m->Grow(2, 40).ok());  // 10 pages: evicts the early, released blocks
  ASSERT_TRUE(m->Free(1).ok());
  // Blocks 0..3 no longer have pages, but a hit at 32 needs only [24, 32).
  EXPECT_EQ(m->MatchPrefix(prompt, 32), 32);
  ASSERT_TRUE(m->AddSequence(3).ok());
  ASSERT_TRUE(m->AttachPrefix(3, prompt, 32).ok());
  EXPECT_TRUE(Table(*m, 3, kF).empty());
  EXPECT_TRUE(m->ValidateRead(3, kS, 24, 31).ok());
  EXPECT_TRUE(m->CheckInvariants().ok());
}

}  // namespace
}  // namespace gannet::kv
