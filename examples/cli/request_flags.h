// Flags shared by `gannet generate` and `gannet chat`: model, backend, limits and sampling, with
// every number range-checked, and how they fill the engine options and a gannet_request_t.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "examples/cli/args.h"
#include "examples/cli/session.h"
#include "gannet/gannet.h"

namespace gannet_cli {

std::vector<FlagSpec> CommonFlags();

// Strings and arrays a request points into; must outlive the request.
struct RequestStorage {
  std::vector<std::string> stop_strings;
  std::vector<const char*> stop_string_ptrs;
  std::vector<int32_t> stop_ids;
  std::vector<std::string> image_bytes;  // --image files
  std::vector<gannet_image_t> images;
};

// An image file's bytes the CLI reads at most (the library's own limit on encoded images).
inline constexpr size_t kMaxImageFileBytes = size_t{64} << 20;

// n image placeholders ("<|image|>" each), what a prompt writes for n images.
std::string ImagePlaceholders(size_t n);

// Fills engine options and the sampling and stop fields of a request from parsed flags. Returns
// false with args.error() set on a malformed or out-of-range value or a missing model.
bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* request,
                      RequestStorage* storage);

// The engine configuration the options ask for (strings point into `o`: keep it alive until the
// engine is created). One mapping for the CLI's commands and gannet serve.
gannet_engine_config_t EngineConfigOf(const EngineOptions& o);

// What `gannet NAME` prints for a bad command line: the error and where the help is. Returns 2,
// the exit code.
int UsageError(const char* name, const std::string& error);

// The start `gannet generate` and `gannet chat` share: argv (after the command word) parsed
// against CommonFlags() then the command's own flags, --help printed with `usage`, and the engine
// options and the request's common fields filled. Returns the exit code when the command ends
// here (0 after --help, 2 after a bad flag), nullopt to go on.
struct CommandStart {
  Args args;
  EngineOptions engine;
  gannet_request_t request = GANNET_REQUEST_INIT;
  RequestStorage storage;
};
std::optional<int> StartCommand(const char* name, const char* usage,
                                const std::vector<FlagSpec>& own_flags, int argc, char** argv,
                                CommandStart* start);

// "2,108,109": ids in [0, 2^31 - 1]; false on anything else.
bool ParseIds(const std::string& s, std::vector<int32_t>* out);

// The 256 hex characters of a tensor-parallel group id (either case); an empty string, or what
// is wrong with `hex`.
std::string ParseTpId(const std::string& hex, gannet_tp_id_t* id);

}  // namespace gannet_cli
