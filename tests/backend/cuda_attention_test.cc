// Every attention entry of the kernel registry that can run on this GPU, against the CPU backend's
// Attention, on real Gemma-4 head counts (31B: 32q/16kv hd256 sliding, 32q/4kv hd512 full; E2B/E4B
// style 8q/2kv), contexts up to 8k, windows crossed, page sizes 16 and 32, shuffled pages,
// released sliding pages, split counts forced from 1 to 64, decode, prefill, chunked prefill and
// mixed batches.
//
// Released sliding pages point at a page filled with NaN (or are -1 holes): a kernel that reads
// anything outside [pos - window + 1, pos] of some query turns the output into NaN. Pages no
// sequence owns are NaN too. The output is poisoned with NaN before each run, so an unwritten
// element fails.
//
// Cases marked k_from_v run the single-store K=V layout (31B / 26B-A4B full layers): no K array;
// K is derived from V with a k_norm weight and the full layers' proportional RoPE (64 rotated
// pairs, theta 1e6), which the CPU reference derives the same way.
//
// Every case runs twice: over a bf16 cache, and over an FP8 cache (the FP8 entries, forced and
// selected) against the CPU backend reading the same FP8 bytes and scales, so the comparison
// measures the kernels, not the quantisation. The fp16 compute path's entries (f16io: q and out
// fp16, the Volta and CUDA-core kernels) run with the same q as fp16 (exact: q is bf16-exact).
//
// Tolerance: rel-L2 <= 1e-2 per case. The inputs are bf16 for both backends; the GPU rounds the
// softmax weights P to bf16 before P.V (relative 2^-9 each) and its output to bf16 (2^-9), and sums
// in another order; over <= 8k keys that is a few 1e-3 (bf16 operands typically land between
// 1e-3 and 1e-2).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/attention_entries.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "tests/backend/cuda_test_util.h"
#include "tests/testing/fp8_kv.h"

namespace gannet {
namespace {

using backend::AttentionArgs;
using backend::StepMetadata;
using backend::Tensor;
using testing::DeviceTensor;

constexpr double kTolerance = 1e-2;

struct Case {
  std::string name;
  int nq, nkv, d, page, window;
  std::vector<int> seq_lens;  // context length after this step
  std::vector<int> q_lens;    // tokens this step (the last q_lens[s] positions)
  float scale = 0.f;          // 0 = 1/sqrt(d)
  bool minus_one_holes = false;
  std::vector<int> splits = {0};  // forced split counts to try (0 = the heuristic)
  bool k_from_v = false;          // single-store K=V
};

class AttentionEntriesTest : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(AttentionEntriesTest, MatchesCpuReference) {
  GANNET_REQUIRE_GPU();
  const Case& c = std::get<0>(GetParam());
  const bool fp8 = std::get<1>(GetParam());
  auto made = backend::CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status();
  backend::CudaBackend& gpu = **made;
  backend::CpuBackend cpu;
  std::mt19937 rng(1234);

