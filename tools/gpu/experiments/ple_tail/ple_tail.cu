// Scratch experiment (session 34), not built by CMake: the PLE tail of an E2B/E4B layer (the
// update after the feed-forward block, the PLE gate GEMV, the PLE projection GEMV with its GeLU
// product, the update after it and the next norm) as ONE kernel on a cluster of 16 CTAs of 1024
// threads, the form session 33's prototype (../ple_cluster.cu) suggested. It was built into the
// engine behind a Backend::PleTail op (commit 59d845f and its successors; the test compared it
// with the separate ops and the CPU and passed) and measured SLOWER on an H200 (E4B batch 1
// 3.29 -> 3.39-3.54 ms, E2B 2.00 -> 2.08-2.12 ms), so the engine keeps its separate kernels;
// bench/RESULTS_DECODE.md, session 34, has the numbers and the reasons. What a CTA does: its
// sixteenth of both weight matrices (16 gate rows, hidden / 16 projection rows, 160 KB at E4B)
// comes into shared memory by bulk copies (TMA) before the PDL wait; after it every CTA applies
// the feed-forward update to the whole row, computes its gate rows and sends the gated values to
// every CTA through distributed shared memory, computes its projection rows, and the two norms'
// sums of squares cross the cluster the same way: three cluster barriers in place of three kernel
// boundaries. timing.cu times it alone (it includes this file with GANNET_PLE_TAIL_TIMESTAMPS).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <tuple>

#include "kernels/common/device_utils.cuh"
#include "kernels/common/launch.h"
#include "kernels/norm/post_norm_residual_row.cuh"
#include "tools/gpu/experiments/ple_tail/ple_tail.h"

namespace gannet::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kCluster = 16;
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kP = kPleTailWidth;
constexpr int kGateRows = kP / kCluster;  // a CTA's gate rows: 16
constexpr int kMaxHidden = 4096;
constexpr int kMaxPer = kMaxHidden / kThreads;   // a thread's elements of a row
constexpr int kHiddenMultiple = 512;             // a CTA's hidden / 16 projection rows: 32 a warp
constexpr int kMaxProjRowsPerWarp = kMaxHidden / kCluster / kWarps;  // 8
constexpr int kQuarters = kWarps / (kGateRows / 2);  // warps sharing a pair of gate rows: 4

size_t SmemBytes(int rows, int hidden) {
  // Gate rows and projection rows (bf16: 32 * hidden bytes each), the rows of x after the
  // feed-forward update (f32), the gated values (f32) and the norms' per-CTA sums.
  return static_cast<size_t>(64) * hidden + static_cast<size_t>(4) * rows * hidden +
         static_cast<size_t>(4) * rows * kP + static_cast<size_t>(4) * 2 * rows * kCluster;
}

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A bulk copy (the tensor memory accelerator) of `bytes` (a multiple of 16) from global to this
// CTA's shared memory, counted against the transaction count of mbarrier `bar`. The SM's own loads
// keep too few bytes in flight to fill 160 KB of shared memory from DRAM in time (~10 GB/s an SM
// with 16-byte cp.async, H200); the copy engine's requests are kilobytes each.
__device__ __forceinline__ void BulkLoad(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          SmemAddr(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void WaitPhase0(uint64_t* bar) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SmemAddr(bar))
        : "memory");
  }
}

template <int kN>
__device__ __forceinline__ void LoadBf16(const bf16* p, float (&v)[kN]) {
  static_assert(kN == 4 || kN == 8);
  __nv_bfloat162 w[kN / 2];
  if constexpr (kN == 8) {
    *reinterpret_cast<Bf16x8*>(w) = *reinterpret_cast<const Bf16x8*>(p);
  } else {
    *reinterpret_cast<uint2*>(w) = *reinterpret_cast<const uint2*>(p);
  }
#pragma unroll
  for (int j = 0; j < kN / 2; ++j) {
    const float2 f = __bfloat1622float2(w[j]);
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
  }
}

// A sum over the CTA's warps of per-warp values: wsum[warp][t] holds them (after a barrier).
template <int kRows>
__device__ __forceinline__ float WarpsSum(const float (&wsum)[kWarps][kRows], int t) {
  float tot = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) tot += wsum[w][t];
  return tot;
}

// Phase timestamps for timing.cu (which includes this file).
#ifdef GANNET_PLE_TAIL_TIMESTAMPS
__device__ unsigned long long g_ple_tail_ts[kCluster][8];
// Kept in registers and stored at the exit (a store before a cluster barrier would add its
// acknowledgement to the barrier).
#define PLE_TS(i) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ts_[i]) :: "memory");
#else
#define PLE_TS(i)
#endif

