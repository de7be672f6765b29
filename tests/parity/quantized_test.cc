// int4 (compressed-tensors W4A16) checkpoints written by `gannet quantize`, run on the CPU
// backend:
//  - round trip, every tiny variant and scheme: the quantized checkpoint's logits equal those of
//    an f32 checkpoint holding the dequantized values of the same weights (the CPU backend
//    dequantizes a row at a time into f32 and runs the same dot products, so they agree exactly);
//  - the trained tiny model in int4 g32 against bf16: held-out perplexity and the KL divergence
//    of the next-token distributions stay within the bounds below.
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/quantize_checkpoint.h"
#include "lib/model/quantized_weights.h"
#include "lib/model/safetensors.h"
#include "lib/model/weights.h"
#include "lib/quant/int4.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

namespace fs = std::filesystem;
using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/gannet_quant_XXXXXX";
    path = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    if (!path.empty()) fs::remove_all(path);
  }
  std::string path;
};

struct Loaded {
  model::ModelConfig config;
  std::unique_ptr<model::Checkpoint> checkpoint;
  model::ModelWeights weights;
};

absl::StatusOr<std::unique_ptr<Loaded>> Load(const std::string& dir) {
  auto m = std::make_unique<Loaded>();
  GANNET_ASSIGN_OR_RETURN(m->config, model::LoadModelConfig(dir));
  GANNET_ASSIGN_OR_RETURN(m->checkpoint, model::Checkpoint::Open(dir));
  GANNET_ASSIGN_OR_RETURN(m->weights, model::BindWeights(m->config, *m->checkpoint));
  return m;
}

// All-position logits of `ids` as one prefill chunk.
absl::StatusOr<std::vector<float>> Logits(const Loaded& m, const std::vector<int32_t>& ids) {
  const int n = static_cast<int>(ids.size());
  backend::CpuBackend backend;
  GANNET_ASSIGN_OR_RETURN(
      auto r, testing::CreateTinyRunner(m.config, m.weights, &backend,
                                        testing::SimpleRunnerOptions(m.config, 16, n, 1, n), n, 1));
  StepBatch batch;
  SeqStep s;
  const std::vector<int32_t> table = testing::IdentityPageTable(0, (n + 15) / 16);
  s.tokens = ids;
  s.page_table[0] = table;
  s.page_table[1] = table;
  s.logits = SeqStep::Logits::kAll;
  batch.seqs.push_back(s);
  StepResult out;
  GANNET_RETURN_IF_ERROR(r->Forward(batch, &out));
  return out.logits;
}

// `src`'s tensors with every quantized weight of `q` replaced by its dequantized values in f32
// under the plain checkpoint name (fused experts as the 3-D tensor), written to `dst` as one file.
absl::Status WriteDequantizedReference(const std::string& src, const Loaded& q,
                                       const std::string& dst) {
  GANNET_ASSIGN_OR_RETURN(auto ckpt, model::Checkpoint::Open(src, {.text_only = false}));
  std::map<std::string, model::TensorToWrite> tensors;
  for (const std::string& name : ckpt->Names()) {
    const model::TensorRef& t = *ckpt->Find(name);
    tensors[name] = {name, t.info->dtype, t.info->shape,
                     std::string(reinterpret_cast<const char*>(t.data()), t.info->nbytes())};
  }
  for (const model::WeightView* v : model::AllViews(q.weights)) {
    if (!v->present() || !v->quantized()) continue;
    const int64_t k = v->shape.back(), rows = v->numel() / k, groups = k / v->format.group_size;
    std::vector<uint8_t> packed(v->nbytes()), zeros(v->format.zero_point ? rows * groups : 0);
    std::vector<uint8_t> scales(static_cast<size_t>(rows * groups) * DTypeBits(v->format.scale) /
                                8);
    GANNET_RETURN_IF_ERROR(
        model::WriteCanonicalInt4(*v, packed.data(), scales.data(), zeros.data()));
    std::vector<float> values(static_cast<size_t>(v->numel()));
    for (int64_t r = 0; r < rows; ++r) {
      quant::DequantizeInt4Row(v->format, packed.data() + r * (k / 2),
                               scales.data() + r * groups * DTypeBits(v->format.scale) / 8,
                               zeros.empty() ? nullptr : zeros.data() + r * groups, k,
                               values.data() + r * k);
    }
    tensors[v->name] = {
        v->name, DType::kF32, v->shape,
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4)};
  }
  fs::create_directories(dst);
  std::vector<model::TensorToWrite> out;
  for (auto& [name, t] : tensors) out.push_back(std::move(t));
  GANNET_RETURN_IF_ERROR(model::WriteSafetensors(dst + "/model.safetensors", out));
  fs::copy_file(src + "/config.json", dst + "/config.json");
  return absl::OkStatus();
}

