// gannet info MODEL_DIR: what the checkpoint is, without loading its weights.
#include <cstdio>
#include <string>

#include "examples/cli/commands.h"
#include "examples/cli/json_output.h"
#include "gannet/gannet.h"

namespace gannet_cli {
namespace {

std::string Bytes(int64_t b) {
  char buf[64];
  if (b >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / 1073741824.0);
  } else if (b >= (1 << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  }
  return buf;
}

std::string Count(int64_t n) {
  char buf[64];
  if (n >= 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.2f B", n / 1e9);
  } else if (n >= 1000000) {
    std::snprintf(buf, sizeof(buf), "%.2f M", n / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(n));
  }
  return buf;
}

}  // namespace

int InfoCommand(int argc, char** argv) {
  // `gannet info DIR` or `gannet info DIR --json` (either order).
  const bool json =
      argc == 4 && (std::string(argv[2]) == "--json" || std::string(argv[3]) == "--json");
  if ((argc != 3 && !json) || std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h") {
    std::fprintf(argc == 3 ? stdout : stderr,
                 "usage: gannet info MODEL_DIR [--json]\n\n"
                 "Shows a checkpoint's variant, size, dtypes and KV cost without loading weights.\n"
                 "--json prints every field of gannet_model_info_t as one JSON object.\n");
    return argc == 3 ? 0 : 2;
  }
  const char* model = json && std::string(argv[2]) == "--json" ? argv[3] : argv[2];
  gannet_model_info_t info = GANNET_MODEL_INFO_INIT;
  if (gannet_model_info(model, &info) != GANNET_OK) {
    std::fprintf(stderr, "gannet info: %s\n", gannet_last_error_message());
    return 1;
  }
  if (json) {
    const std::string out = ModelInfoJson(model, info) + "\n";
    return std::fwrite(out.data(), 1, out.size(), stdout) == out.size() && std::fflush(stdout) == 0
               ? 0
               : 1;
  }
  std::printf("model:        %s\n", model);
  std::printf("variant:      %s (model_type %s)\n", info.variant, info.model_type);
  if (info.num_shards > 0) {
    std::printf("parameters:   %s (%s of %s weights in %d file%s)\n",
                Count(info.num_parameters).c_str(), Bytes(info.weight_bytes).c_str(), info.dtypes,
                info.num_shards, info.num_shards == 1 ? "" : "s");
  } else {
    std::printf("parameters:   %s (%s of %s weights, generated on load)\n",
                Count(info.num_parameters).c_str(), Bytes(info.weight_bytes).c_str(), info.dtypes);
  }
  std::printf("weights:      %s\n", info.weight_format);
  {
    std::string kinds;
    const struct {
      const char* name;
      int64_t bytes;
    } parts[] = {{"attention", info.weight_bytes_attention},
                 {"mlp", info.weight_bytes_mlp},
                 {"experts", info.weight_bytes_experts},
                 {"embeddings", info.weight_bytes_embeddings},
                 {"other", info.weight_bytes_other}};
    for (const auto& p : parts) {
      if (p.bytes == 0) continue;
      kinds += (kinds.empty() ? "" : ", ") + std::string(p.name) + " " + Bytes(p.bytes);
    }
    std::printf("by kind:      %s\n", kinds.c_str());
  }
  if (info.kept_plain[0] != '\0') std::printf("kept plain:   %s\n", info.kept_plain);
  if (info.skipped_tower_bytes > 0) {
    std::printf("skipped:      %s of vision/audio tower tensors (text-only load)\n",
                Bytes(info.skipped_tower_bytes).c_str());
  }
  std::printf("layers:       %d (%d sliding-window, %d full-attention, %d KV-shared)\n",
              info.num_layers, info.num_sliding_layers, info.num_full_layers,
              info.num_kv_shared_layers);
  std::printf(
      "attention:    %d query heads; sliding: %d KV heads x %d, window %d; full: %d KV heads x "
      "%d\n",
      info.num_attention_heads, info.num_kv_heads, info.head_dim, info.sliding_window,
      info.num_full_kv_heads, info.full_head_dim);
  std::printf("width:        hidden %lld, vocabulary %lld, context %lld\n",
              static_cast<long long>(info.hidden_size), static_cast<long long>(info.vocab_size),
              static_cast<long long>(info.max_position_embeddings));
  if (info.num_experts > 0) {
    std::printf("experts:      %d, top-%d per token\n", info.num_experts, info.top_k_experts);
  }
  if (info.kv_bytes_per_token_sliding + info.kv_bytes_per_token_full > 0) {
    std::printf("KV per token: %s sliding (only the last %d tokens are kept) + %s full (bf16)\n",
                Bytes(info.kv_bytes_per_token_sliding).c_str(), info.sliding_window,
                Bytes(info.kv_bytes_per_token_full).c_str());
  }
  std::printf("tokenizer:    %s\n",
              info.has_tokenizer ? "tokenizer.json" : "none (token ids only)");
  return 0;
}

}  // namespace gannet_cli
