// Kernel-registry selection logic, on described devices (no GPU needed): arch clamping, arch
// ranges, predicates, specificity, shared-memory fallback, GANNET_FORCE_KERNEL, and the
// compiled-arch report.
#include "kernels/registry/registry.h"

#include <cstdlib>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention/attention_entries.h"
#include "kernels/gemm/gemm_entries.h"
#include "kernels/moe/moe_entries.h"
#include "lib/model/variants.h"

namespace gannet::kernels {
namespace {

DeviceInfo Device(int sm, int smem = 232448, int sms = 132) {
  DeviceInfo d;
  d.sm = sm;
  d.num_sms = sms;
  d.max_smem_optin = smem;
  return d;
}

ProblemKey Attention(Op op, int hd, int nq, int nkv, int qlen = 1) {
  ProblemKey pk;
  pk.op = op;
  pk.head_dim = hd;
  pk.page_size = 16;
  pk.num_q_heads = nq;
  pk.num_kv_heads = nkv;
  pk.max_query_len = qlen;
  pk.num_seqs = 1;
  pk.num_tokens = qlen;
  pk.max_seq_len = 8192;
  pk.flags = kFlagAligned16;
  return pk;
}

// The arch list of a release build (cmake/GannetCudaArchs.cmake, passed in by CMake), so the
// selection tests see every arch whatever this binary was built for.
std::vector<int> ReleaseArchs() {
  std::vector<int> archs;
  int value = 0;
  for (const char* p = GANNET_RELEASE_CUDA_ARCHS;; ++p) {
    if (*p >= '0' && *p <= '9') {
      value = value * 10 + (*p - '0');
    } else {
      if (value != 0) archs.push_back(value);
      value = 0;
      if (*p == '\0') break;
    }
  }
  return archs;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("GANNET_FORCE_KERNEL"); }
  void TearDown() override { unsetenv("GANNET_FORCE_KERNEL"); }
};

TEST_F(RegistryTest, EntryNamesAreUniqueAndFindable) {
  std::set<std::string> names;
  for (const KernelEntry* e : AllEntries()) {
    EXPECT_TRUE(names.insert(e->name).second) << e->name;
    EXPECT_EQ(FindEntry(e->name), e);
    EXPECT_LE(e->min_sm, e->max_sm);
  }
  EXPECT_EQ(FindEntry("no_such_kernel"), nullptr);
}

TEST_F(RegistryTest, ReportsCompiledArchs) {
  ASSERT_FALSE(CompiledArchs().empty());
  EXPECT_NE(CompiledArchsString().find("sm_"), std::string::npos);
  const int newest = CompiledArchs().back();
  EXPECT_EQ(EffectiveArch(newest + 50), newest);  // a newer device runs the newest code we carry
  EXPECT_EQ(EffectiveArch(CompiledArchs().front() - 1), 0);
}

TEST_F(RegistryTest, PicksTheDedicatedHd512DecodeKernelOnHopper) {
  if (EffectiveArch(90) < 80) GTEST_SKIP() << "binary carries no sm_80+ code";
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_split");
  s = Select(Attention(Op::kAttentionDecode, 256, 32, 16), Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd256_bf16_split");
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 300), Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  // Not the Hopper wgmma hd512 prefill: it is slower than the sm80 one so far (its priority).
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_prefill");
}

TEST_F(RegistryTest, FallsBackToSmallerTilesWhenSharedMemoryIsShort) {
  const std::vector<int> archs = ReleaseArchs();
  // sm_89 parts allow ~99 KB per block: the 206 KB hd512 prefill config cannot run there (the
  // 89 KB hd512 decode config can).
  const DeviceInfo ada = Device(89, 101376);
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), ada, archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_split");
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 100), ada, archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_prefill_small");
  // With only 48 KB no hd512 tensor-core config fits: the generic CUDA-core kernel takes over.
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 100), Device(89, 49152), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_generic_bf16_prefill");
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(89, 49152), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_generic_bf16_decode");
}

