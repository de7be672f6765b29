// GPTQ and AWQ int4 checkpoints on the CPU backend.
//
// The checkpoints are written here, from the bf16 tiny models, by a writer that follows the
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
#include "tests/testing/tiny_models.h"

namespace gannet {
namespace {

namespace fs = std::filesystem;
using runner::SeqStep;
using runner::StepBatch;
using runner::StepResult;

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

// ---- The writer ------------------------------------------------------------------------------

struct Scheme {
  std::string name;
  bool awq = false;
  int group = 128;  // -1: per channel
  bool desc_act = false;
  bool sym = false;
  bool v1 = true;  // GPTQ checkpoint_format "gptq" (zero points stored minus one)
  // GPTQ: keep layer 0's o_proj bf16 through a `dynamic` "-:" rule (GPTQModel's; the HF export
  // below leaves it out, as transformers' GPTQ loader may not read `dynamic`).
  bool exclude_one = true;
  // GPTQ: the `dynamic` override of the mlp modules sets group_size -1 (else it restates the
  // global values).
  bool mlp_channel = false;
};

// One module quantized and packed as the reference tools store it.
struct Packed {
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;  // f16 [G, n]
  std::vector<float> values;     // the dequantized [n, k] the checkpoint means
};

uint64_t Hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

Packed QuantizeModule(const Scheme& s, const std::string& module, const std::vector<float>& w,
                      int64_t n, int64_t k) {
  const int64_t g = s.group == -1 ? k : s.group, groups = k / g;
  // act-order: a pseudo-random permutation stands in for GPTQ's order of decreasing Hessian
  // diagonal; group i holds inputs perm[i * g ...], and g_idx[perm[i]] = i / g.
  std::vector<int64_t> perm(k);
  for (int64_t i = 0; i < k; ++i) perm[i] = i;
  if (s.desc_act) {
    uint64_t r = Hash(module);
    for (int64_t i = k - 1; i > 0; --i) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(perm[i], perm[static_cast<int64_t>((r >> 33) % static_cast<uint64_t>(i + 1))]);
    }
  }
  Packed p;
  p.g_idx.assign(k, 0);
  for (int64_t i = 0; i < k; ++i) p.g_idx[perm[i]] = static_cast<int32_t>(i / g);
  std::vector<int> q(n * k), zero(groups * n);
  p.scales.assign(groups * n, 0);
  p.values.assign(n * k, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      float mn = w[r * k + perm[gi * g]], mx = mn;
      for (int64_t t = 0; t < g; ++t) {
        mn = std::min(mn, w[r * k + perm[gi * g + t]]);
        mx = std::max(mx, w[r * k + perm[gi * g + t]]);
      }
      float scale;
      int z;
      if (s.awq) {
        // AutoAWQ: the group's own range, zero = -round(min / scale) in [0, 15].
        scale = std::max(mx - mn, 1e-5f) / 15.0f;
        scale = F16ToFloat(FloatToF16(scale));
        z = std::clamp(static_cast<int>(-std::nearbyint(mn / scale)), 0, 15);
      } else {
        // AutoGPTQ's quantizer: the range widened to hold 0; symmetric about 0 with zero 8.
        float xmin = std::min(mn, 0.0f), xmax = std::max(mx, 0.0f);
        if (s.sym) {
          xmax = std::max(-xmin, xmax);
          if (xmin < 0) xmin = -xmax;
        }
        if (xmin == 0 && xmax == 0) xmin = -1, xmax = 1;
        scale = F16ToFloat(FloatToF16((xmax - xmin) / 15.0f));
        z = s.sym ? 8 : static_cast<int>(std::nearbyint(-xmin / scale));
        // v1 stores zero - 1 in 4 bits, so it cannot hold a zero point of 0.
        if (s.v1 && z == 0) z = 1;
      }
      p.scales[gi * n + r] = FloatToF16(scale);
      zero[gi * n + r] = z;
      for (int64_t t = 0; t < g; ++t) {
        const int64_t c = perm[gi * g + t];
        const int v = std::clamp(static_cast<int>(std::nearbyint(w[r * k + c] / scale)) + z, 0, 15);
        q[r * k + c] = v;
        p.values[r * k + c] = static_cast<float>(v - z) * scale;
      }
    }
  }
  if (s.awq) {
    // AutoAWQ's gemm packing: word (k, c) holds outputs c*8 + order[i] at nibble i.
    constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    p.qweight.assign(k * (n / 8), 0);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t c = 0; c < n / 8; ++c) {
        uint32_t word = 0;
        for (int i = 0; i < 8; ++i)
          word |= static_cast<uint32_t>(q[(c * 8 + kOrder[i]) * k + kk]) << (4 * i);
        p.qweight[kk * (n / 8) + c] = static_cast<int32_t>(word);
      }
    }
    p.qzeros.assign(groups * (n / 8), 0);
    for (int64_t gi = 0; gi < groups; ++gi) {
      for (int64_t c = 0; c < n / 8; ++c) {
        uint32_t word = 0;
        for (int i = 0; i < 8; ++i)
          word |= static_cast<uint32_t>(zero[gi * n + c * 8 + kOrder[i]]) << (4 * i);
        p.qzeros[gi * (n / 8) + c] = static_cast<int32_t>(word);
      }
    }
  } else {
    // AutoGPTQ: qweight row i packs inputs 8i..8i+7 of each output, input 8i+j at bits 4j;
    // qzeros packs outputs 8c..8c+7 of each group, stored zero - 1 in v1.
    p.qweight.assign((k / 8) * n, 0);
    for (int64_t i = 0; i < k / 8; ++i) {
      for (int64_t r = 0; r < n; ++r) {
        uint32_t word = 0;
        for (int j = 0; j < 8; ++j) word |= static_cast<uint32_t>(q[r * k + i * 8 + j]) << (4 * j);
        p.qweight[i * n + r] = static_cast<int32_t>(word);
      }
    }
    p.qzeros.assign(groups * (n / 8), 0);
    for (int64_t gi = 0; gi < groups; ++gi) {
      for (int64_t c = 0; c < n / 8; ++c) {
        uint32_t word = 0;
        for (int j = 0; j < 8; ++j) {
          word |= static_cast<uint32_t>((zero[gi * n + c * 8 + j] - (s.v1 ? 1 : 0)) & 15)
                  << (4 * j);
        }
        p.qzeros[gi * (n / 8) + c] = static_cast<int32_t>(word);
      }
    }
  }
  return p;
}

