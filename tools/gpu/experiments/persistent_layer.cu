// Experiment (issue 14, item 4): how fast can a batch-1 E2B step's chain of short kernels run as
// ONE persistent kernel whose weights stream into shared memory ahead of the activations they
// wait for? Not part of the engine; it decides whether the persistent batch-1 kernel is worth
// building (bench/RESULTS_DECODE.md, session 31).
//
// The same op sequence, per layer of an E2B sliding layer (hidden 1536, 8 query heads and one KV
// head of 256, sliding window 512, MLP 6144, PLE 256):
//   QKV GEMV -> attention splits (16 tokens each) -> split merge -> o_proj GEMV -> update ->
//   gate/up GEMV with the GeLU product -> down GEMV -> update -> PLE gate GEMV (GeLU x PLE input)
//   -> PLE projection GEMV -> update
// where an update is the post-norm residual step (h += RmsNorm(t) * w_post; x = RmsNorm(h) * w).
// Omitted from both: q/k norms and RoPE, writing the new token's K/V, the full layers' head dim
// 512, the LM head and sampling. Every layer has its own weights (the step streams 2.5 GB).
//
// Two implementations run the ops with the same arithmetic for every output, so they must agree
// bit for bit (compared on the final residual and the last MLP activation; a missed dependency
// shows as a difference):
//   chain:      one kernel per op (an update is a one-CTA kernel, as in the engine; a GEMV CTA
//               makes 8 outputs, a warp each), launched with PDL and replayed from a CUDA graph:
//               the engine's batch-1 structure, with simpler kernels than the engine's.
//   persistent: one CTA per SM (cooperative launch), 8 consumer warps and a producer warp. An op
//               is cut into items of at most 24 KB of weights (or K/V rows); item i of op j goes
//               to CTA (first_j + i) mod SMs. The producer walks its CTA's items of the whole step
//               in order and copies each into a ring of 8 shared-memory stages (cp.async.bulk,
//               mbarrier), waiting only for a free stage, never for activations. Consumers wait
//               for every CTA to have finished the op before (a progress flag per CTA, each on its
//               own 128-byte line, polled by one thread each, then one fence), load the op's input
//               into shared memory, then take the CTA's items in turn, one warp an item (all its
//               rows at once) and free its stage; an attention item takes all 8 warps (one a
//               head). An update runs in every CTA that consumes it (same bits in each; the CTA
//               owning the op's first item stores the residual), so it is not an op of its own.
//               Two diagnostic modes time the weights alone (the ring streamed, no compute, no
//               waits) and the dependencies alone (no weights; the stages read as they are).
// A traced step stamps %globaltimer per CTA and op; the table gives, per op of the middle layers,
// its span (from the last CTA's end of the op before to the last CTA's end of this one), the
// wait (first CTAs past the flags after that end; %globaltimer is not exactly in step across SMs,
// so a minimum can read slightly negative), the input's load (and update) and the items.
//
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -I. tools/gpu/experiments/persistent_layer.cu -o /tmp/pl
// Run:   /tmp/pl [layers=35] [iters=50]; PL_STRIDE: the flags' spacing in words (default 32);
//        PL_SPLIT=1: an item's outputs spread over the warps instead of one warp an item.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/common/device_utils.cuh"
#include "tools/gpu/experiments/bulk_ring.cuh"

using gannet::kernels::bf16;
using gannet::kernels::Bf16x8;
using gannet::kernels::GeluTanh;
using gannet::kernels::Unpack8;
using gannet::kernels::WarpSum;

#include "check.cuh"

namespace {

constexpr int kHidden = 1536, kHeads = 8, kHeadDim = 256, kQkv = (kHeads + 2) * kHeadDim;
constexpr int kInter = 6144, kPle = 256, kWindow = 512;
constexpr int kConsumers = 256, kThreads = kConsumers + 32;  // 8 consumer warps, 1 producer
// One stage a consumer warp (a warp can then never run a round ahead of its stage's barrier).
constexpr int kStages = kConsumers / 32, kStageBytes = 24 * 1024;
constexpr int kSplitTokens = 16;  // an attention item (K and V rows) fills a stage
constexpr int kSplits = kWindow / kSplitTokens;
constexpr int kMaxK = kInter;  // the widest GEMV input held in shared memory as f32

enum OpKind : int { kGemv, kGemvGlu, kGemvPleGate, kAttention, kMerge };
// How a GEMV's input arrives: read as is, or as the update of the GEMV before it.
enum InKind : int { kInPlain, kInUpdate };

struct Op {
  int kind, in_kind;
  int n, k, rows, items;  // outputs, input length, outputs an item (GLU: gate/up pairs), items
  const bf16* w;          // [n][k] (kGemvGlu: [2n][k], gate rows then up rows); K/V for attention
  const bf16* v;          // attention: the V rows
  const bf16* x;          // input (kInUpdate: the projection t the update normalises)
  const bf16* h_in;       // kInUpdate: residual in
  bf16* h_out;            // kInUpdate: residual out (written once)
  const float* w_post;    // kInUpdate: post-norm weight
  const float* w_next;    // kInUpdate: next norm weight
  const bf16* ple;        // kGemvPleGate: the layer's PLE input
  bf16* out;
  float* partial;  // attention: [splits][heads][2 + 256]; merge reads it
};

constexpr int kPartial = 2 + kHeadDim;

// ---- shared math (both implementations) -----------------------------------------------------

// Block-wide sum over the 256 consumer threads in a fixed order. `bar` is a barrier the 256
// threads share (named barrier 1 in the persistent kernel, the CTA's in the chain).
template <typename Bar>
__device__ float ConsumerSum(float v, float* scratch, Bar bar) {
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  bar();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kConsumers / 32; ++i) s += scratch[i];
  bar();
  return s;
}