// The KV type is part of the problem class: FP8 caches get FP8 entries only (large tiles where the
// shared memory allows, the small ones on ~100 KB parts, the sm75 ones on Turing, the CUDA-core
// kernel when nothing else fits), and a bf16 cache never gets an FP8 entry.
TEST_F(RegistryTest, Fp8CachesGetFp8EntriesOnly) {
  auto fp8 = [](ProblemKey pk) {
    pk.kv_type = DType::kF8E4M3;
    return pk;
  };
  for (const KernelEntry* e : AllEntries()) {
    const bool is_fp8 = std::string(e->name).find("_fp8_") != std::string::npos;
    if (e->op != Op::kAttentionDecode && e->op != Op::kAttentionPrefill) continue;
    EXPECT_EQ(e->predicate.kv_type == DType::kF8E4M3, is_fp8) << e->name;
  }
  if (EffectiveArch(90) >= 80) {
    const DeviceInfo hopper = Device(90);
    struct Want {
      ProblemKey pk;
      const char* name;
    };
    for (const Want& w :
         {Want{Attention(Op::kAttentionDecode, 256, 32, 16), "sm80_hd256_fp8_split"},
          Want{Attention(Op::kAttentionDecode, 512, 32, 4), "sm80_hd512_fp8_split"},
          Want{Attention(Op::kAttentionPrefill, 256, 32, 16, 300), "sm80_hd256_fp8_prefill"},
          Want{Attention(Op::kAttentionPrefill, 512, 32, 4, 300), "sm80_hd512_fp8_prefill"}}) {
      Selection s = Select(fp8(w.pk), hopper);
      ASSERT_NE(s.entry, nullptr) << s.error;
      EXPECT_STREQ(s.entry->name, w.name);
      s = Select(w.pk, hopper);  // the same problem over a bf16 cache
      ASSERT_NE(s.entry, nullptr) << s.error;
      EXPECT_EQ(std::string(s.entry->name).find("_fp8_"), std::string::npos) << s.entry->name;
    }
  }
  if (EffectiveArch(89) >= 80) {
    const DeviceInfo ada = Device(89, 101376);
    Selection s = Select(fp8(Attention(Op::kAttentionPrefill, 512, 32, 4, 100)), ada);
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_STREQ(s.entry->name, "sm80_hd512_fp8_prefill_small");
    s = Select(fp8(Attention(Op::kAttentionDecode, 256, 32, 16)), ada);
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_EQ(std::string(s.entry->name).rfind("sm80_hd256_fp8_split", 0), 0u) << s.entry->name;
    s = Select(fp8(Attention(Op::kAttentionDecode, 512, 32, 4)), Device(89, 49152));
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_STREQ(s.entry->name, "sm70_generic_fp8_decode");
  }
  {
    const std::vector<int> archs = {75, 90};
    Selection s =
        Select(fp8(Attention(Op::kAttentionPrefill, 256, 8, 2, 50)), Device(75, 65536), archs);
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_STREQ(s.entry->name, "sm75_hd256_fp8_prefill");
  }
}

