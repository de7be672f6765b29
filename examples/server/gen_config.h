// The checkpoint's generation_config.json: the sampling a model's authors chose (Gemma-4:
// temperature 1.0, top_p 0.95, top_k 64). The server samples with it where a request says nothing.
#pragma once

#include <optional>
#include <string>

namespace gannet_server {

struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int> max_tokens;  // only from the command line (-n)
};

// Reads <model_dir>/generation_config.json. A missing file gives no defaults (""); a file that
// is not JSON or holds a field of the wrong type is an error naming it (returned, non-empty).
std::string ReadGenerationConfig(const std::string& model_dir, SamplingDefaults* out);

}  // namespace gannet_server
