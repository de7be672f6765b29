// The host's memory, as the kernel reports it: what a process can still allocate (MemAvailable,
// which counts reclaimable page cache) and the RAM in all. 0 when unknown.
#pragma once

#include <cstdint>

namespace gannet {

int64_t HostAvailableMemoryBytes();
int64_t HostTotalMemoryBytes();

}  // namespace gannet
