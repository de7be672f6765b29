// gannet chat: an interactive multi-turn conversation. Every turn sends the whole conversation;
// the engine's prefix cache serves the earlier turns, so a turn only computes the new text.
// Ctrl-C stops the current answer and returns to the prompt; Ctrl-C at the prompt exits.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "examples/cli/commands.h"
#include "examples/cli/request_flags.h"
#include "examples/cli/terminal.h"

namespace gannet_cli {
namespace {

const char kUsage[] =
    "usage: gannet chat -m MODEL_DIR [options]\n"
    "\n"
    "Interactive chat with the Gemma-4 chat template. Type a message and press Enter.\n"
    "Commands: /reset (forget the conversation), /stats (engine statistics), /exit (or Ctrl-D).\n"
    "Ctrl-C stops an answer and returns to the prompt; Ctrl-C at the prompt exits.\n"
    "\n"
    "options:\n";

// Past CommonFlags().
std::vector<FlagSpec> Flags() {
  return {
      {"system", 's', true, false, "TEXT", "system message"},
      {"thinking", 0, false, false, "", "enable thinking mode"},
      {"quiet", 'q', false, false, "", "no engine summary and no statistics after each answer"},
      {"help", 'h', false, false, "", "this help"},
  };
}

void PrintEngineStats(gannet_engine_t* engine) {
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  if (gannet_engine_get_stats(engine, &s) != GANNET_OK) return;
  char line[640];
  std::snprintf(line, sizeof(line),
                "KV pages used: sliding %d/%d, full %d/%d (page = %d tokens); prefix cache: %lld of "
                "%lld prompt tokens reused (%.0f%%); %lld prompt + %lld generated tokens in %lld "
                "steps; %s %s, loaded in %.1f s\n",
                s.kv_pages_used[0], s.kv_pages_total[0], s.kv_pages_used[1], s.kv_pages_total[1],
                s.page_size, static_cast<long long>(s.prefix_cache_hit_tokens),
                static_cast<long long>(s.prefix_cache_query_tokens), 100 * s.prefix_cache_hit_rate,
                static_cast<long long>(s.total_prompt_tokens),
                static_cast<long long>(s.total_generated_tokens),
                static_cast<long long>(s.num_steps), s.backend, s.device_name, s.load_seconds);
  WriteOut(line);
}

}  // namespace

int ChatCommand(int argc, char** argv) {
  CommandStart start;
  if (auto done = StartCommand("chat", kUsage, Flags(), argc, argv, &start)) return *done;
  Args& args = start.args;
  EngineOptions& eo = start.engine;
  gannet_request_t& base = start.request;
  if (ServesRankZero(eo)) return ServeRankZero("chat", eo);
  gannet_model_info_t info;
  if (!ReadModel("chat", eo.model_dir, &info)) return 1;
  // Check a turn of the conversation as it will be sent, before loading anything.
  std::vector<std::pair<std::string, std::string>> turns;
  if (auto s = args.Get("system")) turns.push_back({"system", *s});
  {
    gannet_request_t probe = base;
    const gannet_chat_message_t hello = {sizeof(gannet_chat_message_t), "user", "hello"};
    probe.messages = &hello;
    probe.num_messages = 1;
    if (!CheckRequest("chat", probe, info)) return 2;
  }

  InstallInterruptHandler();
  gannet_engine_t* engine = OpenEngine("chat", eo);
  if (engine == nullptr) return 1;
  const bool interactive = ::isatty(STDIN_FILENO) && StdoutIsTerminal();
  if (interactive) {
    std::printf("gannet chat (%s). /exit to quit, /reset to start over, Ctrl-C stops an answer.\n",
                eo.model_dir.c_str());
  }
  const size_t system_turns = turns.size();
  std::string line;
  int status = 0;
  while (true) {
    WriteOut(interactive ? "\033[1m> \033[0m" : "> ");
    if (!FlushOut()) break;
    const LineRead got = ReadLineBounded(std::cin, kMaxPromptBytes, &line);
    if (got == LineRead::kEnd) break;
    if (got == LineRead::kTooLong || line.find('\0') != std::string::npos) {
      std::fprintf(stderr, "gannet chat: a line %s; the line was ignored\n",
                   got == LineRead::kTooLong
                       ? ("longer than " + std::to_string(kMaxPromptBytes) + " bytes").c_str()
                       : "with a NUL byte");
      continue;
    }
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      turns.resize(system_turns);
      WriteOut("(conversation cleared)\n");
      continue;
    }
    if (line == "/stats") {
      PrintEngineStats(engine);
      continue;
    }
    if (line.empty()) continue;
    turns.push_back({"user", line});
    std::vector<gannet_chat_message_t> messages;
    for (const auto& [role, content] : turns) {
      messages.push_back({sizeof(gannet_chat_message_t), role.c_str(), content.c_str()});
    }
    gannet_request_t req = base;
    req.messages = messages.data();
    req.num_messages = messages.size();
    req.enable_thinking = args.Has("thinking") ? 1 : 0;
    RunResult r = RunRequest(engine, req, /*stream=*/true);
    WriteOut("\n");
    if (r.output_failed || !FlushOut()) break;
    if (r.status != GANNET_OK) {
      std::fprintf(stderr, "gannet chat: %s: %s\n", gannet_status_string(r.status), r.error.c_str());
      turns.pop_back();
      continue;
    }
    if (r.finish == GANNET_FINISH_CANCELLED) {
      turns.pop_back();  // an interrupted answer is not part of the conversation
    } else {
      turns.push_back({"assistant", r.text});
    }
    if (!args.Has("quiet")) PrintStats(r, -1);
  }
  if (!FlushOut()) {
    std::fprintf(stderr, "gannet chat: %s\n", OutError().c_str());
    status = 1;
  } else if (interactive) {
    WriteOut("\n");
    FlushOut();
  }
  gannet_engine_destroy(engine);
  return status;
}

}  // namespace gannet_cli
