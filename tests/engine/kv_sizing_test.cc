// The engine's limits and KV sizing replayed for every Gemma-4 variant on every device size from
// 16 GB to 288 GB, with the same functions LoadEngineParts calls and the real geometry of the
// dummy models: the weights fit or fail before loading with a clear error; when they fit, the
// defaults always yield a plan (lowered where needed, with a warning) whose layout respects the
// int32 slot range and sizes arrays past 2^31 elements in 64 bits.
#include "lib/engine/kv_sizing.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/collectives.h"
#include "lib/kv/kv_pool_plan.h"
#include "lib/model/tp_shard.h"
#include "lib/model/variants.h"
#include "lib/model/weights.h"
#include "lib/parallel/group_tp_hooks.h"
#include "lib/runner/kv_storage.h"

namespace gannet::engine {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
// What the CUDA context and cuBLASLt take before the engine allocates anything (measured on an
// H100: ~520 MiB; rounded up).
constexpr int64_t kContextBytes = 640 * kMiB;

struct Device {
  const char* name;
  int64_t total;
};

const std::vector<Device>& Devices() {
  static const std::vector<Device> d = {
      {"16 GB (T4, V100-16GB)", 15 * kGiB + 600 * kMiB},
      {"24 GB (L4, A10, RTX 4090)", 22 * kGiB + 500 * kMiB},
      {"32 GB (V100-32GB, RTX 5090)", 31 * kGiB + 500 * kMiB},
      {"40 GB (A100-40GB)", 39 * kGiB + 400 * kMiB},
      {"48 GB (L40S, RTX 6000 Ada)", 44 * kGiB + 400 * kMiB},
      {"80 GB (H100, A100-80GB)", 81559 * kMiB},
      {"94 GB (H100 NVL)", 95830 * kMiB},
      {"141 GB (H200)", 143771 * kMiB},
      {"192 GB (B200)", 183359 * kMiB},
      {"288 GB (B300)", 275040 * kMiB},
  };
  return d;
}

struct Replay {
  absl::Status weights_fit;
  absl::StatusOr<KvSizing> sizing;
  EngineLimits limits;
};

// Only its size matters here: the runner sizes its logits shards by world_size().
class SizeOnlyCollectives : public backend::Collectives {
 public:
  explicit SizeOnlyCollectives(int world) : world_(world) {}
  int rank() const override { return 0; }
  int world_size() const override { return world_; }
  absl::Status AllReduceSum(backend::Tensor) override { return absl::UnimplementedError("size"); }
  absl::Status AllGatherColumns(backend::Tensor, backend::Tensor) override {
    return absl::UnimplementedError("size");
  }
  absl::StatusOr<int64_t> MinOverRanks(int64_t) override {
    return absl::UnimplementedError("size");
  }
  void Abort() override {}

