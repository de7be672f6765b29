// Experiment (issue 14, item 4, session 35): a batch-1 gated MLP (gate/up with the GeLU product,
// then the down projection) as ONE kernel with no grid-wide wait between its two GEMVs, against
// the engine's two GEMV kernels (kernels/gemm/gemv.cu, every tile), on a PDL chain in a CUDA
// graph. Not part of the engine; it decides whether such a kernel is worth building in.
// Outcome (session 35, H200): slower at every shape and cluster size, so not built in; the table
// and the reasons are in bench/RESULTS_DECODE.md, "Session 35".
//
// Why it might win where other fusions lost (bench/RESULTS_DECODE.md, "tried"): it does not move
// a dependent round trip into a neighbour, it removes one. CTA p owns intermediate features
// [pC, pC + C): it computes their gate and up rows (K = H), their GeLU products, then the down
// projection's K-slice for them (H outputs over its C inputs), a partial of the whole output.
// Nothing it needs comes from another CTA, so its weights (gate rows, up rows, the down slab,
// repacked at load time into one contiguous 3CH block) stream through a shared-memory ring from
// the kernel's first instruction (before its PDL wait) to its last, with no wait in between.
// The partials are summed in a fixed order: first across a thread-block cluster through
// distributed shared memory, then the cluster partials by the next kernel (the post-norm update,
// one CTA, as in the engine) as it reads its input. Deterministic; not the two kernels' bits
// (another summation order), checked against a double-precision reference instead.
//
// Per layer, both forms: an update kernel (1 CTA: h += y, x = RmsNorm(h) * w) then the MLP. Every
// layer has its own weights (the step streams more than the L2).
//
// nvcc -std=c++20 -arch=sm_90a -O3 --expt-relaxed-constexpr -I. tools/gpu/experiments/fused_mlp.cu \
//   kernels/gemm/gemv.cu kernels/common/launch.cc -o /tmp/fused_mlp
// /tmp/fused_mlp [layers=40] [iters=20]
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/common/device_utils.cuh"
#include "tools/gpu/experiments/bulk_ring.cuh"
#include "kernels/common/launch.h"
#include "kernels/gemm/gemv.h"

using gannet::kernels::bf16;
using gannet::kernels::Bf16x8;
using gannet::kernels::GeluTanh;
using gannet::kernels::Unpack8;
using gannet::kernels::WarpSum;
namespace cg = cooperative_groups;

#include "check.cuh"

namespace {

constexpr int kConsumers = 256, kThreads = kConsumers + 32;
constexpr int kWarps = kConsumers / 32;  // consumer warps; the producer is warp kWarps
constexpr int kUpdThreads = 256;

__device__ __forceinline__ void ConsumerBar() {
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumers) : "memory");
}
__device__ __forceinline__ void PdlWaitOnly() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void PdlTrigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Shape of one fused MLP: hidden H, C intermediate features a CTA, a cluster of kCluster CTAs.
// A stage is 8H bytes: four gate (or up) rows, or 4H / C rows of the CTA's down slab.
template <int H, int C>
struct Shape {
  static constexpr int kStageBytes = 8 * H;
  // A multiple of the 8 consumer warps: a slot's previous stage is then the same warp's, so no
  // warp can wait on a slot two phases ahead (an mbarrier's parity tells only one phase apart).
  static constexpr int kStages = std::min(16, (200 * 1024) / kStageBytes) / kWarps * kWarps;
  static constexpr int kGuStages = C / 2;          // 2C rows, 4 a stage
  static constexpr int kDownRows = 4 * H / C;      // down rows a stage
  static constexpr int kDownStages = H / kDownRows;  // = C / 4
  static constexpr int kAllStages = kGuStages + kDownStages;
  static_assert((4 * H) % C == 0 && H % kDownRows == 0 && H % 8 == 0 && C % 8 == 0);
  static constexpr size_t kSmem = static_cast<size_t>(kStages) * kStageBytes +
                                  sizeof(float) * (2 * H + 3 * C) + 2 * kStages * sizeof(uint64_t);
};

