// An OpenAI-style error: the HTTP status and the JSON body
// {"error": {"message", "type", "param", "code"}} that OpenAI clients turn into exceptions.
#pragma once

#include <string>

namespace gannet_server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" = none)

  std::string Json() const;
};

inline ApiError BadRequest(std::string message, std::string param = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param)};
}

}  // namespace gannet_server
