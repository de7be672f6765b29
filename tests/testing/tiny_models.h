// Helpers for tests that run the committed tiny checkpoints (tests/data/tiny/<variant>) and their
// HF reference dumps (tests/data/golden/<variant>.safetensors).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/model/checkpoint.h"
#include "lib/model/safetensors.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/kv/kv_layout.h"
#include "lib/runner/model_runner.h"

namespace gannet::testing {

std::string TestDataDir();  // $GANNET_TEST_DATA or the source tree's
std::string TinyModelDir(const std::string& variant);
inline const std::vector<std::string>& TargetVariants() {
  static const std::vector<std::string> v = {"31b", "26b-a4b", "e4b", "e2b"};
  return v;
}

// A loaded tiny model: config, mmapped checkpoint and bound weights (in that lifetime order).
struct LoadedModel {
  model::ModelConfig config;
  std::unique_ptr<model::Checkpoint> checkpoint;
  model::ModelWeights weights;
};
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadTinyModel(const std::string& variant);
// Any model folder (config.json, safetensors), loaded and bound as LoadTinyModel does.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModelFolder(const std::string& dir);
// All-position logits of `ids`, one sequence prefilled as one chunk on `backend` (page size 16).
absl::StatusOr<std::vector<float>> PrefillLogits(const LoadedModel& m, backend::Backend* backend,
                                                 const std::vector<int32_t>& ids);

// Runner options for `max_seqs` sequences of up to `max_len` tokens at the given page size.
runner::RunnerOptions SimpleRunnerOptions(const model::ModelConfig& config, int page_size,
                                          int max_len, int max_seqs, int max_tokens);
// A KV layout whose pools hold `max_seqs` sequences of `max_len` tokens (IdentityPageTable).
// `quant` kFp8E4M3: the FP8 cache (1-byte elements and scales) instead of the backend's type.
// `k_eq_v_single_store`: runner::KvLayersOf's choice for K=V layers.
kv::KvLayout SimpleKvLayout(const model::ModelConfig& config, const backend::Backend& backend,
                            int page_size, int max_len, int max_seqs,
                            kv::KvQuant quant = kv::KvQuant::kNone,
                            bool k_eq_v_single_store = true);
// ModelRunner::Create with those options, then AttachKv(SimpleKvLayout(...)).
absl::StatusOr<std::unique_ptr<runner::ModelRunner>> CreateTinyRunner(
    const model::ModelConfig& config, const model::ModelWeights& weights, backend::Backend* backend,
    const runner::RunnerOptions& options, int max_len, int max_seqs,
    kv::KvQuant quant = kv::KvQuant::kNone, bool k_eq_v_single_store = true);

// A trivial KV layout for tests without a KV manager: sequence s gets pages
// [s * pages_per_seq, (s + 1) * pages_per_seq) in both groups.
std::vector<int32_t> IdentityPageTable(int seq_index, int pages_per_seq);

// Named int64 and f32 tensors of tests/data/golden/<name>.safetensors (ints narrowed to int32).
class GoldenFile {
 public:
  static absl::StatusOr<GoldenFile> Open(const std::string& name);
  absl::Status Ints(const std::string& name, std::vector<int32_t>* out) const;
  absl::Status Floats(const std::string& name, std::vector<float>* out) const;

 private:
  std::string path_;
  std::unique_ptr<model::SafetensorsFile> file_;
};

struct GoldenPrompt {
  std::vector<int32_t> input_ids;
  std::vector<float> logits;  // [n, vocab]
  std::vector<int32_t> greedy;
};
absl::StatusOr<GoldenPrompt> LoadGolden(const std::string& variant, const std::string& prompt);

// HF's drafter steps after a golden prompt (tests/data/golden/<variant>-assistant.safetensors).
struct GoldenDraft {
  int32_t bonus = 0;
  std::vector<float> logits;    // [steps, vocab]; tokens outside the top clusters hold min - 1
  std::vector<float> hidden;    // [steps, backbone hidden]: h_next of each step
  std::vector<int32_t> tokens;  // [steps]
};
absl::StatusOr<GoldenDraft> LoadGoldenDraft(const std::string& variant, const std::string& prompt);

// max over positions of (max_v |a - b|) / (max_v |b|), for [rows, vocab] logits.
double MaxRelativeLogitError(const float* a, const float* b, int rows, int vocab);

}  // namespace gannet::testing
