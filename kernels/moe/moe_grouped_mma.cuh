// MoE experts, prefill path (moe.h), on tensor cores: sm_80 and newer (moe_grouped_sm80.cu) and
// sm_75 (moe_grouped_sm75.cu: m16n8k8 fp16 MMAs and synchronous copies, mma_sm80.cuh):
//   1. sort the (token, expert) pairs by expert (one CTA: counts, offsets, scatter);
//   2. grouped GEMM gate/up: 64 sorted pairs of one expert x 64 intermediate columns, the gate and
//      up rows of those columns accumulated side by side, GeGLU in the epilogue -> h (bf16);
//   3. grouped GEMM down: h rows (contiguous after the sort) x 64 hidden columns -> y per pair;
//   4. out[t] = sum_j w[t, j] y[t, j] in a fixed order.
// The grid of 2 and 3 is fixed by (pairs, experts) -- ceil(pairs / 64) + experts row tiles -- and
// each CTA finds its expert by scanning the offsets, so no host round trip is needed. A pair's
// result does not depend on where the sort puts it (each MMA row is independent), so the output
// is reproducible although the scatter order is not.
//
// Every kernel is a template on kMinArch, the oldest arch its TU builds it for, so the two TUs'
// instantiations stay apart (the sm75 one is PTX-only in the developer build). Shared memory:
// 55 KB (sm_80+), 46 KB (sm_75, within its 64 KB).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/common/mma_sm80.cuh"
#include "kernels/moe/moe.h"

