// Experiment (issue 14, item 4): how fast can a batch-1 E2B step's chain of short kernels run as
// ONE persistent kernel whose weights stream into shared memory ahead of the activations they
// wait for? Not part of the engine. This is session 32's variant of session 31's prototype
// (bench/RESULTS_DECODE.md, sessions 31 and 32): GEMV items on the tensor cores and activations
// exchanged as LL words instead of per-CTA progress flags. Both measured slower than session 31's
// design, which the commit after this one restores; this one stays in the history as the record.
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
// shows as a difference); each GEMV shape is also checked against a double-precision host product:
//   chain:      one kernel per op (an update is a one-CTA kernel, as in the engine; a GEMV warp
//               makes one item's outputs, its weights read straight from global memory in MmaItem's
//               order, which is slow: the chain is only the reference here), PDL, a CUDA graph.
//   persistent: one CTA per SM (cooperative launch), 8 consumer warps and a producer warp. An op
//               is cut into items of at most 24 KB of weights (or K/V rows); item i of op j goes
//               to CTA (first_j + i) mod SMs. The producer walks its CTA's items of the whole step
//               in order and copies each into a ring of 8 shared-memory stages (cp.async.bulk,
//               mbarrier), waiting only for a free stage, never for activations. Every output is
//               written as an LL word (payload and the op's flag in one 64-bit store); a consumer
//               reads its whole input word by word until every word carries the flag it expects,
//               which is its only wait (no progress flags, no fences). A CTA's GEMV items go to the
//               warp whose stage they use, one warp an item on the tensor cores (MmaItem); an
//               attention item takes all 8 warps (one a head). Every CTA runs every update on its
//               own copy of the residual (same bits in each).
//               Diagnostic modes time the weights alone (the ring streamed, no compute, no waits),
//               the dependencies alone (no weights; the stages read as they are) and the waits
//               alone (no weights; items write outputs without computing them).
// A traced step stamps %globaltimer per CTA and op (thread 0: its own input read, the CTA's
// barrier after it, warp 0's last item); the table gives, per op of the middle layers, its span
// (between the latest such ends of the op before and this one), the wait, the prologue and the
// items. %globaltimer is not exactly in step across SMs, so a minimum can read slightly negative,
// and a merge CTA's items include its wait for the attention's words.
//
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -I. tools/gpu/experiments/persistent_layer.cu -o /tmp/pl
// Run:   /tmp/pl [layers=35] [iters=50]; PL_BACKOFF: ns a late LL read sleeps (default 0);
//        PL_OPBAR=1: a barrier at each op's end; PL_PROFILE=m: one step in mode m, then stop.
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

using gannet::kernels::bf16;
using gannet::kernels::Bf16x8;
using gannet::kernels::GeluTanh;
using gannet::kernels::Unpack8;
using gannet::kernels::WarpSum;

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

constexpr int kHidden = 1536, kHeads = 8, kHeadDim = 256, kQkv = (kHeads + 2) * kHeadDim;
constexpr int kInter = 6144, kPle = 256, kWindow = 512;
constexpr int kConsumers = 256, kThreads = kConsumers + 32;  // 8 consumer warps, 1 producer
constexpr int kStages = kConsumers / 32, kStageBytes = 24 * 1024;  // stage s: warp s's items
constexpr int kSplitTokens = 16;  // an attention item (K and V rows) fills a stage
constexpr int kSplits = kWindow / kSplitTokens;
constexpr int kMaxK = kInter;  // the widest GEMV input held in shared memory
constexpr int kPartial = 2 + kHeadDim;

enum OpKind : int { kGemv, kGemvGlu, kGemvPleGate, kAttention, kMerge };
// How a GEMV's input arrives: read as is, or as the update of the GEMV before it.
enum InKind : int { kInPlain, kInUpdate };

using Word = unsigned long long;  // an LL word: payload in the low half, the writer's flag high

struct Op {
  int kind, in_kind;
  int n, k, rows, items;  // outputs, input length, outputs an item (GLU: gate/up pairs), items
  const bf16* w;          // [n][k] (kGemvGlu: [2n][k], gate rows then up rows); K for attention
  const bf16* v;          // attention: the V rows
  const bf16* x;          // chain: input (kInUpdate: the projection t the update normalises)
  const bf16* h_in;       // chain, kInUpdate: residual in
  bf16* h_out;            // kInUpdate: residual out (persistent: the last op's only)
  const float* w_post;    // kInUpdate: post-norm weight
  const float* w_next;    // kInUpdate: next norm weight
  const bf16* ple;        // kGemvPleGate: the layer's PLE input
  bf16* out;              // chain: output
  float* partial;         // chain, attention: [splits][heads][2 + 256]; merge reads it
  const Word* li;         // persistent: the input as LL words (null: x, the step's first input)
  Word* lo;               // persistent: the output as LL words (bf16 pairs; attention: f32)
};

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

