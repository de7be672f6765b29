// gannet chat: an interactive multi-turn conversation. Every turn sends the whole conversation;
// the engine's prefix cache serves the earlier turns, so a turn only computes the new text.
// Ctrl-C stops the current answer and returns to the prompt; Ctrl-C at the prompt exits.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "examples/cli/commands.h"
#include "examples/cli/json_output.h"
#include "examples/cli/line_reader.h"
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
    "Input: on a terminal, arrow keys edit the line and up/down recall earlier lines (libedit;\n"
    "~/.editrc applies). A line ending in \\ continues on the next line, and a pasted block of\n"
    "several lines is one message. Piped input is one message a line.\n"
    "\n"
    "Context: every turn sends the conversation so far. When it would not leave room for the\n"
    "answer (-n tokens, at most half of -c), the oldest turns are dropped, and a note on standard\n"
    "error says how many. A message too long for the context alone is refused with the numbers.\n"
    "\n"
    "Thinking (--thinking): the model's reasoning is shown dimmed on standard error before the\n"
    "answer and is not sent back in later turns (the chat template drops it). --json prints one\n"
    "JSON object a line per answer instead (text, thinking, tokens, finish, token counts, "
    "timings).\n"
    "\n"
    "options:\n";

// Past CommonFlags().
std::vector<FlagSpec> Flags() {
  return {
      {"system", 0, true, false, "TEXT", "system message", {"system-prompt"}, {"sys"}},
      {"thinking", 0, false, false, "", "enable thinking mode"},
      {"json", 0, false, false, "",
       "one JSON object a line per answer (as generate --json), no prompt"},
      {"quiet", 'q', false, false, "", "no engine summary and no statistics after each answer"},
      {"help", 'h', false, false, "", "this help"},
  };
}

void PrintEngineStats(gannet_engine_t* engine) {
  gannet_engine_stats_t s = GANNET_ENGINE_STATS_INIT;
  if (gannet_engine_get_stats(engine, &s) != GANNET_OK) return;
  char line[640];
  std::snprintf(
      line, sizeof(line),
      "KV pages used: sliding %d/%d, full %d/%d (page = %d tokens); prefix cache: %lld of "
      "%lld prompt tokens reused (%.0f%%); %lld prompt + %lld generated tokens in %lld "
      "steps; %s %s, loaded in %.1f s\n",
      s.kv_pages_used[0], s.kv_pages_total[0], s.kv_pages_used[1], s.kv_pages_total[1], s.page_size,
      static_cast<long long>(s.prefix_cache_hit_tokens),
      static_cast<long long>(s.prefix_cache_query_tokens), 100 * s.prefix_cache_hit_rate,
      static_cast<long long>(s.total_prompt_tokens),
      static_cast<long long>(s.total_generated_tokens), static_cast<long long>(s.num_steps),
      s.backend, s.device_name, s.load_seconds);
  WriteOut(line);
}

// The prompt tokens the conversation takes as the engine will render it; -1 when it cannot say.
int64_t CountPromptTokens(const gannet_tokenizer_t* tok,
                          const std::vector<gannet_chat_message_t>& messages, int32_t thinking) {
  size_t len = 0;
  if (gannet_apply_chat_template(tok, messages.data(), messages.size(), 1, thinking, nullptr, 0,
                                 &len) != GANNET_OK) {
    return -1;
  }
  std::string text(len + 1, '\0');
  if (gannet_apply_chat_template(tok, messages.data(), messages.size(), 1, thinking, text.data(),
                                 text.size(), &len) != GANNET_OK) {
    return -1;
  }
  size_t n = 0;
  if (gannet_tokenize(tok, text.data(), len, 0, nullptr, 0, &n) != GANNET_OK) return -1;
  return static_cast<int64_t>(n);
}

