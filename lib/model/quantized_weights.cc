#include "lib/model/quantized_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "lib/common/status.h"
#include "lib/common/thread_pool.h"
#include "lib/model/gptq_weights.h"
#include "lib/model/synthetic.h"
#include "lib/quant/fp8.h"
#include "lib/quant/int4.h"

namespace gannet::model {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The class compressed-tensors would see for a matrix of ExpectedWeights.
std::string_view ClassOf(const WeightSpec& s) {
  if (s.global_slot == &ModelWeights::embed_tokens ||
      s.global_slot == &ModelWeights::embed_tokens_per_layer) {
    return "Embedding";
  }
  return "Linear";
}

struct Ctx {
  const ModelConfig& config;
  const Checkpoint& ckpt;
  std::set<std::string, std::less<>>* bound;
};

bool IsFloat(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

// An FP8 module: `.weight` F8_E4M3 [n, k], `.weight_scale` (the strategy's shape), and
// `.input_scale` exactly when the scheme's activations are static.
absl::StatusOr<WeightPiece> ReadFp8Module(const Ctx& c, const quant::CtScheme& scheme,
                                          const std::string& by, const std::string& module,
                                          int64_t n, int64_t k, WeightFormat* format) {
  const std::string dir = c.ckpt.dir();
  if (c.ckpt.Find(module + ".weight_packed") != nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to FP8 by {} but holds an int4 '{}.weight_packed' "
        "(expected '{}.weight' of dtype F8_E4M3)",
        dir, module, by, module, module);
  }
  const TensorRef* w = c.ckpt.Find(module + ".weight");
  if (w == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to FP8 by {} but tensor '{}.weight' is missing", dir, module,
        by, module);
  }
  if (w->info->dtype != DType::kF8E4M3 || w->info->shape != std::vector<int64_t>{n, k}) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight' is {} [{}], expected F8_E4M3 [{}, {}] (quantized to FP8 by {})",
        dir, module, DTypeName(w->info->dtype), fmt::join(w->info->shape, ", "), n, k, by);
  }
  if (c.ckpt.Find(module + ".weight_zero_point") != nullptr) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_zero_point' in a symmetric FP8 scheme ({}), which stores no zero "
        "points",
        dir, module, by);
  }
  const TensorRef* scale = c.ckpt.Find(module + ".weight_scale");
  if (scale == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to FP8 by {} but tensor '{}.weight_scale' is missing", dir,
        module, by, module);
  }
  const DType st = scale->info->dtype;
  if (!IsFloat(st)) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_scale' has dtype {}, expected BF16, F16 or F32", dir, module,
        DTypeName(st));
  }
  const WeightFormat f = scheme.Format(k, st);
  const std::vector<int64_t>& ss = scale->info->shape;
  bool shape_ok = false;
  std::string want;
  if (scheme.per_channel) {
    shape_ok = ss == std::vector<int64_t>{n, 1} || ss == std::vector<int64_t>{n};
    want = fmt::format("[{}, 1] (one scale per output row)", n);
  } else if (scheme.per_tensor) {
    int64_t elems = 1;
    for (int64_t d : ss) elems *= d;
    shape_ok = ss.size() <= 1 && elems == 1;
    want = "[1] or [] (one scale for the tensor)";
  } else {
    const int64_t br = (n + f.block_rows - 1) / f.block_rows;
    const int64_t bc = (k + f.group_size - 1) / f.group_size;
    shape_ok = ss == std::vector<int64_t>{br, bc};
    want = fmt::format("[{}, {}] (one scale per {}x{} block)", br, bc, f.block_rows, f.group_size);
  }
  if (!shape_ok) {
    return InvalidArgumentError("{}: tensor '{}.weight_scale' has shape [{}], expected {} ({})",
                                dir, module, fmt::join(ss, ", "), want, by);
  }
  const TensorRef* in = c.ckpt.Find(module + ".input_scale");
  WeightPiece p;
  p.module = module;
  p.rows = n;
  p.dtype = DType::kF8E4M3;
  p.data = w->data();
  p.scales = scale->data();
  if (scheme.act == ActivationQuant::kStaticFp8) {
    if (in == nullptr) {
      return InvalidArgumentError(
          "{}: module '{}' has static FP8 activations ({}: input_activations dynamic false) but "
          "tensor '{}.input_scale' is missing",
          dir, module, by, module);
    }
    int64_t elems = 1;
    for (int64_t d : in->info->shape) elems *= d;
    if (!IsFloat(in->info->dtype) || in->info->shape.size() > 1 || elems != 1) {
      return InvalidArgumentError(
          "{}: tensor '{}.input_scale' is {} [{}], expected one BF16, F16 or F32 value", dir,
          module, DTypeName(in->info->dtype), fmt::join(in->info->shape, ", "));
    }
    p.input_scale = in->data();
    p.input_scale_dtype = in->info->dtype;
    c.bound->insert(module + ".input_scale");
  } else if (in != nullptr) {
    return InvalidArgumentError(
        "{}: tensor '{}.input_scale' but {} has no static activation scales (input_activations "
        "are {})",
        dir, module, by, scheme.act == ActivationQuant::kNone ? "null: weight-only" : "dynamic");
  }
  *format = f;
  c.bound->insert(module + ".weight");
  c.bound->insert(module + ".weight_scale");
  return p;
}