// The post-norm update: h' = h + bf16(RmsNorm(t) * w_post), x = bf16(RmsNorm(h') * w_next);
// x lands in xs (f32 holding bf16 values), h' in hs. The weights are constants, loaded before the
// wait (UpdateConsts); t and h are read together through L2 (other SMs wrote them: no stale L1
// lines), one dependent round trip.
constexpr int kPer = kHidden / kConsumers;
struct UpdateConsts {
  float wp[kPer], wn[kPer];
};
__device__ UpdateConsts LoadUpdateConsts(const Op& op) {
  UpdateConsts c;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    c.wp[i] = op.w_post[threadIdx.x + i * kConsumers];
    c.wn[i] = op.w_next[threadIdx.x + i * kConsumers];
  }
  return c;
}
template <typename Bar>
__device__ void Update(const Op& op, const UpdateConsts& c, float* xs, float* hs, float* scratch,
                       Bar bar) {
  float t[kPer], h[kPer], ss = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    t[i] = __bfloat162float(__ldcg(op.x + threadIdx.x + i * kConsumers));
    h[i] = __bfloat162float(__ldcg(op.h_in + threadIdx.x + i * kConsumers));
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) ss += t[i] * t[i];
  const float r1 = rsqrtf(ConsumerSum(ss, scratch, bar) / kHidden + 1e-6f);
  float ss2 = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const float d = __bfloat162float(__float2bfloat16_rn(t[i] * r1 * c.wp[i]));
    h[i] = __bfloat162float(__float2bfloat16_rn(h[i] + d));
    ss2 += h[i] * h[i];
  }
  const float r2 = rsqrtf(ConsumerSum(ss2, scratch, bar) / kHidden + 1e-6f);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int j = threadIdx.x + i * kConsumers;
    hs[j] = h[i];
    xs[j] = __bfloat162float(__float2bfloat16_rn(h[i] * r2 * c.wn[i]));
  }
}

// One output's dot product, by one warp: lane l takes the row's 16-byte chunks l, l + 32, ... in
// order, four loaded before any is used, then the warp sum. The row is in shared memory (a stage)
// or (kGlobal) global; x is f32 in shared memory. Both implementations compute every output with
// this, so their bits agree however they group rows.
template <bool kGlobal>
__device__ float RowDot(const bf16* row, int k, const float* xs) {
  constexpr int kDepth = 4;
  const int chunks = k / 8, lane = threadIdx.x & 31;
  float acc = 0.f;
  for (int c0 = lane; c0 < chunks; c0 += kDepth * 32) {
    int4 wv[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int c = c0 + d * 32;
      const int4* p = reinterpret_cast<const int4*>(row + c * 8);
      wv[d] = c < chunks ? (kGlobal ? __ldcs(p) : *p) : int4{};
    }
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int c = c0 + d * 32;
      if (c >= chunks) break;
      const float4 x0 = *reinterpret_cast<const float4*>(xs + c * 8);
      const float4 x1 = *reinterpret_cast<const float4*>(xs + c * 8 + 4);
      const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float wf[8];
      Unpack8(*reinterpret_cast<const Bf16x8*>(&wv[d]), wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += xv[j] * wf[j];
    }
  }
  return WarpSum(acc);
}

// Output j of a GEMV op from its weight row (and, for the GLU, its up row), by one warp.
template <bool kGlobal>
__device__ void WarpOutput(const Op& op, int j, const bf16* row, const bf16* up_row,
                           const float* xs) {
  const float s = RowDot<kGlobal>(row, op.k, xs);
  float v;
  if (op.kind == kGemvGlu) {
    const float u = RowDot<kGlobal>(up_row, op.k, xs);
    v = GeluTanh(__bfloat162float(__float2bfloat16_rn(s))) *
        __bfloat162float(__float2bfloat16_rn(u));
  } else if (op.kind == kGemvPleGate) {
    v = GeluTanh(__bfloat162float(__float2bfloat16_rn(s))) * __bfloat162float(op.ple[j]);
  } else {
    v = s;
  }
  if ((threadIdx.x & 31) == 0) op.out[j] = __float2bfloat16_rn(v);
}

