// Helpers shared by the libFuzzer targets of tests/fuzz (header-only, one copy per binary).
//
// - DataDir(): tests/data (compiled in; GANNET_TEST_DATA overrides it, as for the tests).
// - ScratchDir(): one private temporary folder per process, for targets whose code under test
//   only reads files (config.json, model.safetensors); /dev/shm when writable, so the per-input
//   writes stay in memory. Removed at exit.
// - Reader: consumes little-endian values from the front of the input, 0 past the end, so every
//   input is valid and seeds can be written by a short script (tests/fuzz/make_corpus.py).
// - Fail(): a property violation (not a sanitizer finding) aborts with a message, so libFuzzer
//   saves the input as a crash artifact.
// - QuietLogs(): the library logs go to a sink that formats and drops them (the formatting code
//   still runs at every level).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "lib/common/logging.h"

namespace gannet::fuzz {

inline std::string DataDir() {
  const char* env = std::getenv("GANNET_TEST_DATA");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(GANNET_FUZZ_DATA_DIR);
}

inline const std::string& ScratchDir() {
  // Heap-held (reachable from a static, so not a leak) so the exit handler never sees a
  // destroyed string.
  static const std::string* dir = [] {
    std::string base = "/dev/shm";
    if (::access(base.c_str(), W_OK) != 0) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string tmpl = base + "/gannet-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "fuzz: cannot create a scratch folder under %s\n", base.c_str());
      std::abort();
    }
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    });
    return new std::string(tmpl);
  }();
  return *dir;
}

// Writes `bytes` to `path`, then extends the file with zeros to `size` bytes when that is larger
// (ftruncate: a sparse file, nothing is written or allocated for the zeros).
inline void WriteFile(const std::string& path, std::string_view bytes, uint64_t size = 0) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  size_t done = 0;
  while (ok && done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    ok = w > 0;
    if (ok) done += static_cast<size_t>(w);
  }
  if (ok && size > bytes.size()) ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

[[noreturn]] inline void Fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz property violated: %s\n%.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

inline void QuietLogs() {
  SetLogLevel(LogLevel::kDebug);
  SetLogSink([](void*, int, const char*) {}, nullptr);
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  size_t remaining() const { return n_; }
  bool empty() const { return n_ == 0; }

  template <typename T>
  T Int() {
    T v{};
    const size_t k = sizeof(T) < n_ ? sizeof(T) : n_;
    // Little-endian: the bytes present fill the low end, the rest stay 0.
    uint64_t raw = 0;
    for (size_t i = 0; i < k; ++i) raw |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += k;
    n_ -= k;
    std::memcpy(&v, &raw, sizeof(T));
    return v;
  }
  uint8_t U8() { return Int<uint8_t>(); }
  uint16_t U16() { return Int<uint16_t>(); }
  uint32_t U32() { return Int<uint32_t>(); }
  int32_t I32() { return Int<int32_t>(); }
  int64_t I64() { return Int<int64_t>(); }
  uint64_t U64() { return Int<uint64_t>(); }
  float F32() {
    const uint32_t bits = U32();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  // A string of up to 65535 bytes: u16 length, then the bytes (cut at the end of the input).
  std::string Str() {
    size_t len = U16();
    return Bytes(len);
  }
  std::string Bytes(size_t len) {
    if (len > n_) len = n_;
    std::string s(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    n_ -= len;
    return s;
  }
  std::string Rest() { return Bytes(n_); }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace gannet::fuzz