TEST_F(RegistryTest, UnalignedOperandsOnTuringGetTheGenericKernel) {
  ProblemKey pk = Attention(Op::kAttentionDecode, 512, 32, 4);
  pk.flags = 0;
  const std::vector<int> archs = {75, 90};
  Selection s = Select(pk, Device(75, 65536), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_generic_bf16_decode");
}

// The wgmma entries are sm_90a code: chosen on sm_90 where they are faster, never on sm_100, which
// has no wgmma, nor for what they do not implement (FP8 KV).
TEST_F(RegistryTest, HopperPrefillUsesItsWgmmaEntryOnSm90Only) {
  if (FindEntry("sm90_hd256_bf16_prefill") == nullptr) GTEST_SKIP() << "built without sm_90";
  const std::vector<int> archs = ReleaseArchs();
  const ProblemKey sliding = Attention(Op::kAttentionPrefill, 256, 32, 16, 2048);
  Selection s = Select(sliding, Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm90_hd256_bf16_prefill");
  s = Select(sliding, Device(100), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd256_bf16_prefill");
  ProblemKey fp8 = sliding;
  fp8.kv_type = DType::kF8E4M3;
  s = Select(fp8, Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd256_fp8_prefill");
  // hd512 (K derived from V included) can run on the wgmma entry when forced; unforced the
  // faster sm80 entry keeps it.
  ProblemKey full = Attention(Op::kAttentionPrefill, 512, 32, 4, 2048);
  full.flags |= kFlagKFromV;
  full.rope_pairs = 64;
  s = Select(full, Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_prefill");
  const KernelEntry* hd512 = FindEntry("sm90_hd512_bf16_prefill");
  ASSERT_NE(hd512, nullptr);
  EXPECT_TRUE(CheckEntry(*hd512, full, Device(90), archs).ok);
  EXPECT_FALSE(CheckEntry(*hd512, full, Device(100), archs).ok);
}

// A step with image blocks (kFlagImageBlocks) only goes to entries that declare they apply the
// mask: the sm80 prefill kernels (sm75 builds too) and the CUDA-core one; never a decode entry,
// Volta's or Hopper's wgmma prefill, and a forced one without the capability is refused.
TEST_F(RegistryTest, ImageBlockStepsGoOnlyToEntriesThatApplyTheMask) {
  const std::vector<int> archs = ReleaseArchs();
  ProblemKey sliding = Attention(Op::kAttentionPrefill, 256, 32, 16, 2048);
  sliding.window = 1024;
  sliding.flags |= kFlagImageBlocks;
  for (int sm : {75, 80, 90, 100}) {
    const Selection s = Select(sliding, Device(sm), archs);
    ASSERT_NE(s.entry, nullptr) << sm << ": " << s.error;
    EXPECT_TRUE(s.entry->predicate.capabilities & kFlagImageBlocks) << s.entry->name;
  }
  const Selection s90 = Select(sliding, Device(90), archs);
  EXPECT_STREQ(s90.entry->name, "sm80_hd256_bf16_prefill");
  ProblemKey decode = Attention(Op::kAttentionDecode, 256, 32, 16, 1);
  decode.flags |= kFlagImageBlocks;
  const Selection d = Select(decode, Device(90), archs);
  ASSERT_NE(d.entry, nullptr) << d.error;
  EXPECT_NE(std::string(d.entry->name).find("generic"), std::string::npos) << d.entry->name;
  int refused = 0;
  for (const KernelEntry* e : AllEntries()) {
    if (e->op != Op::kAttentionDecode && e->op != Op::kAttentionPrefill) continue;
    if (e->predicate.capabilities & kFlagImageBlocks) continue;
    ProblemKey pk = e->op == Op::kAttentionDecode ? decode : sliding;
    pk.head_dim = e->predicate.head_dim != 0 ? e->predicate.head_dim : 256;
    pk.kv_type = e->predicate.kv_type;
    pk.in_type = pk.out_type = e->predicate.in_type;
    const KernelStatus st = CheckEntry(*e, pk, Device(e->min_sm), archs);
    EXPECT_FALSE(st.ok) << e->name;
    ++refused;
  }
  EXPECT_GT(refused, 0);
  if (FindEntry("sm90_hd256_bf16_prefill") != nullptr) {
    setenv("GANNET_FORCE_KERNEL", "sm90_hd256_bf16_prefill", 1);
    const Selection f = Select(sliding, Device(90), archs);
    EXPECT_EQ(f.entry, nullptr);
    EXPECT_NE(f.error.find("image-block mask"), std::string::npos) << f.error;
  }
}

TEST_F(RegistryTest, DecodeEntriesRejectTooManyRows) {
  // 4 query tokens x GQA 8 = 32 rows: more than a decode CTA's 16.
  const ProblemKey pk = Attention(Op::kAttentionDecode, 512, 32, 4, 4);
  const KernelStatus st = CheckEntry(kSm80DecodeHd512Split, pk, Device(90), ReleaseArchs());
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.reason.find("group"), std::string::npos) << st.reason;
}

TEST_F(RegistryTest, UnalignedOperandsLoseTheTensorCoreEntries) {
  ProblemKey pk = Attention(Op::kAttentionDecode, 512, 32, 4);
  pk.flags = 0;
  Selection s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_generic_bf16_decode");
}

TEST_F(RegistryTest, ForcedKernelIsUsedOrRefusedWithAReason) {
  // The release list, so a Volta build (archs 70) checks the same selections.
  const std::vector<int> archs = ReleaseArchs();
  setenv("GANNET_FORCE_KERNEL", "sm70_generic_bf16_decode", 1);
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_generic_bf16_decode");
  // The force names a decode kernel: other ops select as usual.
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 50), Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STRNE(s.entry->name, "sm70_generic_bf16_decode");

  setenv("GANNET_FORCE_KERNEL", "sm80_hd256_bf16_split", 1);
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90), archs);
  EXPECT_EQ(s.entry, nullptr);
  EXPECT_NE(s.error.find("cannot implement"), std::string::npos) << s.error;

  // Several names: the first of the op that can run the problem (here the hd512 one), so one
  // list can force an arch's entries for every head dim.
  setenv("GANNET_FORCE_KERNEL", "sm80_hd256_bf16_split,sm75_hd512_bf16_split,sm80_hd512_bf16_split",
         1);
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_hd512_bf16_split");
  EXPECT_TRUE(s.error.empty()) << s.error;
  s = Select(Attention(Op::kAttentionDecode, 256, 32, 16), Device(90), archs);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd256_bf16_split");

  setenv("GANNET_FORCE_KERNEL", "typo_kernel", 1);
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90), archs);
  EXPECT_EQ(s.entry, nullptr);
  EXPECT_NE(s.error.find("unknown kernel"), std::string::npos) << s.error;
}

