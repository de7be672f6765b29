#include "lib/quant/awq.h"

#include <algorithm>
#include <cstring>

#include "fmt/format.h"
#include "lib/common/status.h"

namespace gannet::quant {
namespace {

constexpr std::string_view kExpected =
    "gannet loads AWQ int4 checkpoints in AutoAWQ's 'gemm' packing (bits 4, zero_point true, "
    "group_size 32/64/128)";

std::string Where(std::string_view source, std::string_view key) {
  return fmt::format("{}: quantization_config.{}", source, key);
}

bool IsAbsent(const Json* v) { return v == nullptr || v->is_null(); }

}  // namespace

absl::StatusOr<GptqConfig> ParseAwqConfig(const Json& q, std::string_view source) {
  if (!q.is_object()) {
    return InvalidArgumentError("{}: quantization_config is {}, expected an object", source,
                                Json::TypeName(q.type()));
  }
  // transformers' AwqConfig adds runtime options (fusing, backend, exllama) that do not change
  // what the tensors mean; GPTQModel's AWQ configs carry its common fields (method, format,
  // checkpoint_format, pack_dtype, desc_act, lm_head, dynamic, activation, rotation, meta),
  // checked below.
  static constexpr std::string_view kKnown[] = {"quant_method",
                                                "bits",
                                                "w_bit",
                                                "group_size",
                                                "q_group_size",
                                                "zero_point",
                                                "version",
                                                "modules_to_not_convert",
                                                "backend",
                                                "do_fuse",
                                                "fuse_max_seq_len",
                                                "modules_to_fuse",
                                                "exllama_config",
                                                "method",
                                                "format",
                                                "checkpoint_format",
                                                "pack_dtype",
                                                "desc_act",
                                                "lm_head",
                                                "dynamic",
                                                "activation",
                                                "rotation",
                                                "meta"};
  for (const auto& [key, value] : q.AsMembers()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return UnimplementedError("{}: unknown field; {}", Where(source, key), kExpected);
    }
  }
  GptqConfig out;
  out.method = ZpInt4Method::kAwq;
  out.v1_zeros = false;
  // AutoAWQ's own quant_config spells the fields w_bit / q_group_size.
  const char* bits_key = q.Find("w_bit") != nullptr ? "w_bit" : "bits";
  const Json* bits = q.Find(bits_key);
  if (bits == nullptr || !bits->is_int()) {
    return InvalidArgumentError("{}: missing or not an integer (expected 4)",
                                Where(source, bits_key));
  }
  if (bits->AsInt() != 4) {
    return UnimplementedError("{}: {}-bit weights are not supported (expected 4); {}",
                              Where(source, bits_key), bits->AsInt(), kExpected);
  }
  const char* group_key = q.Find("q_group_size") != nullptr ? "q_group_size" : "group_size";
  const Json* group = q.Find(group_key);
  if (group == nullptr || !group->is_int()) {
    return InvalidArgumentError("{}: missing or not an integer (expected 32, 64 or 128)",
                                Where(source, group_key));
  }
  if (group->AsInt() != 32 && group->AsInt() != 64 && group->AsInt() != 128) {
    return UnimplementedError("{}: {} is not supported (expected 32, 64 or 128); {}",
                              Where(source, group_key), group->AsInt(), kExpected);
  }
  out.base.group_size = static_cast<int>(group->AsInt());
  out.base.desc_act = false;
  out.base.sym = false;
  const Json* zp = q.Find("zero_point");
  if (!IsAbsent(zp)) {
    if (!zp->is_bool()) {
      return InvalidArgumentError("{}: expected true or false", Where(source, "zero_point"));
    }
    if (!zp->AsBool()) {
      return UnimplementedError(
          "{}: symmetric AWQ (zero_point false) is not supported (expected true); {}",
          Where(source, "zero_point"), kExpected);
    }
  }
  const Json* method = q.Find("method");
  if (!IsAbsent(method) && !(method->is_string() && method->AsString() == "awq")) {
    return InvalidArgumentError("{}: expected 'awq' (as quant_method)", Where(source, "method"));
  }
  GANNET_RETURN_IF_ERROR(CheckPackDtype(q, source, kExpected));
  for (const char* key : {"desc_act", "lm_head"}) {
    const Json* v = q.Find(key);
    if (!IsAbsent(v) && !(v->is_bool() && !v->AsBool())) {
      return UnimplementedError("{}: not supported for AWQ (expected false); {}",
                                Where(source, key), kExpected);
    }
  }
  for (const char* key : {"dynamic", "activation", "rotation"}) {
    const Json* v = q.Find(key);
    if (!IsAbsent(v) && !(v->is_object() && v->AsMembers().empty())) {
      return UnimplementedError("{}: not supported for AWQ (expected null); {}", Where(source, key),
                                kExpected);
    }
  }
  const Json* meta = q.Find("meta");
  if (!IsAbsent(meta) && !meta->is_object()) {
    return InvalidArgumentError("{}: expected an object", Where(source, "meta"));
  }
  // GPTQModel names the packing in `format` and `checkpoint_format` as well as `version`.
  for (const char* key : {"version", "format", "checkpoint_format"}) {
    const Json* v = q.Find(key);
    if (IsAbsent(v)) continue;
    if (!v->is_string()) {
      return InvalidArgumentError("{}: expected a string ('gemm')", Where(source, key));
    }
    std::string lower = v->AsString();
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower != "gemm") {
      return UnimplementedError(
          "{}: '{}' packs the weights differently from 'gemm', which is the only AWQ packing "
          "gannet reads; {}",
          Where(source, key), v->AsString(), kExpected);
    }
  }
  GANNET_RETURN_IF_ERROR(ParseModulesToNotConvert(q, source, &out));
  return out;
}

absl::Status AwqToCanonical(const ZpInt4Module& m, const WeightFormat& f, uint8_t* packed,
                            void* scales, uint8_t* zeros) {
  const int64_t n = m.n, k = m.k, groups = k / f.group_size, words = n / 8;
  GANNET_RETURN_IF_ERROR(ScalesToCanonical(m.name, m.scales, f.scale, groups, n, scales));
  auto nibble = [](const void* p, int64_t word, int64_t col) {
    const uint32_t w = LoadUnaligned<uint32_t>(p, word);
    return static_cast<uint8_t>((w >> (4 * kAwqNibbleOfColumn[col % 8])) & 15u);
  };
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < groups; ++g)
      zeros[r * groups + g] = nibble(m.qzeros, g * words + r / 8, r);
  }
  // Blocks of 8 inputs x 8 outputs: the 8 words (k0..k0+7, c) become 4 canonical bytes of each
  // of the rows 8c..8c+7 (input k0 + t in nibble t; the loader checked k % 8 == 0).
  for (int64_t k0 = 0; k0 < k; k0 += 8) {
    for (int64_t c = 0; c < words; ++c) {
      uint32_t w[8];
      for (int t = 0; t < 8; ++t) w[t] = LoadUnaligned<uint32_t>(m.qweight, (k0 + t) * words + c);
      for (int j = 0; j < 8; ++j) {
        const int shift = 4 * kAwqNibbleOfColumn[j];
        uint32_t out = 0;
        for (int t = 0; t < 8; ++t) out |= ((w[t] >> shift) & 15u) << (4 * t);
        std::memcpy(packed + (c * 8 + j) * (k / 2) + k0 / 2, &out, 4);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace gannet::quant
