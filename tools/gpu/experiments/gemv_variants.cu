// Scratch experiment (not built by CMake): small-M GEMV variants for N-small / K-long shapes.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
typedef __nv_bfloat16 bf16;

__device__ __forceinline__ void Pdl() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void Pf(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ void Unpack(const int4& raw, float* o) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) { float2 f = __bfloat1622float2(h[i]); o[2*i] = f.x; o[2*i+1] = f.y; }
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}

// grid.x = n / ROWS, grid.y = S (split-K parts); S > 1: f32 partials [S][n] then the last CTA of a
// row group sums them in order.
template <int ROWS, int THREADS, int UNROLL, bool PF, int S, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
    Gemv(const bf16* __restrict__ x, const bf16* __restrict__ w, bf16* __restrict__ out,
         float* __restrict__ part, unsigned* __restrict__ cnt, int n, int k) {
  const int n0 = blockIdx.x * ROWS;
  const int kpart = k / S;
  const int kb = blockIdx.y * kpart;
  if (PF && threadIdx.x < ROWS) Pf(w + (int64_t)(n0 + threadIdx.x) * k + kb, kpart * 2);
  Pdl();
  float acc[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
  const int chunks = kpart / 8;
#pragma unroll UNROLL
  for (int c = threadIdx.x; c < chunks; c += THREADS) {
    int4 wv[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) wv[r] = __ldcs(reinterpret_cast<const int4*>(w + (int64_t)(n0 + r) * k + kb + c * 8));
    float xv[8];
    Unpack(*reinterpret_cast<const int4*>(x + kb + c * 8), xv);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      float wf[8];
      Unpack(wv[r], wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[r] += xv[j] * wf[j];
    }
  }
  __shared__ float red[THREADS / 32][ROWS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) { float v = WarpSum(acc[r]); if (lane == 0) red[warp][r] = v; }
  __syncthreads();
  if (S == 1) {
    if (threadIdx.x < ROWS) {
      float s = 0.f;
      for (int i = 0; i < THREADS / 32; ++i) s += red[i][threadIdx.x];
      out[n0 + threadIdx.x] = __float2bfloat16(s);
    }
    return;
  }
  __shared__ bool last;
  if (threadIdx.x < ROWS) {
    float s = 0.f;
    for (int i = 0; i < THREADS / 32; ++i) s += red[i][threadIdx.x];
    part[(int64_t)blockIdx.y * n + n0 + threadIdx.x] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(cnt + blockIdx.x) : "memory");
    last = (old % S) == S - 1;
  }
  __syncthreads();
  if (last && threadIdx.x < ROWS) {
    float s = 0.f;
    for (int i = 0; i < S; ++i) s += __ldcg(part + (int64_t)i * n + n0 + threadIdx.x);
    out[n0 + threadIdx.x] = __float2bfloat16(s);
  }
}

__global__ void CopyK(const int4* __restrict__ a, int4* __restrict__ b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) b[i] = a[i];
}

template <int ROWS, int THREADS, int UNROLL, bool PF, int S, int MINB>
void Run(const char* name, int n, int k, std::vector<bf16*>& ws, bf16* x, bf16* out, float* part,
         unsigned* cnt, double copy_gbs) {
  auto kern = Gemv<ROWS, THREADS, UNROLL, PF, S, MINB>;
  cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, kern));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(n / ROWS, S); cfg.blockDim = dim3(THREADS); cfg.attrs = attr; cfg.numAttrs = 1;
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  const int iters = 200;
  for (int i = 0; i < 20; ++i) CK(cudaLaunchKernelEx(&cfg, kern, x, ws[i % ws.size()], out, part, cnt, n, k));
  CK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) CK(cudaLaunchKernelEx(&cfg, kern, x, ws[i % ws.size()], out, part, cnt, n, k));
  CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  const double us = ms * 1e3 / iters, gbs = 2.0 * n * k / (us * 1e3);
  printf("%-14s n %5d k %5d  rows %d thr %4d unroll %d pf %d S %d minb %d regs %3d: %7.2f us %7.0f GB/s %5.1f%% of copy\n",
         name, n, k, ROWS, THREADS, UNROLL, PF, S, MINB, fa.numRegs, us, gbs, 100 * gbs / copy_gbs);
}

int main() {
  const size_t copy_bytes = 1ull << 30;
  int4 *ca, *cb; CK(cudaMalloc(&ca, copy_bytes)); CK(cudaMalloc(&cb, copy_bytes));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CopyK<<<132 * 8, 512>>>(ca, cb, copy_bytes / 16);
  CK(cudaEventRecord(a));
  for (int i = 0; i < 10; ++i) CopyK<<<132 * 8, 512>>>(ca, cb, copy_bytes / 16);
  CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  const double copy_gbs = 2.0 * copy_bytes * 10 / (ms * 1e6);
  printf("copy %.0f GB/s\n", copy_gbs);
  CK(cudaFree(ca)); CK(cudaFree(cb));
  struct Shape { const char* name; int n, k; };
  const Shape shapes[] = {{"e2b_down", 1536, 6144}, {"e2b_down2x", 1536, 12288}, {"e2b_o", 1536, 2048},
                          {"e4b_down", 2560, 10240}, {"e4b_o", 2560, 2048}, {"e2b_gate_up", 12288, 1536}};
  bf16 *x, *out; float* part; unsigned* cnt;
  CK(cudaMalloc(&x, 65536 * 2)); CK(cudaMemset(x, 0, 65536 * 2));
  CK(cudaMalloc(&out, 65536 * 2)); CK(cudaMalloc(&part, 16 * 65536 * 4)); CK(cudaMalloc(&cnt, 65536 * 4));
  CK(cudaMemset(cnt, 0, 65536 * 4));
  for (const Shape& s : shapes) {
    std::vector<bf16*> ws;
    const size_t bytes = 2ull * s.n * s.k;
    const int copies = (int)(400e6 / bytes) + 1;
    for (int c = 0; c < copies; ++c) { bf16* p; CK(cudaMalloc(&p, bytes)); CK(cudaMemset(p, 0, bytes)); ws.push_back(p); }
    Run<4, 256, 2, true, 1, 8>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, true, 4, 8>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 4, true, 1, 4>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, false, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 4, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<2, 256, 2, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<2, 256, 4, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<1, 256, 4, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 128, 2, true, 1, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, true, 2, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, true, 4, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 4, true, 4, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<8, 256, 2, true, 4, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    Run<4, 256, 2, false, 4, 1>(s.name, s.n, s.k, ws, x, out, part, cnt, copy_gbs);
    for (bf16* p : ws) CK(cudaFree(p));
  }
  return 0;
}
