// Paged attention on Gemma-4-31B shapes through CudaBackend::Attention (registry selection):
//   decode  hd512 32q/4kv (full layers), hd256 32q/16kv without window (bandwidth shape) and with
//           the 1024 window (the real sliding layer); batch 1 and 16; contexts 1k / 8k / 32k;
//           batch 64 at 1.5k (31B's serving step).
//           Reported as GB/s of KV + q + out bytes and its fraction of the copy bandwidth; the KV
//           pool is replicated and rotated so repeated calls never hit a warm L2.
//   prefill the same heads, causal from position 0 (batch 1: 1k / 8k / 32k; batch 16: 1k / 8k),
//           reported as TFLOP/s (4 nq d per (query, key) pair attended) and its fraction of the
//           measured cuBLASLt bf16 GEMM rate.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/kernels/bench_common.h"
#include "kernels/attention/attention_entries.h"

namespace gannet::bench {
namespace {

constexpr int kPage = 16;
constexpr double kRotateBytes = 512e6;  // >> 50 MB L2

struct Shape {
  int d, nq, nkv, window;
};

struct PagedSetup {
  std::vector<backend::Buffer> bufs;
  std::vector<std::vector<int32_t>> host_tables;
  std::vector<int32_t> query_start, seq_lens, positions;
  std::vector<backend::StepMetadata> metas;  // one per KV copy
  backend::AttentionArgs args;
  backend::Tensor q, out, k, v;
};

backend::Buffer Alloc(size_t bytes) {
  auto b = Gpu().Allocate(bytes);
  CheckOk(b.status(), "allocation");
  return std::move(*b);
}

int32_t* Upload(PagedSetup& s, const std::vector<int32_t>& host) {
  s.bufs.push_back(Alloc(host.size() * 4));
  CheckOk(Gpu().CopyToDevice(s.bufs.back().data(), host.data(), host.size() * 4), "upload");
  return static_cast<int32_t*>(s.bufs.back().data());
}

// batch sequences of `ctx` tokens, each bringing its last `q_len` tokens; `copies` KV pools.
void Build(PagedSetup& s, const Shape& sh, int batch, int ctx, int q_len, int copies) {
  const int pages_per_seq = (ctx + kPage - 1) / kPage;
  const int64_t pages_per_copy = static_cast<int64_t>(batch) * pages_per_seq;
  const int64_t pages = pages_per_copy * copies;
  const size_t kv_elems = static_cast<size_t>(pages) * sh.nkv * kPage * sh.d;
  s.bufs.push_back(Alloc(kv_elems * 2));
  s.k = s.bufs.back().View(DType::kBF16, {pages, sh.nkv, kPage, sh.d});
  FillRandomBf16(s.k.data, kv_elems, 1, 1.0f);
  s.bufs.push_back(Alloc(kv_elems * 2));
  s.v = s.bufs.back().View(DType::kBF16, {pages, sh.nkv, kPage, sh.d});
  FillRandomBf16(s.v.data, kv_elems, 2, 1.0f);
  const int64_t tokens = static_cast<int64_t>(batch) * q_len;
  s.bufs.push_back(Alloc(tokens * sh.nq * sh.d * 2));
  s.q = s.bufs.back().View(DType::kBF16, {tokens, sh.nq, sh.d});
  FillRandomBf16(s.q.data, tokens * sh.nq * sh.d, 3, 0.05f);
  s.bufs.push_back(Alloc(tokens * sh.nq * sh.d * 2));
  s.out = s.bufs.back().View(DType::kBF16, {tokens, sh.nq, sh.d});

  s.query_start.assign(batch + 1, 0);
  s.seq_lens.assign(batch, ctx);
  s.positions.clear();
  for (int b = 0; b < batch; ++b) {
    s.query_start[b + 1] = (b + 1) * q_len;
    for (int i = 0; i < q_len; ++i) s.positions.push_back(ctx - q_len + i);
  }
  int32_t* qs = Upload(s, s.query_start);
  int32_t* lens = Upload(s, s.seq_lens);
  int32_t* pos = Upload(s, s.positions);
  s.host_tables.resize(copies);
  s.metas.resize(copies);
  for (int c = 0; c < copies; ++c) {
    std::vector<int32_t>& t = s.host_tables[c];
    t.resize(static_cast<size_t>(batch) * pages_per_seq);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(c * pages_per_copy + i);
    backend::StepMetadata& m = s.metas[c];
    m.num_seqs = batch;
    m.num_tokens = static_cast<int>(tokens);
    m.max_query_len = q_len;
    m.max_seq_len = ctx;
    m.query_start = qs;
    m.seq_lens = lens;
    m.positions = pos;
    m.host_query_start = s.query_start.data();
    m.host_seq_lens = s.seq_lens.data();
    m.host_positions = s.positions.data();
    backend::KvGroupView& g = m.groups[0];
    g.page_size = kPage;
    g.num_pages = static_cast<int>(pages);
    g.max_pages_per_seq = pages_per_seq;
    g.page_table = Upload(s, t);
    g.host_page_table = t.data();
  }
  backend::AttentionArgs& a = s.args;
  a.q = s.q;
  a.kv.k = s.k;
  a.kv.v = s.v;
  a.out = s.out;
  a.num_q_heads = sh.nq;
  a.num_kv_heads = sh.nkv;
  a.head_dim = sh.d;
  a.window = sh.window;
  a.scale = 1.0f;
  a.meta = &s.metas[0];
  CheckOk(Gpu().Synchronize(), "setup");
}

void Label(benchmark::State& state, backend::AttentionArgs& a) {
  auto entry = Gpu().SelectAttention(a);
  CheckOk(entry.status(), "selection");
  std::string label = (*entry)->name;
  kernels::PagedAttentionParams p;
  p.head_dim = a.head_dim;
  p.num_q_heads = a.num_q_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.window = a.window;
  p.page_size = kPage;
  p.num_seqs = a.meta->num_seqs;
  p.num_tokens = a.meta->num_tokens;
  p.max_query_len = a.meta->max_query_len;
  p.max_seq_len = a.meta->max_seq_len;
  const kernels::ProblemKey pk = kernels::AttentionProblem((*entry)->op, p);
  const int splits = kernels::FlashAttentionSplits(**entry, pk, Gpu().device_info());
  if (splits > 0) label += " splits=" + std::to_string(splits);
  if (*entry == &kernels::kSm80DecodeHd256Split &&
      kernels::Hd256DecodeUsesNarrowTile(pk, Gpu().device_info())) {
    label += " 16-key tiles";
  }
  state.SetLabel(label);
}

void BM_AttentionDecode(benchmark::State& state) {
  const Shape sh{static_cast<int>(state.range(0)), 32, static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2))};
  const int batch = static_cast<int>(state.range(3)), ctx = static_cast<int>(state.range(4));
  const int kv_len = sh.window > 0 ? std::min(ctx, sh.window) : ctx;
  const double kv_bytes = 2.0 * batch * kv_len * sh.nkv * sh.d * 2;
  const double io_bytes = kv_bytes + 2.0 * batch * sh.nq * sh.d * 2;
  // Whole pools are replicated (every page of the context), only the window's pages are read.
  const double pool_bytes = 4.0 * batch * ctx * sh.nkv * sh.d;
  const int copies = static_cast<int>(std::clamp(kRotateBytes / pool_bytes + 1, 1.0, 64.0));
  PagedSetup s;
  Build(s, sh, batch, ctx, 1, copies);
  Label(state, s.args);
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int i) {
          s.args.meta = &s.metas[i % copies];
          CheckOk(Gpu().Attention(s.args), "attention");
        },
        50);
    state.SetIterationTime(ms / 1e3);
    Report(state, ms, io_bytes, 4.0 * batch * sh.nq * sh.d * kv_len);
  }
}

