// Scratch experiment (session 34): what bounds the PLE-tail cluster kernel (ple_tail.cu) when it
// runs alone: 42 launches in a row (PDL, a CUDA graph), each on its own layer's weights
// (2.6 MB; 110 MB in all, more than the L2: the weights come from DRAM) against the same 42
// launches on one layer's weights (L2-resident after the first). E4B shapes, batch 1.
// It includes the kernel's source with its phase timestamps on (globaltimer, thread 0 of each CTA)
// and prints them for the graph's last launch.
// Also: a cluster kernel that only waits and syncs its cluster 0, 3 or 12 times, on the same
// chain (the cost of a cluster launch and of a cluster barrier).
// nvcc -std=c++20 -arch=sm_90a -O3 -I. tools/gpu/experiments/ple_tail/timing.cu \
//   kernels/common/launch.cc -o /tmp/ple_tail_timing
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define GANNET_PLE_TAIL_TIMESTAMPS
#include "tools/gpu/experiments/ple_tail/ple_tail.cu"

#include "../check.cuh"

// A 16-CTA cluster kernel of 1024 threads that only waits (PDL) and syncs the cluster `syncs`
// times: the chain cost of a cluster launch and of its barriers.
__global__ void __launch_bounds__(1024, 1) ClusterSyncs(int syncs, float* sink) {
  gannet::kernels::PdlEnter();
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  for (int i = 0; i < syncs; ++i) cluster.sync();
  if (threadIdx.x == 0 && syncs < 0) sink[0] = 1.f;
}

float ChainMicros(cudaStream_t s, int layers, int syncs, size_t smem, float* sink) {
  CK(cudaFuncSetAttribute(ClusterSyncs, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(ClusterSyncs, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int l = 0; l < layers; ++l) {
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 16;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(16);
    config.blockDim = dim3(1024);
    config.dynamicSmemBytes = smem;
    config.stream = s;
    config.attrs = attr;
    config.numAttrs = 2;
    CK(cudaLaunchKernelEx(&config, ClusterSyncs, syncs, sink));
  }
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaGraphLaunch(ge, s));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = ms < best ? ms : best;
  }
  return best * 1e3f / layers;
}

int main() {
  const int H = 2560, P = 256, layers = 42;
  auto zeros = [](size_t bytes) {
    void* p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0, bytes));
    return p;
  };
  std::vector<void*> gate(layers), proj(layers);
  for (int l = 0; l < layers; ++l) {
    gate[l] = zeros(size_t{2} * P * H);
    proj[l] = zeros(size_t{2} * P * H);
  }
  float* x = static_cast<float*>(zeros(4 * H));
  void* ff = zeros(2 * H);
  void* ple = zeros(2 * P);
  void* next = zeros(2 * H);
  float* w = static_cast<float*>(zeros(4 * H));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (!gannet::kernels::PleTailRuns(1, H, P)) {
    std::printf("the kernel does not run here\n");
    return 1;
  }
  auto capture = [&](bool same) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < layers; ++l) {
      gannet::kernels::PleTailParams p;
      p.x = x;
      p.ldx = H;
      p.ff_out = ff;
      p.ldf = H;
      p.ff_post_w = w;
      p.gate_w = gate[same ? 0 : l];
      p.proj_w = proj[same ? 0 : l];
      p.ple_in = ple;
      p.ldp = P;
      p.post_w = w;
      p.next_w = w;
      p.next_out = next;
      p.ldo = H;
      p.rows = 1;
      p.hidden = H;
      p.p = P;
      CK(gannet::kernels::LaunchPleTail(p, s));
    }
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    return ge;
  };
  cudaGraphExec_t ge[2] = {capture(false), capture(true)};
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int round = 0; round < 3; ++round) {
    for (int m = 0; m < 2; ++m) {
      CK(cudaGraphLaunch(ge[m], s));
      float best = 1e30f;
      for (int rep = 0; rep < 5; ++rep) {
        CK(cudaEventRecord(a, s));
        CK(cudaGraphLaunch(ge[m], s));
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = ms < best ? ms : best;
      }
      std::printf("round %d, %s: %.2f us a launch\n", round,
                  m == 0 ? "each layer's weights (DRAM)" : "one layer's weights (L2)  ",
                  best * 1e3f / layers);
    }
  }
  for (size_t smem : {size_t{0}, size_t{180} << 10}) {
    for (int syncs : {0, 3, 12}) {
      std::printf("cluster of 16 x 1024 threads, %3zu KB shared, %2d cluster syncs: %.2f us a launch\n",
                  smem >> 10, syncs, ChainMicros(s, layers, syncs, smem, w));
    }
  }
  unsigned long long ts[16][8];
  CK(cudaMemcpyFromSymbol(ts, gannet::kernels::g_ple_tail_ts, sizeof(ts)));
  const char* names[8] = {"entry", "-", "after PDL wait", "x staged, weights in", "gate + sync 1",
                          "proj + sync 2", "update + sync 3", "exit"};
  for (int i = 0; i < 8; ++i) {
    if (i == 1) continue;
    long long lo = 1LL << 62, hi = -(1LL << 62);
    for (int c = 0; c < 16; ++c) {
      const long long d = static_cast<long long>(ts[c][i] - ts[0][0]);
      lo = d < lo ? d : lo;
      hi = d > hi ? d : hi;
    }
    std::printf("%-22s %8.2f .. %8.2f us after CTA 0's entry\n", names[i], lo / 1e3, hi / 1e3);
  }
  return 0;
}
