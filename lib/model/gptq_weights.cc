#include "lib/model/gptq_weights.h"

#include <cstring>
#include <span>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "lib/common/status.h"
#include "lib/model/quantized_weights.h"
#include "lib/quant/awq.h"
#include "lib/quant/gptq.h"

namespace gannet::model {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct Ctx {
  const quant::GptqConfig& config;
  const Checkpoint& ckpt;
  std::set<std::string, std::less<>>* bound;
};

std::string Shape(const TensorRef& t) {
  return fmt::format("[{}]", fmt::join(t.info->shape, ", "));
}

absl::Status Expect(const Ctx& c, const TensorRef* t, const std::string& name, DType dtype,
                    std::vector<int64_t> shape, std::string_view meaning) {
  if (t == nullptr) {
    return InvalidArgumentError("{}: module tensor '{}' is missing (expected {} [{}]: {})",
                                c.ckpt.dir(), name, DTypeName(dtype), fmt::join(shape, ", "),
                                meaning);
  }
  if (t->info->dtype != dtype || t->info->shape != shape) {
    return InvalidArgumentError("{}: tensor '{}' is {} {}, expected {} [{}] ({})", c.ckpt.dir(),
                                name, DTypeName(t->info->dtype), Shape(*t), DTypeName(dtype),
                                fmt::join(shape, ", "), meaning);
  }
  return absl::OkStatus();
}

// Module `module` ([n, k]) as a piece, quantized when it holds a qweight. `cls` is the class a
// GPTQ/AWQ writer would see ("Embedding" for the token tables, else "Linear").
absl::StatusOr<WeightPiece> ReadModule(const Ctx& c, const std::string& module, int64_t n,
                                       int64_t k, bool embedding, WeightFormat* format) {
  const std::string dir = c.ckpt.dir();
  const std::string_view method = c.config.MethodName();
  const TensorRef* plain = c.ckpt.Find(module + ".weight");
  const TensorRef* qweight = c.ckpt.Find(module + ".qweight");
  WeightPiece p;
  p.module = module;
  p.rows = n;
  if (qweight == nullptr) {
    for (std::string_view suffix : kZpInt4ModuleTensorSuffixes) {
      if (c.ckpt.Find(module + std::string(suffix)) != nullptr) {
        return InvalidArgumentError(
            "{}: tensor '{}{}' without '{}.qweight' (a {} module holds qweight, qzeros and "
            "scales, a plain one only '{}.weight')",
            dir, module, suffix, module, method, module);
      }
    }
    if (plain == nullptr) {
      return InvalidArgumentError(
          "{}: missing tensor '{}.weight' (expected shape [{}, {}], or a {} module '{}.qweight')",
          dir, module, n, k, method, module);
    }
    if (plain->info->shape != std::vector<int64_t>{n, k}) {
      return InvalidArgumentError(
          "{}: tensor '{}.weight' has shape {} but the config implies [{}, {}]", dir, module,
          Shape(*plain), n, k);
    }
    const DType dt = plain->info->dtype;
    if (!WeightFormatIsLoadable(WeightFormat::Dense(dt))) {
      return UnimplementedError(
          "{}: tensor '{}.weight' has dtype {}; gannet loads BF16, F16 and F32", dir, module,
          DTypeName(dt));
    }
    p.dtype = dt;
    p.data = plain->data();
    *format = WeightFormat::Dense(dt);
    c.bound->insert(module + ".weight");
    return p;
  }
  const std::optional<quant::GptqModuleScheme> scheme = quant::GptqSchemeFor(c.config, module);
  if (!scheme.has_value()) {
    return InvalidArgumentError(
        "{}: module '{}' holds '{}.qweight', but quantization_config keeps it plain "
        "(modules_to_not_convert or a dynamic '-:' pattern names it)",
        dir, module, module);
  }
  if (embedding) {
    return InvalidArgumentError(
        "{}: embedding table '{}' holds a qweight; {} quantizes linear layers only (expected a "
        "plain '{}.weight')",
        dir, module, method, module);
  }
  if (module == "lm_head" && !(c.config.method == quant::ZpInt4Method::kGptq && c.config.lm_head)) {
    return InvalidArgumentError(
        "{}: 'lm_head.qweight' is present but quantization_config's lm_head is not true (expected "
        "a plain 'lm_head.weight')",
        dir);
  }
  if (plain != nullptr) {
    return InvalidArgumentError("{}: module '{}' holds both '{}.qweight' and a plain '{}.weight'",
                                dir, module, module, module);
  }
  const int g = scheme->group_size == -1 ? static_cast<int>(k) : scheme->group_size;
  if (n % 8 != 0 || k % 8 != 0 || k % g != 0) {
    return UnimplementedError(
        "{}: {} module '{}' is [{}, {}]: gannet needs both dimensions a multiple of 8 and the "
        "input width a multiple of the group size {}",
        dir, method, module, n, k, g);
  }
  const int64_t groups = k / g;
  const bool awq = c.config.method == quant::ZpInt4Method::kAwq;
  if (awq) {
    GANNET_RETURN_IF_ERROR(Expect(c, qweight, module + ".qweight", DType::kI32, {k, n / 8},
                                  "int4 weights, 8 outputs per int32 in AWQ's interleaved order"));
  } else {
    GANNET_RETURN_IF_ERROR(Expect(c, qweight, module + ".qweight", DType::kI32, {k / 8, n},
                                  "int4 weights, 8 inputs per int32"));
  }
  const TensorRef* qzeros = c.ckpt.Find(module + ".qzeros");
  GANNET_RETURN_IF_ERROR(Expect(c, qzeros, module + ".qzeros", DType::kI32, {groups, n / 8},
                                fmt::format("int4 zero points, one per {} inputs, 8 outputs per "
                                            "int32",
                                            g)));
  const TensorRef* scales = c.ckpt.Find(module + ".scales");
  if (scales == nullptr) {
    return InvalidArgumentError("{}: module tensor '{}.scales' is missing (expected F16 [{}, {}])",
                                dir, module, groups, n);
  }
  const DType st = scales->info->dtype;
  if ((st != DType::kF16 && st != DType::kBF16 && st != DType::kF32) ||
      scales->info->shape != std::vector<int64_t>{groups, n}) {
    return InvalidArgumentError(
        "{}: tensor '{}.scales' is {} {}, expected F16 (or BF16/F32) [{}, {}] (one scale per {} "
        "inputs of each output)",
        dir, module, DTypeName(st), Shape(*scales), groups, n, g);
  }
  const TensorRef* g_idx = c.ckpt.Find(module + ".g_idx");
  if (awq && g_idx != nullptr) {
    return InvalidArgumentError("{}: tensor '{}.g_idx' in an AWQ checkpoint (AWQ has no g_idx)",
                                dir, module);
  }
  if (!awq) {
    if (g_idx == nullptr && scheme->desc_act) {
      return InvalidArgumentError(
          "{}: module tensor '{}.g_idx' is missing (expected I32 [{}]: desc_act is true, so the "
          "group of each input is stored)",
          dir, module, k);
    }
    if (g_idx != nullptr) {
      GANNET_RETURN_IF_ERROR(
          Expect(c, g_idx, module + ".g_idx", DType::kI32, {k}, "the group of each input"));
      p.g_idx = g_idx->data();
      c.bound->insert(module + ".g_idx");
    }
  }
  const TensorRef* bias = c.ckpt.Find(module + ".bias");
  if (bias != nullptr) {
    const DType bt = bias->info->dtype;
    if ((bt != DType::kF16 && bt != DType::kBF16 && bt != DType::kF32) ||
        bias->info->shape != std::vector<int64_t>{n}) {
      return InvalidArgumentError("{}: tensor '{}.bias' is {} {}, expected F16/BF16/F32 [{}]", dir,
                                  module, DTypeName(bt), Shape(*bias), n);
    }
    p.bias = bias->data();
    p.bias_dtype = bt;
    c.bound->insert(module + ".bias");
  }
  *format = scheme->Format(k, st);
  p.packing = awq                 ? WeightPiece::Packing::kAwq
              : c.config.v1_zeros ? WeightPiece::Packing::kGptqV1
                                  : WeightPiece::Packing::kGptqV2;
  p.dtype = format->elem;
  p.data = qweight->data();
  p.zero_points = qzeros->data();
  p.scales = scales->data();
  for (const char* t : {".qweight", ".qzeros", ".scales"}) c.bound->insert(module + t);
  return p;
}

}  // namespace

