#include "kernels/attention/attention_entries.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace gannet::kernels {
namespace {

constexpr int kMaxSplits = 64;
// Split-count ceiling: a split streams at least kMinKeysPerSplit keys (below that the pipeline ramp
// and the merge cost more than the parallelism buys: on H100, hd512 batch 1 at 8k runs 44 us with
// 33 splits, 59 us with 16 and 78 us with 132), except that short contexts may still use up to
// kShortContextSplits splits of >= kMinKeysShort keys (1k context: 16 us with 14 splits, 28 us
// with 4; 2k context on H200: 15.6 us with 32, 17.6 with 16).
constexpr int kMinKeysPerSplit = 256;
constexpr int kShortContextSplits = 32;
constexpr int kMinKeysShort = 64;
// Shared memory an SM can give its resident blocks (sm_90: 228 KB, 1 KB reserved per block).
constexpr int kSmemPerSm = 233472;

// CTAs of one split of the problem's grid, and how many the GPU holds at once with `c`'s
// shared memory and threads.
struct GridFill {
  int ctas;
  int target;
};
GridFill Fill(const FlashConfig& c, const ProblemKey& pk, const DeviceInfo& dev) {
  const int group = std::max(1, pk.group());
  const int row_tiles = std::max(pk.num_seqs, (pk.num_tokens * group + c.block_m - 1) / c.block_m);
  const int per_sm = std::max(1, std::min(kSmemPerSm / (c.smem_bytes + 1024), 2048 / c.threads));
  return {row_tiles * pk.num_kv_heads, std::max(1, dev.num_sms) * per_sm};
}

// Like FlashAttention's num_splits_heuristic: the fewest splits whose wave efficiency is within
// 85% of the best, so short or already-wide problems don't pay for merging partials. A problem
// that stays within two waves even at the most splits (batch-1 decode) takes the most: there the
// time is pipeline latency, and shorter splits cut it more than the merge adds (H200, batch 1:
// hd256 over 1024 keys 13.3 us with 16 splits vs 14.9 with 14; hd512 over 2048 keys 15.6 us
// with 32 vs 17.6 with 16). One wave at least 80% full stays whole. A grid past one wave is
// weighed like any other: its last, partly filled wave streams at a fraction of the GPU (H200,
// 31B at 80 sequences: 1.21 waves of full-layer CTAs ran 366 us against 195 us for 64
// sequences' 0.97 wave; 2.42 waves of sliding ones 380 us against 274 us for 1.94 waves).
// Prefill grids that fill the GPU stay whole (measured only for decode).
int SplitHeuristic(const FlashConfig& c, const ProblemKey& pk, const DeviceInfo& dev) {
  const auto [ctas, target] = Fill(c, pk, dev);
  int kv_len = pk.max_seq_len;
  if (pk.window > 0) kv_len = std::min(kv_len, pk.window + std::max(1, pk.max_query_len) - 1);
  if (ctas * 5 >= target * 4 && (ctas <= target || pk.op != Op::kAttentionDecode)) return 1;
  // A decode grid that fits one wave with a CTA on every SM also stays whole: a CTA alone on its
  // SM streams faster than the wave count assumes (H100, a 31B full layer at 80 sequences on
  // one TP=2 rank, 160 CTAs of two an SM: 184 us whole against 209 us at the 3 splits chosen
  // before, 218 at 4).
  if (pk.op == Op::kAttentionDecode && ctas >= dev.num_sms && ctas <= target) return 1;
  const int max_splits =
      std::min(kMaxSplits, std::max({1, kv_len / kMinKeysPerSplit,
                                     std::min(kShortContextSplits, kv_len / kMinKeysShort)}));
  if (ctas * max_splits <= 2 * target) return max_splits;
  double best = 0;
  double eff[kMaxSplits + 1] = {};
  for (int s = 1; s <= max_splits; ++s) {
    const double waves = static_cast<double>(ctas) * s / target;
    eff[s] = waves / std::ceil(waves);
    best = std::max(best, eff[s]);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eff[s] >= 0.85 * best) return s;
  }
  return 1;
}

