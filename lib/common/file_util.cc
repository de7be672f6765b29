#include "lib/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "lib/common/status.h"

namespace gannet {

absl::StatusOr<OpenFile> OpenRegularFile(const std::string& path, std::string_view what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type check below refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return NotFoundError("cannot open {}: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return DataLossError("cannot stat {}: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return InvalidArgumentError("{} is {}, not a regular file ({})", path, kind, what);
  }
  return OpenFile{fd, static_cast<int64_t>(st.st_size)};
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes,
                                             std::string_view what) {
  GANNET_ASSIGN_OR_RETURN(const OpenFile file, OpenRegularFile(path, what));
  const int fd = file.fd;
  // Closed on every way out, the buffer's allocation throwing included.
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  if (file.size > max_bytes) {
    return InvalidArgumentError("{} has {} bytes, more than the {} bytes a {} may have", path,
                                file.size, max_bytes, what);
  }
  std::string out(static_cast<size_t>(file.size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return DataLossError("error reading {} (at byte {}): {}", path, done,
                           n == 0 ? "the file shrank" : std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return out;
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