// The post-norm update: h' = h + bf16(RmsNorm(t) * w_post), x = bf16(RmsNorm(h') * w_next).
// Thread c owns elements UpdElem(i) (the two of LL word c + 256 r), in both implementations, so
// the sums' order and bits agree. t and h come in as f32 (bf16 values); h is updated in place and
// x lands in xb. The weights are constants, loaded before anything is waited for.
constexpr int kPer = kHidden / kConsumers;
__device__ __forceinline__ int UpdElem(int i) {
  return 2 * (static_cast<int>(threadIdx.x) + (i >> 1) * kConsumers) + (i & 1);
}
struct UpdateConsts {
  float wp[kPer], wn[kPer];
};
__device__ UpdateConsts LoadUpdateConsts(const Op& op) {
  UpdateConsts c;
#pragma unroll
  for (int i = 0; i < kPer; ++i) c.wp[i] = op.w_post[UpdElem(i)], c.wn[i] = op.w_next[UpdElem(i)];
  return c;
}
template <typename Bar>
__device__ void Update(const UpdateConsts& c, const float (&t)[kPer], float (&h)[kPer], bf16* xb,
                       float* scratch, Bar bar) {
  float ss = 0.f;
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
  for (int i = 0; i < kPer; ++i) xb[UpdElem(i)] = __float2bfloat16_rn(h[i] * r2 * c.wn[i]);
}

// A GEMV item by one warp on the tensor cores (mma.m16n8k16, bf16 in, f32 accumulate). The item's
// 8 columns are its weight rows (GLU: gate rows then up rows), each cut into S = 8 / rows slices
// of K: column n is physical row n / S, slice n % S. Row g of A is x's slice for column g, so the
// diagonal C[g][g] is column g's partial dot product; the rest of C is never read. Since A's row g
// and B's column g live in the same lanes (g = lane / 4), lane (g, t) may load its weight chunk and
// the matching x chunk in any order over K: it takes 16-byte chunk (4 i + t + 4 g) mod 16 of each
// 128-element block in pass i, which keeps the 8 rows' loads off each other's shared-memory banks.
// Eight accumulators (one a chunk half) keep the mma chain short; they and the slices are summed in
// a fixed order. `row(pr)` gives physical row pr's weights; kGlobal reads them with __ldcs. Lane 0
// returns the item's op.rows outputs in res (GLU and PLE gate: after their products), unrounded;
// without `math` the products are skipped (a diagnostic mode: outputs from zero sums).
__device__ __forceinline__ void Mma(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
template <bool kGlobal, typename Row>
__device__ void MmaItem(const Op& op, int item, Row row, const bf16* xb, bool math,
                        float (&res)[8]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int prows = op.kind == kGemvGlu ? 2 * op.rows : op.rows;
  const int S = 8 / prows, L = math ? op.k / S : 0, s = g % S;
  const bf16* w = row(g / S) + s * (op.k / S);
  const bf16* x = xb + s * (op.k / S);
  float c[8][4];
#pragma unroll
  for (int a = 0; a < 8; ++a) c[a][0] = c[a][1] = c[a][2] = c[a][3] = 0.f;
#pragma unroll 2
  for (int kb = 0; kb < L; kb += 128) {
    uint4 wv[4], xv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int off = kb + ((4 * i + t + 4 * g) & 15) * 8;
      const uint4* pw = reinterpret_cast<const uint4*>(w + off);
      wv[i] = kGlobal ? __ldcs(pw) : *pw;
      xv[i] = *reinterpret_cast<const uint4*>(x + off);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      Mma(c[2 * i], xv[i].x, xv[i].y, wv[i].x, wv[i].y);
      Mma(c[2 * i + 1], xv[i].z, xv[i].w, wv[i].z, wv[i].w);
    }
  }
  // C[g][g] is lane 4 g + g / 2's element g & 1.
  float d = 0.f;
#pragma unroll
  for (int a = 0; a < 8; ++a) d += (g & 1) ? c[a][1] : c[a][0];
  float out[8];
#pragma unroll
  for (int pr = 0; pr < 8; ++pr) {
    float v = 0.f;
    for (int sl = 0; sl < S; ++sl) {
      const int n = pr * S + sl;
      v += __shfl_sync(0xffffffffu, d, (4 * n + n / 2) & 31);
    }
    out[pr] = v;
  }
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    if (r >= op.rows) break;
    float v = out[r];
    if (op.kind == kGemvGlu) {
      float u = 0.f;
#pragma unroll
      for (int q = 0; q < 8; ++q) u = q == op.rows + r ? out[q] : u;  // out[rows + r], in registers
      v = GeluTanh(__bfloat162float(__float2bfloat16_rn(v))) *
          __bfloat162float(__float2bfloat16_rn(u));
    } else if (op.kind == kGemvPleGate) {
      v = GeluTanh(__bfloat162float(__float2bfloat16_rn(v))) *
          __bfloat162float(op.ple[item * op.rows + r]);
    }
    res[r] = v;
  }
}