// A whole stage item by one warp: its kRows rows (w, row-major, in shared memory) all at once, so
// the rows' loads, products and warp sums overlap (RowDot's arithmetic for each row: the same
// bits). GLU: rows 0..kRows/2-1 are gate rows, the rest the matching up rows.
template <int kRows>
__device__ void WarpItem(const Op& op, int item, const bf16* w, const float* xs) {
  const int chunks = op.k / 8, lane = threadIdx.x & 31;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  for (int c = lane; c < chunks; c += 32) {
    const float4 x0 = *reinterpret_cast<const float4*>(xs + c * 8);
    const float4 x1 = *reinterpret_cast<const float4*>(xs + c * 8 + 4);
    const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int4 raw = *reinterpret_cast<const int4*>(w + static_cast<int64_t>(r) * op.k + c * 8);
      float wf[8];
      Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] += xv[j] * wf[j];
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if (lane != 0) return;
  if (op.kind == kGemvGlu) {
    constexpr int kHalf = kRows / 2;
#pragma unroll
    for (int p = 0; p < kHalf; ++p) {
      const float g = __bfloat162float(__float2bfloat16_rn(acc[p]));
      const float u = __bfloat162float(__float2bfloat16_rn(acc[kHalf + p]));
      op.out[item * kHalf + p] = __float2bfloat16_rn(GeluTanh(g) * u);
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int j = item * kRows + r;
    float v = acc[r];
    if (op.kind == kGemvPleGate)
      v = GeluTanh(__bfloat162float(__float2bfloat16_rn(v))) * __bfloat162float(op.ple[j]);
    op.out[j] = __float2bfloat16_rn(v);
  }
}

__device__ void WarpItemAny(const Op& op, int item, const bf16* w, const float* xs) {
  const int rows = op.kind == kGemvGlu ? 2 * op.rows : op.rows;
  switch (rows) {
    case 2:
      WarpItem<2>(op, item, w, xs);
      break;
    case 6:
      WarpItem<6>(op, item, w, xs);
      break;
    case 8:
      WarpItem<8>(op, item, w, xs);
      break;
    default:
      __trap();  // a row count with no instance: the host's item sizes changed
  }
}

// Attention split `item` (kSplitTokens keys): warp h is query head h against the one KV head;
// K and V rows in ks / vs (shared or global), q as f32 in qs. Writes (max, sum, acc[256]).
template <bool kGlobal>
__device__ void AttentionItem(const Op& op, int item, const bf16* ks, const bf16* vs,
                              const float* qs) {
  const int lane = threadIdx.x & 31, h = threadIdx.x >> 5;
  if (h >= kHeads) return;
  float q[8], acc[8] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = qs[h * kHeadDim + lane * 8 + j];
  // Every key's partial dot first, then the warp sums level by level across the keys (16
  // independent shuffles a level instead of 16 dependent sums).
  float s[kSplitTokens], m = -INFINITY;
#pragma unroll
  for (int tk = 0; tk < kSplitTokens; ++tk) {
    const int4* p = reinterpret_cast<const int4*>(ks + tk * kHeadDim + lane * 8);
    const int4 raw = kGlobal ? __ldcs(p) : *p;
    float kf[8], d = 0.f;
    Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), kf);
#pragma unroll
    for (int j = 0; j < 8; ++j) d += q[j] * kf[j];
    s[tk] = d;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int tk = 0; tk < kSplitTokens; ++tk) s[tk] += __shfl_xor_sync(0xffffffffu, s[tk], off);
  }
#pragma unroll
  for (int tk = 0; tk < kSplitTokens; ++tk) {
    s[tk] *= 0.0625f;
    m = fmaxf(m, s[tk]);
  }
  float l = 0.f;
#pragma unroll
  for (int tk = 0; tk < kSplitTokens; ++tk) {
    const float p = __expf(s[tk] - m);
    l += p;
    const int4* pv = reinterpret_cast<const int4*>(vs + tk * kHeadDim + lane * 8);
    const int4 raw = kGlobal ? __ldcs(pv) : *pv;
    float vf[8];
    Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), vf);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += p * vf[j];
  }
  float* o = op.partial + (static_cast<int64_t>(item) * kHeads + h) * kPartial;
  if (lane == 0) o[0] = m, o[1] = l;
#pragma unroll
  for (int j = 0; j < 8; ++j) o[2 + lane * 8 + j] = acc[j];
}

// Merge of head `item`'s splits; thread d makes output element d.
__device__ void MergeItem(const Op& op, int item) {
  const int d = threadIdx.x;
  if (d >= kHeadDim) return;
  float ms[kSplits], ls[kSplits], as[kSplits];
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) {  // every load issued before any is used
    const float* p = op.partial + (static_cast<int64_t>(sp) * kHeads + item) * kPartial;
    ms[sp] = __ldcg(p), ls[sp] = __ldcg(p + 1), as[sp] = __ldcg(p + 2 + d);
  }
  float mx = -INFINITY;
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) mx = fmaxf(mx, ms[sp]);
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) {
    const float sc = __expf(ms[sp] - mx);
    den += sc * ls[sp];
    num += sc * as[sp];
  }
  op.out[item * kHeadDim + d] = __float2bfloat16_rn(num / den);
}

