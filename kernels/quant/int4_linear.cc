#include "kernels/quant/int4_linear.h"

#include <algorithm>

#include "kernels/quant/int4_launchers.h"

namespace gannet::kernels {
namespace {

bool Aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

}  // namespace

const char* Int4LinearError(Int4Kernel kernel, const Int4LinearParams& p) {
  const Int4Layout& l = p.layout;
  if (l.n < 1 || l.n > (int64_t{1} << 30) ||
      l.n_pad != (l.n + kInt4RowBlock - 1) / kInt4RowBlock * kInt4RowBlock) {
    return "int4 layout: n out of range or n_pad not n rounded up to 16";
  }
  if (l.k < kInt4TileK || l.k % kInt4TileK != 0 || l.k > (int64_t{1} << 30)) {
    return "int4 layout: k must be a positive multiple of 64";
  }
  if (!(l.group == 32 || l.group == 64 || l.group == 128 || l.group == l.k) || l.k % l.group != 0) {
    return "int4 layout: group must be 32, 64, 128 or k, and divide k";
  }
  if (l.scale != DType::kBF16 && l.scale != DType::kF16 && l.scale != DType::kF32) {
    return "int4 layout: scales must be bf16, f16 or f32";
  }
  if (p.x_type != DType::kBF16 && p.x_type != DType::kF16)
    return "int4 linear: x must be bf16 or f16";
  if (p.out_type != p.x_type && p.out_type != DType::kF32) {
    return "int4 linear: out must be x's type or f32";
  }
  if (p.m < 1) return "int4 linear: m must be >= 1";
  if (kernel == Int4Kernel::kMmaGemv && p.m > kInt4GemvMaxM) return "int4 GEMV: m must be <= 32";
  if (p.x == nullptr || p.out == nullptr || p.w == nullptr || p.scales == nullptr ||
      (l.zero_point && p.zero_points == nullptr)) {
    return "int4 linear: missing x, out, weights, scales or zero points";
  }
  if (!Aligned(p.w, 16)) return "int4 linear: weights must be 16-byte aligned";
  if (!Aligned(p.scales, l.scale == DType::kF32 ? 8 : 4)) return "int4 linear: scales misaligned";
  if (l.zero_point && !Aligned(p.zero_points, 2)) return "int4 linear: zero points misaligned";
  if (p.ldx < l.k || p.ldo < l.n) return "int4 linear: ldx < k or ldo < n";
  if (kernel == Int4Kernel::kMmaGemm) {
    if (!Aligned(p.x, 16) || p.ldx % 8 != 0)
      return "int4 GEMM: x must be 16-byte aligned, ldx % 8 == 0";
  } else if (!Aligned(p.x, 4) || p.ldx % 2 != 0) {
    return "int4 linear: x must be 4-byte aligned, ldx even";
  }
  if (!Aligned(p.out, p.out_type == DType::kF32 ? 4 : 2)) return "int4 linear: out misaligned";
  if (kernel == Int4Kernel::kMmaGemv) {
    if (p.splits < 1 || p.splits > l.k_tiles()) return "int4 GEMV: splits must be in [1, k / 64]";
    if (p.splits > 1 && (p.workspace == nullptr || !Aligned(p.workspace, 4))) {
      return "int4 GEMV: split over K needs a workspace";
    }
  }
  return nullptr;
}

cudaError_t LaunchInt4Linear(Int4Kernel kernel, const Int4LinearParams& p, cudaStream_t stream) {
  if (Int4LinearError(kernel, p) != nullptr) return cudaErrorInvalidValue;
  switch (kernel) {
    case Int4Kernel::kMmaGemv:
      return int4::LaunchMmaGemv(p, stream);
    case Int4Kernel::kMmaGemm:
      return int4::LaunchMmaGemm(p, stream);
    case Int4Kernel::kSimt:
      return int4::LaunchSimt(p, stream);
  }
  return cudaErrorInvalidValue;
}

int Int4GemvSplits(const Int4Layout& l, int num_sms) {
  const int64_t blocks = std::max<int64_t>(1, l.row_blocks());
  const int64_t want = (2 * static_cast<int64_t>(std::max(num_sms, 1)) + blocks - 1) / blocks;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(8, l.k_tiles() / 8));
  return static_cast<int>(std::clamp<int64_t>(want, 1, most));
}

size_t Int4GemvWorkspaceBytes(int m, int64_t n_pad, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(m) *
                          static_cast<size_t>(n_pad) * sizeof(float)
                    : 0;
}

}  // namespace gannet::kernels
