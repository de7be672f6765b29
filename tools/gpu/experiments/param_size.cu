// Scratch experiment: does a kernel's parameter block size cost time on a batch-1 step's chain?
// A chain of 400 dependent PDL kernels in a CUDA graph (each reads what the one before wrote),
// whose parameter block is kBytes (a float array each lane indexes, as QkvPrepParams' inv_freq
// is), at a prep-like grid (3 CTAs of 128 threads) and an attention-like one (32 CTAs).
// nvcc -std=c++17 -arch=sm_90 -O3 tools/gpu/experiments/param_size.cu -o /tmp/param_size
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include "check.cuh"

template <int kFloats>
struct Params {
  float* buf;
  int n;
  float table[kFloats];
};

template <int kFloats>
__global__ void Step(const Params<kFloats> p) {
  const float f = p.table[threadIdx.x % kFloats];  // a lane-indexed read of the block, pre-wait
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.buf[i] = p.buf[i] * 0.5f + f;
}

template <int kFloats>
void Chain(int ctas, int threads, float* buf) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ctas);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  Params<kFloats> p{};
  p.buf = buf;
  p.n = ctas * threads;
  for (int i = 0; i < kFloats; ++i) p.table[i] = 1.0f / (i + 1);
  const int len = 400;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < len; ++i) CK(cudaLaunchKernelEx(&cfg, Step<kFloats>, p));
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = ms < best ? ms : best;
  }
  printf("params %5zu B  ctas %3d threads %4d: %.3f us a kernel\n", sizeof(Params<kFloats>), ctas,
         threads, best * 1e3 / (10 * len));
}

int main() {
  float* buf;
  CK(cudaMalloc(&buf, 64 << 20));
  CK(cudaMemset(buf, 0, 64 << 20));
  for (int round = 0; round < 2; ++round) {
    for (int ctas : {3, 32}) {
      Chain<4>(ctas, 128, buf);
      Chain<64>(ctas, 128, buf);
      Chain<128>(ctas, 128, buf);
      Chain<256>(ctas, 128, buf);
      Chain<512>(ctas, 128, buf);
      Chain<960>(ctas, 128, buf);
    }
  }
  return 0;
}