// 26B-A4B's experts (E 128, top-8, I 704, H 2816) for `tokens` tokens.
ProblemKey Moe26bA4b(int tokens) {
  ProblemKey pk;
  pk.op = Op::kMoeExperts;
  pk.n = 704;
  pk.k = 2816;
  pk.num_experts = 128;
  pk.top_k = 8;
  pk.flags = kFlagAligned16;
  pk.num_tokens = tokens;
  return pk;
}

TEST_F(RegistryTest, MoeUsesPairGemvForFewTokensAndGroupedGemmForMany) {
  if (EffectiveArch(90) < 80) GTEST_SKIP() << "binary carries no sm_80+ code";
  ProblemKey pk = Moe26bA4b(1);
  Selection s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm70_moe_pair_gemv_bf16");
  pk.num_tokens = 512;
  s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_moe_grouped_bf16");
}

// A quantized weight type is a DType like any other (kernels/common/dtype.h), and no entry
// claims one yet: selection refuses it by name instead of running a bf16 kernel on its bytes.
TEST_F(RegistryTest, QuantizedWeightTypesAreRefusedByName) {
  for (const DType w : {DType::kI4, DType::kF8E4M3, DType::kF4E2M1}) {
    ProblemKey gemv;
    gemv.op = Op::kGemv;
    gemv.n = 2048;
    gemv.k = 2048;
    gemv.num_tokens = 1;
    gemv.flags = kFlagAligned16;
    gemv.kv_type = w;
    Selection s = Select(gemv, Device(90));
    EXPECT_EQ(s.entry, nullptr) << DTypeShortName(w);
    EXPECT_NE(s.error.find("bf16/" + std::string(DTypeShortName(w)) + " unsupported"),
              std::string::npos)
        << s.error;
    ProblemKey moe = Moe26bA4b(1);
    moe.kv_type = w;
    s = Select(moe, Device(90));
    EXPECT_EQ(s.entry, nullptr) << DTypeShortName(w);
  }
}

TEST_F(RegistryTest, SplitCountFillsTheGpuOnlyWhenNeeded) {
  const DeviceInfo h100 = Device(90);
  // Batch 1, 4 kv heads, 8k context: one CTA per kv head would leave 128 SMs idle.
  EXPECT_GE(FlashAttentionSplits(kSm80DecodeHd512Split, Attention(Op::kAttentionDecode, 512, 32, 4),
                                 h100),
            16);
  // 64 sequences x 16 kv heads already fill the GPU.
  ProblemKey wide = Attention(Op::kAttentionDecode, 256, 32, 16);
  wide.num_seqs = wide.num_tokens = 64;
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd256Split, wide, h100), 1);
  // Batch 1 within two waves even at the most splits takes the most (latency-bound): a sliding
  // layer's 1024 keys in 16 splits of 64, a 2k full layer in 32.
  ProblemKey slide = Attention(Op::kAttentionDecode, 256, 32, 16);
  slide.window = 1024;
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd256Split, slide, h100), 16);
  ProblemKey full_2k = Attention(Op::kAttentionDecode, 512, 32, 4);
  full_2k.max_seq_len = 2048;
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd512Split, full_2k, h100), 32);
  // A short context never splits below two tiles per split.
  ProblemKey short_ctx = Attention(Op::kAttentionDecode, 512, 32, 4);
  short_ctx.max_seq_len = 40;
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd512Split, short_ctx, h100), 1);
}

// A 31B-style sliding layer's decode step (hd256, GQA 2, window 1024) of `seqs` sequences.
ProblemKey SlidingDecode(int num_kv_heads, int seqs, int max_seq_len) {
  ProblemKey pk = Attention(Op::kAttentionDecode, 256, num_kv_heads * 2, num_kv_heads);
  pk.window = 1024;
  pk.max_seq_len = max_seq_len;
  pk.num_seqs = pk.num_tokens = seqs;
  return pk;
}

TEST_F(RegistryTest, Hd256DecodeTakesNarrowTilesOnlyForGridsThatFillTheGpu) {
  const DeviceInfo h100 = Device(90);
  auto sliding = [](int num_kv_heads, int seqs) { return SlidingDecode(num_kv_heads, seqs, 1500); };
  // 31B at 64 sequences: 1024 unsplit CTAs, four waves of 16-key CTAs at four per SM.
  EXPECT_TRUE(Hd256DecodeUsesNarrowTile(sliding(16, 64), h100));
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd256Split, sliding(16, 64), h100), 1);
  // 31B at 16 sequences (one wave of either tile) and batch 1 (split 16 ways) keep 32-key tiles.
  EXPECT_FALSE(Hd256DecodeUsesNarrowTile(sliding(16, 16), h100));
  EXPECT_FALSE(Hd256DecodeUsesNarrowTile(sliding(16, 1), h100));
  // E4B's 2 kv heads at 64 sequences: 128 CTAs, which split; the wide tile measured faster.
  ProblemKey e4b = sliding(2, 64);
  e4b.num_q_heads = 8;
  EXPECT_FALSE(Hd256DecodeUsesNarrowTile(e4b, h100));
}