template <FlashConfig (*kConfig)()>
KernelStatus FlashCanImplement(const ProblemKey& pk, const DeviceInfo& dev) {
  const FlashConfig c = kConfig();
  if (pk.num_kv_heads <= 0 || pk.num_q_heads % pk.num_kv_heads != 0) {
    return KernelStatus::Fail("query heads not a multiple of kv heads");
  }
  if (c.smem_bytes > dev.max_smem_optin) {
    return KernelStatus::Fail("needs " + std::to_string(c.smem_bytes) +
                              " B shared memory, device allows " +
                              std::to_string(dev.max_smem_optin));
  }
  if ((pk.flags & kFlagKFromV) &&
      !FlashSupportsKFromV(pk.rope_pairs, pk.head_dim, pk.kv_type == DType::kF8E4M3, c.threads)) {
    return KernelStatus::Fail("cannot derive K over " + std::to_string(pk.rope_pairs) +
                              " rotated pairs");
  }
  return KernelStatus::Ok();
}

// The split workspace of configuration `c` on problem `pk` at `splits` splits.
size_t SplitWorkspaceBytes(const FlashConfig& c, const ProblemKey& pk, int splits) {
  return FlashWorkspaceBytes(c,
                             FlashGridTiles(c, pk.num_tokens, pk.num_seqs, std::max(1, pk.group())),
                             pk.num_kv_heads, splits);
}

template <FlashConfig (*kConfig)()>
size_t FlashWorkspace(const ProblemKey& pk, const DeviceInfo& dev) {
  const FlashConfig c = kConfig();
  return SplitWorkspaceBytes(c, pk, SplitHeuristic(c, pk, dev));
}

template <FlashConfig (*kConfig)(),
          cudaError_t (*kLaunch)(const PagedAttentionParams&, int, void*, cudaStream_t)>
cudaError_t FlashLaunch(const void* args, const ProblemKey& pk, const DeviceInfo& dev,
                        void* workspace, cudaStream_t stream) {
  const auto& p = *static_cast<const PagedAttentionParams*>(args);
  const int splits = p.num_splits > 0 ? p.num_splits : SplitHeuristic(kConfig(), pk, dev);
  return kLaunch(p, splits, workspace, stream);
}

KernelStatus GenericCanImplement(const ProblemKey& pk, const DeviceInfo&) {
  if (pk.head_dim % 8 != 0 || pk.head_dim > 512)
    return KernelStatus::Fail("head_dim must be a multiple of 8 <= 512");
  if (pk.num_kv_heads <= 0 || pk.num_q_heads % pk.num_kv_heads != 0) {
    return KernelStatus::Fail("query heads not a multiple of kv heads");
  }
  if ((pk.flags & kFlagKFromV) && (pk.rope_pairs < 0 || pk.rope_pairs > kMaxKFromVRopePairs ||
                                   pk.rope_pairs > pk.head_dim / 2)) {
    return KernelStatus::Fail("cannot derive K over " + std::to_string(pk.rope_pairs) +
                              " rotated pairs");
  }
  return KernelStatus::Ok();
}

size_t NoWorkspace(const ProblemKey&, const DeviceInfo&) { return 0; }

cudaError_t GenericLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void*,
                          cudaStream_t stream) {
  return LaunchGenericAttention(*static_cast<const PagedAttentionParams*>(args), stream);
}

// sm_80 through the newest arch: mma.sync / ldmatrix / cp.async exist on all of them. The sm75
// entries run from sm_75 up, the sm70 (m8n8k4) ones from sm_70 up (newer devices prefer the sm80
// entries: selection ranks the newer min arch first among equally specific entries, and forcing one
// runs its PTX under JIT).
constexpr int kSm70 = 70;
constexpr int kSm75 = 75;
constexpr int kSm80 = 80;
constexpr int kAnyNewer = 1000;

