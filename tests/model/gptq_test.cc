// GPTQ and AWQ int4 checkpoints on the CPU backend.
//
// The checkpoints are written from the bf16 tiny models by gptq_writer.h, which follows the
// formats as docs/quantized-formats.md documents them (AutoGPTQ's and AutoAWQ's packing loops,
// their round-to-nearest quantizers), independent of the loader's unpacking code; alongside, an
// f32 checkpoint of the values the writer quantized to. Loading each must give the same logits
// (the CPU backend dequantizes a row at a time into f32 and runs the same dot products). Then
// the loader's refusals: wrong shapes and dtypes, missing tensors, configs gannet does not read.
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gtest/gtest.h"
#include "lib/backend/cpu/cpu_backend.h"
#include "lib/common/dtype.h"
#include "lib/common/file_util.h"
#include "lib/common/json.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/safetensors.h"
#include "lib/model/weights.h"
#include "tests/model/gptq_writer.h"
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

namespace fs = std::filesystem;
using gptq_writer::Bytes;
using gptq_writer::Edit;
using gptq_writer::Scheme;
using gptq_writer::Tensors;
using gptq_writer::WriteCheckpoints;
using gptq_writer::WriteTextOnly;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/gannet_gptq_XXXXXX";
    path = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    if (!path.empty()) fs::remove_all(path);
  }
  std::string path;
};

// ---- Loading and running -------------------------------------------------------------------

using Loaded = testing::LoadedModel;

absl::StatusOr<std::unique_ptr<Loaded>> Load(const std::string& dir) {
  return testing::LoadModelFolder(dir);
}

// All-position logits of `ids` as one prefill chunk, on the CPU.
absl::StatusOr<std::vector<float>> Logits(const Loaded& m, const std::vector<int32_t>& ids) {
  backend::CpuBackend backend;
  return testing::PrefillLogits(m, &backend, ids);
}

std::vector<int32_t> Prompt(int vocab, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  ids[0] = 2;  // <bos>
  return ids;
}

struct Case {
  std::string variant;
  Scheme scheme;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.variant << " " << c.scheme.name; }

class GptqRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(GptqRoundTrip, LogitsEqualTheDequantizedCheckpoint) {
  const Case& c = GetParam();
  TempDir tmp;
  ASSERT_FALSE(tmp.path.empty());
  const std::string src = testing::TinyModelDir(c.variant);
  auto written = WriteCheckpoints(src, c.scheme, tmp.path + "/q", tmp.path + "/ref");
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_GT(written->quantized_modules, 0);
  auto q = Load(tmp.path + "/q");
  ASSERT_TRUE(q.ok()) << q.status();
  int quantized_views = 0, act_order = 0;
  for (const model::WeightView* v : model::AllViews((*q)->weights)) {
    quantized_views += v->quantized();
    act_order += v->format.input_perm;
    if (v->quantized()) {
      EXPECT_EQ(v->format.elem, c.scheme.sym ? DType::kI4 : DType::kU4) << v->name;
      EXPECT_EQ(v->format.zero_point, !c.scheme.sym) << v->name;
    }
  }
  ASSERT_GT(quantized_views, 0);
  EXPECT_EQ(act_order > 0, c.scheme.desc_act);
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
  // The same f32 weights and the same summation order: equal, up to a compiler's contraction of
  // a multiply-add differing between the two row readers.
  EXPECT_LE(err, 1e-6) << c.variant << " " << c.scheme.name;
  auto bf16 = Load(src);
  ASSERT_TRUE(bf16.ok());
  auto lb = Logits(**bf16, ids);
  ASSERT_TRUE(lb.ok());
  EXPECT_GT(testing::MaxRelativeLogitError(lq->data(), lb->data(), static_cast<int>(ids.size()),
                                           (*q)->config.text.vocab_size),
            1e-4)
      << "the quantized model should differ from bf16";
  std::printf(
      "%s %s: %d modules quantized, %d quantized weights (%d act-ordered), logits vs "
      "dequantized f32 %.2e\n",
      c.variant.c_str(), c.scheme.name.c_str(), written->quantized_modules, quantized_views,
      act_order, err);
}