absl::StatusOr<std::optional<WeightView>> BindGptq(const ModelConfig& config,
                                                   const Checkpoint& ckpt, const WeightSpec& s,
                                                   std::set<std::string, std::less<>>* bound) {
  if (s.is_index || s.shape.size() < 2) return std::nullopt;  // vectors are never quantized
  Ctx c{*config.gptq, ckpt, bound};
  if (IsFusedExperts(s)) {
    GANNET_ASSIGN_OR_RETURN(const auto modules, ExpertModules(ckpt, s, ".qweight"));
    if (modules.empty()) return std::nullopt;  // the fused 3-D parameter, plain
    std::vector<WeightPiece> pieces;
    std::vector<WeightFormat> formats;
    for (const auto& [module, n] : modules) {
      WeightFormat f;
      GANNET_ASSIGN_OR_RETURN(WeightPiece p, ReadModule(c, module, n, s.shape[2], false, &f));
      pieces.push_back(std::move(p));
      formats.push_back(f);
    }
    return GatherModules(ckpt, s, std::move(pieces), formats);
  }
  if (s.shape.size() != 2 || !EndsWith(s.name, ".weight")) return std::nullopt;
  const std::string module = s.name.substr(0, s.name.size() - 7);
  if (ckpt.Find(module + ".qweight") == nullptr) {
    // Plain: bound as in an unquantized checkpoint, unless stray module tensors show a broken
    // quantized module (ReadModule names them).
    bool stray = false;
    for (std::string_view suffix : kZpInt4ModuleTensorSuffixes) {
      stray |= ckpt.Find(module + std::string(suffix)) != nullptr;
    }
    if (!stray) return std::nullopt;
  }
  const bool embedding = s.global_slot == &ModelWeights::embed_tokens ||
                         s.global_slot == &ModelWeights::embed_tokens_per_layer;
  WeightFormat f;
  GANNET_ASSIGN_OR_RETURN(WeightPiece p,
                          ReadModule(c, module, s.shape[0], s.shape[1], embedding, &f));
  std::vector<WeightPiece> pieces;
  pieces.push_back(std::move(p));
  GANNET_ASSIGN_OR_RETURN(WeightView v, GatherModules(ckpt, s, std::move(pieces), {f}));
  return v;
}

