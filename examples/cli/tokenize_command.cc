// gannet tokenize: a text's token ids as the engine sees them, without loading weights.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "examples/cli/args.h"
#include "examples/cli/commands.h"
#include "examples/cli/json_output.h"
#include "examples/cli/request_flags.h"
#include "examples/cli/terminal.h"
#include "gannet/gannet.h"

namespace gannet_cli {
namespace {

const char kUsage[] =
    "usage: gannet tokenize -m MODEL_DIR [-p TEXT | -f FILE] [options]\n"
    "\n"
    "Prints the token ids of TEXT (or of FILE, or of standard input) as `gannet generate` would\n"
    "see it as a prompt: comma-separated on one line, ready for --prompt-ids. With --pieces, one\n"
    "token a line: its id, a tab and its text (control bytes and bytes that are not UTF-8 on\n"
    "their own escaped). --json prints {\"ids\": [...], \"pieces\": [...]} (pieces with "
    "--pieces).\n"
    "Only tokenizer.json is read; no weights load.\n"
    "\n"
    "options:\n";

std::vector<FlagSpec> Flags() {
  return {
      {"model", 'm', true, false, "DIR", "checkpoint folder (its tokenizer.json)"},
      {"prompt", 'p', true, false, "TEXT", "the text (UTF-8)"},
      {"file", 'f', true, false, "FILE", "read the text from FILE"},
      {"pieces", 0, false, false, "", "also print each token's text"},
      {"no-bos", 0, false, false, "", "leave out the <bos> a prompt starts with"},
      {"json", 0, false, false, "", "print one JSON object"},
      {"help", 'h', false, false, "", "this help"},
  };
}

int Usage(const std::string& error) { return UsageError("tokenize", error); }

std::string PieceOf(const gannet_tokenizer_t* tok, int32_t id) {
  size_t n = 0;
  gannet_token_to_piece(tok, id, nullptr, 0, &n);
  std::string piece(n + 1, '\0');
  if (gannet_token_to_piece(tok, id, piece.data(), piece.size(), &n) != GANNET_OK) return "";
  piece.resize(n);
  return piece;
}

}  // namespace

int TokenizeCommand(int argc, char** argv) {
  Args args;
  const std::vector<FlagSpec> flags = Flags();
  if (!args.Parse(flags, argc, argv, 2)) return Usage(args.error());
  if (args.Has("help")) {
    std::printf("%s%s", kUsage, FormatFlags(flags).c_str());
    return 0;
  }
  const auto model = args.Get("model");
  if (!model) return Usage("no model: pass -m MODEL_DIR");
  if (args.Has("prompt") && args.Has("file")) {
    return Usage("give the text once: -p TEXT or -f FILE, not both");
  }
  std::string text;
  if (auto p = args.Get("prompt")) {
    text = *p;
  } else {
    std::ifstream file;
    const auto f = args.Get("file");
    if (f) {
      file.open(*f, std::ios::binary);
      if (!file) return Usage("cannot read '" + *f + "': " + std::strerror(errno));
    } else if (::isatty(STDIN_FILENO)) {
      std::fprintf(stderr, "(reading the text from stdin; end with Ctrl-D)\n");
    }
    if (!ReadAllBounded(f ? static_cast<std::istream&>(file) : std::cin, kMaxPromptBytes, &text)) {
      return Usage("the text is longer than " + std::to_string(kMaxPromptBytes) + " bytes");
    }
  }
  gannet_tokenizer_t* tok = nullptr;
  if (gannet_tokenizer_open(model->c_str(), &tok) != GANNET_OK) {
    std::fprintf(stderr, "gannet tokenize: %s\n", gannet_last_error_message());
    return 1;
  }
  const int32_t add_bos = args.Has("no-bos") ? 0 : 1;
  size_t n = 0;
  gannet_status_t st = gannet_tokenize(tok, text.data(), text.size(), add_bos, nullptr, 0, &n);
  std::vector<int32_t> ids(n);
  if (st == GANNET_OK && n > 0) {
    st = gannet_tokenize(tok, text.data(), text.size(), add_bos, ids.data(), ids.size(), &n);
  }
  if (st != GANNET_OK) {
    std::fprintf(stderr, "gannet tokenize: %s\n", gannet_last_error_message());
    gannet_tokenizer_close(tok);
    return st == GANNET_ERR_INVALID_ARGUMENT ? 2 : 1;
  }
  std::vector<std::string> pieces;
  if (args.Has("pieces")) {
    for (int32_t id : ids) pieces.push_back(PieceOf(tok, id));
  }
  gannet_tokenizer_close(tok);
  std::string out;
  if (args.Has("json")) {
    out = TokensJson(ids, args.Has("pieces") ? &pieces : nullptr) + "\n";
  } else if (args.Has("pieces")) {
    for (size_t i = 0; i < ids.size(); ++i) {
      out += std::to_string(ids[i]) + "\t" + EscapeForDisplay(pieces[i]) + "\n";
    }
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(ids[i]);  // appended: see Piece in session.cc (GCC 12)
    }
    out += "\n";
  }
  WriteOut(out);
  if (!FlushOut()) {
    std::fprintf(stderr, "gannet tokenize: %s\n", OutError().c_str());
    return 1;
  }
  return 0;
}

}  // namespace gannet_cli