// One f32-like scalar tensor `name` ([1] or []) of a module; nullptr with the error in *st.
const TensorRef* Scalar(const Ctx& c, const std::string& name, const std::string& why,
                        absl::Status* st) {
  const TensorRef* t = c.ckpt.Find(name);
  if (t == nullptr) {
    *st = InvalidArgumentError("{}: tensor '{}' is missing ({})", c.ckpt.dir(), name, why);
    return nullptr;
  }
  int64_t elems = 1;
  for (int64_t d : t->info->shape) elems *= d;
  if (!IsFloat(t->info->dtype) || t->info->shape.size() > 1 || elems != 1) {
    *st = InvalidArgumentError("{}: tensor '{}' is {} [{}], expected one F32 (or BF16/F16) value",
                               c.ckpt.dir(), name, DTypeName(t->info->dtype),
                               fmt::join(t->info->shape, ", "));
    return nullptr;
  }
  c.bound->insert(name);
  return t;
}

// An NVFP4 module. compressed-tensors (nvfp4-pack-quantized): weight_packed U8 [n, k/2],
// weight_scale F8_E4M3 [n, k/16], weight_global_scale one value, input_global_scale one value
// exactly with FP4 activations. ModelOpt: `weight` U8 [n, k/2], weight_scale, weight_scale_2 and
// input_scale (its NVFP4 is W4A4).
absl::StatusOr<WeightPiece> ReadNvfp4Module(const Ctx& c, const quant::CtScheme& scheme,
                                            const std::string& by, const std::string& module,
                                            int64_t n, int64_t k, WeightFormat* format) {
  const std::string dir = c.ckpt.dir();
  const bool mo = scheme.modelopt;
  const std::string packed_name = module + (mo ? ".weight" : ".weight_packed");
  const std::string global_name = module + (mo ? ".weight_scale_2" : ".weight_global_scale");
  const std::string input_name = module + (mo ? ".input_scale" : ".input_global_scale");
  const std::string other = module + (mo ? ".weight_packed" : ".weight");
  if (c.ckpt.Find(other) != nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to NVFP4 by {} but holds '{}' (expected '{}', "
        "'.weight_scale', '{}')",
        dir, module, by, other, packed_name, global_name.substr(module.size()));
  }
  if (k % 16 != 0) {
    return UnimplementedError(
        "{}: module '{}' has input width {}, not a multiple of NVFP4's group of 16 ({})", dir,
        module, k, by);
  }
  const TensorRef* packed = c.ckpt.Find(packed_name);
  if (packed == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to NVFP4 by {} but tensor '{}' is missing", dir, module, by,
        packed_name);
  }
  if (packed->info->dtype != DType::kU8 || packed->info->shape != std::vector<int64_t>{n, k / 2}) {
    return InvalidArgumentError(
        "{}: tensor '{}' is {} [{}], expected U8 [{}, {}] (two FP4 values a byte)", dir,
        packed_name, DTypeName(packed->info->dtype), fmt::join(packed->info->shape, ", "), n,
        k / 2);
  }
  const TensorRef* scale = c.ckpt.Find(module + ".weight_scale");
  if (scale == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized to NVFP4 by {} but tensor '{}.weight_scale' is missing", dir,
        module, by, module);
  }
  if (scale->info->dtype != DType::kF8E4M3 ||
      scale->info->shape != std::vector<int64_t>{n, k / 16}) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_scale' is {} [{}], expected F8_E4M3 [{}, {}] (one per 16 inputs)",
        dir, module, DTypeName(scale->info->dtype), fmt::join(scale->info->shape, ", "), n, k / 16);
  }
  for (const char* t : {".weight_zero_point", ".weight_shape"}) {
    if (c.ckpt.Find(module + t) != nullptr) {
      return InvalidArgumentError("{}: tensor '{}{}' does not belong to an NVFP4 module ({})", dir,
                                  module, t, by);
    }
  }
  absl::Status st;
  const TensorRef* global = Scalar(c, global_name, "NVFP4's global scale", &st);
  if (global == nullptr) return st;
  WeightPiece p;
  p.module = module;
  p.rows = n;
  p.dtype = DType::kF4E2M1;
  p.data = packed->data();
  p.scales = scale->data();
  p.global_scale = global->data();
  p.global_scale_dtype = global->info->dtype;
  p.global_multiplies = mo;
  if (scheme.act == ActivationQuant::kDynamicNvfp4) {
    const TensorRef* in = Scalar(c, input_name, "the FP4 activations' global scale", &st);
    if (in == nullptr) return st;
    p.input_scale = in->data();
    p.input_scale_dtype = in->info->dtype;
  } else if (c.ckpt.Find(input_name) != nullptr) {
    return InvalidArgumentError(
        "{}: tensor '{}' but {} quantizes no activations (input_activations null)", dir, input_name,
        by);
  }
  *format = scheme.Format(k, DType::kF8E4M3);
  c.bound->insert(packed_name);
  c.bound->insert(module + ".weight_scale");
  return p;
}

