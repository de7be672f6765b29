// gannet generate: one prompt in, streamed text out.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "examples/cli/commands.h"
#include "examples/cli/json_output.h"
#include "examples/cli/request_flags.h"
#include "examples/cli/terminal.h"

namespace gannet_cli {
namespace {

const char kUsage[] =
    "usage: gannet generate -m MODEL_DIR [-p PROMPT | -f FILE | --prompt-ids IDS] [options]\n"
    "\n"
    "Generates a continuation of PROMPT (or of FILE, or of standard input when no prompt is\n"
    "given) and streams the text to standard output. Statistics go to standard error. Ctrl-C\n"
    "stops the reply (statistics still print); a second Ctrl-C exits at once.\n"
    "\n"
    "Thinking (--thinking; small models may think unasked): the model's reasoning goes to "
    "standard\n"
    "error (dimmed on a terminal), so standard output holds only the answer; --json gives it as\n"
    "\"thinking\". --json prints one JSON object instead of streaming: text, thinking, tokens,\n"
    "finish, logprobs (with --logprobs N), prompt/cached/generated token counts and timings.\n"
    "\n"
    "Tensor parallelism over processes (one per GPU, on one host or several): `gannet tp-id`\n"
    "makes the group's id; every rank runs this command with --tp N --tp-id HEX, its own\n"
    "--tp-rank and its --device. Rank 0 takes the prompt and prints the reply; the other ranks\n"
    "load their shard and serve rank 0 until it exits.\n"
    "\n"
    "options:\n";

// Past CommonFlags().
std::vector<FlagSpec> Flags() {
  return {
      {"prompt", 'p', true, false, "TEXT", "the prompt (UTF-8)"},
      {"file", 'f', true, false, "FILE", "read the prompt from FILE"},
      {"prompt-ids", 0, true, false, "IDS",
       "the prompt as comma-separated token ids (`gannet tokenize` prints them)"},
      {"chat", 0, false, false, "", "treat the prompt as a user message (Gemma-4 chat template)"},
      {"system",
       0,
       true,
       false,
       "TEXT",
       "system message (implies --chat)",
       {"system-prompt"},
       {"sys"}},
      {"thinking", 0, false, false, "", "chat: enable thinking mode"},
      {"logprobs", 0, true, false, "N",
       "each token's logprob and the top-N, 0 (off) to 20: on stderr after the reply, or in "
       "--json"},
      {"json", 0, false, false, "",
       "print one JSON object (text, thinking, tokens, logprobs, stats) instead of streaming"},
      {"ids", 0, false, false, "", "also print the generated token ids (one line, stdout)"},
      {"no-stream", 0, false, false, "", "print the text once at the end"},
      {"quiet", 'q', false, false, "", "no engine summary and no statistics line"},
      {"help", 'h', false, false, "", "this help"},
  };
}

int Usage(const std::string& error) { return UsageError("generate", error); }

}  // namespace

int GenerateCommand(int argc, char** argv) {
  CommandStart start;
  if (auto done = StartCommand("generate", kUsage, Flags(), argc, argv, &start)) return *done;
  Args& args = start.args;
  EngineOptions& eo = start.engine;
  gannet_request_t& req = start.request;
  req.logprobs = static_cast<int32_t>(args.GetInt("logprobs", 0, 0, 20));
  if (!args.error().empty()) return Usage(args.error());
  if (ServesRankZero(eo)) return ServeRankZero("generate", eo);
  if (args.Has("prompt") + args.Has("file") + args.Has("prompt-ids") > 1) {
    return Usage("give the prompt once: -p TEXT, -f FILE or --prompt-ids IDS, not both");
  }
  if (args.Has("prompt-ids") && (args.Has("chat") || args.Has("system"))) {
    return Usage("--chat and --system need a text prompt, not --prompt-ids");
  }

  gannet_model_info_t info;
  if (!ReadModel("generate", eo.model_dir, &info)) return 1;

  std::vector<int32_t> ids;
  std::string prompt;
  if (auto p = args.Get("prompt-ids")) {
    if (!ParseIds(*p, &ids)) {
      return Usage("--prompt-ids expects comma-separated ids in [0, 2147483647] like 2,108,109");
    }
    req.prompt_tokens = ids.data();
    req.num_prompt_tokens = ids.size();
  } else if (auto t = args.Get("prompt")) {
    prompt = *t;
  } else if (auto f = args.Get("file")) {
    std::ifstream in(*f, std::ios::binary);
    if (!in) return Usage("cannot read the prompt file '" + *f + "': " + std::strerror(errno));
    if (!ReadAllBounded(in, kMaxPromptBytes, &prompt)) {
      return Usage("the prompt file '" + *f + "' is longer than " +
                   std::to_string(kMaxPromptBytes) + " bytes");
    }
    if (in.bad()) return Usage("cannot read the prompt file '" + *f + "'");
    if (const size_t nul = prompt.find('\0'); nul != std::string::npos) {
      return Usage("the prompt file '" + *f + "' has a NUL byte (at byte " + std::to_string(nul) +
                   "); prompts are text");
    }
  } else {
    if (!info.has_tokenizer) {
      return Usage("this model has no tokenizer.json: give the prompt with --prompt-ids");
    }
    // A closed standard input is no prompt, not an empty one.
    if (::fcntl(STDIN_FILENO, F_GETFD) == -1) {
      return Usage("standard input is closed: give the prompt with -p TEXT or --prompt-ids IDS");
    }
    if (::isatty(STDIN_FILENO))
      std::fprintf(stderr, "(reading the prompt from stdin; end with Ctrl-D)\n");
    if (!ReadAllBounded(std::cin, kMaxPromptBytes, &prompt)) {
      return Usage("the prompt on standard input is longer than " +
                   std::to_string(kMaxPromptBytes) + " bytes");
    }
    if (const size_t nul = prompt.find('\0'); nul != std::string::npos) {
      return Usage("the prompt on standard input has a NUL byte (at byte " + std::to_string(nul) +
                   "); prompts are text");
    }
  }
  if (args.Has("thinking") && !args.Has("chat") && !args.Has("system")) {
    return Usage("--thinking needs --chat or --system (thinking is a chat-template mode)");
  }
  std::vector<gannet_chat_message_t> messages;
  const std::string system = args.Get("system").value_or("");
  if (req.prompt_tokens == nullptr) {
    if (args.Has("chat") || args.Has("system")) {
      if (!system.empty())
        messages.push_back({sizeof(gannet_chat_message_t), "system", system.c_str()});
      // HF's usual chat form: the images, then the text.
      prompt = ImagePlaceholders(req.num_images) + prompt;
      messages.push_back({sizeof(gannet_chat_message_t), "user", prompt.c_str()});
      req.messages = messages.data();
      req.num_messages = messages.size();
      req.enable_thinking = args.Has("thinking") ? 1 : 0;
    } else {
      if (req.num_images > 0 && prompt.find("<|image|>") == std::string::npos) {
        prompt = ImagePlaceholders(req.num_images) + prompt;
      }
      req.prompt_text = prompt.c_str();
    }
  }
  // Everything about the request is checked before any weight loads.
  if (!CheckRequest("generate", req, info)) return 2;

  InstallInterruptHandler();
  gannet_engine_t* engine = OpenEngine("generate", eo);
  if (engine == nullptr) return 1;
  const double load_s = EngineLoadSeconds(engine);
  const bool json = args.Has("json");
  const bool stream = !args.Has("no-stream") && !json;
  std::unique_ptr<gannet_engine_t, void (*)(gannet_engine_t*)> owner(engine, gannet_engine_destroy);
  RunResult r = RunRequest(engine, req, stream);
  if (json) {
    WriteOut(RequestJson(r, load_s, req.logprobs > 0) + "\n");
    if (!FlushOut()) {
      std::fprintf(stderr, "gannet generate: %s\n", OutError().c_str());
      return 1;
    }
    if (r.status != GANNET_OK) {
      std::fprintf(stderr, "gannet generate: %s: %s\n", gannet_status_string(r.status),
                   r.error.c_str());
      return 1;
    }
    if (!args.Has("quiet")) PrintStats(r, load_s);
    return r.finish == GANNET_FINISH_CANCELLED ? 130 : 0;
  }
  if (r.status != GANNET_OK) {
    if (stream && !r.text.empty()) WriteOut("\n");
    FlushOut();
    std::fprintf(stderr, "gannet generate: %s: %s\n", gannet_status_string(r.status),
                 r.error.c_str());
    return 1;
  }
  if (!stream) {
    if (!r.thinking.empty()) WriteThinking((r.thinking + "\n").data(), r.thinking.size() + 1);
    WriteOut(r.text);
  } else if (r.thinking_shown && r.text.empty()) {
    std::fputc('\n', stderr);  // end the thought's line
  }
  WriteOut("\n");
  if (args.Has("ids")) {
    std::string line;
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(r.tokens[i]);  // appended: see Piece in session.cc (GCC 12)
    }
    WriteOut(line + "\n");
  }
  if (!FlushOut()) {
    std::fprintf(stderr, "gannet generate: %s\n", OutError().c_str());
    return 1;
  }
  // After the reply's own line, never interleaved with it (both may be one terminal).
  if (req.logprobs > 0) PrintLogprobs(engine, r);
  if (!args.Has("quiet")) PrintStats(r, load_s);
  return r.finish == GANNET_FINISH_CANCELLED ? 130 : 0;
}

}  // namespace gannet_cli
