// Whole-file reads and writes with errors that name the path.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gannet {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);
absl::Status WriteStringToFile(const std::string& path, std::string_view data);
bool FileExists(const std::string& path);

}  // namespace gannet
