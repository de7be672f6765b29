#include "kernels/gemm/gemm_entries.h"

#include <cstdint>

namespace gannet::kernels {
namespace {

KernelStatus GemvCanImplement(const ProblemKey& pk, const DeviceInfo&) {
  if (pk.num_tokens < 1) return KernelStatus::Fail("M must be >= 1");
  if (pk.k % 8 != 0) return KernelStatus::Fail("K must be a multiple of 8");
  return KernelStatus::Ok();
}

size_t GemvWorkspace(const ProblemKey&, const DeviceInfo&) { return 0; }

cudaError_t GemvLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void*,
                       cudaStream_t stream) {
  return LaunchGemv(*static_cast<const GemvParams*>(args), stream);
}

// in: x's type; w: the weight's (the key's kv_type).
ProblemPredicate GemvPredicate(DType in, DType w = DType::kBF16) {
  ProblemPredicate p;
  p.in_type = in;
  p.kv_type = w;
  p.max_m = kGemvMaxM;
  p.required_flags = kFlagAligned16;
  return p;
}

}  // namespace

const KernelEntry kSm70GemvBf16 = {
    "sm70_gemv_bf16_m8", Op::kGemv,     70,        1000, GemvPredicate(DType::kBF16), 0,
    GemvCanImplement,    GemvWorkspace, GemvLaunch};
const KernelEntry kSm70GemvF32In = {
    "sm70_gemv_f32in_m8", Op::kGemv,     70,        1000, GemvPredicate(DType::kF32), 0,
    GemvCanImplement,     GemvWorkspace, GemvLaunch};
const KernelEntry kSm70GemvF16 = {
    "sm70_gemv_f16_m8", Op::kGemv,     70,        1000, GemvPredicate(DType::kF16, DType::kF16), 0,
    GemvCanImplement,   GemvWorkspace, GemvLaunch};
const KernelEntry kSm70GemvF32InF16 = {"sm70_gemv_f32in_f16_m8",
                                       Op::kGemv,
                                       70,
                                       1000,
                                       GemvPredicate(DType::kF32, DType::kF16),
                                       0,
                                       GemvCanImplement,
                                       GemvWorkspace,
                                       GemvLaunch};

ProblemKey GemvProblem(const GemvParams& p) {
  ProblemKey pk;
  pk.op = Op::kGemv;
  pk.in_type = p.x_type;
  pk.kv_type = p.w_type;
  pk.out_type = p.out_type;
  pk.num_tokens = p.m;
  pk.n = p.n;
  pk.k = p.k;
  auto aligned = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  if (aligned(p.x) && aligned(p.w) && p.k % 8 == 0 && p.ldx % 8 == 0) pk.flags |= kFlagAligned16;
  return pk;
}

}  // namespace gannet::kernels