// "model.layers.3.self_attn.q_proj" -> "self_attn.q_proj".
std::string InBlock(const std::string& module) {
  const size_t at = module.find("layers.");
  const size_t dot = module.find('.', at + 7);
  return module.substr(dot + 1);
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<float> ToF32(const model::TensorRef& t) {
  std::vector<float> out(t.info->nbytes() / (DTypeBits(t.info->dtype) / 8));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.info->dtype == DType::kBF16 ? Bf16ToFloat(LoadUnaligned<uint16_t>(t.data(), i))
                                           : LoadUnaligned<float>(t.data(), i);
  }
  return out;
}

using Tensors = std::map<std::string, model::TensorToWrite>;
using Edit = std::function<void(Tensors&, Json&)>;

Json GptqConfigJson(const Scheme& s) {
  Json q = Json::MakeObject();
  if (s.awq) {
    q.Set("quant_method", Json::String("awq"));
    q.Set("bits", Json::Int(4));
    q.Set("group_size", Json::Int(s.group));
    q.Set("zero_point", Json::Bool(true));
    q.Set("version", Json::String("gemm"));
    q.Set("backend", Json::String("autoawq"));
    q.Set("modules_to_not_convert", Json::MakeArray());
    return q;
  }
  q.Set("quant_method", Json::String("gptq"));
  q.Set("bits", Json::Int(4));
  q.Set("group_size", Json::Int(s.group));
  q.Set("desc_act", Json::Bool(s.desc_act));
  q.Set("sym", Json::Bool(s.sym));
  q.Set("true_sequential", Json::Bool(true));
  q.Set("damp_percent", Json::Number(0.01));
  q.Set("static_groups", Json::Bool(false));
  q.Set("lm_head", Json::Bool(false));
  q.Set("checkpoint_format", Json::String(s.v1 ? "gptq" : "gptq_v2"));
  q.Set("pack_dtype", Json::String("int32"));
  Json meta = Json::MakeObject();
  meta.Set("quantizer", Json::String("gannet test writer"));
  q.Set("meta", std::move(meta));
  // One exclusion, honoured: layer 0's o_proj stays bf16 (a module not fused with others: the
  // CPU backend fuses q/k/v and gate/up, which must share one format). And an override that
  // changes nothing, to show overrides are read.
  if (s.exclude_one) {
    Json dynamic = Json::MakeObject();
    dynamic.Set("-:.*layers\\.0\\.self_attn\\.o_proj", Json::MakeObject());
    Json mlp = Json::MakeObject();
    mlp.Set("bits", Json::Int(4));
    mlp.Set("sym", Json::Bool(s.sym));
    if (s.mlp_channel) mlp.Set("group_size", Json::Int(-1));
    dynamic.Set("+:.*mlp\\..*", std::move(mlp));
    q.Set("dynamic", std::move(dynamic));
  }
  return q;
}

