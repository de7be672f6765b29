// Everything the engine loads before it can serve, in order: the model config, tokenizer and
// checkpoint (cheap: headers only), the backend, the limits, a check that the weights fit (on the
// device, and on the host, which reads them; safetensors.h), the weights read into memory,
// the runner (weights and activations), then the KV cache sized from the memory really left
// (kv_sizing.h), its layout shared by the runner's storage and the KV manager. Everything that
// can be checked is checked before the weights load. Used once by Engine::Create.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/common/thread_pool.h"
#include "lib/engine/engine.h"
#include "lib/engine/image_prompt.h"
#include "lib/engine/kv_sizing.h"
#include "lib/kv/kv_manager.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/parallel/step_channel.h"
#include "lib/parallel/tp_worker.h"
#include "lib/runner/model_runner.h"
#include "lib/spec/draft_model.h"
#include "lib/spec/spec_decoder.h"
#include "lib/tokenizer/chat_format.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::engine {

struct LoadedEngineParts {
  model::ModelConfig config;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null without tokenizer.json
  // With a tokenizer: the checkpoint's chat template, or the built-in rendering.
  std::optional<tokenizer::ChatFormat> chat_format;
  std::unique_ptr<model::Checkpoint> checkpoint;  // null for dummy weights
  model::ModelWeights weights;
  std::unique_ptr<backend::Backend> backend;  // rank 0's with tensor parallelism
  // Tensor parallelism: the other ranks' backends, and until the runner takes them the ranks'
  // collectives and what they share.
  int tensor_parallel_size = 1;
  std::vector<std::unique_ptr<backend::Backend>> rank_backends;
  std::vector<std::unique_ptr<backend::Collectives>> tp_collectives;
  std::shared_ptr<void> tp_shared;
  // Multi-process mode: this process's rank, rank 0's channel to the others until the runner
  // takes it, and on ranks other than 0 the worker that serves rank 0 (then nothing below is made).
  int tp_rank = 0;
  std::unique_ptr<parallel::StepChannel> tp_channel;
  std::unique_ptr<parallel::TpWorker> tp_worker;
  std::string backend_fallback;  // why CUDA was not used when the backend was automatic; or ""
  KvSizing kv_sizing;
  std::unique_ptr<runner::StepRunner> runner;  // one device's ModelRunner or a TpRunner
  std::unique_ptr<kv::KvManager> kv;
  VisionPart vision;  // the vision tower on `backend`, or why requests cannot carry images
  // Speculative decoding (null without draft_model_dir), set up by lib/spec/draft_model.h.
  spec::DraftModel draft;
  std::unique_ptr<spec::SpecDecoder> spec;
  // Resolved limits.
  int max_running_seqs = 0;
  int max_step_tokens = 0;
  int max_prefill_tokens_while_decoding = 0;
  int64_t max_model_len = 0;
  int page_size = 0;
  double load_seconds = 0;
};

absl::StatusOr<std::unique_ptr<LoadedEngineParts>> LoadEngineParts(const EngineConfig& config);

}  // namespace gannet::engine
