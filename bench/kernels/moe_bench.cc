// MoE experts (26B-A4B's geometry: E 128, top-8, I 704, H 2816) through every MoeExperts entry of
// the registry, whatever token limit the entry declares, so the crossover between the per-pair
// GEMVs and the grouped GEMMs can be read off one table. Each call moves the distinct routed
// experts' weights once at best (3 I H bf16 each) plus the tokens' rows; the GB/s counter and its
// fraction of the copy reference count exactly that, so a kernel that re-reads an expert for
// every pair it serves shows it as a fraction above what it could reach.
//
// Routing: each token picks top_k distinct experts uniformly at random (fixed seed), the
// distribution of the dummy models' routers. Sixteen weight sets rotate past the L2.
#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "bench/kernels/bench_common.h"
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_entries.h"
#include "kernels/registry/registry.h"

namespace gannet::bench {
namespace {

constexpr int64_t kE = 128, kK = 8, kI = 704, kH = 2816;
constexpr int kSets = 4;  // 4 x 1.52 GB of expert weights: well past the L2

void BM_MoeExpertsEntry(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  const int nth = static_cast<int>(state.range(1));
  kernels::MoeExpertsParams p;
  p.num_tokens = tokens;
  p.hidden = kH;
  p.inter = kI;
  p.num_experts = kE;
  p.top_k = kK;
  p.ldx = p.ldo = kH;
  static void* weights[kSets] = {};
  static void *x = nullptr, *out = nullptr, *ids = nullptr, *wts = nullptr;
  const size_t expert_elems = static_cast<size_t>(3 * kI * kH);
  if (weights[0] == nullptr) {
    for (int s = 0; s < kSets; ++s) {
      CheckOk(Gpu().Synchronize(), "sync");
      if (cudaMalloc(&weights[s], kE * expert_elems * 2) != cudaSuccess) {
        state.SkipWithError("out of device memory");
        return;
      }
      FillRandomBf16(weights[s], kE * expert_elems, 11 + s, 0.02f);
    }
    cudaMalloc(&x, 4096 * kH * 2);
    cudaMalloc(&out, 4096 * kH * 2);
    cudaMalloc(&ids, 4096 * kK * 4);
    cudaMalloc(&wts, 4096 * kK * 4);
    FillRandomBf16(x, 4096 * kH, 5, 1.0f);
    std::vector<int32_t> h_ids(4096 * kK);
    std::vector<float> h_w(4096 * kK, 1.0f / kK);
    std::mt19937 rng(7);
    for (int t = 0; t < 4096; ++t) {
      std::vector<int32_t> all(kE);
      for (int e = 0; e < kE; ++e) all[e] = e;
      std::shuffle(all.begin(), all.end(), rng);
      std::copy(all.begin(), all.begin() + kK, h_ids.begin() + t * kK);
    }
    cudaMemcpy(ids, h_ids.data(), h_ids.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(wts, h_w.data(), h_w.size() * 4, cudaMemcpyHostToDevice);
  }
  p.x = x;
  p.out = out;
  p.topk_ids = static_cast<const int32_t*>(ids);
  p.topk_weights = static_cast<const float*>(wts);
  p.gate_up = weights[0];
  p.down = static_cast<const uint16_t*>(weights[0]) + kE * 2 * kI * kH;
  const kernels::ProblemKey pk = kernels::MoeExpertsProblem(p);
  const kernels::KernelEntry* entry = nullptr;
  int seen = 0;
  for (const kernels::KernelEntry* e : kernels::AllEntries()) {
    if (e->op != kernels::Op::kMoeExperts) continue;
    kernels::ProblemKey any = pk;
    any.num_tokens = 1;  // every entry, whatever its token limit
    if (!kernels::CheckEntry(*e, any, Gpu().device_info()).ok) continue;
    if (seen++ == nth) entry = e;
  }
  if (entry == nullptr) {
    state.SkipWithError("no such entry");
    return;
  }
  auto ws = Gpu().Workspace(backend::CudaBackend::WorkspaceId::kMoeExperts,
                            std::max<size_t>(1, entry->workspace_bytes(pk, Gpu().device_info())));
  CheckOk(ws.status(), "workspace");
  const double ms = TimeMs(
      [&](int i) {
        kernels::MoeExpertsParams q = p;
        q.gate_up = weights[i % kSets];
        q.down = static_cast<const uint16_t*>(weights[i % kSets]) + kE * 2 * kI * kH;
        (void)entry->launch(&q, pk, Gpu().device_info(), *ws, Gpu().stream());
      },
      16);
  std::set<int32_t> distinct;
  {
    std::vector<int32_t> h(tokens * kK);
    cudaMemcpy(h.data(), ids, h.size() * 4, cudaMemcpyDeviceToHost);
    distinct.insert(h.begin(), h.end());
  }
  const double bytes =
      static_cast<double>(distinct.size()) * expert_elems * 2 + 2.0 * tokens * kH * 2;
  const double flops = 2.0 * tokens * kK * 3 * kI * kH;
  for (auto _ : state) state.SetIterationTime(ms * 1e-3);
  state.SetLabel(entry->name);
  Report(state, ms, bytes, flops);
}

void MoeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "entry"});
  for (int64_t t : {1, 2, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 2048}) {
    for (int64_t nth = 0; nth < 3; ++nth) b->Args({t, nth});
  }
}

BENCHMARK(BM_MoeExpertsEntry)
    ->Apply(MoeArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gannet::bench

BENCHMARK_MAIN();
