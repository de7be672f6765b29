// Whole-file reads and writes with errors that name the path.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gannet {

// Opens a regular file for reading and returns its descriptor (the caller closes it) and size:
// NotFound when it cannot be opened, InvalidArgument for a directory, FIFO, device or socket
// (never blocks on one; `what` names the file's role in that message: "config.json").
struct OpenFile {
  int fd;
  int64_t size;
};
absl::StatusOr<OpenFile> OpenRegularFile(const std::string& path, std::string_view what);

// Reads a regular file of at most max_bytes: NotFound when it cannot be opened, InvalidArgument
// for a directory, FIFO, device or socket (never blocks on one) or a file larger than max_bytes
// (`what` names the file's role in that message: "config.json").
absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes,
                                             std::string_view what);
absl::Status WriteStringToFile(const std::string& path, std::string_view data);
bool FileExists(const std::string& path);

}  // namespace gannet
