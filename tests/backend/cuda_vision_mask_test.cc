// The image-block mask (docs/vision.md, "Bidirectional attention over image blocks") on the GPU:
// every attention entry of the registry that declares the kFlagImageBlocks capability and can run
// on this GPU, forced, against the CPU backend's Attention with the same mask, on steps of
// text + block + text + block (one block longer than the window), bf16 and FP8 KV; every entry
// without the capability is refused by CheckEntry for such a step, and the backend's own selection
// runs a capable one. Tolerance as cuda_attention_test: rel-L2 <= 1e-2.
#include <algorithm>
#include <cmath>
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

struct MaskCase {
  std::string name;
  int nq, nkv, d, window;
  // Per sequence: context length after the step, tokens this step, and the step's image blocks
  // as [begin, end) token offsets within the step.
  std::vector<int> seq_lens, q_lens;
  std::vector<std::vector<std::pair<int, int>>> blocks;
};

std::vector<MaskCase> Cases() {
  // Sequence 0: a whole 48-token prompt, blocks of 5 and 19 (longer than the 16-key window).
  // Sequence 1: a 40-token chunk after 60 cached positions, blocks of 7 and 12.
  const std::vector<int> lens = {48, 100}, qs = {48, 40};
  const std::vector<std::vector<std::pair<int, int>>> blocks = {{{6, 11}, {14, 33}},
                                                                {{3, 10}, {20, 32}}};
  return {{"hd256_win16", 8, 2, 256, 16, lens, qs, blocks},
          {"hd256_full", 8, 2, 256, 0, lens, qs, blocks},
          {"hd512_full", 8, 1, 512, 0, lens, qs, blocks},
          {"hd256_win16_31b_heads", 32, 16, 256, 16, {48}, {48}, {blocks[0]}},
          // A decode row before the masked chunk: the backend launches the two apart
          // (attention_split.h), the decode part on an entry that also declares the capability.
          {"hd256_win16_mixed", 8, 2, 256, 16, {30, 48}, {1, 48}, {{}, blocks[0]}}};
}

class VisionMaskTest : public ::testing::TestWithParam<std::tuple<MaskCase, bool>> {};