template <int H, int C, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    FusedMlp(const bf16* __restrict__ x, const bf16* __restrict__ w, float* __restrict__ part) {
  using S = Shape<H, C>;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* stages = smem;
  float* xs = reinterpret_cast<float*>(stages + S::kStages * S::kStageBytes);  // H
  float* partial = xs + H;                                                    // H
  float* gu = partial + H;                                                    // 2C
  float* act = gu + 2 * C;                                                    // C
  uint64_t* full = reinterpret_cast<uint64_t*>(act + C);
  uint64_t* empty = full + S::kStages;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) MbarInit(&full[s], 1), MbarInit(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == kWarps) {
    // Producer: the CTA's 3CH weights, stage by stage, before and regardless of the PDL wait.
    if (lane == 0) {
      const unsigned char* src = reinterpret_cast<const unsigned char*>(
          w + static_cast<int64_t>(blockIdx.x) * 3 * C * H);
      for (int s = 0; s < S::kAllStages; ++s) {
        const int slot = s % S::kStages;
        MbarWait(&empty[slot], ((s / S::kStages) & 1) ^ 1);
        MbarExpectTx(&full[slot], S::kStageBytes);
        BulkCopy(stages + slot * S::kStageBytes, src + static_cast<int64_t>(s) * S::kStageBytes,
                 S::kStageBytes, &full[slot]);
      }
    }
    __syncwarp();
  } else {
    PdlWaitOnly();
    for (int q = threadIdx.x; q < H / 8; q += kConsumers) {
      const int4 raw = __ldcg(reinterpret_cast<const int4*>(x) + q);
      Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), xs + q * 8);
    }
    ConsumerBar();
    // Gate/up: warp w takes stages w, w + 8, ...; four rows of K = H each.
    for (int s = warp; s < S::kGuStages; s += kWarps) {
      const int slot = s % S::kStages;
      MbarWait(&full[slot], (s / S::kStages) & 1);
      const int4* st = reinterpret_cast<const int4*>(stages + slot * S::kStageBytes);
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int c = lane; c < H / 8; c += 32) {
        const float4 x0 = *reinterpret_cast<const float4*>(xs + c * 8);
        const float4 x1 = *reinterpret_cast<const float4*>(xs + c * 8 + 4);
        const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int4 raw = st[r * (H / 8) + c];
          float wf[8];
          Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), wf);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r] += xv[j] * wf[j];
        }
      }
      __syncwarp();
      if (lane == 0) MbarArrive(&empty[slot]);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float v = WarpSum(acc[r]);
        if (lane == 0) gu[4 * s + r] = v;
      }
    }
    ConsumerBar();
    for (int j = threadIdx.x; j < C; j += kConsumers) {
      const float g = __bfloat162float(__float2bfloat16_rn(gu[j]));
      const float u = __bfloat162float(__float2bfloat16_rn(gu[C + j]));
      act[j] = __bfloat162float(__float2bfloat16_rn(GeluTanh(g) * u));
    }
    ConsumerBar();
    // Down slab: a stage holds rows [d * kDownRows, ...) of the CTA's [H][C] slab; a lane a row.
    const int first = S::kGuStages + ((warp - S::kGuStages) % kWarps + kWarps) % kWarps;
    for (int s = first; s < S::kAllStages; s += kWarps) {
      const int slot = s % S::kStages;
      MbarWait(&full[slot], (s / S::kStages) & 1);
      const bf16* st = reinterpret_cast<const bf16*>(stages + slot * S::kStageBytes);
      const int d = s - S::kGuStages;
      constexpr int kPerLane = (S::kDownRows + 31) / 32;
      float acc[kPerLane];
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int r = min(i * 32 + lane, S::kDownRows - 1);
        const int4* row = reinterpret_cast<const int4*>(st + r * C);
        float a = 0.f;
#pragma unroll
        for (int c = 0; c < C / 8; ++c) {
          const int4 raw = row[c];
          float wf[8];
          Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), wf);
