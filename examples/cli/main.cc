// gannet: the command-line interface to the engine, built only on the public C ABI
// (include/gannet/gannet.h), like any other embedding program.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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
    "  tp-id      print a new tensor-parallel group id (256 hex characters) for --tp-id\n"
    "  version    print the library version\n"
    "\n"
    "`gannet COMMAND --help` lists a command's options. Logging: GANNET_LOG_LEVEL=debug|info|\n"
    "warning|error|off (default warning for the CLI).\n";

// `gannet serve` is its own binary (it links the HTTP and JSON libraries the CLI does not
// need): gannet-serve, next to this one.
int ExecServe(char** argv) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string path = "gannet-serve";
  if (n > 0) {
    self.resize(static_cast<size_t>(n));
    path = self.substr(0, self.rfind('/') + 1) + "gannet-serve";
  }
  argv[0] = path.data();
  execv(path.c_str(), argv);
  std::fprintf(stderr, "gannet serve: cannot run %s: %s (it is built where Debian's "
                       "libcpp-httplib-dev and nlohmann-json3-dev are installed: "
                       "tools/install_deps.sh)\n", path.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GANNET_LOG_LEVEL") == nullptr) {
    gannet_set_log_callback(nullptr, nullptr, GANNET_LOG_LEVEL_WARNING);
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fprintf(argc < 2 ? stderr : stdout, kHelp, gannet_version());
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "generate") return gannet_cli::GenerateCommand(argc, argv);
  if (cmd == "chat") return gannet_cli::ChatCommand(argc, argv);
  if (cmd == "info") return gannet_cli::InfoCommand(argc, argv);
  if (cmd == "serve") return ExecServe(argv);
  if (cmd == "tp-id") return gannet_cli::TpIdCommand(argc, argv);
  if (cmd == "version" || cmd == "--version") {
    std::printf("gannet %s\n", gannet_version());
    return 0;
  }
  std::fprintf(stderr, "gannet: unknown command '%s'\n\n", cmd.c_str());
  std::fprintf(stderr, kHelp, gannet_version());
  return 2;
}
