#include "tests/model/gptq_writer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "fmt/format.h"
#include "lib/common/dtype.h"
#include "lib/common/file_util.h"
#include "lib/common/status.h"
#include "lib/model/checkpoint.h"

namespace gannet::gptq_writer {
namespace {

namespace fs = std::filesystem;

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

std::vector<float> ToF32(const model::TensorRef& t) {
  std::vector<float> out(t.info->nbytes() / (DTypeBits(t.info->dtype) / 8));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = t.info->dtype == DType::kBF16 ? Bf16ToFloat(LoadUnaligned<uint16_t>(t.data(), i))
                                           : LoadUnaligned<float>(t.data(), i);
  }
  return out;
}

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

}  // namespace

absl::StatusOr<Written> WriteCheckpoints(const std::string& src, const Scheme& s,
                                         const std::string& dst, const std::string& ref,
                                         const Edit& edit) {
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
      // transformers' AWQ loader converts every Linear outside modules_to_not_convert (GPTQ's
      // only the modules_in_block_to_quantize): a plain linear outside the decoder blocks, such
      // as E2B/E4B's per_layer_model_projection, must be listed, or HF leaves it uninitialised.
      const bool linear_outside =
          shape.size() == 2 && name.size() > 7 && name.substr(name.size() - 7) == ".weight" &&
          name.find("embed") == std::string::npos && name.find("lm_head") == std::string::npos;
      if (s.awq && linear_outside) not_convert.Push(Json::String(name.substr(0, name.size() - 7)));
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

}  // namespace gannet::gptq_writer
