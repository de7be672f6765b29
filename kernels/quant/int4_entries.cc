#include "kernels/quant/int4_entries.h"

#include <cstdint>

namespace gannet::kernels {
namespace {

KernelStatus Int4CanImplement(const ProblemKey& pk, const DeviceInfo&) {
  if (pk.num_tokens < 1) return KernelStatus::Fail("M must be >= 1");
  if (pk.n < 1) return KernelStatus::Fail("N must be >= 1");
  if (pk.k < kInt4TileK || pk.k % kInt4TileK != 0)
    return KernelStatus::Fail("K must be a multiple of 64");
  const int g = pk.group_size;
  if (!(g == 32 || g == 64 || g == 128 || g == pk.k) || pk.k % g != 0) {
    return KernelStatus::Fail("group size must be 32, 64, 128 or K");
  }
  if (pk.scale_type != DType::kBF16 && pk.scale_type != DType::kF16 &&
      pk.scale_type != DType::kF32) {
    return KernelStatus::Fail("scales must be bf16, f16 or f32");
  }
  if (pk.out_type != pk.in_type && pk.out_type != DType::kF32) {
    return KernelStatus::Fail("out must be x's type or f32");
  }
  return KernelStatus::Ok();
}

Int4Layout LayoutOfKey(const ProblemKey& pk) {
  Int4Layout l;
  l.n = pk.n;
  l.k = pk.k;
  l.n_pad = (static_cast<int64_t>(pk.n) + kInt4RowBlock - 1) / kInt4RowBlock * kInt4RowBlock;
  l.group = pk.group_size;
  l.zero_point = pk.kv_type == DType::kU4;
  l.scale = pk.scale_type;
  return l;
}

size_t NoWorkspace(const ProblemKey&, const DeviceInfo&) { return 0; }

size_t GemvWorkspace(const ProblemKey& pk, const DeviceInfo& dev) {
  const Int4Layout l = LayoutOfKey(pk);
  return Int4GemvWorkspaceBytes(pk.num_tokens, l.n_pad, Int4GemvSplits(l, dev.num_sms));
}

cudaError_t GemvLaunch(const void* args, const ProblemKey&, const DeviceInfo& dev, void* ws,
                       cudaStream_t stream) {
  Int4LinearParams p = *static_cast<const Int4LinearParams*>(args);
  p.splits = Int4GemvSplits(p.layout, dev.num_sms);
  p.workspace = ws;
  return LaunchInt4Linear(Int4Kernel::kMmaGemv, p, stream);
}
cudaError_t GemmLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void*,
                       cudaStream_t stream) {
  return LaunchInt4Linear(Int4Kernel::kMmaGemm, *static_cast<const Int4LinearParams*>(args),
                          stream);
}
cudaError_t SimtLaunch(const void* args, const ProblemKey&, const DeviceInfo&, void*,
                       cudaStream_t stream) {
  return LaunchInt4Linear(Int4Kernel::kSimt, *static_cast<const Int4LinearParams*>(args), stream);
}

ProblemPredicate Int4Predicate(DType x, DType w, int max_m, uint32_t flags) {
  ProblemPredicate p;
  p.in_type = x;
  p.kv_type = w;
  p.max_m = max_m;
  p.required_flags = flags;
  return p;
}

#define GANNET_INT4_ENTRY(var, name, min_sm, x, w, max_m, flags, ws, launch)                  \
  const KernelEntry var = {                                                                   \
      name, Op::kLinearInt4,  min_sm, 1000,  Int4Predicate(DType::x, DType::w, max_m, flags), \
      0,    Int4CanImplement, ws,     launch}

}  // namespace

GANNET_INT4_ENTRY(kSm80Int4GemvBf16I4, "sm80_int4_gemv_bf16_i4", 80, kBF16, kI4, kInt4GemvMaxM, 0,
                  GemvWorkspace, GemvLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemvBf16U4, "sm80_int4_gemv_bf16_u4", 80, kBF16, kU4, kInt4GemvMaxM, 0,
                  GemvWorkspace, GemvLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemvF16I4, "sm80_int4_gemv_f16_i4", 80, kF16, kI4, kInt4GemvMaxM, 0,
                  GemvWorkspace, GemvLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemvF16U4, "sm80_int4_gemv_f16_u4", 80, kF16, kU4, kInt4GemvMaxM, 0,
                  GemvWorkspace, GemvLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemmBf16I4, "sm80_int4_gemm_bf16_i4", 80, kBF16, kI4, 0, kFlagAligned16,
                  NoWorkspace, GemmLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemmBf16U4, "sm80_int4_gemm_bf16_u4", 80, kBF16, kU4, 0, kFlagAligned16,
                  NoWorkspace, GemmLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemmF16I4, "sm80_int4_gemm_f16_i4", 80, kF16, kI4, 0, kFlagAligned16,
                  NoWorkspace, GemmLaunch);
GANNET_INT4_ENTRY(kSm80Int4GemmF16U4, "sm80_int4_gemm_f16_u4", 80, kF16, kU4, 0, kFlagAligned16,
                  NoWorkspace, GemmLaunch);
GANNET_INT4_ENTRY(kSm70Int4SimtBf16I4, "sm70_int4_simt_bf16_i4", 70, kBF16, kI4, 0, 0, NoWorkspace,
                  SimtLaunch);
GANNET_INT4_ENTRY(kSm70Int4SimtBf16U4, "sm70_int4_simt_bf16_u4", 70, kBF16, kU4, 0, 0, NoWorkspace,
                  SimtLaunch);
GANNET_INT4_ENTRY(kSm70Int4SimtF16I4, "sm70_int4_simt_f16_i4", 70, kF16, kI4, 0, 0, NoWorkspace,
                  SimtLaunch);
GANNET_INT4_ENTRY(kSm70Int4SimtF16U4, "sm70_int4_simt_f16_u4", 70, kF16, kU4, 0, 0, NoWorkspace,
                  SimtLaunch);

ProblemKey Int4Problem(const Int4LinearParams& p) {
  ProblemKey pk;
  pk.op = Op::kLinearInt4;
  pk.in_type = p.x_type;
  pk.kv_type = p.layout.zero_point ? DType::kU4 : DType::kI4;
  pk.out_type = p.out_type;
  pk.num_tokens = p.m;
  pk.n = static_cast<int>(p.layout.n);
  pk.k = static_cast<int>(p.layout.k);
  pk.group_size = p.layout.group;
  pk.scale_type = p.layout.scale;
  if ((reinterpret_cast<uintptr_t>(p.x) & 15) == 0 && p.ldx % 8 == 0) pk.flags |= kFlagAligned16;
  return pk;
}

}  // namespace gannet::kernels