// Attention split `item` (kSplitTokens keys): warp h is query head h against the one KV head;
// K and V rows in ks / vs (shared or global), q as f32 in qs. store(e, value) writes element e of
// the head's (max, sum, acc[256]).
template <bool kGlobal, typename Store>
__device__ void AttentionItem(const bf16* ks, const bf16* vs, const float* qs, bool math,
                              Store store) {
  const int lane = threadIdx.x & 31, h = threadIdx.x >> 5;
  if (h >= kHeads) return;
  float q[8], acc[8] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = qs[h * kHeadDim + lane * 8 + j];
  float m = 0.f, l = 1.f;
  if (math) {
    // Every key's partial dot first, then the warp sums level by level across the keys (16
    // independent shuffles a level instead of 16 dependent sums).
    float s[kSplitTokens];
    m = -INFINITY;
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
    l = 0.f;
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
  }
  if (lane == 0) store(0, m), store(1, l);
#pragma unroll
  for (int j = 0; j < 8; ++j) store(2 + lane * 8 + j, acc[j]);
}

// Merge of one head's splits for output element d (thread d): ml[2 sp], ml[2 sp + 1] are split
// sp's max and sum, as[sp] element d of its accumulator.
__device__ float MergeMath(const float* ml, const float* as) {
  float mx = -INFINITY;
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) mx = fmaxf(mx, ml[2 * sp]);
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) {
    const float sc = __expf(ml[2 * sp] - mx);
    den += sc * ml[2 * sp + 1];
    num += sc * as[sp];
  }
  return num / den;
}

// Physical row pr of GEMV item i in global memory (GLU: gate rows, then the matching up rows).
__device__ __forceinline__ const bf16* GlobalRow(const Op& op, int i, int pr) {
  const int64_t r = pr < op.rows || op.kind != kGemvGlu
                        ? static_cast<int64_t>(i) * op.rows + pr
                        : op.n + static_cast<int64_t>(i) * op.rows + pr - op.rows;
  return op.w + r * op.k;
}

// ---- the chain: one kernel per op ---------------------------------------------------------

__device__ __forceinline__ void PdlWait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// kChainItems items a CTA, one a warp.
constexpr int kChainItems = kConsumers / 32;
__global__ void __launch_bounds__(kConsumers) ChainGemv(Op op) {
  extern __shared__ __align__(16) bf16 xb[];  // k
  PdlWait();
  for (int q = threadIdx.x; q < op.k / 8; q += kConsumers)
    reinterpret_cast<int4*>(xb)[q] = reinterpret_cast<const int4*>(op.x)[q];
  __syncthreads();
  const int i = blockIdx.x * kChainItems + (threadIdx.x >> 5);
  if (i >= op.items) return;
  float res[8];
  MmaItem<true>(
      op, i, [&](int pr) { return GlobalRow(op, i, pr); }, xb, true, res);
  if ((threadIdx.x & 31) == 0) {
    for (int r = 0; r < op.rows; ++r) op.out[i * op.rows + r] = __float2bfloat16_rn(res[r]);
  }
}