// Input of a GEMV as f32 in xs (kInUpdate: the update, h' stored by the CTA that owns item 0).
template <typename Bar>
__device__ void LoadInput(const Op& op, const UpdateConsts& c, float* xs, float* hs, float* scratch,
                          bool store_h, Bar bar) {
  if (op.in_kind == kInUpdate) {
    Update(op, c, xs, hs, scratch, bar);
    if (store_h) {
      for (int j = threadIdx.x; j < kHidden; j += kConsumers)
        op.h_out[j] = __float2bfloat16_rn(hs[j]);
    }
  } else {
    for (int q = threadIdx.x; q < op.k / 8; q += kConsumers) {
      const int4 raw = __ldcg(reinterpret_cast<const int4*>(op.x) + q);
      Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), xs + q * 8);
    }
  }
  bar();
}

// ---- the chain: one kernel per op ---------------------------------------------------------

__device__ __forceinline__ void PdlWait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kChainOuts outputs a CTA, one a warp.
constexpr int kChainOuts = kConsumers / 32;
__global__ void __launch_bounds__(kConsumers) ChainGemv(Op op) {
  extern __shared__ float xs[];  // k
  PdlWait();
  for (int q = threadIdx.x; q < op.k / 8; q += kConsumers) {
    const int4 raw = reinterpret_cast<const int4*>(op.x)[q];
    Unpack8(*reinterpret_cast<const Bf16x8*>(&raw), xs + q * 8);
  }
  __syncthreads();
  const int j = blockIdx.x * kChainOuts + (threadIdx.x >> 5);
  if (j >= op.n) return;
  WarpOutput<true>(op, j, op.w + static_cast<int64_t>(j) * op.k,
                   op.w + static_cast<int64_t>(op.n + j) * op.k, xs);
}

__global__ void __launch_bounds__(kConsumers) ChainUpdate(Op op) {
  __shared__ float xs[kHidden], hs[kHidden], scratch[kConsumers / 32];
  const UpdateConsts c = LoadUpdateConsts(op);
  PdlWait();
  Update(op, c, xs, hs, scratch, [] { __syncthreads(); });
  for (int j = threadIdx.x; j < kHidden; j += kConsumers) {
    op.h_out[j] = __float2bfloat16_rn(hs[j]);
    op.out[j] = __float2bfloat16_rn(xs[j]);
  }
}

__global__ void __launch_bounds__(kConsumers) ChainAttention(Op op) {
  __shared__ float qs[kHeads * kHeadDim];
  PdlWait();
  for (int j = threadIdx.x; j < kHeads * kHeadDim; j += kConsumers)
    qs[j] = __bfloat162float(op.x[j]);
  __syncthreads();
  const int item = blockIdx.x;
  AttentionItem<true>(op, item, op.w + item * kSplitTokens * kHeadDim,
                      op.v + item * kSplitTokens * kHeadDim, qs);
}

__global__ void __launch_bounds__(kConsumers) ChainMerge(Op op) {
  PdlWait();
  MergeItem(op, blockIdx.x);
}

// ---- the persistent kernel ------------------------------------------------------------------

__device__ __forceinline__ uint32_t LoadRelaxed(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ConsumerBar() {
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumers) : "memory");
}

// Item i of op j belongs to CTA (first_j + i) mod G, first_j continuing where op j-1 ended so
// the CTAs take turns.
__device__ __forceinline__ int FirstItem(int first, int grid) {
  return (static_cast<int>(blockIdx.x) - first % grid + grid) % grid;
}

// Bytes of item i's weights (GLU: its gate rows, then as many up rows) and where they start.
__device__ uint32_t ItemBytes(const Op& op) { return op.rows * op.k * 2; }
__device__ const bf16* ItemRows(const Op& op, int i) {
  return op.w + static_cast<int64_t>(i) * op.rows * op.k;
}

