// gannet-allreduce-bench: the all-reduce of the tensor-parallel runner (parallel::CreateNcclGroup,
// as the runner issues it: in place, bf16, on each rank's stream, one thread per rank) timed per
// message size on devices 0 .. N - 1. Prints microseconds per call and the bus bandwidth
// (algorithm bandwidth x 2 (N - 1) / N, NCCL's convention).
//
//   gannet-allreduce-bench [--tp 2] [--iters 200]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lib/backend/backend_factory.h"
#include "lib/parallel/tp_setup.h"

namespace gannet {
namespace {

int Run(int world, int iters) {
  backend::BackendOptions cuda;
  cuda.kind = "cuda";
  auto group = parallel::CreateTpGroup(cuda, world, {});
  if (!group.ok()) {
    std::fprintf(stderr, "allreduce-bench: %s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  std::printf("allreduce-bench: %d ranks, bf16 in place, %d calls per size (NCCL_NVLS_ENABLE=%s)\n",
              world, iters,
              std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "unset");
  std::printf("  %10s %10s %12s %12s\n", "bytes", "us/call", "algbw GB/s", "busbw GB/s");
  std::vector<backend::Buffer> bufs(world);
  const size_t max_bytes = 256u << 20;
  for (int r = 0; r < world; ++r) {
    (void)group->backends[r]->BindThread();
    auto b = group->backends[r]->AllocateZeroed(max_bytes);
    if (!b.ok()) {
      std::fprintf(stderr, "allreduce-bench: %s\n", std::string(b.status().message()).c_str());
      return 1;
    }
    bufs[r] = std::move(*b);
  }
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const int64_t n = static_cast<int64_t>(bytes / 2);
    std::barrier sync(world);
    std::vector<double> seconds(world);
    std::vector<std::thread> threads;
    bool failed = false;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        backend::Backend& be = *group->backends[r];
        (void)be.BindThread();
        backend::Tensor t = bufs[r].View(DType::kBF16, {n});
        auto call = [&] {
          if (!group->collectives[r]->AllReduceSum(t).ok()) failed = true;
        };
        for (int i = 0; i < 5; ++i) call();
        (void)be.Synchronize();
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) call();
        (void)be.Synchronize();
        seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    for (auto& t : threads) t.join();
    if (failed) {
      std::fprintf(stderr, "allreduce-bench: an all-reduce failed\n");
      return 1;
    }
    const double s = *std::max_element(seconds.begin(), seconds.end()) / iters;
    const double alg = bytes / s / 1e9;
    std::printf("  %10zu %10.1f %12.1f %12.1f\n", bytes, s * 1e6, alg,
                alg * 2 * (world - 1) / world);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace gannet

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log even when a timeout kills the run
  int world = 2, iters = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tp" && i + 1 < argc) {
      world = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: gannet-allreduce-bench [--tp N] [--iters N]\n");
      return 2;
    }
  }
  if (world < 1 || world > 8 || iters < 1) return 2;
  return gannet::Run(world, iters);
}