namespace gannet::kernels::moe_grouped {

using sm80::CpAsync16;
using sm80::CpAsyncCommit;
using sm80::CpAsyncWait;
using sm80::LdMatrixX4;
using sm80::MmaBf16;

constexpr int kBM = 64, kBN = 64, kThreads = 128;

// The K depth of a stage and the pipeline depth, per arch build. sm_80+: 64-deep stages, two
// of them (55 KB for gate/up, four CTAs an SM), measured on an H200 against 32x3 (the old
// tiles), 64x3, 64x4, 32x5, 32x2 and 128x2: 1.1-1.35x faster than 32x3 from 64 to 2048 tokens
// (moe_bench, docs/results-log/tp.md). sm_75: 32 x 3, within its 64 KB.
template <int kMinArch>
struct TileK {
  static constexpr int kBK = 64;
  static constexpr int kStages = 2;
  // Rows of kBK + 8 elements (an odd number of 16-byte units): ldmatrix row addresses hit
  // distinct banks.
  static constexpr int kSStride = kBK + 8;
};
template <>
struct TileK<750> {
  static constexpr int kBK = 32, kStages = 3, kSStride = kBK + 8;
};
constexpr int kSortThreads = 1024;
constexpr int kMaxExperts = 1024;

inline size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

struct Workspace {
  int* offsets;  // [E + 1]
  int* sorted;   // [P] pair ids in expert order
  bf16* h;       // [P, I] by sorted position
  bf16* y;       // [P, H] by pair id
};

inline Workspace Carve(const MoeExpertsParams& p, void* base) {
  const size_t pairs = static_cast<size_t>(p.num_tokens) * p.top_k;
  char* c = static_cast<char*>(base);
  Workspace w;
  w.offsets = reinterpret_cast<int*>(c);
  c += Align256((p.num_experts + 1) * sizeof(int));
  w.sorted = reinterpret_cast<int*>(c);
  c += Align256(pairs * sizeof(int));
  w.h = reinterpret_cast<bf16*>(c);
  c += Align256(pairs * p.inter * sizeof(bf16));
  w.y = reinterpret_cast<bf16*>(c);
  return w;
}

template <int kMinArch>
__global__ void __launch_bounds__(kSortThreads)
    MoeSortPairsKernel(const int32_t* ids, int pairs, int num_experts, int expert_begin,
                       int* offsets, int* sorted) {
  PdlEnter();
  __shared__ int counts[kMaxExperts];
  __shared__ int starts[kMaxExperts + 1];
  for (int e = threadIdx.x; e < num_experts; e += kSortThreads) counts[e] = 0;
  __syncthreads();
  // Pairs of experts outside [expert_begin, + num_experts) are another rank's: left unsorted.
  for (int i = threadIdx.x; i < pairs; i += kSortThreads) {
    const int e = ids[i] - expert_begin;
    if (e >= 0 && e < num_experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int run = 0;
    for (int e = 0; e < num_experts; ++e) {
      starts[e] = run;
      run += counts[e];
      counts[e] = 0;  // reused as the scatter cursor
    }
    starts[num_experts] = run;
  }
  __syncthreads();
  for (int e = threadIdx.x; e <= num_experts; e += kSortThreads) offsets[e] = starts[e];
  for (int i = threadIdx.x; i < pairs; i += kSortThreads) {
    const int e = ids[i] - expert_begin;
    if (e >= 0 && e < num_experts) sorted[starts[e] + atomicAdd(&counts[e], 1)] = i;
  }
}

struct GroupedGemmArgs {
  const bf16* a;
  int64_t lda;
  bool a_by_token;  // A row of sorted position s: token sorted[s] / top_k (else row s itself)
  const bf16* b;    // expert e's rows start at b + e * b_expert_stride; row stride = k
  int64_t b_expert_stride;
  int up_offset;  // kDual: the second B matrix starts this many rows further
  int n;
  int k;
  bf16* c;
  int64_t ldc;
  bool c_by_pair;  // C row = pair id sorted[s] (else sorted position s)
  const int* offsets;
  const int* sorted;
  int num_experts;
  int top_k;
};

template <int kMinArch, bool kDual>
__device__ __forceinline__ void MoeGroupedGemmCta(const GroupedGemmArgs& g) {
  constexpr int kBK = TileK<kMinArch>::kBK, kStages = TileK<kMinArch>::kStages;
  constexpr int kSStride = TileK<kMinArch>::kSStride;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int row_src[kBM];
  __shared__ int row_dst[kBM];
  bf16* sA = reinterpret_cast<bf16*>(smem);
  bf16* sB = sA + kStages * kBM * kSStride;
  bf16* sU = sB + kStages * kBN * kSStride;

  int e = -1, mt = 0, first = 0;
  for (int ex = 0; ex < g.num_experts; ++ex) {
    const int n = (g.offsets[ex + 1] - g.offsets[ex] + kBM - 1) / kBM;
    if (static_cast<int>(blockIdx.x) < first + n) {
      e = ex;
      mt = blockIdx.x - first;
      break;
    }
    first += n;
  }
  if (e < 0) return;
  const int row_begin = g.offsets[e] + mt * kBM;
  const int rows = min(kBM, g.offsets[e + 1] - row_begin);
  const int n0 = blockIdx.y * kBN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int r = tid; r < kBM; r += kThreads) {
    const int s = row_begin + r;
    row_src[r] = r < rows ? (g.a_by_token ? g.sorted[s] / g.top_k : s) : -1;
    row_dst[r] = r < rows ? (g.c_by_pair ? g.sorted[s] : s) : -1;
  }
  __syncthreads();
  const bf16* b = g.b + static_cast<int64_t>(e) * g.b_expert_stride;

  auto load_stage = [&](int st, int kt) {
    const int k0 = kt * kBK;
    for (int c = tid; c < kBM * (kBK / 8); c += kThreads) {
      const int r = c / (kBK / 8), ch = c % (kBK / 8);
      const int kc = k0 + ch * 8;
      const int src = row_src[r];
      const bool ok_a = src >= 0 && kc < g.k;
      CpAsync16(sA + (st * kBM + r) * kSStride + ch * 8, ok_a ? g.a + src * g.lda + kc : g.a,
                ok_a ? 16 : 0);
      const bool ok_b = n0 + r < g.n && kc < g.k;
      CpAsync16(sB + (st * kBN + r) * kSStride + ch * 8,
                ok_b ? b + static_cast<int64_t>(n0 + r) * g.k + kc : b, ok_b ? 16 : 0);
      if (kDual) {
        CpAsync16(sU + (st * kBN + r) * kSStride + ch * 8,
                  ok_b ? b + static_cast<int64_t>(g.up_offset + n0 + r) * g.k + kc : b,
                  ok_b ? 16 : 0);
      }
    }
  };

  const int k_tiles = (g.k + kBK - 1) / kBK;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < k_tiles) load_stage(st, st);
    CpAsyncCommit();
  }
  const int wm = warp / 2, wn = warp % 2;
  float acc[2][4][4] = {};
  float acc_u[kDual ? 2 : 1][kDual ? 4 : 1][4] = {};
  for (int kt = 0; kt < k_tiles; ++kt) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < k_tiles) load_stage((kt + kStages - 1) % kStages, kt + kStages - 1);
    CpAsyncCommit();
    const int st = kt % kStages;
