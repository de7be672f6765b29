// Kernel-registry selection logic, on described devices (no GPU needed): arch clamping, arch
// ranges, predicates, specificity, shared-memory fallback, GANNET_FORCE_KERNEL, and the
// compiled-arch report.
#include "kernels/registry/registry.h"

#include <cstdlib>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "kernels/attention/attention_entries.h"
#include "kernels/moe/moe_entries.h"

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
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_prefill");
}

TEST_F(RegistryTest, FallsBackToSmallerTilesWhenSharedMemoryIsShort) {
  if (EffectiveArch(89) < 80) GTEST_SKIP() << "binary carries no sm_80..89 code";
  // sm_89 parts allow ~99 KB per block: the 206 KB hd512 prefill config cannot run there (the
  // 89 KB hd512 decode config can).
  const DeviceInfo ada = Device(89, 101376);
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), ada);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_split");
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 100), ada);
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_hd512_bf16_prefill_small");
  // With only 48 KB no hd512 tensor-core config fits: the generic CUDA-core kernel takes over.
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 100), Device(89, 49152));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_generic_bf16_prefill");
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(89, 49152));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_generic_bf16_decode");
}

// The KV type is part of the problem class: FP8 caches get FP8 entries only (large tiles where the
// shared memory allows, the small ones on ~100 KB parts, the CUDA-core kernel on sm_75 or when
// nothing else fits), and a bf16 cache never gets an FP8 entry.
TEST_F(RegistryTest, Fp8CachesGetFp8EntriesOnly) {
  auto fp8 = [](ProblemKey pk) {
    pk.kv_type = ElemType::kF8E4M3;
    return pk;
  };
  for (const KernelEntry* e : AllEntries()) {
    const bool is_fp8 = std::string(e->name).find("_fp8_") != std::string::npos;
    if (e->op != Op::kAttentionDecode && e->op != Op::kAttentionPrefill) continue;
    EXPECT_EQ(e->predicate.kv_type == ElemType::kF8E4M3, is_fp8) << e->name;
  }
  if (EffectiveArch(90) >= 80) {
    const DeviceInfo hopper = Device(90);
    struct Want {
      ProblemKey pk;
      const char* name;
    };
    for (const Want& w : {Want{Attention(Op::kAttentionDecode, 256, 32, 16), "sm80_hd256_fp8_split"},
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
    EXPECT_STREQ(s.entry->name, "sm75_generic_fp8_decode");
  }
  if (EffectiveArch(75) == 75) {
    Selection s = Select(fp8(Attention(Op::kAttentionPrefill, 256, 8, 2, 50)), Device(75, 65536));
    ASSERT_NE(s.entry, nullptr) << s.error;
    EXPECT_STREQ(s.entry->name, "sm75_generic_fp8_prefill");
  }
}

TEST_F(RegistryTest, OlderArchsGetTheGenericKernel) {
  if (EffectiveArch(75) != 75) GTEST_SKIP() << "binary carries no sm_75 code";
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(75, 65536));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_generic_bf16_decode");
}

TEST_F(RegistryTest, DecodeEntriesRejectTooManyRows) {
  // 4 query tokens x GQA 8 = 32 rows: more than a decode CTA's 16.
  const ProblemKey pk = Attention(Op::kAttentionDecode, 512, 32, 4, 4);
  const KernelStatus st = CheckEntry(kSm80DecodeHd512Split, pk, Device(90));
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.reason.find("group"), std::string::npos) << st.reason;
}

TEST_F(RegistryTest, UnalignedOperandsLoseTheTensorCoreEntries) {
  ProblemKey pk = Attention(Op::kAttentionDecode, 512, 32, 4);
  pk.flags = 0;
  Selection s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_generic_bf16_decode");
}

TEST_F(RegistryTest, ForcedKernelIsUsedOrRefusedWithAReason) {
  setenv("GANNET_FORCE_KERNEL", "sm75_generic_bf16_decode", 1);
  Selection s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_generic_bf16_decode");
  // The force names a decode kernel: other ops select as usual.
  s = Select(Attention(Op::kAttentionPrefill, 512, 32, 4, 50), Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STRNE(s.entry->name, "sm75_generic_bf16_decode");

  setenv("GANNET_FORCE_KERNEL", "sm80_hd256_bf16_split", 1);
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90));
  EXPECT_EQ(s.entry, nullptr);
  EXPECT_NE(s.error.find("cannot implement"), std::string::npos) << s.error;

  setenv("GANNET_FORCE_KERNEL", "typo_kernel", 1);
  s = Select(Attention(Op::kAttentionDecode, 512, 32, 4), Device(90));
  EXPECT_EQ(s.entry, nullptr);
  EXPECT_NE(s.error.find("unknown kernel"), std::string::npos) << s.error;
}

TEST_F(RegistryTest, MoeUsesPairGemvForFewTokensAndGroupedGemmForMany) {
  if (EffectiveArch(90) < 80) GTEST_SKIP() << "binary carries no sm_80+ code";
  ProblemKey pk;
  pk.op = Op::kMoeExperts;
  pk.n = 704;
  pk.k = 2816;
  pk.num_experts = 128;
  pk.top_k = 8;
  pk.flags = kFlagAligned16;
  pk.num_tokens = 1;
  Selection s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm75_moe_pair_gemv_bf16");
  pk.num_tokens = 512;
  s = Select(pk, Device(90));
  ASSERT_NE(s.entry, nullptr) << s.error;
  EXPECT_STREQ(s.entry->name, "sm80_moe_grouped_bf16");
}

TEST_F(RegistryTest, SplitCountFillsTheGpuOnlyWhenNeeded) {
  const DeviceInfo h100 = Device(90);
  // Batch 1, 4 kv heads, 8k context: one CTA per kv head would leave 128 SMs idle.
  EXPECT_GE(FlashAttentionSplits(kSm80DecodeHd512Split, Attention(Op::kAttentionDecode, 512, 32, 4), h100), 16);
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

}  // namespace
}  // namespace gannet::kernels