template <int kRows>
__global__ void __launch_bounds__(kThreads, 1) PleTailKernel(const PleTailParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
#ifdef GANNET_PLE_TAIL_TIMESTAMPS
  unsigned long long ts_[8] = {};
#endif
  PLE_TS(0);
  __shared__ float wsum[kWarps][kRows];
  __shared__ float gpart[kRows][kGateRows][kQuarters];
  __shared__ __align__(8) uint64_t weights_in;  // the weights' bulk copies
  cg::cluster_group cluster = cg::this_cluster();
  const int H = p.hidden;
  const int R = H / kCluster;  // this CTA's projection rows
  const int rw = R / kWarps;   // a warp's projection rows (<= kMaxProjRowsPerWarp)
  const int c = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  bf16* sg = reinterpret_cast<bf16*>(smem);
  bf16* sp = sg + kGateRows * H;
  float* sx = reinterpret_cast<float*>(sp + R * kP);
  float* sgated = sx + kRows * H;
  float* ssum = sgated + kRows * kP;  // [2][kRows][kCluster]

  // Constants, before the wait: this CTA's weight rows into shared memory (bulk copies of 16 KB
  // by one thread), and the norm weights and scalar this thread applies.
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SmemAddr(&weights_in)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const uint32_t half = 32u * static_cast<uint32_t>(H);  // each matrix's share: 32 H bytes
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(&weights_in)),
                 "r"(2 * half)
                 : "memory");
    const char* g = static_cast<const char*>(p.gate_w) + static_cast<size_t>(c) * half;
    const char* q = static_cast<const char*>(p.proj_w) + static_cast<size_t>(c) * half;
    constexpr uint32_t kChunk = 16384;
    for (uint32_t off = 0; off < half; off += kChunk) {
      const uint32_t n = min(kChunk, half - off);
      BulkLoad(smem + off, g + off, n, &weights_in);
      BulkLoad(smem + half + off, q + off, n, &weights_in);
    }
  }
  const bool ff = p.ff_out != nullptr;
  float ffw[kMaxPer];
#pragma unroll
  for (int k = 0; k < kMaxPer; ++k) {
    const int i = tid + k * kThreads;
    ffw[k] = ff && i < H ? p.ff_post_w[i] : 0.f;
  }
  const bool mine = lane < rw;  // this lane finishes projection row `gi`
  const int gi = c * R + warp * rw + lane;
  const float pw = mine ? p.post_w[gi] : 0.f;
  const bool next_weighted = p.next_w != nullptr;
  const float nw = mine && next_weighted ? p.next_w[gi] : 1.f;
  const float s = p.scalar != nullptr ? *p.scalar : 1.f;
  PdlEnter();
  PLE_TS(2);

  // This thread's gated value to send: row `grow` of token `gt`, to CTA `gdest`.
  const int gdest = tid % kCluster, grow = (tid / kCluster) % kGateRows, gt = tid / (kCluster * kGateRows);
  const bool sender = gt < kRows;
  const float up = sender ? ToFloat(static_cast<const bf16*>(p.ple_in)[gt * p.ldp + c * kGateRows + grow]) : 0.f;

  // The feed-forward update of the whole row, kept in shared memory: x + RmsNorm(ff_out) * w.
  const bf16* ff_out = static_cast<const bf16*>(p.ff_out);
  float inv_ff[kRows];
  if (ff) {
#pragma unroll
    for (int t = 0; t < kRows; ++t) {
      float ss = 0.f;
#pragma unroll
      for (int k = 0; k < kMaxPer; ++k) {
        const int i = tid + k * kThreads;
        if (i < H) {
          const float y = ToFloat(ff_out[t * p.ldf + i]);
          ss += y * y;
        }
      }
      ss = WarpSum(ss);
      if (lane == 0) wsum[warp][t] = ss;
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kRows; ++t) inv_ff[t] = InvRms(WarpsSum(wsum, t), H, p.eps);
  }
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
#pragma unroll
    for (int k = 0; k < kMaxPer; ++k) {
      const int i = tid + k * kThreads;
      if (i < H) {
        float v = p.x[t * p.ldx + i];
        if (ff) v = v + (ToFloat(ff_out[t * p.ldf + i]) * inv_ff[t]) * ffw[k];
        sx[t * H + i] = v;
      }
    }
  }
  __syncthreads();
  WaitPhase0(&weights_in);
  PLE_TS(3);

  // Gate: warp w takes rows 2 (w / 4) and 2 (w / 4) + 1 over the 128-element chunks j = w % 4
  // (mod 4) of the row, lane l elements 4 l .. 4 l + 3 of each.
  {
    const int r0 = 2 * (warp / kQuarters), q = warp % kQuarters;
    float acc[2][kRows];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int t = 0; t < kRows; ++t) acc[r][t] = 0.f;
    }
    for (int k = q * 128 + lane * 4; k < H; k += kQuarters * 128) {
      float w0[4], w1[4];
      LoadBf16(sg + r0 * H + k, w0);
      LoadBf16(sg + (r0 + 1) * H + k, w1);
#pragma unroll
      for (int t = 0; t < kRows; ++t) {
        const float4 xv = *reinterpret_cast<const float4*>(sx + t * H + k);
        acc[0][t] += w0[0] * xv.x + w0[1] * xv.y + w0[2] * xv.z + w0[3] * xv.w;
        acc[1][t] += w1[0] * xv.x + w1[1] * xv.y + w1[2] * xv.z + w1[3] * xv.w;
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int t = 0; t < kRows; ++t) acc[r][t] += __shfl_xor_sync(0xffffffffu, acc[r][t], off);
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int t = 0; t < kRows; ++t) gpart[t][r0 + r][q] = acc[r][t];
      }
    }
  }
  __syncthreads();
  // gated = bf16(gelu(bf16(gate)) * ple_in), each value sent by 16 threads, one to each CTA.
  if (sender) {
    float g = 0.f;
#pragma unroll
    for (int q = 0; q < kQuarters; ++q) g += gpart[gt][grow][q];
    g = ToFloat(FromFloat<bf16>(g));
    const float a = ToFloat(FromFloat<bf16>(GeluTanh(g) * up));
    cluster.map_shared_rank(sgated, gdest)[gt * kP + c * kGateRows + grow] = a;
  }
  cluster.sync();
  PLE_TS(4);

  // Projection rows: lane i < rw of a warp keeps row warp * rw + i's bf16 result, o[t].
  float gv[kRows][8];
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    const float4 a = *reinterpret_cast<const float4*>(sgated + t * kP + lane * 8);
    const float4 b = *reinterpret_cast<const float4*>(sgated + t * kP + lane * 8 + 4);
    gv[t][0] = a.x, gv[t][1] = a.y, gv[t][2] = a.z, gv[t][3] = a.w;
    gv[t][4] = b.x, gv[t][5] = b.y, gv[t][6] = b.z, gv[t][7] = b.w;
  }
  float o[kRows];
