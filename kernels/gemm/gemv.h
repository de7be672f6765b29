// Small-M linear layers: out[M, N] = x[M, K] w[N, K]^T for M <= 8, streaming the bf16 (or, on the
// fp16 compute path, f16) weight once with 16-byte loads (the decode-time shape where cuBLASLt's
// tensor-core tiles, padded to M = 64, leave most of the GPU idle). Host-callable declarations
// only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/mat.h"

namespace gannet::kernels {

inline constexpr int kGemvMaxM = 8;

// GemvParams::prefetch_cap by default: the first 8 KB of a CTA's rows. All of them (4 rows x K x
// 2 bytes, 12-172 KB a CTA) had a projection's resident CTAs request up to the whole matrix while
// the kernel before them still streamed its own. On an H200 (session 26) batch-1 steps ran faster
// with 8 KB than with all of it, and a little faster than with none: 31B 16.95-17.02 -> 15.81-15.83
// ms, E4B 3.74-3.77 -> 3.51-3.52, E2B 2.23-2.27 -> 2.16-2.18, 26B-A4B 3.16 -> 3.10.
inline constexpr uint32_t kGemvPrefetchBytes = 8192;

// A CTA's share of the output and how deep its threads' loads go. Four rows a CTA with the loads
// the compiler keeps in flight (32 registers at M = 1, eight CTAs an SM) suits wide projections;
// a projection with few outputs and a long K (a down projection: N 1536-2560, K 6144-12288) fills
// the memory pipes better with more loads in flight per thread or more CTAs (alone on an H200,
// E4B's 2560 x 10240 ran at 55% of copy with four rows and 89% with two rows four deep). Which is
// fastest in a step depends on the shape and the GPU, so the linear tuning times them at M = 1
// (CudaLinear): with the prefetch capped (kGemvPrefetchBytes) that made E2B/E4B batch-1 steps ~3%
// faster on an H200 (docs/results-log/decode.md, session 26). Every tile gives the same bits.
enum class GemvTile : int {
  k4Rows = 0,      // 4 output rows a CTA, as many loads in flight as the compiler keeps (every M)
  k4RowsDeep = 1,  // 4 rows, 2 chunks of each loaded ahead (M = 1 only)
  k2RowsDeep = 2,  // 2 rows, 4 chunks ahead (M = 1 only)
  k1RowDeep = 3,   // 1 row, 4 chunks ahead (M = 1 only)
};
inline constexpr int kGemvTiles = 4;

// Whether LaunchGemv runs `tile` at M = m.
constexpr bool GemvTileRuns(GemvTile tile, int m) {
  const int t = static_cast<int>(tile);
  return t == 0 || (m == 1 && t > 0 && t < kGemvTiles);
}

struct GemvParams {
  const void* x = nullptr;  // [m, k] of x_type: w_type or f32, row stride ldx elements
  const void* w = nullptr;  // [n, k] of w_type: bf16 or f16, contiguous
  void* out = nullptr;      // [m, n] of out_type: w_type or f32, row stride ldo elements
  int m = 0;
  int n = 0;
  int k = 0;
  int64_t ldx = 0;
  int64_t ldo = 0;
  DType x_type = DType::kBF16;
  DType w_type = DType::kBF16;
  DType out_type = DType::kBF16;
  // When set, x is a gate and the GEMV's input is gelu_tanh(x) * up, rounded to x_type as
  // GeluTanhMul stores it (so the result equals GeluTanhMul then the GEMV, bit for bit): up [m, k]
  // of x_type, row stride ldu, 16-byte aligned; x_type must be w_type.
  const void* up = nullptr;
  int64_t ldu = 0;
  // When > 0, w stacks a gated MLP's gate rows [0, glu) over its up rows [glu, 2 glu) (n =
  // 2 glu) and the GEMV writes out [m, glu] = GeluTanhMul(gate, up), each projection rounded to
  // w_type as the GEMV stores it and the product as GeluTanhMul rounds it: the bits of the GEMV
  // into [m, 2 glu] then GeluTanhMul, in one kernel that evaluates each GeLU once. (The gated
  // form above evaluates the GeLU of all K inputs in every CTA of the down projection: about half
  // the time the weights take to stream, at any shape, which a short kernel does not hide.) A
  // CTA takes half its rows from each half: tiles of 2 or 4 rows; x and out of w_type; not with
  // up.
  int glu = 0;
  // How many bytes of its weight rows a CTA asks the L2 for before its PDL wait (rounded down to
  // a multiple of 16; at most its rows; 0 = none). See kGemvPrefetchBytes.
  uint32_t prefetch_cap = kGemvPrefetchBytes;
  GemvTile tile = GemvTile::k4Rows;  // must run at m (GemvTileRuns)
};

// The largest M the gated GEMV is worth it for: every CTA recomputes the product for its rows,
// M tanh per 8 weight bytes, which stays well under the SFU rate only for small M.
inline constexpr int kGemvGatedMaxM = 2;

// Requires m in [1, 8] (in [1, kGemvGatedMaxM] with up set), k % 8 == 0, ldx % 8 == 0, 16-byte
// aligned x and w, and x and out each of w_type or f32 (with glu: both of w_type, n == 2 glu, a
// tile of two or more rows, no up).
cudaError_t LaunchGemv(const GemvParams& p, cudaStream_t stream);

// Whether LaunchGemv's kernels launch with programmatic dependent launch on the current device
// (launch.h, PdlAllowed): they then overlap the kernels before and after them in a step's chain.
bool GemvLaunchesWithPdl();

}  // namespace gannet::kernels
