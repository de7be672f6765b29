#include "examples/cli/request_flags.h"

#include <cstdint>
#include <limits>
#include <sstream>

namespace gannet_cli {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

}  // namespace

std::vector<FlagSpec> CommonFlags() {
  return {
      {"model", 'm', true, false, "DIR", "checkpoint folder (config.json, safetensors, tokenizer.json) or dummy:VARIANT"},
      {"backend", 0, true, false, "NAME", "cpu or cuda (default: cuda when a GPU is usable)"},
      {"device", 0, true, false, "N", "CUDA device ordinal (default 0)"},
      {"tp", 0, true, false, "N", "tensor parallelism: split the model over N devices, 1 to 8 (default 1)", {"tensor-parallel-size"}},
      {"devices", 0, true, false, "IDS", "the devices of --tp, rank 0 first, e.g. 0,1 (default 0 to N-1; at most 8)"},
      {"threads", 0, true, false, "N", "CPU backend threads (default: all cores; at most 1024)"},
      {"ctx-size", 'c', true, false, "N", "longest sequence in tokens (default: min(model, 32768))", {"max-model-len"}},
      {"max-running", 0, true, false, "N", "concurrent sequences (default: what the memory holds, at most 64)"},
      {"kv-memory", 0, true, false, "SIZE", "KV cache memory, e.g. 8G (default: what the device has left)"},
      {"draft", 0, true, false, "DIR", "speculative decoding with this MTP assistant (folder or dummy:VARIANT-assistant)", {"draft-model"}},
      {"spec-tokens", 0, true, false, "N", "drafts per round with --draft, 1 to 8 (default 3)"},
      {"no-spec", 0, false, false, "", "decode this request without drafts (with --draft)"},
      {"max-tokens", 'n', true, false, "N", "tokens to generate (default 128; 0 = until the context is full)", {"n-predict"}},
      {"min-tokens", 0, true, false, "N", "generate at least N tokens before stopping"},
      {"temperature", 't', true, false, "T", "0 = greedy (default), else sample", {"temp"}},
      {"top-k", 0, true, false, "K", "sample from the K most likely tokens (0 = off)"},
      {"top-p", 0, true, false, "P", "nucleus sampling threshold in (0, 1] (0 or 1 = off)"},
      {"min-p", 0, true, false, "P", "drop tokens below P x the top probability"},
      {"repetition-penalty", 0, true, false, "R", "penalise tokens seen in prompt and output", {"repeat-penalty"}},
      {"presence-penalty", 0, true, false, "X", "subtract X from seen output tokens"},
      {"frequency-penalty", 0, true, false, "X", "subtract X per occurrence in the output"},
      {"seed", 0, true, false, "S", "sampling seed: repeatable output (default: random)"},
      {"stop", 0, true, true, "STR", "stop when STR appears (repeatable)"},
      {"stop-id", 0, true, true, "ID", "stop at this token id (repeatable)"},
      {"ignore-eos", 0, false, false, "", "do not stop at <eos>/<turn|>"},
  };
}

bool ParseIds(const std::string& s, std::vector<int32_t>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v = 0;
    if (!ParseInt64(item, 0, kInt32Max, &v)) return false;
    out->push_back(static_cast<int32_t>(v));
  }
  return !out->empty() && s.back() != ',';
}

bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* r,
                      RequestStorage* storage) {
  if (auto m = args.Get("model")) engine->model_dir = *m;
  if (auto b = args.Get("backend")) {
    if (*b != "cpu" && *b != "cuda") args.SetError("option --backend expects cpu or cuda, got '" + *b + "'");
    engine->backend = *b;
  }
  engine->device = static_cast<int32_t>(args.GetInt("device", 0, 0, 1023));
  engine->tensor_parallel_size = static_cast<int32_t>(args.GetInt("tp", 0, 1, 8));
  if (auto d = args.Get("devices")) {
    if (!ParseIds(*d, &engine->device_ids) || engine->device_ids.size() > 8) {
      args.SetError("option --devices expects 1 to 8 comma-separated device ordinals like 0,1, "
                    "got '" + *d + "'");
    }
  }
  engine->threads = static_cast<int32_t>(args.GetInt("threads", 0, 1, 1024));
  engine->max_model_len = static_cast<int32_t>(args.GetInt("ctx-size", 0, 2, kInt32Max));
  engine->max_running = static_cast<int32_t>(args.GetInt("max-running", 0, 1, 65536));
  engine->kv_memory = args.GetBytes("kv-memory", 0);
  if (auto d = args.Get("draft")) engine->draft_dir = *d;
  engine->spec_tokens = static_cast<int32_t>(args.GetInt("spec-tokens", 0, 1, 8));
  if (args.Has("spec-tokens") && engine->draft_dir.empty()) {
    args.SetError("option --spec-tokens needs --draft DIR");
  }
  r->disable_speculation = args.Has("no-spec") ? 1 : 0;
  r->max_tokens = static_cast<int32_t>(args.GetInt("max-tokens", 128, 0, kInt32Max));
  r->min_tokens = static_cast<int32_t>(args.GetInt("min-tokens", 0, 0, kInt32Max));
  r->temperature = static_cast<float>(args.GetDouble("temperature", 0.0, 0.0, 100.0));
  r->top_k = static_cast<int32_t>(args.GetInt("top-k", 0, 0, kInt32Max));
  r->top_p = static_cast<float>(args.GetDouble("top-p", 0.0, 0.0, 1.0));
  r->min_p = static_cast<float>(args.GetDouble("min-p", 0.0, 0.0, 1.0));
  r->repetition_penalty = static_cast<float>(args.GetDouble("repetition-penalty", 0.0, 0.0, 100.0));
  r->presence_penalty = static_cast<float>(args.GetDouble("presence-penalty", 0.0, -100.0, 100.0));
  r->frequency_penalty = static_cast<float>(args.GetDouble("frequency-penalty", 0.0, -100.0, 100.0));
  if (args.Has("seed")) {
    r->seed_mode = GANNET_SEED_FIXED;
    r->seed = args.GetU64("seed", 0);
  } else {
    r->seed_mode = GANNET_SEED_RANDOM;
  }
  storage->stop_strings = args.GetAll("stop");
  for (const std::string& s : storage->stop_strings) storage->stop_string_ptrs.push_back(s.c_str());
  r->stop_strings = storage->stop_string_ptrs.data();
  r->num_stop_strings = storage->stop_string_ptrs.size();
  for (const std::string& s : args.GetAll("stop-id")) {
    int64_t v = 0;
    if (!ParseInt64(s, 0, kInt32Max, &v)) {
      args.SetError("option --stop-id expects a token id in [0, " + std::to_string(kInt32Max) +
                    "], got '" + s + "'");
      break;
    }
    storage->stop_ids.push_back(static_cast<int32_t>(v));
  }
  if (!storage->stop_ids.empty()) {
    r->stop_token_ids = storage->stop_ids.data();
    r->num_stop_token_ids = storage->stop_ids.size();
  }
  r->ignore_default_stop_tokens = args.Has("ignore-eos") ? 1 : 0;
  if (args.error().empty() && engine->model_dir.empty()) {
    args.SetError("no model: pass -m MODEL_DIR");
  }
  return args.error().empty();
}

}  // namespace gannet_cli
