// The Gemma-4-31B linear layers at M = 1, 16, 128, 8192 (and, at M = 1, 2, 4, the smaller models'
// decode projections) through CudaLinear: the timed choice
// ("auto", what the runner gets), cuBLASLt alone and, for M <= 8, the custom GEMV alone. Weights
// are replicated and rotated past the 50 MB L2 so small-M numbers are HBM numbers. Reported as
// GB/s (weights + activations; the decode-time metric) and TFLOP/s, with fractions of the copy
// bandwidth and of the cuBLASLt 8192^3 rate measured in the same run.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bench/kernels/bench_common.h"
#include "lib/backend/cuda/cuda_linear.h"

namespace gannet::bench {
namespace {

struct Gemm {
  const char* name;
  int64_t n, k;
};
// q / k,v separately (as the task lists them), the runner's fused QKV of a sliding layer,
// o_proj, gate_up, down and the tied LM head.
const Gemm kGemms[] = {{"q_proj", 8192, 5376},
                       {"kv_proj", 4096, 5376},
                       {"qkv_sliding", 16384, 5376},
                       {"o_proj", 5376, 8192},
                       {"gate_up", 43008, 5376},
                       {"down", 5376, 21504},
                       {"lm_head", 262144, 5376},
                       // 26B-A4B, E4B and E2B: the batch-1 projections that take 3-25 us each.
                       {"26b_qkv_sliding", 8192, 2816},
                       {"26b_o_proj", 2816, 4096},
                       {"26b_gate_up", 4224, 2816},
                       {"26b_down", 2816, 2112},
                       {"e4b_qkv", 3072, 2560},
                       {"e4b_o_proj", 2560, 2048},
                       {"e4b_gate_up", 20480, 2560},
                       {"e4b_down", 2560, 10240},
                       {"e2b_qkv", 2560, 1536},
                       {"e2b_o_proj", 1536, 2048},
                       {"e2b_gate_up", 12288, 1536},
                       {"e2b_down", 1536, 6144},
                       // 31B's full-attention layers (K=V: q and one k), then one TP=2 rank's
                       // share of every 31B projection (heads and the MLP split in two).
                       {"qkv_full", 18432, 5376},
                       {"o_full", 5376, 16384},
                       {"tp2_qkv_sliding", 8192, 5376},
                       {"tp2_qkv_full", 9216, 5376},
                       {"tp2_o_sliding", 5376, 4096},
                       {"tp2_o_full", 5376, 8192},
                       {"tp2_gate_up", 21504, 5376},
                       {"tp2_down", 5376, 10752}};
constexpr int64_t kFirstSmallModelGemm = 7;
constexpr int64_t kFirstBatchedGemm = 19;

enum PathArg { kAuto = 0, kCublas = 1, kGemv = 2 };

void BM_Linear(benchmark::State& state) {
  const Gemm& g = kGemms[state.range(0)];
  const int64_t m = state.range(1);
  const PathArg path = static_cast<PathArg>(state.range(2));
  backend::CudaBackend& gpu = Gpu();
  const double w_bytes = 2.0 * g.n * g.k;
  const int copies = static_cast<int>(std::clamp(512e6 / w_bytes + 1, 1.0, 16.0));
  std::vector<backend::Buffer> ws;
  for (int c = 0; c < copies; ++c) {
    auto b = gpu.Allocate(static_cast<size_t>(w_bytes));
    CheckOk(b.status(), "weights");
    FillRandomBf16(b->data(), g.n * g.k, 10 + c, 0.02f);
    ws.push_back(std::move(*b));
  }
  auto x = gpu.Allocate(m * g.k * 2), out = gpu.Allocate(m * g.n * 2);
  CheckOk(x.status(), "x");
  CheckOk(out.status(), "out");
  FillRandomBf16(x->data(), m * g.k, 3, 1.0f);
  const backend::Tensor tx = x->View(DType::kBF16, {m, g.k}),
                        to = out->View(DType::kBF16, {m, g.n});
  backend::CudaLinear& lin = gpu.linear();
  lin.Force(path == kAuto ? std::nullopt
                          : std::optional<backend::CudaLinear::Path>(
                                path == kGemv ? backend::CudaLinear::Path::kGemv
                                              : backend::CudaLinear::Path::kCublasLt));
  auto first = lin.Run(tx, ws[0].View(DType::kBF16, {g.n, g.k}), to);  // tunes the shape
  CheckOk(first.status(), "linear");
  state.SetLabel(std::string(g.name) +
                 (first->path == backend::CudaLinear::Path::kGemv
                      ? " gemv tile " + std::to_string(static_cast<int>(first->gemv_tile))
                      : " cublasLt algo " + std::to_string(first->algo_rank) + " of " +
                            std::to_string(first->candidates)));
  const double flops = 2.0 * m * g.n * g.k;
  const int reps = flops > 1e13 ? 3 : (flops > 1e11 ? 10 : 50);
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int i) {
          CheckOk(lin.Run(tx, ws[i % copies].View(DType::kBF16, {g.n, g.k}), to).status(),
                  "linear");
        },
        reps);
    state.SetIterationTime(ms / 1e3);
    Report(state, ms, w_bytes + 2.0 * m * (g.n + g.k), flops);
  }
  lin.Force(std::nullopt);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"gemm", "m", "path"});
  for (int64_t gi = 0; gi < kFirstSmallModelGemm; ++gi) {
    for (int64_t m : {1, 16, 128, 8192}) {
      b->Args({gi, m, kAuto});
      if (m <= 16) b->Args({gi, m, kCublas});
      if (m == 1) b->Args({gi, m, kGemv});
    }
  }
}

BENCHMARK(BM_Linear)->Apply(Args)->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);

// M = 2, 4, 8 for the decode shapes: where the GEMV must beat cuBLASLt to be chosen.
void SmallMArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"gemm", "m", "path"});
  for (int64_t gi : {0, 1, 3}) {
    for (int64_t m : {2, 4, 8}) {
      b->Args({gi, m, kCublas});
      b->Args({gi, m, kGemv});
    }
  }
}
BENCHMARK(BM_Linear)
    ->Name("BM_LinearSmallM")
    ->Apply(SmallMArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

// The smaller models' projections at the batches where the GEMV competes.
void SmallModelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"gemm", "m", "path"});
  for (int64_t gi = kFirstSmallModelGemm; gi < static_cast<int64_t>(std::size(kGemms)); ++gi) {
    for (int64_t m : {1, 2, 4}) {
      b->Args({gi, m, kCublas});
      b->Args({gi, m, kGemv});
    }
  }
}
BENCHMARK(BM_Linear)
    ->Name("BM_LinearSmallModels")
    ->Apply(SmallModelArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

// 31B's projections (TP=1 and one TP=2 rank) at the batched-decode sizes, where cuBLASLt's pick
// among its heuristic candidates (GANNET_LINEAR_ALGOS of them) sets a step's projection time.
void BatchedArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"gemm", "m", "path"});
  for (int64_t gi :
       {int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, kFirstBatchedGemm, kFirstBatchedGemm + 1}) {
    for (int64_t m : {64, 80}) b->Args({gi, m, kAuto});
  }
  for (int64_t gi = kFirstBatchedGemm + 2; gi < static_cast<int64_t>(std::size(kGemms)); ++gi) {
    for (int64_t m : {48, 64, 80, 96}) b->Args({gi, m, kAuto});
  }
}
BENCHMARK(BM_Linear)
    ->Name("BM_LinearBatched")
    ->Apply(BatchedArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gannet::bench

BENCHMARK_MAIN();
