// The W4A16 int4 linear kernels (kernels/quant) on the Gemma-4 projection shapes (31B, 26B-A4B,
// E4B, E2B) at M = 1, 4, 8, 16, 64 and a 2048-row prefill, next to the bf16 linear layer
// (CudaLinear's timed choice: the GEMV or cuBLASLt) of the same shape. Reported as us, GB/s and
// its fraction of the device-to-device copy bandwidth measured in the same run (bytes = packed
// weights + scales + zero points + activations + outputs), and TFLOP/s. Weights are replicated
// and rotated past the L2 so small-M numbers are HBM numbers. Group size 32 (Google's QAT
// checkpoints) unless the benchmark's name says otherwise.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/kernels/bench_common.h"
#include "kernels/quant/int4_entries.h"
#include "kernels/quant/int4_linear.h"
#include "kernels/quant/int4_repack.h"
#include "kernels/registry/registry.h"
#include "lib/backend/cuda/cuda_linear.h"

namespace gannet::bench {
namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};
// q / kv / o / gate_up / down of each variant (31B: sliding layers; the fused QKV the runner
// uses and the K=V full layer's q+k as well).
const Shape kShapes[] = {
    {"31b_q_proj", 8192, 5376},    {"31b_kv_proj", 4096, 5376}, {"31b_qkv_sliding", 16384, 5376},
    {"31b_qkv_full", 18432, 5376}, {"31b_o_proj", 5376, 8192},  {"31b_o_full", 5376, 16384},
    {"31b_gate_up", 43008, 5376},  {"31b_down", 5376, 21504},   {"26b_qkv_sliding", 8192, 2816},
    {"26b_o_proj", 2816, 4096},    {"26b_gate_up", 4224, 2816}, {"26b_down", 2816, 2112},
    {"e4b_qkv", 3072, 2560},       {"e4b_o_proj", 2560, 2048},  {"e4b_gate_up", 20480, 2560},
    {"e4b_down", 2560, 10240},     {"e2b_qkv", 2560, 1536},     {"e2b_o_proj", 1536, 2048},
    {"e2b_gate_up", 12288, 1536},  {"e2b_down", 1536, 6144}};

enum PathArg { kInt4Auto = 0, kInt4Gemv = 1, kInt4Gemm = 2, kInt4Simt = 3, kBf16 = 4 };

// Copies of a weight of `bytes` so the rotation spans at least 256 MB (5x an H100/H200 L2).
int CopiesFor(double bytes) { return static_cast<int>(std::clamp(256e6 / bytes + 1, 1.0, 128.0)); }

