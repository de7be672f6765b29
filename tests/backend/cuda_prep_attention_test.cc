// QkvPrep fused into the decode attention (CudaBackend::RunFusedPrep, kernels::AttentionPrep)
// against the two ops it replaces, QkvPrep then the same attention entry at the same split count:
// the attention output and both caches must be the same bits. Every entry that fuses the prep and
// runs on this GPU (the sm80 ones, and the sm75 ones as PTX) runs each case at every forced split
// count, so a split's new key lands in a primed stage (few keys a split) and in a stage loaded in
// the kernel's loop (one split over a long context). Before the step the cache rows of the
// step's tokens hold NaN: a new key the fused kernel reads from the cache instead of the
// projection turns the output into NaN. Cases: Gemma-4's layer shapes (E2B/E4B sliding and full,
// 26B-A4B and 31B sliding, K=V full layers with K stored and derived), verify chunks of 2-8
// tokens, a KV-shared layer (q alone), the narrow hd256 tile at 40 sequences, a one-token
// context. And the fallbacks: an FP8 cache and a prep whose metadata is not the attention's run
// the two ops apart.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/attention_entries.h"
#include "tests/backend/cuda_test_util.h"

namespace gannet {
namespace {

using backend::AttentionArgs;
using backend::QkvPrepArgs;
using backend::RopeSpec;
using backend::StepMetadata;
using backend::Tensor;
using testing::DeviceTensor;

struct PrepCase {
  std::string name;
  int nq, nkv, d, page, window;
  std::vector<int> seq_lens;  // context after the step
  std::vector<int> q_lens;    // the step's tokens: the last q_lens[s] positions
  std::vector<int> splits = {0};
  bool k_eq_v = false, k_from_v = false, has_kv = true;
  RopeSpec rope{};  // rotated_pairs 0: every pair at theta 1e4
};

// One layer's step: the projection, weights, metadata and caches, on the GPU.
struct Step {
  int num_pages = 0, tokens = 0, cols = 0;
  std::vector<int32_t> query_start, seq_lens, positions, token_seq, table, slots;
  std::vector<float> k_init, v_init;
  DeviceTensor qkv, q_norm, k_norm, q_out, out, dqs, dlens, dpos, dseq, dtable, dslots;
  StepMetadata meta;
};

void Build(backend::CudaBackend& gpu, const PrepCase& c, Step& s) {
  std::mt19937 rng(7);
  const int num_seqs = static_cast<int>(c.seq_lens.size());
  int max_pages = 0, owned = 0, max_q = 0, max_len = 0;
  for (int i = 0; i < num_seqs; ++i) {
    max_pages = std::max(max_pages, (c.seq_lens[i] + c.page - 1) / c.page);
    owned += (c.seq_lens[i] + c.page - 1) / c.page;
    max_q = std::max(max_q, c.q_lens[i]);
    max_len = std::max(max_len, c.seq_lens[i]);
  }
  s.num_pages = owned + 1;
  std::vector<int> free_pages(s.num_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  s.table.assign(static_cast<size_t>(num_seqs) * max_pages, -1);
  s.query_start.assign(num_seqs + 1, 0);
  const size_t row = c.d, head_rows = static_cast<size_t>(c.page) * c.d;
  const size_t page_elems = static_cast<size_t>(c.nkv) * head_rows;
  s.k_init = testing::RandomNormal(s.num_pages * page_elems, 21);
  s.v_init = testing::RandomNormal(s.num_pages * page_elems, 22);
  for (int i = 0; i < num_seqs; ++i) {
    for (int p = 0; p * c.page < c.seq_lens[i]; ++p) {
      s.table[i * max_pages + p] = free_pages.back();
      free_pages.pop_back();
    }
    s.query_start[i + 1] = s.query_start[i] + c.q_lens[i];
    s.seq_lens.push_back(c.seq_lens[i]);
    for (int j = 0; j < c.q_lens[i]; ++j) {
      const int pos = c.seq_lens[i] - c.q_lens[i] + j;
      const int page = s.table[i * max_pages + pos / c.page];
      s.positions.push_back(pos);
      s.token_seq.push_back(i);
      s.slots.push_back(page * c.page + pos % c.page);
      if (!c.has_kv) continue;  // another layer's cache, already written
      for (int h = 0; h < c.nkv; ++h) {  // rows the step writes: stale until it does
        const size_t at = page * page_elems + h * head_rows + (pos % c.page) * row;
        std::fill(s.k_init.begin() + at, s.k_init.begin() + at + row, NAN);
        std::fill(s.v_init.begin() + at, s.v_init.begin() + at + row, NAN);
      }
    }
  }
  s.tokens = s.query_start.back();
  s.cols = (c.nq + (c.has_kv ? c.nkv * (c.k_eq_v ? 1 : 2) : 0)) * c.d;
  s.qkv = testing::Upload(gpu, testing::RandomNormal(static_cast<size_t>(s.tokens) * s.cols, 23, 2.0f),
                          DType::kBF16, {s.tokens, s.cols});
  std::vector<float> qn = testing::RandomNormal(c.d, 24), kn = testing::RandomNormal(c.d, 25);
  for (float& w : qn) w = 1.0f + 0.3f * w;
  for (float& w : kn) w = 1.0f + 0.3f * w;
  s.q_norm = testing::Upload(gpu, qn, DType::kF32, {c.d});
  s.k_norm = testing::Upload(gpu, kn, DType::kF32, {c.d});
  const std::vector<float> zeros(static_cast<size_t>(s.tokens) * c.nq * c.d, 0.f);
  s.q_out = testing::Upload(gpu, zeros, DType::kBF16, {s.tokens, c.nq, c.d});
  s.out = testing::Upload(gpu, zeros, DType::kBF16, {s.tokens, c.nq, c.d});
  s.dqs = testing::UploadI32(gpu, s.query_start, {num_seqs + 1});
  s.dlens = testing::UploadI32(gpu, s.seq_lens, {num_seqs});
  s.dpos = testing::UploadI32(gpu, s.positions, {s.tokens});
  s.dseq = testing::UploadI32(gpu, s.token_seq, {s.tokens});
  s.dtable = testing::UploadI32(gpu, s.table, {num_seqs * max_pages});
  s.dslots = testing::UploadI32(gpu, s.slots, {s.tokens});
  StepMetadata& m = s.meta;
  m.num_seqs = num_seqs;
  m.num_tokens = s.tokens;
  m.max_query_len = max_q;
  m.max_seq_len = max_len;
  m.query_start = s.dqs.t.as<int32_t>();
  m.seq_lens = s.dlens.t.as<int32_t>();
  m.positions = s.dpos.t.as<int32_t>();
  m.token_seq = s.dseq.t.as<int32_t>();
  m.host_query_start = s.query_start.data();
  m.host_seq_lens = s.seq_lens.data();
  m.host_positions = s.positions.data();
  for (backend::KvGroupView& g : m.groups) {
    g.page_size = c.page;
    g.num_pages = s.num_pages;
    g.max_pages_per_seq = max_pages;
    g.page_table = s.dtable.t.as<int32_t>();
    g.host_page_table = s.table.data();
    g.slot_mapping = s.dslots.t.as<int32_t>();
    g.host_slot_mapping = s.slots.data();
  }
}

// One run's caches (fresh copies of the step's initial ones) and the two ops' arguments over them.
struct LayerRun {
  DeviceTensor k, v;
  QkvPrepArgs prep;
  AttentionArgs attn;
};

void MakeRun(backend::CudaBackend& gpu, const PrepCase& c, Step& s, LayerRun& r) {
  const int group = c.window > 0 ? backend::kSlidingGroup : backend::kFullGroup;
  r.k = testing::Upload(gpu, s.k_init, DType::kBF16, {s.num_pages, c.nkv, c.page, c.d});
  r.v = testing::Upload(gpu, s.v_init, DType::kBF16, {s.num_pages, c.nkv, c.page, c.d});
  RopeSpec rope = c.rope;
  if (rope.rotated_pairs == 0) rope = {10000.0, c.d / 2, 1.0};
  QkvPrepArgs& p = r.prep;
  p.qkv = s.qkv.t;
  p.num_q_heads = c.nq;
  p.num_kv_heads = c.nkv;
  p.head_dim = c.d;
  p.has_kv = c.has_kv;
  p.k_eq_v = c.k_eq_v;
  p.k_from_v = c.k_from_v;
  p.q_norm = s.q_norm.t;
  p.k_norm = s.k_norm.t;
  p.rope = rope;
  p.q_out = s.q_out.t;
  if (c.has_kv) {
    p.k_cache = c.k_from_v ? Tensor() : r.k.t;
    p.v_cache = r.v.t;
  }
  p.meta = &s.meta;
  p.group = group;
  AttentionArgs& a = r.attn;
  a.q = s.q_out.t;
  a.k_cache = c.k_from_v ? Tensor() : r.k.t;
  a.v_cache = r.v.t;
  a.k_from_v = c.k_from_v;
  if (c.k_from_v) a.k_norm = s.k_norm.t;
  a.rope = rope;
  a.out = s.out.t;
  a.num_q_heads = c.nq;
  a.num_kv_heads = c.nkv;
  a.head_dim = c.d;
  a.window = c.window;
  a.scale = 1.0f;
  a.meta = &s.meta;
  a.group = group;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// What a run left: the output and the caches.
struct Result {
  std::vector<float> out, k, v;
};
Result Collect(backend::CudaBackend& gpu, const Step& s, const LayerRun& r) {
  EXPECT_TRUE(gpu.Synchronize().ok());
  return {testing::Download(gpu, s.out.t), testing::Download(gpu, r.k.t), testing::Download(gpu, r.v.t)};
}

void ExpectSame(const Result& want, const Result& got, const std::string& what) {
  EXPECT_TRUE(SameBits(want.out, got.out)) << what << ": output, max diff " << testing::MaxAbsDiff(want.out, got.out);
  EXPECT_TRUE(SameBits(want.k, got.k)) << what << ": K cache";
  EXPECT_TRUE(SameBits(want.v, got.v)) << what << ": V cache";
  EXPECT_TRUE(std::none_of(want.out.begin(), want.out.end(), [](float x) { return std::isnan(x); }))
      << what << ": the two ops' output has NaN";
}

class FusedPrepTest : public ::testing::TestWithParam<PrepCase> {};

TEST_P(FusedPrepTest, MatchesPrepThenAttentionBitForBit) {
  GANNET_REQUIRE_GPU();
  const PrepCase& c = GetParam();
  auto made = backend::CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status();
  backend::CudaBackend& gpu = **made;
  Step s;
  Build(gpu, c, s);
  int ran = 0;
  for (const kernels::KernelEntry* e : kernels::AllEntries()) {
    if (!kernels::FlashDecodeFusesPrep(*e)) continue;
    LayerRun probe;
    MakeRun(gpu, c, s, probe);
    auto params = gpu.AttentionParams(probe.attn);
    ASSERT_TRUE(params.ok()) << params.status();
    if (!kernels::CheckEntry(*e, kernels::AttentionProblem(e->op, *params), gpu.device_info()).ok) continue;
    for (int splits : c.splits) {
      const std::string what = c.name + " / " + e->name + " / splits " + std::to_string(splits);
      LayerRun two, one;
      MakeRun(gpu, c, s, two);
      ASSERT_TRUE(gpu.Fill(s.out.t.Reshape({s.tokens, c.nq * c.d}), NAN).ok());
      ASSERT_TRUE(gpu.QkvPrep(two.prep).ok()) << what;
      const absl::Status st = gpu.RunAttentionEntry(*e, two.attn, splits);
      ASSERT_TRUE(st.ok()) << what << ": " << st;
      const Result want = Collect(gpu, s, two);
      MakeRun(gpu, c, s, one);
      ASSERT_TRUE(gpu.Fill(s.out.t.Reshape({s.tokens, c.nq * c.d}), NAN).ok());
      auto fused = gpu.RunFusedPrep(one.prep, one.attn, e, splits);
      ASSERT_TRUE(fused.ok()) << what << ": " << fused.status();
      ASSERT_EQ(*fused, e) << what << ": the fused launch did not run";
      ExpectSame(want, Collect(gpu, s, one), what);
      ++ran;
    }
  }
  if (kernels::EffectiveArch(gpu.device_info().sm) >= 80) EXPECT_GE(ran, 1) << c.name;

  // The backend's own choice: PrepAndAttend against QkvPrep then Attention.
  LayerRun two, one;
  MakeRun(gpu, c, s, two);
  ASSERT_TRUE(gpu.QkvPrep(two.prep).ok());
  ASSERT_TRUE(gpu.Attention(two.attn).ok());
  const Result want = Collect(gpu, s, two);
  MakeRun(gpu, c, s, one);
  ASSERT_TRUE(gpu.PrepAndAttend(one.prep, one.attn).ok());
  ExpectSame(want, Collect(gpu, s, one), c.name + " / selected");
}

std::vector<PrepCase> Cases() {
  const RopeSpec full{1e6, 64, 1.0};
  std::vector<PrepCase> v = {
      {"e2b_sliding_b1", 8, 1, 256, 16, 512, {1000}, {1}, {0, 1, 2, 16}},
      {"e4b_sliding_b3", 8, 2, 256, 16, 512, {37, 600, 1500}, {1, 1, 1}, {0, 1, 7}},
      {"verify_gqa4", 8, 2, 256, 16, 512, {300, 45}, {4, 3}, {0, 1, 5}},
      {"gqa2_q8_page32", 16, 8, 256, 32, 1024, {1024, 200}, {8, 5}, {0, 1, 3}},
      {"e2b_full_hd512", 8, 1, 512, 16, 0, {3000}, {1}, {0, 1, 2, 30}},
      {"k_eq_v_stored_hd512", 16, 2, 512, 16, 0, {2000}, {2}, {0, 1, 9}, true, false, true, full},
      {"k_from_v_hd512", 16, 2, 512, 16, 0, {1500, 64}, {1, 2}, {0, 1, 6}, true, true, true, full},
      {"kv_shared", 8, 1, 256, 16, 512, {800}, {1}, {0, 1}, false, false, false},
      {"one_token_context", 8, 2, 256, 16, 512, {1}, {1}, {0}},
  };
  PrepCase narrow{"narrow_40seqs", 32, 16, 256, 16, 1024, {}, {}, {0}};
  for (int i = 0; i < 40; ++i) {
    narrow.seq_lens.push_back(100 + 11 * i);
    narrow.q_lens.push_back(1);
  }
  v.push_back(narrow);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedPrepTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// Pairs the fused launch does not take run the two ops apart, with the same result.
TEST(FusedPrepFallback, Fp8CacheAndForeignMetadataRunTheTwoOps) {
  GANNET_REQUIRE_GPU();
  auto made = backend::CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status();
  backend::CudaBackend& gpu = **made;
  const PrepCase c{"fallback", 8, 2, 256, 16, 512, {700}, {1}};
  Step s;
  Build(gpu, c, s);
  // The prep's metadata another than the attention's (the drafter's rotation): never fused.
  StepMetadata other = s.meta;
  LayerRun r;
  MakeRun(gpu, c, s, r);
  r.prep.meta = &other;
  auto fused = gpu.RunFusedPrep(r.prep, r.attn);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, nullptr);
  // An FP8 cache: never fused; PrepAndAttend still runs both ops.
  const size_t elems = s.k_init.size();
  DeviceTensor k8 = testing::UploadBytes(gpu, std::vector<uint8_t>(elems, 0), DType::kF8E4M3,
                                         {s.num_pages, c.nkv, c.page, c.d});
  DeviceTensor v8 = testing::UploadBytes(gpu, std::vector<uint8_t>(elems, 0), DType::kF8E4M3,
                                         {s.num_pages, c.nkv, c.page, c.d});
  const std::vector<float> ones(elems / c.d, 1.0f);
  DeviceTensor ks = testing::Upload(gpu, ones, DType::kF32, {s.num_pages, c.nkv, c.page});
  DeviceTensor vs = testing::Upload(gpu, ones, DType::kF32, {s.num_pages, c.nkv, c.page});
  LayerRun q;
  MakeRun(gpu, c, s, q);
  q.prep.k_cache = q.attn.k_cache = k8.t;
  q.prep.v_cache = q.attn.v_cache = v8.t;
  q.prep.k_scale = q.attn.k_scale = ks.t;
  q.prep.v_scale = q.attn.v_scale = vs.t;
  fused = gpu.RunFusedPrep(q.prep, q.attn);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, nullptr);
  ASSERT_TRUE(gpu.Fill(s.out.t.Reshape({s.tokens, c.nq * c.d}), NAN).ok());
  ASSERT_TRUE(gpu.PrepAndAttend(q.prep, q.attn).ok());
  const std::vector<float> out = testing::Download(gpu, s.out.t);
  EXPECT_TRUE(std::none_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
}

}  // namespace
}  // namespace gannet