#pragma unroll
  for (int t = 0; t < kRows; ++t) o[t] = 0.f;
  float part[kMaxProjRowsPerWarp][kRows];
#pragma unroll
  for (int r = 0; r < kMaxProjRowsPerWarp; ++r) {
    if (r < rw) {
      float w[8];
      LoadBf16(sp + (warp * rw + r) * kP + lane * 8, w);
#pragma unroll
      for (int t = 0; t < kRows; ++t) {
        float d = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) d += w[j] * gv[t][j];
        part[r][t] = d;
      }
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int r = 0; r < kMaxProjRowsPerWarp; ++r) {
      if (r < rw) {
#pragma unroll
        for (int t = 0; t < kRows; ++t) part[r][t] += __shfl_xor_sync(0xffffffffu, part[r][t], off);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kMaxProjRowsPerWarp; ++r) {
    if (r < rw && lane == r) {
#pragma unroll
      for (int t = 0; t < kRows; ++t) o[t] = ToFloat(FromFloat<bf16>(part[r][t]));
    }
  }

  // A sum of squares over each row's hidden elements, this CTA's projection rows holding `v`:
  // per warp, per CTA, then to every CTA's slot c, after which the caller syncs the cluster.
  auto cluster_sums = [&](const float (&v)[kRows], float* dst) {
#pragma unroll
    for (int t = 0; t < kRows; ++t) {
      const float w = WarpSum(mine ? v[t] * v[t] : 0.f);
      if (lane == 0) wsum[warp][t] = w;
    }
    __syncthreads();
    if (tid < kRows * kCluster) {
      const int t = tid / kCluster;
      cluster.map_shared_rank(dst, tid % kCluster)[t * kCluster + c] = WarpsSum(wsum, t);
    }
  };
  auto cluster_inv_rms = [&](const float* sums, int t) {
    float tot = 0.f;
#pragma unroll
    for (int d = 0; d < kCluster; ++d) tot += sums[t * kCluster + d];
    return InvRms(tot, H, p.eps);
  };

  cluster_sums(o, ssum);
  cluster.sync();
  PLE_TS(5);
  float xr[kRows];
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    float r = mine ? sx[t * H + gi] + (o[t] * cluster_inv_rms(ssum, t)) * pw : 0.f;
    if (p.scalar != nullptr) r *= s;
    xr[t] = r;
    if (mine) p.x[t * p.ldx + gi] = r;
  }
  if (p.next_out == nullptr) return;  // uniform: no CTA touches another's memory after here
  cluster_sums(xr, ssum + kRows * kCluster);
  cluster.sync();
  PLE_TS(6);
  bf16* next_out = static_cast<bf16*>(p.next_out);