__global__ void __launch_bounds__(kConsumers) ChainUpdate(Op op) {
  __shared__ float scratch[kConsumers / 32];
  __shared__ bf16 xb[kHidden];
  const UpdateConsts c = LoadUpdateConsts(op);
  PdlWait();
  float t[kPer], h[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    t[i] = __bfloat162float(op.x[UpdElem(i)]);
    h[i] = __bfloat162float(op.h_in[UpdElem(i)]);
  }
  Update(c, t, h, xb, scratch, [] { __syncthreads(); });
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    op.h_out[UpdElem(i)] = __float2bfloat16_rn(h[i]);
    op.out[UpdElem(i)] = xb[UpdElem(i)];
  }
}

__global__ void __launch_bounds__(kConsumers) ChainAttention(Op op) {
  __shared__ float qs[kHeads * kHeadDim];
  PdlWait();
  for (int j = threadIdx.x; j < kHeads * kHeadDim; j += kConsumers)
    qs[j] = __bfloat162float(op.x[j]);
  __syncthreads();
  const int item = blockIdx.x, h = threadIdx.x >> 5;
  float* o = op.partial + (static_cast<int64_t>(item) * kHeads + h) * kPartial;
  AttentionItem<true>(op.w + item * kSplitTokens * kHeadDim, op.v + item * kSplitTokens * kHeadDim,
                      qs, true, [&](int e, float v) { o[e] = v; });
}

__global__ void __launch_bounds__(kConsumers) ChainMerge(Op op) {
  PdlWait();
  const int item = blockIdx.x, d = threadIdx.x;
  if (d >= kHeadDim) return;
  float ml[2 * kSplits], as[kSplits];
#pragma unroll
  for (int sp = 0; sp < kSplits; ++sp) {  // every load issued before any is used
    const float* p = op.partial + (static_cast<int64_t>(sp) * kHeads + item) * kPartial;
    ml[2 * sp] = __ldcg(p), ml[2 * sp + 1] = __ldcg(p + 1), as[sp] = __ldcg(p + 2 + d);
  }
  op.out[item * kHeadDim + d] = __float2bfloat16_rn(MergeMath(ml, as));
}

// ---- the persistent kernel ------------------------------------------------------------------

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void MbarInit(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(b)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(Smem(b)) : "memory");
}
__device__ __forceinline__ void MbarWait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W;\n}\n" ::"r"(Smem(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(Smem(dst)),
      "l"(src), "r"(bytes), "r"(Smem(b))
      : "memory");
}
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void ConsumerBar() {
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumers) : "memory");
}