__global__ void __launch_bounds__(kThreads, 1)
    Persistent(const Op* __restrict__ ops, const int* __restrict__ first, int n_ops,
               uint32_t* flags, uint32_t epoch, int stride, unsigned long long* trace, int mode,
               int split) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* stages = smem_raw;
  float* xs = reinterpret_cast<float*>(stages + kStages * kStageBytes);  // kMaxK
  float* hs = xs + kMaxK;                                                // kHidden
  float* scratch = hs + kHidden;                                         // one a warp
  uint64_t* full = reinterpret_cast<uint64_t*>(scratch + kConsumers / 32);
  uint64_t* empty = full + kStages;
  const int grid = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s)
      MbarInit(&full[s], 1), MbarInit(&empty[s], split ? kConsumers / 32 : 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // mode 1: the weights streamed through the ring with no compute and no waits for inputs;
  // mode 2: the dependency chain with no weights (the stages are read as they are).
  if (threadIdx.x >= kConsumers) {  // producer warp: one lane issues every copy
    if (threadIdx.x != kConsumers || mode == 2) return;
    uint32_t it = 0;
    for (int j = 0; j < n_ops; ++j) {
      const Op op = ops[j];
      if (op.kind == kMerge) continue;
      for (int i = FirstItem(first[j], grid); i < op.items; i += grid, ++it) {
        const int s = it % kStages;
        MbarWait(&empty[s], ((it / kStages) & 1) ^ 1);
        unsigned char* dst = stages + s * kStageBytes;
        if (op.kind == kAttention) {
          const uint32_t b = kSplitTokens * kHeadDim * 2;
          MbarExpectTx(&full[s], 2 * b);
          BulkCopy(dst, op.w + i * kSplitTokens * kHeadDim, b, &full[s]);
          BulkCopy(dst + b, op.v + i * kSplitTokens * kHeadDim, b, &full[s]);
        } else if (op.kind == kGemvGlu) {
          const uint32_t b = ItemBytes(op);
          MbarExpectTx(&full[s], 2 * b);
          BulkCopy(dst, ItemRows(op, i), b, &full[s]);
          BulkCopy(dst + b, ItemRows(op, i) + static_cast<int64_t>(op.n) * op.k, b, &full[s]);
        } else {
          MbarExpectTx(&full[s], ItemBytes(op));
          BulkCopy(dst, ItemRows(op, i), ItemBytes(op), &full[s]);
        }
      }
    }
    return;
  }

  // Consumers. A GEMV's items go to the warps in turn (warp w takes the CTA's items w, w + 8, ...
  // of the op; with 8 stages each warp has its own), one warp computing every output of its item
  // and freeing the stage alone; an attention item takes all 8 warps (one a head).
  auto cbar = [] { ConsumerBar(); };
  auto stamp = [&](int j, int k) {
    if (trace != nullptr && threadIdx.x == 0)
      trace[(static_cast<int64_t>(blockIdx.x) * n_ops + j) * 4 + k] = GlobalTimer();
  };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  uint32_t it = 0;
  const uint32_t base = epoch * n_ops;
  for (int j = 0; j < n_ops; ++j) {
    const Op op = ops[j];
    const int i0 = FirstItem(first[j], grid);
    stamp(j, 0);
    if (i0 < op.items) {
      UpdateConsts uc;
      if (op.in_kind == kInUpdate) uc = LoadUpdateConsts(op);
      // Wait until every CTA has finished op j - 1 (and so everything before it): thread c
      // polls CTA c's flag (relaxed), then one fence.
      if (j > 0 && mode != 1) {
        if (threadIdx.x < grid) {
          while (LoadRelaxed(flags + threadIdx.x * stride) < base + j) {
          }
        }
        if (threadIdx.x == 0) __threadfence();
        ConsumerBar();
      }
      stamp(j, 1);
      const bool gemv = op.kind == kGemv || op.kind == kGemvGlu || op.kind == kGemvPleGate;
      if (mode == 1) {
      } else if (gemv) {
        LoadInput(op, uc, xs, hs, scratch, i0 == 0, cbar);
        stamp(j, 2);
      } else if (op.kind == kAttention) {
        for (int q = threadIdx.x; q < kHeads * kHeadDim; q += kConsumers)
          xs[q] = __bfloat162float(__ldcg(op.x + q));
        ConsumerBar();
      }
      int local = 0;
      for (int i = i0; i < op.items; i += grid, ++local) {
        if (op.kind == kMerge) {
          if (mode != 1) MergeItem(op, i);
          continue;
        }
        const uint32_t my = it + local;
        const int s = my % kStages;
        const unsigned char* st = stages + s * kStageBytes;
        if (gemv && split) {
          // Output r of the CTA's local item goes to warp (local * rows + r) mod 8, so every
          // warp has work whatever an item's size. Every warp waits for every stage before it
          // frees it (count 8): a warp with nothing in it must not free the stage's next round.
          if (mode != 2) MbarWait(&full[s], (my / kStages) & 1);
          if (mode != 1) {
            const bf16* w = reinterpret_cast<const bf16*>(st);
            for (int r = (warp - local * op.rows % 8 + 8) % 8; r < op.rows; r += 8) {
              WarpOutput<false>(op, i * op.rows + r, w + static_cast<int64_t>(r) * op.k,
                                w + static_cast<int64_t>(op.rows + r) * op.k, xs);
            }
          }
          __syncwarp();
          if (lane == 0) MbarArrive(&empty[s]);
        } else if (gemv) {
          if (local % (kConsumers / 32) != warp) continue;
          if (mode != 2) MbarWait(&full[s], (my / kStages) & 1);
          if (mode != 1) WarpItemAny(op, i, reinterpret_cast<const bf16*>(st), xs);
          __syncwarp();
          if (lane == 0) MbarArrive(&empty[s]);
        } else {  // attention: all 8 warps, one a head
          if (mode != 2) MbarWait(&full[s], (my / kStages) & 1);
          if (mode != 1) {
            AttentionItem<false>(op, i, reinterpret_cast<const bf16*>(st),
                                 reinterpret_cast<const bf16*>(st + kSplitTokens * kHeadDim * 2),
                                 xs);
          }
          if (split) {  // each warp frees the stage after its head (count 8)
            __syncwarp();
            if (lane == 0) MbarArrive(&empty[s]);
          } else {
            ConsumerBar();
            if (threadIdx.x == 0) MbarArrive(&empty[s]);
          }
        }
      }
      if (op.kind != kMerge) it += local;
      ConsumerBar();
    }
    stamp(j, 3);
    if (threadIdx.x == 0) StoreRelease(flags + blockIdx.x * stride, base + j + 1);
  }
}

// ---- host -----------------------------------------------------------------------------------

