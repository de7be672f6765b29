// Everything the engine loads before it can serve: the model config, tokenizer, checkpoint and
// weights (or synthetic "dummy" weights), the backend, the KV pools plan and the runner.
// Used once by Engine::Create; kept separate so the loading steps read in order.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/backend/backend.h"
#include "lib/common/thread_pool.h"
#include "lib/engine/engine.h"
#include "lib/kv/kv_manager.h"
#include "lib/kv/kv_pool_plan.h"
#include "lib/model/checkpoint.h"
#include "lib/model/config.h"
#include "lib/model/weights.h"
#include "lib/runner/model_runner.h"
#include "lib/tokenizer/tokenizer.h"

namespace gannet::engine {

struct LoadedEngineParts {
  model::ModelConfig config;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;  // null without tokenizer.json
  std::unique_ptr<model::Checkpoint> checkpoint;    // null for dummy weights
  model::ModelWeights weights;
  std::unique_ptr<ThreadPool> pool;                 // CPU backend threads
  std::unique_ptr<backend::Backend> backend;
  kv::KvPoolPlan kv_plan;
  std::unique_ptr<runner::ModelRunner> runner;
  std::unique_ptr<kv::KvManager> kv;
  // Resolved limits.
  int max_running_seqs = 0;
  int max_step_tokens = 0;
  int64_t max_model_len = 0;
  int page_size = 0;
};

absl::StatusOr<std::unique_ptr<LoadedEngineParts>> LoadEngineParts(const EngineConfig& config);

}  // namespace gannet::engine