void BM_Int4(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  const int m = static_cast<int>(state.range(1));
  const PathArg path = static_cast<PathArg>(state.range(2));
  const int group = static_cast<int>(state.range(3));
  backend::CudaBackend& gpu = Gpu();
  const double flops = 2.0 * m * s.n * s.k;
  const int reps = flops > 1e12 ? 5 : (flops > 1e10 ? 20 : 100);
  auto x = gpu.Allocate(static_cast<size_t>(m) * s.k * 2),
       out = gpu.Allocate(static_cast<size_t>(m) * s.n * 2);
  CheckOk(x.status(), "x");
  CheckOk(out.status(), "out");
  FillRandomBf16(x->data(), static_cast<size_t>(m) * s.k, 3, 1.0f);
  const double act_bytes = 2.0 * m * (s.n + s.k);

  if (path == kBf16) {
    const double w_bytes = 2.0 * s.n * s.k;
    const int copies = CopiesFor(w_bytes);
    std::vector<backend::Buffer> ws;
    for (int c = 0; c < copies; ++c) {
      auto b = gpu.Allocate(static_cast<size_t>(w_bytes));
      CheckOk(b.status(), "weights");
      FillRandomBf16(b->data(), static_cast<size_t>(s.n * s.k), 10 + c, 0.02f);
      ws.push_back(std::move(*b));
    }
    const backend::Tensor tx = x->View(DType::kBF16, {m, s.k}),
                          to = out->View(DType::kBF16, {m, s.n});
    backend::CudaLinear& lin = gpu.linear();
    auto first = lin.Run(tx, ws[0].View(DType::kBF16, {s.n, s.k}), to);  // tunes the shape
    CheckOk(first.status(), "linear");
    state.SetLabel(std::string(s.name) + " bf16 " +
                   (first->path == backend::CudaLinear::Path::kGemv ? "gemv" : "cublasLt"));
    for (auto _ : state) {
      const double ms = TimeMs(
          [&](int i) {
            CheckOk(lin.Run(tx, ws[i % copies].View(DType::kBF16, {s.n, s.k}), to).status(),
                    "linear");
          },
          reps);
      state.SetIterationTime(ms / 1e3);
      Report(state, ms, w_bytes + act_bytes, flops);
    }
    return;
  }

  // Random bytes in the device layout (timing does not depend on the values) and bf16 scales.
  const kernels::Int4Layout layout = kernels::Int4LayoutOf(WeightFormat::Int4(group), s.n, s.k);
  const double w_bytes = static_cast<double>(layout.packed_bytes() + layout.scale_bytes());
  const int copies = CopiesFor(w_bytes);
  std::vector<backend::Buffer> packed, scales;
  for (int c = 0; c < copies; ++c) {
    auto w = gpu.Allocate(static_cast<size_t>(layout.packed_bytes()));
    auto sc = gpu.Allocate(static_cast<size_t>(layout.scale_bytes()));
    CheckOk(w.status(), "weights");
    CheckOk(sc.status(), "scales");
    FillRandomBf16(w->data(), static_cast<size_t>(layout.packed_bytes() / 2), 10 + c, 1.0f);
    FillRandomBf16(sc->data(), static_cast<size_t>(layout.scale_bytes() / 2), 20 + c, 0.01f);
    packed.push_back(std::move(*w));
    scales.push_back(std::move(*sc));
  }
  kernels::Int4LinearParams p;
  p.x = x->data();
  p.out = out->data();
  p.layout = layout;
  p.m = m;
  p.ldx = s.k;
  p.ldo = s.n;
  p.w = static_cast<const uint8_t*>(packed[0].data());
  p.scales = scales[0].data();
  kernels::DeviceInfo dev;
  if (kernels::DeviceInfo::Query(0, &dev) != cudaSuccess) state.SkipWithError("no device");
  const kernels::ProblemKey pk = kernels::Int4Problem(p);
  const kernels::KernelEntry* entry = nullptr;
  if (path == kInt4Auto) {
    const kernels::Selection sel = kernels::Select(pk, dev);
    entry = sel.entry;
    if (entry == nullptr) {
      state.SkipWithError(sel.error.c_str());
      return;
    }
  } else {
    const char* names[] = {"", "sm80_int4_gemv_bf16_i4", "sm80_int4_gemm_bf16_i4",
                           "sm70_int4_simt_bf16_i4"};
    entry = kernels::FindEntry(names[path]);
    const kernels::KernelStatus st = kernels::CheckEntry(*entry, pk, dev);
    if (!st.ok) {
      state.SkipWithError(st.reason.c_str());
      return;
    }
  }
  // A fifth argument > 0 runs the GEMV with that split over K instead of the entry's choice
  // (Int4GemvSplits), to tune it.
  const int forced_splits =
      state.range(4) > 0 && path == kInt4Gemv ? static_cast<int>(state.range(4)) : 0;
  const size_t ws_bytes = forced_splits > 0
                              ? kernels::Int4GemvWorkspaceBytes(m, layout.n_pad, forced_splits)
                              : entry->workspace_bytes(pk, dev);
  auto ws = gpu.Allocate(std::max<size_t>(16, ws_bytes));
  CheckOk(ws.status(), "workspace");
  const bool gemv = std::string(entry->name).find("gemv") != std::string::npos;
  const int splits =
      forced_splits > 0 ? forced_splits : kernels::Int4GemvSplits(layout, dev.num_sms);
  state.SetLabel(std::string(s.name) + " g" + std::to_string(group) + " " + entry->name +
                 (gemv ? " splits " + std::to_string(splits) : ""));
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int i) {
          kernels::Int4LinearParams q = p;
          q.w = static_cast<const uint8_t*>(packed[i % copies].data());
          q.scales = scales[i % copies].data();
          cudaError_t err;
          if (forced_splits > 0) {
            q.splits = forced_splits;
            q.workspace = ws->data();
            err = kernels::LaunchInt4Linear(kernels::Int4Kernel::kMmaGemv, q, gpu.stream());
          } else {
            err = entry->launch(&q, pk, dev, ws->data(), gpu.stream());
          }
          if (err != cudaSuccess) state.SkipWithError("launch failed");
        },
        reps);
    state.SetIterationTime(ms / 1e3);
    Report(state, ms, w_bytes + act_bytes, flops);
  }
}

// Every shape at every M: the registry's int4 choice and the bf16 layer.
void MainArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "m", "path", "group", "splits"});
  for (int64_t si = 0; si < static_cast<int64_t>(std::size(kShapes)); ++si) {
    for (int64_t m : {1, 4, 8, 16, 64, 2048}) {
      b->Args({si, m, kInt4Auto, 32, 0});
      b->Args({si, m, kBf16, 32, 0});
    }
  }
}
BENCHMARK(BM_Int4)->Apply(MainArgs)->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);

// Each kernel alone (M = 1 and 8: the GEMV against the Volta SIMT kernel; 16 and 64: the GEMM
// against SIMT), the GEMV at M = 1 with each split over K, and the other group sizes at M = 1
// and 2048.
void KernelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "m", "path", "group", "splits"});
  for (int64_t si : {0, 4, 6, 7, 15, 19}) {
    for (int64_t m : {1, 8}) {
      b->Args({si, m, kInt4Gemv, 32, 0});
      b->Args({si, m, kInt4Simt, 32, 0});
    }
    for (int64_t splits : {1, 2, 4, 8}) b->Args({si, 1, kInt4Gemv, 32, splits});
    for (int64_t m : {16, 64}) {
      b->Args({si, m, kInt4Gemm, 32, 0});
      b->Args({si, m, kInt4Simt, 32, 0});
    }
    for (int64_t g : {64, 128}) {
      b->Args({si, 1, kInt4Auto, g, 0});
      b->Args({si, 2048, kInt4Auto, g, 0});
    }
  }
}
BENCHMARK(BM_Int4)
    ->Name("BM_Int4Kernels")
    ->Apply(KernelArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gannet::bench

BENCHMARK_MAIN();