// Module `module` ([n, k]) as a piece: quantized by `scheme` (nullptr: plain). Checks every
// tensor; sets *format (quantized) or *dtype (plain) for the caller to compare across pieces.
absl::StatusOr<WeightPiece> ReadModule(const Ctx& c, const quant::CtScheme* scheme,
                                       const std::string& module, int64_t n, int64_t k,
                                       WeightFormat* format) {
  const std::string dir = c.ckpt.dir();
  const TensorRef* plain = c.ckpt.Find(module + ".weight");
  const TensorRef* packed = c.ckpt.Find(module + ".weight_packed");
  WeightPiece p;
  p.module = module;
  p.rows = n;
  if (scheme == nullptr) {
    if (packed != nullptr) {
      return InvalidArgumentError(
          "{}: tensor '{}.weight_packed' is quantized, but quantization_config does not quantize "
          "module '{}' (no config group targets it, or `ignore` names it)",
          dir, module, module);
    }
    if (plain == nullptr) {
      return InvalidArgumentError("{}: missing tensor '{}.weight' (expected shape [{}, {}])", dir,
                                  module, n, k);
    }
    if (plain->info->shape != std::vector<int64_t>{n, k}) {
      return InvalidArgumentError(
          "{}: tensor '{}.weight' has shape [{}] but the config implies "
          "[{}, {}]",
          dir, module, fmt::join(plain->info->shape, ", "), n, k);
    }
    const DType dt = plain->info->dtype;
    if (!WeightFormatIsLoadable(WeightFormat::Dense(dt))) {
      return UnimplementedError(
          "{}: tensor '{}.weight' has dtype {}; gannet loads BF16, F16 and "
          "F32",
          dir, module, DTypeName(dt));
    }
    p.dtype = dt;
    p.data = plain->data();
    *format = WeightFormat::Dense(dt);
    c.bound->insert(module + ".weight");
    return p;
  }
  const std::string by = fmt::format("quantization_config.config_groups.{}", scheme->name);
  if (scheme->fp8()) return ReadFp8Module(c, *scheme, by, module, n, k, format);
  if (scheme->nvfp4()) return ReadNvfp4Module(c, *scheme, by, module, n, k, format);
  if (plain != nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized by {} but holds a plain '{}.weight' "
        "(expected '{}.weight_packed', '.weight_scale', '.weight_shape')",
        dir, module, by, module, module);
  }
  if (packed == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized by {} but tensor "
        "'{}.weight_packed' is missing",
        dir, module, by, module);
  }
  if (k % 2 != 0) {
    return UnimplementedError(
        "{}: module '{}' has an odd input width {}: int4 rows must fill "
        "whole bytes",
        dir, module, k);
  }
  const int64_t words = (k + 7) / 8;
  if (packed->info->dtype != DType::kI32 || packed->info->shape != std::vector<int64_t>{n, words}) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_packed' is {} [{}], expected I32 [{}, {}] "
        "(int4 weight [{}, {}], 8 per int32)",
        dir, module, DTypeName(packed->info->dtype), fmt::join(packed->info->shape, ", "), n, words,
        n, k);
  }
  const TensorRef* shape = c.ckpt.Find(module + ".weight_shape");
  if (shape == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized by {} but tensor '{}.weight_shape' "
        "is missing",
        dir, module, by, module);
  }
  if ((shape->info->dtype != DType::kI64 && shape->info->dtype != DType::kI32) ||
      shape->info->shape != std::vector<int64_t>{2}) {
    return InvalidArgumentError("{}: tensor '{}.weight_shape' is {} [{}], expected I64 [2]", dir,
                                module, DTypeName(shape->info->dtype),
                                fmt::join(shape->info->shape, ", "));
  }
  // weight_shape's values are checked when the data is read (WriteCanonicalInt4): the bytes are
  // not in memory yet while binding.
  const TensorRef* scale = c.ckpt.Find(module + ".weight_scale");
  if (scale == nullptr) {
    return InvalidArgumentError(
        "{}: module '{}' is quantized by {} but tensor '{}.weight_scale' "
        "is missing",
        dir, module, by, module);
  }
  const DType st = scale->info->dtype;
  if (st != DType::kBF16 && st != DType::kF16 && st != DType::kF32) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_scale' has dtype {}, expected BF16, F16 or "
        "F32",
        dir, module, DTypeName(st));
  }
  if (!scheme->per_channel && k % scheme->group_size != 0) {
    return UnimplementedError(
        "{}: module '{}' has input width {}, not a multiple of the group "
        "size {} ({})",
        dir, module, k, scheme->group_size, by);
  }
  const WeightFormat f = scheme->Format(k, st);
  const int64_t groups = k / f.group_size;
  if (scale->info->shape != std::vector<int64_t>{n, groups}) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_scale' has shape [{}], expected [{}, {}] "
        "({})",
        dir, module, fmt::join(scale->info->shape, ", "), n, groups,
        scheme->per_channel ? "one scale per output row"
                            : fmt::format("one per {} inputs", f.group_size));
  }
  const TensorRef* zp = c.ckpt.Find(module + ".weight_zero_point");
  if (scheme->symmetric && zp != nullptr) {
    return InvalidArgumentError(
        "{}: tensor '{}.weight_zero_point' in a symmetric scheme ({} has "
        "symmetric: true, which stores no zero points)",
        dir, module, by);
  }
  if (!scheme->symmetric) {
    if (zp == nullptr) {
      return InvalidArgumentError(
          "{}: module '{}' is quantized asymmetrically by {} but tensor "
          "'{}.weight_zero_point' is missing",
          dir, module, by, module);
    }
    const std::vector<int64_t> want{(n + 7) / 8, groups};
    if (zp->info->dtype != DType::kI32 || zp->info->shape != want) {
      return InvalidArgumentError(
          "{}: tensor '{}.weight_zero_point' is {} [{}], expected I32 "
          "[{}, {}] (int4 zero points packed 8 per int32 along the rows)",
          dir, module, DTypeName(zp->info->dtype), fmt::join(zp->info->shape, ", "), want[0],
          want[1]);
    }
    p.zero_points = zp->data();
    c.bound->insert(module + ".weight_zero_point");
  }
  p.weight_shape = shape->data();
  p.weight_shape_dtype = shape->info->dtype;
  p.dtype = f.elem;
  p.data = packed->data();
  p.words_per_row = words;
  p.scales = scale->data();
  *format = f;
  for (const char* t : {".weight_packed", ".weight_shape", ".weight_scale"}) {
    c.bound->insert(module + t);
  }
  return p;
}

}  // namespace

