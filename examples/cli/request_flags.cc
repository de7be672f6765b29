#include "examples/cli/request_flags.h"

namespace gannet_cli {

std::vector<FlagSpec> CommonFlags() {
  return {
      {"model", 'm', true, false, "DIR", "checkpoint folder (config.json, safetensors, tokenizer.json)"},
      {"backend", 0, true, false, "NAME", "cpu or cuda (default: cuda when a GPU is usable)"},
      {"threads", 0, true, false, "N", "CPU backend threads (default: all cores)"},
      {"max-model-len", 0, true, false, "N", "longest sequence in tokens"},
      {"max-tokens", 'n', true, false, "N", "tokens to generate (default 128)"},
      {"min-tokens", 0, true, false, "N", "generate at least N tokens before stopping"},
      {"temperature", 't', true, false, "T", "0 = greedy (default), else sample"},
      {"top-k", 0, true, false, "K", "sample from the K most likely tokens"},
      {"top-p", 0, true, false, "P", "nucleus sampling threshold (0, 1]"},
      {"min-p", 0, true, false, "P", "drop tokens below P x the top probability"},
      {"repetition-penalty", 0, true, false, "R", "penalise tokens seen in prompt and output"},
      {"presence-penalty", 0, true, false, "X", "subtract X from seen output tokens"},
      {"frequency-penalty", 0, true, false, "X", "subtract X per occurrence in the output"},
      {"seed", 0, true, false, "S", "sampling seed (same seed, same output)"},
      {"stop", 0, true, true, "STR", "stop when STR appears (repeatable)"},
      {"stop-id", 0, true, true, "ID", "stop at this token id (repeatable)"},
      {"ignore-eos", 0, false, false, "", "do not stop at <eos>/<turn|>"},
  };
}

bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* r,
                      RequestStorage* storage) {
  if (auto m = args.Get("model")) engine->model_dir = *m;
  if (auto b = args.Get("backend")) engine->backend = *b;
  engine->threads = args.GetInt("threads", 0);
  engine->max_model_len = args.GetInt("max-model-len", 0);
  r->max_tokens = args.GetInt("max-tokens", 128);
  r->min_tokens = args.GetInt("min-tokens", 0);
  r->sampling.temperature = static_cast<float>(args.GetDouble("temperature", 0.0));
  r->sampling.top_k = args.GetInt("top-k", 0);
  r->sampling.top_p = static_cast<float>(args.GetDouble("top-p", 0.0));
  r->sampling.min_p = static_cast<float>(args.GetDouble("min-p", 0.0));
  r->sampling.repetition_penalty = static_cast<float>(args.GetDouble("repetition-penalty", 0.0));
  r->sampling.presence_penalty = static_cast<float>(args.GetDouble("presence-penalty", 0.0));
  r->sampling.frequency_penalty = static_cast<float>(args.GetDouble("frequency-penalty", 0.0));
  if (args.Has("seed")) {
    r->sampling.has_seed = 1;
    r->sampling.seed = args.GetU64("seed", 0);
  }
  storage->stop_strings = args.GetAll("stop");
  for (const std::string& s : storage->stop_strings) storage->stop_string_ptrs.push_back(s.c_str());
  r->stop_strings = storage->stop_string_ptrs.data();
  r->num_stop_strings = storage->stop_string_ptrs.size();
  for (const std::string& s : args.GetAll("stop-id")) {
    char* end = nullptr;
    long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end) return false;
    storage->stop_ids.push_back(static_cast<int32_t>(v));
  }
  if (!storage->stop_ids.empty()) {
    r->stop_token_ids = storage->stop_ids.data();
    r->num_stop_token_ids = storage->stop_ids.size();
  }
  r->ignore_default_stop_tokens = args.Has("ignore-eos") ? 1 : 0;
  return args.error().empty();
}

}  // namespace gannet_cli