struct Written {
  int quantized_modules = 0;
};

// Writes `dst` (the GPTQ/AWQ checkpoint) and `ref` (f32 values of what it means) from `src`.
absl::StatusOr<Written> WriteCheckpoints(const std::string& src, const Scheme& s,
                                         const std::string& dst, const std::string& ref,
                                         const Edit& edit = nullptr) {
  GANNET_ASSIGN_OR_RETURN(auto ckpt, model::Checkpoint::Open(src, {.text_only = false}));
  Tensors out, plain;
  Json q = GptqConfigJson(s);
  Json not_convert = Json::MakeArray();
  Written written;
  // The module names within a decoder block ("self_attn.q_proj", "experts.0.down_proj") that are
  // quantized and that stay plain (transformers' GPTQ loader takes the first as
  // modules_in_block_to_quantize, one list for every block).
  std::set<std::string> quantized_in_block, plain_in_block;
  auto keep = [&](const std::string& name, const model::TensorRef& t) {
    model::TensorToWrite w{name, t.info->dtype, t.info->shape,
                           std::string(reinterpret_cast<const char*>(t.data()), t.info->nbytes())};
    out[name] = w;
    plain[name] = w;
  };
  // One [n, k] module: quantized if its shape allows, else plain bf16. Returns its values.
  auto module = [&](const std::string& name, std::vector<float> w, int64_t n, int64_t k,
                    DType dtype, const void* raw) -> std::vector<float> {
    Scheme ms = s;
    if (s.mlp_channel && name.find(".mlp.") != std::string::npos) ms.group = -1;
    const int64_t g = ms.group == -1 ? k : ms.group;
    const bool excluded =
        !s.awq && s.exclude_one && name.find("layers.0.self_attn.o_proj") != std::string::npos;
    if (excluded || n % 8 != 0 || k % 8 != 0 || k % g != 0) {
      const size_t bytes = static_cast<size_t>(n * k) * DTypeBits(dtype) / 8;
      out[name + ".weight"] = {
          name + ".weight", dtype, {n, k}, std::string(static_cast<const char*>(raw), bytes)};
      if (s.awq) not_convert.Push(Json::String(name));
      plain_in_block.insert(InBlock(name));
      return w;
    }
    quantized_in_block.insert(InBlock(name));
    Packed p = QuantizeModule(ms, name, w, n, k);
    const int64_t groups = k / g;
    if (s.awq) {
      out[name + ".qweight"] = {name + ".qweight", DType::kI32, {k, n / 8}, Bytes(p.qweight)};
    } else {
      out[name + ".qweight"] = {name + ".qweight", DType::kI32, {k / 8, n}, Bytes(p.qweight)};
      out[name + ".g_idx"] = {name + ".g_idx", DType::kI32, {k}, Bytes(p.g_idx)};
    }
    out[name + ".qzeros"] = {name + ".qzeros", DType::kI32, {groups, n / 8}, Bytes(p.qzeros)};
    out[name + ".scales"] = {name + ".scales", DType::kF16, {groups, n}, Bytes(p.scales)};
    ++written.quantized_modules;
    return p.values;
  };
  for (const std::string& name : ckpt->Names()) {
    const model::TensorRef& t = *ckpt->Find(name);
    const auto& shape = t.info->shape;
    // Decoder layers of the text model: "model.layers." (gemma4_text) or
    // "model.language_model.layers." (the multimodal wrapper), not the vision tower's.
    const bool text_layer = name.rfind("model.layers.", 0) == 0 ||
                            name.find("language_model.layers.") != std::string::npos;
    const size_t esize = DTypeBits(t.info->dtype) / 8;
    if (text_layer && shape.size() == 3 && name.find(".experts.") != std::string::npos) {
      // Fused experts [E, R, k]: per-expert modules, as GPTQModel writes Gemma-4's experts.
      const bool gate_up = name.find("gate_up_proj") != std::string::npos;
      const std::string base = name.substr(0, name.rfind('.') + 1);  // "...experts."
      const int64_t E = shape[0], R = shape[1], k = shape[2];
      const std::vector<float> all = ToF32(t);
      std::vector<float> fused;
      for (int64_t e = 0; e < E; ++e) {
        const int64_t parts = gate_up ? 2 : 1, n = R / parts;
        for (int64_t part = 0; part < parts; ++part) {
          const std::string mod = fmt::format(
              "{}{}.{}", base, e, gate_up ? (part == 0 ? "gate_proj" : "up_proj") : "down_proj");
          const int64_t off = (e * R + part * n) * k;
          std::vector<float> w(all.begin() + off, all.begin() + off + n * k);
          std::vector<float> v = module(mod, w, n, k, t.info->dtype,
                                        reinterpret_cast<const char*>(t.data()) + off * esize);
          fused.insert(fused.end(), v.begin(), v.end());
        }
      }
      plain[name] = {name, DType::kF32, shape, Bytes(fused)};
    } else if (text_layer && shape.size() == 2 && name.size() > 7 &&
               name.substr(name.size() - 7) == ".weight") {
      const std::string mod = name.substr(0, name.size() - 7);
      std::vector<float> v = module(mod, ToF32(t), shape[0], shape[1], t.info->dtype, t.data());
      plain[name] = {name, DType::kF32, shape, Bytes(v)};
    } else {
      keep(name, t);
    }
  }
  if (s.awq) q.Set("modules_to_not_convert", std::move(not_convert));
  if (!s.awq && !s.exclude_one) {
    for (const std::string& m : quantized_in_block) {
      if (plain_in_block.count(m)) {
        return InvalidArgumentError("'{}' is quantized in some blocks and not in others", m);
      }
    }
    Json names = Json::MakeArray();
    for (const std::string& m : quantized_in_block) names.Push(Json::String(m));
    Json lists = Json::MakeArray();
    lists.Push(std::move(names));
    q.Set("modules_in_block_to_quantize", std::move(lists));
  }
  if (edit) edit(out, q);
  GANNET_ASSIGN_OR_RETURN(std::string config_text,
                          ReadFileToString(src + "/config.json", 1 << 20, "config.json"));
  GANNET_ASSIGN_OR_RETURN(Json config, Json::Parse(config_text));
  for (const std::string& dir : {dst, ref}) {
    fs::create_directories(dir);
    Json c = config;
    if (dir == dst) c.Set("quantization_config", q);
    GANNET_RETURN_IF_ERROR(WriteStringToFile(dir + "/config.json", c.Dump()));
    std::vector<model::TensorToWrite> list;
    for (auto& [name, w] : dir == dst ? out : plain) list.push_back(w);
    GANNET_RETURN_IF_ERROR(model::WriteSafetensors(dir + "/model.safetensors", list));
  }
  return written;
}

