// gannet tp-id: the id of a new multi-process tensor-parallel group, for --tp-id.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "examples/cli/commands.h"
#include "gannet/gannet.h"

namespace gannet_cli {
namespace {

const char kUsage[] =
    "usage: gannet tp-id\n"
    "\n"
    "Prints the id of a new tensor-parallel group as 256 hex characters and a newline, for\n"
    "--tp-id of `gannet generate` and `gannet chat`: every rank's process (one per GPU, on one\n"
    "host or several) runs with --tp N --tp-id HEX, its own --tp-rank and its --device; rank 0\n"
    "takes the prompt, the others serve it until it exits.\n"
    "\n"
    "The id names the address where the group's ranks meet (NCCL's bootstrap). Set\n"
    "NCCL_COMM_ID=HOST:PORT (rank 0's host, a free port) for this command and for rank 0's\n"
    "process: rank 0 then listens there. Without it the address is one this process listened\n"
    "on, gone when it exits. Needs a build with NCCL.\n";

}  // namespace

int TpIdCommand(int argc, char** argv) {
  if (argc == 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h")) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "gannet tp-id: unexpected argument '%s'\n(try `gannet tp-id --help`)\n",
                 argv[2]);
    return 2;
  }
  gannet_tp_id_t id;
  const gannet_status_t st = gannet_tp_create_id(&id);
  if (st != GANNET_OK) {
    std::fprintf(stderr, "gannet tp-id: %s: %s\n", gannet_status_string(st),
                 gannet_last_error_message());
    return 1;
  }
  static const char kHex[] = "0123456789abcdef";
  std::string line;
  for (uint8_t b : id.bytes) {
    line += kHex[b >> 4];
    line += kHex[b & 15];
  }
  line += '\n';
  if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0) {
    std::fprintf(stderr, "gannet tp-id: cannot write to standard output\n");
    return 1;
  }
  if (std::getenv("NCCL_COMM_ID") == nullptr) {
    std::fprintf(stderr,
                 "gannet tp-id: note: NCCL_COMM_ID is not set, so the id names an address of this "
                 "process, which exits now; set NCCL_COMM_ID=HOST:PORT (rank 0's host) here and "
                 "for rank 0 (see `gannet tp-id --help`)\n");
  }
  return 0;
}

}  // namespace gannet_cli