#pragma unroll
          for (int j = 0; j < 8; ++j) a += act[c * 8 + j] * wf[j];
        }
        acc[i] = a;
      }
      __syncwarp();
      if (lane == 0) MbarArrive(&empty[slot]);
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (i * 32 + lane < S::kDownRows) partial[d * S::kDownRows + i * 32 + lane] = acc[i];
      }
    }
  }
  PdlTrigger();
  if constexpr (kCluster == 1) {
    __syncthreads();
    for (int h = threadIdx.x; h < H; h += kThreads)
      part[static_cast<int64_t>(blockIdx.x) * H + h] = partial[h];
  } else {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int rank = static_cast<int>(cluster.block_rank());
    constexpr int kCols = H / kCluster;
    const int cid = blockIdx.x / kCluster;
    for (int c = threadIdx.x; c < kCols; c += kThreads) {
      const int h = rank * kCols + c;
      float v = 0.f;
#pragma unroll
      for (int q = 0; q < kCluster; ++q) v += cluster.map_shared_rank(partial, q)[h];
      part[static_cast<int64_t>(cid) * H + h] = v;
    }
    cluster.sync();
  }
}

// The update: y = bf16(sum of np partial rows) (np = 0: y is bf16 already), h = bf16(h + y),
// x = bf16(RmsNorm(h) * wn). One CTA, as the engine's batch-1 update.
template <int H>
__global__ void __launch_bounds__(kUpdThreads) Update(const bf16* __restrict__ y,
                                                      const float* __restrict__ part, int np,
                                                      bf16* __restrict__ h, bf16* __restrict__ x,
                                                      const float* __restrict__ wn) {
  constexpr int kPer = H / kUpdThreads;
  static_assert(H % kUpdThreads == 0);
  __shared__ float scratch[32];
  float wv[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) wv[i] = wn[threadIdx.x + i * kUpdThreads];
  gannet::kernels::PdlEnter();
  float hv[kPer], ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kUpdThreads;
    float t = 0.f;
    if (np == 0) {
      t = __bfloat162float(__ldcg(y + j));
    } else {
      for (int q = 0; q < np; ++q) t += __ldcg(part + static_cast<int64_t>(q) * H + j);
      t = __bfloat162float(__float2bfloat16_rn(t));
    }
    hv[i] = __bfloat162float(__float2bfloat16_rn(__bfloat162float(__ldcg(h + j)) + t));
    ss += hv[i] * hv[i];
  }
  const float r = rsqrtf(gannet::kernels::BlockSum(ss, scratch) / H + 1e-6f);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kUpdThreads;
    h[j] = __float2bfloat16_rn(hv[i]);
    x[j] = __float2bfloat16_rn(hv[i] * r * wv[i]);
  }
}

// Reads `bytes` (the layer's weights) once: the copy reference on the same chain.
__global__ void __launch_bounds__(256) ReadAll(const int4* __restrict__ p, int64_t n, int* sink) {
  gannet::kernels::PdlEnter();
  int v = 0;
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) {
    const int4 a = __ldcs(p + i);
    v ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (v == 0x7fffffff) sink[0] = v;
}

__device__ __forceinline__ float HashUnit(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / 16777216.f * 2.f - 1.f;
}
__global__ void Fill(bf16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll)
    p[i] = __float2bfloat16_rn(HashUnit(i, seed) * scale);
}
// gu [2I][H] (gate rows, then up rows) and down [H][I] into the fused layout: CTA p's block is
// gate rows pC.., up rows pC.., then down[:, pC..pC+C) as [H][C].
__global__ void Repack(const bf16* gu, const bf16* down, bf16* out, int H, int I, int C) {
  const int64_t per = 3ll * C * H, n = per * (I / C);
  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) {
    const int64_t p = i / per, o = i % per;
    bf16 v;
    if (o < 2ll * C * H) {
      const int64_t r = o / H, k = o % H;
      const int64_t row = r < C ? p * C + r : I + p * C + (r - C);
      v = gu[row * H + k];
    } else {
      const int64_t q = o - 2ll * C * H, h = q / C, c = q % C;
      v = down[h * I + p * C + c];
    }
    out[i] = v;
  }
}

