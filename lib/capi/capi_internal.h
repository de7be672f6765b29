// Shared by the extern "C" entries (lib/capi/*.cc): the handle types behind the opaque pointers,
// status mapping, the thread-local last error, the exception firewall and versioned-struct
// reading. Internal to libgannet.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gannet/gannet.h"
#include "lib/engine/engine.h"
#include "lib/model/config.h"
#include "lib/tokenizer/chat_format.h"
#include "lib/tokenizer/tokenizer.h"

struct gannet_tokenizer {
  std::unique_ptr<gannet::tokenizer::Tokenizer> owned;  // null for an engine's tokenizer
  const gannet::tokenizer::Tokenizer* tokenizer = nullptr;
  gannet::model::Variant variant = gannet::model::Variant::kDense31B;
  std::optional<gannet::tokenizer::ChatFormat> owned_chat;  // set with `owned`
  const gannet::tokenizer::ChatFormat* chat = nullptr;      // set with `tokenizer`
};

struct gannet_engine {
  std::unique_ptr<gannet::engine::Engine> engine;
  gannet_tokenizer tokenizer;  // a view of the engine's (tokenizer == nullptr without one)
  // Events handed out by the last poll, their C views and the pointers poll returns.
  std::vector<gannet::engine::Event> polled;
  std::vector<std::string> messages;  // escaped status messages of `polled`
  std::vector<gannet_event_t> views;
  std::vector<const gannet_event_t*> pointers;
};

namespace gannet::capi {

// Error messages handed out (last error, ERROR events) are escaped and at most this long.
inline constexpr size_t kMaxMessageBytes = 4096;

gannet_status_t ToStatus(const absl::Status& st);
gannet_status_t Fail(gannet_status_t code, std::string message);
gannet_status_t Fail(const absl::Status& st);

// Runs fn with the exception firewall: bad_alloc -> OUT_OF_MEMORY, anything else -> INTERNAL.
template <typename Fn>
gannet_status_t Guard(const char* where, Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(GANNET_ERR_OUT_OF_MEMORY, std::string(where) + ": out of memory");
  } catch (const std::exception& e) {
    return Fail(GANNET_ERR_INTERNAL, std::string(where) + ": " + e.what());
  } catch (...) {
    return Fail(GANNET_ERR_INTERNAL, std::string(where) + ": unknown exception");
  }
}

// The smallest struct_size a versioned input struct of the 0.2 ABI can have.
inline constexpr uint32_t kMinStructSize = 8;
inline constexpr uint32_t kMaxStructSize = 1u << 16;

// Reads a versioned input struct: copies what the caller's struct_size covers into a
// default-initialised current struct. False (with the error set) for sizes that cannot be ours.
// The size of every past version is a multiple of the struct's alignment (sizeof is), so a size
// that is not ends inside a field: a pointer would be read with its high bytes zeroed.
template <typename T>
bool ReadVersioned(const T* in, const T& defaults, T* out, const char* what) {
  *out = defaults;
  const uint32_t size = in->struct_size;
  if (size < kMinStructSize || size > kMaxStructSize || size % alignof(T) != 0) {
    Fail(GANNET_ERR_INVALID_ARGUMENT, std::string(what) + ".struct_size is " +
                                          std::to_string(size) +
                                          ": initialise the struct with its _INIT macro");
    return false;
  }
  std::memcpy(out, in, std::min<size_t>(size, sizeof(T)));
  out->struct_size = sizeof(T);
  return true;
}

// A flag of the ABI takes the values 0..max (a documented encoding): any other is an error naming
// it, never silently read as 0 or 1.
inline gannet_status_t CheckFlag(const char* what, int32_t value, int32_t max = 1) {
  if (value >= 0 && value <= max) return GANNET_OK;
  return Fail(GANNET_ERR_INVALID_ARGUMENT, std::string(what) + " is " + std::to_string(value) +
                                               "; it must be in [0, " + std::to_string(max) + "]");
}

// Output structs: the caller's struct_size says how much of `full` to write.
template <typename T>
gannet_status_t WriteVersioned(const T& full, T* out, const char* what) {
  if (out->struct_size < kMinStructSize || out->struct_size > kMaxStructSize) {
    return Fail(GANNET_ERR_INVALID_ARGUMENT, std::string(what) + ".struct_size is " +
                                                 std::to_string(out->struct_size) +
                                                 ": initialise the struct with its _INIT macro");
  }
  const uint32_t size = out->struct_size;
  std::memcpy(out, &full, std::min<size_t>(size, sizeof(T)));
  out->struct_size = size;
  return GANNET_OK;
}

inline std::string Str(const char* s) { return s ? std::string(s) : std::string(); }

// Copies s into a fixed char array, truncating (always NUL-terminated).
template <size_t N>
void CopyString(const std::string& s, char (&to)[N]) {
  const size_t n = std::min(s.size(), N - 1);
  std::memcpy(to, s.data(), n);
  to[n] = '\0';
}

// Reads the C request into the engine's input (shared by submit and gannet_request_check).
gannet_status_t ReadRequest(const gannet_request_t* request, engine::RequestInput* out);

}  // namespace gannet::capi