  const int num_seqs = static_cast<int>(c.seq_lens.size());
  int max_pages = 0, owned = 0, num_tokens = 0, max_q = 0, max_len = 0;
  for (int s = 0; s < num_seqs; ++s) {
    max_pages = std::max(max_pages, (c.seq_lens[s] + c.page - 1) / c.page);
    owned += (c.seq_lens[s] + c.page - 1) / c.page;
    num_tokens += c.q_lens[s];
    max_q = std::max(max_q, c.q_lens[s]);
    max_len = std::max(max_len, c.seq_lens[s]);
  }
  const int num_pages = owned + 3;  // a poison page and two nobody owns
  std::vector<int> free_pages(num_pages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  const int poison = free_pages.back();
  free_pages.pop_back();

  std::vector<int32_t> table(static_cast<size_t>(num_seqs) * max_pages, -1);
  std::vector<int32_t> query_start(num_seqs + 1, 0), seq_lens(num_seqs), positions, token_seq;
  std::vector<char> page_used(num_pages, 0);
  for (int s = 0; s < num_seqs; ++s) {
    const int first_pos = c.seq_lens[s] - c.q_lens[s];
    const int lo = c.window > 0 ? std::max(0, first_pos - c.window + 1) : 0;
    for (int p = 0; p * c.page < c.seq_lens[s]; ++p) {
      const bool released = (p + 1) * c.page <= lo;
      int32_t& e = table[s * max_pages + p];
      if (released) {
        e = c.minus_one_holes ? -1 : poison;
      } else {
        e = free_pages.back();
        free_pages.pop_back();
        page_used[e] = 1;
      }
    }
    query_start[s + 1] = query_start[s] + c.q_lens[s];
    seq_lens[s] = c.seq_lens[s];
    for (int i = 0; i < c.q_lens[s]; ++i) {
      positions.push_back(first_pos + i);
      token_seq.push_back(s);
    }
  }

  // K/V: random bf16 values in used pages, NaN everywhere else.
  const size_t page_elems = static_cast<size_t>(c.nkv) * c.page * c.d;
  std::vector<float> k = testing::RandomNormal(num_pages * page_elems, 11);
  std::vector<float> v = testing::RandomNormal(num_pages * page_elems, 12);
  for (int p = 0; p < num_pages; ++p) {
    if (page_used[p]) continue;
    std::fill(k.begin() + p * page_elems, k.begin() + (p + 1) * page_elems, NAN);
    std::fill(v.begin() + p * page_elems, v.begin() + (p + 1) * page_elems, NAN);
  }
  const std::vector<float> q =
      testing::RandomNormal(static_cast<size_t>(num_tokens) * c.nq * c.d, 13);

  StepMetadata meta;
  meta.num_seqs = num_seqs;
  meta.num_tokens = num_tokens;
  meta.max_query_len = max_q;
  meta.max_seq_len = max_len;
  meta.host_query_start = query_start.data();
  meta.host_seq_lens = seq_lens.data();
  meta.host_positions = positions.data();
  backend::KvGroupView& g = meta.groups[backend::kSlidingGroup];
  g.page_size = c.page;
  g.num_pages = num_pages;
  g.max_pages_per_seq = max_pages;
  g.host_page_table = table.data();

  AttentionArgs a;
  a.num_q_heads = c.nq;
  a.num_kv_heads = c.nkv;
  a.head_dim = c.d;
  a.window = c.window;
  a.scale = c.scale > 0 ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.d));
  a.meta = &meta;
  a.kv.group = backend::kSlidingGroup;
  // Single-store K=V: a k_norm weight around 1 and the full layers' rotation.
  std::vector<float> k_norm = testing::RandomNormal(c.d, 14);
  for (float& w : k_norm) w = 1.0f + 0.3f * w;
  if (c.k_from_v) {
    a.kv.k_from_v = true;
    a.kv.rope = {1e6, 64, 1.0};
  }

  // CPU reference (host memory, f32; FP8 bytes and scales for the FP8 cache).
  std::vector<float> ref(q.size());
  testing::Fp8Rows k8 = testing::QuantizeFp8Rows(k, c.d), v8 = testing::QuantizeFp8Rows(v, c.d);
  {
    AttentionArgs ca = a;
    std::vector<float> kc = k, vc = v, qc = q;
    ca.q = Tensor::Make(qc.data(), DType::kF32, {num_tokens, c.nq, c.d});
    if (fp8) {
      ca.kv.k = Tensor::Make(k8.bytes.data(), DType::kF8E4M3, {num_pages, c.nkv, c.page, c.d});
      ca.kv.v = Tensor::Make(v8.bytes.data(), DType::kF8E4M3, {num_pages, c.nkv, c.page, c.d});
      ca.kv.k_scale = Tensor::Make(k8.scales.data(), DType::kF32, {num_pages, c.nkv, c.page});
      ca.kv.v_scale = Tensor::Make(v8.scales.data(), DType::kF32, {num_pages, c.nkv, c.page});
    } else {
      ca.kv.k = Tensor::Make(kc.data(), DType::kF32, {num_pages, c.nkv, c.page, c.d});
      ca.kv.v = Tensor::Make(vc.data(), DType::kF32, {num_pages, c.nkv, c.page, c.d});
    }
    ca.out = Tensor::Make(ref.data(), DType::kF32, {num_tokens, c.nq, c.d});
    if (c.k_from_v) {
      ca.kv.k = ca.kv.k_scale = Tensor();
      ca.kv.k_norm = Tensor::Make(k_norm.data(), DType::kF32, {c.d});
    }
    const absl::Status st = cpu.Attention(ca);
    ASSERT_TRUE(st.ok()) << st;
  }