ProblemPredicate FlashPredicate(int head_dim, int group_rows, DType kv = DType::kBF16,
                                DType in = DType::kBF16) {
  ProblemPredicate p;
  p.in_type = in;
  p.kv_type = kv;
  p.head_dim = head_dim;
  p.max_group_rows = group_rows;
  p.required_flags = kFlagAligned16;
  return p;
}

ProblemPredicate AnyPredicate(DType kv, DType in) {
  ProblemPredicate p;
  p.in_type = in;
  p.kv_type = kv;
  return p;
}

// The image-block mask (kFlagImageBlocks) is implemented by the CUDA-core kernel
// (generic_attention.cu) and the sm80 prefill kernel (sm80/flash_prefill_sm80.cuh, also built as
// the sm75 entries); the decode kernels, Volta's and Hopper's wgmma prefill do not apply it, so
// selection never gives them a step with image blocks.
ProblemPredicate WithImageBlocks(ProblemPredicate p) {
  p.capabilities |= kFlagImageBlocks;
  return p;
}
ProblemPredicate FlashCaps(ProblemPredicate p, Op op, int min_sm) {
  return op == Op::kAttentionPrefill && min_sm >= kSm75 ? WithImageBlocks(p) : p;
}

#define GANNET_FLASH_ENTRY_FROM(min_sm, var, entry_name, op, name, hd, rows, prio, ...) \
  const KernelEntry var = {                                                             \
      entry_name,                                                                       \
      op,                                                                               \
      min_sm,                                                                           \
      kAnyNewer,                                                                        \
      FlashCaps(FlashPredicate(hd, rows __VA_OPT__(, ) __VA_ARGS__), op, min_sm),       \
      prio,                                                                             \
      FlashCanImplement<FlashConfig##name>,                                             \
      FlashWorkspace<FlashConfig##name>,                                                \
      FlashLaunch<FlashConfig##name, LaunchFlash##name>};
#define GANNET_FLASH_ENTRY(...) GANNET_FLASH_ENTRY_FROM(kSm80, __VA_ARGS__)
#define GANNET_FLASH_ENTRY_SM75(...) GANNET_FLASH_ENTRY_FROM(kSm75, __VA_ARGS__)
#define GANNET_FLASH_ENTRY_SM70(...) GANNET_FLASH_ENTRY_FROM(kSm70, __VA_ARGS__)

// The wide tile streams a few CTAs fastest (batch 1: the split count is tuned for it), and ties
// the narrow one while the grid is one wave of it. Past that the narrow tile's 16 resident warps
// per SM hide the per-tile barriers and softmax the wide tile's 8 cannot (H200, 31B sliding layer,
// 64 sequences at 1500: 274 us vs 326 us, 92% vs 77% of copy; the 31B step 36.0 -> 33.8 ms).
// Problems that would split (few sequences x kv heads: E4B at 64 sequences has 128 CTAs) keep the
// wide tile, which measured faster there (6.68 vs 6.94 ms a step).
// The narrow tile splits by its own heuristic (its four CTAs per SM make other waves than the
// wide tile's two).
struct Hd256DecodePlan {
  bool narrow;
  int splits;
};
Hd256DecodePlan PlanHd256Decode(const ProblemKey& pk, const DeviceInfo& dev) {
  const FlashConfig narrow = FlashConfigDecodeHd256Small();
  const GridFill f = Fill(narrow, pk, dev);
  if (f.ctas * 5 >= f.target * 4) return {true, SplitHeuristic(narrow, pk, dev)};
  return {false, SplitHeuristic(FlashConfigDecodeHd256(), pk, dev)};
}

size_t DecodeHd256Workspace(const ProblemKey& pk, const DeviceInfo& dev) {
  // The narrow tile's workspace has the wide tile's shape.
  return SplitWorkspaceBytes(FlashConfigDecodeHd256(), pk, PlanHd256Decode(pk, dev).splits);
}

cudaError_t DecodeHd256Launch(const void* args, const ProblemKey& pk, const DeviceInfo& dev,
                              void* workspace, cudaStream_t stream) {
  const auto& p = *static_cast<const PagedAttentionParams*>(args);
  if (p.num_splits > 0) return LaunchFlashDecodeHd256(p, p.num_splits, workspace, stream);
  const Hd256DecodePlan plan = PlanHd256Decode(pk, dev);
  return plan.narrow ? LaunchFlashDecodeHd256Small(p, plan.splits, workspace, stream)
                     : LaunchFlashDecodeHd256(p, plan.splits, workspace, stream);
}

}  // namespace

