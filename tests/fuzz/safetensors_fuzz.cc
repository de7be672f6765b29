// Fuzz target: the safetensors reader and weight binding (lib/model/safetensors.h, checkpoint.h,
// weights.h): what `gannet info` and every engine load run on a checkpoint's bytes.
//
// Input: the bytes of a model.safetensors file, u64 little-endian header length N, N bytes of JSON
// header, then the data buffer. The seeds (corpus/safetensors_fuzz, from make_corpus.py) are the
// headers of the tiny checkpoints of tests/data/tiny plus a few data bytes: the tensors themselves
// are megabytes and nothing here reads them.
//
//  1. ParseSafetensorsHeader on the header against the data bytes actually present: every check
//     of the header (JSON, dtypes, shapes, overflow, offsets, tiling) on the real buffer length.
//  2. The same bytes as the model.safetensors of a checkpoint folder, the data buffer extended with
//     zeros (a sparse file) up to the largest data_offsets end the header names, at most 1 GiB:
//     Checkpoint::Open (mmap, header-length checks, tower-tensor skipping, the name index) and,
//     when it opens, BindWeights against the config of every tiny checkpoint. So a truncated seed
//     still reaches the binder, and a mutated name, shape or dtype reaches its checks.
//
// Expected: statuses only. Properties checked: a header that parses in memory also opens from a
// file; the checkpoint indexes every tensor once (kept + skipped = parsed).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/json.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/safetensors.h"
#include "lib/model/weights.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace gannet;

constexpr uint64_t kMaxVirtualDataBytes = uint64_t{1} << 30;

// The configs of the committed tiny checkpoints, loaded once.
const std::vector<model::ModelConfig>& TinyConfigs() {
  static const auto* configs = [] {
    auto* out = new std::vector<model::ModelConfig>();
    for (const char* name : {"31b", "26b-a4b", "e4b", "e2b", "31b-assistant", "26b-a4b-assistant",
                             "e4b-assistant", "e2b-assistant"}) {
      auto c = model::LoadModelConfig(fuzz::DataDir() + "/tiny/" + name);
      if (!c.ok()) fuzz::Fail("cannot load a tiny config", c.status().ToString());
      out->push_back(*std::move(c));
    }
    return out;
  }();
  return *configs;
}

// The largest data_offsets end named by a header's tensor entries (0 if none or not JSON).
uint64_t LargestOffsetEnd(std::string_view header) {
  auto root = Json::Parse(header);
  if (!root.ok() || !root->is_object()) return 0;
  uint64_t end = 0;
  for (const auto& [name, entry] : root->AsMembers()) {
    const Json* offsets = entry.Find("data_offsets");
    if (offsets == nullptr || !offsets->is_array() || offsets->AsArray().size() != 2) continue;
    const Json& e = offsets->AsArray()[1];
    if (e.is_int() && e.AsInt() > 0 && static_cast<uint64_t>(e.AsInt()) > end) end = e.AsInt();
  }
  return end;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  TinyConfigs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const std::string dir = [] {
    std::string d = fuzz::ScratchDir() + "/checkpoint";
    std::filesystem::create_directories(d);
    return d;
  }();

  // 1. In memory, against the real data length.
  uint64_t header_len = 0;
  for (int i = 7; i >= 0 && size >= 8; --i) header_len = (header_len << 8) | data[i];
  bool parsed_in_memory = false;
  size_t num_parsed = 0;
  std::string_view header;
  uint64_t data_len = 0;
  if (size >= 8 && header_len <= size - 8) {
    header = bytes.substr(8, header_len);
    data_len = size - 8 - header_len;
    std::map<std::string, std::string> metadata;
    auto tensors = model::ParseSafetensorsHeader(header, data_len, "fuzz", &metadata);
    if (tensors.ok()) {
      parsed_in_memory = true;
      num_parsed = tensors->size();
      for (const model::TensorInfo& t : *tensors) {
        if (t.end > data_len || t.begin > t.end)
          fuzz::Fail("tensor outside the data buffer", t.name);
      }
    }
  }

  // 2. From a file whose data buffer reaches the largest offset the header names.
  uint64_t file_size = size;
  if (!header.empty()) {
    const uint64_t want = LargestOffsetEnd(header);
    if (want > data_len && want <= kMaxVirtualDataBytes) file_size = 8 + header_len + want;
  }
  fuzz::WriteFile(dir + "/model.safetensors", bytes, file_size);
  auto ckpt = model::Checkpoint::Open(dir);
  if (parsed_in_memory && !ckpt.ok()) {
    fuzz::Fail("a header that parses in memory does not open as a file", ckpt.status().ToString());
  }
  if (!ckpt.ok()) return 0;
  const model::Checkpoint& c = **ckpt;
  if (parsed_in_memory &&
      c.Names().size() + static_cast<size_t>(c.skipped_tensors()) != num_parsed) {
    fuzz::Fail("the checkpoint lost or duplicated tensors");
  }
  (void)c.total_bytes();
  for (const model::ModelConfig& config : TinyConfigs()) {
    auto weights = model::BindWeights(config, c);
    if (!weights.ok()) continue;
    // A bound model has every expected tensor, with the config's shape.
    for (const model::WeightSpec& spec : model::ExpectedWeights(config)) {
      const model::TensorRef* t = c.Find(spec.name);
      if (t == nullptr || t->info->shape != spec.shape)
        fuzz::Fail("bound a wrong tensor", spec.name);
    }
    if (!weights->lm_head_matrix().present()) fuzz::Fail("bound model without an LM head");
  }
  return 0;
}
