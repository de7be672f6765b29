// Flags shared by `gannet generate` and `gannet chat`: model, backend, limits and sampling, with
// every number range-checked, and how they fill the engine options and a gannet_request_t.
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

// Fills engine options and the sampling and stop fields of a request from parsed flags. Returns
// false with args.error() set on a malformed or out-of-range value or a missing model.
bool ApplyCommonFlags(Args& args, EngineOptions* engine, gannet_request_t* request,
                      RequestStorage* storage);

// "2,108,109": ids in [0, 2^31 - 1]; false on anything else.
bool ParseIds(const std::string& s, std::vector<int32_t>* out);

// The 256 hex characters of a tensor-parallel group id (either case); an empty string, or what
// is wrong with `hex`.
std::string ParseTpId(const std::string& hex, gannet_tp_id_t* id);

}  // namespace gannet_cli