  // GPU copies.
  const DType kv_type = fp8 ? DType::kF8E4M3 : DType::kBF16;
  DeviceTensor dk =
      fp8 ? testing::UploadBytes(gpu, k8.bytes, kv_type, {num_pages, c.nkv, c.page, c.d})
          : testing::Upload(gpu, k, kv_type, {num_pages, c.nkv, c.page, c.d});
  DeviceTensor dv =
      fp8 ? testing::UploadBytes(gpu, v8.bytes, kv_type, {num_pages, c.nkv, c.page, c.d})
          : testing::Upload(gpu, v, kv_type, {num_pages, c.nkv, c.page, c.d});
  DeviceTensor dks, dvs;
  if (fp8) {
    dks = testing::Upload(gpu, k8.scales, DType::kF32, {num_pages, c.nkv, c.page});
    dvs = testing::Upload(gpu, v8.scales, DType::kF32, {num_pages, c.nkv, c.page});
    a.kv.k_scale = dks.t;
    a.kv.v_scale = dvs.t;
  }
  DeviceTensor dq = testing::Upload(gpu, q, DType::kBF16, {num_tokens, c.nq, c.d});
  DeviceTensor dout = testing::Upload(gpu, std::vector<float>(q.size(), 0.f), DType::kBF16,
                                      {num_tokens, c.nq, c.d});
  // The fp16 compute path's q and out (the f16io entries); q is bf16-exact, so also fp16-exact.
  DeviceTensor dq16 = testing::Upload(gpu, q, DType::kF16, {num_tokens, c.nq, c.d});
  DeviceTensor dout16 =
      testing::Upload(gpu, std::vector<float>(q.size(), 0.f), DType::kF16, {num_tokens, c.nq, c.d});
  DeviceTensor dqs = testing::UploadI32(gpu, query_start, {num_seqs + 1});
  DeviceTensor dlens = testing::UploadI32(gpu, seq_lens, {num_seqs});
  DeviceTensor dpos = testing::UploadI32(gpu, positions, {num_tokens});
  DeviceTensor dseq = testing::UploadI32(gpu, token_seq, {num_tokens});
  DeviceTensor dtable = testing::UploadI32(gpu, table, {num_seqs * max_pages});
  meta.query_start = dqs.t.as<int32_t>();
  meta.seq_lens = dlens.t.as<int32_t>();
  meta.positions = dpos.t.as<int32_t>();
  meta.token_seq = dseq.t.as<int32_t>();
  g.page_table = dtable.t.as<int32_t>();
  a.q = dq.t;
  a.kv.k = dk.t;
  a.kv.v = dv.t;
  a.out = dout.t;
  DeviceTensor dknorm = testing::Upload(gpu, k_norm, DType::kF32, {c.d});
  if (c.k_from_v) {
    a.kv.k = a.kv.k_scale = Tensor();
    a.kv.k_norm = dknorm.t;
  }

  AttentionArgs a16 = a;
  a16.q = dq16.t;
  a16.out = dout16.t;