// hd256 decode runs its 32-key tiles (two CTAs per SM) or, when the grid fills the GPU unsplit at
// four 16-key CTAs per SM, the 16-key ones (Hd256DecodeUsesNarrowTile).
const KernelEntry kSm80DecodeHd256Split = {"sm80_hd256_bf16_split",
                                           Op::kAttentionDecode,
                                           kSm80,
                                           kAnyNewer,
                                           FlashPredicate(256, 16),
                                           2,
                                           FlashCanImplement<FlashConfigDecodeHd256>,
                                           DecodeHd256Workspace,
                                           DecodeHd256Launch};
GANNET_FLASH_ENTRY(kSm80DecodeHd256SplitSmall, "sm80_hd256_bf16_split_small", Op::kAttentionDecode,
                   DecodeHd256Small, 256, 16, 1)
GANNET_FLASH_ENTRY(kSm80DecodeHd512Split, "sm80_hd512_bf16_split", Op::kAttentionDecode,
                   DecodeHd512, 512, 16, 2)
GANNET_FLASH_ENTRY(kSm80DecodeHd512SplitDeep, "sm80_hd512_bf16_split_deep", Op::kAttentionDecode,
                   DecodeHd512Deep, 512, 16, 1)
GANNET_FLASH_ENTRY(kSm80PrefillHd256, "sm80_hd256_bf16_prefill", Op::kAttentionPrefill,
                   PrefillHd256, 256, 0, 2)
GANNET_FLASH_ENTRY(kSm80PrefillHd256Small, "sm80_hd256_bf16_prefill_small", Op::kAttentionPrefill,
                   PrefillHd256Small, 256, 0, 1)
GANNET_FLASH_ENTRY(kSm80PrefillHd512, "sm80_hd512_bf16_prefill", Op::kAttentionPrefill,
                   PrefillHd512, 512, 0, 2)
GANNET_FLASH_ENTRY(kSm80PrefillHd512Small, "sm80_hd512_bf16_prefill_small", Op::kAttentionPrefill,
                   PrefillHd512Small, 512, 0, 1)
