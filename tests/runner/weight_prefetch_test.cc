// WeightPrefetch (lib/runner/weight_prefetch.h): the ranges a step requests, on synthetic weights
// (exact arithmetic) and through the runner on every tiny model (ranges inside the loaded weights,
// each byte once, results unchanged).
#include "lib/runner/weight_prefetch.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/backend/forwarding_backend.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

using backend::DeviceRange;
using backend::Tensor;
using runner::WeightPrefetch;
using Point = WeightPrefetch::Point;

// Records every PrefetchWeights call and every loaded weight's bytes; reports a cache so the
// runner prefetches.
class RecordingBackend : public backend::ForwardingBackend {
 public:
  explicit RecordingBackend(int64_t cache)
      : ForwardingBackend(std::make_unique<backend::CpuBackend>()), cache_(cache) {}
  int64_t WeightCacheBytes() const override { return cache_; }
  absl::Status PrefetchWeights(std::span<const DeviceRange> r) override {
    calls.emplace_back(r.begin(), r.end());
    return inner().PrefetchWeights(r);
  }
  absl::StatusOr<backend::OwnedTensor> LoadWeight(
      std::span<const model::WeightView* const> parts) override {
    auto t = inner().LoadWeight(parts);
    if (t.ok()) {
      const auto* p = static_cast<const char*>(t->tensor.data);
      weights[p] = p + t->tensor.numel() * static_cast<int64_t>(t->tensor.elem_bytes());
    }
    return t;
  }
  std::vector<std::vector<DeviceRange>> calls;
  std::map<const char*, const char*> weights;  // [begin, end) of each loaded weight

 private:
  int64_t cache_;
};

// One synthetic layer stack over a host buffer: 2 layers, tensors of odd sizes at odd offsets.
struct Synthetic {
  std::vector<char> mem = std::vector<char>(1 << 20);
  runner::DeviceWeights w;
  model::TextConfig c;
  int64_t off = 16;
  Tensor Take(int64_t rows, int64_t cols) {
    Tensor t = Tensor::Make(mem.data() + off, DType::kBF16, {rows, cols});
    off += rows * cols * 2 + 48;
    return t;
  }
  explicit Synthetic(bool ple) {
    if (ple) c.hidden_size_per_layer_input = 8;
    for (int l = 0; l < 2; ++l) {
      runner::DeviceLayer L;
      L.qkv = Take(40, 32);      // 2560 bytes
      L.o_proj = Take(32, 33);   // 2112: a multiple of 16
      L.gate_up = Take(64, 32);  // 4096
      L.down = Take(32, 35);     // 2240
      if (ple) {
        L.ple_gate = Take(8, 32);
        L.ple_proj = Take(32, 8);
      }
      w.layers.push_back(L);
    }
    w.lm_head = Take(100, 32);
  }
};

int64_t Sum(const std::vector<DeviceRange>& r) {
  int64_t s = 0;
  for (const DeviceRange& x : r) s += x.bytes;
  return s;
}

TEST(WeightPrefetchTest, StreamOrderAndNextWeights) {
  Synthetic s(/*ple=*/true);
  WeightPrefetch pf(s.w, s.c, 4096);
  // Per layer: qkv, o, gate_up, down, ple_gate, ple_proj; then the LM head.
  EXPECT_EQ(pf.stream_bytes(), 2 * (2560 + 2112 + 4096 + 2240 + 512 + 512) + 6400);
  EXPECT_EQ(pf.NextIndex(Point::kStepStart, 0), 0u);
  EXPECT_EQ(pf.NextIndex(Point::kAfterQkvPrep, 1), 7u);  // layer 1's o_proj
  EXPECT_EQ(pf.NextIndex(Point::kAfterFfn, 0), 4u);      // layer 0's PLE gate
  Synthetic d(/*ple=*/false);
  WeightPrefetch pd(d.w, d.c, 4096);
  EXPECT_EQ(pd.NextIndex(Point::kAfterFfn, 0), 4u);  // layer 1's QKV
  EXPECT_EQ(pd.NextIndex(Point::kAfterFfn, 1), 8u);  // the LM head
}

TEST(WeightPrefetchTest, RangesAreCutAtTensorsAndAlignedInward) {
  Synthetic s(/*ple=*/false);
  WeightPrefetch pf(s.w, s.c, 1 << 20);
  // From inside the QKV (byte 100) to inside the o_proj (byte 2560 + 1000).
  const auto r = pf.RangesOf(100, 2560 + 1000);
  ASSERT_EQ(r.size(), 2u);
  const char* qkv = static_cast<const char*>(s.w.layers[0].qkv.data);
  const char* o = static_cast<const char*>(s.w.layers[0].o_proj.data);
  EXPECT_EQ(static_cast<const char*>(r[0].data), qkv + 112);  // 100 rounded up to 16
  EXPECT_EQ(r[0].bytes, 2560 - 112);
  EXPECT_EQ(static_cast<const char*>(r[1].data), o);
  EXPECT_EQ(r[1].bytes, 992);  // 1000 rounded down
  // The down projection's 2240 bytes start 16-aligned; a range ending at its end stays whole.
  const int64_t down_start = 2560 + 2112 + 4096;
  const auto d = pf.RangesOf(down_start, down_start + 2240);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].bytes, 2240);
}