absl::Status WriteCanonicalZpInt4(const WeightView& v, uint8_t* packed, void* scales,
                                  uint8_t* zeros, int32_t* perms, int32_t* perm_index,
                                  int32_t first_perm) {
  const WeightFormat& f = v.format;
  const int64_t k = v.shape.back();
  const int64_t groups = k / f.group_size;
  const size_t scale_elem = static_cast<size_t>(DTypeBits(f.scale) / 8);
  if (f.input_perm && (perms == nullptr || perm_index == nullptr)) {
    return InvalidArgumentError("'{}' is act-ordered (desc_act): its permutations need a place",
                                v.name);
  }
  int64_t row = 0;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    const WeightPiece& p = v.pieces[i];
    if (p.bias != nullptr) {
      GANNET_RETURN_IF_ERROR(quant::CheckZeroBias(p.module, p.bias, p.bias_dtype, p.rows));
    }
    quant::ZpInt4Module m{p.module, p.rows, k, p.data, p.zero_points, p.scales, p.g_idx};
    uint8_t* z = zeros != nullptr ? zeros + row * groups : nullptr;
    void* s = static_cast<char*>(scales) + row * groups * scale_elem;
    uint8_t* out = packed + row * (k / 2);
    if (p.packing == WeightPiece::Packing::kAwq) {
      GANNET_RETURN_IF_ERROR(quant::AwqToCanonical(m, f, out, s, z));
    } else {
      GANNET_RETURN_IF_ERROR(
          quant::GptqToCanonical(m, f, p.packing == WeightPiece::Packing::kGptqV1, out, s, z,
                                 f.input_perm ? perms + static_cast<int64_t>(i) * k : nullptr));
    }
    if (f.input_perm) {
      for (int64_t r = 0; r < p.rows; ++r) {
        perm_index[row + r] = first_perm + static_cast<int32_t>(i);
      }
    }
    row += p.rows;
  }
  return absl::OkStatus();
}

}  // namespace gannet::model