TEST_F(RegistryTest, AGridPastOneWaveSplitsWhenItsLastWaveWouldRunMostlyEmpty) {
  const DeviceInfo h100 = Device(90);
  auto sliding = [](int num_kv_heads, int seqs) { return SlidingDecode(num_kv_heads, seqs, 2048); };
  // 31B at 80 sequences: 1280 narrow CTAs are 2.42 waves of 528 (81% efficient); two splits make
  // 4.85 waves (97%).
  EXPECT_TRUE(Hd256DecodeUsesNarrowTile(sliding(16, 80), h100));
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd256Split, sliding(16, 80), h100), 2);
  // Half the kv heads (tensor parallel 2) at 80 sequences: 640 CTAs, 1.21 waves; three splits.
  EXPECT_TRUE(Hd256DecodeUsesNarrowTile(sliding(8, 80), h100));
  EXPECT_EQ(FlashAttentionSplits(kSm80DecodeHd256Split, sliding(8, 80), h100), 3);
  // 31B's full layer (hd512, GQA 8) at `seqs` sequences of up to 2048 keys, on `kv` kv heads.
  auto full = [&](int kv, int seqs) {
    ProblemKey pk = Attention(Op::kAttentionDecode, 512, kv * 8, kv);
    pk.max_seq_len = 2048;
    pk.num_seqs = pk.num_tokens = seqs;
    return FlashAttentionSplits(kSm80DecodeHd512Split, pk, h100);
  };
  // At 80 sequences: 320 CTAs of two per SM, 1.21 waves of 264; three splits. At 64, 0.97 of a
  // wave: whole.
  EXPECT_EQ(full(4, 80), 3);
  EXPECT_EQ(full(4, 64), 1);
  // One TP=2 rank (2 kv heads) at 80 sequences: 160 CTAs, fewer than a wave but one on every SM,
  // stay whole; at 64, 128 CTAs leave SMs idle and split in two.
  EXPECT_EQ(full(2, 80), 1);
  EXPECT_EQ(full(2, 64), 2);
  // Work sized for the split count the launch uses (the narrow tile's).
  EXPECT_EQ(kSm80DecodeHd256Split.workspace_bytes(sliding(16, 80), h100),
            FlashAttentionWorkspace(kSm80DecodeHd256Split, sliding(16, 80), 2));
}

// Every registry problem a Gemma-4 variant runs: attention decode (batch 1 and 64, and verify
// chunks of 4 tokens) and prefill on its sliding and full layers, bf16 and FP8 KV, single-store
// K=V where the variant has it; the small-M GEMV; and the 26B-A4B experts at 1 and 512 tokens.
struct VariantProblem {
  ProblemKey pk;
  bool tensor_core;  // an arch with tensor cores must run it on them
  std::string what;  // "<variant> <problem>"
};