GANNET_FLASH_ENTRY(kSm80DecodeHd256Fp8, "sm80_hd256_fp8_split", Op::kAttentionDecode,
                   DecodeHd256Fp8, 256, 16, 2, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80DecodeHd512Fp8, "sm80_hd512_fp8_split", Op::kAttentionDecode,
                   DecodeHd512Fp8, 512, 16, 2, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80DecodeHd256Fp8Small, "sm80_hd256_fp8_split_small", Op::kAttentionDecode,
                   DecodeHd256Fp8Small, 256, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80DecodeHd512Fp8Small, "sm80_hd512_fp8_split_small", Op::kAttentionDecode,
                   DecodeHd512Fp8Small, 512, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80PrefillHd256Fp8, "sm80_hd256_fp8_prefill", Op::kAttentionPrefill,
                   PrefillHd256Fp8, 256, 0, 2, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80PrefillHd512Fp8, "sm80_hd512_fp8_prefill", Op::kAttentionPrefill,
                   PrefillHd512Fp8, 512, 0, 2, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80PrefillHd256Fp8Small, "sm80_hd256_fp8_prefill_small", Op::kAttentionPrefill,
                   PrefillHd256Fp8Small, 256, 0, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY(kSm80PrefillHd512Fp8Small, "sm80_hd512_fp8_prefill_small", Op::kAttentionPrefill,
                   PrefillHd512Fp8Small, 512, 0, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM75(kSm75DecodeHd256Split, "sm75_hd256_bf16_split", Op::kAttentionDecode,
                        DecodeHd256Sm75, 256, 16, 1)
GANNET_FLASH_ENTRY_SM75(kSm75DecodeHd512Split, "sm75_hd512_bf16_split", Op::kAttentionDecode,
                        DecodeHd512Sm75, 512, 16, 1)
GANNET_FLASH_ENTRY_SM75(kSm75DecodeHd256Fp8, "sm75_hd256_fp8_split", Op::kAttentionDecode,
                        DecodeHd256Fp8Sm75, 256, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM75(kSm75DecodeHd512Fp8, "sm75_hd512_fp8_split", Op::kAttentionDecode,
                        DecodeHd512Fp8Sm75, 512, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM75(kSm75PrefillHd256, "sm75_hd256_bf16_prefill", Op::kAttentionPrefill,
                        PrefillHd256Sm75, 256, 0, 1)
GANNET_FLASH_ENTRY_SM75(kSm75PrefillHd512, "sm75_hd512_bf16_prefill", Op::kAttentionPrefill,
                        PrefillHd512Sm75, 512, 0, 1)
GANNET_FLASH_ENTRY_SM75(kSm75PrefillHd256Fp8, "sm75_hd256_fp8_prefill", Op::kAttentionPrefill,
                        PrefillHd256Fp8Sm75, 256, 0, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM75(kSm75PrefillHd512Fp8, "sm75_hd512_fp8_prefill", Op::kAttentionPrefill,
                        PrefillHd512Fp8Sm75, 512, 0, 1, DType::kF8E4M3)
// Volta: priority 1, like the sm75 entries (a Turing part prefers those, the newer min arch), and
// above the CUDA-core kernel, which keeps unaligned operands and head dims without a tile.
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd256Split, "sm70_hd256_bf16_split", Op::kAttentionDecode,
                        DecodeHd256Sm70, 256, 16, 1)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd512Split, "sm70_hd512_bf16_split", Op::kAttentionDecode,
                        FlashHd512Sm70, 512, 16, 1)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd256Fp8, "sm70_hd256_fp8_split", Op::kAttentionDecode,
                        DecodeHd256Fp8Sm70, 256, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd512Fp8, "sm70_hd512_fp8_split", Op::kAttentionDecode,
                        FlashHd512Fp8Sm70, 512, 16, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd256, "sm70_hd256_bf16_prefill", Op::kAttentionPrefill,
                        PrefillHd256Sm70, 256, 0, 1)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd512, "sm70_hd512_bf16_prefill", Op::kAttentionPrefill,
                        FlashHd512Sm70, 512, 0, 1)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd256Fp8, "sm70_hd256_fp8_prefill", Op::kAttentionPrefill,
                        PrefillHd256Fp8Sm70, 256, 0, 1, DType::kF8E4M3)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd512Fp8, "sm70_hd512_fp8_prefill", Op::kAttentionPrefill,
                        FlashHd512Fp8Sm70, 512, 0, 1, DType::kF8E4M3)
// The fp16 compute path (q and out f16, PagedAttentionParams::io_f16): the same Volta kernels,
// which compute in fp16 anyway; the only tensor-core entries that take f16 q.
constexpr DType kBf = DType::kBF16, kF8 = DType::kF8E4M3, kF16 = DType::kF16;
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd256SplitF16, "sm70_hd256_bf16_split_f16io",
                        Op::kAttentionDecode, DecodeHd256Sm70, 256, 16, 1, kBf, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd512SplitF16, "sm70_hd512_bf16_split_f16io",
                        Op::kAttentionDecode, FlashHd512Sm70, 512, 16, 1, kBf, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd256Fp8F16, "sm70_hd256_fp8_split_f16io", Op::kAttentionDecode,
                        DecodeHd256Fp8Sm70, 256, 16, 1, kF8, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70DecodeHd512Fp8F16, "sm70_hd512_fp8_split_f16io", Op::kAttentionDecode,
                        FlashHd512Fp8Sm70, 512, 16, 1, kF8, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd256F16, "sm70_hd256_bf16_prefill_f16io",
                        Op::kAttentionPrefill, PrefillHd256Sm70, 256, 0, 1, kBf, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd512F16, "sm70_hd512_bf16_prefill_f16io",
                        Op::kAttentionPrefill, FlashHd512Sm70, 512, 0, 1, kBf, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd256Fp8F16, "sm70_hd256_fp8_prefill_f16io",
                        Op::kAttentionPrefill, PrefillHd256Fp8Sm70, 256, 0, 1, kF8, kF16)