// LL words (NCCL's low-latency protocol, one payload a word): a 64-bit access is single-copy
// atomic, so a reader that sees the writer's flag in the high half sees its payload in the low
// half, with no fence on either side. The flag of op j's output in step e is e * ops + j + 1.
__device__ __forceinline__ void StoreLL(Word* p, uint32_t payload, uint32_t flag) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p),
               "l"((static_cast<Word>(flag) << 32) | payload)
               : "memory");
}
__device__ __forceinline__ Word LoadLL(const Word* p) {
  Word v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const uint32_t a = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t b = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return a | (b << 16);
}
__device__ __forceinline__ float LoBf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float HiBf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Words c + 256 r (r < kMax, below n) of p, each read until it carries `flag` (all issued at once,
// the late ones again), then sink(r, word index, payload). `backoff`: ns slept between rounds.
template <int kMax, typename Sink>
__device__ void ReadLL(const Word* p, int n, uint32_t flag, int backoff, Sink sink) {
  Word v[kMax];
  uint32_t pending = 0;
#pragma unroll
  for (int r = 0; r < kMax; ++r) {
    const int i = threadIdx.x + r * kConsumers;
    if (i < n) v[r] = LoadLL(p + i), pending |= 1u << r;
  }
  while (pending != 0) {
    uint32_t late = 0;
#pragma unroll
    for (int r = 0; r < kMax; ++r) {
      if (!(pending >> r & 1)) continue;
      if (static_cast<uint32_t>(v[r] >> 32) == flag)
        sink(r, threadIdx.x + r * kConsumers, static_cast<uint32_t>(v[r]));
      else
        late |= 1u << r;
    }
    if (late != 0 && backoff > 0) __nanosleep(backoff);
#pragma unroll
    for (int r = 0; r < kMax; ++r) {
      if (late >> r & 1) v[r] = LoadLL(p + threadIdx.x + r * kConsumers);
    }
    pending = late;
  }
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

// mode 0: the step; 1: the weights streamed through the ring with no compute and no waits for
// inputs; 2: the dependency chain with no weights (the stages read as they are); 3: the waits
// alone (no weights; items write their outputs without computing them).
__global__ void __launch_bounds__(kThreads, 1)
    Persistent(const Op* __restrict__ ops, const int* __restrict__ first, int n_ops, const bf16* h0,
               uint32_t epoch, unsigned long long* trace, int mode, int backoff, int op_bar) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* stages = smem_raw;
  bf16* xb2 = reinterpret_cast<bf16*>(stages + kStages * kStageBytes);  // 2 x kMaxK
  float* qs = reinterpret_cast<float*>(xb2 + 2 * kMaxK);                // the heads' q
  float* scratch = qs + kHeads * kHeadDim;                              // one a warp
  uint64_t* full = reinterpret_cast<uint64_t*>(scratch + kConsumers / 32);
  uint64_t* empty = full + kStages;
  const int grid = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) MbarInit(&full[s], 1), MbarInit(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x >= kConsumers) {  // producer warp: one lane issues every copy
    if (threadIdx.x != kConsumers || mode >= 2) return;
    uint32_t it = 0;
    for (int j = 0; j < n_ops; ++j) {
      const Op& op = ops[j];
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

  // Consumers. A CTA's GEMV item number `my` (counting its items of the whole step) goes to warp
  // my mod 8, whose stage it is: a warp waits only for its own stage's rounds, in order, so warps
  // need not finish an op together; there is no barrier at an op's end. An attention item takes
  // all 8 warps (one a head). Every CTA runs every update (its residual stays in registers), so a
  // CTA with no items in an update's op still reads the update's input. Inputs alternate between
  // two buffers: between two reads into one buffer lies the other read's barrier, which every
  // warp reaches only after its items of the op before.
  auto cbar = [] { ConsumerBar(); };
  auto stamp = [&](int j, int k) {
    if (trace != nullptr && threadIdx.x == 0)
      trace[(static_cast<int64_t>(blockIdx.x) * n_ops + j) * 4 + k] = GlobalTimer();
  };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool math = mode == 0 || mode == 2, wait = mode != 1;
  float h[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) h[i] = __bfloat162float(h0[UpdElem(i)]);
  uint32_t it = 0, reads = 0;
  const uint32_t base = epoch * n_ops;
  for (int j = 0; j < n_ops; ++j) {
    const Op& op = ops[j];
    const int i0 = FirstItem(first[j], grid);
    const bool mine = i0 < op.items, update = op.in_kind == kInUpdate;
    stamp(j, 0);
    if (!mine && !update) continue;
    const uint32_t want = base + j, flag = base + j + 1;
    const bool gemv = op.kind == kGemv || op.kind == kGemvGlu || op.kind == kGemvPleGate;
    bf16* xb = xb2 + (reads & 1) * kMaxK;
    if (wait && op.kind != kMerge) {
      ++reads;
      if (update) {
        const UpdateConsts uc = LoadUpdateConsts(op);
        float t[kPer];
        ReadLL<kPer / 2>(op.li, kHidden / 2, want, backoff, [&](int r, int, uint32_t v) {
          t[2 * r] = LoBf16(v), t[2 * r + 1] = HiBf16(v);
        });
        stamp(j, 1);
        if (math) Update(uc, t, h, xb, scratch, cbar);
        if (op.h_out != nullptr && i0 == 0) {
#pragma unroll
          for (int i = 0; i < kPer; ++i) op.h_out[UpdElem(i)] = __float2bfloat16_rn(h[i]);
        }
      } else if (gemv && op.li == nullptr) {
        for (int q = threadIdx.x; q < op.k / 8; q += kConsumers)
          reinterpret_cast<int4*>(xb)[q] = __ldcg(reinterpret_cast<const int4*>(op.x) + q);
        stamp(j, 1);
      } else if (gemv) {
        ReadLL<kMaxK / 2 / kConsumers>(op.li, op.k / 2, want, backoff, [&](int, int w, uint32_t v) {
          reinterpret_cast<uint32_t*>(xb)[w] = v;
        });
        stamp(j, 1);
      } else {  // attention: q, the first 2048 of the QKV output
        ReadLL<kHeads * kHeadDim / 2 / kConsumers>(
            op.li, kHeads * kHeadDim / 2, want, backoff,
            [&](int, int w, uint32_t v) { qs[2 * w] = LoBf16(v), qs[2 * w + 1] = HiBf16(v); });
        stamp(j, 1);
      }
      ConsumerBar();
      stamp(j, 2);
    }
    if (!mine) continue;
    if (op.kind == kMerge) stamp(j, 1), stamp(j, 2);
    int local = 0;
    for (int i = i0; i < op.items; i += grid, ++local) {
      if (op.kind == kMerge) {  // head i; thread d reads every split's (max, sum, acc[d])
        const int d = threadIdx.x;
        if (wait) {
          // Threads 0-63 read the splits' (max, sum) pairs into ml (qs, free until the next
          // layer's attention); then every thread streams its accumulator element of each split
          // through MergeMath's sums in the same order (no array of them: registers).
          float* ml = qs;
          if (d < 2 * kSplits) {
            const Word* p =
                op.li + (static_cast<int64_t>(d >> 1) * kHeads + i) * kPartial + (d & 1);
            Word v = LoadLL(p);
            while (static_cast<uint32_t>(v >> 32) != want) v = LoadLL(p);
            ml[d] = __uint_as_float(static_cast<uint32_t>(v));
          }
          ConsumerBar();
          float mx = -INFINITY;
#pragma unroll
          for (int sp = 0; sp < kSplits; ++sp) mx = fmaxf(mx, ml[2 * sp]);
          float num = 0.f, den = 0.f;
          constexpr int kGroup = 8;  // splits whose words are in flight together
#pragma unroll
          for (int s0 = 0; s0 < kSplits; s0 += kGroup) {
            Word c[kGroup];
#pragma unroll
            for (int q = 0; q < kGroup; ++q)
              c[q] = LoadLL(op.li + (static_cast<int64_t>(s0 + q) * kHeads + i) * kPartial + 2 + d);
#pragma unroll
            for (int q = 0; q < kGroup; ++q) {
              const Word* p =
                  op.li + (static_cast<int64_t>(s0 + q) * kHeads + i) * kPartial + 2 + d;
              while (static_cast<uint32_t>(c[q] >> 32) != want) c[q] = LoadLL(p);
              const int sp = s0 + q;
              const float sc = __expf(ml[2 * sp] - mx);
              den += sc * ml[2 * sp + 1];
              num += sc * __uint_as_float(static_cast<uint32_t>(c[q]));
            }
          }
          const float o = num / den;
          const float o1 = __shfl_down_sync(0xffffffffu, o, 1);
          if ((d & 1) == 0) StoreLL(op.lo + (i * kHeadDim + d) / 2, PackBf16(o, o1), flag);
          ConsumerBar();  // ml is read before another item writes it
        }
        continue;
      }
      const uint32_t my = it + local;
      const int s = my % kStages;
      const unsigned char* st = stages + s * kStageBytes;
      if (gemv) {
        if (s != warp) continue;
        if (mode < 2) MbarWait(&full[s], (my / kStages) & 1);
        if (wait) {
          const bf16* w = reinterpret_cast<const bf16*>(st);
          float res[8];
          MmaItem<false>(
              op, i, [&](int pr) { return w + static_cast<int64_t>(pr) * op.k; }, xb, math, res);
          if (lane == 0) {
            for (int r = 0; r < op.rows; r += 2)
              StoreLL(op.lo + (i * op.rows + r) / 2, PackBf16(res[r], res[r + 1]), flag);
          }
        }
        __syncwarp();
        if (lane == 0) MbarArrive(&empty[s]);
      } else {  // attention: all 8 warps, one a head
        if (mode < 2) MbarWait(&full[s], (my / kStages) & 1);
        if (wait) {
          Word* o = op.lo + (static_cast<int64_t>(i) * kHeads + warp) * kPartial;
          AttentionItem<false>(reinterpret_cast<const bf16*>(st),
                               reinterpret_cast<const bf16*>(st + kSplitTokens * kHeadDim * 2), qs,
                               math,
                               [&](int e, float v) { StoreLL(o + e, __float_as_uint(v), flag); });
        }
        ConsumerBar();
        if (threadIdx.x == 0) MbarArrive(&empty[s]);
      }
    }
    if (op.kind != kMerge) it += local;
    if (op_bar) ConsumerBar();  // PL_OPBAR=1: warps finish an op together after all
    stamp(j, 3);
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
  // The persistent kernel's copies of the exchanged vectors, as LL words (bf16 pairs; partial f32).
  // t has one a writer (o_proj, down, PLE projection): a CTA with no PLE-gate item still reads
  // down's t for its update, and nothing keeps the PLE projection from overwriting it first.
  Word *l_qkv, *l_attn, *l_t[3], *l_act, *l_ple_act, *l_partial;
  int t_writes = 0;  // Build: t's writers so far; the last one's buffer is t's
  Word* LL(const void* p) const {
    if (p == qkv) return l_qkv;
    if (p == attn) return l_attn;
    if (p == t) return l_t[(t_writes + 2) % 3];
    if (p == act) return l_act;
    if (p == ple_act) return l_ple_act;
    if (p == partial) return l_partial;
    return nullptr;  // xn: the step's first input, read as is
  }
};

// The op list of `layers` layers; the chain's updates are their own ops (kind kGemv with n = 0
// marks one: ChainUpdate), the persistent list folds them into the GEMV after them.
struct Model {
  std::vector<Op> chain, persistent;
  size_t weight_bytes = 0, kv_bytes = 0;
};

Model Build(int layers, Buffers& b) {
  Model m;
  int hp = 0;  // which residual buffer holds h
  // Outputs an item: as many as fill a stage, at most `cap`, dividing n.
  auto gemv = [&](int kind, int n, int k, int cap, const bf16* x, bf16* out) {
    const int row_bytes = k * 2 * (kind == kGemvGlu ? 2 : 1);
    int rows = std::min(cap, kStageBytes / row_bytes);
    while (n % rows != 0) --rows;
    // MmaItem: an item's physical rows times their K slices fill the 8 columns, slices of whole
    // 128-element blocks.
    const int prows = rows * (kind == kGemvGlu ? 2 : 1);
    if (8 % prows != 0 || (k / (8 / prows)) % 128 != 0) {
      std::fprintf(stderr, "item of %d rows with k %d does not fit the mma columns\n", prows, k);
      std::exit(1);
    }
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
    f.in_kind = kInUpdate, f.x = b.t, f.h_in = u.h_in, f.h_out = nullptr;
    f.w_post = u.w_post, f.w_next = u.w_next;
    f.li = b.LL(b.t);
    if (next.out == b.t) ++b.t_writes;
    f.lo = b.LL(next.out);
    m.persistent.push_back(f);
    hp ^= 1;
  };
  auto plain = [&](const Op& op) {
    m.chain.push_back(op);
    Op p = op;
    p.li = b.LL(op.kind == kMerge ? static_cast<const void*>(op.partial) : op.x);
    if (op.out == b.t) ++b.t_writes;
    p.lo = b.LL(op.kind == kAttention ? static_cast<const void*>(op.partial) : op.out);
    m.persistent.push_back(p);
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
    plain(gemv(kGemv, kHidden, kHeads * kHeadDim, 4, b.attn, b.t));
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
  m.persistent.back().h_out = m.chain[m.chain.size() - 2].h_out;  // the final residual
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
    cfg.gridDim = dim3((op.items + kChainItems - 1) / kChainItems);
    cfg.dynamicSmemBytes = op.k * 2;
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

float Bf(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The MMA item's arithmetic against a double-precision dot product on the host, for each GEMV
// shape of a layer (chain and persistent share MmaItem, so their agreement cannot show this):
// every output within 1% of the largest |output| (GLU and PLE gate: of their inputs, rounded to
// bf16 as the kernel does).
bool CheckGemvs(const Model& m, cudaStream_t s) {
  bool ok = true;
  for (size_t oi = 0; oi < m.chain.size() && oi < 12; ++oi) {
    const Op& op = m.chain[oi];
    if (op.kind == kAttention || op.kind == kMerge || (op.kind == kGemv && op.n == 0)) continue;
    std::vector<bf16> xh(op.k);
    for (auto& v : xh) v = __float2bfloat16(Rand());
    CK(cudaMemcpy(const_cast<bf16*>(op.x), xh.data(), op.k * 2, cudaMemcpyHostToDevice));
    LaunchChainOp(op, s);
    CK(cudaStreamSynchronize(s));
    const int rows_w = op.kind == kGemvGlu ? 2 * op.n : op.n;
    const std::vector<uint16_t> w = Fetch(op.w, static_cast<size_t>(rows_w) * op.k),
                                out = Fetch(op.out, op.n);
    std::vector<uint16_t> ple =
        op.kind == kGemvPleGate ? Fetch(op.ple, op.n) : std::vector<uint16_t>();
    std::vector<uint16_t> x(op.k);
    std::memcpy(x.data(), xh.data(), op.k * 2);
    auto dot = [&](int r) {
      double a = 0;
      for (int k = 0; k < op.k; ++k) a += double(Bf(w[size_t(r) * op.k + k])) * Bf(x[k]);
      return a;
    };
    auto gelu = [](double v) {
      return 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v)));
    };
    double worst = 0, scale = 0;
    std::vector<double> ref(op.n);
    for (int j = 0; j < op.n; ++j) {
      double v = dot(j);
      if (op.kind == kGemvGlu) v = gelu(v) * dot(op.n + j);
      if (op.kind == kGemvPleGate) v = gelu(v) * Bf(ple[j]);
      ref[j] = v, scale = std::max(scale, std::fabs(v));
    }
    for (int j = 0; j < op.n; ++j) worst = std::max(worst, std::fabs(Bf(out[j]) - ref[j]));
    const bool good = worst <= 0.01 * scale;
    ok &= good;
    std::printf("check op %zu (kind %d, n %d, k %d, rows %d): max error %.3g of %.3g %s\n", oi,
                op.kind, op.n, op.k, op.rows, worst, scale, good ? "ok" : "FAILED");
  }
  return ok;
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
  b.l_qkv = Zeros<Word>(kQkv / 2), b.l_attn = Zeros<Word>(kHeads * kHeadDim / 2);
  for (Word*& l : b.l_t) l = Zeros<Word>(kHidden / 2);
  b.l_act = Zeros<Word>(kInter / 2);
  b.l_ple_act = Zeros<Word>(kPle / 2);
  b.l_partial = Zeros<Word>(static_cast<size_t>(kSplits) * kHeads * kPartial);
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

  if (!CheckGemvs(m, s)) return 3;

  // Chain: capture once, replay.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaFuncSetAttribute(ChainGemv, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxK * 2));
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
  // PL_BACKOFF: ns a late LL read sleeps before reading again (default 0).
  const int backoff = std::getenv("PL_BACKOFF") ? std::atoi(std::getenv("PL_BACKOFF")) : 0;
  const int op_bar = std::getenv("PL_OPBAR") ? std::atoi(std::getenv("PL_OPBAR")) : 0;
  unsigned long long* trace = nullptr;
  const bf16* h0_dev = b.h[0];
  const size_t smem = kStages * kStageBytes + 2 * kMaxK * 2 +
                      (kHeads * kHeadDim + kConsumers / 32) * 4 + 2 * kStages * 8;
  int mode = 0;
  CK(cudaFuncSetAttribute(Persistent, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(smem)));
  uint32_t epoch = 0;
  auto launch_persistent = [&] {
    void* args[] = {&d_ops,
                    &d_first,
                    const_cast<int*>(&n_ops),
                    &h0_dev,
                    &epoch,
                    &trace,
                    &mode,
                    const_cast<int*>(&backoff),
                    const_cast<int*>(&op_bar)};
    CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(Persistent), dim3(sms), dim3(kThreads),
                                   args, smem, s));
    ++epoch;
  };
  reset();
  launch_persistent();
  CK(cudaStreamSynchronize(s));
  const std::vector<uint16_t> pers_h = Fetch(h_final, kHidden);
  std::vector<uint16_t> pers_act(kInter);
  {
    std::vector<Word> words(kInter / 2);
    CK(cudaMemcpy(words.data(), b.l_act, kInter * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < kInter / 2; ++i)
      pers_act[2 * i] = words[i] & 0xffff, pers_act[2 * i + 1] = (words[i] >> 16) & 0xffff;
  }
  // The persistent list's last GEMV consumed the final update; its x is not stored, so compare
  // the residual and the last MLP activation (and the chain's x for the record).
  const bool same = chain_h == pers_h && chain_act == pers_act;
  // PL_PROFILE=m: one more step in mode m, then stop (for Nsight Compute).
  if (std::getenv("PL_PROFILE")) {
    mode = std::atoi(std::getenv("PL_PROFILE"));
    launch_persistent();
    CK(cudaStreamSynchronize(s));
    return same ? 0 : 2;
  }
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
  mode = 3;
  const float waits_ms = time(launch_persistent);
  mode = 0;
  std::printf("persistent, waits only (no weights, inputs or items): %.1f us a layer\n",
              1e3 * waits_ms / layers);
  std::printf("LL backoff %d ns, barrier at an op's end %d\n", backoff, op_bar);

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
          if (st(c, j, 3) == 0) continue;  // no items
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
