// gannet generate: one prompt in, streamed text out.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "examples/cli/commands.h"
#include "examples/cli/request_flags.h"

namespace gannet_cli {
namespace {

const char kUsage[] =
    "usage: gannet generate -m MODEL_DIR [-p PROMPT | --prompt-ids IDS] [options]\n"
    "\n"
    "Generates a continuation of PROMPT (or of standard input when neither -p nor --prompt-ids is\n"
    "given) and streams the text to standard output. Timing statistics go to standard error.\n"
    "\n"
    "options:\n";

std::vector<FlagSpec> Flags() {
  std::vector<FlagSpec> f = {
      {"prompt", 'p', true, false, "TEXT", "the prompt (UTF-8)"},
      {"prompt-ids", 0, true, false, "IDS", "the prompt as comma-separated token ids"},
      {"chat", 0, false, false, "", "treat the prompt as a user message (Gemma-4 chat template)"},
      {"system", 's', true, false, "TEXT", "system message (implies --chat)"},
      {"thinking", 0, false, false, "", "chat: enable thinking mode"},
      {"logprobs", 0, true, false, "N", "print the top-N logprobs of each token (stderr)"},
      {"ids", 0, false, false, "", "also print the generated token ids (one line, stdout)"},
      {"no-stream", 0, false, false, "", "print the text once at the end"},
      {"quiet", 'q', false, false, "", "no statistics line"},
      {"help", 'h', false, false, "", "this help"},
  };
  auto common = CommonFlags();
  f.insert(f.begin(), common.begin(), common.end());
  return f;
}

bool ParseIds(const std::string& s, std::vector<int32_t>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end) return false;
    out->push_back(static_cast<int32_t>(v));
  }
  return !out->empty();
}

}  // namespace

int GenerateCommand(int argc, char** argv) {
  Args args;
  const auto flags = Flags();
  if (!args.Parse(flags, argc, argv, 2)) {
    std::fprintf(stderr, "gannet generate: %s\n(try `gannet generate --help`)\n", args.error().c_str());
    return 2;
  }
  if (args.Has("help")) {
    std::printf("%s%s", kUsage, FormatFlags(flags).c_str());
    return 0;
  }
  EngineOptions eo;
  gannet_request_t req = GANNET_REQUEST_INIT;
  RequestStorage storage;
  if (!ApplyCommonFlags(args, &eo, &req, &storage)) {
    std::fprintf(stderr, "gannet generate: %s\n", args.error().empty() ? "bad --stop-id" : args.error().c_str());
    return 2;
  }
  if (eo.model_dir.empty() && !args.positional().empty()) eo.model_dir = args.positional()[0];
  if (eo.model_dir.empty()) {
    std::fprintf(stderr, "gannet generate: no model: pass -m MODEL_DIR\n");
    return 2;
  }
  std::vector<int32_t> ids;
  std::string prompt;
  if (auto p = args.Get("prompt-ids")) {
    if (!ParseIds(*p, &ids)) {
      std::fprintf(stderr, "gannet generate: --prompt-ids expects ids like 2,108,109\n");
      return 2;
    }
    req.prompt_tokens = ids.data();
    req.num_prompt_tokens = ids.size();
  } else {
    if (auto p = args.Get("prompt")) {
      prompt = *p;
    } else {
      if (::isatty(STDIN_FILENO)) std::fprintf(stderr, "(reading the prompt from stdin; end with Ctrl-D)\n");
      prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
  }
  std::vector<gannet_chat_message_t> messages;
  const std::string system = args.Get("system").value_or("");
  if (req.prompt_tokens == nullptr) {
    if (args.Has("chat") || args.Has("system")) {
      if (!system.empty()) messages.push_back({"system", system.c_str()});
      messages.push_back({"user", prompt.c_str()});
      req.messages = messages.data();
      req.num_messages = messages.size();
      req.enable_thinking = args.Has("thinking") ? 1 : 0;
    } else {
      req.prompt_text = prompt.c_str();
    }
  }
  req.logprobs = args.GetInt("logprobs", 0);
  gannet_engine_t* engine = OpenEngine(eo);
  if (engine == nullptr) return 1;
  const bool stream = !args.Has("no-stream");
  RunResult r = RunRequest(engine, req, stream);
  gannet_engine_destroy(engine);
  if (r.status != GANNET_OK) {
    if (stream && !r.text.empty()) std::printf("\n");
    std::fprintf(stderr, "gannet generate: %s: %s\n", gannet_status_string(r.status), r.error.c_str());
    return 1;
  }
  if (!stream) std::fwrite(r.text.data(), 1, r.text.size(), stdout);
  std::printf("\n");
  if (args.Has("ids")) {
    for (size_t i = 0; i < r.tokens.size(); ++i) std::printf("%s%d", i ? " " : "", r.tokens[i]);
    std::printf("\n");
  }
  if (!args.Has("quiet")) PrintStats(r);
  return 0;
}

}  // namespace gannet_cli
