#include "examples/server/gen_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace gannet_server {

std::string ReadGenerationConfig(const std::string& model_dir, SamplingDefaults* out) {
  if (model_dir.rfind("dummy:", 0) == 0) return "";
  const std::string path = model_dir + "/generation_config.json";
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return path + " is not a JSON object";
  auto number = [&](const char* key, auto* field) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "";
    if (!it->is_number()) return path + ": \"" + key + "\" is not a number";
    *field = it->template get<typename std::remove_reference_t<decltype(**field)>>();
    return "";
  };
  for (const std::string& e :
       {number("temperature", &out->temperature), number("top_p", &out->top_p),
        number("top_k", &out->top_k), number("min_p", &out->min_p),
        number("repetition_penalty", &out->repetition_penalty)}) {
    if (!e.empty()) return e;
  }
  // HF's `do_sample: false` means greedy whatever the temperature says.
  auto ds = j.find("do_sample");
  if (ds != j.end() && ds->is_boolean() && !ds->get<bool>()) out->temperature = 0.0f;
  return "";
}

}  // namespace gannet_server