#pragma unroll
  for (int t = 0; t < kRows; ++t) {
    const float v = xr[t] * cluster_inv_rms(ssum + kRows * kCluster, t);
    if (mine) next_out[t * p.ldo + gi] = FromFloat<bf16>(next_weighted ? v * nw : v);
  }
  PLE_TS(7);
#ifdef GANNET_PLE_TAIL_TIMESTAMPS
  if (threadIdx.x == 0) {
    for (int i = 0; i < 8; ++i) g_ple_tail_ts[blockIdx.x][i] = ts_[i];
  }
#endif
#endif
}

using KernelFn = void (*)(const PleTailParams);

KernelFn KernelFor(int rows) {
  switch (rows) {
    case 1: return PleTailKernel<1>;
    case 2: return PleTailKernel<2>;
    default: return nullptr;
  }
}

// Opting into large shared memory and a non-portable cluster size is per device; set both on
// every launch (cheap, and legal while a stream is captured) instead of keeping per-process state.
cudaError_t PrepareKernel(KernelFn kernel, size_t smem) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
  if (err == cudaSuccess) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }
  return err;
}

cudaLaunchConfig_t ClusterConfig(size_t smem, cudaStream_t stream, cudaLaunchAttribute (&attr)[2]) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kCluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kCluster);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return config;
}

// Whether the device can run the kernel for `rows` rows of `hidden`: asked of the driver once per
// (device, rows, hidden). No lock is held across the CUDA calls (see PdlAllowed: a lazy kernel
// load waits for the device's queued work, which may be another rank's collective).
bool DeviceRuns(int rows, int hidden) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  static std::shared_mutex mu;
  static std::map<std::tuple<int, int, int>, bool> cache;
  const auto key = std::make_tuple(device, rows, hidden);
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const KernelFn kernel = KernelFor(rows);
  // Dynamic shared memory and the kernel's static wsum.
  const size_t smem = SmemBytes(rows, hidden);
  const size_t total_smem = smem + sizeof(float) * kWarps * rows;
  int major = 0, optin = 0, clusters = 0;
  cudaFuncAttributes attrs{};
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t config = ClusterConfig(smem, nullptr, attr);
  bool failed = false;  // a CUDA call refused: its error is cleared, the answer is "no"
  auto ok = [&](cudaError_t e) {
    failed |= e != cudaSuccess;
    return e == cudaSuccess;
  };
  const bool runs =
      ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) && major >= 9 &&
      ok(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) &&
      total_smem <= static_cast<size_t>(optin) && ok(cudaFuncGetAttributes(&attrs, kernel)) &&
      attrs.binaryVersion >= 90 && ok(PrepareKernel(kernel, smem)) &&
      ok(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config)) && clusters > 0;
  if (failed) (void)cudaGetLastError();
  std::unique_lock<std::shared_mutex> lock(mu);
  cache.emplace(key, runs);
  return runs;
}

}  // namespace

bool PleTailRuns(int rows, int hidden, int p) {
  static const bool enabled = [] {
    const char* v = std::getenv("GANNET_PLE_TAIL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  if (!enabled || p != kP || rows < 1 || rows > kPleTailMaxRows || hidden < kHiddenMultiple ||
      hidden > kMaxHidden || hidden % kHiddenMultiple != 0) {
    return false;
  }
  return DeviceRuns(rows, hidden);
}

cudaError_t LaunchPleTail(const PleTailParams& p, cudaStream_t stream) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!PleTailRuns(p.rows, p.hidden, p.p) || p.x == nullptr || p.gate_w == nullptr ||
      p.ple_in == nullptr || p.proj_w == nullptr || p.post_w == nullptr ||
      (p.ff_out != nullptr && p.ff_post_w == nullptr) || !aligned(p.gate_w) || !aligned(p.proj_w)) {
    return cudaErrorInvalidValue;
  }
  const KernelFn kernel = KernelFor(p.rows);
  const size_t smem = SmemBytes(p.rows, p.hidden);
  cudaError_t err = PrepareKernel(kernel, smem);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t config = ClusterConfig(smem, stream, attr);
  config.numAttrs = PdlAllowed(reinterpret_cast<const void*>(kernel)) ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace gannet::kernels
