// Resident memory of the test process, for the tests that bound what a load keeps and peaks at
// (issue 56: tokenizer.json, weights held once). Linux /proc only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace gannet::testing {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 when absent.
inline int64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      return std::stoll(line.substr(field.size() + 1)) * 1024;
    }
  }
  return -1;
}

// Resets VmHWM to the current VmRSS (Linux >= 4.0), so a peak measures what follows.
inline bool ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace gannet::testing
