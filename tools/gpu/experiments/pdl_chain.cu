// Scratch experiment: the floor of a chain of dependent PDL kernels in a CUDA graph.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

template <bool kEarly>
__global__ void Step(float* buf, int n) {
  if (kEarly) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (!kEarly) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // one dependent round trip: read what the previous kernel wrote, write it back
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = buf[i] * 0.5f + 1.0f;
}
__global__ void StepNoPdl(float* buf, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = buf[i] * 0.5f + 1.0f;
}

template <typename K>
void Chain(const char* name, K kern, int ctas, int threads, bool pdl, float* buf) {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ctas); cfg.blockDim = dim3(threads); cfg.stream = s; cfg.attrs = attr; cfg.numAttrs = pdl ? 1 : 0;
  const int n = ctas * threads, len = 400;
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < len; ++i) CK(cudaLaunchKernelEx(&cfg, kern, buf, n));
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(b, s)); CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  printf("%-10s ctas %5d threads %4d pdl %d: %.2f us a kernel\n", name, ctas, threads, pdl, ms * 1e3 / (10 * len));
}

int main() {
  float* buf; CK(cudaMalloc(&buf, 64 << 20)); CK(cudaMemset(buf, 0, 64 << 20));
  for (int ctas : {1, 16, 132, 384, 1056, 3072}) {
    for (int threads : {256, 1024}) {
      if (threads == 1024 && ctas > 132) continue;
      Chain("noPDL", StepNoPdl, ctas, threads, false, buf);
      Chain("waitfirst", Step<false>, ctas, threads, true, buf);
      Chain("early", Step<true>, ctas, threads, true, buf);
    }
  }
  return 0;
}