const Scheme kGptqG32Sym{"gptq_g32_sym", false, 32, false, true, true};
const Scheme kGptqG128Asym{"gptq_g128_asym", false, 128, false, false, true};
const Scheme kGptqG32AsymAct{"gptq_g32_asym_act", false, 32, true, false, true};
const Scheme kGptqG128SymActV2{"gptq_g128_sym_act_v2", false, 128, true, true, false};
const Scheme kGptqChannelAsymActV2{"gptq_channel_asym_act_v2", false, -1, true, false, false};
const Scheme kGptqG32AsymActMlpChannel{
    "gptq_g32_asym_act_mlp_channel", false, 32, true, false, true, true, true};
const Scheme kAwqG32{"awq_g32", true, 32, false, false, false};
const Scheme kAwqG128{"awq_g128", true, 128, false, false, false};

INSTANTIATE_TEST_SUITE_P(Variants, GptqRoundTrip,
                         ::testing::Values(Case{"31b", kGptqG32Sym}, Case{"31b", kGptqG128SymActV2},
                                           Case{"31b", kAwqG128}, Case{"26b-a4b", kGptqG32AsymAct},
                                           Case{"26b-a4b", kGptqChannelAsymActV2},
                                           Case{"26b-a4b", kAwqG32}, Case{"e4b", kGptqG128Asym},
                                           Case{"e4b", kGptqG32AsymAct}, Case{"e4b", kAwqG32},
                                           Case{"e4b", kGptqG32AsymActMlpChannel},
                                           Case{"31b", kGptqG32AsymActMlpChannel},
                                           Case{"e2b", kGptqG32Sym}, Case{"e2b", kGptqG128SymActV2},
                                           Case{"e2b", kAwqG128}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string s = i.param.variant + "_" + i.param.scheme.name;
                           for (char& ch : s)
                             ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

// ---- Refusals --------------------------------------------------------------------------------

// The e2b checkpoint of `s` with `edit` applied, loaded; its status.
absl::Status LoadEdited(const Scheme& s, const Edit& edit) {
  TempDir tmp;
  auto written =
      WriteCheckpoints(testing::TinyModelDir("e2b"), s, tmp.path + "/q", tmp.path + "/ref", edit);
  if (!written.ok()) return written.status();
  auto q = Load(tmp.path + "/q");
  if (!q.ok()) return q.status();
  // The bytes are checked when a backend loads them (the data is read after binding).
  std::vector<float> logits;
  auto l = Logits(**q, Prompt((*q)->config.text.vocab_size, 4));
  return l.status();
}

void ExpectRefused(const absl::Status& st, absl::StatusCode code,
                   std::initializer_list<std::string> words) {
  EXPECT_EQ(st.code(), code) << st;
  for (const std::string& w : words) {
    EXPECT_NE(std::string(st.message()).find(w), std::string::npos)
        << "'" << w << "' not in: " << st;
  }
}

constexpr char kDown[] = "model.layers.1.mlp.down_proj";  // e2b: [24, 96]

TEST(GptqLoad, RefusesWrongTensors) {
  const std::string d = kDown;
  ExpectRefused(LoadEdited(kGptqG32Sym,
                           [&](Tensors& t, Json&) {
                             auto& w = t.at(d + ".qweight");
                             w.shape = {w.shape[1], w.shape[0]};
                           }),
                absl::StatusCode::kInvalidArgument, {d + ".qweight", "expected I32 [12, 24]"});
  ExpectRefused(LoadEdited(kGptqG32Sym,
                           [&](Tensors& t, Json&) {
                             auto& w = t.at(d + ".scales");
                             w.dtype = DType::kI16;
                           }),
                absl::StatusCode::kInvalidArgument, {d + ".scales", "expected F16"});
  ExpectRefused(LoadEdited(kGptqG32Sym, [&](Tensors& t, Json&) { t.erase(d + ".qzeros"); }),
                absl::StatusCode::kInvalidArgument, {d + ".qzeros", "missing"});
  ExpectRefused(LoadEdited(kGptqG32AsymAct, [&](Tensors& t, Json&) { t.erase(d + ".g_idx"); }),
                absl::StatusCode::kInvalidArgument, {d + ".g_idx", "desc_act"});
  ExpectRefused(LoadEdited(kGptqG32Sym, [&](Tensors& t, Json&) { t.erase(d + ".qweight"); }),
                absl::StatusCode::kInvalidArgument, {d + ".qzeros", "without"});
  ExpectRefused(
      LoadEdited(kAwqG32,
                 [&](Tensors& t, Json&) {
                   t[d + ".g_idx"] = {d + ".g_idx", DType::kI32, {96}, std::string(96 * 4, '\0')};
                 }),
      absl::StatusCode::kInvalidArgument, {d + ".g_idx", "AWQ"});
  // Both forms of one module.
  ExpectRefused(
      LoadEdited(kGptqG32Sym,
                 [&](Tensors& t, Json&) {
                   t[d + ".weight"] = {
                       d + ".weight", DType::kBF16, {24, 96}, std::string(24 * 96 * 2, '\0')};
                 }),
      absl::StatusCode::kInvalidArgument, {d, "both"});
}

TEST(GptqLoad, RefusesBadValues) {
  const std::string d = kDown;
  // An act-ordered g_idx without desc_act.
  ExpectRefused(LoadEdited(kGptqG32Sym,
                           [&](Tensors& t, Json&) {
                             int32_t* g =
                                 reinterpret_cast<int32_t*>(t.at(d + ".g_idx").bytes.data());
                             std::swap(g[0], g[95]);
                           }),
                absl::StatusCode::kInvalidArgument, {d + ".g_idx", "desc_act"});
  // A group holding the wrong number of inputs.
  ExpectRefused(LoadEdited(kGptqG32AsymAct,
                           [&](Tensors& t, Json&) {
                             int32_t* g =
                                 reinterpret_cast<int32_t*>(t.at(d + ".g_idx").bytes.data());
                             g[0] = g[0] == 0 ? 1 : 0;
                           }),
                absl::StatusCode::kInvalidArgument, {d + ".g_idx", "exactly 32"});
  // sym with a zero point other than 8.
  ExpectRefused(
      LoadEdited(kGptqG32Sym, [&](Tensors& t, Json&) { t.at(d + ".qzeros").bytes[0] = 0x05; }),
      absl::StatusCode::kInvalidArgument, {d + ".qzeros", "sym"});
  // v1's stored 15 (a zero point of 16).
  ExpectRefused(LoadEdited(kGptqG128Asym,
                           [&](Tensors& t, Json&) {
                             const std::string o = "model.layers.1.self_attn.o_proj";
                             t.at(o + ".qzeros").bytes[0] = 0x0f;
                           }),
                absl::StatusCode::kDataLoss, {"qzeros", "16"});
  // A non-finite scale; a nonzero bias.
  ExpectRefused(LoadEdited(kAwqG32,
                           [&](Tensors& t, Json&) {
                             auto& b = t.at(d + ".scales").bytes;
                             b[0] = 0x00;
                             b[1] = 0x7c;  // f16 +inf
                           }),
                absl::StatusCode::kDataLoss, {d + ".scales", "finite"});
  ExpectRefused(LoadEdited(kAwqG32,
                           [&](Tensors& t, Json&) {
                             std::vector<uint16_t> bias(24, 0);
                             bias[3] = FloatToF16(0.5f);
                             t[d + ".bias"] = {d + ".bias", DType::kF16, {24}, Bytes(bias)};
                           }),
                absl::StatusCode::kUnimplemented, {d + ".bias", "nonzero"});
}

TEST(GptqLoad, HonoursExclusions) {
  // A module the config excludes must be plain.
  const std::string qp = "model.layers.1.self_attn.o_proj";
  ExpectRefused(LoadEdited(kGptqG32Sym,
                           [&](Tensors&, Json& q) {
                             Json dynamic = *q.Find("dynamic");
                             dynamic.Set("-:.*layers\\.1\\.self_attn\\.o_proj", Json::MakeObject());
                             q.Set("dynamic", std::move(dynamic));
                           }),
                absl::StatusCode::kInvalidArgument, {qp, "keeps it plain"});
  ExpectRefused(LoadEdited(kAwqG32,
                           [&](Tensors&, Json& q) {
                             Json list = *q.Find("modules_to_not_convert");
                             list.Push(Json::String("layers.1.self_attn.o_proj"));
                             q.Set("modules_to_not_convert", std::move(list));
                           }),
                absl::StatusCode::kInvalidArgument, {qp, "modules_to_not_convert"});
  // An all-zero bias is accepted (writers may store one).
  EXPECT_TRUE(LoadEdited(kAwqG32, [&](Tensors& t, Json&) {
                const std::string d = kDown;
                t[d + ".bias"] = {d + ".bias", DType::kF16, {24}, std::string(48, '\0')};
              }).ok());
}

TEST(GptqLoad, RefusesConfigsItDoesNotRead) {
  auto with = [](const Scheme& s, const std::string& key, Json value) {
    return LoadEdited(s, [key, value](Tensors&, Json& q) { q.Set(key, value); });
  };
  ExpectRefused(with(kGptqG32Sym, "bits", Json::Int(8)), absl::StatusCode::kUnimplemented,
                {"quantization_config.bits", "8-bit"});
  ExpectRefused(with(kAwqG32, "bits", Json::Int(8)), absl::StatusCode::kUnimplemented,
                {"quantization_config.bits", "8-bit"});
  ExpectRefused(with(kAwqG32, "version", Json::String("gemv")), absl::StatusCode::kUnimplemented,
                {"quantization_config.version", "gemv"});
  ExpectRefused(with(kAwqG32, "version", Json::String("exllama")), absl::StatusCode::kUnimplemented,
                {"quantization_config.version", "exllama"});
  ExpectRefused(with(kAwqG32, "zero_point", Json::Bool(false)), absl::StatusCode::kUnimplemented,
                {"quantization_config.zero_point"});
  ExpectRefused(with(kGptqG32Sym, "checkpoint_format", Json::String("marlin")),
                absl::StatusCode::kUnimplemented, {"quantization_config.checkpoint_format"});
  ExpectRefused(with(kGptqG32Sym, "group_size", Json::Int(96)), absl::StatusCode::kUnimplemented,
                {"quantization_config.group_size", "96"});
  ExpectRefused(with(kGptqG32Sym, "desc_act", Json::String("yes")),
                absl::StatusCode::kInvalidArgument, {"quantization_config.desc_act"});
  ExpectRefused(with(kGptqG32Sym, "some_new_field", Json::Int(1)), absl::StatusCode::kUnimplemented,
                {"quantization_config.some_new_field", "unknown"});
  ExpectRefused(with(kGptqG32Sym, "dynamic", Json::String("x")), absl::StatusCode::kInvalidArgument,
                {"quantization_config.dynamic"});
  ExpectRefused(LoadEdited(kGptqG32Sym,
                           [](Tensors&, Json& q) {
                             Json dynamic = Json::MakeObject();
                             Json bits = Json::MakeObject();
                             bits.Set("bits", Json::Int(8));
                             dynamic.Set("+:.*down_proj", std::move(bits));
                             q.Set("dynamic", std::move(dynamic));
                           }),
                absl::StatusCode::kUnimplemented, {"dynamic", "bits"});
}

// The configs GPTQModel (7.x) writes for both methods carry its common fields; they load.
TEST(GptqLoad, AcceptsGptqModelConfigs) {
  EXPECT_TRUE(LoadEdited(kGptqG32Sym, [](Tensors&, Json& q) {
                q.Set("method", Json::String("gptq"));
                q.Set("format", Json::String("gptq"));
                q.Set("activation", Json());
                q.Set("rotation", Json());
              }).ok());
  EXPECT_TRUE(LoadEdited(kAwqG32, [](Tensors&, Json& q) {
                q.Set("method", Json::String("awq"));
                q.Set("format", Json::String("gemm"));
                q.Set("checkpoint_format", Json::String("gemm"));
                q.Set("pack_dtype", Json::String("int32"));
                q.Set("desc_act", Json::Bool(false));
                q.Set("lm_head", Json::Bool(false));
                q.Set("dynamic", Json());
                q.Set("meta", Json::MakeObject());
              }).ok());
  ExpectRefused(
      LoadEdited(kAwqG32, [](Tensors&, Json& q) { q.Set("format", Json::String("gemv_fast")); }),
      absl::StatusCode::kUnimplemented, {"quantization_config.format", "gemv_fast"});
  Json act = Json::MakeObject();
  act.Set("bits", Json::Int(8));
  ExpectRefused(LoadEdited(kGptqG32Sym, [act](Tensors&, Json& q) { q.Set("activation", act); }),
                absl::StatusCode::kUnimplemented, {"quantization_config.activation"});
}

// ---- Export for the HF oracle ------------------------------------------------------------

// Not a check by itself: with GANNET_GPTQ_EXPORT_DIR set (tools/gpu/gptq_oracle.sh), writes
// GPTQ/AWQ checkpoints of the dense tiny variants that every module of HF's GPTQ and AWQ loaders
// can read (all decoder linears quantized, or the rest named in modules_to_not_convert), each with
// gannet's CPU logits of a prompt (gannet_logits.safetensors: input_ids, logits); the script then
// has HF transformers load each checkpoint with gptqmodel / autoawq and compares.
TEST(GptqOracleExport, WritesCheckpointsWithGannetLogits) {
  const char* root = std::getenv("GANNET_GPTQ_EXPORT_DIR");
  if (root == nullptr) GTEST_SKIP() << "GANNET_GPTQ_EXPORT_DIR is not set";
  struct Export {
    std::string variant;
    Scheme scheme;
  };
  Scheme gptq_act{"gptq_g32_asym_act", false, 32, true, false, true, false};
  Scheme gptq_sym_v2{"gptq_g32_sym_v2", false, 32, false, true, false, false};
  Scheme gptq_channel{"gptq_channel_sym", false, -1, false, true, true, false};
  Scheme gptq_channel_asym{"gptq_channel_asym_v2", false, -1, false, false, false, false};
  const Export exports[] = {{"e4b", gptq_act},          {"e4b", gptq_sym_v2}, {"31b", gptq_channel},
                            {"e2b", gptq_channel_asym}, {"e4b", kAwqG32},     {"31b", kAwqG128},
                            {"e2b", kAwqG128}};
  TempDir tmp;
  for (const Export& e : exports) {
    const std::string text_only = tmp.path + "/" + e.variant;
    if (!fs::exists(text_only)) {
      ASSERT_TRUE(WriteTextOnly(testing::TinyModelDir(e.variant), text_only).ok());
    }
    const std::string dst = std::string(root) + "/" + e.variant + "-" + e.scheme.name;
    fs::remove_all(dst);
    auto written = WriteCheckpoints(text_only, e.scheme, dst, tmp.path + "/ref");
    ASSERT_TRUE(written.ok()) << written.status();
    auto q = Load(dst);
    ASSERT_TRUE(q.ok()) << dst << ": " << q.status();
    const std::vector<int32_t> ids = Prompt((*q)->config.text.vocab_size, 24);
    auto logits = Logits(**q, ids);
    ASSERT_TRUE(logits.ok()) << logits.status();
    std::vector<int64_t> ids64(ids.begin(), ids.end());
    const int64_t n = static_cast<int64_t>(ids.size());
    ASSERT_TRUE(model::WriteSafetensors(
                    dst + "/gannet_logits.safetensors",
                    {{"input_ids", DType::kI64, {n}, Bytes(ids64)},
                     {"logits", DType::kF32, {n, (*q)->config.text.vocab_size}, Bytes(*logits)}})
                    .ok());
    fs::remove_all(tmp.path + "/ref");
    std::printf("wrote %s (%d modules quantized)\n", dst.c_str(), written->quantized_modules);
  }
}

}  // namespace
}  // namespace gannet