std::vector<gannet_chat_message_t> Messages(
    const std::vector<std::pair<std::string, std::string>>& turns) {
  std::vector<gannet_chat_message_t> messages;
  for (const auto& [role, content] : turns) {
    messages.push_back({sizeof(gannet_chat_message_t), role.c_str(), content.c_str()});
  }
  return messages;
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
    const std::string text = ImagePlaceholders(base.num_images) + "hello";
    const gannet_chat_message_t hello = {sizeof(gannet_chat_message_t), "user", text.c_str()};
    probe.messages = &hello;
    probe.num_messages = 1;
    if (!CheckRequest("chat", probe, info)) return 2;
  }

  bool images_placed = false;
  InstallInterruptHandler();
  gannet_engine_t* engine = OpenEngine("chat", eo);
  if (engine == nullptr) return 1;
  const bool interactive = ::isatty(STDIN_FILENO) && StdoutIsTerminal();
  const bool json = args.Has("json");
  LineReader reader(interactive, json ? "" : "> ", json ? "" : "... ");
  if (interactive) {
    // The CLI's own text: raw (WriteOut escapes control bytes, which are meant for model text).
    WriteRaw("gannet chat (" + EscapeControls(eo.model_dir) +
             "). /exit to quit, /reset to start over, Ctrl-C stops an answer; a line ending in \\ "
             "goes on.\n");
    if (!reader.editing()) {
      WriteRaw(
          "(built without libedit: no arrow-key editing or history; install libedit-dev and "
          "rebuild for them)\n");
    }
  }
  const gannet_tokenizer_t* tok = nullptr;
  gannet_engine_tokenizer(engine, &tok);  // chat needs text, so the model has one
  gannet_engine_stats_t es = GANNET_ENGINE_STATS_INIT;
  gannet_engine_get_stats(engine, &es);
  const int64_t context = es.max_model_len;
  // Room kept for the answer: -n tokens (0: no limit), at most half the context.
  const int64_t reserve =
      std::min<int64_t>(base.max_tokens > 0 ? base.max_tokens : context, context / 2);
  const int32_t thinking = args.Has("thinking") ? 1 : 0;
  const size_t system_turns = turns.size();
  std::string line;
  int status = 0;
  while (true) {
    const LineRead got = reader.ReadMessage(&line);
    if (!FlushOut()) break;
    if (got == LineRead::kEnd) break;
    if (got == LineRead::kTooLong || line.find('\0') != std::string::npos) {
      std::fprintf(stderr, "gannet chat: a message %s; it was ignored\n",
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
    // --image: the images go in the first user message, before its text, and stay in the
    // conversation (every turn's request carries them) until the context policy drops that turn.
    const bool with_images = !images_placed && base.num_images > 0;
    turns.push_back({"user", (with_images ? ImagePlaceholders(base.num_images) : "") + line});
    // Context policy: drop the oldest exchanges until the prompt leaves room for the answer.
    int64_t prompt_tokens = CountPromptTokens(tok, Messages(turns), thinking);
    size_t dropped = 0;
    while (prompt_tokens >= 0 && prompt_tokens + reserve > context &&
           turns.size() >= system_turns + 3) {
      // The oldest user turn and the answer after it.
      turns.erase(turns.begin() + static_cast<std::ptrdiff_t>(system_turns),
                  turns.begin() + static_cast<std::ptrdiff_t>(system_turns) + 2);
      dropped += 2;
      prompt_tokens = CountPromptTokens(tok, Messages(turns), thinking);
    }
    if (dropped > 0) {
      std::fprintf(stderr,
                   "(context: dropped the oldest %zu turns to fit: the prompt is now %lld tokens, "
                   "leaving %lld of the %lld-token context (-c) for the answer)\n",
                   dropped, static_cast<long long>(prompt_tokens),
                   static_cast<long long>(context - prompt_tokens),
                   static_cast<long long>(context));
    }
    if (prompt_tokens >= context) {
      std::fprintf(stderr,
                   "gannet chat: this message makes a prompt of %lld tokens%s, and the context "
                   "holds %lld (-c): it was not sent. Shorten it, or start gannet chat with a "
                   "larger -c.\n",
                   static_cast<long long>(prompt_tokens),
                   system_turns > 0 ? " with the system message" : "",
                   static_cast<long long>(context));
      turns.pop_back();
      continue;
    }
    std::vector<gannet_chat_message_t> messages = Messages(turns);
    gannet_request_t req = base;
    if (base.num_images > 0 && std::none_of(turns.begin(), turns.end(), [&](const auto& t) {
          return t.first == "user" && t.second.rfind(ImagePlaceholders(base.num_images), 0) == 0;
        })) {
      req.images = nullptr;  // the turn with the images was dropped
      req.num_images = 0;
    }
    req.messages = messages.data();
    req.num_messages = messages.size();
    req.enable_thinking = thinking;
    RunResult r = RunRequest(engine, req, /*stream=*/!json);
    if (r.thinking_shown && r.text.empty()) std::fputc('\n', stderr);
    WriteOut(json ? RequestJson(r, -1, false) + "\n" : "\n");
    if (r.output_failed || !FlushOut()) break;
    if (r.status != GANNET_OK) {
      std::fprintf(stderr, "gannet chat: %s: %s\n", gannet_status_string(r.status),
                   r.error.c_str());
      turns.pop_back();
      continue;
    }
    if (r.finish == GANNET_FINISH_CANCELLED) {
      turns.pop_back();  // an interrupted answer is not part of the conversation
    } else {
      turns.push_back({"assistant", r.text});  // the answer alone: thinking is not sent back
      if (with_images) images_placed = true;   // a refused or cancelled turn gives them to the next
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
