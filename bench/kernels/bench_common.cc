#include "bench/kernels/bench_common.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/common/synthetic.h"
#include "lib/backend/cuda/cuda_linear.h"

namespace gannet::bench {

void CheckOk(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "bench: %s: %s\n", what, std::string(st.message()).c_str());
    std::exit(1);
  }
}

backend::CudaBackend& Gpu() {
  static backend::CudaBackend* gpu = [] {
    auto b = backend::CudaBackend::Create(0);
    CheckOk(b.status(), "creating the CUDA backend");
    return b->release();
  }();
  return *gpu;
}

double TimeMs(const std::function<void(int)>& launch, int reps) {
  cudaStream_t s = Gpu().stream();
  launch(0);  // warm-up outside the graph: workspaces, GEMM tuning
  // The calls are captured into one CUDA graph and the graph is timed, as a decode step would run:
  // host launch overhead stays out of the kernel numbers.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool use_graph = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (use_graph) {
    for (int i = 0; i < reps; ++i) launch(i + 1);
    use_graph = cudaStreamEndCapture(s, &graph) == cudaSuccess &&
                cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (!use_graph) {
    cudaGetLastError();
    std::fprintf(stderr, "bench: graph capture failed, timing eager launches\n");
  }
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  if (use_graph) cudaGraphLaunch(exec, s);  // warm replay
  cudaEventRecord(a, s);
  if (use_graph) {
    cudaGraphLaunch(exec, s);
  } else {
    for (int i = 0; i < reps; ++i) launch(i + 1);
  }
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "bench: CUDA error %s\n", cudaGetErrorName(err));
    std::exit(1);
  }
  return ms / reps;
}

void FillRandomBf16(void* data, size_t count, uint64_t seed, float scale) {
  // The synthetic-weight generator gives normal(0, 1/sqrt(fan_in)) values: pick fan_in so the
  // scale comes out as asked.
  const int64_t fan_in = std::max<int64_t>(1, static_cast<int64_t>(1.0f / (scale * scale)));
  const cudaError_t err =
      kernels::LaunchFillSynthetic(data, DType::kBF16, 0, static_cast<int64_t>(count), seed,
                                   kernels::SyntheticInit::kMatrix, fan_in, Gpu().stream());
  if (err != cudaSuccess) {
    std::fprintf(stderr, "bench: fill: %s\n", cudaGetErrorName(err));
    std::exit(1);
  }
}

namespace {

// Eager launches between two events (the references: a graph's memcpy node goes through the copy
// engines, which are slower than the copy kernel an eager device-to-device cudaMemcpyAsync uses).
double TimeMsEager(const std::function<void()>& launch, int reps) {
  cudaStream_t s = Gpu().stream();
  launch();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, s);
  for (int i = 0; i < reps; ++i) launch();
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

}  // namespace

const References& Refs() {
  static const References refs = [] {
    References r;
    backend::CudaBackend& gpu = Gpu();
    // Copy: 2 GiB source to 2 GiB destination; bytes = read + written.
    const size_t bytes = size_t{2} << 30;
    void *src = nullptr, *dst = nullptr;
    cudaMalloc(&src, bytes);
    cudaMalloc(&dst, bytes);
    cudaMemsetAsync(src, 1, bytes, gpu.stream());
    const double copy_ms = TimeMsEager(
        [&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, gpu.stream()); }, 10);
    r.copy_gbs = 2.0 * bytes / (copy_ms * 1e6);
    cudaFree(src);
    cudaFree(dst);
    // GEMM: 8192^3 bf16 through the backend's tuned cuBLASLt path, random data.
    const int64_t n = 8192;
    auto a = gpu.Allocate(n * n * 2), w = gpu.Allocate(n * n * 2), o = gpu.Allocate(n * n * 2);
    CheckOk(a.status(), "gemm reference");
    CheckOk(w.status(), "gemm reference");
    CheckOk(o.status(), "gemm reference");
    FillRandomBf16(a->data(), n * n, 1, 1.0f);
    FillRandomBf16(w->data(), n * n, 2, 0.01f);
    const backend::Tensor ta = a->View(DType::kBF16, {n, n}), tw = w->View(DType::kBF16, {n, n}),
                          to = o->View(DType::kBF16, {n, n});
    CheckOk(gpu.Linear(ta, tw, to), "gemm reference");  // tunes the shape
    const double gemm_ms = TimeMsEager([&] { CheckOk(gpu.Linear(ta, tw, to), "gemm"); }, 10);
    r.gemm_tflops = 2.0 * n * n * n / (gemm_ms * 1e9);
    std::printf(
        "references (eager): device-to-device copy %.0f GB/s (read + write), cuBLASLt bf16 8192^3 "
        "%.0f TFLOP/s\n",
        r.copy_gbs, r.gemm_tflops);
    return r;
  }();
  return refs;
}

void Report(benchmark::State& state, double ms, double bytes, double flops) {
  const References& r = Refs();
  const double gbs = bytes / (ms * 1e6);
  const double tflops = flops / (ms * 1e9);
  state.counters["us"] = ms * 1e3;
  state.counters["GB/s"] = gbs;
  state.counters["frac_copy_bw"] = gbs / r.copy_gbs;
  state.counters["TFLOP/s"] = tflops;
  state.counters["frac_gemm"] = tflops / r.gemm_tflops;
}

}  // namespace gannet::bench