// ---- Loading and running -------------------------------------------------------------------

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

// ---- Export for the HF oracle ------------------------------------------------------------------

// `src` as a text-only gemma4_text checkpoint in `dst` (the text config at the top, tensors
// renamed from model.language_model.* to model.*, the towers left out), so that HF's
// AutoModelForCausalLM builds it as it is.
absl::Status WriteTextOnly(const std::string& src, const std::string& dst) {
  GANNET_ASSIGN_OR_RETURN(auto ckpt, model::Checkpoint::Open(src));
  GANNET_ASSIGN_OR_RETURN(std::string text,
                          ReadFileToString(src + "/config.json", 1 << 20, "config.json"));
  GANNET_ASSIGN_OR_RETURN(Json config, Json::Parse(text));
  if (const Json* tc = config.Find("text_config"); tc != nullptr) {
    Json text_config = *tc;  // copied out before `config` is replaced
    config = std::move(text_config);
  }
  config.Set("model_type", Json::String("gemma4_text"));
  std::vector<model::TensorToWrite> list;
  for (const std::string& name : ckpt->Names()) {
    const model::TensorRef& t = *ckpt->Find(name);
    std::string out = name;
    const std::string wrapped = "model.language_model.";
    if (out.rfind(wrapped, 0) == 0) out = "model." + out.substr(wrapped.size());
    list.push_back({out, t.info->dtype, t.info->shape,
                    std::string(reinterpret_cast<const char*>(t.data()), t.info->nbytes())});
  }
  fs::create_directories(dst);
  GANNET_RETURN_IF_ERROR(WriteStringToFile(dst + "/config.json", config.Dump()));
  return model::WriteSafetensors(dst + "/model.safetensors", list);
}

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