GANNET_FLASH_ENTRY_SM70(kSm70PrefillHd512Fp8F16, "sm70_hd512_fp8_prefill_f16io",
                        Op::kAttentionPrefill, FlashHd512Fp8Sm70, 512, 0, 1, kF8, kF16)

#if GANNET_HAVE_SM90A
// wgmma is sm_90a's alone (sm_100 has none): the effective arch must be sm_90 exactly. The hd256
// kernel beats the sm80 one (priority 3 over 2: 25-26% of the GEMM rate against 16-17%); the
// hd512 one does not yet (14% against 19%, docs/results-log/arch.md), so it ranks below it and runs
// when forced.
const KernelEntry kSm90PrefillHd256 = {
    "sm90_hd256_bf16_prefill",
    Op::kAttentionPrefill,
    90,
    90,
    FlashPredicate(256, 0),
    3,
    FlashCanImplement<FlashConfigPrefillHd256Sm90>,
    FlashWorkspace<FlashConfigPrefillHd256Sm90>,
    FlashLaunch<FlashConfigPrefillHd256Sm90, LaunchFlashPrefillHd256Sm90>};
const KernelEntry kSm90PrefillHd512 = {
    "sm90_hd512_bf16_prefill",
    Op::kAttentionPrefill,
    90,
    90,
    FlashPredicate(512, 0),
    1,
    FlashCanImplement<FlashConfigPrefillHd512Sm90>,
    FlashWorkspace<FlashConfigPrefillHd512Sm90>,
    FlashLaunch<FlashConfigPrefillHd512Sm90, LaunchFlashPrefillHd512Sm90>};
#endif

const KernelEntry kSm70GenericDecode = {"sm70_generic_bf16_decode",
                                        Op::kAttentionDecode,
                                        70,
                                        kAnyNewer,
                                        WithImageBlocks(ProblemPredicate{}),
                                        0,
                                        GenericCanImplement,
                                        NoWorkspace,
                                        GenericLaunch};
const KernelEntry kSm70GenericPrefill = {"sm70_generic_bf16_prefill",
                                         Op::kAttentionPrefill,
                                         70,
                                         kAnyNewer,
                                         WithImageBlocks(ProblemPredicate{}),
                                         0,
                                         GenericCanImplement,
                                         NoWorkspace,
                                         GenericLaunch};
const KernelEntry kSm70GenericFp8Decode = {
    "sm70_generic_fp8_decode",
    Op::kAttentionDecode,
    70,
    kAnyNewer,
    WithImageBlocks(AnyPredicate(DType::kF8E4M3, DType::kBF16)),
    0,
    GenericCanImplement,
    NoWorkspace,
    GenericLaunch};
const KernelEntry kSm70GenericFp8Prefill = {
    "sm70_generic_fp8_prefill",
    Op::kAttentionPrefill,
    70,
    kAnyNewer,
    WithImageBlocks(AnyPredicate(DType::kF8E4M3, DType::kBF16)),
    0,
    GenericCanImplement,
    NoWorkspace,
    GenericLaunch};
const KernelEntry kSm70GenericDecodeF16 = {"sm70_generic_bf16_decode_f16io",
                                           Op::kAttentionDecode,
                                           70,
                                           kAnyNewer,
                                           WithImageBlocks(AnyPredicate(kBf, kF16)),
                                           0,
                                           GenericCanImplement,
                                           NoWorkspace,
                                           GenericLaunch};