std::vector<int32_t> Prompt(int vocab, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  ids[0] = 2;  // <bos>
  return ids;
}

struct RoundTripCase {
  std::string variant, spec;
};

class QuantizedRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantizedRoundTrip, LogitsEqualTheDequantizedCheckpoint) {
  const RoundTripCase& c = GetParam();
  TempDir tmp;
  ASSERT_FALSE(tmp.path.empty());
  auto options = model::ParseWeightDtype(c.spec);
  ASSERT_TRUE(options.ok()) << options.status();
  const std::string src = testing::TinyModelDir(c.variant);
  auto report = model::QuantizeCheckpoint(src, tmp.path + "/q", *options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GT(report->quantized_modules, 0);
  auto q = Load(tmp.path + "/q");
  ASSERT_TRUE(q.ok()) << q.status();
  int quantized_views = 0;
  for (const model::WeightView* v : model::AllViews((*q)->weights))
    quantized_views += v->quantized();
  ASSERT_GT(quantized_views, 0);
  ASSERT_TRUE(WriteDequantizedReference(src, **q, tmp.path + "/ref").ok());
  auto ref = Load(tmp.path + "/ref");
  ASSERT_TRUE(ref.ok()) << ref.status();

  const std::vector<int32_t> ids = Prompt((*q)->config.text.vocab_size, 24);
  auto lq = Logits(**q, ids);
  ASSERT_TRUE(lq.ok()) << lq.status();
  auto lr = Logits(**ref, ids);
  ASSERT_TRUE(lr.ok()) << lr.status();
  ASSERT_EQ(lq->size(), lr->size());
  const double err = testing::MaxRelativeLogitError(
      lq->data(), lr->data(), static_cast<int>(ids.size()), (*q)->config.text.vocab_size);
  // The same f32 weights and the same summation order: equal. The bound only allows a compiler's
  // contraction of a multiply-add to differ between the two inlined row readers.
  EXPECT_LE(err, 1e-6) << c.variant << " " << c.spec;
  // And the int4 model is not the bf16 one (the quantization did something).
  auto bf16 = Load(src);
  ASSERT_TRUE(bf16.ok());
  auto lb = Logits(**bf16, ids);
  ASSERT_TRUE(lb.ok());
  EXPECT_GT(testing::MaxRelativeLogitError(lq->data(), lb->data(), static_cast<int>(ids.size()),
                                           (*q)->config.text.vocab_size),
            1e-4);
  std::printf(
      "%s %s: %lld modules quantized, %d quantized weights, logits vs dequantized f32 %.2e\n",
      c.variant.c_str(), c.spec.c_str(), static_cast<long long>(report->quantized_modules),
      quantized_views, err);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, QuantizedRoundTrip,
    ::testing::Values(RoundTripCase{"31b", "int4-g32"}, RoundTripCase{"31b", "int4-channel"},
                      RoundTripCase{"26b-a4b", "int4-g32"},
                      RoundTripCase{"26b-a4b", "int4-channel-asym"},
                      RoundTripCase{"e4b", "int4-g32"}, RoundTripCase{"e4b", "int4-g64-asym"},
                      RoundTripCase{"e2b", "int4-g32"}, RoundTripCase{"e2b", "int4-channel"}),
    [](const ::testing::TestParamInfo<RoundTripCase>& i) {
      std::string s = i.param.variant + "_" + i.param.spec;
      for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return s;
    });

// The CPU backend's Linear on a canonical int4 tensor equals Linear on the dequantized f32 matrix,
// for several rows at once, every scheme, and a Rows() view of the weight; ops that read tables
// by row refuse it.
TEST(CpuInt4, LinearEqualsTheDequantizedMatrix) {
  constexpr int64_t kN = 40, kK = 256, kM = 5;
  std::vector<float> w(kN * kK), x(kM * kK);
  uint32_t r = 12345;
  auto rnd = [&]() {
    r = r * 1664525u + 1013904223u;
    return static_cast<float>(r >> 8) / 16777216.0f - 0.5f;
  };
  for (float& v : w) v = rnd() * 0.2f + 0.01f;
  for (float& v : x) v = rnd();
  for (const char* spec : {"int4-g32", "int4-g128-asym", "int4-channel", "int4-g64-asym"}) {
    auto o = model::ParseWeightDtype(spec);
    ASSERT_TRUE(o.ok());
    WeightFormat f = WeightFormat::Int4(o->group_size == 0 ? kK : o->group_size, DType::kBF16);
    if (!o->symmetric) {
      f.elem = DType::kU4;
      f.zero_point = true;
    }
    const int64_t groups = kK / f.group_size;
    std::vector<uint8_t> packed(kN * kK / 2), zeros(kN * groups);
    std::vector<uint16_t> scales(kN * groups);
    quant::QuantizeInt4Rows(f, w.data(), kN, kK, packed.data(), scales.data(), zeros.data());
    std::vector<float> deq(kN * kK);
    for (int64_t n = 0; n < kN; ++n) {
      quant::DequantizeInt4Row(f, packed.data() + n * kK / 2, scales.data() + n * groups,
                               zeros.data() + n * groups, kK, deq.data() + n * kK);
    }
    backend::Tensor wq = backend::Tensor::Make(packed.data(), f.elem, {kN, kK});
    wq.format = f;
    wq.scales = scales.data();
    wq.zero_points = f.zero_point ? zeros.data() : nullptr;
    backend::Tensor wd = backend::Tensor::Make(deq.data(), DType::kF32, {kN, kK});
    backend::Tensor xt = backend::Tensor::Make(x.data(), DType::kF32, {kM, kK});
    std::vector<float> oq(kM * kN), od(kM * kN);
    backend::CpuBackend be;
    ASSERT_TRUE(be.Linear(xt, wq, backend::Tensor::Make(oq.data(), DType::kF32, {kM, kN})).ok());
    ASSERT_TRUE(be.Linear(xt, wd, backend::Tensor::Make(od.data(), DType::kF32, {kM, kN})).ok());
    EXPECT_EQ(oq, od) << spec;
    // Rows [8, 24) of the weight: the scale and zero-point pointers move with the packed rows.
    std::vector<float> oq2(kM * 16), od2(kM * 16);
    ASSERT_TRUE(
        be.Linear(xt, wq.Rows(8, 16), backend::Tensor::Make(oq2.data(), DType::kF32, {kM, 16}))
            .ok());
    ASSERT_TRUE(
        be.Linear(xt, wd.Rows(8, 16), backend::Tensor::Make(od2.data(), DType::kF32, {kM, 16}))
            .ok());
    EXPECT_EQ(oq2, od2) << spec;
    // An embedding lookup does not read int4 tables.
    int32_t id = 3;
    std::vector<float> row(kK);
    const absl::Status st = be.Embed(backend::Tensor::Make(&id, DType::kI32, {1}), wq, 1.0f,
                                     backend::Tensor::Make(row.data(), DType::kF32, {1, kK}));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(std::string(st.message()).find("Embed table is quantized"), std::string::npos) << st;
  }
}

// A MoE checkpoint whose experts are plain per-expert modules (experts.{i}.gate_proj.weight, ...,
// the layout compressed-tensors checkpoints use when `ignore` keeps the experts) gathers them into
// the fused weights: logits equal those of the same checkpoint with fused 3-D expert tensors.
TEST(QuantizedPerExpert, PlainPerExpertModulesEqualTheFusedTensors) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path.empty());
  const std::string fused = tmp.path + "/fused", split = tmp.path + "/split";
  // int4-g32 keeps 26b-a4b's gate_up experts fused in bf16 (width 40 is not a multiple of 32).
  ASSERT_TRUE(
      model::QuantizeCheckpoint(testing::TinyModelDir("26b-a4b"), fused, model::QuantizeOptions{})
          .ok());
  auto ckpt = model::Checkpoint::Open(fused, {.text_only = false});
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  std::vector<model::TensorToWrite> out;
  int split_tensors = 0;
  for (const std::string& name : (*ckpt)->Names()) {
    const model::TensorRef& t = *(*ckpt)->Find(name);
    const char* bytes = reinterpret_cast<const char*>(t.data());
    const std::string suffix = "experts.gate_up_proj";
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      const std::string base = name.substr(0, name.size() - 12);  // "...experts."
      const int64_t e_count = t.info->shape[0], rows = t.info->shape[1], k = t.info->shape[2];
      const size_t half = static_cast<size_t>(rows / 2 * k) * 2;  // bf16 bytes of one half
      for (int64_t e = 0; e < e_count; ++e) {
        const char* ex = bytes + static_cast<size_t>(e) * 2 * half;
        out.push_back({base + std::to_string(e) + ".gate_proj.weight",
                       t.info->dtype,
                       {rows / 2, k},
                       std::string(ex, half)});
        out.push_back({base + std::to_string(e) + ".up_proj.weight",
                       t.info->dtype,
                       {rows / 2, k},
                       std::string(ex + half, half)});
      }
      ++split_tensors;
      continue;
    }
    out.push_back({name, t.info->dtype, t.info->shape, std::string(bytes, t.info->nbytes())});
  }
  ASSERT_GT(split_tensors, 0);
  fs::create_directories(split);
  ASSERT_TRUE(model::WriteSafetensors(split + "/model.safetensors", out).ok());
  // The per-expert gate/up modules stay plain: `ignore` must say so, as compressed-tensors'.
  auto text = ReadFileToString(fused + "/config.json", 1 << 20, "config");
  ASSERT_TRUE(text.ok());
  std::string cfg = *text;
  const size_t at = cfg.find("\"ignore\":[");
  ASSERT_NE(at, std::string::npos);
  cfg.insert(at + 10, "\"re:.*experts[.][0-9]+[.](gate|up)_proj$\",");
  ASSERT_TRUE(WriteStringToFile(split + "/config.json", cfg).ok());

  auto a = Load(fused);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Load(split);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->get()->weights.layers[0].experts_gate_up.pieces.empty());
  const std::vector<int32_t> ids = Prompt((*a)->config.text.vocab_size, 20);
  auto la = Logits(**a, ids);
  auto lb = Logits(**b, ids);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(testing::MaxRelativeLogitError(lb->data(), la->data(), static_cast<int>(ids.size()),
                                           (*a)->config.text.vocab_size),
            0.0);
}

