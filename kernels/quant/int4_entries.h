// The W4A16 int4 entries of the kernel registry (op linear.int4); `args` of their launch is an
// Int4LinearParams (its splits and workspace are set by the GEMV entry from the device and the
// registry's workspace). Per x type (bf16 / f16) and weight element (kI4 / kU4 + zero points):
//   sm80_int4_gemv_*  M <= 32, tensor-core GEMV (the decode path; the most specific for M <= 32)
//   sm80_int4_gemm_*  any M, tensor-core GEMM (prefill)
//   sm70_int4_simt_*  any M, CUDA cores in f32 (Volta, and anything the others refuse)
#pragma once

#include "kernels/quant/int4_linear.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm80Int4GemvBf16I4;
extern const KernelEntry kSm80Int4GemvBf16U4;
extern const KernelEntry kSm80Int4GemvF16I4;
extern const KernelEntry kSm80Int4GemvF16U4;
extern const KernelEntry kSm80Int4GemmBf16I4;
extern const KernelEntry kSm80Int4GemmBf16U4;
extern const KernelEntry kSm80Int4GemmF16I4;
extern const KernelEntry kSm80Int4GemmF16U4;
extern const KernelEntry kSm70Int4SimtBf16I4;
extern const KernelEntry kSm70Int4SimtBf16U4;
extern const KernelEntry kSm70Int4SimtF16I4;
extern const KernelEntry kSm70Int4SimtF16U4;

// The registry's key of `p` (kv_type: kU4 with zero points, else kI4; kFlagAligned16 when x is
// 16-byte aligned with ldx % 8 == 0, which the GEMM entries require).
ProblemKey Int4Problem(const Int4LinearParams& p);

}  // namespace gannet::kernels