 private:
  int world_;
};

// LoadEngineParts' sizing steps for a device with `total` bytes and the CUDA backend's dtypes;
// with `world` > 1, on rank 0 of a tensor-parallel group of such devices (every rank's shard,
// and so its sizing, is the same).
Replay ReplayCuda(const model::ModelConfig& config, int64_t total, const EngineConfig& cfg = {},
                  int world = 1) {
  Replay r;
  auto limits = ResolveLimits(cfg, config.text, /*cpu=*/false, world);
  EXPECT_TRUE(limits.ok()) << limits.status();
  r.limits = *limits;
  SizeOnlyCollectives group(world);
  runner::RunnerOptions ro = RunnerOptionsFor(r.limits);
  parallel::GroupTpHooks tp(&group);
  if (world > 1) ro.tp = &tp;
  const model::ModelConfig shard = world > 1 ? model::ShardConfig(config, world) : config;
  const int64_t weights =
      2 * (world > 1 ? model::ShardParameterCount(config, world) : model::CountParameters(config));
  const int64_t activations = runner::ActivationBytes(shard, ro, runner::ActivationTypes{});
  const int64_t free_before = total - kContextBytes;
  r.weights_fit = CheckWeightsFit(weights, activations, free_before, total, "test device", false);
  r.sizing = absl::UnknownError("not sized");
  if (r.weights_fit.ok()) {
    KvMemory m;
    m.free_after_runner = free_before - weights - activations;
    r.sizing = SizeKvCache(shard.text, r.limits, m, 2);
  }
  return r;
}

// The full pool holds every running sequence at kv::kPlannedSeqTokens (page size 16).
::testing::AssertionResult FullPoolHoldsTheRunningLimit(const KvSizing& s) {
  const int64_t pages = s.plan.group(kv::KvGroup::kFull).pages;
  const int64_t need = int64_t{s.max_running_seqs} * (kv::kPlannedSeqTokens / 16);
  if (pages >= need) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "full pool " << pages << " pages, " << s.max_running_seqs << " sequences of "
         << kv::kPlannedSeqTokens << " tokens need " << need;
}

model::ModelConfig Dummy(const std::string& variant) {
  auto c = model::DummyModelConfig("dummy:" + variant);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(KvSizingTest, EveryVariantOnEveryDeviceSizeStartsWithDefaultsOrSaysWhyNot) {
  for (const std::string variant : {"e2b", "e4b", "26b-a4b", "31b"}) {
    const model::ModelConfig config = Dummy(variant);
    const int64_t weights = 2 * model::CountParameters(config);
    for (const Device& d : Devices()) {
      SCOPED_TRACE(variant + " on " + d.name);
      const Replay r = ReplayCuda(config, d.total);
      if (!r.weights_fit.ok()) {
        std::printf("%-8s %-28s does not fit: weights %.1f GiB\n", variant.c_str(), d.name,
                    weights / double(kGiB));
      } else if (r.sizing.ok()) {
        int64_t largest = 0;
        for (int l = 0; l < config.text.num_hidden_layers; ++l) {
          largest = std::max(largest, r.sizing->layout.ArrayElements(l));
        }
        std::printf("%-8s %-28s %2d seqs x %d tokens, KV %6.1f GiB, largest array %.2e elements\n",
                    variant.c_str(), d.name, r.sizing->max_running_seqs,
                    static_cast<int>(r.sizing->max_model_len),
                    r.sizing->layout.TotalBytes() / double(kGiB), static_cast<double>(largest));
      }
      if (weights + 2 * kGiB > d.total) {
        // Cannot fit at all: said before loading, with the numbers.
        EXPECT_EQ(r.weights_fit.code(), absl::StatusCode::kResourceExhausted);
        EXPECT_NE(r.weights_fit.message().find("free of"), std::string::npos) << r.weights_fit;
        continue;
      }
      if (!r.weights_fit.ok()) {
        // Only at the edge (weights + activations + 1 GiB within 2 GiB of the card).
        EXPECT_GT(weights + 4 * kGiB, d.total) << r.weights_fit;
        continue;
      }
      ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
      const KvSizing& s = *r.sizing;
      EXPECT_GE(s.max_running_seqs, 1);
      EXPECT_LE(s.max_running_seqs, 64);
      EXPECT_EQ(s.max_model_len, 32768);  // every variant fits a default context everywhere
      EXPECT_EQ(s.warning.empty(), s.max_running_seqs == 64) << s.warning;
      EXPECT_LE(s.layout.TotalBytes(), s.budget_bytes);
      for (kv::KvGroup g : kv::kAllKvGroups) {
        if (!s.layout.has_group(g)) continue;
        EXPECT_LE(static_cast<int64_t>(s.layout.storage_pages(g)) * s.layout.page_size,
                  kv::kMaxPoolTokens);
      }
      for (int l = 0; l < config.text.num_hidden_layers; ++l) {
        const int64_t elems = s.layout.ArrayElements(l);
        EXPECT_GT(elems, 0);
        EXPECT_EQ(s.layout.ArrayBytes(l), 2 * elems);
      }
      // The full pool holds at least one default-length sequence, and every running sequence
      // at the planned length.
      EXPECT_GE(static_cast<int64_t>(s.plan.group(kv::KvGroup::kFull).pages) * 16, 32768);
      EXPECT_TRUE(FullPoolHoldsTheRunningLimit(s));
    }
  }
}

TEST(KvSizingTest, TheCasesOfIssue9) {
  // E2B on an H200: one full layer's K array holds far more than 2^31 elements (the Fill crash);
  // the arrays are sized in 64 bits and the pool stays within int32 slot ids.
  {
    const Replay r = ReplayCuda(Dummy("e2b"), 143771 * kMiB);
    ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
    EXPECT_GT(r.sizing->layout.ArrayElements(4), int64_t{1} << 31);
    EXPECT_EQ(r.sizing->max_running_seqs, 64);
  }
  // 31B on an H100 80GB: the default 64 sequences' windows do not fit; fewer run, with a warning.
  {
    const Replay r = ReplayCuda(Dummy("31b"), 81559 * kMiB);
    ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
    EXPECT_LT(r.sizing->max_running_seqs, 64);
    EXPECT_GE(r.sizing->max_running_seqs, 8);
    EXPECT_NE(r.sizing->warning.find("not the default 64"), std::string::npos) << r.sizing->warning;
  }
  // ... and with a 100,000-token max_model_len it still starts (fewer sequences).
  {
    EngineConfig cfg;
    cfg.max_model_len = 100000;
    const Replay r = ReplayCuda(Dummy("31b"), 81559 * kMiB, cfg);
    ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
    EXPECT_EQ(r.sizing->max_model_len, 100000);
    EXPECT_GE(r.sizing->max_running_seqs, 1);
    EXPECT_GE(static_cast<int64_t>(r.sizing->plan.group(kv::KvGroup::kFull).pages) * 16, 100000);
  }
  // 31B on an H200 keeps the default 64.
  {
    const Replay r = ReplayCuda(Dummy("31b"), 143771 * kMiB);
    ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
    EXPECT_EQ(r.sizing->max_running_seqs, 64);
    EXPECT_TRUE(r.sizing->warning.empty());
  }
}

TEST(KvSizingTest, ATensorParallelGroupRunsItsDevicesTimesTheDefaultLimit) {
  // Each device of a group holds its share of every sequence's KV heads, so the default running
  // limit grows with the group. Where one device runs its default 64 unlowered, a group of two or
  // four of the same devices runs 128 or 256, also unlowered, and its pools hold at least as many
  // default-length sequences per device as one device's.
  int checked = 0;
  for (const std::string variant : {"e2b", "e4b", "26b-a4b", "31b"}) {
    const model::ModelConfig config = Dummy(variant);
    for (const Device& d : Devices()) {
      const Replay one = ReplayCuda(config, d.total);
      if (!one.weights_fit.ok() || !one.sizing.ok() || one.sizing->max_running_seqs != 64) continue;
      for (int world : {2, 4}) {
        if (!model::CheckTpShardable(config, world, model::MoeSplit::kAuto).ok()) continue;
        SCOPED_TRACE(variant + " on " + d.name + " x" + std::to_string(world));
        const Replay r = ReplayCuda(config, d.total, {}, world);
        EXPECT_EQ(r.limits.max_running_seqs, 64 * world);
        ASSERT_TRUE(r.weights_fit.ok()) << r.weights_fit;
        ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
        EXPECT_EQ(r.sizing->max_running_seqs, 64 * world);
        EXPECT_TRUE(r.sizing->warning.empty()) << r.sizing->warning;
        EXPECT_GE(r.sizing->plan.group(kv::KvGroup::kFull).pages,
                  one.sizing->plan.group(kv::KvGroup::kFull).pages);
        EXPECT_TRUE(FullPoolHoldsTheRunningLimit(*r.sizing));
        ++checked;
      }
    }
  }
  std::printf("%d (variant, device, group size) cases ran their group's default\n", checked);
  EXPECT_GE(checked, 20);  // every variant on the devices where one runs its 64, at 2 and 4
  // Where one device lowers its default (31B on an H100 80GB), two lower theirs too, with the
  // group's default named, to what their full pools also hold: lowered only as far as the
  // windows need, the full pools are left their minimum, one 32k-token sequence (measured on two
  // H100s with a 2016-token context: 107 running, the full pools holding 3 sequences, 95
  // preemptions at concurrency 80, 247 tok/s).
  const Replay r = ReplayCuda(Dummy("31b"), 81559 * kMiB, {}, 2);
  ASSERT_TRUE(r.sizing.ok()) << r.sizing.status();
  std::printf("31B on two H100 80GB: %d running, full pool %d pages\n", r.sizing->max_running_seqs,
              r.sizing->plan.group(kv::KvGroup::kFull).pages);
  EXPECT_LT(r.sizing->max_running_seqs, 107);
  EXPECT_GE(r.sizing->max_running_seqs, 80);
  EXPECT_TRUE(FullPoolHoldsTheRunningLimit(*r.sizing));
  EXPECT_NE(r.sizing->warning.find("not the default 128"), std::string::npos) << r.sizing->warning;
  // The CPU's ranks share one memory: its default does not grow.
  auto cpu = ResolveLimits(EngineConfig(), Dummy("e2b").text, true, 4);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->max_running_seqs, 16);
}

TEST(KvSizingTest, UserSettingsThatCannotFitAreErrorsNamingTheSetting) {
  EngineConfig cfg;
  cfg.max_running_seqs = 64;
  const Replay r = ReplayCuda(Dummy("31b"), 81559 * kMiB, cfg);
  ASSERT_FALSE(r.sizing.ok());
  EXPECT_EQ(r.sizing.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.sizing.status().message().find("Set max_running_seqs <="), std::string::npos)
      << r.sizing.status();
  cfg = EngineConfig();
  cfg.max_model_len = 262144;
  cfg.max_running_seqs = 64;
  const Replay r2 = ReplayCuda(Dummy("31b"), 81559 * kMiB, cfg);
  ASSERT_FALSE(r2.sizing.ok());
  EXPECT_NE(r2.sizing.status().message().find("max_model_len"), std::string::npos)
      << r2.sizing.status();
}

TEST(KvSizingTest, ResolveLimitsChecksSettingsAgainstTheModel) {
  const model::ModelConfig c = Dummy("e2b");
  EngineConfig cfg;
  cfg.max_model_len = c.text.max_position_embeddings + 1;
  EXPECT_EQ(ResolveLimits(cfg, c.text, false, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  cfg = EngineConfig();
  cfg.max_model_len = 1;
  EXPECT_NE(ResolveLimits(cfg, c.text, false, 1).status().message().find("too small"),
            std::string::npos);
  cfg = EngineConfig();
  cfg.page_size = kv::kMaxPageSize + 1;
  EXPECT_EQ(ResolveLimits(cfg, c.text, false, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  cfg = EngineConfig();
  cfg.max_running_seqs = 100;
  cfg.max_step_tokens = 50;
  EXPECT_EQ(ResolveLimits(cfg, c.text, false, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  cfg.max_running_seqs = 0;  // a default running limit follows a small step budget
  auto l = ResolveLimits(cfg, c.text, false, 1);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->max_running_seqs, 50);
  // Defaults per backend.
  l = ResolveLimits(EngineConfig(), c.text, true, 1);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->max_running_seqs, 16);
  EXPECT_EQ(l->max_step_tokens, 256);
  l = ResolveLimits(EngineConfig(), c.text, false, 1);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->max_running_seqs, 64);
  EXPECT_EQ(l->max_step_tokens, 2048);
  EXPECT_EQ(l->max_model_len, 32768);
  // Prompt tokens while decoding: no separate limit unless asked, never above the step budget.
  EXPECT_EQ(l->max_prefill_tokens_while_decoding, 0);
  EXPECT_EQ(ResolveLimits(EngineConfig(), c.text, true, 1)->max_prefill_tokens_while_decoding, 0);
  cfg = EngineConfig();
  cfg.max_step_tokens = 300;
  cfg.max_prefill_tokens_while_decoding = 64;
  EXPECT_EQ(ResolveLimits(cfg, c.text, true, 1)->max_prefill_tokens_while_decoding, 64);
  cfg.max_prefill_tokens_while_decoding = 301;
  l = ResolveLimits(cfg, c.text, false, 1);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("max_prefill_tokens_while_decoding (301) exceeds "
                                      "max_step_tokens (300)"),
            std::string::npos)
      << l.status();
}

// kv_cache_dtype: bf16 (default, also "" and "auto"), fp8 / fp8_e4m3, anything else an error
// naming it. FP8 pools hold (2 x head_dim) / (head_dim + 4) times the tokens of bf16 in the same
// bytes: 1.97x for head_dim 256, 1.98x for 512, on every variant.
TEST(KvSizingTest, Fp8KvCacheHoldsAboutTwiceTheTokens) {
  for (const std::string variant : {"e2b", "e4b", "26b-a4b", "31b"}) {
    SCOPED_TRACE(variant);
    const model::ModelConfig config = Dummy(variant);
    EngineConfig cfg;
    for (const char* name : {"", "auto", "bf16"}) {
      cfg.kv_cache_dtype = name;
      auto l = ResolveLimits(cfg, config.text, false, 1);
      ASSERT_TRUE(l.ok()) << name;
      EXPECT_EQ(l->kv_quant, kv::KvQuant::kNone);
    }
    cfg.kv_cache_dtype = "int4";
    auto bad = ResolveLimits(cfg, config.text, false, 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("kv_cache_dtype 'int4'"), std::string::npos)
        << bad.status();
    cfg.kv_cache_dtype = "fp8_e4m3";
    EXPECT_EQ(ResolveLimits(cfg, config.text, false, 1)->kv_quant, kv::KvQuant::kFp8E4M3);
    cfg.kv_cache_dtype = "fp8";
    const Replay fp8 = ReplayCuda(config, 143771 * kMiB, cfg);
    const Replay bf16 = ReplayCuda(config, 143771 * kMiB);
    ASSERT_TRUE(fp8.sizing.ok()) << fp8.sizing.status();
    ASSERT_TRUE(bf16.sizing.ok()) << bf16.sizing.status();
    const kv::KvLayout& a = bf16.sizing->layout;
    const kv::KvLayout& b = fp8.sizing->layout;
    EXPECT_EQ(b.quant, kv::KvQuant::kFp8E4M3);
    EXPECT_EQ(b.dtype_bytes, 1);
    for (kv::KvGroup g : kv::kAllKvGroups) {
      if (!a.has_group(g)) continue;
      const double ratio = static_cast<double>(a.bytes_per_token(g)) / b.bytes_per_token(g);
      const int d = g == kv::KvGroup::kSliding ? config.text.head_dim : config.text.global_head_dim;
      EXPECT_DOUBLE_EQ(ratio, 2.0 * d / (d + 4));
      // The sliding pool is sized to the windows of the running sequences either way; the full
      // pool takes the rest of the same budget: about twice the tokens.
      if (g == kv::KvGroup::kFull) {
        EXPECT_GT(b.num_pages[kv::GroupIndex(g)], 1.9 * a.num_pages[kv::GroupIndex(g)]);
      } else {
        EXPECT_GE(b.num_pages[kv::GroupIndex(g)], a.num_pages[kv::GroupIndex(g)]);
      }
    }
    EXPECT_LE(b.TotalBytes(), fp8.sizing->budget_bytes);
    EXPECT_EQ(fp8.sizing->budget_bytes, bf16.sizing->budget_bytes);
    for (int l = 0; l < config.text.num_hidden_layers; ++l) {
      EXPECT_EQ(b.ArrayBytes(l), b.ArrayElements(l));
      const kv::KvLayerGeometry& g = b.layers[b.layers[l].owns_kv() ? l : b.layers[l].source];
      EXPECT_EQ(b.ScaleElements(l) * g.head_dim, b.ArrayElements(l));
    }
  }
}

TEST(KvSizingTest, HostBudgetCoversTheRunningSequencesUpToAQuarterOfRam) {
  KvMemory host;
  host.host = true;
  host.host_total = 24 * kGiB;
  // E2B in fp32 on the CPU: 16 sequences x 32768 tokens x 12 KiB of full layers is 6 GiB, plus
  // the sliding windows: capped at a quarter of 24 GiB; 16 sequences fit.
  const model::ModelConfig e2b = Dummy("e2b");
  auto l = ResolveLimits(EngineConfig(), e2b.text, true, 1);
  ASSERT_TRUE(l.ok());
  auto s = SizeKvCache(e2b.text, *l, host, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->budget_bytes, 6 * kGiB);
  EXPECT_EQ(s->max_running_seqs, 16);
  // 31B in fp32 (1.6 MiB per sliding token): fewer sequences, with a warning naming the budget.
  const model::ModelConfig b31 = Dummy("31b");
  l = ResolveLimits(EngineConfig(), b31.text, true, 1);
  ASSERT_TRUE(l.ok());
  s = SizeKvCache(b31.text, *l, host, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_LT(s->max_running_seqs, 16);
  EXPECT_NE(s->warning.find("6.00 GiB KV budget"), std::string::npos) << s->warning;
  // Unknown RAM: 1 GiB, in which 31B fits no sequence of even 1024 tokens: an error that says so.
  host.host_total = 0;
  const absl::Status none = SizeKvCache(b31.text, *l, host, 4).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.message().find("the CPU budget"), std::string::npos) << none;
}

// The tiny 31B-shaped model on the CPU (window 16, context 32768): the budget holds the 16
// running sequences at full length in the full layers and only their windows in the sliding
// ones. Counting every layer at full length twice over reserved 2 GiB for the 7 MB demo model.
TEST(KvSizingTest, HostBudgetCountsSlidingLayersByTheirWindow) {
  auto json = model::VariantConfig("31b", model::VariantSize::kTiny);
  ASSERT_TRUE(json.ok()) << json.status();
  auto tiny = model::ParseModelConfig(*json, "tiny 31b");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  KvMemory host;
  host.host = true;
  host.host_total = 64 * kGiB;
  auto l = ResolveLimits(EngineConfig(), tiny->text, true, 1);
  ASSERT_TRUE(l.ok()) << l.status();
  auto s = SizeKvCache(tiny->text, *l, host, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->max_running_seqs, 16);
  EXPECT_EQ(s->max_model_len, l->max_model_len);
  EXPECT_TRUE(s->warning.empty()) << s->warning;
  const kv::PerGroup<int64_t> per_token =
      kv::KvBytesPerToken(runner::KvLayersOf(tiny->text, true), 4, kv::KvQuant::kNone);
  ASSERT_GT(per_token[0], 0);
  ASSERT_GT(per_token[1], 0);
  const int64_t all_at_full_length = 16 * s->max_model_len * (per_token[0] + per_token[1]);
  EXPECT_LT(s->budget_bytes, all_at_full_length / 2) << s->budget_bytes;
  // Every running sequence at full length fits the full pool.
  EXPECT_GE(s->plan.group(kv::KvGroup::kFull).tokens, 16 * s->max_model_len);
}

TEST(KvSizingTest, OutOfMemoryHintFitsTheBackend) {
  const absl::Status device =
      CheckWeightsFit(80 * kGiB, kGiB, 40 * kGiB, 80 * kGiB, "cuda device 0 (H100)", false);
  EXPECT_EQ(device.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(device.message().find("or the cpu backend"), std::string::npos) << device;
  const absl::Status host =
      CheckWeightsFit(80 * kGiB, kGiB, 40 * kGiB, 64 * kGiB, "the CPU (x86)", true);
  EXPECT_EQ(host.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(host.message().find("cpu backend"), std::string::npos) << host;
  EXPECT_NE(host.message().find("host memory"), std::string::npos) << host;
  EXPECT_NE(host.message().find("more memory"), std::string::npos) << host;
}

}  // namespace
}  // namespace gannet::engine
