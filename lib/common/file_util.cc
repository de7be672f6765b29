#include "lib/common/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lib/common/status.h"

namespace gannet {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return DataLossError("error reading {}", path);
  return ss.str();
}

absl::Status WriteStringToFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot create {}: {}", path, std::strerror(errno));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) return InternalError("error writing {}", path);
  return absl::OkStatus();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace gannet
