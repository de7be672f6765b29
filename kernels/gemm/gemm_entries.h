// The small-M GEMV entries of the kernel registry; `args` of their launch is a GemvParams.
#pragma once

#include "kernels/gemm/gemv.h"
#include "kernels/registry/registry.h"

namespace gannet::kernels {

extern const KernelEntry kSm70GemvBf16;      // x bf16
extern const KernelEntry kSm70GemvF32In;     // x f32 (the residual stream feeding PLE projections)
extern const KernelEntry kSm70GemvF16;       // fp16 compute path: f16 weights, x f16
extern const KernelEntry kSm70GemvF32InF16;  // f16 weights, x f32

ProblemKey GemvProblem(const GemvParams& p);

}  // namespace gannet::kernels