// HF's logits for the same int4 checkpoints (tools/gpu/int4_oracle.sh on the GPU machine:
// compressed-tensors decompresses, HF's Gemma-4 runs in f32): gannet's within 1e-3 of max |logit|,
// as the bf16 parity tests. Skipped until tests/data/golden/int4-<name>.safetensors is committed.
class QuantizedHfOracle : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantizedHfOracle, LogitsMatchHfWithCompressedTensors) {
  const RoundTripCase& c = GetParam();
  const std::string name = "int4-" + c.variant + "-" + c.spec;
  if (!fs::exists(testing::TestDataDir() + "/golden/" + name + ".safetensors")) {
    GTEST_SKIP() << name << ".safetensors not generated yet (tools/gpu/int4_oracle.sh)";
  }
  auto golden = testing::GoldenFile::Open(name);
  ASSERT_TRUE(golden.ok()) << golden.status();
  TempDir tmp;
  auto options = model::ParseWeightDtype(c.spec);
  ASSERT_TRUE(options.ok());
  ASSERT_TRUE(
      model::QuantizeCheckpoint(testing::TinyModelDir(c.variant), tmp.path + "/q", *options).ok());
  auto q = Load(tmp.path + "/q");
  ASSERT_TRUE(q.ok()) << q.status();
  const int vocab = (*q)->config.text.vocab_size;
  for (const char* prompt : {"short", "long"}) {
    std::vector<int32_t> ids;
    std::vector<float> hf;
    ASSERT_TRUE(golden->Ints(std::string(prompt) + ".input_ids", &ids).ok());
    ASSERT_TRUE(golden->Floats(std::string(prompt) + ".logits", &hf).ok());
    auto lq = Logits(**q, ids);
    ASSERT_TRUE(lq.ok()) << lq.status();
    ASSERT_EQ(lq->size(), hf.size());
    const double err =
        testing::MaxRelativeLogitError(lq->data(), hf.data(), static_cast<int>(ids.size()), vocab);
    EXPECT_LT(err, 1e-3) << name << " " << prompt;
    std::printf("%s %s: gannet vs HF + compressed-tensors %.2e\n", name.c_str(), prompt, err);
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, QuantizedHfOracle,
                         ::testing::Values(RoundTripCase{"31b", "int4-g32"},
                                           RoundTripCase{"26b-a4b", "int4-g32"},
                                           RoundTripCase{"e4b", "int4-g32"},
                                           RoundTripCase{"e2b", "int4-g32"},
                                           RoundTripCase{"e2b", "int4-channel-asym"},
                                           RoundTripCase{"e4b", "int4-g64-asym"}),
                         [](const ::testing::TestParamInfo<RoundTripCase>& i) {
                           std::string s = i.param.variant + "_" + i.param.spec;
                           for (char& ch : s)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

// Mean next-token negative log-likelihood and, against `ref`, mean KL(ref || x) per position.
struct Quality {
  double ppl = 0, kl = 0;
};
Quality Measure(const std::vector<float>& x, const std::vector<float>* ref,
                const std::vector<int32_t>& ids, int vocab) {
  auto log_softmax = [&](const float* row, std::vector<double>* out) {
    double mx = row[0];
    for (int v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
    const double lse = mx + std::log(sum);
    out->resize(vocab);
    for (int v = 0; v < vocab; ++v) (*out)[v] = row[v] - lse;
  };
  Quality q;
  double nll = 0, kl = 0;
  std::vector<double> lp, lr;
  for (size_t p = 0; p + 1 < ids.size(); ++p) {
    log_softmax(x.data() + p * vocab, &lp);
    nll -= lp[ids[p + 1]];
    if (ref != nullptr) {
      log_softmax(ref->data() + p * vocab, &lr);
      for (int v = 0; v < vocab; ++v) kl += std::exp(lr[v]) * (lr[v] - lp[v]);
    }
  }
  q.ppl = std::exp(nll / (ids.size() - 1));
  q.kl = kl / (ids.size() - 1);
  return q;
}

// Measured on the two held-out passages (tests/data/golden/trained.safetensors, 640 tokens each),
// int4 g32 symmetric round-to-nearest (`gannet quantize`) against bf16, CPU backend:
//   kjv: perplexity 50.9020 -> 52.3319 (+2.81 %), mean KL(bf16 || int4) 0.0514 nats/position
//   web: perplexity 61.8341 -> 63.9412 (+3.41 %), mean KL 0.0568
// The bound for int4 g32 is a perplexity increase of at most 5 %; the KL bound leaves
// ~40 % room over the measurement. (Round to nearest, no calibration: GPTQ/QAT do better.)
constexpr double kMaxPerplexityIncrease = 0.05;  // 5 %
constexpr double kMaxMeanKl = 0.08;              // nats per position

TEST(QuantizedTrained, Int4G32PerplexityAndKlWithinBounds) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path.empty());
  auto report = model::QuantizeCheckpoint(testing::TinyModelDir("trained"), tmp.path + "/q",
                                          model::QuantizeOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->kept_modules, 0);
  auto q = Load(tmp.path + "/q");
  ASSERT_TRUE(q.ok()) << q.status();
  auto bf16 = Load(testing::TinyModelDir("trained"));
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  auto golden = testing::GoldenFile::Open("trained");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const int vocab = (*q)->config.text.vocab_size;
  for (const char* passage : {"kjv", "web"}) {
    std::vector<int32_t> ids;
    ASSERT_TRUE(golden->Ints(std::string(passage) + ".input_ids", &ids).ok());
    auto lb = Logits(**bf16, ids);
    ASSERT_TRUE(lb.ok()) << lb.status();
    auto lq = Logits(**q, ids);
    ASSERT_TRUE(lq.ok()) << lq.status();
    const Quality base = Measure(*lb, nullptr, ids, vocab);
    const Quality int4 = Measure(*lq, &*lb, ids, vocab);
    std::printf("%s (%zu tokens): perplexity bf16 %.4f, int4 g32 %.4f (%+.2f%%), mean KL %.5f\n",
                passage, ids.size(), base.ppl, int4.ppl, 100 * (int4.ppl / base.ppl - 1), int4.kl);
    EXPECT_LT(int4.ppl / base.ppl - 1, kMaxPerplexityIncrease) << passage;
    EXPECT_LT(int4.kl, kMaxMeanKl) << passage;
    EXPECT_GT(int4.kl, 0.0) << passage;  // the weights did change
  }
}

}  // namespace
}  // namespace gannet