TEST(WeightPrefetchTest, EachByteOnceAndNeverFurtherThanAhead) {
  Synthetic s(/*ple=*/true);
  const int64_t ahead = 3000;
  WeightPrefetch pf(s.w, s.c, ahead);
  RecordingBackend be(1 << 20);
  pf.BeginStep(1);
  auto ahead_at = [&](Point p, int l) { ASSERT_TRUE(pf.Ahead(&be, p, l).ok()); };
  ahead_at(Point::kStepStart, 0);
  for (int l = 0; l < 2; ++l) {
    ahead_at(Point::kAfterQkvPrep, l);
    ahead_at(Point::kAfterFfn, l);
  }
  ASSERT_FALSE(be.calls.empty());
  // Every requested byte inside one weight; no byte twice; ranges in increasing address order
  // (the synthetic tensors are laid out in stream order).
  const char* last_end = nullptr;
  int64_t total = 0;
  for (const auto& call : be.calls) {
    EXPECT_LE(call.size(), 8u);
    for (const DeviceRange& r : call) {
      const char* p = static_cast<const char*>(r.data);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
      EXPECT_EQ(r.bytes % 16, 0);
      if (last_end != nullptr) {
        EXPECT_GE(p, last_end);
      }
      last_end = p + r.bytes;
      total += r.bytes;
    }
  }
  // The first call reaches `ahead` bytes into the stream: the QKV's 2560 and 440 of the o_proj,
  // rounded down to 432.
  EXPECT_EQ(Sum(be.calls[0]), 2560 + 432);
  // Each point asks for [start of the next weight, + ahead) less what earlier points asked for:
  // [0, 3000) at the start; layer 0's o_proj at 2560: [3000, 5560); its PLE gate at 11008:
  // [11008, 14008); layer 1's o_proj at 14592 and PLE gate at 23040: 3000 bytes each. The bytes
  // read in between (layer 0's MLP) are not asked for: the step is already reading them.
  const int64_t want = 3000 + 2560 + 3 * 3000;
  EXPECT_LE(total, want);
  EXPECT_GE(total, want - 16 * static_cast<int64_t>(be.calls.size()));
  EXPECT_EQ(be.calls.size(), 5u);
}

TEST(WeightPrefetchTest, OffForPrefillStepsAndWhenAheadIsZero) {
  Synthetic s(/*ple=*/false);
  RecordingBackend be(1 << 20);
  WeightPrefetch pf(s.w, s.c, 4096);
  pf.BeginStep(runner::kPrefetchMaxTokens + 1);
  ASSERT_TRUE(pf.Ahead(&be, Point::kStepStart, 0).ok());
  EXPECT_TRUE(be.calls.empty());
  pf.BeginStep(runner::kPrefetchMaxTokens);
  ASSERT_TRUE(pf.Ahead(&be, Point::kStepStart, 0).ok());
  EXPECT_EQ(be.calls.size(), 1u);
  WeightPrefetch off(s.w, s.c, 0);
  off.BeginStep(1);
  ASSERT_TRUE(off.Ahead(&be, Point::kStepStart, 0).ok());
  EXPECT_EQ(be.calls.size(), 1u);
  // A second step starts over: the same first request again.
  pf.BeginStep(1);
  ASSERT_TRUE(pf.Ahead(&be, Point::kStepStart, 0).ok());
  ASSERT_EQ(be.calls.size(), 2u);
  EXPECT_EQ(Sum(be.calls[1]), Sum(be.calls[0]));
}

// Through the runner: a decode step of every tiny model requests only bytes of its loaded
// weights, each once, and computes what a runner without prefetching does.
TEST(WeightPrefetchTest, RunnerDecodeRequestsLoadedWeightsOnly) {
  for (const std::string& variant : testing::TargetVariants()) {
    SCOPED_TRACE(variant);
    auto m = testing::LoadTinyModel(variant);
    ASSERT_TRUE(m.ok()) << m.status();
    RecordingBackend be(1 << 30);
    backend::CpuBackend plain_be;
    auto opts = testing::SimpleRunnerOptions((*m)->config, 16, 32, 2, 32);
    auto with = testing::CreateTinyRunner((*m)->config, (*m)->weights, &be, opts, 32, 2);
    ASSERT_TRUE(with.ok()) << with.status();
    auto without = testing::CreateTinyRunner((*m)->config, (*m)->weights, &plain_be, opts, 32, 2);
    ASSERT_TRUE(without.ok()) << without.status();
    const std::vector<int32_t> prompt = {2, 108, 300, 411, 127};
    const std::vector<int32_t> table = testing::IdentityPageTable(0, 2);
    std::vector<float> logits[2];
    for (int which = 0; which < 2; ++which) {
      runner::ModelRunner& r = which == 0 ? **with : **without;
      runner::StepBatch b;
      runner::SeqStep q;
      q.tokens = prompt;
      q.page_table[0] = table;
      q.page_table[1] = table;
      b.seqs.push_back(q);
      runner::StepResult res;
      ASSERT_TRUE(r.Forward(b, &res).ok());
      if (which == 0) be.calls.clear();  // the checks below are of the decode step's requests
      const int32_t next = 150;
      q.tokens = std::span<const int32_t>(&next, 1);
      q.start_pos = static_cast<int>(prompt.size());
      b.seqs[0] = q;
      ASSERT_TRUE(r.Forward(b, &res).ok());
      logits[which] = res.logits;
    }
    EXPECT_EQ(logits[0], logits[1]);
    ASSERT_FALSE(be.calls.empty());
    std::map<const char*, int64_t> seen;
    for (const auto& call : be.calls) {
      for (const DeviceRange& r : call) {
        const char* p = static_cast<const char*>(r.data);
        auto it = be.weights.upper_bound(p);
        ASSERT_NE(it, be.weights.begin());
        --it;
        EXPECT_LE(p + r.bytes, it->second) << "a range outside the weight it starts in";
        for (const auto& [q0, n] : seen) {
          EXPECT_TRUE(p + r.bytes <= q0 || q0 + n <= p) << "a byte requested twice";
        }
        seen[p] = r.bytes;
      }
    }
  }
}

}  // namespace
}  // namespace gannet
