#include "tests/testing/tiny_models.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "gtest/gtest.h"
#include "lib/common/status.h"
#include "lib/model/safetensors.h"

namespace gannet::testing {

std::string TestDataDir() {
  const char* env = std::getenv("GANNET_TEST_DATA");
  return env ? env : GANNET_SOURCE_DIR "/tests/data";
}

std::string TinyModelDir(const std::string& variant) { return TestDataDir() + "/tiny/" + variant; }

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadTinyModel(const std::string& variant) {
  return LoadModelFolder(TinyModelDir(variant));
}

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModelFolder(const std::string& dir) {
  auto m = std::make_unique<LoadedModel>();
  GANNET_ASSIGN_OR_RETURN(m->config, model::LoadModelConfig(dir));
  GANNET_ASSIGN_OR_RETURN(m->checkpoint, model::Checkpoint::Open(dir));
  GANNET_ASSIGN_OR_RETURN(m->weights, model::BindWeights(m->config, *m->checkpoint));
  return m;
}

runner::RunnerOptions SimpleRunnerOptions(const model::ModelConfig& config, int page_size,
                                          int max_len, int max_seqs, int max_tokens) {
  runner::RunnerOptions o;
  o.max_tokens = max_tokens;
  o.max_seqs = max_seqs;
  o.max_logit_rows = max_tokens;
  o.page_size = page_size;
  o.max_pages_per_seq = (max_len + page_size - 1) / page_size;
  return o;
}

kv::KvLayout SimpleKvLayout(const model::ModelConfig& config, const backend::Backend& backend,
                            int page_size, int max_len, int max_seqs, kv::KvQuant quant,
                            bool k_eq_v_single_store) {
  std::vector<kv::KvLayerGeometry> layers = runner::KvLayersOf(config.text, k_eq_v_single_store);
  const kv::PerGroup<bool> present = kv::KvGroupsPresent(layers);
  const int32_t pages = (max_len + page_size - 1) / page_size * max_seqs;
  auto layout = kv::MakeKvLayout(std::move(layers), page_size, config.text.sliding_window,
                                 kv::KvElementBytes(quant, DTypeBits(backend.kv_dtype()) / 8),
                                 {present[0] ? pages : 0, present[1] ? pages : 0}, quant);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.ok() ? *std::move(layout) : kv::KvLayout{};
}

absl::StatusOr<std::unique_ptr<runner::ModelRunner>> CreateTinyRunner(
    const model::ModelConfig& config, const model::ModelWeights& weights, backend::Backend* backend,
    const runner::RunnerOptions& options, int max_len, int max_seqs, kv::KvQuant quant,
    bool k_eq_v_single_store) {
  GANNET_ASSIGN_OR_RETURN(auto r, runner::ModelRunner::Create(config, weights, backend, options));
  GANNET_RETURN_IF_ERROR(r->AttachKv(SimpleKvLayout(config, *backend, options.page_size, max_len,
                                                    max_seqs, quant, k_eq_v_single_store)));
  return r;
}

absl::StatusOr<std::vector<float>> PrefillLogits(const LoadedModel& m, backend::Backend* backend,
                                                 const std::vector<int32_t>& ids) {
  const int n = static_cast<int>(ids.size());
  GANNET_ASSIGN_OR_RETURN(auto r,
                          CreateTinyRunner(m.config, m.weights, backend,
                                           SimpleRunnerOptions(m.config, 16, n, 1, n), n, 1));
  runner::StepBatch batch;
  runner::SeqStep s;
  const std::vector<int32_t> table = IdentityPageTable(0, (n + 15) / 16);
  s.tokens = ids;
  s.page_table[0] = table;
  s.page_table[1] = table;
  s.logits = runner::SeqStep::Logits::kAll;
  batch.seqs.push_back(s);
  runner::StepResult out;
  GANNET_RETURN_IF_ERROR(r->Forward(batch, &out));
  return out.logits;
}

std::vector<int32_t> IdentityPageTable(int seq_index, int pages_per_seq) {
  std::vector<int32_t> t(pages_per_seq);
  for (int i = 0; i < pages_per_seq; ++i) t[i] = seq_index * pages_per_seq + i;
  return t;
}

absl::StatusOr<GoldenFile> GoldenFile::Open(const std::string& name) {
  GoldenFile g;
  g.path_ = TestDataDir() + "/golden/" + name + ".safetensors";
  GANNET_ASSIGN_OR_RETURN(g.file_, model::SafetensorsFile::Open(g.path_));
  return g;
}

absl::Status GoldenFile::Ints(const std::string& name, std::vector<int32_t>* out) const {
  const model::TensorInfo* t = file_->Find(name);
  if (t == nullptr || t->dtype != DType::kI64) return NotFoundError("{}: no int64 {}", path_, name);
  const int64_t* p = reinterpret_cast<const int64_t*>(file_->Data(*t));
  out->assign(p, p + t->numel());
  return absl::OkStatus();
}

absl::Status GoldenFile::Floats(const std::string& name, std::vector<float>* out) const {
  const model::TensorInfo* t = file_->Find(name);
  if (t == nullptr || t->dtype != DType::kF32) return NotFoundError("{}: no f32 {}", path_, name);
  const float* p = reinterpret_cast<const float*>(file_->Data(*t));
  out->assign(p, p + t->numel());
  return absl::OkStatus();
}

absl::StatusOr<GoldenPrompt> LoadGolden(const std::string& variant, const std::string& prompt) {
  GANNET_ASSIGN_OR_RETURN(GoldenFile file, GoldenFile::Open(variant));
  GoldenPrompt g;
  GANNET_RETURN_IF_ERROR(file.Ints(prompt + ".input_ids", &g.input_ids));
  GANNET_RETURN_IF_ERROR(file.Ints(prompt + ".greedy", &g.greedy));
  GANNET_RETURN_IF_ERROR(file.Floats(prompt + ".logits", &g.logits));
  return g;
}

absl::StatusOr<GoldenDraft> LoadGoldenDraft(const std::string& variant, const std::string& prompt) {
  GANNET_ASSIGN_OR_RETURN(GoldenFile file, GoldenFile::Open(variant + "-assistant"));
  GoldenDraft g;
  std::vector<int32_t> bonus;
  GANNET_RETURN_IF_ERROR(file.Ints(prompt + ".bonus", &bonus));
  if (bonus.size() != 1)
    return DataLossError("{}-assistant: {}.bonus is not one id", variant, prompt);
  g.bonus = bonus[0];
  GANNET_RETURN_IF_ERROR(file.Ints(prompt + ".draft_tokens", &g.tokens));
  GANNET_RETURN_IF_ERROR(file.Floats(prompt + ".draft_logits", &g.logits));
  GANNET_RETURN_IF_ERROR(file.Floats(prompt + ".draft_hidden", &g.hidden));
  return g;
}

double MaxRelativeLogitError(const float* a, const float* b, int rows, int vocab) {
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    double max_ref = 0, max_diff = 0;
    for (int v = 0; v < vocab; ++v) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[r * vocab + v])));
      max_diff =
          std::max(max_diff, std::fabs(static_cast<double>(a[r * vocab + v]) - b[r * vocab + v]));
    }
    worst = std::max(worst, max_ref > 0 ? max_diff / max_ref : max_diff);
  }
  return worst;
}

}  // namespace gannet::testing