#pragma unroll
    for (int kh = 0; kh < kBK / 32; ++kh) {  // 32 K columns per B fragment load
      uint32_t bf[4][4], uf[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int off =
            (st * kBN + wn * 32 + nt * 8 + (lane & 7)) * kSStride + kh * 32 + (lane >> 3) * 8;
        LdMatrixX4(bf[nt][0], bf[nt][1], bf[nt][2], bf[nt][3], sB + off);
        if (kDual) LdMatrixX4(uf[nt][0], uf[nt][1], uf[nt][2], uf[nt][3], sU + off);
      }
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          uint32_t a[4];
          LdMatrixX4(a[0], a[1], a[2], a[3],
                     sA + (st * kBM + wm * 32 + m * 16 + (lane & 15)) * kSStride + kh * 32 +
                         kk * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            MmaBf16(acc[m][nt], a, &bf[nt][2 * kk]);
            if constexpr (kDual) MmaBf16(acc_u[m][nt], a, &uf[nt][2 * kk]);
          }
        }
      }
    }
  }
  CpAsyncWait<0>();

#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = wm * 32 + m * 16 + (lane >> 2) + 8 * hh;
        const int col = n0 + wn * 32 + nt * 8 + (lane & 3) * 2;
        if (r >= rows || col >= g.n) continue;
        float v0 = acc[m][nt][2 * hh], v1 = acc[m][nt][2 * hh + 1];
        if constexpr (kDual) {
          v0 = GeluTanh(v0) * acc_u[m][nt][2 * hh];
          v1 = GeluTanh(v1) * acc_u[m][nt][2 * hh + 1];
        }
        *reinterpret_cast<__nv_bfloat162*>(g.c + row_dst[r] * g.ldc + col) =
            __floats2bfloat162_rn(v0, v1);
      }
    }
  }
}

template <int kMinArch, bool kDual>
__global__ void __launch_bounds__(kThreads) MoeGroupedGemmKernel(const GroupedGemmArgs g) {
  PdlEnter();
#if GANNET_MMA_ENABLED
  if constexpr (__CUDA_ARCH__ >= kMinArch) MoeGroupedGemmCta<kMinArch, kDual>(g);
#endif
}

// out[t] = sum_j w[t, j] y[t * k + j], 8 columns per thread.
template <int kMinArch>
__global__ void MoeCombineKernel(const MoeExpertsParams p, const bf16* y) {
  PdlEnter();
  const int t = blockIdx.x;
  bf16* out = static_cast<bf16*>(p.out) + t * p.ldo;
  for (int c = threadIdx.x * 8; c < p.hidden; c += blockDim.x * 8) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int j = 0; j < p.top_k; ++j) {
      const int pair = t * p.top_k + j;
      const int e = p.topk_ids[pair] - p.expert_begin;
      if (e < 0 || e >= p.num_experts) continue;  // another rank's: its y row was never written
      const float w = p.topk_weights[pair];
      float v[8];
      Load8(y + static_cast<int64_t>(pair) * p.hidden + c, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += w * v[i];
    }
    Store8(out + c, acc);
  }
}