TEST_P(VisionMaskTest, CapableEntriesMatchCpuAndOthersAreRefused) {
  GANNET_REQUIRE_GPU();
  const MaskCase& c = std::get<0>(GetParam());
  const bool fp8 = std::get<1>(GetParam());
  auto made = backend::CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status();
  backend::CudaBackend& gpu = **made;
  backend::CpuBackend cpu;
  constexpr int kPage = 16;

  const int num_seqs = static_cast<int>(c.seq_lens.size());
  int max_pages = 0, num_tokens = 0, max_q = 0, max_len = 0, num_pages = 0;
  for (int s = 0; s < num_seqs; ++s) {
    max_pages = std::max(max_pages, (c.seq_lens[s] + kPage - 1) / kPage);
    num_tokens += c.q_lens[s];
    max_q = std::max(max_q, c.q_lens[s]);
    max_len = std::max(max_len, c.seq_lens[s]);
  }
  std::vector<int32_t> table(static_cast<size_t>(num_seqs) * max_pages, -1);
  std::vector<int32_t> query_start(num_seqs + 1, 0), seq_lens(num_seqs), positions, token_seq,
      image_block;
  for (int s = 0; s < num_seqs; ++s) {
    // Pages in reverse order, so a kernel that ignores the table reads the wrong keys.
    const int pages = (c.seq_lens[s] + kPage - 1) / kPage;
    for (int p = 0; p < pages; ++p) table[s * max_pages + p] = num_pages + pages - 1 - p;
    num_pages += pages;
    query_start[s + 1] = query_start[s] + c.q_lens[s];
    seq_lens[s] = c.seq_lens[s];
    const int first = c.seq_lens[s] - c.q_lens[s];
    for (int i = 0; i < c.q_lens[s]; ++i) {
      positions.push_back(first + i);
      token_seq.push_back(s);
      int id = -1;
      for (size_t k = 0; k < c.blocks[s].size(); ++k) {
        if (i >= c.blocks[s][k].first && i < c.blocks[s][k].second) id = static_cast<int>(k);
      }
      image_block.push_back(id);
    }
  }
  const size_t kv_elems = static_cast<size_t>(num_pages) * c.nkv * kPage * c.d;
  const std::vector<float> k = testing::RandomNormal(kv_elems, 21);
  const std::vector<float> v = testing::RandomNormal(kv_elems, 22);
  const std::vector<float> q =
      testing::RandomNormal(static_cast<size_t>(num_tokens) * c.nq * c.d, 23);

  StepMetadata meta;
  meta.num_seqs = num_seqs;
  meta.num_tokens = num_tokens;
  meta.max_query_len = max_q;
  meta.max_seq_len = max_len;
  meta.host_query_start = query_start.data();
  meta.host_seq_lens = seq_lens.data();
  meta.host_positions = positions.data();
  meta.host_image_block = image_block.data();
  backend::KvGroupView& g = meta.groups[backend::kSlidingGroup];
  g.page_size = kPage;
  g.num_pages = num_pages;
  g.max_pages_per_seq = max_pages;
  g.host_page_table = table.data();

  AttentionArgs a;
  a.num_q_heads = c.nq;
  a.num_kv_heads = c.nkv;
  a.head_dim = c.d;
  a.window = c.window;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  a.image_block_mask = true;
  a.meta = &meta;
  a.kv.group = backend::kSlidingGroup;

  // CPU reference, with and without the mask (the case must make a difference).
  testing::Fp8Rows k8 = testing::QuantizeFp8Rows(k, c.d), v8 = testing::QuantizeFp8Rows(v, c.d);
  std::vector<float> ref(q.size()), causal(q.size());
  {
    std::vector<float> kc = k, vc = v, qc = q;
    AttentionArgs ca = a;
    ca.q = Tensor::Make(qc.data(), DType::kF32, {num_tokens, c.nq, c.d});
    if (fp8) {
      ca.kv.k = Tensor::Make(k8.bytes.data(), DType::kF8E4M3, {num_pages, c.nkv, kPage, c.d});
      ca.kv.v = Tensor::Make(v8.bytes.data(), DType::kF8E4M3, {num_pages, c.nkv, kPage, c.d});
      ca.kv.k_scale = Tensor::Make(k8.scales.data(), DType::kF32, {num_pages, c.nkv, kPage});
      ca.kv.v_scale = Tensor::Make(v8.scales.data(), DType::kF32, {num_pages, c.nkv, kPage});
    } else {
      ca.kv.k = Tensor::Make(kc.data(), DType::kF32, {num_pages, c.nkv, kPage, c.d});
      ca.kv.v = Tensor::Make(vc.data(), DType::kF32, {num_pages, c.nkv, kPage, c.d});
    }
    ca.out = Tensor::Make(ref.data(), DType::kF32, {num_tokens, c.nq, c.d});
    absl::Status st = cpu.Attention(ca);
    ASSERT_TRUE(st.ok()) << st;
    ca.image_block_mask = false;
    ca.out = Tensor::Make(causal.data(), DType::kF32, {num_tokens, c.nq, c.d});
    st = cpu.Attention(ca);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_GT(testing::RelL2(causal, ref), 5 * kTolerance) << "the mask changes too little";
  }

  const DType kv_type = fp8 ? DType::kF8E4M3 : DType::kBF16;
  DeviceTensor dk =
      fp8 ? testing::UploadBytes(gpu, k8.bytes, kv_type, {num_pages, c.nkv, kPage, c.d})
          : testing::Upload(gpu, k, kv_type, {num_pages, c.nkv, kPage, c.d});
  DeviceTensor dv =
      fp8 ? testing::UploadBytes(gpu, v8.bytes, kv_type, {num_pages, c.nkv, kPage, c.d})
          : testing::Upload(gpu, v, kv_type, {num_pages, c.nkv, kPage, c.d});
  DeviceTensor dks, dvs;
  if (fp8) {
    dks = testing::Upload(gpu, k8.scales, DType::kF32, {num_pages, c.nkv, kPage});
    dvs = testing::Upload(gpu, v8.scales, DType::kF32, {num_pages, c.nkv, kPage});
    a.kv.k_scale = dks.t;
    a.kv.v_scale = dvs.t;
  }
  DeviceTensor dq = testing::Upload(gpu, q, DType::kBF16, {num_tokens, c.nq, c.d});
  DeviceTensor dout = testing::Upload(gpu, std::vector<float>(q.size(), 0.f), DType::kBF16,
                                      {num_tokens, c.nq, c.d});
  DeviceTensor dqs = testing::UploadI32(gpu, query_start, {num_seqs + 1});
  DeviceTensor dlens = testing::UploadI32(gpu, seq_lens, {num_seqs});
  DeviceTensor dpos = testing::UploadI32(gpu, positions, {num_tokens});
  DeviceTensor dseq = testing::UploadI32(gpu, token_seq, {num_tokens});
  DeviceTensor dblk = testing::UploadI32(gpu, image_block, {num_tokens});
  DeviceTensor dtable = testing::UploadI32(gpu, table, {num_seqs * max_pages});
  meta.query_start = dqs.t.as<int32_t>();
  meta.seq_lens = dlens.t.as<int32_t>();
  meta.positions = dpos.t.as<int32_t>();
  meta.token_seq = dseq.t.as<int32_t>();
  meta.image_block = dblk.t.as<int32_t>();
  g.page_table = dtable.t.as<int32_t>();
  a.q = dq.t;
  a.kv.k = dk.t;
  a.kv.v = dv.t;
  a.out = dout.t;

  auto params = gpu.AttentionParams(a);
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_EQ(params->image_block, meta.image_block);
  auto run_and_check = [&](const std::string& what) {
    ASSERT_TRUE(gpu.Synchronize().ok()) << what;
    const std::vector<float> got = testing::Download(gpu, dout.t);
    const double err = testing::RelL2(got, ref);
    EXPECT_LE(err, kTolerance) << c.name << " / " << what;
    RecordProperty(c.name + (fp8 ? "/fp8/" : "/bf16/") + what, std::to_string(err));
  };
  int ran = 0, ran_flash = 0;
  for (const kernels::KernelEntry* e : kernels::AllEntries()) {
    if (e->op != kernels::Op::kAttentionDecode && e->op != kernels::Op::kAttentionPrefill) continue;
    if (e->predicate.in_type != DType::kBF16) continue;  // the f16io entries: same kernels
    const kernels::ProblemKey pk = kernels::AttentionProblem(e->op, *params);
    ASSERT_TRUE(pk.flags & kernels::kFlagImageBlocks);
    const kernels::KernelStatus st = kernels::CheckEntry(*e, pk, gpu.device_info());
    if (!(e->predicate.capabilities & kernels::kFlagImageBlocks)) {
      EXPECT_FALSE(st.ok) << e->name << " lacks the capability but was accepted";
      continue;
    }
    if (!st.ok) continue;
    ASSERT_TRUE(gpu.Fill(dout.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
    const absl::Status rs = gpu.RunAttentionEntry(*e, a, 0);
    ASSERT_TRUE(rs.ok()) << e->name << ": " << rs;
    run_and_check(e->name);
    ++ran;
    ran_flash += kernels::IsFlashEntry(*e);
  }
  EXPECT_GE(ran, 1) << c.name;
  if (kernels::EffectiveArch(gpu.device_info().sm) >= 80) {
    EXPECT_GE(ran_flash, 1) << c.name;
  }

  // The backend's own choice (whatever the registry picks for a masked step).
  ASSERT_TRUE(gpu.Fill(dout.t.Reshape({num_tokens, c.nq * c.d}), NAN).ok());
  const absl::Status st = gpu.Attention(a);
  ASSERT_TRUE(st.ok()) << st;
  run_and_check("selected");
}

INSTANTIATE_TEST_SUITE_P(Cases, VisionMaskTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_fp8" : "_bf16");
                         });

}  // namespace
}  // namespace gannet
