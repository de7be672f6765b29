// The hand-written list of every kernel entry compiled into this binary (explicit registration,
// no static constructors: docs/kernels-by-arch.md, "The kernel registry"). Order matters only as
// a tie-break after arch and specificity (see registry.h); keep each op's entries together, best
// first.
#include <string_view>

#include "kernels/attention/attention_entries.h"
#include "kernels/gemm/gemm_entries.h"
#include "kernels/moe/moe_entries.h"
#include "kernels/quant/int4_entries.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

std::span<const KernelEntry* const> AllEntries() {
  static const KernelEntry* const kEntries[] = {
    // attention.decode
    &kSm80DecodeHd512Split,
    &kSm80DecodeHd512SplitDeep,
    &kSm80DecodeHd256Split,
    &kSm80DecodeHd256SplitSmall,
    &kSm75DecodeHd512Split,
    &kSm75DecodeHd256Split,
    &kSm70DecodeHd512Split,
    &kSm70DecodeHd256Split,
    &kSm70GenericDecode,
    &kSm80DecodeHd512Fp8,
    &kSm80DecodeHd512Fp8Small,
    &kSm80DecodeHd256Fp8,
    &kSm80DecodeHd256Fp8Small,
    &kSm75DecodeHd512Fp8,
    &kSm75DecodeHd256Fp8,
    &kSm70DecodeHd512Fp8,
    &kSm70DecodeHd256Fp8,
    &kSm70GenericFp8Decode,
    &kSm70DecodeHd512SplitF16,
    &kSm70DecodeHd256SplitF16,
    &kSm70GenericDecodeF16,
    &kSm70DecodeHd512Fp8F16,
    &kSm70DecodeHd256Fp8F16,
    &kSm70GenericFp8DecodeF16,
  // attention.prefill
#if GANNET_HAVE_SM90A
    &kSm90PrefillHd512,
    &kSm90PrefillHd256,
#endif
    &kSm80PrefillHd512,
    &kSm80PrefillHd512Small,
    &kSm80PrefillHd256,
    &kSm80PrefillHd256Small,
    &kSm75PrefillHd512,
    &kSm75PrefillHd256,
    &kSm70PrefillHd512,
    &kSm70PrefillHd256,
    &kSm70GenericPrefill,
    &kSm80PrefillHd512Fp8,
    &kSm80PrefillHd512Fp8Small,
    &kSm80PrefillHd256Fp8,
    &kSm80PrefillHd256Fp8Small,
    &kSm75PrefillHd512Fp8,
    &kSm75PrefillHd256Fp8,
    &kSm70PrefillHd512Fp8,
    &kSm70PrefillHd256Fp8,
    &kSm70GenericFp8Prefill,
    &kSm70PrefillHd512F16,
    &kSm70PrefillHd256F16,
    &kSm70GenericPrefillF16,
    &kSm70PrefillHd512Fp8F16,
    &kSm70PrefillHd256Fp8F16,
    &kSm70GenericFp8PrefillF16,
    // linear.gemv
    &kSm70GemvBf16,
    &kSm70GemvF32In,
    &kSm70GemvF16,
    &kSm70GemvF32InF16,
    // moe.experts
    &kSm80MoeGroupedGemm,
    &kSm75MoeGroupedGemm,
    &kSm70MoePairGemv,
    &kSm70MoePairGemvAnyM,
    &kSm70MoePairGemvF16,
    &kSm70MoePairGemvAnyMF16,
    // linear.int4
    &kSm80Int4GemvBf16I4,
    &kSm80Int4GemvBf16U4,
    &kSm80Int4GemvF16I4,
    &kSm80Int4GemvF16U4,
    &kSm80Int4GemmBf16I4,
    &kSm80Int4GemmBf16U4,
    &kSm80Int4GemmF16I4,
    &kSm80Int4GemmF16U4,
    &kSm70Int4SimtBf16I4,
    &kSm70Int4SimtBf16U4,
    &kSm70Int4SimtF16I4,
    &kSm70Int4SimtF16U4,
  };
  return kEntries;
}

const KernelEntry* FindEntry(std::string_view name) {
  for (const KernelEntry* e : AllEntries()) {
    if (name == e->name) return e;
  }
  return nullptr;
}

}  // namespace gannet::kernels