void BM_AttentionPrefill(benchmark::State& state) {
  const Shape sh{static_cast<int>(state.range(0)), 32, static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2))};
  const int batch = static_cast<int>(state.range(3)), ctx = static_cast<int>(state.range(4));
  PagedSetup s;
  Build(s, sh, batch, ctx, ctx, 1);
  Label(state, s.args);
  double pairs = 0;
  for (int p = 0; p < ctx; ++p) pairs += sh.window > 0 ? std::min(p + 1, sh.window) : p + 1;
  const double flops = 4.0 * batch * sh.nq * sh.d * pairs;
  const int reps = flops > 5e13 ? 2 : (flops > 5e12 ? 5 : 20);
  for (auto _ : state) {
    const double ms = TimeMs([&](int) { CheckOk(Gpu().Attention(s.args), "attention"); }, reps);
    state.SetIterationTime(ms / 1e3);
    const double bytes = 2.0 * batch * ctx * sh.nq * sh.d * 2 + 4.0 * batch * ctx * sh.nkv * sh.d;
    Report(state, ms, bytes, flops);
  }
}

// The n-th flash entry of `op` (registry order) that can run the problem of `s`, or null.
const kernels::KernelEntry* NthFlashEntry(kernels::Op op, const PagedSetup& s, const Shape& sh,
                                          int batch, int q_len, int ctx, int nth) {
  kernels::PagedAttentionParams probe;
  probe.q = s.q.data;
  probe.out = s.out.data;
  probe.k_cache = s.k.data;
  probe.v_cache = s.v.data;
  probe.q_stride = probe.out_stride = static_cast<int64_t>(sh.nq) * sh.d;
  probe.head_dim = sh.d;
  probe.page_size = kPage;
  probe.num_q_heads = sh.nq;
  probe.num_kv_heads = sh.nkv;
  probe.window = sh.window;
  probe.num_seqs = batch;
  probe.num_tokens = batch * q_len;
  probe.max_query_len = q_len;
  probe.max_seq_len = ctx;
  const kernels::ProblemKey pk = kernels::AttentionProblem(op, probe);
  int seen = 0;
  for (const kernels::KernelEntry* e : kernels::AllEntries()) {
    if (e->op != op || !kernels::IsFlashEntry(*e)) continue;
    if (!kernels::CheckEntry(*e, pk, Gpu().device_info()).ok) continue;
    if (seen++ == nth) return e;
  }
  return nullptr;
}