void AddVariantProblems(const std::string& variant, const model::TextConfig& c,
                        std::vector<VariantProblem>& out) {
  for (const bool sliding : {true, false}) {
    const int hd = sliding ? c.head_dim : c.global_head_dim;
    const int nkv = sliding ? c.num_key_value_heads : c.FullNumKvHeads();
    const bool k_from_v = !sliding && c.attention_k_eq_v;
    const int rope_pairs = static_cast<int>(c.rope_full.partial_rotary_factor * hd / 2);
    for (const DType kv : {DType::kBF16, DType::kF8E4M3}) {
      struct Shape {
        Op op;
        int qlen, seqs;
        const char* what;
      };
      for (const Shape& sh : {Shape{Op::kAttentionDecode, 1, 1, "decode b1"},
                              Shape{Op::kAttentionDecode, 1, 64, "decode b64"},
                              Shape{Op::kAttentionDecode, 4, 8, "verify q4"},
                              Shape{Op::kAttentionPrefill, 2048, 1, "prefill"}}) {
        ProblemKey pk = Attention(sh.op, hd, c.num_attention_heads, nkv, sh.qlen);
        pk.num_seqs = sh.seqs;
        pk.num_tokens = sh.qlen * sh.seqs;
        pk.kv_type = kv;
        pk.window = sliding ? c.sliding_window : 0;
        if (k_from_v) {
          pk.flags |= kFlagKFromV;
          pk.rope_pairs = rope_pairs;
        }
        // A verify chunk wider than a decode CTA's 16 rows runs on the prefill entries.
        if (sh.op == Op::kAttentionDecode && sh.qlen * pk.group() > 16)
          pk.op = Op::kAttentionPrefill;
        out.push_back({pk, true,
                       variant + " " + sh.what + (sliding ? " sliding" : " full") + " " +
                           std::string(DTypeShortName(kv)) + (k_from_v ? " k_from_v" : "")});
      }
    }
  }
  ProblemKey gemv;
  gemv.op = Op::kGemv;
  gemv.n = static_cast<int>(c.hidden_size);
  gemv.k = static_cast<int>(c.hidden_size);
  gemv.num_tokens = 1;
  gemv.flags = kFlagAligned16;
  out.push_back({gemv, false, variant + " gemv"});
  if (c.enable_moe_block) {
    for (const int tokens : {1, 512}) {
      ProblemKey moe;
      moe.op = Op::kMoeExperts;
      moe.n = static_cast<int>(c.moe_intermediate_size);
      moe.k = static_cast<int>(c.hidden_size);
      moe.num_experts = c.num_experts;
      moe.top_k = c.top_k_experts;
      moe.num_tokens = tokens;
      moe.flags = kFlagAligned16;
      out.push_back({moe, true, variant + " moe x" + std::to_string(tokens)});
    }
  }
}

// The problems of all four variants (their dummy configs: the released geometries).
std::vector<VariantProblem> AllVariantProblems() {
  std::vector<VariantProblem> out;
  for (const char* variant : {"31b", "26b-a4b", "e4b", "e2b"}) {
    auto config = model::DummyModelConfig(std::string("dummy:") + variant);
    EXPECT_TRUE(config.ok()) << config.status();
    if (config.ok()) AddVariantProblems(variant, config->text, out);
  }
  return out;
}

// What a release build (cmake/GannetCudaArchs.cmake's list, passed in by CMake) selects on each
// architecture it targets, for every problem above: every one must get an entry, and a
// tensor-core one where the arch has tensor cores (no CUDA-core fallback left for Gemma's shapes).
TEST_F(RegistryTest, EveryVariantHasATensorCoreKernelForEveryOpOnEveryReleaseArch) {
  struct Dev {
    int sm, smem, sms;  // per-block opt-in shared memory of the arch's parts
  };
  const Dev devices[] = {{75, 65536, 40},    // T4
                         {80, 166912, 108},  // A100
                         {86, 101376, 84},   // RTX 30 / A10
                         {89, 101376, 128},  // L4 / RTX 40
                         {90, 232448, 132},  // H100 / H200
                         {100, 232448, 148}};
  const std::vector<int> archs = ReleaseArchs();
  ASSERT_FALSE(archs.empty());
  const std::vector<VariantProblem> problems = AllVariantProblems();
  int checked = 0;
  for (const Dev& d : devices) {
    if (EffectiveArch(d.sm, archs) != d.sm) {
      ADD_FAILURE() << "the release list " << GANNET_RELEASE_CUDA_ARCHS << " lacks sm_" << d.sm;
      continue;
    }
    const DeviceInfo dev = Device(d.sm, d.smem, d.sms);
    for (const VariantProblem& p : problems) {
      const Selection s = Select(p.pk, dev, archs);
      ++checked;
      ASSERT_NE(s.entry, nullptr) << "sm_" << d.sm << " " << p.what << ": " << s.error;
      if (p.tensor_core) {
        EXPECT_EQ(std::string(s.entry->name).find("generic"), std::string::npos)
            << "sm_" << d.sm << " " << p.what << " fell back to " << s.entry->name;
        EXPECT_EQ(std::string(s.entry->name).rfind("sm70_moe_pair_gemv_any", 0), std::string::npos)
            << "sm_" << d.sm << " " << p.what << " fell back to " << s.entry->name;
      }
    }
  }
  EXPECT_GE(checked, 6 * 4 * 17);
}

