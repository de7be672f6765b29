// The gannet CLI's subcommands. Each returns the process exit code: 0 success, 1 runtime
// failure, 2 usage error.
#pragma once

namespace gannet_cli {

int GenerateCommand(int argc, char** argv);
int ChatCommand(int argc, char** argv);
int InfoCommand(int argc, char** argv);
int TpIdCommand(int argc, char** argv);
int TokenizeCommand(int argc, char** argv);

}  // namespace gannet_cli
