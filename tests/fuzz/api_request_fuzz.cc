// Fuzz target: the OpenAI request parser of gannet serve (examples/server/api_request.cc
// ParseApiRequest, FillEngineRequest): the HTTP server's untrusted input.
//
// Input: u8 endpoint (bit 0: /v1/completions, else /v1/chat/completions), then the request body
// (any bytes; the seeds are JSON bodies, the dictionary holds the field names).
//
// Expected: a parsed request or an error. Properties checked: an error is a 4xx with a message
// and its JSON renders; a parsed request has 1..kMaxChoices choices and fills an engine request
// per prompt and choice that gannet_request_check answers with OK or INVALID_ARGUMENT (what the
// server answers 400), never another status.
#include <cstddef>
#include <cstdint>
#include <string>

#include "examples/server/api_request.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gannet_server;
  if (size == 0) return 0;
  const Endpoint endpoint = (data[0] & 1) ? Endpoint::kCompletion : Endpoint::kChat;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto parsed = ParseApiRequest(endpoint, body);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    if (err->http_status < 400 || err->http_status > 499 || err->message.empty()) {
      gannet::fuzz::Fail("api_request_fuzz: an error without a 4xx status and a message");
    }
    if (err->Json().empty()) gannet::fuzz::Fail("api_request_fuzz: an error renders empty");
    return 0;
  }
  const ApiRequest& r = std::get<ApiRequest>(parsed);
  const size_t prompts = endpoint == Endpoint::kChat ? 1 : r.prompts.size();
  if (prompts == 0 || r.n < 1 || prompts * r.n > static_cast<size_t>(kMaxChoices)) {
    gannet::fuzz::Fail("api_request_fuzz: a parsed request without 1..kMaxChoices choices");
  }
  SamplingDefaults defaults;
  defaults.temperature = 1.0f;
  defaults.top_p = 0.95f;
  defaults.top_k = 64;
  for (size_t p = 0; p < prompts; ++p) {
    RequestStorage storage;
    gannet_request_t q;
    FillEngineRequest(r, defaults, p, r.n - 1, &storage, &q);
    const gannet_status_t st = gannet_request_check(&q, nullptr);
    if (st != GANNET_OK && st != GANNET_ERR_INVALID_ARGUMENT) {
      gannet::fuzz::Fail(
          "api_request_fuzz: gannet_request_check returned a status the server "
          "does not answer 400");
    }
  }
  return 0;
}