// The Volta build (tools/sm70: CUDA 12.4, archs 70) on a V100 (96 KB of shared memory, 80 SMs):
// every problem gets an sm70_* entry, attention a tensor-core (m8n8k4) one -- never the CUDA-core
// kernel -- and the MoE experts the per-pair GEMVs at any token count (the grouped MoE GEMM needs
// sm_75's m16n8k8). The release build (no sm_70 code) refuses a V100 instead.
TEST_F(RegistryTest, VoltaBuildRunsEveryOpOnItsOwnEntries) {
  const std::vector<int> volta_build = {70};
  const DeviceInfo v100 = Device(70, 98304, 80);
  int checked = 0, attention = 0;
  for (const VariantProblem& p : AllVariantProblems()) {
    const Selection s = Select(p.pk, v100, volta_build);
    ++checked;
    ASSERT_NE(s.entry, nullptr) << p.what << ": " << s.error;
    const std::string name = s.entry->name;
    EXPECT_EQ(name.rfind("sm70_", 0), 0u) << p.what << ": " << name;
    if (p.pk.op == Op::kAttentionDecode || p.pk.op == Op::kAttentionPrefill) {
      ++attention;
      EXPECT_TRUE(IsFlashEntry(*s.entry)) << p.what << " fell back to " << name;
      const bool fp8 = p.pk.kv_type == DType::kF8E4M3;
      EXPECT_EQ(name.find("_fp8_") != std::string::npos, fp8) << p.what << ": " << name;
    }
  }
  EXPECT_GE(checked, 4 * 17);
  EXPECT_GT(attention, 0);
  // Every Volta configuration fits the V100's 96 KB.
  for (const KernelEntry* e : AllEntries()) {
    if (std::string(e->name).rfind("sm70_hd", 0) != 0) continue;
    ProblemKey pk = Attention(e->op, e->predicate.head_dim, 32, 4);
    pk.kv_type = e->predicate.kv_type;
    pk.in_type = pk.out_type = e->predicate.in_type;  // the f16io twins take fp16 q
    EXPECT_TRUE(CheckEntry(*e, pk, v100, volta_build).ok)
        << e->name << ": " << CheckEntry(*e, pk, v100, volta_build).reason;
  }
  ProblemKey moe = Moe26bA4b(512);
  EXPECT_STREQ(Select(moe, v100, volta_build).entry->name, "sm70_moe_pair_gemv_any_bf16");
  moe.num_tokens = 8;
  EXPECT_STREQ(Select(moe, v100, volta_build).entry->name, "sm70_moe_pair_gemv_bf16");
  EXPECT_EQ(Select(moe, v100, ReleaseArchs()).entry, nullptr);
}

// The fp16 compute path (compute_dtype f16: a V100's default, any GPU's choice): the same problems
// with f16 activations and weights (attention q/out f16; GEMV x f16 or f32 over f16 weights; MoE
// f16 in, f32 out) get an entry that takes them on the Volta build's V100 and on every release
// arch -- attention a tensor-core (m8n8k4) one (but hd512 on a T4), MoE the f16 pair GEMVs -- and
// never a bf16 one.
TEST_F(RegistryTest, Fp16ComputePathHasAnEntryForEveryOpOnEveryArch) {
  struct Dev {
    int sm, smem, sms;
    std::vector<int> archs;
  };
  const Dev devices[] = {{70, 98304, 80, {70}},  // V100, the Volta build
                         {75, 65536, 40, ReleaseArchs()},
                         {80, 166912, 108, ReleaseArchs()},
                         {90, 232448, 132, ReleaseArchs()},
                         {100, 232448, 148, ReleaseArchs()}};
  int checked = 0;
  for (const Dev& d : devices) {
    const DeviceInfo dev = Device(d.sm, d.smem, d.sms);
    for (VariantProblem p : AllVariantProblems()) {
      std::vector<ProblemKey> keys;
      if (p.pk.op == Op::kGemv) {
        p.pk.kv_type = DType::kF16;
        for (const DType x : {DType::kF16, DType::kF32}) {
          p.pk.in_type = x;
          keys.push_back(p.pk);
        }
      } else if (p.pk.op == Op::kMoeExperts) {
        p.pk.in_type = p.pk.kv_type = DType::kF16;
        p.pk.out_type = DType::kF32;
        keys.push_back(p.pk);
      } else {
        p.pk.in_type = p.pk.out_type = DType::kF16;
        keys.push_back(p.pk);
      }
      for (const ProblemKey& pk : keys) {
        const Selection s = Select(pk, dev, d.archs);
        ++checked;
        ASSERT_NE(s.entry, nullptr) << "sm_" << d.sm << " f16 " << p.what << ": " << s.error;
        const std::string name = s.entry->name;
        EXPECT_EQ(s.entry->predicate.in_type, pk.in_type) << name;
        EXPECT_NE(name.find("_f16"), std::string::npos)
            << "sm_" << d.sm << " " << p.what << ": " << name;
        // A T4's 64 KB cannot hold the Volta hd512 tiles (87 KB): there hd512 runs the CUDA-core
        // kernel under f16 (a T4 computes in bf16 with its sm75 entries by default).
        const bool t4_hd512 = d.sm == 75 && pk.head_dim == 512;
        if ((pk.op == Op::kAttentionDecode || pk.op == Op::kAttentionPrefill) && !t4_hd512) {
          EXPECT_TRUE(IsFlashEntry(*s.entry))
              << "sm_" << d.sm << " " << p.what << " fell back to " << name;
          EXPECT_EQ(name.find("_fp8_") != std::string::npos, pk.kv_type == DType::kF8E4M3) << name;
        }
      }
    }
  }
  EXPECT_GE(checked, 5 * 4 * 18);
  // And a bf16 problem never gets an f16 entry.
  const std::vector<int> volta_build = {70};
  const Selection bf16 =
      Select(Attention(Op::kAttentionDecode, 256, 32, 16), Device(70, 98304, 80), volta_build);
  ASSERT_NE(bf16.entry, nullptr);
  EXPECT_EQ(std::string(bf16.entry->name).find("_f16"), std::string::npos) << bf16.entry->name;
}

