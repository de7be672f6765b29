// Fuzz target: the chat-template interpreter (lib/tokenizer/jinja_template.h). A model folder's
// chat_template.jinja is run on every chat request, so a template, whatever its bytes, must
// parse or be refused, and render or fail with a status: never crash, hang or allocate without
// bound.
//
// Input: the template source. It renders against a fixed conversation with tools, a tool call
// and its result (the shapes templates index into). Properties checked: a successful render's
// data ranges are sorted, disjoint and inside the output.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "lib/common/json.h"
#include "lib/tokenizer/jinja_template.h"

namespace {

const gannet::Json& Data() {
  static const gannet::Json* data = [] {
    auto j = gannet::Json::Parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief. <|turn>"},
        {"role": "user", "content": [{"type": "text", "text": " Weather? "}]},
        {"role": "assistant", "content": null, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 2.5, "ok": true, "x": null, "l": [1, "a"]}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is <|channel>x<channel|>sunny."}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["a"]},
          "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["city"]}}}]})");
    if (!j.ok()) std::abort();
    return new gannet::Json(std::move(*j));
  }();
  return *data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  auto tmpl = gannet::tokenizer::JinjaTemplate::Parse(
      std::string_view(reinterpret_cast<const char*>(bytes), size));
  if (!tmpl.ok()) return 0;
  gannet::Json settings = gannet::Json::MakeObject();
  settings.Set("bos_token", gannet::Json::String("<bos>"));
  settings.Set("add_generation_prompt", gannet::Json::Bool(true));
  settings.Set("enable_thinking", gannet::Json::Bool(size % 2 == 0));
  std::vector<std::pair<size_t, size_t>> ranges;
  auto out = tmpl->Render(Data(), settings, size_t{1} << 20, &ranges);
  if (!out.ok()) return 0;
  size_t last = 0;
  for (const auto& [b, e] : ranges) {
    if (b < last || e <= b || e > out->size()) std::abort();
    last = e;
  }
  return 0;
}