  int ran = 0, ran_flash = 0, ran_f16 = 0;
  auto check = [&](const std::string& what, const DeviceTensor& out) {
    std::vector<float> got = testing::Download(gpu, out.t);
    const double err = testing::RelL2(got, ref);
    EXPECT_LE(err, kTolerance) << c.name << " / " << what;
    RecordProperty(c.name + "/" + what, std::to_string(err));
  };
  for (const kernels::KernelEntry* e : kernels::AllEntries()) {
    if (e->op != kernels::Op::kAttentionDecode && e->op != kernels::Op::kAttentionPrefill) continue;
    // GANNET_TEST_ENTRY_PREFIX=sm75_ runs those entries alone (memcheck runs of one arch's
    // entries).
    const char* only = std::getenv("GANNET_TEST_ENTRY_PREFIX");
    if (only != nullptr && std::string(e->name).rfind(only, 0) != 0) continue;
    const bool f16 = e->predicate.in_type == DType::kF16;
    const AttentionArgs& args = f16 ? a16 : a;
    const DeviceTensor& out = f16 ? dout16 : dout;
    kernels::PagedAttentionParams probe;
    probe.q = args.q.data;
    probe.io_f16 = f16;
    probe.out = args.out.data;
    probe.k_cache = dk.t.data;
    probe.v_cache = dv.t.data;
    probe.kv_fp8 = fp8;
    probe.q_stride = probe.out_stride = static_cast<int64_t>(c.nq) * c.d;
    probe.head_dim = c.d;
    probe.page_size = c.page;
    probe.num_q_heads = c.nq;
    probe.num_kv_heads = c.nkv;
    probe.window = c.window;
    probe.max_query_len = max_q;
    probe.num_seqs = num_seqs;
    probe.num_tokens = num_tokens;
    probe.max_seq_len = max_len;
    probe.k_from_v = c.k_from_v;
    probe.rope_pairs = c.k_from_v ? a.kv.rope.rotated_pairs : 0;
    const kernels::ProblemKey pk = kernels::AttentionProblem(e->op, probe);
    if (!kernels::CheckEntry(*e, pk, gpu.device_info()).ok) continue;
    const bool flash = kernels::IsFlashEntry(*e);
    if (c.name.rfind("decode_narrow", 0) == 0 && e == &kernels::kSm80DecodeHd256Split) {
      // The case exists to run the entry's 16-key tiles through its own heuristic.
      EXPECT_TRUE(kernels::Hd256DecodeUsesNarrowTile(pk, gpu.device_info())) << c.name;
      if (c.name.rfind("decode_narrow_split", 0) == 0 && gpu.device_info().num_sms == 132) {
        EXPECT_GT(kernels::FlashAttentionSplits(*e, pk, gpu.device_info()), 1) << c.name;
      }
    }
    for (int splits : flash ? c.splits : std::vector<int>{0}) {
      ASSERT_TRUE(gpu.Fill(out.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
      absl::Status st = gpu.RunAttentionEntry(*e, args, splits);
      ASSERT_TRUE(st.ok()) << e->name << ": " << st;
      ASSERT_TRUE(gpu.Synchronize().ok()) << e->name;
      check(std::string(e->name) + (splits ? "/splits" + std::to_string(splits) : ""), out);
      ++ran;
      ran_flash += flash;
      ran_f16 += f16;
    }
  }
  if (std::getenv("GANNET_TEST_ENTRY_PREFIX") != nullptr) {
    if (ran == 0) GTEST_SKIP() << "no entry with the prefix runs " << c.name;
  } else {
    EXPECT_GE(ran, 1);
    EXPECT_GE(ran_f16, 1)
        << c.name;  // every case has an fp16-path entry (at least the CUDA-core one)
    if (kernels::EffectiveArch(gpu.device_info().sm) >= 80) {
      EXPECT_GE(ran_flash, 1) << c.name;
    }
  }

  // A launch over the step's later sequences alone (per-sequence arrays advanced past the first,
  // token indices absolute, as the backend launches a mixed step's prompt chunks apart from its
  // decode rows): every entry writes those sequences' rows, as in the whole step, and no other.
  if (c.name.find("mixed") != std::string::npos) {
    const int skip = c.q_lens[0];
    StepMetadata tail = meta;
    tail.num_seqs = num_seqs - 1;
    tail.num_tokens = num_tokens - skip;
    tail.max_seq_len = *std::max_element(seq_lens.begin() + 1, seq_lens.end());
    tail.max_query_len = *std::max_element(c.q_lens.begin() + 1, c.q_lens.end());
    tail.query_start += 1;
    tail.seq_lens += 1;
    tail.host_query_start += 1;
    tail.host_seq_lens += 1;
    tail.groups[backend::kSlidingGroup].page_table += max_pages;
    tail.groups[backend::kSlidingGroup].host_page_table += max_pages;
    const size_t row = static_cast<size_t>(c.nq) * c.d;
    const std::vector<float> ref_tail(ref.begin() + skip * row, ref.end());
    int ran_tail = 0;
    for (const kernels::KernelEntry* e : kernels::AllEntries()) {
      if (e->op != kernels::Op::kAttentionDecode && e->op != kernels::Op::kAttentionPrefill)
        continue;
      const bool f16 = e->predicate.in_type == DType::kF16;
      AttentionArgs ta = f16 ? a16 : a;
      ta.meta = &tail;
      const DeviceTensor& out = f16 ? dout16 : dout;
      auto probe = gpu.AttentionParams(ta);
      ASSERT_TRUE(probe.ok()) << probe.status();
      if (!kernels::CheckEntry(*e, kernels::AttentionProblem(e->op, *probe), gpu.device_info()).ok)
        continue;
      ASSERT_TRUE(gpu.Fill(out.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
      const absl::Status st = gpu.RunAttentionEntry(*e, ta);
      ASSERT_TRUE(st.ok()) << e->name << ": " << st;
      std::vector<float> got = testing::Download(gpu, out.t);
      for (size_t i = 0; i < skip * row; ++i) {
        ASSERT_TRUE(std::isnan(got[i]))
            << e->name << " wrote row " << i / row << " of the first sequence";
      }
      got.erase(got.begin(), got.begin() + skip * row);
      EXPECT_LE(testing::RelL2(got, ref_tail), kTolerance)
          << c.name << " / later sequences / " << e->name;
      ++ran_tail;
    }
    EXPECT_GE(ran_tail, 2) << c.name;
  }

  // And through the backend's own selection, with bf16 and with f16 q (a mixed step with decode
  // rows first runs them through a decode entry and the rest through a prefill entry).
  ASSERT_TRUE(gpu.Fill(dout.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
  ASSERT_TRUE(gpu.Attention(a).ok());
  check("selected", dout);
  ASSERT_TRUE(gpu.Fill(dout16.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
  ASSERT_TRUE(gpu.Attention(a16).ok());
  check("selected_f16io", dout16);
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  // Decode, 31B full layer: hd512, GQA 8, contexts up to 8k, three sequences in a batch.
  v.push_back({"decode_31b_full_hd512",
               32,
               4,
               512,
               16,
               0,
               {8192, 1000, 17},
               {1, 1, 1},
               0.f,
               false,
               {0, 1, 7, 64}});
  // Decode, 31B sliding layer: hd256, GQA 2, window 1024 crossed, released pages.
  v.push_back({"decode_31b_sliding_hd256",
               32,
               16,
               256,
               32,
               1024,
               {8192, 1500, 5},
               {1, 1, 1},
               0.f,
               false,
               {0, 1, 13}});
  // 64 sequences of a 31B sliding layer: 1024 CTAs, which kSm80DecodeHd256Split runs on its
  // 16-key tiles (Hd256DecodeUsesNarrowTile); contexts 1 to 1500, the window crossed.
  {
    Case many{"decode_narrow_31b_sliding_b64", 32, 16, 256, 16, 1024, {}, {}, 0.f, false, {0}};
    for (int i = 0; i < 64; ++i) {
      many.seq_lens.push_back(1 + (i * 389) % 1500);
      many.q_lens.push_back(1);
    }
    v.push_back(many);
    // 80 of them: 2.42 waves of 16-key CTAs on a 132-SM GPU, which the heuristic splits.
    Case split{
        "decode_narrow_split_31b_sliding_b80", 32, 16, 256, 16, 1024, {}, {}, 0.f, false, {0}};
    for (int i = 0; i < 80; ++i) {
      split.seq_lens.push_back(1 + (i * 389) % 1500);
      split.q_lens.push_back(1);
    }
    v.push_back(split);
  }
  v.push_back({"decode_sliding_minus_one_holes",
               32,
               16,
               256,
               16,
               1024,
               {3000, 1025},
               {1, 1},
               0.f,
               true,
               {0, 3}});
  // E2B/E4B style heads, both head dims, page 16, Gemma's scale 1.0 on small q.
  v.push_back({"decode_8q2kv_hd256_window512",
               8,
               2,
               256,
               16,
               512,
               {700, 512, 513, 1},
               {1, 1, 1, 1},
               0.f,
               false,
               {0, 5}});
  v.push_back({"decode_8q2kv_hd512", 8, 2, 512, 32, 0, {2049, 31}, {1, 1}, 0.f, false, {0, 4}});
  // Speculative-decode shaped: 2 query tokens x GQA 8 = 16 rows still fit a decode CTA.
  v.push_back({"decode_q2_hd512", 32, 4, 512, 16, 0, {4000, 300}, {2, 2}, 0.f, false, {0, 9}});
  // Verify chunks of K + 1 = 4..8 tokens: 31B sliding (GQA 2, window crossed inside the chunk),
  // E4B-like full (GQA 4: 16 rows), and a chunk wider than a decode CTA (prefill entries).
  v.push_back({"verify_31b_sliding_q4",
               32,
               16,
               256,
               16,
               1024,
               {5000, 1026, 9},
               {4, 4, 4},
               0.f,
               false,
               {0, 1, 11}});
  v.push_back(
      {"verify_31b_sliding_q8", 32, 16, 256, 1, 1024, {2000, 1030}, {8, 8}, 0.f, false, {0, 5}});
  v.push_back({"verify_e4b_full_q4", 8, 2, 512, 32, 0, {3000, 40}, {4, 4}, 0.f, false, {0, 7}});
  v.push_back({"verify_31b_full_q4", 32, 4, 512, 16, 0, {6000, 700}, {4, 4}, 0.f, false, {0, 3}});
  // Prefill from scratch and chunked prefill over cached pages.
  v.push_back(
      {"prefill_31b_full_hd512", 32, 4, 512, 16, 0, {300, 2100}, {300, 100}, 0.f, false, {0, 3}});
  v.push_back({"prefill_31b_sliding_hd256",
               32,
               16,
               256,
               32,
               1024,
               {2200, 40},
               {700, 40},
               0.f,
               false,
               {0, 2}});
  // Mixed batch: a prefill chunk next to decodes, window crossing inside the chunk.
  v.push_back(
      {"mixed_8q2kv_hd256", 8, 2, 256, 16, 512, {1300, 900, 77}, {333, 1, 1}, 0.f, false, {0}});
  v.push_back({"mixed_8q2kv_hd512", 8, 2, 512, 32, 0, {640, 5000}, {129, 1}, 0.f, false, {0, 6}});
  // Decode rows first, then a prompt chunk (the scheduler's order): 31B's sliding and full layers.
  v.push_back({"mixed_decode_first_31b_sliding",
               32,
               16,
               256,
               16,
               1024,
               {1500, 900, 3000, 2100},
               {1, 1, 1, 700},
               0.f,
               false,
               {0}});
  v.push_back({"mixed_decode_first_31b_full",
               32,
               4,
               512,
               16,
               0,
               {5000, 1200, 2100},
               {1, 1, 300},
               0.f,
               false,
               {0}});
  // Single-store K=V full layers: 31B (32q/4kv) and 26B-A4B (16q/2kv), decode with forced splits,
  // a verify chunk, prefill from scratch and over cached pages, a mixed batch.
  v.push_back({"kfromv_decode_31b_hd512",
               32,
               4,
               512,
               16,
               0,
               {8192, 1000, 17},
               {1, 1, 1},
               0.f,
               false,
               {0, 1, 7, 64},
               true});
  v.push_back(
      {"kfromv_decode_26b_hd512", 16, 2, 512, 32, 0, {3001, 64}, {1, 1}, 0.f, false, {0, 5}, true});
  v.push_back(
      {"kfromv_verify_31b_q4", 32, 4, 512, 16, 0, {6000, 700}, {4, 4}, 0.f, false, {0, 3}, true});
  v.push_back({"kfromv_prefill_31b_hd512",
               32,
               4,
               512,
               16,
               0,
               {300, 2100},
               {300, 100},
               0.f,
               false,
               {0, 3},
               true});
  v.push_back({"kfromv_mixed_26b_hd512",
               16,
               2,
               512,
               16,
               0,
               {640, 5000},
               {129, 1},
               0.f,
               false,
               {0, 6},
               true});
  v.push_back({"kfromv_mixed_decode_first_31b",
               32,
               4,
               512,
               16,
               0,
               {5000, 1200, 2100},
               {1, 1, 300},
               0.f,
               false,
               {0},
               true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Gemma4Shapes, AttentionEntriesTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<Case, bool>>& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_fp8" : "_bf16");
                         });

}  // namespace
}  // namespace gannet