// A newer GPU never prefers the Volta entries: a T4 takes its sm75 ones, an H100 the sm80 ones.
TEST_F(RegistryTest, VoltaEntriesRankBelowNewerOnes) {
  const std::vector<int> archs = {70, 75, 90};
  for (const ProblemKey& pk : {Attention(Op::kAttentionDecode, 256, 32, 16),
                               Attention(Op::kAttentionPrefill, 512, 32, 4, 300)}) {
    const Selection t4 = Select(pk, Device(75, 65536, 40), archs);
    ASSERT_NE(t4.entry, nullptr) << t4.error;
    EXPECT_EQ(std::string(t4.entry->name).rfind("sm75_", 0), 0u) << t4.entry->name;
    const Selection v100 = Select(pk, Device(70, 98304, 80), archs);
    ASSERT_NE(v100.entry, nullptr) << v100.error;
    EXPECT_EQ(std::string(v100.entry->name).rfind("sm70_hd", 0), 0u) << v100.entry->name;
  }
}

TEST_F(RegistryTest, TuringGetsItsTensorCoreEntries) {
  const std::vector<int> archs = ReleaseArchs();
  const DeviceInfo t4 = Device(75, 65536, 40);
  struct Want {
    ProblemKey pk;
    const char* name;
  };
  auto fp8 = [](ProblemKey pk) {
    pk.kv_type = DType::kF8E4M3;
    return pk;
  };
  for (const Want& w :
       {Want{Attention(Op::kAttentionDecode, 512, 32, 4), "sm75_hd512_bf16_split"},
        Want{Attention(Op::kAttentionDecode, 256, 32, 16), "sm75_hd256_bf16_split"},
        Want{fp8(Attention(Op::kAttentionDecode, 512, 32, 4)), "sm75_hd512_fp8_split"},
        Want{Attention(Op::kAttentionPrefill, 512, 32, 4, 300), "sm75_hd512_bf16_prefill"},
        Want{fp8(Attention(Op::kAttentionPrefill, 256, 32, 16, 300)), "sm75_hd256_fp8_prefill"}}) {
    const Selection s = Select(w.pk, t4, archs);
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_STREQ(s.entry->name, w.name);
  }
  // Every sm75 configuration fits Turing's 64 KB (the traits assert it at compile time too).
  for (const KernelEntry* e : AllEntries()) {
    if (std::string(e->name).rfind("sm75_", 0) != 0 || !IsFlashEntry(*e)) continue;
    ProblemKey pk = Attention(e->op, e->predicate.head_dim, 32, 4);
    pk.kv_type = e->predicate.kv_type;
    EXPECT_TRUE(CheckEntry(*e, pk, t4, archs).ok)
        << e->name << ": " << CheckEntry(*e, pk, t4, archs).reason;
  }
  // A newer GPU prefers the sm80 entries, and a binary without sm_75 code cannot serve a T4.
  const Selection h = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90), archs);
  ASSERT_NE(h.entry, nullptr) << h.error;
  EXPECT_STREQ(h.entry->name, "sm80_hd512_bf16_split");
  const std::vector<int> hopper_only = {90};
  const Selection none = Select(Attention(Op::kAttentionDecode, 512, 32, 4), t4, hopper_only);
  EXPECT_EQ(none.entry, nullptr);
  EXPECT_NE(none.error.find("no arch <= sm_75"), std::string::npos) << none.error;
}

}  // namespace
}  // namespace gannet::kernels
