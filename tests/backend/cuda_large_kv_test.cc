// A KV pool whose single layer array holds more than 2^31 elements (issue 9: E2B's full layers on
// an H200 hold ~5e9): allocated zeroed through the backend, written by QkvPrep at pages at the
// very end of the pool (the padding page included), read back by prefill and decode attention,
// and compared with the CPU reference run on copies of the same pages. The first pages must stay
// zero: a 32-bit wrap in any offset would land its writes there.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/kv/kv_layout.h"
#include "tests/backend/cuda_test_util.h"

namespace gannet {
namespace {

using backend::StepMetadata;
using backend::Tensor;
using testing::DeviceTensor;

struct Case {
  std::string name;
  int nq, nkv, d, window, prompt;
  backend::RopeSpec rope;
};

class LargeKvTest : public ::testing::TestWithParam<Case> {};

// One step's metadata on host and device: `tokens` new tokens of one sequence ending at
// `seq_len`, with slots in `table`'s pages.
struct Step {
  std::vector<int32_t> query_start, seq_lens, positions, token_seq, slots;
  DeviceTensor dqs, dlens, dpos, dseq, dslots;
  StepMetadata meta;
};

void MakeStep(backend::Backend& gpu, int first_pos, int seq_len, int page,
              const std::vector<int32_t>& host_table, int storage_pages, const int32_t* dtable,
              Step* s) {
  const int n = seq_len - first_pos;
  s->query_start = {0, n};
  s->seq_lens = {seq_len};
  for (int i = 0; i < n; ++i) {
    const int pos = first_pos + i;
    s->positions.push_back(pos);
    s->token_seq.push_back(0);
    s->slots.push_back(host_table[pos / page] * page + pos % page);
  }
  s->dqs = testing::UploadI32(gpu, s->query_start, {2});
  s->dlens = testing::UploadI32(gpu, s->seq_lens, {1});
  s->dpos = testing::UploadI32(gpu, s->positions, {n});
  s->dseq = testing::UploadI32(gpu, s->token_seq, {n});
  s->dslots = testing::UploadI32(gpu, s->slots, {n});
  StepMetadata& m = s->meta;
  m.num_seqs = 1;
  m.num_tokens = n;
  m.max_query_len = n;
  m.max_seq_len = seq_len;
  m.query_start = s->dqs.t.as<int32_t>();
  m.seq_lens = s->dlens.t.as<int32_t>();
  m.positions = s->dpos.t.as<int32_t>();
  m.token_seq = s->dseq.t.as<int32_t>();
  m.host_query_start = s->query_start.data();
  m.host_seq_lens = s->seq_lens.data();
  m.host_positions = s->positions.data();
  for (backend::KvGroupView& g : m.groups) {
    g.page_size = page;
    g.num_pages = storage_pages;
    g.max_pages_per_seq = static_cast<int>(host_table.size());
    g.page_table = dtable;
    g.slot_mapping = s->dslots.t.as<int32_t>();
    g.host_page_table = host_table.data();
    g.host_slot_mapping = s->slots.data();
  }
}

TEST_P(LargeKvTest, LastPagesAreWrittenAndReadLikeTheCpuReference) {
  GANNET_REQUIRE_GPU();
  const Case& c = GetParam();
  auto made = backend::CudaBackend::Create(0);
  ASSERT_TRUE(made.ok()) << made.status();
  backend::CudaBackend& gpu = **made;
  backend::CpuBackend cpu;
  constexpr int kPage = 16;
  const int64_t page_elems = static_cast<int64_t>(c.nkv) * kPage * c.d;
  // Just past 2^31 elements per array (4.3 GB of bf16 each, K and V).
  const int32_t managed = static_cast<int32_t>((int64_t{1} << 31) / page_elems + 8);
  const kv::KvGroup group = c.window > 0 ? kv::KvGroup::kSliding : kv::KvGroup::kFull;
  kv::PerGroup<int32_t> pages = {0, 0};
  pages[kv::GroupIndex(group)] = managed;
  auto layout = kv::MakeKvLayout({{group, c.nkv, c.d}}, kPage, c.window, 2, pages);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const int32_t storage = layout->storage_pages(group);
  ASSERT_GT(layout->ArrayElements(0), int64_t{1} << 31);
  if (gpu.FreeMemoryBytes() < 2 * layout->ArrayBytes(0) + (int64_t{2} << 30)) {
    GTEST_SKIP() << "needs " << 2 * layout->ArrayBytes(0) << " bytes of free device memory";
  }
  auto kbuf = gpu.AllocateZeroed(static_cast<size_t>(layout->ArrayBytes(0)));
  auto vbuf = gpu.AllocateZeroed(static_cast<size_t>(layout->ArrayBytes(0)));
  ASSERT_TRUE(kbuf.ok()) << kbuf.status();
  ASSERT_TRUE(vbuf.ok()) << vbuf.status();
  const Tensor kc = kbuf->View(DType::kBF16, {storage, c.nkv, kPage, c.d});
  const Tensor vc = vbuf->View(DType::kBF16, {storage, c.nkv, kPage, c.d});

  // The sequence's blocks sit on the last pages, spread out, block 0 on the padding page.
  const int total = c.prompt + 1;  // prefill, then one decode token
  const int blocks = (total + kPage - 1) / kPage;
  std::vector<int32_t> table(blocks);
  for (int b = 0; b < blocks; ++b) table[b] = storage - 1 - 3 * b;
  ASSERT_EQ(table[0], layout->padding_page(group));
  DeviceTensor dtable = testing::UploadI32(gpu, table, {blocks});

  const int cols = (c.nq + 2 * c.nkv) * c.d;
  const std::vector<float> qkv = testing::RandomNormal(static_cast<size_t>(total) * cols, 21, 2.f);
  std::vector<float> qn = testing::RandomNormal(c.d, 22, 0.1f),
                     kn = testing::RandomNormal(c.d, 23, 0.1f);
  for (float& v : qn) v += 0.25f;
  for (float& v : kn) v += 0.25f;
  DeviceTensor dqkv = testing::Upload(gpu, qkv, DType::kBF16, {total, cols});
  DeviceTensor dqn = testing::Upload(gpu, qn, DType::kF32, {c.d});
  DeviceTensor dkn = testing::Upload(gpu, kn, DType::kF32, {c.d});
  DeviceTensor dq =
      testing::Upload(gpu, std::vector<float>(static_cast<size_t>(total) * c.nq * c.d),
                      DType::kBF16, {total, c.nq, c.d});
  DeviceTensor dout =
      testing::Upload(gpu, std::vector<float>(static_cast<size_t>(total) * c.nq * c.d),
                      DType::kBF16, {total, c.nq, c.d});

  // The CPU reference: the same blocks on pages 0.. of a small f32 cache.
  std::vector<int32_t> cpu_table(blocks);
  for (int b = 0; b < blocks; ++b) cpu_table[b] = b;
  std::vector<float> ck(static_cast<size_t>(blocks) * page_elems, 0.f), cv = ck;
  std::vector<float> cq(static_cast<size_t>(total) * c.nq * c.d), cout = cq;
  std::vector<float> qkv_host = qkv, qn_host = qn, kn_host = kn;

  for (const auto& [first, end] : {std::pair{0, c.prompt}, std::pair{c.prompt, total}}) {
    const std::string what = first == 0 ? "prefill" : "decode";
    const int n = end - first;
    Step gs, cs;
    MakeStep(gpu, first, end, kPage, table, storage, dtable.t.as<int32_t>(), &gs);
    MakeStep(gpu, first, end, kPage, cpu_table, blocks, nullptr, &cs);

    backend::QkvPrepArgs p;
    p.num_q_heads = c.nq;
    p.num_kv_heads = c.nkv;
    p.head_dim = c.d;
    p.rope = c.rope;
    p.kv.group = kv::GroupIndex(group);
    backend::AttentionArgs a;
    a.num_q_heads = c.nq;
    a.num_kv_heads = c.nkv;
    a.head_dim = c.d;
    a.window = c.window;
    a.kv.group = kv::GroupIndex(group);

    backend::QkvPrepArgs gp = p;
    gp.qkv = dqkv.t.Rows(first, n);
    gp.q_norm = dqn.t;
    gp.k_norm = dkn.t;
    gp.q_out = dq.t.Rows(first, n);
    gp.kv.k = kc;
    gp.kv.v = vc;
    gp.meta = &gs.meta;
    ASSERT_TRUE(gpu.QkvPrep(gp).ok());
    backend::AttentionArgs ga = a;
    ga.q = gp.q_out;
    ga.kv.k = kc;
    ga.kv.v = vc;
    ga.out = dout.t.Rows(first, n);
    ga.meta = &gs.meta;
    ASSERT_TRUE(gpu.Fill(ga.out.Reshape({n, c.nq * c.d}), NAN).ok());
    const absl::Status st = gpu.Attention(ga);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_TRUE(gpu.Synchronize().ok());

    backend::QkvPrepArgs cp = p;
    cp.qkv = Tensor::Make(qkv_host.data(), DType::kF32, {total, cols}).Rows(first, n);
    cp.q_norm = Tensor::Make(qn_host.data(), DType::kF32, {c.d});
    cp.k_norm = Tensor::Make(kn_host.data(), DType::kF32, {c.d});
    cp.q_out = Tensor::Make(cq.data(), DType::kF32, {total, c.nq, c.d}).Rows(first, n);
    cp.kv.k = Tensor::Make(ck.data(), DType::kF32, {blocks, c.nkv, kPage, c.d});
    cp.kv.v = Tensor::Make(cv.data(), DType::kF32, {blocks, c.nkv, kPage, c.d});
    cp.meta = &cs.meta;
    ASSERT_TRUE(cpu.QkvPrep(cp).ok());
    backend::AttentionArgs ca = a;
    ca.q = cp.q_out;
    ca.kv.k = cp.kv.k;
    ca.kv.v = cp.kv.v;
    ca.out = Tensor::Make(cout.data(), DType::kF32, {total, c.nq, c.d}).Rows(first, n);
    ca.meta = &cs.meta;
    ASSERT_TRUE(cpu.Attention(ca).ok());

    const std::vector<float> got = testing::Download(gpu, ga.out);
    const std::vector<float> want(cout.begin() + static_cast<int64_t>(first) * c.nq * c.d,
                                  cout.begin() + static_cast<int64_t>(end) * c.nq * c.d);
    EXPECT_LE(testing::RelL2(got, want), 1e-2) << c.name << " " << what;
  }

  // What the GPU wrote at the end of the pool equals the CPU's cache, page by page.
  for (const auto& [dev, host, name] : {std::tuple{&kc, &ck, "K"}, std::tuple{&vc, &cv, "V"}}) {
    std::vector<float> got, want;
    for (int b = 0; b < blocks; ++b) {
      const Tensor page = dev->Rows(table[b], 1);
      const std::vector<float> p = testing::Download(gpu, page);
      got.insert(got.end(), p.begin(), p.end());
      want.insert(want.end(), host->begin() + b * page_elems, host->begin() + (b + 1) * page_elems);
    }
    EXPECT_LE(testing::RelL2(got, want), 1e-2) << c.name << " " << name << " pages";
    // No write wrapped around to the start of the array.
    const std::vector<float> first = testing::Download(gpu, dev->Rows(0, 64));
    for (float x : first) ASSERT_EQ(x, 0.f) << c.name << " " << name << " page 0..63";
  }
}

INSTANTIATE_TEST_SUITE_P(
    PastInt32, LargeKvTest,
    ::testing::Values(Case{"full_hd512_gqa8", 16, 2, 512, 0, 150, {1e6, 64, 1.0}},
                      Case{"sliding_hd256_window512", 8, 2, 256, 512, 700, {10000.0, 128, 1.0}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace gannet
