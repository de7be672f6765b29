// gannet: the command-line interface to the engine, built only on the public C ABI
// (include/gannet/gannet.h), like any other embedding program.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "examples/cli/commands.h"
#include "gannet/gannet.h"

namespace {

const char kHelp[] =
    "gannet %s: fast Gemma-4 inference\n"
    "\n"
    "usage: gannet COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  generate   complete a prompt and stream the text     gannet generate -m DIR -p \"Hello\"\n"
    "  chat       interactive multi-turn chat                 gannet chat -m DIR\n"
    "  serve      OpenAI-compatible HTTP server               gannet serve -m DIR --port 8080\n"
    "  info       describe a checkpoint folder                gannet info DIR\n"
    "  quantize   write an int4 (W4A16) checkpoint            gannet quantize SRC DST "
    "--weight-dtype int4-g32\n"
    "  tokenize   print a text's token ids                    gannet tokenize -m DIR -p \"Hi\"\n"
    "  tp-id      print a new tensor-parallel group id (256 hex characters) for --tp-id\n"
    "  version    print the library version\n"
    "\n"
    "`gannet COMMAND --help` lists a command's options. Logging: GANNET_LOG_LEVEL=debug|info|\n"
    "warning|error|off (default warning for the CLI).\n";

// `gannet serve` and `gannet quantize` are their own binaries, next to this one: gannet-serve
// links the HTTP and JSON libraries the CLI does not need, gannet-quantize the checkpoint
// reader and writer (the CLI itself uses the C ABI alone).
int ExecSibling(const char* command, const char* binary, const char* hint, char** argv) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string path = binary;
  if (n > 0) {
    self.resize(static_cast<size_t>(n));
    path = self.substr(0, self.rfind('/') + 1) + binary;
  }
  argv[0] = path.data();
  execv(path.c_str(), argv);
  std::fprintf(stderr, "gannet %s: cannot run %s: %s%s\n", command, path.c_str(),
               std::strerror(errno), hint);
  return 1;
}

int Dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fprintf(argc < 2 ? stderr : stdout, kHelp, gannet_version());
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "generate") return gannet_cli::GenerateCommand(argc, argv);
  if (cmd == "chat") return gannet_cli::ChatCommand(argc, argv);
  if (cmd == "info") return gannet_cli::InfoCommand(argc, argv);
  if (cmd == "serve") {
    return ExecSibling("serve", "gannet-serve",
                       " (it is built where Debian's libcpp-httplib-dev and nlohmann-json3-dev "
                       "are installed: tools/install_deps.sh)",
                       argv);
  }
  if (cmd == "quantize") return ExecSibling("quantize", "gannet-quantize", "", argv + 1);
  if (cmd == "tp-id") return gannet_cli::TpIdCommand(argc, argv);
  if (cmd == "tokenize") return gannet_cli::TokenizeCommand(argc, argv);
  if (cmd == "version" || cmd == "--version") {
    std::printf("gannet %s\n", gannet_version());
    return 0;
  }
  std::fprintf(stderr, "gannet: unknown command '%s'\n\n", cmd.c_str());
  std::fprintf(stderr, kHelp, gannet_version());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const char* level = std::getenv("GANNET_LOG_LEVEL");
  if (level == nullptr) {
    gannet_set_log_callback(nullptr, nullptr, GANNET_LOG_LEVEL_WARNING);
  } else if (std::strcmp(level, "debug") && std::strcmp(level, "info") &&
             std::strcmp(level, "warning") && std::strcmp(level, "warn") &&
             std::strcmp(level, "error") && std::strcmp(level, "off")) {
    std::fprintf(stderr,
                 "gannet: GANNET_LOG_LEVEL must be one of debug, info, warning, error, "
                 "off\n");
    return 2;
  }
  const int rc = Dispatch(argc, argv);
  // What was printed must have reached stdout: `gannet info DIR > /dev/full` is a failure.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "gannet: cannot write to standard output: %s\n", std::strerror(errno));
    return rc != 0 ? rc : 1;
  }
  return rc;
}
