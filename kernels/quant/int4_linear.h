// W4A16 int4 linear layers on the device: out[M, N] = x[M, K] w[N, K]^T with w in the device
// layout of int4_layout.h (made by Int4Repack). Host-callable declarations only; the kernels and
// why they look as they do: docs/int4-kernels.md.
//   - Int4 MMA GEMV (sm_80+, M <= 32): one warp per (16-row block, k slice); each lane's 16-byte
//     load is its A fragments of four k16 steps, dequantized in registers (or + sub), M padded to
//     the MMA's 8, 16 or 32 columns (1, 2 or 4 column tiles sharing each A fragment); integer
//     weights times x accumulate exactly in f32 per group, and the group's scale multiplies the
//     partial sum. Optionally split over K across CTAs (Splits).
//   - Int4 MMA GEMM (sm_80+, any M): 64 x 64 output tiles, x staged in shared memory, the same
//     register dequantization of the weights.
//   - Int4 SIMT kernel (sm_70+, any M in chunks of 8; f32 arithmetic): the Volta path and the
//     reference kernel of the same layout.
//   - Int4 dequantize (sm_70+): the device form to a dense f16/bf16 [N, K] (Volta prefill: the
//     backend's cuBLASLt GEMM then runs on it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/quant/int4_layout.h"

namespace gannet::kernels {

inline constexpr int kInt4GemvMaxM = 32;  // 8, 16 or 32 rows of x: 1, 2 or 4 MMA column tiles

enum class Int4Kernel : uint8_t {
  kMmaGemv,  // sm_80+, m <= 32
  kMmaGemm,  // sm_80+, any m
  kSimt,     // sm_70+, any m
};

struct Int4LinearParams {
  const void* x = nullptr;       // [m, k] of x_type (bf16 or f16), row stride ldx elements
  void* out = nullptr;           // [m, n] of out_type (x_type or f32), row stride ldo elements
  const uint8_t* w = nullptr;    // device form: layout.packed_bytes()
  const void* scales = nullptr;  // layout.scale_bytes()
  const uint8_t* zero_points = nullptr;  // layout.zero_point_bytes() (kU4 only)
  Int4Layout layout;
  int m = 0;
  int64_t ldx = 0;
  int64_t ldo = 0;
  DType x_type = DType::kBF16;
  DType out_type = DType::kBF16;
  // kMmaGemv only: CTAs over K per row block (1 = none); > 1 needs `workspace` of
  // Int4GemvWorkspaceBytes(m, n_pad, splits) bytes (f32 partials, reduced in a fixed order by a
  // second kernel, so results do not depend on the split's timing).
  int splits = 1;
  void* workspace = nullptr;
};

// Why `kernel` cannot run `p` (nullptr when it can): m, the types, alignment (x 16-byte aligned
// and ldx % 8 == 0 for the MMA GEMM, 4-byte and even ldx otherwise), the layout's group (32, 64,
// 128 or k) and k.
const char* Int4LinearError(Int4Kernel kernel, const Int4LinearParams& p);

cudaError_t LaunchInt4Linear(Int4Kernel kernel, const Int4LinearParams& p, cudaStream_t stream);

// A split count for the MMA GEMV: enough CTAs for two waves of `num_sms` SMs when the row blocks
// alone give fewer, at most 8 and at most the k tiles / 8 (each CTA's warps need tiles).
int Int4GemvSplits(const Int4Layout& layout, int num_sms);
size_t Int4GemvWorkspaceBytes(int m, int64_t n_pad, int splits);

// w_dense[n, k] (rows < layout.n) = the dequantized weight, rounded to out_type (bf16 or f16).
cudaError_t LaunchInt4Dequantize(const Int4Layout& layout, const uint8_t* w, const void* scales,
                                 const uint8_t* zero_points, DType out_type, void* w_dense,
                                 cudaStream_t stream);

}  // namespace gannet::kernels
