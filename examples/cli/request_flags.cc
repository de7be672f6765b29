#include "examples/cli/request_flags.h"

#include <fstream>

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

#include "examples/cli/terminal.h"

namespace gannet_cli {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

int UsageError(const char* name, const std::string& error) {
  std::fprintf(stderr, "gannet %s: %s\n(try `gannet %s --help`)\n", name, error.c_str(), name);
  return 2;
}

std::optional<int> StartCommand(const char* name, const char* usage,
                                const std::vector<FlagSpec>& own_flags, int argc, char** argv,
                                CommandStart* start) {
  std::vector<FlagSpec> flags = CommonFlags();
  flags.insert(flags.end(), own_flags.begin(), own_flags.end());
  Args& args = start->args;
  if (!args.Parse(flags, argc, argv, 2)) return UsageError(name, args.error());
  if (args.Has("help")) {
    std::printf("%s%s", usage, FormatFlags(flags).c_str());
    return 0;
  }
  if (!ApplyCommonFlags(args, &start->engine, &start->request, &start->storage)) {
    return UsageError(name, args.error());
  }
  start->engine.quiet = args.Has("quiet");
  return std::nullopt;
}

std::string ImagePlaceholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += "<|image|>";
  return s;
}

std::vector<FlagSpec> CommonFlags() {
  return {
      {"image", 0, true, true, "FILE",
       "an image (PNG, JPEG or WebP) for a model with a vision tower; repeatable. Chat: in the "
       "(first) user message, before its text; plain prompts: one `<|image|>` per image in "
       "the text, or all of them in front when it has none"},
      {"image-tokens", 0, true, false, "N",
       "soft tokens per image: 70, 140, 280 (default), 560 or 1120"},
      {"model", 'm', true, false, "DIR",
       "checkpoint folder (config.json, safetensors, tokenizer.json) or dummy:VARIANT"},
      {"backend", 0, true, false, "NAME", "cpu or cuda (default: cuda when a GPU is usable)"},
      {"device", 0, true, false, "N", "CUDA device ordinal, 0 or CUDA0 (default 0)"},
      {"tp",
       0,
       true,
       false,
       "N",
       "tensor parallelism: split the model over N devices, 1 to 8 (default 1)",
       {"tensor-parallel-size"}},
      {"devices", 0, true, false, "IDS",
       "the devices of --tp, rank 0 first, e.g. 0,1 (default 0 to N-1; at most 8)"},
      {"tp-id", 0, true, false, "HEX",
       "one process per rank: join the --tp group with this id (the 256 hex characters of `gannet "
       "tp-id`); ranks above 0 serve rank 0 instead of generating"},
      {"tp-rank", 0, true, false, "N",
       "this process's rank in the --tp-id group, 0 to --tp - 1 (default 0; rank 0 takes the "
       "prompt)"},
      {"threads", 't', true, false, "N", "CPU backend threads (default: all cores; at most 1024)"},
      {"ctx-size",
       'c',
       true,
       false,
       "N",
       "longest sequence in tokens (default or 0: min(model, 32768))",
       {"max-model-len"}},
      {"max-running", 0, true, false, "N",
       "concurrent sequences (default: what the memory holds, at most 64 per GPU)"},
      {"kv-memory", 0, true, false, "SIZE",
       "KV cache memory, e.g. 8G (default: what the device has left)"},
      {"kv-cache-dtype", 0, true, false, "TYPE",
       "bf16 (default) or fp8: FP8 E4M3 keys and values, about half the KV memory"},
      {"compute-dtype", 0, true, false, "TYPE",
       "auto (default: f16 on V100, else bf16), bf16 or f16: what the GPU computes in"},
      {"weight-dtype", 0, true, false, "TYPE",
       "quantize the linear layers as they load: int4-g32, int4-g64, int4-g128, int4-channel "
       "(each with -asym); default: as the checkpoint stores them"},
      {"kv-separate-k-eq-v", 0, false, false, "",
       "31B/26B-A4B full layers: keep K and V apart (default: one array, K derived from it)"},
      {"startup-warmup", 0, false, false, "",
       "run every step shape once at start: GPU tuning and graph recording before the first "
       "request"},
      {"draft",
       0,
       true,
       false,
       "DIR",
       "speculative decoding with this MTP assistant (folder or dummy:VARIANT-assistant)",
       {"draft-model", "model-draft"},
       {"md"}},
      {"spec-tokens", 0, true, false, "N", "drafts per round with --draft, 1 to 8 (default 3)"},
      {"no-spec", 0, false, false, "", "decode this request without drafts (with --draft)"},
      {"max-tokens",
       'n',
       true,
       false,
       "N",
       "tokens to generate (default 128; 0, -1 or -2 = until the context is full)",
       {"n-predict", "predict"}},
      {"min-tokens", 0, true, false, "N", "generate at least N tokens before stopping"},
      {"temperature", 0, true, false, "T", "0 = greedy (default), else sample", {"temp"}},
      {"top-k", 0, true, false, "K", "sample from the K most likely tokens (0 = off)"},
      {"top-p", 0, true, false, "P", "nucleus sampling threshold in (0, 1] (0 or 1 = off)"},
      {"min-p", 0, true, false, "P", "drop tokens below P x the top probability"},
      {"repetition-penalty",
       0,
       true,
       false,
       "R",
       "penalise tokens seen in prompt and output",
       {"repeat-penalty"}},
      {"presence-penalty", 0, true, false, "X", "subtract X from seen output tokens"},
      {"frequency-penalty", 0, true, false, "X", "subtract X per occurrence in the output"},
      {"seed", 's', true, false, "S", "sampling seed: repeatable output (default or -1: random)"},
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

std::string ParseTpId(const std::string& hex, gannet_tp_id_t* id) {
  constexpr size_t kBytes = sizeof(id->bytes);
  if (hex.size() != 2 * kBytes) {
    return "expects the " + std::to_string(2 * kBytes) + " hex characters that `gannet tp-id` " +
           "prints, got " + std::to_string(hex.size()) + " characters";
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < kBytes; ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      const size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      return "expects hex characters (0-9, a-f), got '" + EscapeForDisplay(hex.substr(at, 1)) +
             "' at position " + std::to_string(at + 1);
    }
    id->bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return "";
}

bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* r,
                      RequestStorage* storage) {
  if (auto m = args.Get("model")) engine->model_dir = *m;
  if (auto b = args.Get("backend")) {
    if (*b != "cpu" && *b != "cuda")
      args.SetError("option --backend expects cpu or cuda, got '" + *b + "'");
    engine->backend = *b;
  }
  if (auto d = args.Get("device"); d && d->rfind("CUDA", 0) == 0) {
    int64_t n = 0;  // llama.cpp names devices CUDA0, CUDA1, ...
    if (ParseInt64(d->substr(4), 0, 1023, &n))
      engine->device = static_cast<int32_t>(n);
    else
      args.SetError("option --device expects a CUDA device ordinal like 0 (or CUDA0), got '" + *d +
                    "'");
  } else {
    engine->device = static_cast<int32_t>(args.GetInt("device", 0, 0, 1023));
  }
  engine->tensor_parallel_size = static_cast<int32_t>(args.GetInt("tp", 0, 1, 8));
  if (auto d = args.Get("devices")) {
    if (!ParseIds(*d, &engine->device_ids) || engine->device_ids.size() > 8) {
      args.SetError(
          "option --devices expects 1 to 8 comma-separated device ordinals like 0,1, "
          "got '" +
          *d + "'");
    }
  }
  engine->tp_rank = static_cast<int32_t>(args.GetInt("tp-rank", 0, 0, 7));
  if (auto id = args.Get("tp-id")) {
    const std::string problem = ParseTpId(*id, &engine->tp_id);
    if (!problem.empty()) args.SetError("option --tp-id " + problem);
    engine->has_tp_id = true;
    if (!args.Has("tp")) {
      args.SetError("option --tp-id needs --tp N, the number of processes (ranks) in the group");
    } else if (engine->tp_rank >= engine->tensor_parallel_size) {
      args.SetError("option --tp-rank " + std::to_string(engine->tp_rank) + " is not a rank of " +
                    "--tp " + std::to_string(engine->tensor_parallel_size) + " (0 to " +
                    std::to_string(engine->tensor_parallel_size - 1) + ")");
    }
  } else if (args.Has("tp-rank")) {
    args.SetError("option --tp-rank needs --tp-id HEX (the group's id, from `gannet tp-id`)");
  }
  engine->threads = static_cast<int32_t>(args.GetInt("threads", 0, 1, 1024));
  engine->max_model_len = static_cast<int32_t>(args.GetInt("ctx-size", 0, 0, kInt32Max));
  if (engine->max_model_len == 1)
    args.SetError("option --ctx-size 1 leaves no room to generate (2 or more; 0 = the default)");
  engine->max_running = static_cast<int32_t>(args.GetInt("max-running", 0, 1, 65536));
  engine->kv_memory = args.GetBytes("kv-memory", 0);
  if (auto d = args.Get("kv-cache-dtype"))
    engine->kv_cache_dtype = *d;  // the library names a bad one
  if (auto d = args.Get("compute-dtype")) engine->compute_dtype = *d;
  if (auto d = args.Get("weight-dtype")) engine->weight_dtype = *d;  // the library names a bad one
  engine->kv_separate_k_eq_v = args.Has("kv-separate-k-eq-v");
  engine->startup_warmup = args.Has("startup-warmup");
  if (auto d = args.Get("draft")) {
    int64_t n = 0;
    if (ParseInt64(*d, 0, kInt32Max, &n) && !IsDirectory(*d)) {
      // llama.cpp's --draft N is the number of drafts per round.
      args.SetError("option --draft takes the MTP assistant's folder, got '" + *d +
                    "' (drafts per round, llama.cpp's --draft N, is --spec-tokens N here)");
    }
    engine->draft_dir = *d;
  }
  engine->spec_tokens = static_cast<int32_t>(args.GetInt("spec-tokens", 0, 1, 8));
  if (args.Has("spec-tokens") && engine->draft_dir.empty()) {
    args.SetError("option --spec-tokens needs --draft DIR");
  }
  r->disable_speculation = args.Has("no-spec") ? 1 : 0;
  // llama.cpp's -1 (no limit) and -2 (until the context is full) are both 0 here.
  if (auto n = args.Get("max-tokens"); n && *n != "-1" && *n != "-2") {
    r->max_tokens = static_cast<int32_t>(args.GetInt("max-tokens", 128, 0, kInt32Max));
  } else {
    r->max_tokens = n ? 0 : 128;
  }
  r->min_tokens = static_cast<int32_t>(args.GetInt("min-tokens", 0, 0, kInt32Max));
  r->temperature = static_cast<float>(args.GetDouble("temperature", 0.0, 0.0, 100.0));
  r->top_k = static_cast<int32_t>(args.GetInt("top-k", 0, 0, kInt32Max));
  r->top_p = static_cast<float>(args.GetDouble("top-p", 0.0, 0.0, 1.0));
  r->min_p = static_cast<float>(args.GetDouble("min-p", 0.0, 0.0, 1.0));
  r->repetition_penalty = static_cast<float>(args.GetDouble("repetition-penalty", 0.0, 0.0, 100.0));
  r->presence_penalty = static_cast<float>(args.GetDouble("presence-penalty", 0.0, -100.0, 100.0));
  r->frequency_penalty =
      static_cast<float>(args.GetDouble("frequency-penalty", 0.0, -100.0, 100.0));
  if (args.Has("seed") && args.Get("seed") != "-1") {  // -1 is llama.cpp's "random"
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
  int64_t image_tokens = 0;
  if (auto t = args.Get("image-tokens")) {
    if (!ParseInt64(*t, 0, 1120, &image_tokens) ||
        (image_tokens != 70 && image_tokens != 140 && image_tokens != 280 && image_tokens != 560 &&
         image_tokens != 1120)) {
      args.SetError("option --image-tokens expects 70, 140, 280, 560 or 1120, got '" + *t + "'");
    }
  }
  storage->image_bytes.clear();
  for (const std::string& file : args.GetAll("image")) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes;
    if (!in || !ReadAllBounded(in, kMaxImageFileBytes, &bytes) || in.bad()) {
      args.SetError("cannot read the image '" + file + "'" +
                    (in ? " (at most " + std::to_string(kMaxImageFileBytes) + " bytes)" : ""));
      break;
    }
    storage->image_bytes.push_back(std::move(bytes));
  }
  storage->images.clear();
  for (const std::string& bytes : storage->image_bytes) {
    gannet_image_t img = GANNET_IMAGE_INIT;
    img.data = reinterpret_cast<const uint8_t*>(bytes.data());
    img.size = bytes.size();
    img.max_soft_tokens = static_cast<int32_t>(image_tokens);
    storage->images.push_back(img);
  }
  r->images = storage->images.empty() ? nullptr : storage->images.data();
  r->num_images = storage->images.size();
  if (args.error().empty() && engine->model_dir.empty()) {
    args.SetError("no model: pass -m MODEL_DIR");
  }
  return args.error().empty();
}

gannet_engine_config_t EngineConfigOf(const EngineOptions& o) {
  gannet_engine_config_t config = GANNET_ENGINE_CONFIG_INIT;
  config.model_dir = o.model_dir.c_str();
  config.backend = o.backend.empty() ? nullptr : o.backend.c_str();
  config.device_id = o.device;
  config.tensor_parallel_size = o.tensor_parallel_size;
  config.num_device_ids = static_cast<int32_t>(o.device_ids.size());
  config.device_ids = o.device_ids.empty() ? nullptr : o.device_ids.data();
  config.tp_rank = o.tp_rank;
  config.tp_id = o.has_tp_id ? &o.tp_id : nullptr;
  config.num_threads = o.threads;
  config.max_model_len = o.max_model_len;
  config.max_running_seqs = o.max_running;
  config.kv_memory_bytes = o.kv_memory;
  config.kv_cache_dtype = o.kv_cache_dtype.empty() ? nullptr : o.kv_cache_dtype.c_str();
  config.compute_dtype = o.compute_dtype.empty() ? nullptr : o.compute_dtype.c_str();
  config.weight_dtype = o.weight_dtype.empty() ? nullptr : o.weight_dtype.c_str();
  config.kv_separate_k_eq_v = o.kv_separate_k_eq_v ? 1 : 0;
  config.startup_warmup = o.startup_warmup ? 1 : -1;
  config.draft_model_dir = o.draft_dir.empty() ? nullptr : o.draft_dir.c_str();
  config.num_speculative_tokens = o.spec_tokens;
  return config;
}

}  // namespace gannet_cli
