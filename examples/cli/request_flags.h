// Flags shared by `gannet generate` and `gannet chat`: model, backend and sampling options, and
// how they fill a gannet_request_t.
#pragma once

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
};

// Fills engine options and the sampling part of a request from parsed flags. Returns false with
// args.error() set on a malformed value.
bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* request,
                      RequestStorage* storage);

}  // namespace gannet_cli
