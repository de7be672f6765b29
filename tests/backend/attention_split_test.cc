// How the CUDA backend cuts a step's attention into launches (host code only: runs without a
// GPU): a mixed step's leading decode rows apart from its prompt chunks, nothing else split.
#include <algorithm>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cuda/attention_split.h"

namespace gannet::backend {
namespace {

// A step of sequences with these query lengths and context lengths, 31B-like heads (GQA 2 by
// default), device arrays as recognisable fake addresses.
struct Step {
  std::vector<int32_t> query_start{0}, seq_lens;
  StepMetadata meta;
  kernels::PagedAttentionParams p;
  Step(const std::vector<int>& q_lens, const std::vector<int>& lens, int nq = 32, int nkv = 16) {
    for (size_t s = 0; s < q_lens.size(); ++s) {
      query_start.push_back(query_start.back() + q_lens[s]);
      seq_lens.push_back(lens[s]);
      p.max_query_len = std::max(p.max_query_len, q_lens[s]);
      p.max_seq_len = std::max(p.max_seq_len, lens[s]);
    }
    meta.num_seqs = p.num_seqs = static_cast<int>(q_lens.size());
    meta.num_tokens = p.num_tokens = query_start.back();
    meta.host_query_start = query_start.data();
    meta.host_seq_lens = seq_lens.data();
    p.query_start = reinterpret_cast<const int32_t*>(0x1000);
    p.seq_lens = reinterpret_cast<const int32_t*>(0x2000);
    p.positions = reinterpret_cast<const int32_t*>(0x3000);
    p.page_table = reinterpret_cast<const int32_t*>(0x4000);
    p.q = reinterpret_cast<const void*>(0x5000);
    p.out = reinterpret_cast<void*>(0x6000);
    p.max_pages_per_seq = 200;
    p.num_q_heads = nq;
    p.num_kv_heads = nkv;
  }
};

TEST(SplitMixedStepTest, DecodeRowsFirstThenAPromptChunk) {
  Step st({1, 1, 1, 700}, {1500, 900, 3000, 2100});
  const std::optional<MixedStepLaunches> l = SplitMixedStep(st.p, st.meta);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->decode.num_seqs, 3);
  EXPECT_EQ(l->decode.num_tokens, 3);
  EXPECT_EQ(l->decode.max_query_len, 1);
  EXPECT_EQ(l->decode.max_seq_len, 3000);  // its own bound, not the chunk's
  EXPECT_EQ(l->decode.query_start, st.p.query_start);
  EXPECT_EQ(l->decode.page_table, st.p.page_table);
  EXPECT_TRUE(FitsDecodeCta(l->decode));
  EXPECT_EQ(l->rest.num_seqs, 1);
  EXPECT_EQ(l->rest.num_tokens, 700);
  EXPECT_EQ(l->rest.query_start, st.p.query_start + 3);
  EXPECT_EQ(l->rest.seq_lens, st.p.seq_lens + 3);
  EXPECT_EQ(l->rest.page_table, st.p.page_table + 3 * 200);
  // Token-indexed arrays stay: query_start holds absolute token indices.
  EXPECT_EQ(l->rest.positions, st.p.positions);
  EXPECT_EQ(l->rest.q, st.p.q);
  EXPECT_EQ(l->rest.out, st.p.out);
  EXPECT_EQ(l->rest.max_query_len, 700);
}

TEST(SplitMixedStepTest, VerifyChunksThatFitADecodeCtaGoWithTheDecodeRows) {
  // GQA 2: 8 tokens x 2 heads = 16 rows fit; GQA 8 (31B's full layers): only 2 tokens do.
  Step sliding({1, 8, 4, 300}, {900, 1200, 40, 300});
  std::optional<MixedStepLaunches> l = SplitMixedStep(sliding.p, sliding.meta);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->decode.num_seqs, 3);
  EXPECT_EQ(l->decode.num_tokens, 13);
  EXPECT_EQ(l->decode.max_query_len, 8);
  Step full({1, 8, 4, 300}, {900, 1200, 40, 300}, 32, 4);
  l = SplitMixedStep(full.p, full.meta);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->decode.num_seqs, 1);
  EXPECT_EQ(l->rest.num_seqs, 3);
  EXPECT_EQ(l->rest.num_tokens, 312);
}

TEST(SplitMixedStepTest, OtherStepsRunAsOneLaunch) {
  Step decode({1, 1, 1}, {10, 20, 30});  // every sequence fits: one decode launch
  EXPECT_FALSE(SplitMixedStep(decode.p, decode.meta).has_value());
  Step prefill({500, 700}, {500, 900});  // none fits
  EXPECT_FALSE(SplitMixedStep(prefill.p, prefill.meta).has_value());
  Step chunk_first({300, 1, 1}, {300, 50, 60});  // only leading decode rows split
  EXPECT_FALSE(SplitMixedStep(chunk_first.p, chunk_first.meta).has_value());
  Step verify({9, 9}, {100, 200});  // a uniform verify step too wide for a decode CTA
  EXPECT_FALSE(SplitMixedStep(verify.p, verify.meta).has_value());
  Step no_host({1, 700}, {50, 700});
  no_host.meta.host_seq_lens = nullptr;
  EXPECT_FALSE(SplitMixedStep(no_host.p, no_host.meta).has_value());
}

}  // namespace
}  // namespace gannet::backend