bool IsFusedExperts(const WeightSpec& s) {
  return s.layer_slot == &LayerWeights::experts_gate_up ||
         s.layer_slot == &LayerWeights::experts_down;
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ExpertModules(
    const Checkpoint& ckpt, const WeightSpec& s, std::string_view packed_suffix) {
  const bool gate_up = s.layer_slot == &LayerWeights::experts_gate_up;
  const std::string base = s.name.substr(0, s.name.rfind("experts.") + 8);  // "...experts."
  // Each fused tensor on its own: a checkpoint may split one (down_proj) and not the other.
  bool per_expert = false;
  for (std::string_view proj : gate_up ? std::vector<std::string_view>{"gate_proj", "up_proj"}
                                       : std::vector<std::string_view>{"down_proj"}) {
    for (std::string_view t : {std::string_view(".weight"), packed_suffix}) {
      per_expert |= ckpt.Find(fmt::format("{}0.{}{}", base, proj, t)) != nullptr;
    }
  }
  if (!per_expert) {
    if (ckpt.Find(s.name) == nullptr) {
      return InvalidArgumentError(
          "{}: missing tensor '{}' (expected the fused [{}] experts or per-expert '{}{{i}}.{}' "
          "modules)",
          ckpt.dir(), s.name, fmt::join(s.shape, ", "), base,
          gate_up ? "gate_proj / up_proj" : "down_proj");
    }
    return std::vector<std::pair<std::string, int64_t>>{};
  }
  if (ckpt.Find(s.name) != nullptr) {
    return InvalidArgumentError(
        "{}: both the fused '{}' and per-expert '{}{{i}}' modules are present", ckpt.dir(), s.name,
        base);
  }
  const int64_t experts = s.shape[0], rows = s.shape[1];
  std::vector<std::pair<std::string, int64_t>> modules;
  for (int64_t e = 0; e < experts; ++e) {
    if (gate_up) {
      modules.emplace_back(fmt::format("{}{}.gate_proj", base, e), rows / 2);
      modules.emplace_back(fmt::format("{}{}.up_proj", base, e), rows / 2);
    } else {
      modules.emplace_back(fmt::format("{}{}.down_proj", base, e), rows);
    }
  }
  return modules;
}

absl::StatusOr<WeightView> GatherModules(const Checkpoint& ckpt, const WeightSpec& s,
                                         std::vector<WeightPiece> pieces,
                                         const std::vector<WeightFormat>& formats) {
  for (size_t i = 1; i < pieces.size(); ++i) {
    // Per-channel formats differ only by width, which pieces of one weight share.
    if (!(formats[i] == formats[0])) {
      return UnimplementedError(
          "{}: '{}' is gathered from modules of different formats: '{}' is {}, '{}' is {}",
          ckpt.dir(), s.name, pieces[0].module, WeightFormatName(formats[0]), pieces[i].module,
          WeightFormatName(formats[i]));
    }
  }
  WeightView v;
  v.name = s.name;
  v.shape = s.shape;
  v.format = formats[0].quantized() ? formats[0] : WeightFormat{};
  v.dtype = formats[0].quantized() ? formats[0].elem : pieces[0].dtype;
  v.pieces = std::move(pieces);
  return v;
}

absl::StatusOr<std::optional<WeightView>> BindCompressedTensors(
    const ModelConfig& config, const Checkpoint& ckpt, const WeightSpec& s,
    std::set<std::string, std::less<>>* bound) {
  if (s.is_index || s.shape.size() < 2) return std::nullopt;  // vectors are never quantized
  const quant::CtConfig& ct = *config.compressed_tensors;
  Ctx c{config, ckpt, bound};
  if (IsFusedExperts(s)) {
    GANNET_ASSIGN_OR_RETURN(const auto modules, ExpertModules(ckpt, s, ".weight_packed"));
    if (modules.empty()) return std::nullopt;  // the fused 3-D parameter, plain
    std::vector<WeightPiece> pieces;
    std::vector<WeightFormat> formats;
    for (const auto& [module, n] : modules) {
      WeightFormat f;
      GANNET_ASSIGN_OR_RETURN(WeightPiece p, ReadModule(c, quant::CtSchemeFor(ct, module, "Linear"),
                                                        module, n, s.shape[2], &f));
      pieces.push_back(std::move(p));
      formats.push_back(f);
    }
    return GatherModules(ckpt, s, std::move(pieces), formats);
  }
  if (s.shape.size() != 2 || !EndsWith(s.name, ".weight")) return std::nullopt;
  const std::string module = s.name.substr(0, s.name.size() - 7);
  const quant::CtScheme* scheme = quant::CtSchemeFor(ct, module, ClassOf(s));
  if (scheme == nullptr && ckpt.Find(module + ".weight_packed") == nullptr) return std::nullopt;
  WeightFormat f;
  GANNET_ASSIGN_OR_RETURN(WeightPiece p, ReadModule(c, scheme, module, s.shape[0], s.shape[1], &f));
  std::vector<WeightPiece> pieces;
  pieces.push_back(std::move(p));
  GANNET_ASSIGN_OR_RETURN(WeightView v, GatherModules(ckpt, s, std::move(pieces), {f}));
  return v;
}

absl::Status WriteCanonicalInt4(const WeightView& v, uint8_t* packed, void* scales, uint8_t* zeros,
                                int32_t* perms, int32_t* perm_index, int32_t first_perm) {
  if (v.quantize_at_load()) {
    // QuantizeAtLoad's views: the dense values (synthetic, or the checkpoint's), quantized as
    // `gannet quantize` does (round to nearest). ~5 ns an element on one thread: rows are
    // independent, so the host's cores share them (the bytes do not depend on it).
    const int64_t k = v.shape.back(), rows = v.numel() / k;
    const int64_t groups = k / v.format.group_size;
    const int64_t scale_bytes = DTypeBits(v.format.scale) / 8;
    const int64_t row_bytes = k * DTypeBits(v.dtype) / 8;
    auto quantize = [&](int64_t r0, int64_t r1) {
      std::vector<uint16_t> bf16(static_cast<size_t>(k));
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t r = r0; r < r1; ++r) {
        if (v.synthetic) {
          FillSyntheticBf16(v.name, v.init, k, v.seed, r * k, k, bf16.data());
          for (int64_t i = 0; i < k; ++i) row[i] = Bf16ToFloat(bf16[i]);
        } else {
          ElementsToF32(static_cast<const char*>(v.data) + r * row_bytes, v.dtype, k, row.data());
        }
        quant::QuantizeInt4Rows(v.format, row.data(), 1, k, packed + r * (k / 2),
                                static_cast<char*>(scales) + r * groups * scale_bytes,
                                zeros != nullptr ? zeros + r * groups : nullptr);
      }
    };
    // Chunks of at least 64k elements on the process's pool.
    DefaultThreadPool().ParallelFor(rows, std::max<int64_t>(1, 65536 / k), quantize);
    return absl::OkStatus();
  }
  if (!v.quantized() || v.pieces.empty()) {
    return InvalidArgumentError("'{}' is not a quantized checkpoint weight", v.name);
  }
  if (v.pieces[0].packing != WeightPiece::Packing::kCompressedTensors) {
    return WriteCanonicalZpInt4(v, packed, scales, zeros, perms, perm_index, first_perm);
  }
  const WeightFormat& f = v.format;
  const int64_t k = v.shape.back();
  const int64_t groups = k / f.group_size;
  const size_t scale_elem = static_cast<size_t>(DTypeBits(f.scale) / 8);
  int64_t row = 0;
  for (const WeightPiece& p : v.pieces) {
    // weight_shape, read now that the bytes are in memory: it must agree with the config.
    int64_t dims[2];
    for (int i = 0; i < 2; ++i) {
      dims[i] = p.weight_shape_dtype == DType::kI64 ? LoadUnaligned<int64_t>(p.weight_shape, i)
                                                    : LoadUnaligned<int32_t>(p.weight_shape, i);
    }
    if (dims[0] != p.rows || dims[1] != k) {
      return InvalidArgumentError("'{}.weight_shape' is [{}, {}] but the config implies [{}, {}]",
                                  p.module, dims[0], dims[1], p.rows, k);
    }
    for (int64_t i = 0; i < p.rows * groups; ++i) {
      const float sc = quant::ScaleToF32(p.scales, f.scale, i);
      if (!std::isfinite(sc)) {
        return DataLossError("'{}.weight_scale' element {} is {} (scales must be finite)", p.module,
                             i, sc);
      }
    }
    quant::CtWordsToCanonical(static_cast<const uint8_t*>(p.data), p.rows, p.words_per_row, k,
                              f.elem == DType::kI4, packed + row * (k / 2));
    std::memcpy(static_cast<char*>(scales) + row * groups * scale_elem, p.scales,
                static_cast<size_t>(p.rows * groups) * scale_elem);
    if (f.zero_point) {
      quant::CtZeroPointsToCanonical(static_cast<const uint8_t*>(p.zero_points), p.rows, groups,
                                     zeros + row * groups);
    }
    row += p.rows;
  }
  return absl::OkStatus();
}