template <int kMinArch>
int SmemBytes(bool dual) {
  using T = TileK<kMinArch>;
  return (T::kStages * (kBM + kBN * (dual ? 2 : 1)) * T::kSStride) * 2;
}

// One grouped GEMM over the sorted rows: `row_tiles` x ceil(n / kBN) CTAs, its shared memory
// opted in first (past 48 KB on sm_80+).
template <int kMinArch, bool kDual>
cudaError_t LaunchGroupedGemm(const GroupedGemmArgs& g, int row_tiles, cudaStream_t stream) {
  const int smem = SmemBytes<kMinArch>(kDual);
  const cudaError_t err = cudaFuncSetAttribute(MoeGroupedGemmKernel<kMinArch, kDual>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  return Launch(MoeGroupedGemmKernel<kMinArch, kDual>, dim3(row_tiles, (g.n + kBN - 1) / kBN),
                kThreads, smem, stream, g);
}

// LaunchMoeGrouped (moe.h) with the kernels built for kMinArch.
template <int kMinArch>
cudaError_t LaunchMoeGroupedFor(const MoeExpertsParams& p, void* workspace, cudaStream_t stream) {
  if (p.hidden % 8 != 0 || p.inter % 8 != 0 || p.ldx % 8 != 0 || p.ldo % 8 != 0 ||
      p.num_experts > kMaxExperts || p.top_k < 1 || workspace == nullptr ||
      p.w_type != DType::kBF16 || p.out_type != DType::kBF16) {
    return cudaErrorInvalidValue;  // bf16 alone (the fp16 path runs the pair GEMVs)
  }
  if (p.num_tokens == 0) return cudaSuccess;
  const Workspace w = Carve(p, workspace);
  const int pairs = p.num_tokens * p.top_k;
  Launch(MoeSortPairsKernel<kMinArch>, 1, kSortThreads, 0, stream, p.topk_ids, pairs, p.num_experts,
         p.expert_begin, w.offsets, w.sorted);
  const int row_tiles = (pairs + kBM - 1) / kBM + p.num_experts;

  GroupedGemmArgs gu{};
  gu.a = static_cast<const bf16*>(p.x);
  gu.lda = p.ldx;
  gu.a_by_token = true;
  gu.b = static_cast<const bf16*>(p.gate_up);
  gu.b_expert_stride = static_cast<int64_t>(2) * p.inter * p.hidden;
  gu.up_offset = p.inter;
  gu.n = p.inter;
  gu.k = p.hidden;
  gu.c = w.h;
  gu.ldc = p.inter;
  gu.c_by_pair = false;
  gu.offsets = w.offsets;
  gu.sorted = w.sorted;
  gu.num_experts = p.num_experts;
  gu.top_k = p.top_k;
  cudaError_t err = LaunchGroupedGemm<kMinArch, true>(gu, row_tiles, stream);
  if (err != cudaSuccess) return err;

  GroupedGemmArgs dn = gu;
  dn.a = w.h;
  dn.lda = p.inter;
  dn.a_by_token = false;
  dn.b = static_cast<const bf16*>(p.down);
  dn.b_expert_stride = static_cast<int64_t>(p.hidden) * p.inter;
  dn.up_offset = 0;
  dn.n = p.hidden;
  dn.k = p.inter;
  dn.c = w.y;
  dn.ldc = p.hidden;
  dn.c_by_pair = true;
  err = LaunchGroupedGemm<kMinArch, false>(dn, row_tiles, stream);
  if (err != cudaSuccess) return err;
  Launch(MoeCombineKernel<kMinArch>, p.num_tokens, 128, 0, stream, p, w.y);
  return cudaGetLastError();
}

}  // namespace gannet::kernels::moe_grouped