template <typename F>
void Prepare(F kernel, size_t smem, bool cluster) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(smem)));
  if (cluster) CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

template <int H, int C, int kCluster>
cudaError_t LaunchFused(const bf16* x, const bf16* w, float* part, int ctas, cudaStream_t s) {
  using S = Shape<H, C>;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = kCluster;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(ctas);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = S::kSmem;
  config.stream = s;
  config.attrs = attr;
  config.numAttrs = kCluster > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&config, FusedMlp<H, C, kCluster>, x, w, part);
}

// One shape's weights (both layouts), buffers, reference and timing.
template <int H, int I>
struct Bench {
  int layers, iters, max_p;
  int64_t gu_n = 2ll * I * H, down_n = 1ll * H * I, fused_n = 3ll * I * H;
  std::vector<bf16*> gu, down, fused;
  bf16 *x, *h, *y, *act, *h0;
  float *part, *wn;
  int* sink;
  cudaStream_t st;
  std::vector<double> ref;
  float copy = 0.f;

  Bench(int l, int it) : layers(l), iters(it), max_p(256), gu(l), down(l), fused(l), ref(H) {
    for (int i = 0; i < layers; ++i) {
      CK(cudaMalloc(&gu[i], gu_n * 2));
      CK(cudaMalloc(&down[i], down_n * 2));
      CK(cudaMalloc(&fused[i], fused_n * 2));
      Fill<<<1024, 256>>>(gu[i], gu_n, 17 + i, 1.f / std::sqrt(static_cast<float>(H)));
      Fill<<<1024, 256>>>(down[i], down_n, 9000 + i, 1.f / std::sqrt(static_cast<float>(I)));
    }
    CK(cudaMalloc(&x, H * 2));
    CK(cudaMalloc(&h, H * 2));
    CK(cudaMalloc(&h0, H * 2));
    CK(cudaMalloc(&y, H * 2));
    CK(cudaMalloc(&act, I * 2));
    CK(cudaMalloc(&part, sizeof(float) * max_p * H));
    CK(cudaMalloc(&wn, sizeof(float) * H));
    CK(cudaMalloc(&sink, 4));
    std::vector<float> ones(H, 1.f);
    CK(cudaMemcpy(wn, ones.data(), sizeof(float) * H, cudaMemcpyHostToDevice));
    Fill<<<16, 256>>>(h0, H, 4242, 1.f);
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaDeviceSynchronize());
    Reference();
  }
  ~Bench() {
    for (int i = 0; i < layers; ++i) {
      CK(cudaFree(gu[i]));
      CK(cudaFree(down[i]));
      CK(cudaFree(fused[i]));
    }
    CK(cudaFree(x));
    CK(cudaFree(h));
    CK(cudaFree(h0));
    CK(cudaFree(y));
    CK(cudaFree(act));
    CK(cudaFree(part));
    CK(cudaFree(wn));
    CK(cudaFree(sink));
    CK(cudaStreamDestroy(st));
  }
  void Reset() {
    CK(cudaMemcpyAsync(h, h0, H * 2, cudaMemcpyDeviceToDevice, st));
    CK(cudaMemsetAsync(y, 0, H * 2, st));
    CK(cudaMemsetAsync(part, 0, sizeof(float) * max_p * H, st));
  }
  void LaunchUpdate(int np) {
    CK(gannet::kernels::Launch(Update<H>, dim3(1), dim3(kUpdThreads), 0, st,
                               static_cast<const bf16*>(y), static_cast<const float*>(part), np, h,
                               x, static_cast<const float*>(wn)));
  }
  void Reference() {
    Reset();
    LaunchUpdate(0);
    std::vector<bf16> xh(H), guh(gu_n), dh(down_n);
    CK(cudaMemcpyAsync(xh.data(), x, H * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(guh.data(), gu[0], gu_n * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(dh.data(), down[0], down_n * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    std::vector<double> a(I);
    for (int j = 0; j < I; ++j) {
      double g = 0, u = 0;
      for (int k = 0; k < H; ++k) {
        g += double(__bfloat162float(guh[int64_t(j) * H + k])) * __bfloat162float(xh[k]);
        u += double(__bfloat162float(guh[int64_t(I + j) * H + k])) * __bfloat162float(xh[k]);
      }
      a[j] = 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
    }
    for (int o = 0; o < H; ++o) {
      double s = 0;
      for (int j = 0; j < I; ++j) s += double(__bfloat162float(dh[int64_t(o) * I + j])) * a[j];
      ref[o] = s;
    }
  }
  double Rel(const std::vector<float>& v) const {
    double num = 0, den = 0;
    for (int i = 0; i < H; ++i) num += (v[i] - ref[i]) * (v[i] - ref[i]), den += ref[i] * ref[i];
    return std::sqrt(num / den);
  }
  std::vector<float> ReadY(int np) {
    std::vector<float> out(H);
    if (np == 0) {
      std::vector<bf16> yb(H);
      CK(cudaMemcpyAsync(yb.data(), y, H * 2, cudaMemcpyDeviceToHost, st));
      CK(cudaStreamSynchronize(st));
      for (int i = 0; i < H; ++i) out[i] = __bfloat162float(yb[i]);
      return out;
    }
    std::vector<float> pp(static_cast<size_t>(np) * H);
    CK(cudaMemcpyAsync(pp.data(), part, sizeof(float) * np * H, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    for (int i = 0; i < H; ++i) {
      float t = 0.f;
      for (int q = 0; q < np; ++q) t += pp[static_cast<size_t>(q) * H + i];
      out[i] = t;
    }
    return out;
  }
  // Replays `enqueue(l)` for every layer from a graph; best of three rounds, us a layer.
  template <typename F>
  float Time(F enqueue) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < layers; ++l) enqueue(l);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < 3; ++r) {
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < iters; ++i) CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms * 1000.f / iters / layers);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    return best;
  }
  void Gemvs(int l, int tg, int td) {
    gannet::kernels::GemvParams g;
    g.x = x, g.w = gu[l], g.out = act, g.m = 1, g.n = 2 * I, g.k = H, g.ldx = H, g.ldo = I,
    g.glu = I, g.tile = static_cast<gannet::kernels::GemvTile>(tg);
    CK(gannet::kernels::LaunchGemv(g, st));
    gannet::kernels::GemvParams d;
    d.x = act, d.w = down[l], d.out = y, d.m = 1, d.n = H, d.k = I, d.ldx = I, d.ldo = H,
    d.tile = static_cast<gannet::kernels::GemvTile>(td);
    CK(gannet::kernels::LaunchGemv(d, st));
  }
  void Baseline() {
    const double bytes = 2.0 * fused_n;
    copy = Time([&](int l) {
      CK(gannet::kernels::Launch(ReadAll, dim3(132 * 8), dim3(256), 0, st,
                                 reinterpret_cast<const int4*>(gu[l]), gu_n * 2 / 16, sink));
      CK(gannet::kernels::Launch(ReadAll, dim3(132 * 8), dim3(256), 0, st,
                                 reinterpret_cast<const int4*>(down[l]), down_n * 2 / 16, sink));
    });
    std::printf("read of a layer's %.1f MB (two read kernels, PDL chain): %.2f us (%.0f GB/s)\n",
                bytes / 1e6, copy, bytes / copy / 1e3);
    Reset();
    LaunchUpdate(0);
    Gemvs(0, 0, 0);
    std::printf("two GEMVs: layer 0 rel-L2 against double %.2e\n", Rel(ReadY(0)));
    for (int tg : {0, 1}) {
      for (int td : {0, 1, 2}) {
        const float t = Time([&](int l) {
          LaunchUpdate(0);
          Gemvs(l, tg, td);
        });
        std::printf("two GEMVs, tiles %d/%d + update: %.2f us a layer (%.1f%% of the read)\n", tg,
                    td, t, 100.f * copy / t);
      }
    }
  }
  template <int C, int K>
  void Fused() {
    using S = Shape<H, C>;
    constexpr int P = I / C;
    static_assert(I % C == 0);
    Prepare(FusedMlp<H, C, K>, S::kSmem, K > 1);
    int clusters = 0;
    {
      cudaLaunchAttribute a[1];
      a[0].id = cudaLaunchAttributeClusterDimension;
      a[0].val.clusterDim = {static_cast<unsigned>(K), 1, 1};
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(P);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = S::kSmem;
      cfg.attrs = a;
      cfg.numAttrs = 1;
      CK(cudaOccupancyMaxActiveClusters(&clusters, FusedMlp<H, C, K>, &cfg));
    }
    for (int l = 0; l < layers; ++l) Repack<<<1024, 256>>>(gu[l], down[l], fused[l], H, I, C);
    CK(cudaDeviceSynchronize());
    const int np = P / K;
    Reset();
    LaunchUpdate(0);
    CK((LaunchFused<H, C, K>(x, fused[0], part, P, st)));
    const auto a = ReadY(np);
    Reset();
    LaunchUpdate(0);
    CK((LaunchFused<H, C, K>(x, fused[0], part, P, st)));
    const auto b = ReadY(np);
    const float t = Time([&](int l) {
      LaunchUpdate(np);
      CK((LaunchFused<H, C, K>(x, fused[l], part, P, st)));
    });
    const float alone = Time([&](int l) { CK((LaunchFused<H, C, K>(x, fused[l], part, P, st))); });
    std::printf(
        "fused C %3d (%3d CTAs, %2d stages of %5d B), cluster %2d (%2d resident, %2d needed): "
        "rel-L2 %.2e%s; + update %.2f us a layer (%.1f%% of the read); alone %.2f\n",
        C, P, S::kStages, S::kStageBytes, K, clusters, P / K, Rel(a),
        std::equal(a.begin(), a.end(), b.begin()) ? "" : " (NOT run-to-run identical)", t,
        100.f * copy / t, alone);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 40;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  const int only = argc > 3 ? std::atoi(argv[3]) : 0;  // 1, 2, 3: one shape
  if (only == 0 || only == 1) {
    std::printf("\n== E2B layers 0-14: H 1536, I 6144 ==\n");
    Bench<1536, 6144> b(layers, iters);
    b.Baseline();
    b.Fused<48, 4>();
    b.Fused<64, 8>();
    b.Fused<64, 16>();
    b.Fused<96, 8>();
  }
  if (only == 0 || only == 2) {
    std::printf("\n== E2B layers 15-34: H 1536, I 12288 ==\n");
    Bench<1536, 12288> b(layers, iters);
    b.Baseline();
    b.Fused<96, 4>();
    b.Fused<128, 8>();
    b.Fused<128, 16>();
    b.Fused<192, 8>();
  }
  if (only == 0 || only == 3) {
    std::printf("\n== E4B: H 2560, I 10240 ==\n");
    Bench<2560, 10240> b(layers, iters);
    b.Baseline();
    b.Fused<80, 4>();
    b.Fused<128, 8>();
    b.Fused<128, 16>();
    b.Fused<160, 8>();
  }
  return 0;
}
