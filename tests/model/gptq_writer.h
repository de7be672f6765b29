// The GPTQ / AWQ checkpoint writer of tests/model/gptq_test.cc: from a bf16 tiny model, a GPTQ
// or AWQ checkpoint written as the reference tools write one (AutoGPTQ's and AutoAWQ's packing
// loops and round-to-nearest quantizers, from the format as docs/quantized-formats.md section 6
// documents it), independent of the loader's unpacking code, and beside it an f32 checkpoint of
// the values the writer quantized to.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/common/json.h"
#include "lib/model/safetensors.h"

namespace gannet::gptq_writer {

// How to quantize: the method, the group size, GPTQ's desc_act / sym / checkpoint_format.
struct Scheme {
  std::string name;
  bool awq = false;
  int group = 128;  // -1: per channel
  bool desc_act = false;
  bool sym = false;
  bool v1 = true;  // GPTQ checkpoint_format "gptq" (zero points stored minus one)
  // GPTQ: keep layer 0's o_proj bf16 through a `dynamic` "-:" rule (GPTQModel's; the HF oracle
  // export leaves it out, as transformers' GPTQ loader may not read `dynamic`).
  bool exclude_one = true;
  // GPTQ: the `dynamic` override of the mlp modules sets group_size -1 (else it restates the
  // global values).
  bool mlp_channel = false;
};

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

using Tensors = std::map<std::string, model::TensorToWrite>;
using Edit = std::function<void(Tensors&, Json&)>;

struct Written {
  int quantized_modules = 0;
};

// Writes `dst` (the GPTQ/AWQ checkpoint) and `ref` (f32 values of what it means) from `src`;
// `edit` may change the tensors and the quantization_config before they are written.
absl::StatusOr<Written> WriteCheckpoints(const std::string& src, const Scheme& s,
                                         const std::string& dst, const std::string& ref,
                                         const Edit& edit = nullptr);

// `src` as a text-only gemma4_text checkpoint in `dst` (the text config at the top, tensors
// renamed from model.language_model.* to model.*, the towers left out), so that HF's
// AutoModelForCausalLM builds it as it is.
absl::Status WriteTextOnly(const std::string& src, const std::string& dst);

}  // namespace gannet::gptq_writer
