// MoE experts, decode path (moe.h): a handful of tokens each pick top_k experts, so each
// (token, expert) pair is a pair of GEMVs. Warp-per-row GEMVs stream each selected expert's rows
// with 16-byte loads; GeGLU is fused after gate/up, and the down projection of a token sums its
// experts in a fixed order (no atomics: bitwise reproducible).
//
// At batch 1 a layer's experts are ~95 MB read in ~20 us, so what matters is how many loads each
// warp has in flight: the gate/up loop is unrolled so a lane issues several chunks' loads before
// it waits, and the down projection gives each warp of a CTA its own expert (the CTA's rows for
// all top_k experts at once) instead of walking the experts one after another, which put top_k
// dependent round trips on every warp's critical path.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/moe/moe.h"

namespace gannet::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;

// T: x's and the weights' type (bf16, or f16 on the fp16 compute path).
// h[pair, i] = gelu_tanh(gate_e[i] . x[t]) * (up_e[i] . x[t]), f32.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    MoePairGateUpKernel(const MoeExpertsParams p, float* h) {
  PdlEnter();
  const int pair = blockIdx.x;
  const int t = pair / p.top_k;
  const int e = p.topk_ids[pair] - p.expert_begin;
  if (e < 0 || e >= p.num_experts) return;  // another rank's expert (expert parallelism)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int i0 = blockIdx.y * kRowsPerCta + warp * kRowsPerWarp;
  const T* x = static_cast<const T*>(p.x) + t * p.ldx;
  const T* w = static_cast<const T*>(p.gate_up) + static_cast<int64_t>(e) * 2 * p.inter * p.hidden;
  float g[kRowsPerWarp] = {}, u[kRowsPerWarp] = {};
#pragma unroll 4
  for (int c = lane * 8; c < p.hidden; c += 32 * 8) {
    float xv[8];
    Load8(x + c, xv);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int i = min(i0 + r, p.inter - 1);
      float gw[8], uw[8];
      Load8(w + static_cast<int64_t>(i) * p.hidden + c, gw);
      Load8(w + static_cast<int64_t>(p.inter + i) * p.hidden + c, uw);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        g[r] += xv[j] * gw[j];
        u[r] += xv[j] * uw[j];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float gs = WarpSum(g[r]);
    const float us = WarpSum(u[r]);
    if (lane == 0 && i0 + r < p.inter)
      h[static_cast<int64_t>(pair) * p.inter + i0 + r] = GeluTanh(gs) * us;
  }
}

// out[t, n] = sum_j w[t, j] * (down_e[n] . h[t * k + j]); out of type Out (T, or f32 on the fp16
// path, where the sum feeds a norm). A CTA owns kDownRows rows of one token; warp w takes experts
// j = w, w + kWarps, ... and the warps' sums are added in warp order (a fixed order).
constexpr int kDownRows = 8;

template <typename T, typename Out>
__global__ void __launch_bounds__(kWarps * 32)
    MoePairDownKernel(const MoeExpertsParams p, const float* h) {
  __shared__ float red[kWarps][kDownRows];
  PdlEnter();
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n0 = blockIdx.y * kDownRows;
  float acc[kDownRows] = {};
  for (int j = warp; j < p.top_k; j += kWarps) {
    const int pair = t * p.top_k + j;
    const int e = p.topk_ids[pair] - p.expert_begin;
    if (e < 0 || e >= p.num_experts) continue;  // another rank's expert (expert parallelism)
    const float wt = p.topk_weights[pair];
    const float* hv = h + static_cast<int64_t>(pair) * p.inter;
    const T* w = static_cast<const T*>(p.down) + static_cast<int64_t>(e) * p.hidden * p.inter;
    float part[kDownRows] = {};
#pragma unroll 2
    for (int c = lane * 8; c < p.inter; c += 32 * 8) {
      float hf[8];
      Load8(hv + c, hf);
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) {
        float wf[8];
        Load8(w + static_cast<int64_t>(min(n0 + r, p.hidden - 1)) * p.inter + c, wf);
#pragma unroll
        for (int q = 0; q < 8; ++q) part[r] += hf[q] * wf[q];
      }
    }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) acc[r] += wt * WarpSum(part[r]);
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) red[warp][r] = acc[r];
  }
  __syncthreads();
  if (threadIdx.x < kDownRows && n0 + static_cast<int>(threadIdx.x) < p.hidden) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w][threadIdx.x];
    static_cast<Out*>(p.out)[t * p.ldo + n0 + threadIdx.x] = FromFloat<Out>(s);
  }
}

}  // namespace

size_t MoePairGemvWorkspaceBytes(const MoeExpertsParams& p) {
  return static_cast<size_t>(p.num_tokens) * p.top_k * p.inter * sizeof(float);
}

cudaError_t LaunchMoePairGemv(const MoeExpertsParams& p, void* workspace, cudaStream_t stream) {
  if (p.hidden % 8 != 0 || p.inter % 8 != 0 || p.ldx % 8 != 0 || p.top_k < 1) {
    return cudaErrorInvalidValue;
  }
  if (p.num_tokens == 0) return cudaSuccess;
  float* h = static_cast<float*>(workspace);
  dim3 g1(p.num_tokens * p.top_k, (p.inter + kRowsPerCta - 1) / kRowsPerCta);
  dim3 g2(p.num_tokens, (p.hidden + kDownRows - 1) / kDownRows);
  if (p.w_type == DType::kBF16 && p.out_type == DType::kBF16) {
    Launch(MoePairGateUpKernel<bf16>, g1, kWarps * 32, 0, stream, p, h);
    Launch(MoePairDownKernel<bf16, bf16>, g2, kWarps * 32, 0, stream, p, h);
  } else if (p.w_type == DType::kF16 && p.out_type == DType::kF32) {
    Launch(MoePairGateUpKernel<f16>, g1, kWarps * 32, 0, stream, p, h);
    Launch(MoePairDownKernel<f16, float>, g2, kWarps * 32, 0, stream, p, h);
  } else {
    return cudaErrorInvalidValue;  // the two paths' pairs only
  }
  return cudaGetLastError();
}

}  // namespace gannet::kernels