uint32_t g_rng = 12345;
float Rand() {
  g_rng = g_rng * 1664525u + 1013904223u;
  return (static_cast<int>(g_rng >> 9) % 2001 - 1000) / 1000.f;
}
bf16* RandBf16(size_t n, float scale) {
  std::vector<bf16> h(n);
  for (auto& v : h) v = __float2bfloat16(Rand() * scale);
  bf16* d;
  CK(cudaMalloc(&d, n * 2));
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}
float* RandF32(size_t n) {
  std::vector<float> h(n);
  for (auto& v : h) v = 1.f + 0.1f * Rand();
  float* d;
  CK(cudaMalloc(&d, n * 4));
  CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
  return d;
}
template <typename T>
T* Zeros(size_t n) {
  T* d;
  CK(cudaMalloc(&d, n * sizeof(T)));
  CK(cudaMemset(d, 0, n * sizeof(T)));
  return d;
}

struct Buffers {
  bf16 *h[2], *xn, *qkv, *attn, *t, *act, *ple_act;
  float* partial;
};

// The op list of `layers` layers; the chain's updates are their own ops (kind kGemv with n = 0
// marks one: ChainUpdate), the persistent list folds them into the GEMV after them.
struct Model {
  std::vector<Op> chain, persistent;
  size_t weight_bytes = 0, kv_bytes = 0;
};

Model Build(int layers, const Buffers& b) {
  Model m;
  int hp = 0;  // which residual buffer holds h
  // Outputs an item: as many as fill a stage, at most `cap`, dividing n.
  auto gemv = [&](int kind, int n, int k, int cap, const bf16* x, bf16* out) {
    const int row_bytes = k * 2 * (kind == kGemvGlu ? 2 : 1);
    int rows = std::min(cap, kStageBytes / row_bytes);
    while (n % rows != 0) --rows;
    Op op{};
    op.kind = kind, op.in_kind = kInPlain, op.n = n, op.k = k, op.rows = rows;
    op.items = n / rows;  // rows: outputs an item (GLU: gate/up pairs)
    const size_t wn = static_cast<size_t>(kind == kGemvGlu ? 2 * n : n) * k;
    op.w = RandBf16(wn, 1.f / std::sqrt(static_cast<float>(k)));
    m.weight_bytes += wn * 2;
    op.x = x, op.out = out;
    return op;
  };
  // An update of t into the residual, feeding `next`: the chain gets its own op, the persistent
  // list the GEMV with kInUpdate.
  auto with_update = [&](Op next) {
    Op u{};
    u.kind = kGemv;  // n = 0: ChainUpdate
    u.x = b.t, u.h_in = b.h[hp], u.h_out = b.h[hp ^ 1];
    u.w_post = RandF32(kHidden), u.w_next = RandF32(kHidden), u.out = b.xn;
    m.chain.push_back(u);
    m.chain.push_back(next);
    Op f = next;
    f.in_kind = kInUpdate, f.x = b.t, f.h_in = u.h_in, f.h_out = u.h_out;
    f.w_post = u.w_post, f.w_next = u.w_next;
    m.persistent.push_back(f);
    hp ^= 1;
  };
  auto plain = [&](const Op& op) {
    m.chain.push_back(op);
    m.persistent.push_back(op);
  };
  for (int l = 0; l < layers; ++l) {
    Op qkv = gemv(kGemv, kQkv, kHidden, 8, b.xn, b.qkv);
    if (l == 0)
      plain(qkv);
    else
      with_update(qkv);
    Op att{};
    att.kind = kAttention, att.items = kSplits, att.x = b.qkv, att.partial = b.partial;
    att.w = RandBf16(static_cast<size_t>(kWindow) * kHeadDim, 1.f);
    att.v = RandBf16(static_cast<size_t>(kWindow) * kHeadDim, 1.f);
    m.kv_bytes += 2ull * kWindow * kHeadDim * 2;
    plain(att);
    Op merge{};
    merge.kind = kMerge, merge.items = kHeads, merge.partial = b.partial, merge.out = b.attn;
    plain(merge);
    plain(gemv(kGemv, kHidden, kHeads * kHeadDim, 6, b.attn, b.t));
    with_update(gemv(kGemvGlu, kInter, kHidden, 4, b.xn, b.act));
    plain(gemv(kGemv, kHidden, kInter, 2, b.act, b.t));
    Op gate = gemv(kGemvPleGate, kPle, kHidden, 2, b.xn, b.ple_act);
    gate.ple = RandBf16(kPle, 1.f);
    with_update(gate);
    plain(gemv(kGemv, kHidden, kPle, 8, b.ple_act, b.t));
  }
  // The last layer's update: the chain's last op; the persistent list ends with it as an LM-head
  // stand-in GEMV of 8 rows (so both end with the residual and x of the final update).
  Op tail = gemv(kGemv, 8, kHidden, 8, b.xn, b.qkv);
  with_update(tail);
  return m;
}

