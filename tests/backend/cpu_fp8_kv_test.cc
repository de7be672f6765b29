// The CPU backend's FP8 KV storage (backend.h), the reference every FP8 GPU kernel is compared
// with: QkvPrep writes exactly the host quantisation of the rows it would have written in f32
// (tests/testing/fp8_kv.h), Attention over the FP8 cache equals Attention over an f32 cache
// holding the dequantised rows, and malformed FP8 arguments are errors naming what is wrong.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "tests/testing/fp8_kv.h"

namespace gannet {
namespace {

using backend::Tensor;

std::vector<float> Normal(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

struct Fixture {
  static constexpr int kNq = 4, kNkv = 2, kD = 64, kPage = 8, kPages = 4, kT = 20;
  std::vector<float> qkv = Normal(kT * (kNq + 2 * kNkv) * kD, 3, 2.0f);
  std::vector<float> qn = std::vector<float>(kD, 1.0f), kn = Normal(kD, 4, 0.2f);
  std::vector<int32_t> pos, slots, table = {2, 0, 3};
  std::vector<int32_t> query_start = {0, kT}, seq_lens = {kT};
  backend::StepMetadata meta;

  Fixture() {
    for (float& v : kn) v += 1.0f;
    for (int t = 0; t < kT; ++t) {
      pos.push_back(t);
      slots.push_back(table[t / kPage] * kPage + t % kPage);
    }
    meta.num_seqs = 1;
    meta.num_tokens = kT;
    meta.max_query_len = kT;
    meta.max_seq_len = kT;
    meta.host_query_start = query_start.data();
    meta.host_seq_lens = seq_lens.data();
    meta.host_positions = pos.data();
    for (backend::KvGroupView& g : meta.groups) {
      g.page_size = kPage;
      g.num_pages = kPages;
      g.max_pages_per_seq = 3;
      g.host_page_table = table.data();
      g.host_slot_mapping = slots.data();
    }
  }
  backend::QkvPrepArgs Prep(std::vector<float>& q_out) {
    backend::QkvPrepArgs a;
    a.qkv = Tensor::Make(qkv.data(), DType::kF32, {kT, (kNq + 2 * kNkv) * kD});
    a.num_q_heads = kNq;
    a.num_kv_heads = kNkv;
    a.head_dim = kD;
    a.q_norm = Tensor::Make(qn.data(), DType::kF32, {kD});
    a.k_norm = Tensor::Make(kn.data(), DType::kF32, {kD});
    a.rope = {10000.0, kD / 2, 1.0};
    a.q_out = Tensor::Make(q_out.data(), DType::kF32, {kT, kNq, kD});
    a.meta = &meta;
    return a;
  }
};

TEST(CpuFp8KvTest, StorageIsTheHostQuantisationAndAttentionReadsItBack) {
  Fixture s;
  constexpr size_t kRows = Fixture::kPages * Fixture::kNkv * Fixture::kPage;
  constexpr size_t kElems = kRows * Fixture::kD;
  backend::CpuBackend cpu;
  // f32 cache.
  std::vector<float> q(Fixture::kT * Fixture::kNq * Fixture::kD), k32(kElems, 0.f),
      v32(kElems, 0.f);
  backend::QkvPrepArgs a = s.Prep(q);
  a.kv.k = Tensor::Make(k32.data(), DType::kF32,
                        {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
  a.kv.v = Tensor::Make(v32.data(), DType::kF32,
                        {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
  ASSERT_TRUE(cpu.QkvPrep(a).ok());
  // FP8 cache: bytes and scales are exactly the host quantisation of the f32 rows.
  std::vector<uint8_t> k8(kElems, 0), v8(kElems, 0);
  std::vector<float> ks(kRows, 0.f), vs(kRows, 0.f), q2(q.size());
  backend::QkvPrepArgs b = s.Prep(q2);
  b.kv.k = Tensor::Make(k8.data(), DType::kF8E4M3,
                        {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
  b.kv.v = Tensor::Make(v8.data(), DType::kF8E4M3,
                        {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
  b.kv.k_scale =
      Tensor::Make(ks.data(), DType::kF32, {Fixture::kPages, Fixture::kNkv, Fixture::kPage});
  b.kv.v_scale =
      Tensor::Make(vs.data(), DType::kF32, {Fixture::kPages, Fixture::kNkv, Fixture::kPage});
  ASSERT_TRUE(cpu.QkvPrep(b).ok());
  const testing::Fp8Rows kq = testing::QuantizeFp8Rows(k32, Fixture::kD);
  const testing::Fp8Rows vq = testing::QuantizeFp8Rows(v32, Fixture::kD);
  EXPECT_EQ(k8, kq.bytes);
  EXPECT_EQ(v8, vq.bytes);
  EXPECT_EQ(ks, kq.scales);
  EXPECT_EQ(vs, vq.scales);
  int written = 0;
  for (float x : ks) written += x > 0.f;
  EXPECT_EQ(written, Fixture::kT * Fixture::kNkv);

  // Attention over the FP8 cache == attention over the dequantised rows in an f32 cache.
  std::vector<float> kd = testing::DequantizeFp8Rows(kq, Fixture::kD);
  std::vector<float> vd = testing::DequantizeFp8Rows(vq, Fixture::kD);
  std::vector<float> out8(q.size()), outd(q.size()), out32(q.size());
  for (int window : {0, 7}) {
    backend::AttentionArgs at;
    at.q = Tensor::Make(q.data(), DType::kF32, {Fixture::kT, Fixture::kNq, Fixture::kD});
    at.num_q_heads = Fixture::kNq;
    at.num_kv_heads = Fixture::kNkv;
    at.head_dim = Fixture::kD;
    at.window = window;
    at.meta = &s.meta;
    backend::AttentionArgs a8 = at, ad = at, a32 = at;
    a8.kv.k = b.kv.k, a8.kv.v = b.kv.v, a8.kv.k_scale = b.kv.k_scale, a8.kv.v_scale = b.kv.v_scale;
    a8.out = Tensor::Make(out8.data(), DType::kF32, {Fixture::kT, Fixture::kNq, Fixture::kD});
    ad.kv.k = Tensor::Make(kd.data(), DType::kF32,
                           {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
    ad.kv.v = Tensor::Make(vd.data(), DType::kF32,
                           {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
    ad.out = Tensor::Make(outd.data(), DType::kF32, {Fixture::kT, Fixture::kNq, Fixture::kD});
    a32.kv.k = a.kv.k, a32.kv.v = a.kv.v;
    a32.out = Tensor::Make(out32.data(), DType::kF32, {Fixture::kT, Fixture::kNq, Fixture::kD});
    ASSERT_TRUE(cpu.Attention(a8).ok());
    ASSERT_TRUE(cpu.Attention(ad).ok());
    ASSERT_TRUE(cpu.Attention(a32).ok());
    EXPECT_EQ(out8, outd) << "window " << window;
    // And it is close to, but not the same as, the unquantised attention.
    double num = 0, den = 0;
    for (size_t i = 0; i < out8.size(); ++i) {
      num += (out8[i] - out32[i]) * (out8[i] - out32[i]);
      den += out32[i] * out32[i];
    }
    EXPECT_GT(num, 0.0);
    EXPECT_LT(std::sqrt(num / den), 0.1) << "window " << window;
  }

  // Malformed FP8 arguments: errors naming the problem, nothing written.
  backend::QkvPrepArgs bad = b;
  bad.kv.k_scale = Tensor();
  absl::Status st = cpu.QkvPrep(bad);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("scale arrays"), std::string::npos) << st;
  bad = b;
  bad.kv.v_scale =
      Tensor::Make(vs.data(), DType::kF32, {Fixture::kPages, Fixture::kNkv, Fixture::kPage - 1});
  EXPECT_EQ(cpu.QkvPrep(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = a;
  bad.kv.k_scale = b.kv.k_scale;  // scales for an f32 cache
  EXPECT_EQ(cpu.QkvPrep(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = b;
  bad.kv.v = a.kv.v;  // K FP8, V f32
  EXPECT_EQ(cpu.QkvPrep(bad).code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint16_t> bf(kElems);
  bad = a;
  bad.kv.k = Tensor::Make(bf.data(), DType::kBF16,
                          {Fixture::kPages, Fixture::kNkv, Fixture::kPage, Fixture::kD});
  bad.kv.v = bad.kv.k;
  st = cpu.QkvPrep(bad);
  EXPECT_NE(st.message().find("this backend stores F32 or F8_E4M3"), std::string::npos) << st;
}

}  // namespace
}  // namespace gannet