absl::Status WriteCanonicalFp8(const WeightView& v, uint8_t* elems, float* scales,
                               float* input_scales) {
  if (!v.quantized() || v.pieces.empty() || v.format.elem != DType::kF8E4M3) {
    return InvalidArgumentError("'{}' is not an FP8 checkpoint weight", v.name);
  }
  const WeightFormat& f = v.format;
  const WeightFormat mem = quant::Fp8InMemoryFormat(f);
  const int64_t k = v.shape.back();
  const int64_t per_row = quant::Fp8ScalesPerRow(mem, k);
  int64_t row = 0;
  for (const WeightPiece& p : v.pieces) {
    const auto* src = static_cast<const uint8_t*>(p.data);
    for (int64_t i = 0; i < p.rows * k; ++i) {
      if ((src[i] & 0x7F) == 0x7F) {
        return DataLossError("'{}.weight' element {} is NaN (FP8 E4M3 0x{:02x})", p.module, i,
                             src[i]);
      }
    }
    std::memcpy(elems + row * k, src, static_cast<size_t>(p.rows * k));
    // The stored scales: [rows] / [1] / [ceil(rows/br), ceil(k/bc)].
    const int64_t stored = f.granularity == ScaleGranularity::kChannel ? p.rows
                           : f.granularity == ScaleGranularity::kTensor
                               ? 1
                               : ((p.rows + f.block_rows - 1) / f.block_rows) * per_row;
    for (int64_t i = 0; i < stored; ++i) {
      const float sc = quant::ScaleToF32(p.scales, f.scale, i);
      if (!std::isfinite(sc)) {
        return DataLossError("'{}.weight_scale' element {} is {} (scales must be finite)", p.module,
                             i, sc);
      }
    }
    for (int64_t r = 0; r < p.rows; ++r) {
      float* out = scales + (row + r) * per_row;
      if (f.granularity == ScaleGranularity::kBlock) {
        for (int64_t j = 0; j < per_row; ++j) {
          out[j] = quant::ScaleToF32(p.scales, f.scale, (r / f.block_rows) * per_row + j);
        }
      } else {
        out[0] = quant::ScaleToF32(p.scales, f.scale,
                                   f.granularity == ScaleGranularity::kChannel ? r : 0);
      }
    }
    if (f.act == ActivationQuant::kStaticFp8) {
      const float in = quant::ScaleToF32(p.input_scale, p.input_scale_dtype, 0);
      if (!std::isfinite(in) || !(in > 0.f)) {
        return DataLossError("'{}.input_scale' is {} (expected a finite positive scale)", p.module,
                             in);
      }
      for (int64_t r = 0; r < p.rows; ++r) input_scales[row + r] = in;
    }
    row += p.rows;
  }
  return absl::OkStatus();
}