void LaunchChainOp(const Op& op, cudaStream_t s) {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1, cfg.stream = s, cfg.blockDim = dim3(kConsumers);
  if (op.kind == kGemv && op.n == 0) {
    cfg.gridDim = dim3(1);
    CK(cudaLaunchKernelEx(&cfg, ChainUpdate, op));
  } else if (op.kind == kAttention) {
    cfg.gridDim = dim3(op.items);
    CK(cudaLaunchKernelEx(&cfg, ChainAttention, op));
  } else if (op.kind == kMerge) {
    cfg.gridDim = dim3(op.items);
    CK(cudaLaunchKernelEx(&cfg, ChainMerge, op));
  } else {
    cfg.gridDim = dim3(op.items);
    cfg.gridDim = dim3((op.n + kChainOuts - 1) / kChainOuts);
    cfg.dynamicSmemBytes = op.k * 4;
    CK(cudaLaunchKernelEx(&cfg, ChainGemv, op));
  }
}

__global__ void ReadAll(const int4* p, size_t n, int4* sink) {
  int4 acc{};
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(p + i);
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if (acc.x == 0x12345678) *sink = acc;
}

std::vector<uint16_t> Fetch(const bf16* p, size_t n) {
  std::vector<uint16_t> h(n);
  CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 35;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 50;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));

  Buffers b{};
  b.h[0] = RandBf16(kHidden, 1.f), b.h[1] = Zeros<bf16>(kHidden);
  b.xn = RandBf16(kHidden, 1.f);
  b.qkv = Zeros<bf16>(kQkv), b.attn = Zeros<bf16>(kHeads * kHeadDim), b.t = Zeros<bf16>(kHidden);
  b.act = Zeros<bf16>(kInter), b.ple_act = Zeros<bf16>(kPle);
  b.partial = Zeros<float>(static_cast<size_t>(kSplits) * kHeads * kPartial);
  const std::vector<uint16_t> h0 = Fetch(b.h[0], kHidden), x0 = Fetch(b.xn, kHidden);
  Model m = Build(layers, b);
  const bf16* h_final = b.h[(3 * layers) & 1];
  auto reset = [&] {
    CK(cudaMemcpy(b.h[0], h0.data(), kHidden * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b.xn, x0.data(), kHidden * 2, cudaMemcpyHostToDevice));
  };

  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  // Chain: capture once, replay.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaFuncSetAttribute(ChainGemv, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxK * 4));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (const Op& op : m.chain) LaunchChainOp(op, s);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  reset();
  CK(cudaGraphLaunch(exec, s));
  CK(cudaStreamSynchronize(s));
  const std::vector<uint16_t> chain_h = Fetch(h_final, kHidden), chain_x = Fetch(b.xn, kHidden),
                              chain_act = Fetch(b.act, kInter);

  // Persistent.
  const int n_ops = static_cast<int>(m.persistent.size());
  std::vector<int> first(n_ops);
  int next = 0;
  for (int j = 0; j < n_ops; ++j) first[j] = next, next = (next + m.persistent[j].items) % sms;
  Op* d_ops;
  int* d_first;
  CK(cudaMalloc(&d_ops, n_ops * sizeof(Op)));
  CK(cudaMemcpy(d_ops, m.persistent.data(), n_ops * sizeof(Op), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&d_first, n_ops * sizeof(int)));
  CK(cudaMemcpy(d_first, first.data(), n_ops * sizeof(int), cudaMemcpyHostToDevice));
  // PL_SPLIT=0: one warp an item (all its rows at once); 1: an item's outputs spread over the
  // warps, one row at a time (slower: session 31).
  const int split = std::getenv("PL_SPLIT") ? std::atoi(std::getenv("PL_SPLIT")) : 0;
  const int stride = std::getenv("PL_STRIDE") ? std::atoi(std::getenv("PL_STRIDE")) : 32;
  uint32_t* flags = Zeros<uint32_t>(static_cast<size_t>(std::max(sms, n_ops)) * stride);
  unsigned long long* trace = nullptr;
  const size_t smem =
      kStages * kStageBytes + (kMaxK + kHidden + kConsumers / 32) * 4 + 2 * kStages * 8;
  int mode = 0;
  CK(cudaFuncSetAttribute(Persistent, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(smem)));
  uint32_t epoch = 0;
  auto launch_persistent = [&] {
    void* args[] = {&d_ops, &d_first, const_cast<int*>(&n_ops),
                    &flags, &epoch,   const_cast<int*>(&stride),
                    &trace, &mode,    const_cast<int*>(&split)};
    CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(Persistent), dim3(sms), dim3(kThreads),
                                   args, smem, s));
    ++epoch;
  };
  reset();
  launch_persistent();
  CK(cudaStreamSynchronize(s));
  const std::vector<uint16_t> pers_h = Fetch(h_final, kHidden), pers_x = Fetch(b.xn, kHidden),
                              pers_act = Fetch(b.act, kInter);
  // The persistent list's last GEMV consumed the final update; its x is not stored, so compare
  // the residual and the last MLP activation (and the chain's x for the record).
  const bool same = chain_h == pers_h && chain_act == pers_act;
  int diff = 0;
  for (int i = 0; i < kHidden; ++i) diff += chain_h[i] != pers_h[i];
  std::printf(
      "%s, %d SMs; %d layers: %zu chain kernels, %d persistent ops; weights %.1f MB, KV %.1f MB\n",
      prop.name, sms, layers, m.chain.size(), n_ops, m.weight_bytes / 1e6, m.kv_bytes / 1e6);
  std::printf("bit for bit: %s (residual elements differing: %d)\n", same ? "yes" : "NO", diff);

  // Timing.
  auto time = [&](auto&& fn) {
    for (int i = 0; i < 3; ++i) fn();
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < iters; ++i) fn();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms / iters;
  };
  // Copy-speed reference: one read of every weight byte in one big buffer.
  const size_t total = m.weight_bytes + m.kv_bytes;
  int4* big = Zeros<int4>(total / 16 + 1);
  int4* sink = Zeros<int4>(1);
  const float read_ms = time([&] { ReadAll<<<sms * 8, 512, 0, s>>>(big, total / 16, sink); });
  const float chain_ms = time([&] { CK(cudaGraphLaunch(exec, s)); });
  const float pers_ms = time(launch_persistent);
  const double ideal_ms = read_ms;
  std::printf("read of %.1f MB in one kernel: %.3f ms (%.0f GB/s)\n", total / 1e6, read_ms,
              total / read_ms / 1e6);
  std::printf("chain:      %.3f ms a step, %.1f us a layer, %.1f%% of the read\n", chain_ms,
              1e3 * chain_ms / layers, 100 * ideal_ms / chain_ms);
  std::printf("persistent: %.3f ms a step, %.1f us a layer, %.1f%% of the read\n", pers_ms,
              1e3 * pers_ms / layers, 100 * ideal_ms / pers_ms);
  mode = 1;
  const float stream_ms = time(launch_persistent);
  mode = 2;
  const float deps_ms = time(launch_persistent);
  mode = 0;
  std::printf(
      "persistent, weights only (no compute, no waits): %.1f us a layer, %.1f%% of the read\n",
      1e3 * stream_ms / layers, 100 * ideal_ms / stream_ms);
  std::printf("persistent, dependencies only (no weights):     %.1f us a layer\n",
              1e3 * deps_ms / layers);
  std::printf("flag stride %d, outputs spread over the warps %d\n", stride, split);

  // One traced step of each mode (0: the step; 2: dependencies only): per op of the middle
  // layers, averaged by the op's place in its layer.
  const size_t nt = static_cast<size_t>(sms) * n_ops * 4;
  CK(cudaMalloc(&trace, nt * 8));
  for (int traced : {0, 2}) {
    mode = traced;
    std::printf("traced step, mode %d\n", mode);
    CK(cudaMemset(trace, 0, nt * 8));
    launch_persistent();
    CK(cudaStreamSynchronize(s));
    std::vector<unsigned long long> tr(nt);
    CK(cudaMemcpy(tr.data(), trace, nt * 8, cudaMemcpyDeviceToHost));
    auto at = [&](int c, int j, int k) { return tr[(static_cast<size_t>(c) * n_ops + j) * 4 + k]; };
    const char* names[] = {"qkv+upd",     "attention", "merge",        "o_proj",
                           "gate/up+upd", "down",      "ple gate+upd", "ple proj"};
    const int per = 8, l0 = layers / 4, l1 = layers - layers / 4;
    std::printf("op (layers %d-%d, us)   span  wait(min/avg)  prologue  items(avg/max)  CTAs\n", l0,
                l1 - 1);
    double layer_us = 0;
    for (int q = 0; q < per && layers >= 4; ++q) {
      double span = 0, wmin = 0, wavg = 0, pro = 0, iavg = 0, imax = 0;
      int ctas = 0, nl = 0;
      for (int l = l0; l < l1; ++l, ++nl) {
        const int j = l * per + q;
        long long prev_end = 0, end = 0, wmn = 1ll << 62;
        double wsum = 0, psum = 0, isum = 0, imx = 0;
        int c_with = 0;
        auto st = [&](int c, int jj, int k) { return static_cast<long long>(at(c, jj, k)); };
        for (int c = 0; c < sms; ++c) {
          prev_end = std::max(prev_end, st(c, j - 1, 3));
          end = std::max(end, st(c, j, 3));
        }
        for (int c = 0; c < sms; ++c) {
          if (st(c, j, 1) == 0) continue;  // no items
          ++c_with;
          const long long w = st(c, j, 1) - prev_end;
          wmn = std::min(wmn, w);
          wsum += static_cast<double>(w);
          const long long p_end = st(c, j, 2) ? st(c, j, 2) : st(c, j, 1);
          psum += static_cast<double>(p_end - st(c, j, 1));
          const double it = static_cast<double>(st(c, j, 3) - p_end);
          isum += it, imx = std::max(imx, it);
        }
        span += (end - prev_end) / 1e3, wmin += wmn / 1e3, wavg += wsum / c_with / 1e3;
        pro += psum / c_with / 1e3, iavg += isum / c_with / 1e3, imax += imx / 1e3, ctas += c_with;
      }
      layer_us += span / nl;
      std::printf("%-22s %6.2f  %5.2f / %5.2f  %8.2f  %6.2f / %6.2f  %4d\n", names[q], span / nl,
                  wmin / nl, wavg / nl, pro / nl, iavg / nl, imax / nl, ctas / nl);
    }
    std::printf("layer (sum of spans)   %6.2f\n", layer_us);
  }
  mode = 0;
  return same ? 0 : 2;
}