// Decode on each flash decode entry that can run it, with its own split count: the tile
// configurations side by side at the step's real shapes (31B at batch 16 and 64, context 1500:
// the sliding layers' 1024-key window and the full layers' whole context). range(5) picks the
// n-th such entry in registry order; past the last, the benchmark is skipped. sm75/sm70 entries
// run as PTX JIT-compiled for this GPU: their times say nothing about those parts.
void BM_AttentionDecodeEntry(benchmark::State& state) {
  const Shape sh{static_cast<int>(state.range(0)), 32, static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2))};
  const int batch = static_cast<int>(state.range(3)), ctx = static_cast<int>(state.range(4));
  const int kv_len = sh.window > 0 ? std::min(ctx, sh.window) : ctx;
  const double io_bytes = 2.0 * batch * kv_len * sh.nkv * sh.d * 2 + 2.0 * batch * sh.nq * sh.d * 2;
  const double pool_bytes = 4.0 * batch * ctx * sh.nkv * sh.d;
  const int copies = static_cast<int>(std::clamp(kRotateBytes / pool_bytes + 1, 1.0, 64.0));
  PagedSetup s;
  Build(s, sh, batch, ctx, 1, copies);
  const kernels::KernelEntry* entry = NthFlashEntry(kernels::Op::kAttentionDecode, s, sh, batch, 1,
                                                    ctx, static_cast<int>(state.range(5)));
  if (entry == nullptr) {
    state.SkipWithError("no such entry: fewer decode entries run this problem");
    return;
  }
  state.SetLabel(entry->name);
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int i) {
          s.args.meta = &s.metas[i % copies];
          CheckOk(Gpu().RunAttentionEntry(*entry, s.args, 0), "attention");
        },
        50);
    state.SetIterationTime(ms / 1e3);
    Report(state, ms, io_bytes, 4.0 * batch * sh.nq * sh.d * kv_len);
  }
}

void DecodeEntryArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hd", "nkv", "window", "batch", "ctx", "entry"});
  for (auto shape : {std::vector<int64_t>{256, 16, 1024}, {512, 4, 0}}) {
    for (int64_t batch : {16, 64}) {
      for (int64_t nth = 0; nth < 6; ++nth)
        b->Args({shape[0], shape[1], shape[2], batch, 1500, nth});
    }
  }
}

// Prefill (batch 1, causal from position 0) on each prefill entry that can run it, CUDA-core
// kernel aside: the fraction of the GEMM rate per entry and context (issue 16's yardstick for a
// Hopper-native prefill). range(4) picks the n-th such entry in registry order; past the last,
// the benchmark is skipped. The sm75 entries run as compute_75 PTX JIT-compiled for this GPU:
// their times say nothing about a Turing part.
void BM_AttentionPrefillEntry(benchmark::State& state) {
  const Shape sh{static_cast<int>(state.range(0)), 32, static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2))};
  const int ctx = static_cast<int>(state.range(3)), nth = static_cast<int>(state.range(4));
  PagedSetup s;
  Build(s, sh, 1, ctx, ctx, 1);
  const kernels::KernelEntry* entry =
      NthFlashEntry(kernels::Op::kAttentionPrefill, s, sh, 1, ctx, ctx, nth);
  if (entry == nullptr) {
    state.SkipWithError("no such entry: fewer prefill entries run this problem");
    return;
  }
  state.SetLabel(entry->name);
  double pairs = 0;
  for (int p = 0; p < ctx; ++p) pairs += sh.window > 0 ? std::min(p + 1, sh.window) : p + 1;
  const double flops = 4.0 * sh.nq * sh.d * pairs;
  const int reps = flops > 5e13 ? 2 : (flops > 5e12 ? 5 : 20);
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int) { CheckOk(Gpu().RunAttentionEntry(*entry, s.args, 0), "attention"); }, reps);
    state.SetIterationTime(ms / 1e3);
    const double bytes = 2.0 * ctx * sh.nq * sh.d * 2 + 4.0 * ctx * sh.nkv * sh.d;
    Report(state, ms, bytes, flops);
  }
}

void PrefillEntryArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hd", "nkv", "window", "ctx", "entry"});
  for (auto shape : {std::vector<int64_t>{512, 4, 0}, {256, 16, 1024}}) {
    for (int64_t ctx : {8192, 32768, 131072}) {
      for (int64_t nth = 0; nth < 4; ++nth) b->Args({shape[0], shape[1], shape[2], ctx, nth});
    }
  }
}

// The same decode with a forced split count, and optionally the alternative tile configuration
// of the selected entry (hd512: "_deep", 32-key tiles x 3 stages; hd256: "_small", 16-key tiles),
// to check the split heuristic and the tile choice against their neighbours.
void BM_AttentionDecodeSplits(benchmark::State& state) {
  const Shape sh{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
                 static_cast<int>(state.range(2)), static_cast<int>(state.range(3))};
  const int batch = static_cast<int>(state.range(4)), ctx = static_cast<int>(state.range(5));
  const int splits = static_cast<int>(state.range(6));
  const bool alt = state.range(7) != 0;
  const int kv_len = sh.window > 0 ? std::min(ctx, sh.window) : ctx;
  const double io_bytes = 2.0 * batch * kv_len * sh.nkv * sh.d * 2 + 2.0 * batch * sh.nq * sh.d * 2;
  const double pool_bytes = 4.0 * batch * ctx * sh.nkv * sh.d;
  const int copies = static_cast<int>(std::clamp(kRotateBytes / pool_bytes + 1, 1.0, 64.0));
  PagedSetup s;
  Build(s, sh, batch, ctx, 1, copies);
  auto entry = Gpu().SelectAttention(s.args);
  CheckOk(entry.status(), "selection");
  if (alt) {
    const kernels::KernelEntry* e =
        kernels::FindEntry(std::string((*entry)->name) + (sh.d == 512 ? "_deep" : "_small"));
    if (e == nullptr) CheckOk(absl::NotFoundError("no alternative variant"), (*entry)->name);
    *entry = e;
  }
  state.SetLabel(std::string((*entry)->name) + " splits=" + std::to_string(splits));
  for (auto _ : state) {
    const double ms = TimeMs(
        [&](int i) {
          s.args.meta = &s.metas[i % copies];
          CheckOk(Gpu().RunAttentionEntry(**entry, s.args, splits), "attention");
        },
        50);
    state.SetIterationTime(ms / 1e3);
    Report(state, ms, io_bytes, 4.0 * batch * sh.nq * sh.d * kv_len);
  }
}

void SplitArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hd", "nq", "nkv", "window", "batch", "ctx", "splits", "alt"});
  for (int64_t s : {16, 28, 33, 48}) b->Args({512, 32, 4, 0, 1, 8192, s, 0});
  for (int64_t s : {16, 33}) b->Args({512, 32, 4, 0, 1, 8192, s, 1});
  for (int64_t s : {2, 4, 8}) b->Args({512, 32, 4, 0, 16, 8192, s, 0});
  for (int64_t s : {2, 4}) b->Args({512, 32, 4, 0, 16, 8192, s, 1});
  for (int64_t s : {8, 16, 24}) b->Args({256, 32, 16, 0, 1, 8192, s, 0});
  b->Args({256, 32, 16, 0, 1, 8192, 16, 1});
  // Batch 1 over 1024 keys (what a sliding layer reads) and 2k (a full layer at chat lengths).
  for (int64_t s : {8, 14, 16, 24, 32}) b->Args({256, 32, 16, 0, 1, 1024, s, 0});
  for (int64_t s : {32, 64}) b->Args({256, 32, 16, 0, 1, 1024, s, 1});
  for (int64_t s : {8, 16, 28, 32, 48}) b->Args({512, 32, 4, 0, 1, 2048, s, 0});
  // A 31B step at 80 sequences, context 1500, one rank of TP=2 (half the heads) and TP=1: the
  // sliding layer on the 16-key tiles and the full layer, where the grid is 1.2-2.4 waves
  // unsplit (how many splits pay for their merge).
  for (int64_t s : {1, 2, 3, 4, 5, 6, 8}) {
    b->Args({256, 16, 8, 1024, 80, 1500, s, 1});
    b->Args({256, 32, 16, 1024, 80, 1500, s, 1});
    b->Args({512, 16, 2, 0, 80, 1500, s, 0});
  }
  // The same rank at 64 sequences (128 full-layer CTAs: fewer than the SMs) and the sliding
  // layer's 32-key tiles at 24 (192 CTAs: one wave with a CTA on every SM).
  for (int64_t s : {1, 2, 3, 4}) {
    b->Args({512, 16, 2, 0, 64, 1500, s, 0});
    b->Args({256, 16, 8, 1024, 24, 1500, s, 0});
  }
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hd", "nkv", "window", "batch", "ctx"});
  for (auto shape : {std::vector<int64_t>{512, 4, 0}, {256, 16, 0}, {256, 16, 1024}}) {
    for (int64_t batch : {1, 16}) {
      for (int64_t ctx : {1024, 8192, 32768}) b->Args({shape[0], shape[1], shape[2], batch, ctx});
    }
    b->Args({shape[0], shape[1], shape[2], 64, 1500});  // 31B's serving step
  }
}

void PrefillArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"hd", "nkv", "window", "batch", "ctx"});
  for (auto shape : {std::vector<int64_t>{512, 4, 0}, {256, 16, 1024}}) {
    for (int64_t ctx : {1024, 8192, 32768}) b->Args({shape[0], shape[1], shape[2], 1, ctx});
    for (int64_t ctx : {1024, 8192}) b->Args({shape[0], shape[1], shape[2], 16, ctx});
  }
}

BENCHMARK(BM_AttentionDecode)
    ->Apply(DecodeArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeSplits)
    ->Apply(SplitArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeEntry)
    ->Apply(DecodeEntryArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionPrefill)
    ->Apply(PrefillArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionPrefillEntry)
    ->Apply(PrefillEntryArgs)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gannet::bench

BENCHMARK_MAIN();