const KernelEntry kSm70GenericPrefillF16 = {"sm70_generic_bf16_prefill_f16io",
                                            Op::kAttentionPrefill,
                                            70,
                                            kAnyNewer,
                                            WithImageBlocks(AnyPredicate(kBf, kF16)),
                                            0,
                                            GenericCanImplement,
                                            NoWorkspace,
                                            GenericLaunch};
const KernelEntry kSm70GenericFp8DecodeF16 = {"sm70_generic_fp8_decode_f16io",
                                              Op::kAttentionDecode,
                                              70,
                                              kAnyNewer,
                                              WithImageBlocks(AnyPredicate(kF8, kF16)),
                                              0,
                                              GenericCanImplement,
                                              NoWorkspace,
                                              GenericLaunch};
const KernelEntry kSm70GenericFp8PrefillF16 = {"sm70_generic_fp8_prefill_f16io",
                                               Op::kAttentionPrefill,
                                               70,
                                               kAnyNewer,
                                               WithImageBlocks(AnyPredicate(kF8, kF16)),
                                               0,
                                               GenericCanImplement,
                                               NoWorkspace,
                                               GenericLaunch};

namespace {

FlashConfig (*FlashConfigOf(const KernelEntry& entry))() {
  struct Known {
    const KernelEntry* entry;
    FlashConfig (*config)();
  };
  static const Known known[] = {
    {&kSm80DecodeHd256Split, FlashConfigDecodeHd256},
    {&kSm80DecodeHd256SplitSmall, FlashConfigDecodeHd256Small},
    {&kSm80DecodeHd512Split, FlashConfigDecodeHd512},
    {&kSm80DecodeHd512SplitDeep, FlashConfigDecodeHd512Deep},
    {&kSm80PrefillHd256, FlashConfigPrefillHd256},
    {&kSm80PrefillHd256Small, FlashConfigPrefillHd256Small},
    {&kSm80PrefillHd512, FlashConfigPrefillHd512},
    {&kSm80PrefillHd512Small, FlashConfigPrefillHd512Small},
    {&kSm80DecodeHd256Fp8, FlashConfigDecodeHd256Fp8},
    {&kSm80DecodeHd512Fp8, FlashConfigDecodeHd512Fp8},
    {&kSm80DecodeHd256Fp8Small, FlashConfigDecodeHd256Fp8Small},
    {&kSm80DecodeHd512Fp8Small, FlashConfigDecodeHd512Fp8Small},
    {&kSm80PrefillHd256Fp8, FlashConfigPrefillHd256Fp8},
    {&kSm80PrefillHd512Fp8, FlashConfigPrefillHd512Fp8},
    {&kSm80PrefillHd256Fp8Small, FlashConfigPrefillHd256Fp8Small},
    {&kSm80PrefillHd512Fp8Small, FlashConfigPrefillHd512Fp8Small},
    {&kSm75DecodeHd256Split, FlashConfigDecodeHd256Sm75},
    {&kSm75DecodeHd512Split, FlashConfigDecodeHd512Sm75},
    {&kSm75DecodeHd256Fp8, FlashConfigDecodeHd256Fp8Sm75},
    {&kSm75DecodeHd512Fp8, FlashConfigDecodeHd512Fp8Sm75},
    {&kSm75PrefillHd256, FlashConfigPrefillHd256Sm75},
    {&kSm75PrefillHd512, FlashConfigPrefillHd512Sm75},
    {&kSm75PrefillHd256Fp8, FlashConfigPrefillHd256Fp8Sm75},
    {&kSm75PrefillHd512Fp8, FlashConfigPrefillHd512Fp8Sm75},
    {&kSm70DecodeHd256Split, FlashConfigDecodeHd256Sm70},
    {&kSm70DecodeHd512Split, FlashConfigFlashHd512Sm70},
    {&kSm70DecodeHd256Fp8, FlashConfigDecodeHd256Fp8Sm70},
    {&kSm70DecodeHd512Fp8, FlashConfigFlashHd512Fp8Sm70},
    {&kSm70PrefillHd256, FlashConfigPrefillHd256Sm70},
    {&kSm70PrefillHd512, FlashConfigFlashHd512Sm70},
    {&kSm70PrefillHd256Fp8, FlashConfigPrefillHd256Fp8Sm70},
    {&kSm70PrefillHd512Fp8, FlashConfigFlashHd512Fp8Sm70},
    {&kSm70DecodeHd256SplitF16, FlashConfigDecodeHd256Sm70},
    {&kSm70DecodeHd512SplitF16, FlashConfigFlashHd512Sm70},
    {&kSm70DecodeHd256Fp8F16, FlashConfigDecodeHd256Fp8Sm70},
    {&kSm70DecodeHd512Fp8F16, FlashConfigFlashHd512Fp8Sm70},
    {&kSm70PrefillHd256F16, FlashConfigPrefillHd256Sm70},
    {&kSm70PrefillHd512F16, FlashConfigFlashHd512Sm70},
    {&kSm70PrefillHd256Fp8F16, FlashConfigPrefillHd256Fp8Sm70},
    {&kSm70PrefillHd512Fp8F16, FlashConfigFlashHd512Fp8Sm70},
#if GANNET_HAVE_SM90A
    {&kSm90PrefillHd256, FlashConfigPrefillHd256Sm90},
    {&kSm90PrefillHd512, FlashConfigPrefillHd512Sm90},
#endif
  };
  for (const Known& k : known) {
    if (k.entry == &entry) return k.config;
  }
  return nullptr;
}

}  // namespace

