#include "tests/testing/dequantized_reference.h"

#include <filesystem>
#include <map>
#include <vector>

#include "lib/common/status.h"
#include "lib/model/checkpoint.h"
#include "lib/model/quantized_weights.h"
#include "lib/model/safetensors.h"
#include "lib/quant/fp8.h"
#include "lib/quant/int4.h"
#include "lib/quant/nvfp4.h"

namespace gannet::testing {

namespace fs = std::filesystem;

absl::Status WriteDequantizedReference(const std::string& src, const LoadedModel& q,
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
    if (v->format.elem == DType::kF4E2M1) {
      const int64_t k = v->shape.back(), rows = v->numel() / k;
      std::vector<uint8_t> packed(static_cast<size_t>(v->numel() / 2)),
          scales(static_cast<size_t>(v->numel() / 16));
      std::vector<float> globals(rows), inputs(rows), values(static_cast<size_t>(v->numel()));
      GANNET_RETURN_IF_ERROR(model::WriteCanonicalNvfp4(*v, packed.data(), scales.data(),
                                                        globals.data(), inputs.data()));
      for (int64_t r = 0; r < rows; ++r) {
        quant::DequantizeNvfp4Row(packed.data() + r * (k / 2), scales.data() + r * (k / 16),
                                  globals[r], k, values.data() + r * k);
      }
      tensors[v->name] = {
          v->name, DType::kF32, v->shape,
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4)};
      continue;
    }
    if (v->format.elem == DType::kF8E4M3) {
      const int64_t k = v->shape.back(), rows = v->numel() / k;
      const WeightFormat mem = quant::Fp8InMemoryFormat(v->format);
      const int64_t per_row = quant::Fp8ScalesPerRow(mem, k);
      std::vector<uint8_t> elems(static_cast<size_t>(v->numel()));
      std::vector<float> scales(static_cast<size_t>(rows * per_row)), inputs(rows);
      GANNET_RETURN_IF_ERROR(
          model::WriteCanonicalFp8(*v, elems.data(), scales.data(), inputs.data()));
      std::vector<float> values(static_cast<size_t>(v->numel()));
      for (int64_t r = 0; r < rows; ++r) {
        quant::DequantizeFp8Row(mem, elems.data() + r * k, scales.data() + r * per_row, k,
                                values.data() + r * k);
      }
      tensors[v->name] = {
          v->name, DType::kF32, v->shape,
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4)};
      continue;
    }
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

}  // namespace gannet::testing
