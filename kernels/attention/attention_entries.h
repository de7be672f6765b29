// The attention entries of the kernel registry (host side: predicates, resource checks,
// workspace sizes and split-KV heuristics around the launchers of paged_attention.h).
// `args` of their launch functions is a PagedAttentionParams.
#pragma once

#include "kernels/attention/paged_attention.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm80DecodeHd256Split;
extern const KernelEntry kSm80DecodeHd256SplitSmall;
extern const KernelEntry kSm80DecodeHd512Split;
extern const KernelEntry kSm80DecodeHd512SplitDeep;
extern const KernelEntry kSm80PrefillHd256;
extern const KernelEntry kSm80PrefillHd256Small;
extern const KernelEntry kSm80PrefillHd512;
extern const KernelEntry kSm80PrefillHd512Small;
extern const KernelEntry kSm70GenericDecode;
extern const KernelEntry kSm70GenericPrefill;
// FP8 KV cache (ProblemKey::kv_type kF8E4M3).
extern const KernelEntry kSm80DecodeHd256Fp8;
extern const KernelEntry kSm80DecodeHd512Fp8;
extern const KernelEntry kSm80DecodeHd256Fp8Small;
extern const KernelEntry kSm80DecodeHd512Fp8Small;
extern const KernelEntry kSm80PrefillHd256Fp8;
extern const KernelEntry kSm80PrefillHd512Fp8;
extern const KernelEntry kSm80PrefillHd256Fp8Small;
extern const KernelEntry kSm80PrefillHd512Fp8Small;
extern const KernelEntry kSm70GenericFp8Decode;
extern const KernelEntry kSm70GenericFp8Prefill;
// sm_75 (Turing) tensor-core entries: the flash kernels in 64 KB, fp16 MMAs, synchronous copies.
extern const KernelEntry kSm75DecodeHd256Split;
extern const KernelEntry kSm75DecodeHd512Split;
extern const KernelEntry kSm75DecodeHd256Fp8;
extern const KernelEntry kSm75DecodeHd512Fp8;
extern const KernelEntry kSm75PrefillHd256;
extern const KernelEntry kSm75PrefillHd512;
extern const KernelEntry kSm75PrefillHd256Fp8;
extern const KernelEntry kSm75PrefillHd512Fp8;

// sm_70 (Volta) tensor-core entries: m8n8k4 fp16 MMAs in 96 KB (attention/sm70/).
extern const KernelEntry kSm70DecodeHd256Split;
extern const KernelEntry kSm70DecodeHd512Split;
extern const KernelEntry kSm70DecodeHd256Fp8;
extern const KernelEntry kSm70DecodeHd512Fp8;
extern const KernelEntry kSm70PrefillHd256;
extern const KernelEntry kSm70PrefillHd512;
extern const KernelEntry kSm70PrefillHd256Fp8;
extern const KernelEntry kSm70PrefillHd512Fp8;
// The fp16 compute path's entries (q and out f16): the Volta kernels and the CUDA-core one.
extern const KernelEntry kSm70DecodeHd256SplitF16;
extern const KernelEntry kSm70DecodeHd512SplitF16;
extern const KernelEntry kSm70DecodeHd256Fp8F16;
extern const KernelEntry kSm70DecodeHd512Fp8F16;
extern const KernelEntry kSm70PrefillHd256F16;
extern const KernelEntry kSm70PrefillHd512F16;
extern const KernelEntry kSm70PrefillHd256Fp8F16;
extern const KernelEntry kSm70PrefillHd512Fp8F16;
extern const KernelEntry kSm70GenericDecodeF16;
extern const KernelEntry kSm70GenericPrefillF16;
extern const KernelEntry kSm70GenericFp8DecodeF16;
extern const KernelEntry kSm70GenericFp8PrefillF16;

#if GANNET_HAVE_SM90A
// Hopper (sm_90a) wgmma entries.
extern const KernelEntry kSm90PrefillHd256;
extern const KernelEntry kSm90PrefillHd512;
#endif

// Whether `entry` is a flash (tensor-core, split-KV) entry: sm80, sm75, sm70 or sm90.
bool IsFlashEntry(const KernelEntry& entry);

// Whether kSm80DecodeHd256Split runs `problem` (with the heuristic's split count) on its 16-key
// tiles rather than its 32-key ones: when the unsplit grid fills the GPU at four CTAs per SM.
bool Hd256DecodeUsesNarrowTile(const ProblemKey& problem, const DeviceInfo& device);

// Split-KV count the flash entry `entry` uses for `problem` (1 = no split); 0 if `entry` is not a
// flash entry. The count depends only on the problem's host-side sizes, so a graph captured for
// one step shape keeps it.
int FlashAttentionSplits(const KernelEntry& entry, const ProblemKey& problem,
                         const DeviceInfo& device);

// Workspace the flash entry `entry` needs when launched with `num_splits` splits (a forced count
// in PagedAttentionParams::num_splits); 0 for other entries.
size_t FlashAttentionWorkspace(const KernelEntry& entry, const ProblemKey& problem, int num_splits);

// The attention problem key of a parameter block (op chosen by the caller).
ProblemKey AttentionProblem(Op op, const PagedAttentionParams& p);

}  // namespace gannet::kernels