bool Hd256DecodeUsesNarrowTile(const ProblemKey& problem, const DeviceInfo& device) {
  return PlanHd256Decode(problem, device).narrow;
}

bool IsFlashEntry(const KernelEntry& entry) { return FlashConfigOf(entry) != nullptr; }

int FlashAttentionSplits(const KernelEntry& entry, const ProblemKey& pk, const DeviceInfo& dev) {
  if (&entry == &kSm80DecodeHd256Split) return PlanHd256Decode(pk, dev).splits;
  auto config = FlashConfigOf(entry);
  return config ? SplitHeuristic(config(), pk, dev) : 0;
}

size_t FlashAttentionWorkspace(const KernelEntry& entry, const ProblemKey& pk, int num_splits) {
  auto config = FlashConfigOf(entry);
  if (config == nullptr) return 0;
  return SplitWorkspaceBytes(config(), pk, num_splits);
}

ProblemKey AttentionProblem(Op op, const PagedAttentionParams& p) {
  ProblemKey pk;
  pk.op = op;
  pk.head_dim = p.head_dim;
  pk.page_size = p.page_size;
  pk.num_q_heads = p.num_q_heads;
  pk.num_kv_heads = p.num_kv_heads;
  pk.window = p.window;
  pk.max_query_len = p.max_query_len;
  pk.num_seqs = p.num_seqs;
  pk.num_tokens = p.num_tokens;
  pk.max_seq_len = p.max_seq_len;
  pk.kv_type = p.kv_fp8 ? DType::kF8E4M3 : DType::kBF16;
  pk.in_type = pk.out_type = p.io_f16 ? DType::kF16 : DType::kBF16;
  auto aligned = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (p.k_from_v) {
    pk.flags |= kFlagKFromV;
    pk.rope_pairs = p.rope_pairs;
  }
  if (p.image_block != nullptr) pk.flags |= kFlagImageBlocks;
  if (aligned(p.q) && aligned(p.out) && aligned(p.k_cache) && aligned(p.v_cache) &&
      p.q_stride % 8 == 0 && p.out_stride % 8 == 0 && p.head_dim % 8 == 0) {
    pk.flags |= kFlagAligned16;
  }
  return pk;
}

}  // namespace gannet::kernels