absl::Status WriteCanonicalNvfp4(const WeightView& v, uint8_t* packed, uint8_t* scales,
                                 float* globals, float* input_globals) {
  if (!v.quantized() || v.pieces.empty() || v.format.elem != DType::kF4E2M1) {
    return InvalidArgumentError("'{}' is not an NVFP4 checkpoint weight", v.name);
  }
  const int64_t k = v.shape.back();
  int64_t row = 0;
  for (const WeightPiece& p : v.pieces) {
    const auto* s = static_cast<const uint8_t*>(p.scales);
    for (int64_t i = 0; i < p.rows * (k / 16); ++i) {
      if ((s[i] & 0x7F) == 0x7F) {
        return DataLossError("'{}.weight_scale' element {} is NaN (FP8 E4M3 0x{:02x})", p.module, i,
                             s[i]);
      }
    }
    const char* global_name = p.global_multiplies ? "weight_scale_2" : "weight_global_scale";
    const float stored = quant::ScaleToF32(p.global_scale, p.global_scale_dtype, 0);
    if (!std::isfinite(stored) || !(stored > 0.f)) {
      return DataLossError("'{}.{}' is {} (expected a finite positive scale)", p.module,
                           global_name, stored);
    }
    // In memory the global scale divides, as compressed-tensors' (ModelOpt's multiplies).
    const float g = p.global_multiplies ? 1.0f / stored : stored;
    std::memcpy(packed + row * (k / 2), p.data, static_cast<size_t>(p.rows * (k / 2)));
    std::memcpy(scales + row * (k / 16), s, static_cast<size_t>(p.rows * (k / 16)));
    for (int64_t r = 0; r < p.rows; ++r) globals[row + r] = g;
    if (v.format.act == ActivationQuant::kDynamicNvfp4) {
      const float in = quant::ScaleToF32(p.input_scale, p.input_scale_dtype, 0);
      if (!std::isfinite(in) || !(in > 0.f)) {
        return DataLossError("'{}.{}' is {} (expected a finite positive scale)", p.module,
                             p.global_multiplies ? "input_scale" : "input_global_scale", in);
      }
      for (int64_t r = 0; r < p.rows; ++r) {
        input_globals[row + r] = p.global_multiplies ? 1.0f / in : in;
      }
    }
    row += p.rows;
  }
  return absl::OkStatus();
}

absl::Status WriteGatheredDense(const WeightView& v, DType out_type, void* out) {
  const int64_t k = v.shape.back();
  char* dst = static_cast<char*>(out);
  for (const WeightPiece& p : v.pieces) {
    const int64_t n = p.rows * k;
    if (out_type == p.dtype) {
      const size_t bytes = static_cast<size_t>(n) * DTypeBits(p.dtype) / 8;
      std::memcpy(dst, p.data, bytes);
      dst += bytes;
    } else if (out_type == DType::kF32) {
      ElementsToF32(p.data, p.dtype, n, reinterpret_cast<float*>(dst));
      dst += n * 4;
    } else {
      return InvalidArgumentError("'{}': cannot write {} pieces as {}", v.name, DTypeName(p.dtype),
                                  DTypeName(out_type));
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::model
